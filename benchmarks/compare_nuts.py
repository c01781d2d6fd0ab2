"""skbnn NUTS vs NumPyro NUTS on the same model, data and chain settings, in one run.

The two sides alternate (skbnn, NumPyro, skbnn, ...) for ``--reps`` repetitions, so drifts in
the machine's load hit both. Repetition 0 is cold: skbnn starts from an empty numba cache (a
new install) and NumPyro compiles its kernels; repetition 1 repeats it warm with the same seed,
so NumPyro's compile time is the difference of the two; later repetitions use seeds 1, 2, ...
Each fit prints a JSON line; each case ends with a summary line per side (warm figures are
medians over repetitions 1..) and the ratios skbnn / NumPyro.

Cases (``--case``), both on UCI split 0 with X standardized on the training split:

* ``boston``: 13-10-1 ReLU, N(0, 1) on every weight and bias, noise sd fixed at 0.5 on the
  standardized target, 3 chains x (1000 warm-up + 3000 draws), target_accept 0.9.
* ``concrete``: 8-50-1 ReLU, same prior, noise sd fixed at 0.3, 2 chains x (300 warm-up +
  300 draws), target_accept 0.8: the larger network of the UCI protocol.

``--noise inferred`` replaces the fixed sd by a Gamma(1, 1e-3) precision in both (NumPyro
samples it jointly with the weights; skbnn integrates it out). Needs the ``bench`` extra::

    python benchmarks/compare_nuts.py --case boston concrete --reps 3

``--sides skbnn`` runs one side alone (no ratios); with ``--no-rescale-units`` it shows what
the ReLU units' scale moves do to the trajectories (``--reps 6``: seeds 0 to 4).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))

CASES = {
    "boston": dict(dataset="bostonHousing", hidden=10, noise_std=0.5, chains=3, warmup=1000,
                   draws=3000, target_accept=0.9),
    "concrete": dict(dataset="concrete", hidden=50, noise_std=0.3, chains=2, warmup=300,
                     draws=300, target_accept=0.8),
}  # fmt: skip


def run_skbnn(case: dict, data, seed: int, n_jobs: int, rescale_units: bool = True) -> dict:
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
            rescale_units=rescale_units,
        ),
        prior=GaussianPrior(std=1.0, fan_in_scaling=False),
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
        seed=seed,
    )  # fmt: skip
    wall = time.perf_counter() - start
    out = {k: result[k] for k in ("n_grad_evals", "leapfrog_per_draw", "max_tree_depth_hits",
                                  "divergences", "compile_time")}  # fmt: skip
    out["wall_time"] = wall
    out.update(numpyro_nuts.evaluate(result, X_train, y_train, X_test, y_test))
    return out


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", choices=sorted(CASES), default=["boston", "concrete"])
    parser.add_argument("--reps", type=int, default=3, help="at least 2 (one cold, one warm)")
    parser.add_argument("--noise", choices=["fixed", "inferred"], default="fixed")
    parser.add_argument("--chains", type=int, default=None, help="override the case's")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--max-tree-depth", type=int, default=10)
    parser.add_argument("--n-jobs", type=int, default=2, help="skbnn threads")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--keep-cache", action="store_true", help="skbnn: use numba's cache")
    parser.add_argument(
        "--sides",
        nargs="+",
        choices=["skbnn", "numpyro"],
        default=["skbnn", "numpyro"],
        help="run only these (no ratios unless both)",
    )
    parser.add_argument(
        "--no-rescale-units",
        action="store_true",
        help="skbnn: NUTS(rescale_units=False), no ReLU scale moves",
    )
    args = parser.parse_args()
    if args.reps < 2:
        parser.error("--reps must be at least 2: one cold and one warm repetition")
    from _uci import emitter, fresh_numba_cache, load_split, machine, standardize

    if not args.keep_cache:
        fresh_numba_cache()

    cases = {}
    for name in args.case:
        case = dict(CASES[name], max_tree_depth=args.max_tree_depth)
        for key in ("chains", "warmup", "draws"):
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
                if side == "skbnn":
                    r = run_skbnn(case, data, seed, args.n_jobs, not args.no_rescale_units)
                else:
                    r = run_numpyro(case, data, seed)
                compile_time = r["compile_time"]
                r["grad_evals_per_s"] = r["n_grad_evals"] / (r["wall_time"] - compile_time)
                r["ess_per_s"] = r["ess_bulk_loglik"] / r["wall_time"]
                r["ess_per_s_sampling"] = r["ess_bulk_loglik"] / (r["wall_time"] - compile_time)
                runs[side].append(r)
                emit({"case": name, "side": side, "rep": rep, "seed": seed,
                      "cold": rep == 0, "rescale_units": not args.no_rescale_units, **case,
                      **r})  # fmt: skip
        summaries = {side: summarize(name, side, rs) for side, rs in runs.items()}
        for s in summaries.values():
            emit({**s, **case, **versions, **machine(), "command": command})
        if len(summaries) < 2:
            continue
        ratio = _ratios(summaries["skbnn"], summaries["numpyro"])
        emit({
            "summary": True, "case": name, "side": "skbnn / numpyro",
            "warm_ess_per_s": ratio("ess_per_s"), "cold_ess_per_s": ratio("cold_ess_per_s"),
            "ess_per_s_sampling": ratio("ess_per_s_sampling"),
            "warm_wall_time": ratio("warm_wall_time"), "cold_wall_time": ratio("cold_wall_time"),
            "grad_evals_per_s": ratio("grad_evals_per_s"),
        })  # fmt: skip


if __name__ == "__main__":
    main()
