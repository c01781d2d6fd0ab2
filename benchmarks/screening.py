"""Choosing among 12 networks on 10,000 rows: every candidate fitted in full, against a
cheap screen that refits only the candidates it cannot rule out.

The data are ``auto.py``'s diamonds (log price from 9 features): 10,000 training rows and
5,000 test rows. The candidates are one or two hidden layers of 10, 50 or 100 ReLU or tanh
units, each fitted by ``Laplace(hessian="kron")`` with empirical Bayes of its prior
precisions and noise (the Kronecker GGN, since two layers of 100 units have 11,201
parameters). Two ``BayesianModelAverage`` runs, the candidates fitted two at a time:

- **full**: every candidate fitted as given;
- **screened**: every candidate first fitted with ``--screen-updates`` empirical Bayes
  updates (in place of up to 30), and only those within ``--margin`` nats of the best
  screened evidence refitted as given.

Each candidate's line gives its full and screened evidence, test log-likelihood and fit
time; each rule's line its wall time (the kernels compiled beforehand), its choice and the
test log-likelihood of its model average; a last line the screen's error in the
differences of evidences, the margin a screen would need::

    python benchmarks/screening.py --out benchmarks/results/screening.jsonl
    python benchmarks/screening.py --report benchmarks/results/screening.jsonl

``--report FILE`` prints doc/choosing.md's table: the two rules of the last run that
fitted both, and the screen's error in that run.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _uci import emitter, read_results  # noqa: E402
from auto import split  # noqa: E402
from scale import provenance, timed_fit, warm_up  # noqa: E402

GRID = {
    "hidden_layer_sizes": [(10,), (50,), (100,), (10, 10), (50, 50), (100, 100)],
    "activation": ["relu", "tanh"],
}


def _name(params: dict) -> str:
    return "x".join(map(str, params["hidden_layer_sizes"])) + " " + params["activation"]


def report(path) -> str:
    """doc/choosing.md's table of a results file."""
    lines = read_results(path)
    # a run's lines: its rules, then its candidates and the screen's error
    full = max(i for i, r in enumerate(lines) if r["rule"] == "full")
    start = max(i for i in range(full) if lines[i]["rule"] == "screened")
    rules = {lines[i]["rule"]: lines[i] for i in (start, full)}
    error = next(r for r in lines[full:] if r["rule"] == "screen_error")
    labels = {"full": "every candidate in full",
              "screened": "screened ({screen_updates} update, margin {margin:.0f})"}  # fmt: skip
    out = ["| rule | wall time (2 cores) | fitted in full | chose | its test log-likelihood | "
           "model average's |", "|---|---|---|---|---|---|"]  # fmt: skip
    for rule in ("full", "screened"):
        r = rules[rule]
        out.append(f"| {labels[rule].format(**r)} | {r['wall_time']:,.0f} s | {r['n_fitted']} | "
                   f"{r['best'].replace(' relu', ' ReLU')} | {r['best_test_ll']:.3f} | "
                   f"{r['test_ll']:.3f} |")  # fmt: skip
    share = rules["screened"]["wall_time"] / rules["full"]["wall_time"]
    out += ["", f"{rules['full']['cpu']}, {rules['full']['date']}, at {rules['full']['commit']}: "
            f"the screen took {100 * share:.0f} % of the full fits' time; its largest error in the "
            f"difference of two candidates' evidences was {error['max_difference_error']:.0f} "
            "nats."]  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--test-rows", type=int, default=5_000)
    parser.add_argument("--screen-updates", type=int, default=1)
    parser.add_argument("--margin", type=float, default=10.0)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--skip-full", action="store_true", help="run the screened rule only")
    parser.add_argument("--out", default=None)
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return

    from sklearn.base import clone

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import Laplace
    from skbnn.model_selection import BayesianModelAverage, log_predictive_scorer

    emit = emitter(args.out)
    meta = provenance()
    X, y, X_test, y_test, _ = split("diamonds", args.rows, args.test_rows)
    template = BayesianMLPRegressor(method=Laplace(hessian="kron"), random_state=0)
    screen = {"method": Laplace(hessian="kron", max_prior_updates=args.screen_updates)}
    for params in itertools.product(*GRID.values()):
        # compiles every kernel the candidates run, so that the times below are warm
        warm_up(clone(template).set_params(**dict(zip(GRID, params, strict=True))), X, y)
    screened = BayesianModelAverage(
        template, GRID, n_jobs=args.n_jobs, screen=screen, screen_margin=args.margin
    )
    rules = {"screened": screened}
    if not args.skip_full:
        rules["full"] = BayesianModelAverage(template, GRID, n_jobs=args.n_jobs)
    fitted = {}
    for rule, bma in rules.items():
        wall, caught = timed_fit(bma, X, y)
        fitted[rule] = bma
        emit({**meta, "rule": rule, "rows": args.rows, "wall_time": wall,
              "n_fitted": int(bma.refitted_.sum()), "best": _name(bma.best_params_),
              "test_ll": log_predictive_scorer(bma, X_test, y_test),
              "best_test_ll": log_predictive_scorer(bma.best_estimator_, X_test, y_test),
              "screen_updates": args.screen_updates if rule == "screened" else None,
              "margin": args.margin if rule == "screened" else None,
              "warnings": caught})  # fmt: skip
    screened = fitted["screened"]
    for i, params in enumerate(screened.candidate_params_):
        record = {"rule": "candidate", "network": _name(params),
                  "screen_log_evidence": float(screened.screen_log_evidences_[i]),
                  "refitted": bool(screened.refitted_[i])}  # fmt: skip
        for rule, bma in fitted.items():
            est = bma.estimators_[i]
            record[f"{rule}_test_ll"] = log_predictive_scorer(est, X_test, y_test)
            record[f"{rule}_fit_time"] = est.diagnostics_["wall_time"]
            record[f"{rule}_prior_updates"] = est.diagnostics_["n_prior_updates"]
        if "full" in fitted:
            record["log_evidence"] = float(fitted["full"].log_evidences_[i])
        emit(record)
    if "full" in fitted:
        z, s = fitted["full"].log_evidences_, screened.screen_log_evidences_
        # the screen's error in the difference of two candidates' evidences
        error = np.abs((z[:, None] - z[None, :]) - (s[:, None] - s[None, :]))
        emit({"rule": "screen_error", "max_difference_error": float(error.max()),
              "needed_margin": float(np.max(s) - s[int(np.argmax(z))]),
              "same_best": bool(np.argmax(z) == np.argmax(s))})  # fmt: skip


if __name__ == "__main__":
    main()
