"""skbnn NUTS vs NumPyro NUTS and nutpie on the same model, data and chain settings, in one run.

The sides alternate (skbnn, NumPyro, nutpie, nutpie low-rank, skbnn, ...) for ``--reps``
repetitions, so drifts in the machine's load hit all of them. Repetition 0 is cold: skbnn
starts from an empty numba cache (a new install), nutpie from an empty pytensor compile
directory (both nutpie sides compile the same model, so only the first of them in ``--sides``
compiles cold), and NumPyro compiles its kernels; repetition 1 repeats it warm with the same
seed; later repetitions use seeds 1, 2, ... Each fit prints a JSON line; each case ends with
a summary line per side (warm figures are medians over repetitions 1..) and the ratios
skbnn / peer for each peer.

Sides (``--sides``): ``skbnn``; ``skbnn_lowrank`` (``NUTS(metric="low_rank")``);
``numpyro`` (diagonal mass matrix); ``nutpie`` (a PyMC model
compiled with pytensor's numba backend, nutpie's default diagonal mass matrix adapted from
draws and gradients); ``nutpie_lowrank`` (the same with nutpie's low-rank adaptation). By
default all whose packages are installed (the ``bench`` extra installs them all).

Cases (``--case``), both on UCI split 0 with X standardized on the training split:

* ``boston``: 13-10-1 ReLU, N(0, 1) on every weight and bias, noise sd fixed at 0.5 on the
  standardized target, 3 chains x (1000 warm-up + 3000 draws), target_accept 0.9.
* ``concrete``: 8-50-1 ReLU, same prior, noise sd fixed at 0.3, 2 chains x (300 warm-up +
  300 draws), target_accept 0.8: the larger network of the UCI protocol.
* ``boston50``, ``concrete50``, ``wine50``, ``energy50``, ``yacht50``: the UCI protocol's
  network (50 ReLU units) on each shared set, the noise inferred, 4 chains x (300 warm-up
  + 300 draws), target_accept 0.8.

``--prior default`` gives every side skbnn's default prior, ``GaussianPrior()``: weights'
sd ``1 / sqrt(fan-in)``, biases' 1 (``unit``, the default here, is N(0, 1) on all).

``--noise inferred`` replaces the fixed sd by a Gamma(1, 1e-3) precision in all sides
(NumPyro and nutpie sample it jointly with the weights; skbnn integrates it out). ``--chains``,
``--warmup``, ``--draws`` and ``--hidden`` override the case's. Needs the ``bench`` extra::

    python benchmarks/compare_nuts.py --case boston concrete --reps 3
    python benchmarks/compare_nuts.py --case boston50 concrete50 wine50 yacht50 energy50 \
        --reps 1 --prior default --sides skbnn nutpie nutpie_lowrank numpyro

``--sides skbnn`` runs one side alone (no ratios); with ``--no-rescale-units`` it shows what
the ReLU units' scale moves do to the trajectories (``--reps 6``: seeds 0 to 4).

``--report`` prints doc/performance.md's table of results files without the peers: per
side, each of the last ``--runs`` Boston runs of skbnn against NumPyro (``--reps 6``)::

    python benchmarks/compare_nuts.py --runs 4 \\
        --report benchmarks/results/compare_nuts_issue22.jsonl

``--table peers`` prints doc/samplers.md's table of each side's first fit per case (one
line per case and side: ``--reps 1``), ``--table seeds`` its median and range over the
warm seeds::

    python benchmarks/compare_nuts.py --table peers \\
        --report benchmarks/results/compare_nuts_metric.jsonl
    python benchmarks/compare_nuts.py --table seeds \\
        --report benchmarks/results/compare_nuts_seeds.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))
from _uci import add_report_argument  # noqa: E402

CASES = {
    "boston": dict(dataset="bostonHousing", hidden=10, noise_std=0.5, chains=3, warmup=1000,
                   draws=3000, target_accept=0.9),
    "concrete": dict(dataset="concrete", hidden=50, noise_std=0.3, chains=2, warmup=300,
                     draws=300, target_accept=0.8),
}  # fmt: skip
# the UCI protocol's network (50 ReLU units) with its noise inferred, on each shared set
for _name, _dataset in [("boston50", "bostonHousing"), ("concrete50", "concrete"),
                        ("wine50", "wine-quality-red"), ("energy50", "energy"),
                        ("yacht50", "yacht")]:  # fmt: skip
    CASES[_name] = dict(dataset=_dataset, hidden=50, noise_std=None, chains=4, warmup=300,
                        draws=300, target_accept=0.8)  # fmt: skip
# the packages each side needs beyond skbnn's own
SIDES = {"skbnn": (), "skbnn_lowrank": (), "numpyro": ("numpyro", "jax"),
         "nutpie": ("nutpie", "pymc"), "nutpie_lowrank": ("nutpie", "pymc")}  # fmt: skip
# the keys of a peer's result that go into its JSON line as they are
PEER_KEYS = ("n_grad_evals", "leapfrog_per_draw", "max_tree_depth_hits", "divergences",
             "compile_time")  # fmt: skip


def run_skbnn(
    case: dict, data, seed: int, n_jobs: int, rescale_units: bool = True,
    metric: str = "diagonal_grad",
) -> dict:  # fmt: skip
    from skbnn import BayesianMLPRegressor
    from skbnn.methods import NUTS
    from skbnn.model_selection import log_predictive_scorer
    from skbnn.priors import GaussianPrior

    X_train, y_train, X_test, y_test = data
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(case["hidden"],),
        activation="relu",
        method=NUTS(
            n_chains=case["chains"], n_warmup=case["warmup"],
            target_accept=case["target_accept"], max_tree_depth=case["max_tree_depth"],
            rescale_units=rescale_units, metric=metric,
        ),
        prior=GaussianPrior(std=1.0, fan_in_scaling=case["fan_in"]),
        n_samples=case["chains"] * case["draws"],
        noise_std=case["noise_std"],  # on the standardized scale, as in NumPyro
        random_state=seed,
        n_jobs=n_jobs,
    )  # fmt: skip
    start = time.perf_counter()
    reg.fit(X_train, y_train)
    wall = time.perf_counter() - start
    d = reg.diagnostics_
    return {
        "wall_time": wall,
        "compile_time": d["compile_time"],
        "n_grad_evals": d["n_grad_evals"],
        "leapfrog_per_draw": float(np.mean(d["mean_n_leapfrog"])),
        "max_tree_depth_hits": int(np.sum(d["max_tree_depth_hits"])),
        "divergences": d["divergences"],
        "ess_bulk_loglik": float(d["ess_bulk_loglik"]),
        "rhat_loglik": float(d["rhat_loglik"]),
        "max_rhat": float(max(d["rhat_loglik"], np.max(d["rhat_outputs"]))),
        "test_rmse": float(np.sqrt(np.mean((reg.predict(X_test) - y_test) ** 2))),
        "test_ll": log_predictive_scorer(reg, X_test, y_test),
        "noise_sd_y_units": float(reg.noise_std_),
    }


def run_numpyro(case: dict, data, seed: int) -> dict:
    import numpyro_nuts

    X_train, y_train, X_test, y_test = data
    start = time.perf_counter()
    result = numpyro_nuts.fit(
        X_train, y_train, (case["hidden"],), case["noise_std"], case["chains"],
        case["warmup"], case["draws"], case["target_accept"], case["max_tree_depth"],
        seed=seed, fan_in=case["fan_in"],
    )  # fmt: skip
    wall = time.perf_counter() - start
    out = {k: result[k] for k in PEER_KEYS}
    out["wall_time"] = wall
    out.update(numpyro_nuts.evaluate(result, X_train, y_train, X_test, y_test))
    return out


def run_nutpie(case: dict, data, seed: int, adaptation: str) -> dict:
    import numpyro_nuts  # its evaluate: numpy and scipy only
    import nutpie_nuts

    X_train, y_train, X_test, y_test = data
    start = time.perf_counter()
    result = nutpie_nuts.fit(
        X_train, y_train, (case["hidden"],), case["noise_std"], case["chains"],
        case["warmup"], case["draws"], case["target_accept"], case["max_tree_depth"],
        seed=seed, adaptation=adaptation, fan_in=case["fan_in"],
    )  # fmt: skip
    wall = time.perf_counter() - start
    out = {k: result[k] for k in (*PEER_KEYS, "maxdepth_reached", "step_size", "backend")}
    out["wall_time"] = wall
    # the same code as the NumPyro side's, so the sides are measured alike
    out.update(numpyro_nuts.evaluate(result, X_train, y_train, X_test, y_test))
    return out


def run_side(side: str, case: dict, data, seed: int, args) -> dict:
    """One fit of ``side``: its JSON record without the derived rates."""
    if side in ("skbnn", "skbnn_lowrank"):
        metric = "low_rank" if side == "skbnn_lowrank" else "diagonal_grad"
        return run_skbnn(case, data, seed, args.n_jobs, not args.no_rescale_units, metric)
    if side == "numpyro":
        return run_numpyro(case, data, seed)
    return run_nutpie(case, data, seed, "low_rank" if side == "nutpie_lowrank" else "diag")


def installed_sides() -> list[str]:
    """The sides whose packages are all importable, in the order they alternate."""
    return [side for side, pkgs in SIDES.items() if all(find_spec(p) for p in pkgs)]


def summarize(name: str, side: str, runs: list[dict]) -> dict:
    cold, warm = runs[0], runs[1:]
    compile_time = cold["compile_time"]
    med = lambda key: float(np.median([r[key] for r in warm])) if warm else None  # noqa: E731
    return {
        "summary": True,
        "case": name,
        "side": side,
        "cold_wall_time": cold["wall_time"],
        "compile_time": compile_time,
        "warm_wall_time": med("wall_time"),
        "grad_evals_per_s": med("grad_evals_per_s"),
        "ess_bulk_loglik": med("ess_bulk_loglik"),
        "ess_per_s": med("ess_per_s"),
        "ess_per_s_sampling": med("ess_per_s_sampling"),
        "ess_per_1k_grad": med("ess_per_1k_grad"),
        "cold_ess_per_1k_grad": cold["ess_per_1k_grad"],
        "cold_leapfrog_per_draw": cold["leapfrog_per_draw"],
        "cold_max_rhat": cold["max_rhat"],
        "cold_max_tree_depth_hits": cold["max_tree_depth_hits"],
        "cold_sampling_time": cold["wall_time"] - cold["compile_time"],
        "warm_compile_time": med("compile_time"),
        "cold_ess_per_s": cold["ess_per_s"],
        "leapfrog_per_draw": med("leapfrog_per_draw"),
        "max_rhat": med("max_rhat"),
        "test_rmse": med("test_rmse"),
        "test_ll": med("test_ll"),
        "n_warm_reps": len(warm),
    }


def _ratios(a: dict, b: dict):
    """``ratio(key)``: a[key] / b[key], or None where either is missing."""
    return lambda key: a[key] / b[key] if a[key] and b[key] else None


def _runs(lines: list[dict]) -> list[list[dict]]:
    """The lines of each run: a run's fits, then its summary lines."""
    runs, current = [], []
    for r in lines:
        if current and current[-1].get("summary") and not r.get("summary"):
            runs.append(current)
            current = []
        current.append(r)
    return runs + [current] if current else runs


def _row(cells) -> str:
    return "|" + "|".join(f" {c} " if c != "" else " " for c in cells) + "|"


def report(paths, runs: int = 4, table: str = "runs") -> str:
    """doc/performance.md's table (``table="runs"``): per side, the last ``runs`` Boston
    runs in ``paths`` of skbnn against NumPyro with five warm seeds; ratios are skbnn's
    over NumPyro's in the same run. ``"peers"`` and ``"seeds"``: doc/samplers.md's
    tables (``report_peers``, ``report_seeds``)."""
    paths = [paths] if isinstance(paths, (str, Path)) else paths
    if table != "runs":
        return {"peers": report_peers, "seeds": report_seeds}[table](paths)
    lines = [json.loads(line) for path in paths for line in Path(path).read_text().splitlines()]
    chosen = []
    for run in _runs(lines):
        fits = [r for r in run if r["case"] == "boston" and not r.get("summary")]
        warm = {side: [r for r in fits if r["side"] == side and not r["cold"]]
                for side in ("skbnn", "numpyro")}  # fmt: skip
        if all(len(w) == 5 for w in warm.values()):
            build = next((r["numba_cpu_name"] for r in run if "numba_cpu_name" in r), "-")
            cold = {r["side"]: r for r in fits if r["cold"]}
            chosen.append((build, warm, cold))
    draws = {f["chains"] * f["draws"] for _, warm, _ in chosen for f in warm["skbnn"]}.pop()
    out = [
        "| run | build | side | bulk ESS / s warm, seeds 0-4 | median | ratio "
        "| cold, seed 0: wall (compiling) | cold ESS / s ratio "
        "| gradient evaluations / s, median | leapfrog steps per draw, mean "
        f"| draws at the depth cap (of {draws}), mean |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for number, (build, warm, cold) in enumerate(chosen[-runs:], 1):
        median = {side: np.median([r["ess_per_s"] for r in w]) for side, w in warm.items()}
        grads = {side: np.median([r["grad_evals_per_s"] for r in w]) for side, w in warm.items()}
        for side, label in (("skbnn", "skbnn"), ("numpyro", "NumPyro")):
            w, c, ours = warm[side], cold[side], side == "skbnn"
            cells = [
                number if ours else "",
                build if ours else "",
                label,
                ", ".join(f"{r['ess_per_s']:.1f}" for r in sorted(w, key=lambda r: r["seed"])),
                f"{median[side]:.1f}",
                f"**{median['skbnn'] / median['numpyro']:.1f}x**" if ours else "",
                f"{c['wall_time']:.1f} s ({c['compile_time']:.1f} s)",
                f"**{cold['skbnn']['ess_per_s'] / cold['numpyro']['ess_per_s']:.1f}x**"
                if ours
                else "",
                f"{grads[side] / 1e3:.0f}k"
                + (f" ({grads['skbnn'] / grads['numpyro']:.1f}x)" if ours else ""),
                f"{np.mean([r['leapfrog_per_draw'] for r in w]):.0f}",
                f"{np.mean([r['max_tree_depth_hits'] for r in w]):.0f}",
            ]
            out.append(_row(cells))
    return "\n".join(out) + "\n"


#: the order and labels of the sides in doc/samplers.md's tables, one fit and many seeds
PEER_LABELS = {"skbnn": "skbnn NUTS", "nutpie": "nutpie, diagonal",
               "nutpie_lowrank": "nutpie, low-rank", "numpyro": "NumPyro NUTS"}  # fmt: skip
SEED_LABELS = {"skbnn": "skbnn", "nutpie": "nutpie, diagonal", "numpyro": "NumPyro"}


def _cases(lines: list[dict], labels: dict) -> list[tuple[str, str, list[dict]]]:
    """``(dataset, side, fits)`` per case in the order the file ran them, the sides in
    ``labels``'s order; a case's name without its width (``boston50`` -> ``boston``)."""
    fits = [r for r in lines if not r.get("summary")]
    return [(case.rstrip("0123456789"), side, [r for r in fits if r["case"] == case
                                             and r["side"] == side])
            for case in dict.fromkeys(r["case"] for r in fits) for side in labels
            if any(r["case"] == case and r["side"] == side for r in fits)]  # fmt: skip


def report_peers(paths) -> str:
    """doc/samplers.md's table of skbnn against nutpie and NumPyro: one row per case and
    side, the first fit of each (``--reps 1``: cold, compilation included in the wall
    time, excluded from ESS/s)."""
    lines = [json.loads(line) for path in paths for line in Path(path).read_text().splitlines()]
    out = ["| dataset | sampler | steps per draw | draws at the cap | bulk ESS | ESS per 1k "
           "gradients | ESS/s | max R-hat | wall (compile) |",
           "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for dataset, side, (r, *_) in _cases(lines, PEER_LABELS):
        cells = [dataset, PEER_LABELS[side], f"{r['leapfrog_per_draw']:.0f}",
                 f"{r['max_tree_depth_hits']} of {r['chains'] * r['draws']}",
                 f"{r['ess_bulk_loglik']:.0f}", f"{r['ess_per_1k_grad']:.3f}",
                 f"{r['ess_per_s_sampling']:.2f}", f"{r['max_rhat']:.3f}",
                 f"{r['wall_time']:.0f} s ({r['compile_time']:.0f} s)"]  # fmt: skip
        out.append(_row(cells))
    return "\n".join(out) + "\n"


def report_seeds(paths) -> str:
    """doc/samplers.md's table of ESS per gradient over seeds: per case and side, the warm
    fits (repetition 0 is seed 0 cold, which repetition 1 repeats)."""
    lines = [json.loads(line) for path in paths for line in Path(path).read_text().splitlines()]
    out = ["| dataset | sampler | seeds | median | range | steps per draw (median) | max R-hat |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for dataset, side, fits in _cases(lines, SEED_LABELS):
        warm = [r for r in fits if not r["cold"]]
        ess = [r["ess_per_1k_grad"] for r in warm]
        cells = [dataset, SEED_LABELS[side], len(warm), f"{np.median(ess):.3f}",
                 f"{min(ess):.3f}-{max(ess):.3f}",
                 f"{np.median([r['leapfrog_per_draw'] for r in warm]):.0f}",
                 f"{max(r['max_rhat'] for r in warm):.3f}"]  # fmt: skip
        out.append(_row(cells))
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", choices=sorted(CASES), default=["boston", "concrete"])
    parser.add_argument("--reps", type=int, default=3, help="one cold, then warm ones")
    parser.add_argument("--noise", choices=["fixed", "inferred"], default="fixed")
    parser.add_argument(
        "--prior", choices=["unit", "default"], default="unit",
        help="unit: N(0, 1) on every weight and bias; default: skbnn's GaussianPrior() "
        "(weights' sd 1 / sqrt(fan-in))",
    )  # fmt: skip
    parser.add_argument("--chains", type=int, default=None, help="override the case's")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--hidden", type=int, default=None, help="hidden units; the case's")
    parser.add_argument("--max-tree-depth", type=int, default=10)
    parser.add_argument("--n-jobs", type=int, default=2, help="skbnn threads")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--keep-cache", action="store_true", help="skbnn: use numba's cache")
    parser.add_argument(
        "--sides",
        nargs="+",
        choices=list(SIDES),
        default=None,
        help="run only these (ratios against skbnn if it runs); default: all installed",
    )
    parser.add_argument(
        "--no-rescale-units",
        action="store_true",
        help="skbnn: NUTS(rescale_units=False), no ReLU scale moves",
    )
    add_report_argument(parser, "doc/performance.md")
    parser.add_argument("--runs", type=int, default=4, help="the report's last RUNS runs")
    parser.add_argument("--table", choices=("runs", "peers", "seeds"), default="runs",
                        help="--report's table: doc/performance.md's runs, or doc/samplers.md's "
                        "first fit of each side or its warm seeds")  # fmt: skip
    args = parser.parse_args()
    if args.report:
        print(report(args.report, args.runs, args.table), end="")
        return
    if args.reps < 1:
        parser.error("--reps must be at least 1 (the cold repetition; warm ones follow)")
    if args.sides is None:
        args.sides = installed_sides()
        missing = [side for side in SIDES if side not in args.sides]
        if missing:
            print(f"skipping {', '.join(missing)}: not installed (the bench extra)",
                  file=sys.stderr)  # fmt: skip
    nutpie_sides = {"nutpie", "nutpie_lowrank"} & set(args.sides)
    from _uci import (
        emitter,
        fresh_numba_cache,
        load_split,
        machine,
        standardize,
    )

    if not args.keep_cache:
        fresh_numba_cache()
        if nutpie_sides:  # pytensor keeps its numba cache in its own folder
            from nutpie_nuts import fresh_pytensor_cache

            fresh_pytensor_cache()

    cases = {}
    for name in args.case:
        case = dict(CASES[name], max_tree_depth=args.max_tree_depth,
                    fan_in=args.prior == "default")  # fmt: skip
        for key in ("chains", "warmup", "draws", "hidden"):
            if getattr(args, key) is not None:
                case[key] = getattr(args, key)
        if args.noise == "inferred":
            case["noise_std"] = None
        cases[name] = case
    import skbnn

    versions = {"skbnn": skbnn.__version__}
    if "numpyro" in args.sides:  # the skbnn side alone runs without the bench extra
        import numpyro_nuts

        numpyro_nuts.setup_jax(max(c["chains"] for c in cases.values()))
        import jax
        import numpyro

        versions.update(numpyro=numpyro.__version__, jax=jax.__version__)
    if nutpie_sides:
        # imported here so that the first fit's times leave the imports out, as for jax
        from nutpie_nuts import import_pymc

        pymc = import_pymc()
        import nutpie
        import pytensor

        versions.update(nutpie=nutpie.__version__, pymc=pymc.__version__,
                        pytensor=pytensor.__version__)  # fmt: skip
    command = "python benchmarks/compare_nuts.py " + " ".join(sys.argv[1:])

    emit = emitter(args.out)

    for name, case in cases.items():
        X_train, y_train, X_test, y_test = load_split(case["dataset"], 0, args.data_dir)
        X_train, X_test = standardize(X_train, X_test)
        data = (X_train, y_train, X_test, y_test)
        runs = {side: [] for side in args.sides}
        for rep in range(args.reps):
            seed = max(rep - 1, 0)
            for side in args.sides:
                r = run_side(side, case, data, seed, args)
                compile_time = r["compile_time"]
                r["grad_evals_per_s"] = r["n_grad_evals"] / (r["wall_time"] - compile_time)
                r["ess_per_s"] = r["ess_bulk_loglik"] / r["wall_time"]
                r["ess_per_s_sampling"] = r["ess_bulk_loglik"] / (r["wall_time"] - compile_time)
                r["ess_per_1k_grad"] = 1000 * r["ess_bulk_loglik"] / r["n_grad_evals"]
                runs[side].append(r)
                emit({"case": name, "side": side, "rep": rep, "seed": seed,
                      "cold": rep == 0, "rescale_units": not args.no_rescale_units, **case,
                      **r})  # fmt: skip
        summaries = {side: summarize(name, side, rs) for side, rs in runs.items()}
        for s in summaries.values():
            emit({**s, **case, **versions, **machine(), "command": command})
        if "skbnn" not in summaries:
            continue
        for peer in summaries:
            if peer == "skbnn":
                continue
            ratio = _ratios(summaries["skbnn"], summaries[peer])
            emit({
                "summary": True, "case": name, "side": f"skbnn / {peer}",
                "warm_ess_per_s": ratio("ess_per_s"), "cold_ess_per_s": ratio("cold_ess_per_s"),
                "ess_per_s_sampling": ratio("ess_per_s_sampling"),
                "warm_wall_time": ratio("warm_wall_time"),
                "cold_wall_time": ratio("cold_wall_time"),
                "grad_evals_per_s": ratio("grad_evals_per_s"),
            })  # fmt: skip


if __name__ == "__main__":
    main()
