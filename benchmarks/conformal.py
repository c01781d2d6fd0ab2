"""Conformal intervals around skbnn, by MAPIE, on the UCI regression splits.

For each dataset, split (``--splits``) and method (``--methods``): a calibration set is
carved out of the split's training rows (``--cal-fraction`` of them, at random, seeded by
the split's number), the protocol's estimator (50 ReLU units, ``method=name``, as
``benchmarks/defaults.py`` builds it) is fitted on the other training rows in a
``StandardScaler`` Pipeline, and on the split's test rows the script records the coverage
and mean width (in the target's units) of three 90 % intervals:

``raw``
    skbnn's own posterior predictive interval, ``predict_interval(X, coverage=0.9)``;
``std``
    MAPIE's ``SplitConformalRegressor`` (``prefit=True``) with ``StdConformityScore``:
    the predictive mean plus and minus a calibrated multiple of skbnn's predictive sd;
``abs``
    the same with the absolute residual around the same predictive mean: one width for
    every row.

The method named ``point`` gives a fourth: the absolute residual around a point network
calibrated on the same rows, scikit-learn's ``MLPRegressor`` with 50 ReLU units as a user
writes it (in a ``StandardScaler`` Pipeline, on the raw target, stopped by its own rule).

One JSON line per fit (``--out`` appends it); ``--report FILE`` prints the markdown table
of doc/conformal.md. Usage::

    python benchmarks/conformal.py --out benchmarks/results/conformal.jsonl
    python benchmarks/conformal.py --methods point ensemble --splits 0-1 --n-jobs 1
    python benchmarks/conformal.py --report benchmarks/results/conformal.jsonl

MAPIE (``pip install "skbnn[conformal]"``) is imported only to run the benchmark, not for
the report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, load_split, provenance, split_ids  # noqa: E402
from defaults import _regressor  # noqa: E402
from uci import parse_splits  # noqa: E402

UCI_SETS = ("bostonHousing", "concrete", "energy", "wine-quality-red", "yacht")
DEFAULT_METHODS = ("point", "ensemble", "rms", "swag", "laplace", "vi", "lbbnn", "nuts")
COVERAGE = 0.9
#: The interval kinds of an skbnn fit, in the report's order.
KINDS = ("raw", "std", "abs")


def _interval_record(y: np.ndarray, lower: np.ndarray, upper: np.ndarray, kind: str) -> dict:
    return {
        f"coverage_{kind}": float(np.mean((y >= lower) & (y <= upper))),
        f"width_{kind}": float(np.mean(upper - lower)),
    }


def _conformal(model, score, X_cal, y_cal, X_test, y_test, kind: str) -> dict:
    """Split-conformal interval of a fitted model: MAPIE's, prefit, at ``COVERAGE``."""
    from mapie.regression import SplitConformalRegressor

    conformal = SplitConformalRegressor(
        model, confidence_level=COVERAGE, conformity_score=score, prefit=True
    ).conformalize(X_cal, y_cal)
    _, intervals = conformal.predict_interval(X_test)
    return _interval_record(y_test, intervals[:, 0, 0], intervals[:, 1, 0], kind)


def _timed_fit(model, X, y) -> dict:
    """Fit; wall time and whether a ``ConvergenceWarning`` (skbnn's or sklearn's) fired."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        model.fit(X, y)
        elapsed = time.perf_counter() - start
    return {
        "fit_time": elapsed,
        "warned": any(issubclass(w.category, ConvergenceWarning) for w in caught),
    }


def _skbnn_fit(name: str, split: int, n_jobs: int, rows) -> dict:
    """The three intervals of one skbnn fit."""
    from mapie.conformity_scores import StdConformityScore
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X_fit, y_fit, X_cal, y_cal, X_test, y_test = rows
    estimator = _regressor(name, split, protocol=True).set_params(n_jobs=n_jobs)
    model = make_pipeline(StandardScaler(), estimator)
    record = _timed_fit(model, X_fit, y_fit)
    lower, upper = estimator.predict_interval(model[:-1].transform(X_test), coverage=COVERAGE)
    mean = model.predict(X_test)
    return {
        **record,
        "method_": type(estimator.method_).__name__,
        "rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
        **_interval_record(y_test, lower, upper, "raw"),
        **_conformal(model, StdConformityScore(), X_cal, y_cal, X_test, y_test, "std"),
        **_conformal(model, "absolute", X_cal, y_cal, X_test, y_test, "abs"),
    }


def _point_fit(split: int, rows) -> dict:
    """MAPIE's absolute-residual interval around scikit-learn's point network."""
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X_fit, y_fit, X_cal, y_cal, X_test, y_test = rows
    # Adam stops when the training loss has gained less than tol in 10 epochs; the cap is
    # high enough that this rule, not max_iter, ends the training on these sets (n_iter
    # is recorded). On a standardized target the same tol stops the near-noiseless sets
    # (energy, yacht) several times too early, so the target is left raw, as users fit it.
    network = MLPRegressor(hidden_layer_sizes=(50,), activation="relu", max_iter=20000,
                           early_stopping=False, random_state=split)  # fmt: skip
    model = make_pipeline(StandardScaler(), network)
    record = _timed_fit(model, X_fit, y_fit)
    mean = model.predict(X_test)
    return {
        **record,
        "n_iter": int(network.n_iter_),
        "rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
        **_conformal(model, "absolute", X_cal, y_cal, X_test, y_test, "abs"),
    }


def _rows(dataset: str, split: int, cal_fraction: float, data_dir):
    """``(X_fit, y_fit, X_cal, y_cal, X_test, y_test)``: the split's training rows cut at
    random (seeded by the split) into fitting and calibration rows."""
    from sklearn.model_selection import train_test_split

    X_train, y_train, X_test, y_test = load_split(dataset, split, data_dir)
    X_fit, X_cal, y_fit, y_cal = train_test_split(
        X_train, y_train, test_size=cal_fraction, random_state=split
    )
    return X_fit, y_fit, X_cal, y_cal, X_test, y_test


def run(args, common: dict) -> None:
    emit = emitter(args.out)
    for dataset in args.datasets:
        for split in parse_splits(args.splits, split_ids(dataset, args.data_dir)):
            rows = _rows(dataset, split, args.cal_fraction, args.data_dir)
            where = {**common, "dataset": dataset, "split": split, "n_fit": len(rows[1]),
                     "n_cal": len(rows[3]), "n_test": len(rows[5])}  # fmt: skip
            for name in args.methods:
                if name == "point":
                    record = _point_fit(split, rows)
                else:
                    record = _skbnn_fit(name, split, args.n_jobs, rows)
                # the cores may be shared: the load says how far the wall times are from
                # a quiet machine's
                emit({**where, "method": name, **record, "loadavg_1min": os.getloadavg()[0]})


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------


def report(path: str) -> str:
    """The markdown table of a results file: per dataset and method, the mean coverage and
    width over the splits of each interval (the last record of each fit wins)."""
    records = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("benchmark") == "conformal":
            records[(r["dataset"], r["split"], r["method"])] = r
    rows = list(records.values())
    methods = list(dict.fromkeys(r["method"] for r in rows if r["method"] != "point"))
    short = {"bostonHousing": "Boston", "wine-quality-red": "wine"}
    lines = [
        "| data | method | splits | raw coverage | raw width | conformal-std coverage "
        "| conformal-std width | conformal-abs coverage | conformal-abs width |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    # the UCI sets in their usual order, any other folder after them
    datasets = sorted(
        dict.fromkeys(r["dataset"] for r in rows),
        key=lambda d: UCI_SETS.index(d) if d in UCI_SETS else len(UCI_SETS),
    )
    for dataset in datasets:
        for m in [*methods, "point"]:
            fits = [r for r in rows if r["dataset"] == dataset and r["method"] == m]
            if not fits:
                continue
            cells = []
            for kind in KINDS:
                if f"coverage_{kind}" in fits[0]:
                    coverage = np.mean([r[f"coverage_{kind}"] for r in fits])
                    width = np.mean([r[f"width_{kind}"] for r in fits])
                    cells += [f"{coverage:.3f}", f"{width:.2f}"]
                else:
                    cells += ["", ""]
            label = "MLPRegressor (point)" if m == "point" else m
            lines.append(
                f"| {short.get(dataset, dataset)} | {label} | {len(fits)} | "
                + " | ".join(cells)
                + " |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", default=None, help="print the markdown table of FILE")
    parser.add_argument("--datasets", nargs="+", default=list(UCI_SETS))
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS),
                        help='skbnn method names, and "point" for the MLPRegressor')  # fmt: skip
    parser.add_argument("--splits", default="0-4", help='UCI splits: "all", "0-4" or "0,3"')
    parser.add_argument("--cal-fraction", type=float, default=0.2,
                        help="share of each split's training rows to calibrate on")  # fmt: skip
    parser.add_argument("--n-jobs", type=int, default=-1, help="skbnn's n_jobs")
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/uci")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return

    import mapie

    common = {"benchmark": "conformal", **provenance("conformal.py", argv),
              "mapie": mapie.__version__, "coverage": COVERAGE,
              "cal_fraction": args.cal_fraction}  # fmt: skip
    run(args, common)


if __name__ == "__main__":
    main()
