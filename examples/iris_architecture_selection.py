"""Choosing a network's architecture by its model evidence, on iris.

The experiment of the talk "Uncertainty Quantification and Model Selection in Neural
Networks Using Adaptive Annealed SMC": ten candidate architectures, each fitted by adaptive
annealed SMC, which gives the posterior and the evidence p(y | architecture). The evidence
trades fit against complexity (an Occam factor), so it ranks architectures from the
training data alone, and the posterior model probabilities weigh the candidates'
predictions into one model average. Prints a table of the candidates (parameters,
log-evidence with its spread over seeds, test accuracy), the model average's test accuracy,
and the wall time. Run::

    python examples/iris_architecture_selection.py [--seeds 3] [--particles 500]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier
from skbnn.methods import SMC
from skbnn.model_selection import BayesianModelAverage
from skbnn.priors import GaussianPrior

CANDIDATES = [
    {"hidden_layer_sizes": [(1,), (2,), (3,), (4,), (5,), (1, 1), (2, 2), (3, 3), (4, 4)],
     "activation": ["relu"]},
    {"hidden_layer_sizes": [(2, 2)], "activation": ["logistic"]},
]  # fmt: skip


def n_params(n_in: int, hidden: tuple[int, ...], n_out: int) -> int:
    """Weights and biases of a fully connected network."""
    sizes = (n_in, *hidden, n_out)
    return sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="independent SMC runs")
    parser.add_argument("--particles", type=int, default=500)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()

    X, y = load_iris(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, stratify=y, random_state=0
    )
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

    start = time.perf_counter()
    fits = []
    for seed in range(args.seeds):
        # N(0, 1) with fan-in scaling: the prior of the recorded run (README, doc/index.md);
        # the classifier's default is std 3, which rescales every evidence
        template = BayesianMLPClassifier(
            method=SMC(),
            prior=GaussianPrior(std=1.0),
            n_samples=args.particles,
            random_state=seed,
            n_jobs=args.n_jobs,
        )
        fits.append(BayesianModelAverage(template, CANDIDATES).fit(X_train, y_train))
    wall = time.perf_counter() - start

    log_z = np.array([bma.log_evidences_ for bma in fits])  # (seeds, candidates)
    probs = np.array([bma.model_probabilities_ for bma in fits])
    accuracy = np.array([[est.score(X_test, y_test) for est in bma.estimators_] for bma in fits])
    print(f"iris: {len(y_train)} training rows, {len(y_test)} test rows; SMC with "
          f"{args.particles} particles, {args.seeds} seeds\n")  # fmt: skip
    print(f"{'architecture':<22}{'params':>7}{'log-evidence':>20}{'P(model | y)':>14}"
          f"{'test accuracy':>15}")  # fmt: skip
    for j, params in enumerate(fits[0].candidate_params_):
        hidden = params["hidden_layer_sizes"]
        name = f"{hidden} {params['activation']}"
        k = n_params(X.shape[1], hidden, 3)
        z = f"{log_z[:, j].mean():.2f} +- {log_z[:, j].std(ddof=1) if args.seeds > 1 else 0:.2f}"
        print(f"{name:<22}{k:>7}{z:>20}{probs[:, j].mean():>14.3f}"
              f"{100 * accuracy[:, j].mean():>14.2f}%")  # fmt: skip
    bma_acc = np.array([bma.score(X_test, y_test) for bma in fits])
    best = [str(bma.best_params_["hidden_layer_sizes"]) for bma in fits]
    print(
        f"\nmodel average (weights P(model | y)): test accuracy "
        f"{100 * bma_acc.mean():.2f}% (per seed: {', '.join(f'{100 * a:.2f}' for a in bma_acc)})"
    )
    print(f"most probable architecture per seed: {', '.join(best)}")
    print(f"wall time for all {args.seeds * len(fits[0].candidate_params_)} fits: {wall:.1f} s "
          "(numba compilation included on a first run)")  # fmt: skip


if __name__ == "__main__":
    main()
