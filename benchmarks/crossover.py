"""Where the methods for many rows win: test log-likelihood and fit time by rows and width.

The measurement behind ``method="auto"``'s choice among the methods that scale. Data:
scikit-learn's ``make_friedman1`` (10 features, 5 of them used, Gaussian noise of sd 1:
homoscedastic, so no method gains from a noise model the others lack), standardized on the
training rows; 10,000 test rows. Each cell fits ``BayesianMLPRegressor(hidden_layer_sizes=
(width, width), method=M, random_state=0, n_jobs=2)`` at the method's defaults, after a
200-row fit of the same method and width that compiles its kernels (the time is warm), and
prints a JSON line: fit time, test log-likelihood and RMSE (the true density's are -1.419
and 1.0), the network's parameters and the warnings raised::

    python benchmarks/crossover.py --rows 10000 100000 --widths 25 100 \\
        --out benchmarks/results/crossover.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _uci import emitter, standardize  # noqa: E402
from scale import provenance, timed_fit, warm_up  # noqa: E402

METHODS = ("ensemble", "sghmc", "laplace_kron", "vi", "swag")


def _method(name: str):
    from skbnn.methods import Laplace

    return Laplace(hessian="kron") if name == "laplace_kron" else name


def cell(rows: int, width: int, name: str, test_rows: int) -> dict:
    from sklearn.datasets import make_friedman1

    from skbnn import BayesianMLPRegressor
    from skbnn.model_selection import log_predictive_scorer

    X, y = make_friedman1(rows + test_rows, n_features=10, noise=1.0, random_state=rows)
    X_train, X_test = standardize(X[:rows], X[rows:])
    y_train, y_test = y[:rows], y[rows:]

    def model():
        return BayesianMLPRegressor(hidden_layer_sizes=(width, width), method=_method(name),
                                    random_state=0, n_jobs=2)  # fmt: skip

    warm_up(model(), X_train, y_train)
    reg = model()
    fit_time, caught = timed_fit(reg, X_train, y_train)
    mean = reg.predict(X_test)
    return {
        "rows": rows,
        "width": width,
        "n_params": int(reg.posterior_.thetas.shape[1]),
        "method": name,
        "fit_time": fit_time,
        "test_ll": float(log_predictive_scorer(reg, X_test, y_test)),
        "rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
        "warnings": caught,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--widths", type=int, nargs="+", default=[25, 100])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--test-rows", type=int, default=10_000)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args()
    emit = emitter(args.out)
    info = provenance()
    for rows in args.rows:
        for width in args.widths:
            for name in args.methods:
                emit({**info, **cell(rows, width, name, args.test_rows)})


if __name__ == "__main__":
    main()
