"""Single-thread speed of the log-posterior gradient kernel, the sampler's inner loop.

Boston-sized problem: 455 rows, a 13-10-1 network, Gaussian likelihood, in the layout the
samplers use (:meth:`skbnn.log_posterior.LogPosterior.kernel_target` with
``padded=True``: 456 rows, the last of weight zero). Evaluations are timed inside a numba
loop (no Python dispatch), best of several repeats. Prints one JSON line per activation::

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
* ``conventional_flops_per_eval`` is the usual estimate of a training step's cost, six flops
  per parameter (weights and biases) and row: two for the forward pass, four for the
  backward (as in "6ND" for transformers). It is the count behind issue 22's "one gradient
  of this network on 455 rows is about 0.41 MFLOP" (6 x 151 x 455 = 412,230), and it
  overstates the work: the first layer needs no delta for the inputs. So
  ``share_of_peak_conventional = conventional_flops_per_eval * grad_evals_per_s / peak``
  is the gradient rate against that issue's limit (peak / 0.41 MFLOP gradients/s), and
  1.56x ``share_of_peak`` for 13-10-1. Both are printed; ``share_of_peak`` is the stricter.

With ``--parts``, one more line per activation times each step of the gradient alone, in
the same layout and loop (microseconds per call): the first dense layer, the activation
pass, the output layer, the likelihood and its delta, the prior, the output layer's weight
gradient, the delta below it and the first layer's weight gradient, with their sum beside
the whole gradient's time::

    python benchmarks/kernel_speed.py --parts

``--out`` appends the gradient lines to ``benchmarks/results/kernel_speed.jsonl``, with the
run's commit, machine, date and load, which the README's figure is rendered from.
``--report`` prints doc/performance.md's table of results files (no timing)::

    python benchmarks/kernel_speed.py --report benchmarks/results/kernel_speed.jsonl
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
from numba import njit

from skbnn.kernels import backprop as kbackprop
from skbnn.kernels import density as knet
from skbnn.kernels import layers as klayers
from skbnn.kernels import likelihoods as klik
from skbnn.kernels import priors as kpriors
from skbnn.log_posterior import LogPosterior
from skbnn.priors import GaussianPrior

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _uci import read_results  # noqa: E402


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


#: The steps of a one-hidden-layer gradient that ``--parts`` times, in the kernel's order.
PARTS = (
    "dense_first",
    "activation",
    "dense_output",
    "likelihood",
    "prior",
    "wgrad_output",
    "delta_below",
    "wgrad_first",
)


@njit(nogil=True)
def _part_loop(thetas, tgt, ws, grad, stats, part, n):
    # the step ``part`` of logp_grad (index into PARTS) for a network with one hidden layer,
    # on the workspace a full gradient leaves: activations, output, then two delta buffers
    XT, sizes, offsets, cfg = tgt.XT, tgt.sizes, tgt.offsets, tgt.cfg[0]
    rows = XT.shape[0] // sizes[0]
    n_in, n_hid = sizes[0], sizes[1]
    out = n_hid * rows
    delta = out + rows
    nxt = delta + n_hid * rows
    b_first = offsets[0] + n_in * n_hid
    b_out = offsets[1] + n_hid
    n_w = thetas.shape[1] - cfg.n_noise
    total = 0.0
    m = thetas.shape[0]
    for i in range(n):
        theta = thetas[i % m]
        if part == 0:
            klayers._dense(XT, 0, n_in, theta, offsets[0], b_first, ws, 0, n_hid, rows)
        elif part == 1:
            klayers._activate(ws, 0, n_hid * rows, cfg.activation)
        elif part == 2:
            klayers._dense(ws, 0, n_hid, theta, offsets[1], b_out, ws, out, 1, rows)
        elif part == 3:
            # the weighted row count too, which logp_grad sums once per evaluation
            sw = knet.weight_sum(tgt)
            total += klik._loglik_delta(
                ws,
                out,
                tgt.YT,
                tgt.W,
                sw,
                tgt.tau,
                cfg.likelihood,
                1,
                rows,
                ws,
                delta,
                stats,
                cfg,
                cfg.noise_marginal,
            )
        elif part == 4:
            total += kpriors.log_prior(
                theta, tgt.prior_mean, tgt.prior_scale, cfg, n_w, grad, True, cfg.prior
            )
        elif part == 5:
            kbackprop._wgrad(
                ws[:out], n_hid, ws[delta : delta + rows], 1, rows, grad, offsets[1], b_out, 1.0
            )
        elif part == 6:
            kbackprop._delta_below(
                theta,
                ws,
                ws[delta : delta + rows],
                nxt,
                0,
                n_hid,
                1,
                offsets[1],
                rows,
                cfg.activation,
            )
        else:
            kbackprop._wgrad(
                XT, n_in, ws[nxt : nxt + n_hid * rows], n_hid, rows, grad, offsets[0], b_first, 1.0
            )
    return total


def _best_us(loop, args, n: int, repeats: int) -> float:
    """Microseconds per call of ``loop(*args, n)``: the best of ``repeats`` timed runs."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        loop(*args, n)
        best = min(best, time.perf_counter() - start)
    return 1e6 * best / n


def gradient_flops(sizes) -> int:
    """Flops of one gradient per row, as counted in the module docstring: two per
    multiply-add of the forward pass, the weight gradients and the deltas below hidden
    layers."""
    products = [n_in * n_out for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True)]
    return 2 * (2 * sum(products) + sum(products[1:]))


def conventional_flops(sizes) -> int:
    """Flops of one gradient per row by the conventional count: six per parameter (two
    forward, four backward), biases included."""
    return 6 * sum((n_in + 1) * n_out for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True))


#: Calls per timed run.
N_CALLS = 20000


def _problems(n_rows: int, n_features: int, hidden: tuple, repeats: int):
    """For each activation: its name, the gradient loop's arguments (the samplers' layout:
    rows padded to a multiple of 8 and cache-line aligned; 1,000 prior draws to cycle over),
    warmed up, and the whole gradient's microseconds per call (:func:`_best_us`)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_rows, n_features))
    y = rng.standard_normal(n_rows)
    for activation in ("relu", "tanh", "logistic", "identity"):
        target = LogPosterior(X, y, hidden, activation, "gaussian", prior=GaussianPrior())
        tgt, ws = target.kernel_target(padded=True), target.workspace(padded=True)
        args = (target.sample_prior(rng, 1000), tgt, ws, np.empty(target.n_params), np.empty(3))
        _loop(*args, 10)
        yield activation, args, _best_us(_loop, args, N_CALLS, repeats)


def parts(n_rows: int = 455, n_features: int = 13, hidden: int = 10, repeats: int = 7) -> None:
    """Print one JSON line per activation: each step of the gradient timed alone (see
    :data:`PARTS`), their sum and the whole gradient, in microseconds per call."""
    for activation, args, whole in _problems(n_rows, n_features, (hidden,), repeats):
        times = {}
        for code, name in enumerate(PARTS):
            # the whole gradient first, so each part starts from the workspace it leaves
            _loop(*args, 1)
            _part_loop(*args, code, 10)
            times[name] = round(_best_us(_part_loop, (*args, code), N_CALLS, repeats), 3)
        line = {
            "benchmark": "gradient_parts",
            "activation": activation,
            "network": f"{n_features}-{hidden}-1",
            "n_rows": n_rows,
            "us_per_call": times,
            "sum_of_parts_us": round(sum(times.values()), 2),
            "whole_gradient_us": round(whole, 2),
            "numba_cpu_name": os.environ.get("NUMBA_CPU_NAME", "host"),
        }
        print(json.dumps(line), flush=True)


def main(n_rows: int = 455, n_features: int = 13, hidden=(10,), repeats: int = 7,
         out: str | None = None) -> None:  # fmt: skip
    """One line per activation; with ``out``, also appended to that file with the run's
    commit, machine, date and 1-minute load before and after (``_uci.provenance``)."""
    import datetime

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _uci import emitter, provenance

    emit = emitter(out)
    head = {
        **provenance("kernel_speed.py", ["--out"] if out else []),
        "date": datetime.date.today().isoformat(),
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }
    peak = host_fma_peak_gflops()
    flops = gradient_flops((n_features, *hidden, 1)) * n_rows
    conventional = conventional_flops((n_features, *hidden, 1)) * n_rows
    for activation, args, us in _problems(n_rows, n_features, hidden, repeats):
        gflops = flops / us / 1e3
        line = {
            "benchmark": "gradient_kernel",
            "activation": activation,
            "network": f"{n_features}-{'-'.join(map(str, hidden))}-1",
            "n_rows": n_rows,
            "threads": 1,
            "distinct_parameter_vectors": args[0].shape[0],
            "grad_evals_per_s": round(1e6 / us),
            "us_per_eval": round(us, 2),
            "flops_per_eval": flops,
            "gflops": round(gflops, 2),
            "peak_gflops_measured": round(peak, 2),
            "share_of_peak": round(gflops / peak, 3),
            "conventional_flops_per_eval": conventional,
            "share_of_peak_conventional": round(conventional / us / 1e3 / peak, 3),
            "numba_cpu_name": os.environ.get("NUMBA_CPU_NAME", "host"),
        }
        emit({**head, **line, "loadavg_1min_after": round(os.getloadavg()[0], 2)})


def _range(values, fmt: str) -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def report(paths) -> str:
    """doc/performance.md's table: per build and activation, the range over the runs in
    ``paths``."""
    lines = read_results(paths)
    groups: dict[tuple, list[dict]] = {}
    for r in lines:
        groups.setdefault((r["numba_cpu_name"], r["activation"]), []).append(r)
    out = [
        "| build | activation | runs | gradients / s | us / gradient "
        "| share of peak: strict / conventional |",
        "|---|---|---|---|---|---|",
    ]
    for (build, activation), runs in groups.items():
        strict = _range([r["share_of_peak"] for r in runs], "{:.2f}")
        conventional = _range([r["share_of_peak_conventional"] for r in runs], "{:.2f}")
        cells = [
            build,
            activation,
            len(runs),
            _range([r["grad_evals_per_s"] / 1e3 for r in runs], "{:.1f}") + "k",
            _range([r["us_per_eval"] for r in runs], "{:.2f}"),
            f"{strict} / {conventional}",
        ]
        out.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--peak"]:
        print(fma_peak_gflops())
    elif sys.argv[1:2] == ["--report"] and sys.argv[2:]:
        print(report(sys.argv[2:]), end="")
    elif sys.argv[1:] == ["--parts"]:
        parts()
    elif sys.argv[1:] == ["--out"]:
        main(out=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                              "kernel_speed.jsonl"))  # fmt: skip
    else:
        main()
