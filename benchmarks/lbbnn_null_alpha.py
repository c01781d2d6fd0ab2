"""How large a null input's inclusion probability gets, as a function of its t statistic.

The data and the fit of ``tests/test_lbbnn.py::test_inclusion_recovers_a_sparse_linear_truth``
(2000 rows, 8 standard normal inputs, ``y = 1.5 x1 - x4 + 0.7 x6 + N(0, 0.5^2)``, a linear
LBBNN with ``learning_rate_init=0.01, max_iter=500``). Per fit, the OLS t statistic of every
input and its inclusion probability ``alpha``. The null inputs' ``|t|`` is rarely above 3,
so ``--planted`` adds ``t * 0.5 / sqrt(2000) * x2`` to ``y`` to put x2's t near each value
given, on the same ``--planted-seeds`` data sets (seeds 1000, 1001, ...) for every value.
x2 is then not null, but the fit sees only the data: what a null input with that ``|t|``
would get. The summary is the smallest and largest ``alpha`` of the non-true inputs per bin
of ``|t|``: the relation from which the test's null threshold and its false-alarm
probability follow.

    python benchmarks/lbbnn_null_alpha.py --seeds 20 --planted 0 1 2 3 3.25 3.5 3.75 4 4.5 5 6
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _uci import emitter, machine  # noqa: E402
from test_lbbnn import _sparse_linear  # noqa: E402

TRUE = (0, 3, 5)


def ols_t(X, y) -> np.ndarray:
    """The OLS t statistics of the columns of ``X`` (an intercept fitted, not returned)."""
    A = np.column_stack([np.ones(len(y)), X])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = y - A @ coef
    s2 = resid @ resid / (len(y) - A.shape[1])
    return (coef / np.sqrt(s2 * np.diag(np.linalg.inv(A.T @ A))))[1:]


def fit_alpha(X, y, seed: int) -> np.ndarray:
    from skbnn import BayesianMLPRegressor
    from skbnn.methods import LBBNN

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = BayesianMLPRegressor((), method=LBBNN(learning_rate_init=0.01, max_iter=500),
                                   random_state=seed).fit(X, y)  # fmt: skip
    return reg.inclusion_probabilities_[0][:, 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="fits on the test's own data")
    parser.add_argument("--planted", type=float, nargs="*", default=[],
                        help="t values to plant on x2")  # fmt: skip
    parser.add_argument("--planted-seeds", type=int, default=5, help="fits per planted t")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args()
    emit = emitter(args.out)
    runs = [(seed, 0.0) for seed in range(args.seeds)]
    runs += [(1000 + k, t) for t in args.planted for k in range(args.planted_seeds)]
    pairs = []
    for seed, planted in runs:
        X, y = _sparse_linear(seed)
        y = y + planted * 0.5 / np.sqrt(len(y)) * X[:, 1]
        t, alpha = ols_t(X, y), fit_alpha(X, y, seed)
        emit({"seed": seed, "planted_t": planted, "t": t.round(3).tolist(),
              "alpha": alpha.round(5).tolist()})  # fmt: skip
        pairs += [(abs(t[j]), alpha[j]) for j in range(8) if j not in TRUE]
    pairs = np.array(pairs)
    edges = np.arange(0.0, np.ceil(pairs[:, 0].max() * 4) / 4 + 0.25, 0.25)
    bins = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        a = pairs[(pairs[:, 0] >= lo) & (pairs[:, 0] < hi), 1]
        if a.size:
            bins.append({"abs_t": [float(lo), float(hi)], "n": int(a.size),
                         "alpha_min": float(a.min()), "alpha_max": float(a.max())})  # fmt: skip
    above = pairs[pairs[:, 1] > 0.5, 0]
    command = "python benchmarks/lbbnn_null_alpha.py " + " ".join(sys.argv[1:])
    emit({"summary": True, "bins": bins,
          "smallest_abs_t_with_alpha_above_0.5": float(above.min()) if above.size else None,
          **machine(), "command": command})  # fmt: skip


if __name__ == "__main__":
    main()
