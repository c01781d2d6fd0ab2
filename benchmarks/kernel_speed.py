"""Single-thread speed of the log-posterior gradient kernel, the sampler's inner loop.

Boston-sized problem: 455 rows, a 13-10-1 network, Gaussian likelihood. Evaluations are
timed inside a numba loop (no Python dispatch), best of several repeats. Prints one JSON
line per activation::

    python benchmarks/kernel_speed.py
"""

from __future__ import annotations

import json
import time

import numpy as np
from numba import njit

from skbnn.kernels import network as knet
from skbnn.priors import GaussianPrior
from skbnn.target import Target


@njit(nogil=True)
def _loop(thetas, tgt, ws, grad, stats, n):
    # Cycling over many parameter vectors, as a sampler does: at one fixed vector the CPU's
    # branch predictor learns every data-dependent branch and flatters the kernel (a branchy
    # ReLU derivative once ran 2x faster here than in real fits).
    total = 0.0
    m = thetas.shape[0]
    for i in range(n):
        total += knet.logp_grad(thetas[i % m], tgt, ws, grad, stats, True)
    return total


def main(n_rows: int = 455, n_features: int = 13, hidden=(10,), repeats: int = 7) -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_rows, n_features))
    y = rng.standard_normal(n_rows)
    for activation in ("relu", "tanh", "logistic", "identity"):
        target = Target(X, y, hidden, activation, "gaussian", prior=GaussianPrior())
        tgt, ws = target.kernel_target(), target.workspace()
        grad, stats = np.empty(target.n_params), np.empty(3)
        thetas = target.sample_prior(rng, 1000)
        _loop(thetas, tgt, ws, grad, stats, 10)
        n = 20000
        best = np.inf
        for _ in range(repeats):
            start = time.perf_counter()
            _loop(thetas, tgt, ws, grad, stats, n)
            best = min(best, time.perf_counter() - start)
        print(
            json.dumps(
                {
                    "benchmark": "gradient_kernel",
                    "activation": activation,
                    "network": f"{n_features}-{'-'.join(map(str, hidden))}-1",
                    "n_rows": n_rows,
                    "threads": 1,
                    "distinct_parameter_vectors": thetas.shape[0],
                    "grad_evals_per_s": round(n / best),
                    "us_per_eval": round(1e6 * best / n, 2),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
