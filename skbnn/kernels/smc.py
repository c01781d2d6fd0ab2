"""Numba kernels of the SMC sampler: HMC moves of a range of particles, and evaluation.

A particle's move needs only its own row of each array, so the Python driver splits the
particles into contiguous ranges and runs ranges on threads (the kernels release the GIL).
The momenta and acceptance uniforms are drawn by the driver from the run's seed, which
makes the result independent of how the particles are split.

The moves take three named tuples, one row per particle in every array:

* :data:`Particles` ``(thetas, grads, logps, stats, prior_stds)``: the particles, the
  gradients and log densities at them, their log-density terms ``[loglik, logprior,
  ssr...]``, and their prior scales (one row shared by all particles, or one row each
  under a hierarchical prior);
* :data:`Proposals` ``(eps, n_leap, z, u, gammas)``: each particle's step size and number
  of leapfrog steps, and the driver's random draws: standard normal momenta, acceptance
  uniforms and, under a hierarchical prior, Gamma(a + m_l / 2, 1) draws per layer (no
  columns otherwise);
* :data:`MoveStats` ``(esjd, accept, n_grad)``: what each particle's move reports.
"""

import math
from collections import namedtuple

import numpy as np

from ._compile import njit
from .density import (
    DensityTarget,
    KernelTarget,
    density,
    log_marginal,
    n_rows,
    workspace_size,
)
from .gibbs import set_layer_precision
from .linalg import DIAGONAL, Metric, copy
from .transitions import static_path

Particles = namedtuple("Particles", ["thetas", "grads", "logps", "stats", "prior_stds"])
Proposals = namedtuple("Proposals", ["eps", "n_leap", "z", "u", "gammas"])
MoveStats = namedtuple("MoveStats", ["esjd", "accept", "n_grad"])


@njit(cache=True, nogil=True, error_model="numpy")
def evaluate(thetas, tgt, stats, start, stop):
    """``stats[i] = [loglik, logprior, ssr...]`` of ``thetas[i]`` for ``i`` in the range."""
    ws = np.empty(workspace_size(tgt.sizes, n_rows(tgt)))
    dummy = np.empty(0)
    for i in range(start, stop):
        density(thetas[i], tgt, ws, dummy, stats[i], False)


@njit(cache=True, nogil=True, error_model="numpy")
def log_marginal_rows(stats, n, a, b, beta, out):
    """:func:`skbnn.kernels.density.log_marginal` of each row of ``stats``."""
    k = stats.shape[1] - 2
    for i in range(stats.shape[0]):
        out[i] = log_marginal(n, k, stats[i], a, b, beta)


@njit(cache=True, nogil=True, error_model="numpy")
def hmc_moves(particles, proposals, inv_m, tgt, start, stop, refresh, out):
    """One static HMC transition for each particle ``i`` in ``[start, stop)``.

    Particle ``i`` integrates ``proposals.n_leap[i]`` leapfrog steps of size
    ``proposals.eps[i]`` with the diagonal inverse mass matrix ``inv_m``, from the momentum
    ``z[i] / sqrt(inv_m)``, and is accepted when ``u[i] < exp(-dH)``. With ``refresh`` the
    log density and gradient at the particle are computed first (the tempered target
    changed since they were stored).

    ``out.esjd[i]`` receives the Rao-Blackwellized expected squared jumping distance of the
    proposal, ``alpha * sum((q' - q)^2 / inv_m) / n_leap`` (Buchholz, Chopin & Jacob 2021),
    ``out.accept[i]`` the acceptance probability ``alpha`` and ``out.n_grad[i]`` the
    gradient evaluations spent. A proposal whose log density is not finite is rejected with
    ``alpha = 0``.

    Under a hierarchical prior (``gammas`` has columns), after its move particle ``i``'s
    layer precisions are drawn from their conditionals
    (:func:`skbnn.kernels.gibbs.set_layer_precision`).
    """
    thetas, grads, logps, stats, prior_stds = particles
    eps, n_leap, z, u, gammas = proposals
    esjd, accept, n_grad = out
    d = thetas.shape[1]
    ws = np.empty(workspace_size(tgt.sizes, n_rows(tgt)))
    k = stats.shape[1]
    q = np.empty(d)
    p = np.empty(d)
    g = np.empty(d)
    ps = np.empty(d)
    tmp = np.empty(d)
    st = np.empty(k)
    dummy = np.empty((1, 1))
    metric = Metric(inv_m, dummy, dummy)
    per_particle = prior_stds.shape[0] > 1
    for i in range(start, stop):
        plain = KernelTarget(tgt.XT, tgt.YT, tgt.W, tgt.sizes, tgt.offsets, tgt.prior_mean,
                             prior_stds[i if per_particle else 0], tgt.tau, tgt.cfg)  # fmt: skip
        own = DensityTarget(plain.XT, plain.YT, plain.W, plain.sizes, plain.offsets,
                            plain.prior_mean, plain.prior_scale, plain.tau, plain.cfg, plain,
                            tgt.density)  # fmt: skip
        spent = 0
        if refresh:
            logps[i] = density(thetas[i], own, ws, grads[i], stats[i], True)
            spent += 1
        lp0 = logps[i]
        for j in range(d):
            p[j] = z[i, j] / math.sqrt(inv_m[j])
        lp, h0, h, n_done = static_path(
            thetas[i], grads[i], lp0, p, eps[i], n_leap[i], metric, DIAGONAL, q, g, ps, tmp, own,
            ws, st,
        )  # fmt: skip
        n_grad[i] = spent + n_done
        if not math.isfinite(lp) or not math.isfinite(h0):
            esjd[i] = 0.0
            accept[i] = 0.0
        else:
            dh = h - h0
            alpha = 1.0 if dh <= 0.0 else math.exp(-dh)
            jump = 0.0
            for j in range(d):
                step = q[j] - thetas[i, j]
                jump += step * step / inv_m[j]
            esjd[i] = alpha * jump / n_leap[i]
            accept[i] = alpha
            if u[i] < alpha:
                copy(thetas[i], q)
                copy(grads[i], g)
                copy(stats[i], st)
                logps[i] = lp
        for layer in range(gammas.shape[1]):
            dlp = set_layer_precision(thetas[i], grads[i], own, layer, gammas[i, layer])
            logps[i] += dlp
            stats[i, 1] += dlp
