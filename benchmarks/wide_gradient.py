"""The log posterior's gradient on many rows, for narrow and wide networks.

The gradient kernel takes a layer whose inputs and outputs both number at least
``skbnn.kernels.gemm.BLAS_MIN_WIDTH`` through BLAS's matrix product, the others through the
hand-written passes. This times one full-data gradient (``LogPosterior.evaluator()``, the
call Laplace's polish and L-BFGS make) for each network of ``--hidden`` and activation on
``--rows`` rows of ``--features`` standard normal features, single-threaded (one block of
rows), median of ``--repeats`` calls after a warm one. One JSON line per network. To see
what the BLAS path changes, run it on a commit before it and on one after::

    python benchmarks/wide_gradient.py --out benchmarks/results/wide_gradient.jsonl
    git worktree add /tmp/before cbe442d
    (cd /tmp/before && PYTHONPATH=. python "$OLDPWD/benchmarks/wide_gradient.py" \\
        --out "$OLDPWD/benchmarks/results/wide_gradient.jsonl")
    python benchmarks/wide_gradient.py --report benchmarks/results/wide_gradient.jsonl

``--report FILE`` prints doc/performance.md's table: per shape, the latest line of the
commit before the BLAS path (``BEFORE``) against the latest line of any other commit.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, machine, read_results  # noqa: E402

#: The last commit without the BLAS path.
BEFORE = "cbe442d"


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "skbnn"], capture_output=True,
                           text=True).stdout.strip()  # fmt: skip
    return out.stdout.strip() + ("+changes" if dirty else "")


def report(path) -> str:
    """doc/performance.md's table of a results file: before and after the BLAS path."""
    lines = read_results(path)
    before, after = {}, {}
    for r in lines:
        key = (r["rows"], r["features"], r["hidden"], r["activation"])
        (before if r["commit"].startswith(BEFORE) else after)[key] = r
    out = ["| rows x features | network | before (ms) | after (ms) | speed-up |",
           "|---|---|---|---|---|"]  # fmt: skip
    for key in after:
        if key not in before:
            continue
        rows, features, hidden, activation = key
        old, new = before[key]["ms_per_gradient"], after[key]["ms_per_gradient"]
        digits = 1 if new >= 1 else 2 if new >= 0.1 else 3
        widths = [features, *map(int, hidden.split("x")), 1]
        # the layers BLAS takes: inputs and outputs both at least BLAS_MIN_WIDTH (16)
        wide = any(min(a, b) >= 16 for a, b in zip(widths[:-1], widths[1:], strict=False))
        name = f"{hidden} {'ReLU' if activation == 'relu' else activation}"
        name += "" if wide else " (no wide layer)"
        speedup = f"**{old / new:.1f}x**" if wide else "-"
        out.append(f"| {rows:,} x {features} | {name} | {old:.{digits}f} | {new:.{digits}f} | "
                   f"{speedup} |")  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--features", type=int, default=9)
    parser.add_argument("--hidden", nargs="+", default=["100x100", "50x50", "100", "50", "10x10"])
    parser.add_argument("--activations", nargs="+", default=["relu", "tanh"])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    emit = emitter(args.out)

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
            emit({**meta, "hidden": spec, "activation": activation,
                  "n_params": int(target.n_params), "first_call_s": first,
                  "ms_per_gradient": 1e3 * float(np.median(times))})  # fmt: skip


if __name__ == "__main__":
    main()
