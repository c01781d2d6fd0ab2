"""Marginalized vs Gibbs-updated noise precision for NUTS: bulk ESS of the log-likelihood.

Diabetes (scikit-learn's copy, X standardized), a 10-unit tanh network (the estimator's
default activation), noise inferred,
4 chains x (500 warm-up + 1000 draws), on the first 60, 150 and all 442 rows, five seeds each.
Prints one JSON line per (rows, noise_update, seed) and a summary line per (rows,
noise_update). Usage::

    python benchmarks/noise_update.py [--seeds 5] [--n-jobs 2]
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPRegressor
from skbnn.methods import NUTS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
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
                }
                print(json.dumps(record), flush=True)
            summary = {
                "benchmark": "noise_update",
                "summary": True,
                "rows": n,
                "noise_update": update,
                "ess_bulk_loglik_mean": round(float(np.mean(ess)), 1),
                "ess_bulk_loglik_se": round(float(np.std(ess, ddof=1) / np.sqrt(len(ess))), 1),
            }
            print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
