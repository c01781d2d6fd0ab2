"""Numba kernels of LBBNN's low-rank family (the talk's LBBNN-GP-MVN): the slabs of a
weight layer are one Gaussian with a diagonal plus low-rank covariance, independent of the
indicators. The indicators' terms and the draws are the mean-field family's
(:mod:`skbnn.kernels.lbbnn`); :func:`skbnn.kernels.vi.run_vi_epoch_for` trains it.
"""

import math

import numpy as np

from ._compile import _FM, njit
from ._libm import _LOG_2PI, _exp_neg, _log, _log1p_unit
from .lbbnn import (
    _pair_kl,
    _spike_lrt_chain,
    _spike_lrt_loglik,
    _spike_lrt_moment_grads,
    _spike_noise_grad,
)

# --- LBBNN's low-rank slab (the talk's LBBNN-GP-MVN): per weight layer, the slabs are one
# Gaussian N(kappa, diag(sigma^2) + V' V) with rank rows V, independent of the indicators
# (so the KL is the indicators' plus the slabs'); biases keep their own Gaussian factors.


#: Weights of a layer that the low-rank family's passes take at a time, every factor on
#: them while they stay in cache.
LOWRANK_BLOCK = 1024


@njit(cache=True, nogil=True, error_model="numpy")
def lowrank_layout(sizes, rank):
    """Per weight layer, the start of its factors ``V`` (``rank x n_in n_out``, row-major,
    columns in the layer's weight order) after ``vparams[3 p]``, and of its scratch (the
    draw ``u``, ``rank``, and ``M^-1``, ``rank x rank``); the last row holds the totals."""
    n_layers = sizes.shape[0] - 1
    out = np.zeros((n_layers + 1, 2), np.int64)
    for layer in range(n_layers):
        out[layer + 1, 0] = out[layer, 0] + rank * sizes[layer] * sizes[layer + 1]
        out[layer + 1, 1] = out[layer, 1] + rank + rank * rank
    return out


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _inverse_squares(s, out):
    # 1 / s^2 into out, returned
    for t in range(s.shape[0]):
        out[t] = 1.0 / (s[t] * s[t])
    return out


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def lowrank_slab_terms(vparams, p, n_w, sizes, offsets, rank, work, with_grad):
    """``-KL(q || prior)`` of the low-rank family in closed form, plus the entropy of the log
    noise precisions; adds its gradient in ``vparams`` to ``work.glam`` when asked.
    ``work.sigma`` and ``work.alpha`` must be current; leaves each layer's ``M^-1`` in its
    scratch, and uses ``work.gvar`` and ``work.grad`` as scratch.

    Per layer, ``KL(N(kappa, D + V'V) || N(0, S))`` with ``D = diag(sigma^2)`` and ``S`` the
    slab's variances: ``sum KL_N(kappa, sigma) + sum V^2 / (2 s^2) - log det(M) / 2``, ``M
    = I + V D^-1 V'`` (the determinant lemma); per weight with an indicator,
    ``KL(Bernoulli(alpha) || Bernoulli(psi))``; the biases' ``KL_N``."""
    # per-part and per-factor views, never buf[base + i], and _libm's logs: either would
    # keep these loops scalar (see skbnn.kernels._compile), and at MNIST's size each is a
    # pass over hundreds of thousands of weights per factor
    gk = work.glam[:p]
    grho = work.glam[p : 2 * p]
    glam_l = work.glam[2 * p : 3 * p]
    sigma = work.sigma
    dsigma = work.dsigma
    lam = vparams[2 * p : 3 * p]
    fc = work.fcache
    lay = work.flay
    value = 0.0
    for i in range(n_w, p):
        s = sigma[i]
        value += _log(s) + 0.5 * (1.0 + _LOG_2PI)
        if with_grad:
            grho[i] += dsigma[i] / s
    for layer in range(sizes.shape[0] - 1):
        n_in = sizes[layer]
        n_out = sizes[layer + 1]
        w_start = offsets[layer]
        n_wl = n_in * n_out
        stop = w_start + n_wl + n_out
        vb = 3 * p + lay[layer, 0]
        # KL_N of every slab and bias, and the indicators' KL
        kap = vparams[w_start:stop]
        sg = sigma[w_start:stop]
        dsg = dsigma[w_start:stop]
        slab = work.slab[w_start:stop]
        psis = work.psi[w_start:stop]
        alpha = work.alpha[w_start:stop]
        lm = lam[w_start:stop]
        gkl = gk[w_start:stop]
        grl = grho[w_start:stop]
        gll = glam_l[w_start:stop]
        for i in range(stop - w_start):
            s = sg[i]
            k = kap[i]
            s0 = slab[i]
            psi = psis[i]
            li = lm[i]
            kln, d_in, d_out = _pair_kl(s, k, s0, psi, li, _log1p_unit(_exp_neg(-abs(li))))
            # d_in without KL_N: here the slab's KL does not depend on the indicator
            d_in -= kln
            a = alpha[i]
            spike = psi < 1.0
            value -= kln + (a * d_in + (1.0 - a) * d_out if spike else 0.0)
            if with_grad:
                inv = 1.0 / (s0 * s0)
                gkl[i] -= k * inv
                grl[i] -= (s * inv - 1.0 / s) * dsg[i]
                gll[i] -= (d_in - d_out) * a * (1.0 - a) if spike else 0.0
        if rank == 0:
            continue
        sgw = sigma[w_start : w_start + n_wl]
        # block by block of the layer's weights, every factor and pair of factors on a
        # block while it is in cache: a pass per factor or pair over hundreds of thousands
        # of weights would read each factor from memory rank times
        m = np.eye(rank)
        sq = np.zeros(rank)
        # the reciprocal variances once per weight: a division in each of the rank (rank +
        # 3) / 2 products below was most of their time
        isl_w = work.klc[3, w_start : w_start + n_wl]
        for t0 in range(0, n_wl, LOWRANK_BLOCK):
            nt = min(n_wl, t0 + LOWRANK_BLOCK) - t0
            isl = isl_w[t0 : t0 + nt]
            isg = _inverse_squares(sgw[t0 : t0 + nt], work.gvar[:nt])
            for a in range(rank):
                va = vparams[vb + a * n_wl + t0 : vb + a * n_wl + t0 + nt]
                acc = 0.0
                for t in range(nt):
                    acc += va[t] * va[t] * isl[t]
                sq[a] += acc
                for b in range(a, rank):
                    vbb = vparams[vb + b * n_wl + t0 : vb + b * n_wl + t0 + nt]
                    acc = 0.0
                    for t in range(nt):
                        acc += va[t] * vbb[t] * isg[t]
                    m[a, b] += acc
        for a in range(rank):
            value -= 0.5 * sq[a]
            for b in range(a + 1, rank):
                m[b, a] = m[a, b]
        chol = np.linalg.cholesky(m)
        for a in range(rank):
            value += math.log(chol[a, a])
        minv = np.linalg.inv(m)
        mb = lay[layer, 1] + rank
        for a in range(rank):
            for b in range(rank):
                fc[mb + a * rank + b] = minv[a, b]
        if not with_grad:
            continue
        # d/dV = M^-1 U - V S^-1, d/dsigma_t = -sigma_t (U' M^-1 U)_tt, U = V D^-1: per
        # block and factor a, (M^-1 V)_a in work.grad (free until the draws' term), then
        # both gradients, in one pass over the factors' gradient
        grw = grho[w_start : w_start + n_wl]
        dsw = dsigma[w_start : w_start + n_wl]
        for t0 in range(0, n_wl, LOWRANK_BLOCK):
            nt = min(n_wl, t0 + LOWRANK_BLOCK) - t0
            sgb = sgw[t0 : t0 + nt]
            grb = grw[t0 : t0 + nt]
            dsb = dsw[t0 : t0 + nt]
            isl = isl_w[t0 : t0 + nt]
            isg = _inverse_squares(sgb, work.gvar[:nt])
            mv = work.grad[:nt]
            for a in range(rank):
                for t in range(nt):
                    mv[t] = 0.0
                for b in range(rank):
                    c = minv[a, b]
                    vbb = vparams[vb + b * n_wl + t0 : vb + b * n_wl + t0 + nt]
                    for t in range(nt):
                        mv[t] += c * vbb[t]
                va = vparams[vb + a * n_wl + t0 : vb + a * n_wl + t0 + nt]
                ga = work.glam[vb + a * n_wl + t0 : vb + a * n_wl + t0 + nt]
                for t in range(nt):
                    mu_a = mv[t] * isg[t]
                    ga[t] += mu_a - va[t] * isl[t]
                    grb[t] -= sgb[t] * (va[t] * isg[t] * mu_a) * dsb[t]
    return value


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def lbbnn_lowrank_term(vparams, p, tgt, vc, work, ws, stats, rng, with_grad, scale, act, lik):
    """One Monte Carlo draw of ``beta loglik + log p(eta)`` for the low-rank family: each
    layer's ``u ~ N(0, I)`` (one for the minibatch) gives the slab means ``kappa + V'u``;
    given them the slabs are independent, and the pre-activations are drawn per row by the
    local reparameterization trick as in the mean-field family. Its gradient in
    ``vparams`` times ``scale`` added to ``work.glam``."""
    sizes = tgt.sizes
    offsets = tgt.offsets
    n_layers = sizes.shape[0] - 1
    n_w = p - tgt.cfg[0].n_noise
    rank = vc.rank
    lay = work.flay
    fc = work.fcache
    keff = work.keff
    for i in range(p):
        keff[i] = vparams[i]
    for layer in range(n_layers):
        n_wl = sizes[layer] * sizes[layer + 1]
        w_start = offsets[layer]
        vb = 3 * p + lay[layer, 0]
        ub = lay[layer, 1]
        for a in range(rank):
            fc[ub + a] = rng.standard_normal()
        # views, never buf[base + t] (see skbnn.kernels._compile); a block of the weights
        # at a time, as in lowrank_slab_terms
        for t0 in range(0, n_wl, LOWRANK_BLOCK):
            nt = min(n_wl, t0 + LOWRANK_BLOCK) - t0
            kl = keff[w_start + t0 : w_start + t0 + nt]
            for a in range(rank):
                u = fc[ub + a]
                va = vparams[vb + a * n_wl + t0 : vb + a * n_wl + t0 + nt]
                for t in range(nt):
                    kl[t] += va[t] * u
    value = _spike_lrt_loglik(keff, vparams, p, tgt, work, ws, stats, rng, act, lik)
    if not with_grad:
        return value
    _spike_lrt_moment_grads(tgt, work, ws, act)
    glam = work.glam
    gk = work.grad
    for i in range(n_w):
        gk[i] = 0.0
    _spike_lrt_chain(keff, p, n_w, work, scale, gk)
    for i in range(n_w):
        glam[i] += gk[i]
    for layer in range(n_layers):
        n_wl = sizes[layer] * sizes[layer + 1]
        w_start = offsets[layer]
        vb = 3 * p + lay[layer, 0]
        for t0 in range(0, n_wl, LOWRANK_BLOCK):
            nt = min(n_wl, t0 + LOWRANK_BLOCK) - t0
            gl = gk[w_start + t0 : w_start + t0 + nt]
            for a in range(rank):
                u = fc[lay[layer, 1] + a]
                ga = glam[vb + a * n_wl + t0 : vb + a * n_wl + t0 + nt]
                for t in range(nt):
                    ga[t] += gl[t] * u
    _spike_noise_grad(p, tgt, work, stats, lik, scale)
    return value
