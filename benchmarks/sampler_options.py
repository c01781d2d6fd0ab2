"""NUTS options side by side: bulk ESS per draw and per gradient, on diabetes.

Diabetes (scikit-learn's copy, X standardized), a 10-unit network, noise inferred, 4 chains
x (500 warm-up + 1000 draws), several seeds per configuration. Each configuration is a set of
``NUTS`` parameters; the default compares Stan's variance metric with the gradient-balanced
one and the ReLU scale moves on and off. Prints one JSON line per (activation, configuration,
seed) and a summary line (mean +- se over seeds) per (activation, configuration). Usage::

    python benchmarks/sampler_options.py [--seeds 5] [--activation relu tanh]
        [--configs '[{"metric": "diagonal"}, {"metric": "diagonal_grad"}]']
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

DEFAULT_CONFIGS = [
    {"metric": "diagonal", "rescale_units": False},
    {"metric": "diagonal", "rescale_units": True},
    {"metric": "diagonal_grad", "rescale_units": False},
    {"metric": "diagonal_grad", "rescale_units": True},
]


def _mean_se(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(values.size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--activation", nargs="+", default=["relu", "tanh"])
    parser.add_argument("--configs", type=json.loads, default=DEFAULT_CONFIGS)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    for activation in args.activation:
        for config in args.configs:
            rows = []
            for seed in range(args.seeds):
                reg = BayesianMLPRegressor(
                    hidden_layer_sizes=(10,),
                    activation=activation,
                    method=NUTS(n_chains=4, n_warmup=500, **config),
                    n_samples=4000,
                    random_state=seed,
                    n_jobs=args.n_jobs,
                ).fit(X, y)
                d = reg.diagnostics_
                row = {
                    "ess_bulk_loglik": float(d["ess_bulk_loglik"]),
                    "min_ess_bulk_outputs": float(np.min(d["ess_bulk_outputs"])),
                    "max_rhat": float(max(d["rhat_loglik"], np.max(d["rhat_outputs"]))),
                    "leapfrog_per_draw": float(np.mean(d["mean_n_leapfrog"])),
                    "ess_per_1k_grads": 1000 * float(d["ess_bulk_loglik"]) / d["n_grad_evals"],
                    "wall_time_s": float(d["wall_time"]),
                }
                rows.append(row)
                record = {"benchmark": "sampler_options", "activation": activation,
                          "config": config, "seed": seed}  # fmt: skip
                record.update({key: round(value, 4) for key, value in row.items()})
                print(json.dumps(record), flush=True)
            summary = {"benchmark": "sampler_options", "summary": True,
                       "activation": activation, "config": config}  # fmt: skip
            for key in rows[0]:
                mean, se = _mean_se([r[key] for r in rows])
                summary[key] = [round(mean, 4), round(se, 4)]
            print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
