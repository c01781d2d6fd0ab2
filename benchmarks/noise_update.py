"""Marginalized vs Gibbs-updated noise precision for NUTS: bulk ESS of the log-likelihood.

Diabetes (scikit-learn's copy, X standardized), a 10-unit tanh network (the estimator's
default activation), noise inferred,
4 chains x (500 warm-up + 1000 draws), on the first 60, 150 and all 442 rows, five seeds each.
Prints one JSON line per (rows, noise_update, seed) and a summary line per (rows,
noise_update). Usage::

    python benchmarks/noise_update.py [--seeds 5] [--n-jobs 2]
    python benchmarks/noise_update.py --out benchmarks/results/noise_update.jsonl
    python benchmarks/noise_update.py --report benchmarks/results/noise_update.jsonl

``--report FILE`` prints doc/performance.md's table of the summary lines (the last of each
row count and update).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPRegressor
from skbnn.methods import NUTS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, provenance, read_results  # noqa: E402


def report(path) -> str:
    """doc/performance.md's table of a results file."""
    lines = read_results(path)
    last = {(r["rows"], r["noise_update"]): r for r in lines if r.get("summary")}
    out = ['| rows | `"marginal"` | `"gibbs"` | ratio |', "|---|---|---|---|"]
    for rows in sorted({n for n, _ in last}):
        m, g = last[(rows, "marginal")], last[(rows, "gibbs")]
        ratio = m["ess_bulk_loglik_mean"] / g["ess_bulk_loglik_mean"]
        out.append(f"| {rows} | {m['ess_bulk_loglik_mean']:.0f} +- {m['ess_bulk_loglik_se']:.0f} "
                   f"| {g['ess_bulk_loglik_mean']:.0f} +- {g['ess_bulk_loglik_se']:.0f} "
                   f"| {ratio:.2f} |")  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    emit = emitter(args.out)
    head = provenance("noise_update.py", None)
    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    for n in (60, 150, 442):
        for update in ("marginal", "gibbs"):
            ess = []
            for seed in range(args.seeds):
                reg = BayesianMLPRegressor(
                    hidden_layer_sizes=(10,),
                    # the metric these figures were measured with (doc/performance.md)
                    method=NUTS(n_chains=4, n_warmup=500, noise_update=update, metric="diagonal"),
                    n_samples=4000,
                    random_state=seed,
                    n_jobs=args.n_jobs,
                ).fit(X[:n], y[:n])
                d = reg.diagnostics_
                ess.append(float(d["ess_bulk_loglik"]))
                record = {
                    "benchmark": "noise_update",
                    "rows": n,
                    "noise_update": update,
                    "seed": seed,
                    "ess_bulk_loglik": round(ess[-1], 1),
                    "rhat_loglik": round(float(d["rhat_loglik"]), 4),
                    "leapfrog_per_draw": round(float(np.mean(d["mean_n_leapfrog"])), 1),
                    "wall_time_s": round(d["wall_time"], 2),
                    **head,
                }
                emit(record)
            summary = {
                "benchmark": "noise_update",
                "summary": True,
                "rows": n,
                "noise_update": update,
                "ess_bulk_loglik_mean": round(float(np.mean(ess)), 1),
                "ess_bulk_loglik_se": round(float(np.std(ess, ddof=1) / np.sqrt(len(ess))), 1),
                **head,
            }
            emit(summary)


if __name__ == "__main__":
    main()
