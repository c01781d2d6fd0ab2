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
    python benchmarks/crossover.py --report benchmarks/results/crossover.jsonl

``--report`` prints doc/choosing.md's table: each cell's latest line, its fit time and
test log-likelihood, the best of a row in bold, "(warns)" where the fit warned.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _uci import emitter, read_results, standardize  # noqa: E402
from scale import provenance, timed_fit, warm_up  # noqa: E402

METHODS = ("ensemble", "sghmc", "laplace_kron", "vi", "swag")


#: The report's column of each method.
LABELS = {"ensemble": "ensemble", "sghmc": "SGHMC", "laplace_kron": "Kronecker Laplace",
          "vi": "VI", "swag": "SWAG"}  # fmt: skip


def report(path) -> str:
    """doc/choosing.md's table of a results file."""
    lines = read_results(path)
    latest = {(r["rows"], r["width"], r["method"]): r for r in lines}
    names = [m for m in METHODS if any(k[2] == m for k in latest)]
    out = ["| rows, width (parameters) | " + " | ".join(LABELS[m] for m in names) + " |",
           "|---" * (len(names) + 1) + "|"]  # fmt: skip
    for rows, width in dict.fromkeys(k[:2] for k in latest):
        cells = [latest.get((rows, width, m)) for m in names]
        fitted = [r for r in cells if r]
        best = max(r["test_ll"] for r in fitted)
        # the ensemble's network has a noise output per row, the others' one noise
        sizes = sorted({r["n_params"] for r in fitted})
        size = f"{sizes[0]:,}" if len(sizes) == 1 else f"{sizes[0]:,}-{sizes[-1]:,}"
        row = [f"10^{len(str(rows)) - 1}, {width} ({size})"]
        for r in cells:
            if r is None:
                row.append("")
                continue
            ll = f"{r['test_ll']:.3f}"
            ll = f"**{ll}**" if ll == f"{best:.3f}" else ll
            seconds = f"{r['fit_time']:.0f}" if r["fit_time"] >= 100 else f"{r['fit_time']:.1f}"
            row.append(f"{seconds} s, {ll}" + (" (warns)" if r["warnings"] else ""))
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


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
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    emit = emitter(args.out)
    info = provenance()
    for rows in args.rows:
        for width in args.widths:
            for name in args.methods:
                emit({**info, **cell(rows, width, name, args.test_rows)})


if __name__ == "__main__":
    main()
