"""The Hamiltonian pieces every gradient transition shares: the log density with its
gradient, the leapfrog step, draws of momenta and Gaussian proposals under the metric, and
the energy.

The metric is a :data:`skbnn.kernels.linalg.Metric` ``(inv_m, sigma, chol)``; ``kind``
(:data:`~skbnn.kernels.linalg.DIAGONAL`, ``DENSE`` or ``LOW_RANK``) says how its parts hold
it.
"""

import math

import numpy as np

from ._compile import njit
from .density import density
from .linalg import DENSE, LOW_RANK, dot, low_rank_update, velocity

_FM = {"reassoc", "contract"}


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def logp_and_grad(q, tgt, ws, g, st):
    """Log density at ``q`` of a :data:`skbnn.kernels.density.DensityTarget`; its gradient
    goes to ``g`` unless ``g`` is empty."""
    return density(q, tgt, ws, g, st, g.shape[0] > 0)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def leapfrog(q, p, g, eps, metric, kind, tmp, tgt, ws, st):
    """One leapfrog step of size ``eps`` from ``(q, p)`` with gradient ``g``, in place.

    ``tmp`` is scratch for the velocity; ``st`` receives the log density's terms at the new
    ``q`` (see :func:`skbnn.kernels.density.logp_grad`). Returns the new log density.
    """
    d = q.shape[0]
    half = 0.5 * eps
    for i in range(d):
        p[i] += half * g[i]
    velocity(p, metric, kind, tmp)
    for i in range(d):
        q[i] += eps * tmp[i]
    lp = logp_and_grad(q, tgt, ws, g, st)
    for i in range(d):
        p[i] += half * g[i]
    return lp


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def draw_momentum(rng, p, metric, kind):
    """``p ~ N(0, M)`` with ``M = sigma^-1``, written into ``p``."""
    # p = L^-T z for sigma = L L^T (back substitution); low rank:
    # p = S^-1 (I + U diag(lam^-1/2 - 1) U^T) z, whose square is S^-1 (I + U ...) S^-1 = M
    d = p.shape[0]
    if kind == LOW_RANK:
        for i in range(d):
            p[i] = rng.standard_normal()
        low_rank_update(metric.sigma, metric.chol[1], p)
        inv_m = metric.inv_m
        for i in range(d):
            p[i] /= math.sqrt(inv_m[i])
    elif kind == DENSE:
        chol = metric.chol
        for i in range(d):
            p[i] = rng.standard_normal()
        for i in range(d - 1, -1, -1):
            acc = p[i]
            for j in range(i + 1, d):
                acc -= chol[j, i] * p[j]
            p[i] = acc / chol[i, i]
    else:
        inv_m = metric.inv_m
        for i in range(d):
            p[i] = rng.standard_normal() / math.sqrt(inv_m[i])


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def metric_normal(rng, metric, kind, z, out):
    """``out ~ N(0, sigma)`` from the standard normals it draws into ``z``."""
    # L z with sigma = L L^T (dense), S (I + U diag(lam^1/2 - 1) U^T) z (low rank), or
    # sqrt(inv_m) z (diagonal)
    d = z.shape[0]
    for i in range(d):
        z[i] = rng.standard_normal()
    if kind == LOW_RANK:
        for i in range(d):
            out[i] = z[i]
        low_rank_update(metric.sigma, metric.chol[2], out)
        inv_m = metric.inv_m
        for i in range(d):
            out[i] *= math.sqrt(inv_m[i])
    elif kind == DENSE:
        chol = metric.chol
        for i in range(d):
            acc = 0.0
            for j in range(i + 1):
                acc += chol[i, j] * z[j]
            out[i] = acc
    else:
        inv_m = metric.inv_m
        for i in range(d):
            out[i] = math.sqrt(inv_m[i]) * z[i]


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def energy(lp, p, ps):
    """The Hamiltonian ``-lp + p . ps / 2`` for momentum ``p`` and velocity ``ps``; NaN
    counts as infinite."""
    h = -lp + 0.5 * dot(p, ps)
    return np.inf if h != h else h
