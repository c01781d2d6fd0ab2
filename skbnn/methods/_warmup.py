"""Warm-up of the HMC family: Stan's windows, the step-size heuristic and the metric
estimated at each window's end."""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from ..kernels import density as knet
from ..log_posterior import aligned_empty


def stan_windows(n_warmup: int) -> np.ndarray:
    """Stan's warm-up schedule: ``sched[i] = (in_window, end_window)`` per iteration.

    A fast initial buffer (step size only), then doubling slow windows that estimate the
    diagonal mass matrix, then a terminal buffer; buffers shrink for short warm-ups (15 % /
    75 % / 10 %). Fewer than 20 warm-up iterations adapt the step size only.
    """
    sched = np.zeros((max(n_warmup, 0), 2), dtype=np.uint8)
    if n_warmup < 20:
        return sched
    init_buffer, term_buffer, window = 75, 50, 25
    if init_buffer + window + term_buffer > n_warmup:
        init_buffer = int(0.15 * n_warmup)
        term_buffer = int(0.1 * n_warmup)
        window = n_warmup - init_buffer - term_buffer
    last = n_warmup - term_buffer - 1
    start = init_buffer
    while start <= last:
        end = min(start + window - 1, last)
        # a later window that would leave less than twice its size before the end absorbs
        # the rest (Stan applies this from the second window on)
        if start > init_buffer and end + 2 * window > last:
            end = last
        sched[start : end + 1, 0] = 1
        sched[end, 1] = 1
        start = end + 1
        window *= 2
    return sched


def _momentum(rng, metric, dense: bool) -> np.ndarray:
    """p ~ N(0, M) for the inverse mass matrix ``metric`` (as the numba kernel draws it)."""
    inv_m, _, chol = metric
    z = rng.standard_normal(inv_m.size)
    if dense:
        return solve_triangular(chol, z, trans="T", lower=True)
    return z / np.sqrt(inv_m)


# a step far past the stability limit overflows to inf or NaN, which the search counts as
# a rejection; numpy's warnings about it would say nothing the caller can act on
@np.errstate(over="ignore", invalid="ignore")
def init_step_size(chain, eps: float, dense: bool) -> float:
    """Stan's heuristic: double or halve until one leapfrog's acceptance crosses 0.8.

    Runs a handful of leapfrog steps, so it lives in Python around the compiled log density
    rather than in the chain kernel, which keeps the kernel's compile time down.
    """
    arrays, tgt = chain.arrays, chain.tgt
    metric, state = arrays.metric, arrays.state[0]
    inv_m, sigma, _ = metric
    ws = aligned_empty(chain.ws_size)
    st = np.empty_like(arrays.stats)

    def kinetic(p):
        return 0.5 * p @ (sigma @ p if dense else inv_m * p)

    direction = 0
    for _ in range(100):
        p = _momentum(chain.rng, metric, dense)
        h0 = -state["logp"] + kinetic(p)
        q, g = arrays.q.copy(), arrays.grad.copy()
        # one leapfrog step, in numpy around the compiled log density
        p += 0.5 * eps * g
        q += eps * (sigma @ p if dense else inv_m * p)
        lp = knet.log_density(q, tgt, ws, g, st, True)
        p += 0.5 * eps * g
        state["n_grad_evals"] += 1
        h = -lp + kinetic(p)
        delta = h0 - (np.inf if np.isnan(h) else h)
        up = delta > np.log(0.8)
        if direction == 0:
            direction = 1 if up else -1
        elif (direction == 1) != up:
            break
        eps = eps * 2.0 if direction == 1 else eps * 0.5
        if eps > 1e7 or eps < 1e-12:
            break
    return eps


def restart_step_size(chain, dense: bool) -> None:
    # new step size by the heuristic, then dual averaging restarted around 10x it (Stan)
    state = chain.arrays.state[0]
    state["step_size"] = init_step_size(chain, state["step_size"], dense)
    state["mu"] = np.log(10.0 * state["step_size"])
    state["log_step_size_bar"] = state["accept_gap_bar"] = 0.0
    state["n_adapt"] = 0


def update_metric(arrays, dense: bool, grad_metric: bool) -> None:
    """End of a slow window: the regularized Welford estimate becomes the metric.

    ``arrays`` is a chain's :data:`skbnn.kernels.chain.Chain`; with ``grad_metric`` a
    diagonal metric balances the draws' variance against the gradients'. Stan's
    regularization shrinks the estimate towards 1e-3 I with the weight of five draws, which
    keeps it positive definite after short windows.
    """
    inv_m, sigma, chol = arrays.metric
    state, w_m2 = arrays.state[0], arrays.w_m2
    c = float(state["welford_count"])
    shrink, ridge = c / (c + 5.0), 1e-3 * 5.0 / (c + 5.0)
    if c < 2:
        # no variance from fewer than two draws: Stan's schedule gives a 1-draw last window
        # for 151 warm-up iterations, and the metric adapted so far is kept rather than
        # shrunk towards 1e-3 I with the weight of five draws
        pass
    elif dense:
        sigma[:] = shrink * (w_m2 / (c - 1.0)) + ridge * np.eye(inv_m.size)
        chol[:] = np.linalg.cholesky(sigma)
        inv_m[:] = np.diag(sigma)
    else:
        var = w_m2[0] / (c - 1.0)
        if grad_metric:
            # Nutpie's estimate: the geometric mean of the draws' variance and the inverse
            # of the gradients' variance (equal for a Gaussian with diagonal covariance)
            var_g = w_m2[2] / (c - 1.0)
            var = np.sqrt(var / np.maximum(var_g, 1e-300))
        inv_m[:] = shrink * var + ridge
    w_m2[:] = 0.0
    arrays.w_mean[:] = 0.0
    state["welford_count"] = 0
