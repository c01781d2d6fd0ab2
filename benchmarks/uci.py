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
    python benchmarks/uci.py --table ll --report benchmarks/results/uci_ensemble.jsonl \
        benchmarks/results/uci_rms.jsonl benchmarks/results/uci_swag.jsonl
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
from _uci import load_split, machine, n_hidden, split_ids, standardize  # noqa: E402


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
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    return {r["dataset"]: r for r in lines if r.get("summary")}


def _pm(r: dict, key: str) -> str:
    return f"{r[key]:.2f} +- {r[key + '_se']:.2f}"


def report(paths, table: str = "vi") -> str:
    """doc/optimization.md's table ``table`` of the results files ``paths``: ``"vi"`` (one
    file) beside the published VI, ``"ll"`` or ``"rmse"`` (one file per method) beside
    the published Deep Ensembles, the ensemble's log-likelihood in bold where it is
    above theirs."""
    paths = [paths] if isinstance(paths, (str, Path)) else paths
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
    parser.add_argument("--table", default="vi", choices=("vi", "ll", "rmse"),
                        help="--report's table: VI beside Graves's, or one column per "
                        "file beside the published Deep Ensembles")  # fmt: skip
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
