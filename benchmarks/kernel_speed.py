"""Single-thread speed of the log-posterior gradient kernel, the sampler's inner loop.

Boston-sized problem: 455 rows, a 13-10-1 network, Gaussian likelihood, in the layout the
samplers use (:meth:`skbnn.target.Target.kernel_target` with ``padded=True``: 456 rows, the
last of weight zero). Evaluations are timed inside a numba loop (no Python dispatch), best
of several repeats. Prints one JSON line per activation::

    python benchmarks/kernel_speed.py

Each line also gives the kernel's arithmetic rate against this core's measured FMA peak:

* ``flops_per_eval`` counts the multiply-adds of the three matrix products of a gradient, two
  flops each, per row: the forward pass (``n_in * n_out`` per layer), the weight gradients
  (the same again) and the deltas propagated below every hidden layer (``n_in * n_out`` for
  each layer but the first; the inputs get no delta). 290 multiply-adds per row for 13-10-1,
  263,900 flops per gradient over 455 rows. Not counted: the bias additions and bias
  gradient sums, the activation and its derivative, the likelihood and the prior. They are
  a few per cent of the arithmetic for ReLU; for tanh and logistic the activation (an
  exponential and a division per unit and row, dozens of operations) is real work that the
  count leaves out, so their ``share_of_peak`` understates how busy the core is.
* ``peak_gflops_measured`` is this core's float64 FMA throughput, measured by a numba loop
  over an L1-resident array whose vectorized body carries independent FMA chains
  (:func:`fma_peak_gflops`). It always measures the host's code generation: when
  ``NUMBA_CPU_NAME`` or ``NUMBA_CPU_FEATURES`` is set (``generic`` emits no FMA and no AVX),
  it runs in a subprocess without them, so ``share_of_peak`` stays the share of what the
  hardware can do. ``numba_cpu_name`` says how the kernels themselves were compiled.
* ``gflops = flops_per_eval * grad_evals_per_s``; ``share_of_peak = gflops / peak``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


# "contract" turns x * b + c into one FMA; nothing may be reassociated or removed
@njit(nogil=True, fastmath={"contract"})
def _fma_chains(acc, b, c, reps):
    # Four quarters of acc advance together: each loop iteration loads one 4-wide vector of
    # each, applies 8 dependent FMAs to each (32 FMAs, four independent chains) and stores
    # them back. Successive iterations are independent, so the core overlaps them: with
    # acc in L1 the loop is bound by the FMA units, not by the loads and stores.
    q = acc.shape[0] // 4
    a0 = acc[:q]
    a1 = acc[q : 2 * q]
    a2 = acc[2 * q : 3 * q]
    a3 = acc[3 * q :]
    for _ in range(reps):
        for t in range(q):
            x = a0[t]
            y = a1[t]
            z = a2[t]
            w = a3[t]
            for _k in range(4):
                x = x * b + c
                y = y * b + c
                z = z * b + c
                w = w * b + c
                x = x * b + c
                y = y * b + c
                z = z * b + c
                w = w * b + c
            a0[t] = x
            a1[t] = y
            a2[t] = z
            a3[t] = w
    return acc.sum()


def fma_peak_gflops(repeats: int = 15) -> float:
    """Float64 FMA throughput of this core in this process's code generation (GFLOP/s, an
    FMA counting two): best of ``repeats`` runs of :func:`_fma_chains` over 128 accumulators
    (1 KiB), 0.1 G FMAs each (many short runs, because a busy sibling core lowers some of
    them). ``x * 0.999999 + 1e-6`` stays near 1: no overflow, no subnormals."""
    acc = np.ones(128)
    _fma_chains(acc, 0.999999, 1e-6, 1)
    reps = 100_000_000 // (acc.size * 8)
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        _fma_chains(acc, 0.999999, 1e-6, reps)
        best = min(best, time.perf_counter() - start)
    return 2 * 8 * acc.size * reps / best / 1e9


def host_fma_peak_gflops() -> float:
    """:func:`fma_peak_gflops` for the host CPU, in a subprocess when the environment
    restricts numba's code generation (``NUMBA_CPU_NAME``, ``NUMBA_CPU_FEATURES``)."""
    restricted = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")
    if not any(k in os.environ for k in restricted):
        return fma_peak_gflops()
    env = {k: v for k, v in os.environ.items() if k not in restricted}
    out = subprocess.run(
        [sys.executable, __file__, "--peak"], env=env, check=True, capture_output=True, text=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def gradient_flops(sizes) -> int:
    """Flops of one gradient per row, as counted in the module docstring: two per
    multiply-add of the forward pass, the weight gradients and the deltas below hidden
    layers."""
    products = [n_in * n_out for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True)]
    return 2 * (2 * sum(products) + sum(products[1:]))


def main(n_rows: int = 455, n_features: int = 13, hidden=(10,), repeats: int = 7) -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_rows, n_features))
    y = rng.standard_normal(n_rows)
    peak = host_fma_peak_gflops()
    flops = gradient_flops((n_features, *hidden, 1)) * n_rows
    for activation in ("relu", "tanh", "logistic", "identity"):
        target = Target(X, y, hidden, activation, "gaussian", prior=GaussianPrior())
        # the samplers' layout: rows padded to a multiple of 8 and cache-line aligned
        tgt, ws = target.kernel_target(padded=True), target.workspace(padded=True)
        grad, stats = np.empty(target.n_params), np.empty(3)
        thetas = target.sample_prior(rng, 1000)
        _loop(thetas, tgt, ws, grad, stats, 10)
        n = 20000
        best = np.inf
        for _ in range(repeats):
            start = time.perf_counter()
            _loop(thetas, tgt, ws, grad, stats, n)
            best = min(best, time.perf_counter() - start)
        gflops = flops * n / best / 1e9
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
                    "flops_per_eval": flops,
                    "gflops": round(gflops, 2),
                    "peak_gflops_measured": round(peak, 2),
                    "share_of_peak": round(gflops / peak, 3),
                    "numba_cpu_name": os.environ.get("NUMBA_CPU_NAME", "host"),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["--peak"]:
        print(fma_peak_gflops())
    else:
        main()
