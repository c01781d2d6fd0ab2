"""Numba kernels of the SMC sampler: HMC moves of a range of particles, and evaluation.

A particle's move needs only its own row of each array, so the Python driver splits the
particles into contiguous ranges and runs ranges on threads (the kernels release the GIL).
The momenta and acceptance uniforms are drawn by the driver from the run's seed, which
makes the result independent of how the particles are split.
"""

import math

import numpy as np
from numba import njit

from .hmc import _copy, _energy, _leapfrog, _sharp, set_layer_precision
from .network import KernelTarget, log_marginal, logp_grad, n_rows, workspace_size


@njit(cache=True, nogil=True, error_model="numpy")
def evaluate(thetas, tgt, stats, start, stop):
    """``stats[i] = [loglik, logprior, ssr...]`` of ``thetas[i]`` for ``i`` in the range."""
    ws = np.empty(workspace_size(tgt.sizes, n_rows(tgt)))
    dummy = np.empty(0)
    for i in range(start, stop):
        logp_grad(thetas[i], tgt, ws, dummy, stats[i], False)


@njit(cache=True, nogil=True, error_model="numpy")
def log_marginal_rows(stats, n, a, b, beta, out):
    """:func:`skbnn.kernels.network.log_marginal` of each row of ``stats``."""
    k = stats.shape[1] - 2
    for i in range(stats.shape[0]):
        out[i] = log_marginal(n, k, stats[i], a, b, beta)


@njit(cache=True, nogil=True, error_model="numpy")
def hmc_moves(thetas, grads, logps, stats, eps, n_leap, inv_m, z, u, tgt, prior_stds, gammas,
              start, stop, refresh, esjd, accept, n_grad):  # fmt: skip
    """One static HMC transition for each particle ``i`` in ``[start, stop)``.

    Particle ``i`` integrates ``n_leap[i]`` leapfrog steps of size ``eps[i]`` with the
    diagonal inverse mass matrix ``inv_m``, from the momentum ``z[i] / sqrt(inv_m)``, and is
    accepted when ``u[i] < exp(-dH)``. With ``refresh`` the log density and gradient at the
    particle are computed first (the tempered target changed since they were stored).

    ``esjd[i]`` receives the Rao-Blackwellized expected squared jumping distance of the
    proposal, ``alpha * sum((q' - q)^2 / inv_m) / n_leap`` (Buchholz, Chopin & Jacob 2021),
    ``accept[i]`` the acceptance probability ``alpha`` and ``n_grad[i]`` the gradient
    evaluations spent. A proposal whose log density is not finite is rejected with
    ``alpha = 0``.

    ``prior_stds`` holds the prior scales: one row shared by all particles, or one row per
    particle under a hierarchical prior. Then ``gammas[i, l]`` is a Gamma(a + m_l / 2, 1)
    draw, and after its move particle ``i``'s layer precisions are drawn from their
    conditionals (:func:`skbnn.kernels.hmc.set_layer_precision`); ``gammas`` has no
    columns otherwise.
    """
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
    metric = (inv_m, dummy, dummy)
    per_particle = prior_stds.shape[0] > 1
    for i in range(start, stop):
        own = KernelTarget(tgt.XT, tgt.YT, tgt.sizes, tgt.offsets, tgt.prior_mean,
                           prior_stds[i if per_particle else 0], tgt.tau, tgt.cfg)  # fmt: skip
        spent = 0
        if refresh:
            logps[i] = logp_grad(thetas[i], own, ws, grads[i], stats[i], True)
            spent += 1
        lp0 = logps[i]
        for j in range(d):
            p[j] = z[i, j] / math.sqrt(inv_m[j])
        _sharp(p, inv_m, dummy, False, ps)
        h0 = _energy(lp0, p, ps)
        _copy(q, thetas[i])
        _copy(g, grads[i])
        lp = lp0
        for _ in range(n_leap[i]):
            lp = _leapfrog(q, p, g, eps[i], metric, False, tmp, own, ws, st)
            spent += 1
            if not math.isfinite(lp):
                break
        n_grad[i] = spent
        if not math.isfinite(lp) or not math.isfinite(h0):
            esjd[i] = 0.0
            accept[i] = 0.0
        else:
            _sharp(p, inv_m, dummy, False, ps)
            dh = _energy(lp, p, ps) - h0
            alpha = 1.0 if dh <= 0.0 else math.exp(-dh)
            jump = 0.0
            for j in range(d):
                step = q[j] - thetas[i, j]
                jump += step * step / inv_m[j]
            esjd[i] = alpha * jump / n_leap[i]
            accept[i] = alpha
            if u[i] < alpha:
                _copy(thetas[i], q)
                _copy(grads[i], g)
                _copy(stats[i], st)
                logps[i] = lp
        for layer in range(gammas.shape[1]):
            dlp = set_layer_precision(thetas[i], grads[i], own, layer, gammas[i, layer])
            logps[i] += dlp
            stats[i, 1] += dlp
