"""Peak memory and time of Kronecker Laplace's K-FAC factors on MNIST's network.

Kronecker Laplace computes the K-FAC factors of the likelihood's Gauss-Newton matrix
(:func:`skbnn._kron.likelihood_factors`) at the MAP, and again at each empirical-Bayes
update. This times one such computation on MNIST's first ``--rows`` training images and
the ``784 -> 400 -> 600 -> 10`` ReLU softmax network of ``benchmarks/mnist.py``, at
weights drawn from ``N(0, 0.05^2)`` (the factors' size and cost do not depend on where),
with ``--n-jobs`` threads, and reports the process's peak resident memory before and after
it: their difference is what the computation held at once beyond the data. The trace of
the first layer's input factor identifies the result across versions, and the line
names the commit of the skbnn it imported (``PYTHONPATH`` may point at another checkout).

    python benchmarks/mnist_kfac_memory.py --rows 60000 \\
        --out benchmarks/results/mnist_kfac_memory.jsonl

``--report FILE`` prints doc/optimization.md's table of a results file, a row per line
(the skbnn commit that ran, the memory held and the time), without a computation::

    python benchmarks/mnist_kfac_memory.py --report benchmarks/results/mnist_kfac_memory.jsonl
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _mnist import load_mnist  # noqa: E402
from _uci import emitter, machine  # noqa: E402


def _peak_mb() -> float:
    # Linux reports the peak resident set in kilobytes
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(path) -> str:
    """A markdown row per line of the results file ``path``: the skbnn commit, the memory
    the computation held beyond the data, and its time."""
    out = ["| skbnn | memory held beyond the data | time |", "|---|---|---|"]
    for text in Path(path).read_text().splitlines():
        r = json.loads(text)
        out.append(f"| {r['skbnn_commit']} | {r['held_mb']:,.0f} MB | {r['seconds']:.1f} s |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60_000, help="the first ROWS images")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/mnist")
    parser.add_argument("--out", default=None, help="append the JSON line to this file")
    parser.add_argument("--report", default=None, metavar="FILE",
                        help="print the table of this results file (no computation)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return

    import skbnn
    from skbnn._kron import likelihood_factors
    from skbnn.log_posterior import LogPosterior
    from skbnn.posterior import ForwardPass

    X, y, _, _ = load_mnist(args.data_dir)
    X, y = X[: args.rows], y[: args.rows]
    target = LogPosterior(X, np.eye(10)[y], (400, 600), "relu", "categorical")
    theta = 0.05 * np.random.default_rng(0).standard_normal(target.n_params)
    net = ForwardPass(target.layout, target.activation_code, args.n_jobs)
    before = _peak_mb()
    start = time.perf_counter()
    factors = likelihood_factors(target, net, theta, 0)
    seconds = time.perf_counter() - start
    after = _peak_mb()
    emitter(args.out)({
        "rows": args.rows, "n_jobs": args.n_jobs, "seconds": seconds,
        "peak_before_mb": before, "peak_after_mb": after, "held_mb": after - before,
        "trace_A0": float(np.trace(factors.A[0])), "skbnn": skbnn.__version__,
        "skbnn_commit": subprocess.run(
            ["git", "-C", str(Path(skbnn.__file__).parent), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True,
        ).stdout.strip(),
        **machine(),
        "command": "python benchmarks/mnist_kfac_memory.py " + " ".join(sys.argv[1:]),
    })  # fmt: skip


if __name__ == "__main__":
    main()
