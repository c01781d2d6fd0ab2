"""The UCI regression protocol of Hernandez-Lobato & Adams (2015) for any skbnn method.

Per split: standardize X with the training split's mean and sd (constant columns are only
centred), fit ``BayesianMLPRegressor`` (ReLU units, as in the protocol, unless
``--activation`` says otherwise) on the training split, and report test RMSE and test
log-likelihood (mean over test points of the log posterior predictive density, the mixture
over posterior draws with the noise included), both in the target's original units, with the
fit time, the coverage of the 90 % predictive interval and the method's scalar diagnostics.
Prints one JSON line per split, then a summary line with mean +- standard error over the
splits; ``--out`` appends the same lines to a file.
Uses only skbnn's public API. Usage::

    python benchmarks/uci.py --dataset yacht --method nuts --splits 0-4 \\
        --out benchmarks/results/uci_nuts.jsonl
    python benchmarks/uci.py --dataset concrete \\
        --method '{"name": "nuts", "n_chains": 4, "n_warmup": 300}' --n-samples 800

``--method`` is a name from ``skbnn.methods.METHODS`` or a JSON object with ``"name"`` and
the method's parameters; ``--params`` passes further estimator parameters as JSON (e.g.
``'{"noise_std": 0.5, "prior": {"name": "gaussian", "std": 1.0}}'``).

``--report`` prints a doc/optimization.md table of results files (the latest summary of
each dataset), without a fit: ``--table vi`` the VI column beside Graves's published VI,
``--table ll`` and ``--table rmse`` one column per file (method) beside the published Deep
Ensembles::

    python benchmarks/uci.py --report benchmarks/results/uci_vi.jsonl
    python benchmarks/uci.py --table ll --report benchmarks/results/uci_ensemble.jsonl \\
        benchmarks/results/uci_rms.jsonl benchmarks/results/uci_swag.jsonl

``--table converged`` (one row per dataset) and ``--table converged-splits`` (one per
split) print doc/samplers.md's tables of NUTS sampling until converged: the first file
holds those fits, the second the plain NUTS runs of the same splits::

    python benchmarks/uci.py --table converged --report \\
        benchmarks/results/uci_nuts_converged600.jsonl benchmarks/results/uci_nuts.jsonl

``--table metric`` prints one row per NUTS fit of a file with its ``metric``, step sizes
and ESS per gradient (doc/samplers.md's table of the metrics)::

    python benchmarks/uci.py --table metric --report benchmarks/results/nuts_metric.jsonl

``--table ll-time`` prints one column per file (method): the test log-likelihood over splits
0-4 (mean +- standard error) with the mean fit time, as doc/samplers.md compares SGHMC::

    python benchmarks/uci.py --table ll-time --report benchmarks/results/uci_sghmc_map.jsonl \\
        benchmarks/results/uci_sghmc.jsonl benchmarks/results/uci_ensemble_defaults.jsonl \\
        benchmarks/results/uci_nuts.jsonl

``--table init-map``, ``many-chains`` and ``friedman-advice`` print doc/samplers.md's
tables of the results of ``benchmarks/init_map.py``, ``many_chains.py`` and
``friedman_advice.py`` (NUTS on the UCI splits and on ``make_friedman1``)::

    python benchmarks/uci.py --table init-map --report benchmarks/results/init_map.jsonl
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import load_split, machine, n_hidden, read_results, split_ids, standardize  # noqa: E402


def parse_splits(text: str, available: list[int]) -> list[int]:
    """``"all"``, ``"3"``, ``"0-4"`` or ``"0,2,5"`` (ranges inclusive) -> split numbers."""
    if text == "all":
        return available
    chosen: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        chosen.extend(range(int(lo), int(hi or lo) + 1))
    missing = sorted(set(chosen) - set(available))
    if missing:
        raise SystemExit(f"splits {missing} do not exist (available: {available})")
    return chosen


def _from_spec(spec, registry: dict, what: str):
    """A name or ``{"name": ..., **params}`` -> an instance from ``registry``."""
    if isinstance(spec, str):
        spec = json.loads(spec) if spec.lstrip().startswith("{") else {"name": spec}
    params = dict(spec)
    name = params.pop("name", None)
    if name not in registry:
        raise SystemExit(f"unknown {what} {name!r}; choose from {sorted(registry)}")
    return registry[name](**params), {"name": name, **params}


def build_estimator(args, hidden: tuple[int, ...]):
    """The estimator for one split, and a JSON-able description of its settings."""
    from skbnn import BayesianMLPRegressor
    from skbnn.methods import METHODS
    from skbnn.priors import PRIORS

    method, method_desc = _from_spec(args.method, METHODS, "method")
    params = json.loads(args.params) if args.params else {}
    prior_desc = params.get("prior", "default")
    if isinstance(params.get("prior"), dict):
        params["prior"], prior_desc = _from_spec(params["prior"], PRIORS, "prior")
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=hidden,
        activation=args.activation,
        method=method,
        n_samples=args.n_samples,
        random_state=args.seed,
        n_jobs=args.n_jobs,
        **params,
    )
    desc = {k: v for k, v in params.items() if k != "prior"}
    return reg, {"method": method_desc, "prior": prior_desc, **desc}


def summarize_diagnostics(diag: dict) -> dict:
    """The scalars and short per-chain arrays of ``diagnostics_`` (traces and matrices dropped)."""
    out = {}
    for key, value in diag.items():
        if isinstance(value, (bool, int, float, str, np.integer, np.floating)):
            out[key] = value.item() if hasattr(value, "item") else value
        elif isinstance(value, np.ndarray) and value.ndim == 1 and value.size <= 16:
            out[key] = value.tolist()
    return out


def _mean_se(values: list[float]) -> tuple[float, float | None]:
    a = np.asarray(values, dtype=float)
    se = float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else None
    return float(a.mean()), se


def run(args) -> list[dict]:
    from sklearn.exceptions import ConvergenceWarning

    from skbnn import __version__
    from skbnn.model_selection import log_predictive_scorer

    splits = parse_splits(args.splits, split_ids(args.dataset, args.data_dir))
    if args.hidden is not None:
        hidden = tuple(int(h) for h in args.hidden.split(",") if h.strip())
    else:
        hidden = (n_hidden(args.dataset, args.data_dir) or 50,)
    common = {
        "benchmark": "uci",
        "dataset": args.dataset,
        "hidden": list(hidden),
        "activation": args.activation,
        "n_samples": args.n_samples,
        "seed": args.seed,
        "n_jobs": args.n_jobs,
        "skbnn": __version__,
        "command": "python " + shlex.join(["benchmarks/uci.py", *args.argv]),
        **machine(),
    }
    out = open(args.out, "a") if args.out else None  # noqa: SIM115
    records = []
    try:
        for split in splits:
            X_train, y_train, X_test, y_test = load_split(args.dataset, split, args.data_dir)
            X_train, X_test = standardize(X_train, X_test)
            reg, settings = build_estimator(args, hidden)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                start = time.perf_counter()
                reg.fit(X_train, y_train)
                fit_time = time.perf_counter() - start
            rmse = float(np.sqrt(np.mean((reg.predict(X_test) - y_test) ** 2)))
            low, high = reg.predict_interval(X_test, coverage=0.9)
            record = {
                **common,
                **settings,
                "split": split,
                "n_train": len(y_train),
                "n_test": len(y_test),
                "rmse": rmse,
                "test_ll": log_predictive_scorer(reg, X_test, y_test),
                # calibration: the share of test targets inside the 90 % predictive interval
                "coverage_90": float(np.mean((y_test >= low) & (y_test <= high))),
                "fit_time": fit_time,
                "noise_std": float(np.ravel(reg.noise_std_)[0]),
                "convergence_warning": any(
                    issubclass(w.category, ConvergenceWarning) for w in caught
                ),
                "diagnostics": summarize_diagnostics(reg.diagnostics_),
            }
            records.append(record)
            _emit(record, out)
        summary = {**common, **settings, "summary": True, "splits": splits}
        for key in ("rmse", "test_ll", "fit_time", "coverage_90"):
            summary[key], summary[key + "_se"] = _mean_se([r[key] for r in records])
        summary["compile_time"] = sum(r["diagnostics"].get("compile_time", 0.0) for r in records)
        summary["n_convergence_warnings"] = sum(r["convergence_warning"] for r in records)
        _emit(summary, out)
    finally:
        if out:
            out.close()
    return records + [summary]


#: the tables' dataset names
DATASETS = {"bostonHousing": "Boston", "concrete": "Concrete", "energy": "Energy",
            "wine-quality-red": "Wine", "yacht": "Yacht"}  # fmt: skip

#: published figures on these splits, (RMSE, log-likelihood) as printed: VI (Graves) as
#: reprinted in Gal & Ghahramani (ICML 2016), Table 1; Deep Ensembles (M=5) from
#: Lakshminarayanan et al. (NeurIPS 2017), Table 1, its sd over splits over sqrt(20)
PUBLISHED_VI = {
    "bostonHousing": ("4.32 +- 0.29", "-2.90 +- 0.07"),
    "concrete": ("7.19 +- 0.12", "-3.39 +- 0.02"),
    "energy": ("2.65 +- 0.08", "-2.39 +- 0.03"),
    "wine-quality-red": ("0.65 +- 0.01", "-0.98 +- 0.01"),
    "yacht": ("6.89 +- 0.67", "-3.43 +- 0.16"),
}
PUBLISHED_DEEP_ENSEMBLES = {
    "bostonHousing": ("3.28 +- 0.22", "-2.41 +- 0.06"),
    "concrete": ("6.03 +- 0.13", "-3.06 +- 0.04"),
    "energy": ("2.09 +- 0.06", "-1.38 +- 0.05"),
    "wine-quality-red": ("0.64 +- 0.01", "-0.94 +- 0.03"),
    "yacht": ("1.58 +- 0.11", "-1.18 +- 0.05"),
}


def _summaries(path) -> dict:
    """``{dataset: its latest summary}`` of a results file."""
    return {r["dataset"]: r for r in _lines(path) if r.get("summary")}


def _pm(r: dict, key: str) -> str:
    return f"{r[key]:.2f} +- {r[key + '_se']:.2f}"


def report(paths, table: str = "vi") -> str:
    """doc/optimization.md's table ``table`` of the results files ``paths``: ``"vi"`` (one
    file) beside the published VI, ``"ll"`` or ``"rmse"`` (one file per method) beside
    the published Deep Ensembles, the ensemble's log-likelihood in bold where it is
    above theirs; doc/samplers.md's ``"converged"`` and ``"converged-splits"`` (see
    ``report_converged``), ``"metric"`` (``report_metric``), ``"ll-time"``
    (``report_ll_time``) and those of ``OTHER_REPORTS``."""
    paths = [paths] if isinstance(paths, (str, Path)) else paths
    if table in ("converged", "converged-splits"):
        return report_converged(paths, per_split=table == "converged-splits")
    if table == "metric":
        return report_metric(paths[0])
    if table == "ll-time":
        return report_ll_time(paths)
    if table in OTHER_REPORTS:
        return OTHER_REPORTS[table](paths[0])
    runs = [_summaries(path) for path in paths]
    if table == "vi":
        out = ["| dataset | test LL | VI (Graves) LL | RMSE | VI (Graves) RMSE | 90 % coverage | "
               "fit / split |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for d, r in runs[0].items():
            rmse, ll = PUBLISHED_VI[d]
            cells = [DATASETS[d], _pm(r, "test_ll"), ll, _pm(r, "rmse"), rmse,
                     f"{r['coverage_90']:.3f}", f"{r['fit_time']:.1f} s"]  # fmt: skip
            out.append("| " + " | ".join(cells) + " |")
        return "\n".join(out) + "\n"
    names = [next(iter(run.values()))["method"]["name"] for run in runs]
    if table == "ll":
        m = {name: f" (M={next(iter(run.values()))['n_samples']})"
             for name, run in zip(names, runs, strict=True) if name == "ensemble"}  # fmt: skip
        head = ["dataset", "Deep Ensembles (M=5), published",
                *(f'skbnn `"{name}"`{m.get(name, "")}' for name in names)]  # fmt: skip
    else:
        head = ["dataset", "published DE RMSE", *(f'`"{name}"` RMSE / time' for name in names)]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in DATASETS:
        rmse, ll = PUBLISHED_DEEP_ENSEMBLES[d]
        cells = [DATASETS[d], ll if table == "ll" else rmse]
        for name, run in zip(names, runs, strict=True):
            r = run[d]
            if table == "rmse":
                cells.append(f"{_pm(r, 'rmse')} / {r['fit_time']:.2f}")
            elif name == "ensemble" and r["test_ll"] > float(ll.split()[0]):
                cells.append(f"**{_pm(r, 'test_ll')}**")
            else:
                cells.append(_pm(r, "test_ll"))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _lines(path) -> list[dict]:
    return read_results(path)


def _span(values, fmt: str) -> str:
    """``"lo-hi"`` of ``values`` in the format ``fmt``, one figure where they agree."""
    lo, hi = f"{min(values):{fmt}}", f"{max(values):{fmt}}"
    return lo if lo == hi else f"{lo}-{hi}"


def report_converged(paths, per_split: bool = False) -> str:
    """doc/samplers.md's table of NUTS sampling until converged: ``paths`` are the
    converged fits' results file and the plain NUTS runs' (the same splits, the latest
    line of each), one row per dataset or, with ``per_split``, per split."""
    fits = [r for r in _lines(paths[0]) if not r.get("summary")]
    plain = {(r["dataset"], r["split"]): r for r in _lines(paths[1]) if not r.get("summary")}
    yes_no = {True: "yes", False: "no"}
    if per_split:
        out = ["| dataset, split | stopped because | R-hat / ESS at the stop | draws sampled per "
               "chain | fit | warned | test LL | plain run's test LL / R-hat / warned |",
               "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in fits:
            d, p = r["diagnostics"], plain[r["dataset"], r["split"]]
            cells = [f"{DATASETS[r['dataset']].lower()} {r['split']}",
                     f"`{d['stopped_because']}`", f"{d['stop_rhat']:.3f} / {d['stop_ess']:.0f}",
                     str(d["n_draws_sampled_per_chain"]), f"{r['fit_time']:.0f} s",
                     yes_no[r["convergence_warning"]], f"{r['test_ll']:.3f}",
                     f"{p['test_ll']:.3f} / {p['diagnostics']['rhat_loglik']:.3f} / "
                     f"{yes_no[p['convergence_warning']]}"]  # fmt: skip
            out.append("| " + " | ".join(cells) + " |")
        return "\n".join(out) + "\n"
    out = ["| dataset | splits | ended without a warning | stopped because | R-hat / ESS at the "
           "stop | draws sampled per chain | fit | test LL (mean +- se) | plain runs' test LL | "
           "plain runs warned |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for dataset in dict.fromkeys(r["dataset"] for r in fits):
        rows = [r for r in fits if r["dataset"] == dataset]
        plains = [plain[dataset, r["split"]] for r in rows]
        diags = [r["diagnostics"] for r in rows]
        splits = [r["split"] for r in rows]
        clean = sum(not r["convergence_warning"] for r in rows)
        stops = ", ".join(f"`{s}`" for s in sorted({d["stopped_because"] for d in diags}))
        cells = [DATASETS[dataset].lower(), _span(splits, "d"), f"{clean} of {len(rows)}", stops,
                 f"{_span([d['stop_rhat'] for d in diags], '.3f')} / "
                 f"{_span([d['stop_ess'] for d in diags], '.0f')}",
                 _span([d["n_draws_sampled_per_chain"] for d in diags], "d"),
                 _span([r["fit_time"] for r in rows], ".0f") + " s"]  # fmt: skip
        for group in (rows, plains):
            cells.append("{:.3f} +- {:.3f}".format(*_mean_se([r["test_ll"] for r in group])))
        cells.append(f"{sum(p['convergence_warning'] for p in plains)} of {len(plains)}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def report_metric(path) -> str:
    """doc/samplers.md's table of NUTS's ``metric`` options: one row per fit in ``path``
    (ESS per gradient counts warm-up's gradients too)."""
    out = ["| dataset | metric | warm-up | steps per draw (per chain) | step size | bulk ESS | "
           "ESS per 1k gradients | R-hat | fit |",
           "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in _lines(path):
        if r.get("summary"):
            continue
        d = r["diagnostics"]
        cells = [DATASETS[r["dataset"]].lower(), f"`{r['method']['metric']}`",
                 str(d["n_warmup"]), ", ".join(f"{n:.0f}" for n in d["mean_n_leapfrog"]),
                 _span(d["step_size"], ".4f"), f"{d['ess_bulk_loglik']:.0f}",
                 f"{1e3 * d['ess_bulk_loglik'] / d['n_grad_evals']:.3f}",
                 f"{d['rhat_loglik']:.3f}", f"{r['fit_time']:.0f} s"]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def report_ll_time(paths, splits=range(5)) -> str:
    """One column per results file (method): the test log-likelihood's mean +- standard
    error over ``splits`` (the latest line of each) and the mean fit time per split."""
    head = ["dataset", *(f'`"{_lines(path)[0]["method"]["name"]}"` (`{Path(path).name}`)'
                         for path in paths)]  # fmt: skip
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    fits = [{(r["dataset"], r["split"]): r for r in _lines(path) if not r.get("summary")}
            for path in paths]  # fmt: skip
    for dataset in DATASETS:
        cells = [DATASETS[dataset]]
        for by_split in fits:
            rows = [by_split[dataset, split] for split in splits]
            mean, se = _mean_se([r["test_ll"] for r in rows])
            seconds = np.mean([r["fit_time"] for r in rows])
            cells.append(f"{mean:.2f} +- {se:.2f}, {seconds:.{0 if seconds >= 10 else 1}f} s")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _grads(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.0f}k"


def _per_seed(rows: list[dict], cell) -> str:
    """``cell(row)`` of each seed's row, in the order of the seeds."""
    return ", ".join(cell(r) for r in sorted(rows, key=lambda r: r["seed"]))


def _rate(r: dict) -> str:
    # ESS/s of converged chains in whole units; of stuck ones (under 10) with a decimal
    return f"{r['ess_per_s']:.{0 if r['ess_per_s'] >= 10 else 1}f}"


def report_init_map(path) -> str:
    """doc/samplers.md's table of benchmarks/init_map.py's results: per dataset and warm-up
    length, prior against MAP starts (gradient evaluations are means over the seeds)."""
    lines = _lines(path)
    yes_no = {True: "yes", False: "no"}
    out = ["| dataset | n_warmup | warm-up gradient evals, prior / map | the MAPs' gradient "
           "evals | R-hat loglik, prior / map | ESS/s, prior / map | warned, prior / map |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for dataset, n_warmup in dict.fromkeys((r["dataset"], r["n_warmup"]) for r in lines):
        rows = {init: [r for r in lines if (r["dataset"], r["n_warmup"], r["init"])
                       == (dataset, n_warmup, init)] for init in ("prior", "map")}  # fmt: skip
        cells = [DATASETS[dataset], str(n_warmup),
                 " / ".join(_grads(np.mean([r["warmup_grad_evals"] for r in rows[i]]))
                            for i in rows),
                 f"{np.mean([r['init_grad_evals'] for r in rows['map']]):.0f}",
                 " / ".join(_per_seed(rows[i], lambda r: f"{r['rhat_loglik']:.3f}")
                            for i in rows),
                 " / ".join(_per_seed(rows[i], _rate) for i in rows),
                 " / ".join(_per_seed(rows[i], lambda r: yes_no[r["warned"]])
                            for i in rows)]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def report_many_chains(path) -> str:
    """doc/samplers.md's table of benchmarks/many_chains.py's results: per dataset and run
    (4 long chains or 16 short ones), each seed's figures."""
    lines = _lines(path)
    out = ["| dataset | run | fit | gradient evals | split R-hat loglik / max output | nested "
           "R-hat loglik | ESS/s | test LL |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for dataset, run in dict.fromkeys((r["dataset"], r["run"]) for r in lines):
        rows = [r for r in lines if (r["dataset"], r["run"]) == (dataset, run)]
        cells = [DATASETS[dataset], f"{rows[0]['n_chains']} {run}",
                 _per_seed(rows, lambda r: f"{r['fit_time']:.1f}") + " s",
                 _per_seed(rows, lambda r: _grads(r["n_grad_evals"])),
                 _per_seed(rows, lambda r: f"{r['rhat_loglik']:.3f} / "
                                           f"{r['max_rhat_outputs']:.3f}"),
                 _per_seed(rows, lambda r: f"{r['nested_rhat_loglik']:.3f}"),
                 _per_seed(rows, _rate),
                 _per_seed(rows, lambda r: f"{r['test_ll']:.3f}")]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def report_friedman_advice(path) -> str:
    """doc/samplers.md's table of benchmarks/friedman_advice.py's results: one row per
    setting and seed."""
    out = ["| setting | seed | max R-hat | bulk ESS | stopped because | draws per chain | fit | "
           "warned |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in _lines(path):
        stop = f"`{r['stopped_because']}`" if r["stopped_because"] else "-"
        cells = [r["setting"], str(r["seed"]), f"{r['max_rhat']:.3f}",
                 f"{r['ess_bulk_loglik']:.0f}", stop, str(r["draws_sampled_per_chain"]),
                 f"{r['fit_time']:.0f} s", "yes" if r["warned"] else "no"]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


#: doc/samplers.md's tables of other scripts' results on the UCI splits
OTHER_REPORTS = {"init-map": report_init_map, "many-chains": report_many_chains,
                 "friedman-advice": report_friedman_advice}  # fmt: skip


def _emit(record: dict, out) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    if out:
        out.write(line + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", help="folder name, e.g. bostonHousing")
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/uci")
    parser.add_argument("--method", default="nuts", help="a name, or JSON with name and params")
    parser.add_argument("--hidden", default=None, help='e.g. "50" or "50,50"; "" for none')
    parser.add_argument("--activation", default="relu", help="the protocol's ReLU by default")
    parser.add_argument("--splits", default="all", help='"all", "0-4" or "0,3"')
    parser.add_argument("--n-samples", type=int, default=1000, help="posterior draws kept")
    parser.add_argument("--params", default=None, help="more estimator parameters, JSON")
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument("--seed", type=int, default=0, help="random_state of every split's fit")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", nargs="+", default=None, metavar="FILE",
                        help="print the --table of these results files (no fit)")  # fmt: skip
    parser.add_argument("--table", default="vi",
                        choices=("vi", "ll", "rmse", "converged", "converged-splits", "metric",
                                 "ll-time", *OTHER_REPORTS),
                        help="--report's table: VI beside Graves's, one column per file "
                        "beside the published Deep Ensembles, NUTS until converged (two "
                        "files: its runs, the plain runs) by dataset or split, one row "
                        "per NUTS fit with its metric, one column per file of splits "
                        "0-4's test LL and fit time, or the file of the script of that "
                        "name")  # fmt: skip
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report, args.table), end="")
        return
    if args.dataset is None:
        parser.error("the following arguments are required: --dataset")
    args.argv = sys.argv[1:] if argv is None else list(argv)
    run(args)


if __name__ == "__main__":
    main()
