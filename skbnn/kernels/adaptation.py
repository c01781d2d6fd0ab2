"""Warm-up adaptation inside the chain kernels: dual averaging of the step size (Hoffman &
Gelman 2014, as in Stan), Welford's running moments of the draws and gradients (for the
metric the driver sets at the end of each of Stan's windows), and adaptive Metropolis's
proposal covariance (Haario et al. 2001).

The step-size functions read and write a chain's state record (dtype
:data:`skbnn.kernels.chain.CHAIN_STATE`) by field name; the metric is a
:data:`skbnn.kernels.linalg.Metric`.
"""

import math

import numpy as np

from ._compile import njit
from .linalg import cholesky_inplace

# Dual-averaging constants of Hoffman & Gelman (2014), the values Stan and NumPyro use.
DA_GAMMA = 0.05
DA_T0 = 10.0
DA_KAPPA = 0.75


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def dual_averaging(state, target_accept, accept_stat):
    """One dual-averaging update of the log step size towards ``target_accept``.

    ``state[0]`` holds ``step_size`` (set to the new iterate), ``log_step_size_bar`` (its
    running average), ``accept_gap_bar`` (the running mean of ``target_accept - accept``),
    ``mu`` (the point the iterates shrink towards) and ``n_adapt`` (updates so far).
    """
    s = state[0]
    s.n_adapt += 1
    m = float(s.n_adapt)
    eta = 1.0 / (m + DA_T0)
    s.accept_gap_bar = (1.0 - eta) * s.accept_gap_bar + eta * (
        target_accept - min(1.0, accept_stat)
    )
    x = s.mu - s.accept_gap_bar * math.sqrt(m) / DA_GAMMA
    x_eta = m ** (-DA_KAPPA)
    s.log_step_size_bar = x_eta * x + (1.0 - x_eta) * s.log_step_size_bar
    s.step_size = math.exp(x)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def finish_dual_averaging(state):
    """End of warm-up: the step size becomes the average iterate (if any update was made)."""
    s = state[0]
    if s.n_adapt > 0:
        s.step_size = math.exp(s.log_step_size_bar)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def welford(q, g, w_mean, w_m2, count, dense):
    """Add the draw ``q`` (with gradient ``g``) to running moments; returns ``count + 1``.

    ``w_mean`` holds the draws' mean. With ``dense``, ``w_m2`` is the (d, d) matrix of sums
    of cross products; otherwise its three rows are the draws' sums of squares, the
    gradients' mean and their sums of squares.
    """
    c = count + 1.0
    d = q.shape[0]
    delta = np.empty(d)
    for i in range(d):
        delta[i] = q[i] - w_mean[i]
        w_mean[i] += delta[i] / c
    if dense:
        for i in range(d):
            di = delta[i]
            row = w_m2[i]
            for j in range(d):
                row[j] += di * (q[j] - w_mean[j])
    else:
        m2 = w_m2[0]
        g_mean = w_m2[1]
        g_m2 = w_m2[2]
        for i in range(d):
            m2[i] += delta[i] * (q[i] - w_mean[i])
            dg = g[i] - g_mean[i]
            g_mean[i] += dg / c
            g_m2[i] += dg * (g[i] - g_mean[i])
    return count + 1


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def keep_draw(q, g, window, count):
    """Keep the draw ``q`` and its gradient ``g`` in row ``count`` of ``window``'s halves
    (draws, then gradients) for a low-rank metric's estimate; returns ``count + 1``.

    A window longer than the buffer keeps its first rows (the driver sizes the buffer to
    the longest window, so this never happens in a fit).
    """
    cap = window.shape[0] // 2
    if count < cap:
        draw, grad = window[count], window[cap + count]
        for i in range(q.shape[0]):
            draw[i] = q[i]
            grad[i] = g[i]
    return count + 1


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def scale_metric(metric, dense, scale):
    """Multiply the proposal covariance (and its diagonal) by ``scale``, in place."""
    inv_m, sigma, chol = metric
    d = inv_m.shape[0]
    for i in range(d):
        inv_m[i] *= scale
    if dense:
        for i in range(d):
            for j in range(d):
                sigma[i, j] *= scale
                chol[i, j] *= math.sqrt(scale)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def am_refresh(metric, dense, w_m2, count, scale, jitter):
    """Adaptive Metropolis: ``Sigma = scale (C + jitter I)`` from the running covariance
    ``C = w_m2 / (count - 1)``, and its Cholesky factor, into ``metric``."""
    inv_m, sigma, chol = metric
    d = inv_m.shape[0]
    if dense:
        for i in range(d):
            for j in range(d):
                c = w_m2[i, j] / (count - 1.0)
                sigma[i, j] = scale * (c + (jitter if i == j else 0.0))
                chol[i, j] = sigma[i, j]
            inv_m[i] = sigma[i, i]
        cholesky_inplace(chol)
    else:
        for i in range(d):
            inv_m[i] = scale * (w_m2[0, i] / (count - 1.0) + jitter)
