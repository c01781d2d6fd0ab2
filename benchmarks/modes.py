"""Chains from several optima (``n_modes``) against the dispersed chains of today's default,
on the UCI splits: test log-likelihood, RMSE, 90 % coverage, ConvergenceWarnings and time.

Each multi-mode fit is scored twice, with the modes stacked and with equal weights: the
same draws under the two weightings, so the comparison of ``mode_weights`` is paired
within a fit. One JSON line per fit::

    python benchmarks/modes.py --data bostonHousing concrete energy wine-quality-red yacht \\
        --splits 0-19 --routes default modes4 --out benchmarks/results/modes.jsonl

Routes: ``default`` (``BayesianMLPRegressor()``, what ``method="auto"`` runs there),
``modesK`` (the default network, ``NUTS(n_modes=K, n_chains=K)``, fitted stacked and
scored both ways), ``modesK_c2``
(two chains per mode), and with ``--hidden 16 16 --activation relu`` any of them on that
network.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, load_split, provenance, split_ids, standardize  # noqa: E402
from uci import parse_splits  # noqa: E402

UCI_SETS = ("bostonHousing", "concrete", "energy", "wine-quality-red", "yacht")


def method_for(route: str):
    """The method object of a route (None: the estimator's default)."""
    from skbnn.methods import NUTS

    if route == "default":
        return None
    m = re.fullmatch(r"modes(\d+)(?:_c(\d+))?", route)
    if m is None:
        raise ValueError(f"unknown route {route!r}")
    k, per = int(m[1]), int(m[2] or 1)
    # stacked, so that a fit gives both weightings (the equal ones from its draws)
    return NUTS(n_modes=k, n_chains=k * per, mode_weights="stacking")


def _scores(est, X_test, y_test) -> dict:
    from skbnn.model_selection import log_predictive_scorer

    low, high = est.predict_interval(X_test, coverage=0.9)
    return {
        "test_ll": log_predictive_scorer(est, X_test, y_test),
        "rmse": float(np.sqrt(np.mean((est.predict(X_test) - y_test) ** 2))),
        "coverage_90": float(np.mean((y_test >= low) & (y_test <= high))),
    }


def run_fit(dataset, split, route, args) -> dict:
    from skbnn import BayesianMLPRegressor
    from skbnn.exceptions import ConvergenceWarning

    X_train, y_train, X_test, y_test = load_split(dataset, split, args.data_dir)
    X_train, X_test = standardize(X_train, X_test)
    kw = {"random_state": split, "n_jobs": -1}
    if args.hidden is not None:
        kw.update(hidden_layer_sizes=tuple(args.hidden), activation=args.activation)
    method = method_for(route)
    if method is not None:
        kw["method"] = method
    est = BayesianMLPRegressor(**kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        est.fit(X_train, y_train)
        elapsed = time.perf_counter() - t0
    messages = [str(w.message)[:300] for w in caught if issubclass(w.category, ConvergenceWarning)]
    diag = est.diagnostics_
    record = {
        "dataset": dataset, "split": split, "route": route, "n_train": len(y_train),
        "hidden": list(est.hidden_layer_sizes), "activation": est.activation,
        "method_": repr(est.method_), "fit_time": elapsed,
        "compile_time": float(diag.get("compile_time", 0.0)),
        "n_grad_evals": int(diag.get("n_grad_evals", 0)),
        "warned": bool(messages), "warnings": messages,
        "rhat_loglik": float(diag.get("rhat_loglik", np.nan)),
        **_scores(est, X_test, y_test),
    }  # fmt: skip
    if "modes" in diag:
        modes = diag["modes"]
        record.update(
            weighting=diag["mode_weighting"],
            mode_weights=[float(w) for w in diag["mode_weights"]],
            rhat_within_modes=[float(m["rhat_loglik"]) for m in modes],
            rhat_outputs_within_modes=[float(np.nanmax(m["rhat_outputs"])) for m in modes],
            ess_within_modes=[float(m["ess_bulk_loglik"]) for m in modes],
            divergences_per_mode=[int(m["divergences"]) for m in modes],
            elpd_loo_per_mode=[float(m["elpd_loo"]) for m in modes],
            khat_max_per_mode=[float(m["khat_max"]) for m in modes],
        )
        # the same draws with the other weighting, for a paired comparison
        post = est.posterior_
        stacked = post.weights
        mode_of_draw = np.repeat(diag["mode_of_chain"], post.chain_shape[1])[: post.n_draws]
        k = len(modes)
        counts = np.bincount(mode_of_draw, minlength=k)
        post.weights = 1.0 / (k * counts[mode_of_draw])
        record["equal"] = _scores(est, X_test, y_test)
        post.weights = stacked
    return record


def _judged_warning(record: dict, equal: bool = False) -> bool:
    """Whether the fit warns under today's rule: a multi-mode fit's R-hat judged within the
    modes that carry at least 5 % of the predictive, under its stacked weights or, with
    ``equal``, equal ones (the lines keep every mode's figures, so fits made before that
    rule are judged by it too); otherwise as recorded."""
    if "mode_weights" not in record:
        return record["warned"]
    from skbnn.methods._convergence import MIN_JUDGED_WEIGHT, RHAT_WARN

    if equal:
        k = len(record["mode_weights"])
        record = {**record, "mode_weights": [1.0 / k] * k}

    worst = max(
        (max(a, b) for a, b, w in zip(record["rhat_within_modes"],
                                      record["rhat_outputs_within_modes"],
                                      record["mode_weights"], strict=True)
         if w >= MIN_JUDGED_WEIGHT),
        default=1.0,
    )  # fmt: skip
    return bool(worst > RHAT_WARN or sum(record["divergences_per_mode"]) > 0)


def report(path: str) -> str:
    """A markdown table: per set, over the splits every route finished, mean +- standard
    error of the test log-likelihood (a multi-mode route stacked, and with equal weights),
    the paired difference from the default, the fits that warn, and the median fit
    time."""
    import json
    from collections import defaultdict

    rows = [json.loads(line) for line in open(path)]
    by = defaultdict(dict)
    for r in rows:
        by[r["dataset"], r["split"]][r["route"]] = r
    routes = sorted({r["route"] for r in rows}, key=lambda x: (x != "default", x))
    lines = ["| set | splits | route | test LL | paired vs default | warned | median time |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        done = sorted(s for (d, s), v in by.items() if d == dataset and len(v) == len(routes))
        if not done:
            continue
        base = np.array([by[dataset, s]["default"]["test_ll"] for s in done])
        for route in routes:
            fits = [by[dataset, s][route] for s in done]
            variants = [("", [f["test_ll"] for f in fits])]
            if "equal" in fits[0]:
                variants = [(" stacked", variants[0][1]),
                            (" equal", [f["equal"]["test_ll"] for f in fits])]  # fmt: skip
            for label, ll in variants:
                ll = np.array(ll)
                se = ll.std(ddof=1) / np.sqrt(len(ll)) if len(ll) > 1 else np.nan
                diff = ll - base
                dse = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else np.nan
                paired = "" if route == "default" else f"{diff.mean():+.3f} +- {dse:.3f}"
                warned = sum(_judged_warning(f, label == " equal") for f in fits)
                times = np.median([f["fit_time"] for f in fits])
                lines.append(
                    f"| {dataset} | {len(done)} | {route}{label} | {ll.mean():.3f} +- "
                    f"{se:.3f} | {paired} | {warned} / {len(fits)} | {times:.0f} s |"
                )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=list(UCI_SETS))
    parser.add_argument("--splits", default="0-4")
    parser.add_argument("--routes", nargs="+", default=["default", "modes4"])
    parser.add_argument("--hidden", nargs="+", type=int, default=None)
    parser.add_argument("--activation", default="relu")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return
    emit = emitter(args.out)
    common = {"benchmark": "modes", **provenance("modes.py", argv)}
    splits = {d: parse_splits(args.splits, split_ids(d, args.data_dir)) for d in args.data}
    # split by split across the sets, so that a partial run covers every set
    for split in range(max(max(s) for s in splits.values()) + 1):
        for dataset in args.data:
            if split not in splits[dataset]:
                continue
            for route in args.routes:
                emit({**common, **run_fit(dataset, split, route, args)})


if __name__ == "__main__":
    main()
