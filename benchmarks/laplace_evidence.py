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
    python benchmarks/laplace_evidence.py --report benchmarks/results/laplace_evidence.jsonl

``--report`` prints doc/optimization.md's table of a results file: per case, its latest
summary and the fit times of the fits before it.
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


# the case's description in the table, which the results lines do not keep
LABELS = {
    "breast_cancer": "breast_cancer (5 features, binary)",
    "iris": "iris (3 classes)",
    "synthetic": "synthetic (3 features, well separated)",
}


def _range(values, fmt) -> str:
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def _seconds(v: float) -> str:
    return f"{v:.1f}" if v < 10 else f"{v:.0f}"


def report(path) -> str:
    """doc/optimization.md's table of the results file ``path``."""
    rows, fits = {}, {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        if "summary" in r:
            rows[r["summary"]] = (r, fits.pop(r["summary"], []))
        else:
            fits.setdefault(r["case"], []).append(r)
    out = ["| data | rows | Laplace | SMC | Laplace - SMC | Laplace fit | SMC fit |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, (r, runs) in rows.items():
        laplace = [f["fit_time"] for f in runs if f["method"] == "laplace"]
        smc = [f["fit_time"] for f in runs if f["method"] == "smc"]
        cells = [LABELS.get(name, name), r["n_rows"], f"{r['laplace']:.3f}",
                 f"{r['smc_mean']:.3f} +- {r['smc_se']:.3f}", f"{r['laplace_minus_smc']:+.3f}",
                 f"{_range(laplace, '{:.1g}'.format)} s", f"{_range(smc, _seconds)} s"]  # fmt: skip
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--prior-std", type=float, default=1.0)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--case", nargs="*", default=None)
    parser.add_argument("--report", default=None, metavar="FILE",
                        help="print the table of this results file")  # fmt: skip
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
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
