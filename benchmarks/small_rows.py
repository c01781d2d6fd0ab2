"""A method's defaults on a few rows, warm: the seconds of a fit once its kernels are compiled.

On a few rows a fit's cost is the Python around its kernels, not their arithmetic: a kernel
called once per epoch spends most of each call in numba's typing of its arguments. Fits
the first ``--rows`` diabetes rows (standardized target), once to compile, then
``--repeats`` times with other seeds, and prints one JSON line per method with the median.
Run it against another checkout with ``PYTHONPATH`` (``--label`` names the run)::

    python benchmarks/small_rows.py --methods sghmc swag --label after \\
        --out benchmarks/results/small_rows.jsonl
    PYTHONPATH=../before python benchmarks/small_rows.py --label before ...
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _uci import emitter, machine, package_commit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["sghmc", "swag"])
    parser.add_argument("--rows", type=int, default=11)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--label", default=None)
    parser.add_argument("--conditions", default=None, help="idle or loaded, for the record")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args()

    from sklearn.datasets import load_diabetes

    from skbnn import BayesianMLPRegressor

    X, y = load_diabetes(return_X_y=True)
    X, y = X[: args.rows], y[: args.rows]
    y = (y - y.mean()) / y.std()
    emit = emitter(args.out)
    for method in args.methods:
        seconds = []
        with warnings.catch_warnings():
            # a few rows: the methods' warnings about them are not what is timed
            warnings.simplefilter("ignore")
            BayesianMLPRegressor(method=method, random_state=0).fit(X, y)
            for seed in range(1, args.repeats + 1):
                start = time.perf_counter()
                BayesianMLPRegressor(method=method, random_state=seed).fit(X, y)
                seconds.append(time.perf_counter() - start)
        emit({
            "method": method, "rows": args.rows, "label": args.label,
            "fit_s_median": round(float(np.median(seconds)), 3),
            "fit_s": [round(s, 3) for s in seconds], "commit": package_commit(),
            "conditions": args.conditions, **machine(),
            "command": "python benchmarks/small_rows.py " + " ".join(sys.argv[1:]),
        })  # fmt: skip


if __name__ == "__main__":
    main()
