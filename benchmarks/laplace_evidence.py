"""Laplace's model evidence against SMC's, where Laplace is not exact: Bayesian logistic regression.

For Bayesian linear regression with a fixed noise the Laplace evidence is the closed form
(``tests/test_laplace.py`` checks it to 1e-6 nats). For logistic regression the posterior is
not Gaussian, so the Laplace evidence is an approximation; adaptive annealed SMC estimates the
evidence without that assumption, with a Monte Carlo error measured here over seeds. Each
case fits ``BayesianMLPClassifier(hidden_layer_sizes=(), prior=...)`` (Bayesian logistic or
softmax regression) by ``Laplace(optimize_prior=False)`` and by ``SMC`` with ``--particles``
particles under ``--seeds`` seeds, and prints one JSON line per fit and a summary per case:
Laplace minus the SMC mean, and the SMC standard error over seeds.

Cases: ``breast_cancer`` (first 5 standardized features, 569 rows, binary), ``iris``
(standardized, 150 rows, 3 classes, softmax) and ``synthetic`` (100 rows, 3 features, a
logistic model with well-separated classes, where the posterior is most skewed)::

    python benchmarks/laplace_evidence.py [--particles 2000] [--seeds 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _uci import machine  # noqa: E402


def cases():
    """``{name: (X, y)}``, standardized features."""
    from sklearn.datasets import load_breast_cancer, load_iris

    out = {}
    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :5]
    out["breast_cancer"] = ((X - X.mean(0)) / X.std(0), y)
    X, y = load_iris(return_X_y=True)
    out["iris"] = ((X - X.mean(0)) / X.std(0), y)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 3))
    p = 1.0 / (1.0 + np.exp(-(X @ np.array([3.0, -2.0, 1.0]) + 0.5)))
    out["synthetic"] = (X, (rng.uniform(size=100) < p).astype(int))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--prior-std", type=float, default=1.0)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--case", nargs="*", default=None)
    args = parser.parse_args()
    command = "python benchmarks/laplace_evidence.py " + " ".join(sys.argv[1:])

    from skbnn import BayesianMLPClassifier
    from skbnn.methods import SMC, Laplace
    from skbnn.priors import GaussianPrior

    for name, (X, y) in cases().items():
        if args.case and name not in args.case:
            continue

        def fit(method, n_samples, seed, X=X, y=y):
            est = BayesianMLPClassifier(
                hidden_layer_sizes=(), method=method, prior=GaussianPrior(std=args.prior_std),
                n_samples=n_samples, random_state=seed, n_jobs=args.n_jobs,
            )  # fmt: skip
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X, y)
            return est.log_evidence_, time.perf_counter() - start

        lap, lap_time = fit(Laplace(optimize_prior=False), 100, 0)
        print(json.dumps({"case": name, "method": "laplace", "log_evidence": lap,
                          "fit_time": lap_time}), flush=True)  # fmt: skip
        smc = []
        for seed in range(args.seeds):
            ev, t = fit(SMC(), args.particles, seed)
            smc.append(ev)
            print(json.dumps({"case": name, "method": "smc", "seed": seed, "log_evidence": ev,
                              "fit_time": t}), flush=True)  # fmt: skip
        smc = np.array(smc)
        se = smc.std(ddof=1) / np.sqrt(len(smc))
        print(
            json.dumps(
                {
                    "summary": name,
                    "n_rows": int(len(y)),
                    "n_classes": int(len(np.unique(y))),
                    "prior_std": args.prior_std,
                    "laplace": round(float(lap), 4),
                    "smc_mean": round(float(smc.mean()), 4),
                    "smc_se": round(float(se), 4),
                    "laplace_minus_smc": round(float(lap - smc.mean()), 4),
                    "particles": args.particles,
                    "seeds": args.seeds,
                    "command": command,
                    **machine(),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
