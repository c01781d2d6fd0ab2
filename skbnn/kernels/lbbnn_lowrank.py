"""Numba kernels of LBBNN's low-rank family (the talk's LBBNN-GP-MVN): the slabs of a
weight layer are one Gaussian with a diagonal plus low-rank covariance, independent of the
indicators. The indicators' terms and the draws are the mean-field family's
(:mod:`skbnn.kernels.lbbnn`); :func:`skbnn.kernels.vi.run_vi_epoch_for` trains it.
"""

import math

import numpy as np
from numba import carray
from numba.core import types

from ._compile import _FM, CompiledKernel, compiled_kernel, njit
from ._libm import _LOG_2PI, _exp_neg, _log, _log1p_unit
from .lbbnn import (
    _pair_kl,
    _spike_lrt_chain,
    _spike_lrt_loglik,
    _spike_lrt_moment_grads,
    _spike_noise_grad,
)
from .team import (
    LOWRANK_GRAD,
    LOWRANK_SUMS,
    SPLIT_MIN_WEIGHTS,
    address,
    as_bits,
    collect,
    doubles_at,
    from_bits,
    integers_at,
    post,
    register_task,
    task_address,
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


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _kl_loop(kap, sg, dsg, slab, psis, alpha, lm, gkl, grl, gll, n, with_grad):
    # -(KL_N of n slabs + their indicators' KL), the gradient added to gkl, grl and gll
    value = 0.0
    for i in range(n):
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
    return value


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _sums_pass(kap, sg, dsg, slab, psis, alpha, lm, gkl, grl, gll, isl, v, isg_buf, sums, n,
               n_wl, rank, with_grad):  # fmt: skip
    # lowrank_slab_terms's first pass over n weights of a layer of n_wl (views at the
    # first; factor a's at v[a n_wl:]): their KL (returned) and its gradient, and the
    # factors' sums, V_a^2 / slab^2 added to sums[a] and V_a V_b / sigma^2 (b >= a) to
    # sums[rank + a rank + b]. Block by block, every factor and pair of factors on a
    # block while it is in cache: a pass per factor or pair over hundreds of thousands
    # of weights would read each factor from memory rank times
    value = _kl_loop(kap, sg, dsg, slab, psis, alpha, lm, gkl, grl, gll, n, with_grad)
    if rank == 0:
        return value
    for t0 in range(0, n, LOWRANK_BLOCK):
        nt = min(n, t0 + LOWRANK_BLOCK) - t0
        islb = isl[t0 : t0 + nt]
        # the reciprocal variances once per weight: a division in each of the rank (rank
        # + 3) / 2 products below was most of their time
        isg = _inverse_squares(sg[t0 : t0 + nt], isg_buf[:nt])
        for a in range(rank):
            va = v[a * n_wl + t0 : a * n_wl + t0 + nt]
            acc = 0.0
            for t in range(nt):
                acc += va[t] * va[t] * islb[t]
            sums[a] += acc
            for b in range(a, rank):
                vbb = v[b * n_wl + t0 : b * n_wl + t0 + nt]
                acc = 0.0
                for t in range(nt):
                    acc += va[t] * vbb[t] * isg[t]
                sums[rank + a * rank + b] += acc
    return value


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _grad_pass(sg, grl, dsg, isl, v, gv, mv_buf, isg_buf, minv, n, n_wl, rank):
    # lowrank_slab_terms's gradient over n weights of a layer of n_wl (views at the first;
    # factor a's at v[a n_wl:] and gv[a n_wl:]): d/dV = M^-1 U - V S^-1 and d/dsigma_t =
    # -sigma_t (U' M^-1 U)_tt, U = V D^-1, added to gv and grl; per block and factor a,
    # (M^-1 V)_a in mv_buf, then both gradients, in one pass over the factors' gradient
    for t0 in range(0, n, LOWRANK_BLOCK):
        nt = min(n, t0 + LOWRANK_BLOCK) - t0
        sgb = sg[t0 : t0 + nt]
        grb = grl[t0 : t0 + nt]
        dsb = dsg[t0 : t0 + nt]
        islb = isl[t0 : t0 + nt]
        isg = _inverse_squares(sgb, isg_buf[:nt])
        mv = mv_buf[:nt]
        for a in range(rank):
            for t in range(nt):
                mv[t] = 0.0
            for b in range(rank):
                c = minv[a * rank + b]
                vbb = v[b * n_wl + t0 : b * n_wl + t0 + nt]
                for t in range(nt):
                    mv[t] += c * vbb[t]
            va = v[a * n_wl + t0 : a * n_wl + t0 + nt]
            ga = gv[a * n_wl + t0 : a * n_wl + t0 + nt]
            for t in range(nt):
                mu_a = mv[t] * isg[t]
                ga[t] += mu_a - va[t] * islb[t]
                grb[t] -= sgb[t] * (va[t] * isg[t] * mu_a) * dsb[t]


#: The views of a half of lowrank_slab_terms's first pass (LOWRANK_SUMS), before its two
#: integers (the layer's weights and the rank).
_SUMS_VIEWS = 14


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _half(n_wl):
    # where a layer's passes split: the fixed halves of the team (SPLIT_MIN_WEIGHTS), at a
    # block's edge; n_wl, no split, below it
    if n_wl < SPLIT_MIN_WEIGHTS:
        return n_wl
    return (n_wl // 2) // LOWRANK_BLOCK * LOWRANK_BLOCK


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def lowrank_slab_terms(vparams, p, n_w, sizes, offsets, rank, work, with_grad):
    """``-KL(q || prior)`` of the low-rank family in closed form, plus the entropy of the log
    noise precisions; adds its gradient in ``vparams`` to ``work.glam`` when asked.
    ``work.sigma`` and ``work.alpha`` must be current; leaves each layer's ``M^-1`` in its
    scratch, and uses ``work.gvar`` and ``work.grad`` as scratch.

    Per layer, ``KL(N(kappa, D + V'V) || N(0, S))`` with ``D = diag(sigma^2)`` and ``S`` the
    slab's variances: ``sum KL_N(kappa, sigma) + sum V^2 / (2 s^2) - log det(M) / 2``, ``M
    = I + V D^-1 V'`` (the determinant lemma); per weight with an indicator,
    ``KL(Bernoulli(alpha) || Bernoulli(psi))``; the biases' ``KL_N``.

    A layer of :data:`~skbnn.kernels.team.SPLIT_MIN_WEIGHTS` weights or more is two fixed
    halves, the second on the team's helper where one runs and its passes are registered
    (:func:`register_tasks`): the partial sums are added in the same order either way."""
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
    isl_all = work.klc[3]
    value = 0.0
    for i in range(n_w, p):
        s = sigma[i]
        value += _log(s) + 0.5 * (1.0 + _LOG_2PI)
        if with_grad:
            grho[i] += dsigma[i] / s
    n_sums = rank + rank * rank
    block = np.empty(_SUMS_VIEWS + 2, np.int64)
    for layer in range(sizes.shape[0] - 1):
        n_in = sizes[layer]
        n_out = sizes[layer + 1]
        w0 = offsets[layer]
        n_wl = n_in * n_out
        w1 = w0 + n_wl
        vb = 3 * p + lay[layer, 0]
        ve = vb + rank * n_wl
        h = _half(n_wl)
        # the two halves' sums, in this order whoever computes the second
        sums = np.zeros((2, n_sums))
        views = (vparams[w0:w1], sigma[w0:w1], dsigma[w0:w1], work.slab[w0:w1],
                 work.psi[w0:w1], work.alpha[w0:w1], lam[w0:w1], gk[w0:w1], grho[w0:w1],
                 glam_l[w0:w1], isl_all[w0:w1])  # fmt: skip
        helped = False
        if h < n_wl and task_address(LOWRANK_SUMS) != 0:
            for j in range(len(views)):
                block[j] = address(views[j], h)
            block[11] = address(vparams, vb + h) if rank > 0 else 0
            block[12] = address(work.gvar, h)
            block[13] = address(sums, n_sums)
            block[14] = n_wl
            block[15] = rank
            helped = post(LOWRANK_SUMS, address(block, 0), n_wl - h, int(with_grad), 0, 0, 0,
                          0, 0, 0, 0, 0, 0, 0)  # fmt: skip
        v = views
        own = _sums_pass(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10],
                         vparams[vb:ve], work.gvar, sums[0], h, n_wl, rank, with_grad)  # fmt: skip
        if helped:
            other = from_bits(collect())
        elif h < n_wl:
            other = _sums_pass(v[0][h:], v[1][h:], v[2][h:], v[3][h:], v[4][h:], v[5][h:],
                               v[6][h:], v[7][h:], v[8][h:], v[9][h:], v[10][h:],
                               vparams[vb + h : ve], work.gvar[h:], sums[1], n_wl - h, n_wl,
                               rank, with_grad)  # fmt: skip
        else:
            other = 0.0
        value += own + other
        # the biases
        b1 = w1 + n_out
        value += _kl_loop(vparams[w1:b1], sigma[w1:b1], dsigma[w1:b1], work.slab[w1:b1],
                          work.psi[w1:b1], work.alpha[w1:b1], lam[w1:b1], gk[w1:b1],
                          grho[w1:b1], glam_l[w1:b1], n_out, with_grad)  # fmt: skip
        if rank == 0:
            continue
        m = np.eye(rank)
        for a in range(rank):
            value -= 0.5 * (sums[0, a] + sums[1, a])
            for b in range(a, rank):
                m[a, b] += sums[0, rank + a * rank + b] + sums[1, rank + a * rank + b]
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
        mflat = fc[mb : mb + rank * rank]
        gview = work.glam[vb:ve]
        helped = False
        if h < n_wl and task_address(LOWRANK_GRAD) != 0:
            block[0] = address(sigma, w0 + h)
            block[1] = address(grho, w0 + h)
            block[2] = address(dsigma, w0 + h)
            block[3] = address(isl_all, w0 + h)
            block[4] = address(vparams, vb + h)
            block[5] = address(work.glam, vb + h)
            block[6] = address(work.grad, h)
            block[7] = address(work.gvar, h)
            block[8] = address(fc, mb)
            block[14] = n_wl
            block[15] = rank
            helped = post(LOWRANK_GRAD, address(block, 0), n_wl - h, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                          0, 0)  # fmt: skip
        sg, gr, dsg, isl = sigma[w0:w1], grho[w0:w1], dsigma[w0:w1], isl_all[w0:w1]
        _grad_pass(sg, gr, dsg, isl, vparams[vb:ve], gview, work.grad, work.gvar, mflat, h,
                   n_wl, rank)  # fmt: skip
        if helped:
            collect()
        elif h < n_wl:
            _grad_pass(sg[h:], gr[h:], dsg[h:], isl[h:], vparams[vb + h : ve], gview[h:],
                       work.grad[h:], work.gvar[h:], mflat, n_wl - h, n_wl, rank)  # fmt: skip
    # numba frees an array after its last use: this keeps block and the sums, which the
    # helper wrote, alive until it is done
    block[0] = 0
    return value


@njit(cache=True, nogil=True, error_model="numpy", from_python=False, by_address=True)
def sums_task(block, n, with_grad, unused):
    """A posted half of :func:`lowrank_slab_terms`'s first pass over a layer's weights
    (:data:`~skbnn.kernels.team.LOWRANK_SUMS`): ``block`` the address of its views'
    addresses at its first weight, then the layer's weights and the rank; its partial sums
    go to the fourteenth view; returns its KL's bits."""
    at = carray(integers_at(block), (_SUMS_VIEWS + 2,))
    n_wl, rank = at[14], at[15]
    v = [carray(doubles_at(at[j]), (n,)) for j in range(11)]
    factors = carray(doubles_at(at[11]), (max(rank * n_wl - (n_wl - n), 0),))
    isg_buf = carray(doubles_at(at[12]), (LOWRANK_BLOCK,))
    sums = carray(doubles_at(at[13]), (rank + rank * rank,))
    return as_bits(_sums_pass(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10],
                              factors, isg_buf, sums, n, n_wl, rank, with_grad != 0))  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", from_python=False, by_address=True)
def grad_task(block, n, unused, unused_too):
    """A posted half of :func:`lowrank_slab_terms`'s gradient over a layer's weights
    (:data:`~skbnn.kernels.team.LOWRANK_GRAD`): ``block`` as :func:`sums_task`'s, with
    the views of :func:`_grad_pass`."""
    at = carray(integers_at(block), (_SUMS_VIEWS + 2,))
    n_wl, rank = at[14], at[15]
    v = [carray(doubles_at(at[j]), (n,)) for j in range(4)]
    size = rank * n_wl - (n_wl - n)
    factors = carray(doubles_at(at[4]), (size,))
    gv = carray(doubles_at(at[5]), (size,))
    mv_buf = carray(doubles_at(at[6]), (LOWRANK_BLOCK,))
    isg_buf = carray(doubles_at(at[7]), (LOWRANK_BLOCK,))
    minv = carray(doubles_at(at[8]), (rank * rank,))
    _grad_pass(v[0], v[1], v[2], v[3], factors, gv, mv_buf, isg_buf, minv, n, n_wl, rank)
    return 0


def task_kernels() -> tuple[CompiledKernel, CompiledKernel]:
    """:func:`sums_task` and :func:`grad_task` as the helper calls them, through their
    addresses (:func:`skbnn.kernels.team.register_task`)."""
    sig = types.int64(types.int64, types.int64, types.int64, types.int64)
    return (compiled_kernel(sig, (__name__, "sums_task", None)),
            compiled_kernel(sig, (__name__, "grad_task", None)))  # fmt: skip


def register_tasks() -> None:
    """Let the team's helper take half of the low-rank family's passes over a wide layer's
    weights and factors (:func:`task_kernels`), compiling or loading them if needed."""
    sums, grad = task_kernels()
    register_task(LOWRANK_SUMS, sums)
    register_task(LOWRANK_GRAD, grad)


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
