"""The log posterior's gradient on many rows, for narrow and wide networks.

The gradient kernel takes a layer whose inputs and outputs both number at least
``skbnn.kernels.gemm.BLAS_MIN_WIDTH`` through BLAS's matrix product, the others through the
hand-written passes. This times one full-data gradient (``LogPosterior.evaluator()``, the
call Laplace's polish and L-BFGS make) for each network of ``--hidden`` and activation on
``--rows`` rows of ``--features`` standard normal features, single-threaded (one block of
rows), median of ``--repeats`` calls after a warm one. One JSON line per network. To see
what the BLAS path changes, run it on a commit before it and on one after::

    python benchmarks/wide_gradient.py
    git worktree add /tmp/before cbe442d
    (cd /tmp/before && PYTHONPATH=. python "$OLDPWD/benchmarks/wide_gradient.py")
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import machine  # noqa: E402


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "skbnn"], capture_output=True,
                           text=True).stdout.strip()  # fmt: skip
    return out.stdout.strip() + ("+changes" if dirty else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--features", type=int, default=9)
    parser.add_argument("--hidden", nargs="+", default=["100x100", "50x50", "100", "50", "10x10"])
    parser.add_argument("--activations", nargs="+", default=["relu", "tanh"])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()

    from skbnn.log_posterior import LogPosterior
    from skbnn.posterior import single_threaded_blas
    from skbnn.priors import GaussianPrior

    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.rows, args.features))
    y = np.sin(X[:, :1]) + 0.1 * rng.standard_normal((args.rows, 1))
    meta = {"benchmark": "wide_gradient", "commit": _commit(), "machine": machine(),
            "rows": args.rows, "features": args.features}  # fmt: skip
    for spec in args.hidden:
        hidden = tuple(int(h) for h in spec.split("x"))
        for activation in args.activations:
            target = LogPosterior(X, y, hidden, activation, "gaussian", prior=GaussianPrior())
            evaluate = target.evaluator()
            theta = 0.1 * rng.standard_normal(target.n_params)
            with single_threaded_blas():
                start = time.perf_counter()
                evaluate(theta)
                first = time.perf_counter() - start
                times = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    evaluate(theta)
                    times.append(time.perf_counter() - start)
            print(json.dumps({**meta, "hidden": spec, "activation": activation,
                              "n_params": int(target.n_params), "first_call_s": first,
                              "ms_per_gradient": 1e3 * float(np.median(times))}),
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
