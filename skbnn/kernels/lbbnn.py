"""Numba kernels of latent binary BNNs (LBBNN; Hubin and Storvik 2019, Skaaret-Lund et al.
2024): the spike-and-slab variational family's closed-form terms and its Monte Carlo terms,
for the mean-field family (by the local reparameterization trick or the concrete
relaxation) and the flow family (:mod:`skbnn.kernels.flows`); the low-rank family is
:mod:`skbnn.kernels.lbbnn_lowrank`.
:func:`skbnn.kernels.vi.run_vi_epoch_for` trains them on the training engine.
"""

import math

import numba
import numpy as np
from numba import carray
from numba.core import types
from numba.extending import overload

from . import flows as kflows
from ._compile import _FM, _OVERLOAD, CompiledKernel, compiled_kernel, njit
from ._libm import _LOG_2PI, _exp_neg, _log, _log1p_unit
from ._vcommon import _noise_draw, _noise_grad, _sigmoid, softplus
from .backprop import _backward
from .density import n_rows, weight_sum
from .layers import forward
from .likelihoods import _loglik_delta
from .lrt import _bases, backward_pass, lrt_backward, lrt_forward
from .team import (
    FINISH,
    PREPARE,
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

# --- the spike-and-slab family of latent binary BNNs (LBBNN; Hubin and Storvik 2019,
# Skaaret-Lund et al. 2024). vparams = [kappa, rho, lambda]: a weight is
# gamma * beta with gamma ~ Bernoulli(alpha = sigmoid(lambda)) and beta ~ N(kappa,
# softplus(rho)^2), under the prior gamma ~ Bernoulli(psi), beta ~ N(0, slab^2). Parameters
# whose psi is 1 (biases, the log noise precisions, or every weight when psi = 1) are
# always in: alpha = 1 and their lambda is never moved, so the family is mean-field VI's.


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def set_alphas(vparams, p, work):
    """``alpha = sigmoid(lambda)`` where the prior has an indicator (``psi < 1``), 1
    elsewhere, into ``work.alpha``."""
    lam = vparams[2 * p : 3 * p]
    psi = work.psi
    alpha = work.alpha
    for i in range(p):
        # the logistic from one exponential of _libm's, which keeps the loop vectorized
        li = lam[i]
        e = _exp_neg(-abs(li))
        a = (1.0 if li >= 0.0 else e) / (1.0 + e)
        alpha[i] = a if psi[i] < 1.0 else 1.0


@njit(cache=True, nogil=True, error_model="numpy")
def spike_slab_terms(vparams, p, n_w, work, with_grad):
    """``-KL(q || prior)`` of the network parameters in closed form, plus the entropy of
    the log noise precisions (whose Gamma prior is a Monte Carlo term); adds its gradient
    in ``vparams`` to ``work.glam`` when asked. ``work.sigma`` and ``work.alpha`` must be
    current.

    Per weight with an indicator, ``KL = alpha (log(alpha / psi) + KL_N) + (1 - alpha)
    log((1 - alpha) / (1 - psi))`` with ``KL_N = KL(N(kappa, sigma^2) || N(0, slab^2))``;
    ``KL_N`` alone for the parameters that are always in."""
    return spike_slab_kl_grad(vparams, vparams, p, n_w, work, with_grad, 1.0, work.glam)


def spike_slab_terms_kernel(vparams, work) -> CompiledKernel:
    """:func:`spike_slab_terms` compiled for ``vparams`` and ``work``'s types, as Python
    calls it (``with_grad`` a bool): what a fit's helper process can compile
    (:func:`~skbnn.kernels._compile.compile_aside`)."""
    sig = types.float64(numba.typeof(vparams), types.int64, types.int64, numba.typeof(work),
                        types.boolean)  # fmt: skip
    return compiled_kernel(sig, (__name__, "spike_slab_terms", None))


@njit(cache=True, nogil=True, error_model="numpy")
def spike_slab_kl(kappa, vparams, p, n_w, work):
    """:func:`spike_slab_terms` at the slab means ``kappa`` (for the flow family, those
    given a draw of ``z``), without the gradient."""
    return spike_slab_kl_grad(kappa, vparams, p, n_w, work, False, 1.0, work.grad)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _pair_kl(s, k, s0, psi, li, lo):
    # one weight's KL terms (KL_N, d_in, d_out): its KL is KL_N without an indicator and
    # alpha d_in + (1 - alpha) d_out with one (spike_slab_terms), lo = log(1 + e^-|lambda|).
    # log(alpha) and log(1 - alpha) come without cancellation at either end; psi = 1 (no
    # indicator) leaves d_out = -inf, which the callers' selects leave unused
    kln = _log(s0) - _log(s) + 0.5 * (s * s + k * k) / (s0 * s0) - 0.5
    d_in = -((-li if li < 0.0 else 0.0) + lo) - _log(psi) + kln
    d_out = -((li if li > 0.0 else 0.0) + lo) - _log(1.0 - psi)
    return kln, d_in, d_out


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def spike_slab_kl_grad(kappa, vparams, p, n_w, work, with_grad, scale, gk):
    """:func:`spike_slab_terms` with the slab means ``kappa`` (for the flow family, those
    scaled by a draw of ``z``), its gradient times ``scale`` added, in ``kappa`` to ``gk``
    and in ``rho`` and ``lambda`` to ``work.glam``, when ``with_grad``."""
    lam = vparams[2 * p : 3 * p]
    # views per part, never glam[p + i], and _libm's logs: either would keep the loop
    # scalar (see skbnn.kernels._compile)
    gkv = gk[:p]
    grho = work.glam[p : 2 * p]
    glam = work.glam[2 * p : 3 * p]
    sigma = work.sigma
    dsigma = work.dsigma
    alpha = work.alpha
    psi_all = work.psi
    slab = work.slab
    value = 0.0
    for i in range(n_w):
        s = sigma[i]
        ds = dsigma[i]
        k = kappa[i]
        s0 = slab[i]
        inv = 1.0 / (s0 * s0)
        psi = psi_all[i]
        spike = psi < 1.0
        a = alpha[i]
        li = lam[i]
        kln, d_in, d_out = _pair_kl(s, k, s0, psi, li, _log1p_unit(_exp_neg(-abs(li))))
        value -= a * d_in + (1.0 - a) * d_out if spike else kln
        if with_grad:
            gkv[i] -= scale * a * k * inv
            grho[i] -= scale * a * (s * inv - 1.0 / s) * ds
            # d KL / d alpha = d_in - d_out (the derivatives of the logs cancel)
            glam[i] -= scale * (d_in - d_out) * a * (1.0 - a) if spike else 0.0
    for i in range(n_w, p):
        s = sigma[i]
        value += _log(s) + 0.5 * (1.0 + _LOG_2PI)
        if with_grad:
            grho[i] += scale * dsigma[i] / s
    return value


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def lbbnn_lrt_term(vparams, p, tgt, work, ws, stats, rng, with_grad, scale, act, lik):
    """One Monte Carlo draw of ``beta loglik + log p(eta)`` by the local reparameterization
    trick for spike-and-slab weights: each pre-activation drawn per row from the Gaussian
    with the mean ``sum_k x_k alpha_k kappa_k`` and the variance ``sum_k x_k^2 alpha_k
    (sigma_k^2 + (1 - alpha_k) kappa_k^2)`` of the weights' moments; its gradient in
    ``vparams`` times ``scale`` added to ``work.glam``. ``act`` and ``lik`` are the network's
    activation and likelihood codes."""
    value = _spike_lrt_loglik(vparams, vparams, p, tgt, work, ws, stats, rng, act, lik)
    if with_grad:
        _spike_lrt_moment_grads(tgt, work, ws, act)
        _spike_lrt_chain(vparams, p, p - tgt.cfg[0].n_noise, work, scale, work.glam)
        _spike_noise_grad(p, tgt, work, stats, lik, scale)
    return value


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _spike_lrt_loglik(keff, vparams, p, tgt, work, ws, stats, rng, act, lik):
    # beta loglik + log p(eta) at one draw at the slab means keff: the weights' moments in
    # work.meff and work.gvar, then _moments_loglik
    meff = work.meff
    var = work.gvar
    for i in range(p - tgt.cfg[0].n_noise):
        a = work.alpha[i]
        kk = keff[i]
        s = work.sigma[i]
        meff[i] = a * kk
        var[i] = a * (s * s + (1.0 - a) * kk * kk)
    return _moments_loglik(vparams, p, tgt, work, ws, stats, rng, act, lik)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _moments_loglik(vparams, p, tgt, work, ws, stats, rng, act, lik):
    # beta loglik + log p(eta) at one draw from the weights' moments in work.meff and
    # work.gvar: the log noise precisions, then every pre-activation per row by the local
    # reparameterization trick
    XT, YT, W, sizes, offsets, prior_mean, prior_scale, tau, cfgs = tgt
    cfg = cfgs[0]
    n = XT.shape[0] // sizes[0]
    k = sizes[sizes.shape[0] - 1]
    sw = weight_sum(tgt) if lik == 0 else 0.0
    lp = _noise_draw(vparams, p, p - cfg.n_noise, k, tau, cfg, work, rng)
    out_base = lrt_forward(work.meff, work.gvar, XT, sizes, offsets, act, n, ws, rng)
    _, _, _, vbuf, wn = _bases(sizes, n)
    ll = _loglik_delta(ws, out_base, YT, W, sw, tau, lik, k, n, ws, vbuf + wn, stats, cfg, 0)
    return cfg.beta * ll + lp


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _spike_lrt_moment_grads(tgt, work, ws, act):
    # the gradient of _spike_lrt_loglik's beta loglik in the weights' means (into work.w)
    # and variances (into work.eps; past n_w, eps keeps the noise's normals), unscaled
    XT, YT, W, sizes, offsets, prior_mean, prior_scale, tau, cfgs = tgt
    cfg = cfgs[0]
    n = XT.shape[0] // sizes[0]
    gm = work.w
    gv = work.eps
    for i in range(work.sigma.shape[0] - cfg.n_noise):
        gm[i] = 0.0
        gv[i] = 0.0
    lrt_backward(work.meff, work.gvar, XT, sizes, offsets, act, n, ws, gm, gv, cfg.beta)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _spike_lrt_chain(keff, p, n_w, work, scale, gk):
    # from the moments' gradients (work.w, work.eps) to the slab means keff (times scale,
    # into gk), rho and lambda (into work.glam)
    # views per part, never glam[p + i] (see spike_slab_kl_grad)
    grho = work.glam[p : 2 * p]
    glam = work.glam[2 * p : 3 * p]
    gm = work.w
    gv = work.eps
    alpha = work.alpha
    sigma = work.sigma
    dsigma = work.dsigma
    for i in range(n_w):
        a = alpha[i]
        kk = keff[i]
        s = sigma[i]
        gk[i] += scale * (gm[i] * a + gv[i] * 2.0 * a * (1.0 - a) * kk)
        grho[i] += scale * gv[i] * 2.0 * a * s * dsigma[i]
        glam[i] += (scale * (gm[i] * kk + gv[i] * (s * s + (1.0 - 2.0 * a) * kk * kk))
                    * a * (1.0 - a))  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def spike_slab_prepare(vparams, p, n_w, work, prepare=None):
    """A step of the mean-field family by the local reparameterization trick, before its
    draws: :func:`set_sigmas`, :func:`set_alphas` and :func:`spike_slab_terms` (with its
    gradient, assigned to all of ``work.glam`` rather than added) in one pass over the
    parameters, which also leaves the weights' moments of :func:`lbbnn_lrt_term` in
    ``work.meff`` and ``work.gvar`` and zeros ``work.w`` and ``work.eps`` (where the draws'
    :func:`lrt_backward` adds the moments' gradients) for ``[0, n_w)``. Returns
    ``-KL`` plus the log noise precisions' entropy, as :func:`spike_slab_terms` does.
    :func:`spike_slab_finish` completes the step's gradient after the draws.

    On :data:`~skbnn.kernels.team.SPLIT_MIN_WEIGHTS` weights or more, the pass runs as two
    over fixed halves, the second on the team's helper where one runs: the KL's two
    partial sums are added in the same order either way.

    ``prepare``: :func:`prepare_task` by address (:func:`task_kernels`), which then runs
    this thread's share of the pass too, so that the caller compiles without the pass (a
    fit's helper process compiles it meanwhile); None links it."""
    glam = work.glam
    value = _prepare_weights(vparams[:p], vparams[p : 2 * p], vparams[2 * p : 3 * p],
                             glam[:p], glam[p : 2 * p], glam[2 * p : 3 * p], work, n_w, 1.0,
                             False, prepare)  # fmt: skip
    rho = vparams[p : 2 * p]
    gk = glam[:p]
    grho = glam[p : 2 * p]
    glm = glam[2 * p : 3 * p]
    sigma = work.sigma
    dsigma = work.dsigma
    alpha = work.alpha
    for i in range(n_w, p):
        # the log noise precisions: always in, their entropy here (their Gamma prior is
        # a Monte Carlo term)
        r = rho[i]
        e = _exp_neg(-abs(r))
        s = (r if r > 0.0 else 0.0) + _log1p_unit(e)
        ds = (1.0 if r >= 0.0 else e) / (1.0 + e)
        sigma[i] = s
        dsigma[i] = ds
        alpha[i] = 1.0
        value += _log(s) + 0.5 * (1.0 + _LOG_2PI)
        gk[i] = 0.0
        grho[i] = ds / s
        glm[i] = 0.0
    return value


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _prepare_weights(kappa, rho, lam, gk, grho, glam, work, n_w, scale, add, prepare=None):
    # the pass of spike_slab_prepare over the weights 0..n_w - 1 at the slab means kappa
    # (parameter-length views): with add, its gradient times scale assigned to gk and
    # added to grho and glam; without, the gradient assigned to all three (scale is not
    # used). As two over fixed halves on
    # SPLIT_MIN_WEIGHTS weights or more, the second on the team's helper where one runs;
    # this thread's through prepare (prepare_task by address) unless it is None
    h = n_w // 2 if n_w >= SPLIT_MIN_WEIGHTS else n_w
    c = work.klc
    views = (kappa, rho, lam, gk, grho, glam, c[0], c[1], c[2], c[3], work.sigma, work.dsigma,
             work.alpha, work.meff, work.gvar, work.w, work.eps)  # fmt: skip
    block = np.empty(len(views), np.int64)
    helped = False
    if h < n_w and task_address(PREPARE) != 0:
        for j in range(len(views)):
            block[j] = address(views[j], h)
        helped = post(PREPARE, address(block, 0), n_w - h, as_bits(scale), int(add), 0, 0, 0,
                      0, 0, 0, 0, 0, 0)  # fmt: skip
    value = own_pass(prepare, views, 0, h, scale, add)
    if helped:
        value += from_bits(collect())
        # numba frees an array after its last use: this one keeps block, which the helper
        # read, alive until the helper is done
        block[0] = 0
    elif h < n_w:
        value += own_pass(prepare, views, h, n_w, scale, add)
    return value


def own_pass(prepare, views, lo, hi, scale, add):
    """:func:`_prepare_pass` over the weights ``lo..hi - 1`` of ``views`` (the seventeen of
    :func:`_prepare_weights`), through ``prepare`` (:func:`prepare_task` by address)
    unless it is None (linked)."""
    # run only without numba's compiler (NUMBA_DISABLE_JIT): the overload's choice
    return _own_pass_overload(prepare, views, lo, hi, scale, add)(prepare, views, lo, hi,
                                                                  scale, add)  # fmt: skip


@overload(own_pass, **_OVERLOAD)
def _own_pass_overload(prepare, views, lo, hi, scale, add):
    if prepare is None or isinstance(prepare, (types.NoneType, types.Omitted)):

        def linked(prepare, views, lo, hi, scale, add):
            v = views
            return _prepare_pass(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9],
                                 v[10], v[11], v[12], v[13], v[14], v[15], v[16], lo, hi,
                                 scale, add)  # fmt: skip

        return linked

    def by_address(prepare, views, lo, hi, scale, add):
        block = np.empty(len(views), np.int64)
        for j in range(len(views)):
            block[j] = address(views[j], lo)
        value = from_bits(prepare(address(block, 0), hi - lo, as_bits(scale), int(add)))
        block[0] = 0  # keeps block alive until the pass has read it
        return value

    return by_address


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _prepare_pass(kappa, rho, lam, gk, grho, glam, lp_in, lp_out, c_kl, inv, sigma, dsigma,
                  alpha, meff, var, gm, gv, lo, hi, scale, add):  # fmt: skip
    return _prepare_loop(kappa[lo:], rho[lo:], lam[lo:], gk[lo:], grho[lo:], glam[lo:],
                         lp_in[lo:], lp_out[lo:], c_kl[lo:], inv[lo:], sigma[lo:],
                         dsigma[lo:], alpha[lo:], meff[lo:], var[lo:], gm[lo:], gv[lo:],
                         hi - lo, scale, add)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _prepare_loop(kappa, rho, lam, gk, grho, glam, lp_in, lp_out, c_kl, inv, sigma, dsigma,
                  alpha, meff, var, gm, gv, n, scale, add):  # fmt: skip
    # one loop per value of add, each inlined with it constant: no select in the loop, and
    # without add no scaling (spike_slab_prepare's gradient is its own)
    if add:
        return _prepare_body(kappa, rho, lam, gk, grho, glam, lp_in, lp_out, c_kl, inv, sigma,
                             dsigma, alpha, meff, var, gm, gv, n, scale, True)  # fmt: skip
    return _prepare_body(kappa, rho, lam, gk, grho, glam, lp_in, lp_out, c_kl, inv, sigma,
                         dsigma, alpha, meff, var, gm, gv, n, 1.0, False)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _prepare_body(kappa, rho, lam, gk, grho, glam, lp_in, lp_out, c_kl, inv_all, sigma, dsigma,
                  alpha, meff, var, gm, gv, n, scale, add):  # fmt: skip
    # softplus, the logistic and the logs from _libm's polynomials, one exponential per
    # parameter for each of rho and lambda: math's libm calls would keep the loop scalar,
    # and this pass over every weight is most of a step's time outside the BLAS products.
    # Views that start at the range's first weight, never glam[p + i]: an offset index
    # that LLVM cannot prove non-negative keeps the loop scalar (see
    # skbnn.kernels._compile)
    value = 0.0
    for i in range(n):
        r = rho[i]
        e = _exp_neg(-abs(r))
        s = (r if r > 0.0 else 0.0) + _log1p_unit(e)
        ds = (1.0 if r >= 0.0 else e) / (1.0 + e)
        li = lam[i]
        el = _exp_neg(-abs(li))
        lo = _log1p_unit(el)
        lpi = lp_in[i]
        spike = lpi > 0.0  # psi < 1
        a_l = (1.0 if li >= 0.0 else el) / (1.0 + el)
        a = a_l if spike else 1.0
        k = kappa[i]
        inv = inv_all[i]
        # _pair_kl with the prior's logs and 1 / s0^2 read, not computed (Work.klc)
        kln = c_kl[i] - _log(s) + 0.5 * (s * s + k * k) * inv
        d_in = -((-li if li < 0.0 else 0.0) + lo) + lpi + kln
        d_out = -((li if li > 0.0 else 0.0) + lo) + lp_out[i]
        a1 = a * (1.0 - a)
        value -= a * d_in + (1.0 - a) * d_out if spike else kln
        g_r = scale * (-a * (s * inv - 1.0 / s) * ds)
        g_l = scale * (-(d_in - d_out) * a1 if spike else 0.0)
        gk[i] = scale * (-a * k * inv)
        grho[i] = grho[i] + g_r if add else g_r
        glam[i] = glam[i] + g_l if add else g_l
        sigma[i] = s
        dsigma[i] = ds
        alpha[i] = a
        meff[i] = a * k
        var[i] = a * (s * s + (1.0 - a) * k * k)
        gm[i] = 0.0
        gv[i] = 0.0
    return value


@njit(cache=True, nogil=True, error_model="numpy", from_python=False, by_address=True)
def prepare_task(block, n, scale, add):
    """A posted half of :func:`spike_slab_prepare`'s pass
    (:data:`~skbnn.kernels.team.PREPARE`): ``block`` the address of the seventeen views'
    addresses at its first weight; returns its partial sum's bits. The helper calls it
    through its address (:func:`task_kernels`)."""
    at = carray(integers_at(block), (17,))
    v = [carray(doubles_at(at[j]), (n,)) for j in range(17)]
    return as_bits(_prepare_loop(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9],
                                 v[10], v[11], v[12], v[13], v[14], v[15], v[16], n,
                                 from_bits(scale), add != 0))  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def lbbnn_lrt_prepared_term(vparams, p, tgt, work, ws, stats, rng, scale, act, lik, backward=None):
    """:func:`lbbnn_lrt_term` with its gradient after :func:`spike_slab_prepare`: the
    draw's moments' gradients added to ``work.w`` and ``work.eps`` (unscaled by ``scale``,
    which :func:`spike_slab_finish` applies once for all draws), the noise's to
    ``work.glam``. ``backward``: the backward pass by address
    (:func:`skbnn.kernels.lrt.lrt_backward_kernel`), or None to link it."""
    value = _moments_loglik(vparams, p, tgt, work, ws, stats, rng, act, lik)
    XT, sizes, offsets, cfg = tgt.XT, tgt.sizes, tgt.offsets, tgt.cfg[0]
    backward_pass(backward, work.meff, work.gvar, XT, sizes, offsets, act, n_rows(tgt), ws,
                  work.w, work.eps, cfg.beta)  # fmt: skip
    _spike_noise_grad(p, tgt, work, stats, lik, scale)
    return value


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def spike_slab_finish(vparams, p, n_w, work, scale, finish=None):
    """Ends a step prepared by :func:`spike_slab_prepare`: chains the moments' gradients
    that the draws added to ``work.w`` and ``work.eps``, times ``scale``, into ``work.glam``
    (as :func:`lbbnn_lrt_term` does per draw). Returns whether any of ``work.glam[:3 p]``
    is inf or NaN. On many weights the team's helper chains the second half (each
    weight's gradient is its own: the same bits). ``finish``: :func:`finish_task` by
    address, as :func:`spike_slab_prepare`'s ``prepare``."""
    glam = work.glam
    flag = _finish_weights(vparams[:p], glam[:p], glam[p : 2 * p], glam[2 * p : 3 * p], work,
                           n_w, scale, finish)  # fmt: skip
    gk = glam[:p]
    grho = glam[p : 2 * p]
    glm = glam[2 * p : 3 * p]
    for i in range(n_w, p):
        flag += gk[i] * 0.0 + grho[i] * 0.0 + glm[i] * 0.0
    return flag != 0.0


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _finish_weights(kappa, gk, grho, glam, work, n_w, scale, finish=None):
    # spike_slab_finish's pass over the weights 0..n_w - 1 at the slab means kappa, into
    # gk, grho and glam (parameter-length views): 0 if every gradient is finite. As two
    # over fixed halves where _prepare_weights splits, the second on the helper; this
    # thread's through finish (finish_task by address) unless it is None
    h = n_w // 2 if n_w >= SPLIT_MIN_WEIGHTS else n_w
    views = (kappa, gk, grho, glam, work.alpha, work.sigma, work.dsigma, work.w, work.eps)
    block = np.empty(len(views), np.int64)
    helped = False
    if h < n_w and task_address(FINISH) != 0:
        for j in range(len(views)):
            block[j] = address(views[j], h)
        helped = post(FINISH, address(block, 0), n_w - h, as_bits(scale), 0, 0, 0, 0, 0, 0, 0,
                      0, 0, 0)  # fmt: skip
    end = h if helped else n_w
    flag = own_finish(finish, views, end, scale)
    if helped:
        flag += from_bits(collect())
        block[0] = 0  # keeps block alive until the helper is done (_prepare_weights)
    return flag


def own_finish(finish, views, n, scale):
    """:func:`_finish_pass` over the first ``n`` weights of ``views`` (the nine of
    :func:`_finish_weights`), through ``finish`` (:func:`finish_task` by address) unless it
    is None (linked)."""
    # run only without numba's compiler (NUMBA_DISABLE_JIT): the overload's choice
    return _own_finish_overload(finish, views, n, scale)(finish, views, n, scale)


@overload(own_finish, **_OVERLOAD)
def _own_finish_overload(finish, views, n, scale):
    if finish is None or isinstance(finish, (types.NoneType, types.Omitted)):

        def linked(finish, views, n, scale):
            v = views
            return _finish_pass(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], scale, n)

        return linked

    def by_address(finish, views, n, scale):
        block = np.empty(len(views), np.int64)
        for j in range(len(views)):
            block[j] = address(views[j], 0)
        flag = from_bits(finish(address(block, 0), n, as_bits(scale), 0))
        block[0] = 0  # keeps block alive until the pass has read it
        return flag

    return by_address


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _finish_pass(kappa, gk, grho, glam, alpha, sigma, dsigma, gm, gv, scale, n):
    # spike_slab_finish's pass over the first n weights of the views; views per part, as
    # in spike_slab_prepare. 0 * x is 0 for finite x and NaN for inf or NaN, and _FM does
    # not assume finite values: one vectorized sum says whether any is
    flag = 0.0
    for i in range(n):
        a = alpha[i]
        k = kappa[i]
        s = sigma[i]
        m = scale * gm[i]
        v = scale * gv[i]
        g0 = gk[i] + (m * a + v * 2.0 * a * (1.0 - a) * k)
        g1 = grho[i] + v * 2.0 * a * s * dsigma[i]
        g2 = glam[i] + (m * k + v * (s * s + (1.0 - 2.0 * a) * k * k)) * a * (1.0 - a)
        gk[i] = g0
        grho[i] = g1
        glam[i] = g2
        flag += g0 * 0.0 + g1 * 0.0 + g2 * 0.0
    return flag


@njit(cache=True, nogil=True, error_model="numpy", from_python=False, by_address=True)
def finish_task(block, n, scale, unused):
    """A posted half of :func:`spike_slab_finish`'s pass
    (:data:`~skbnn.kernels.team.FINISH`): ``block`` the address of the nine views'
    addresses at its first weight; returns its flag's bits. ``unused``: every task kernel
    the helper calls through its address takes four integers (:func:`task_kernels`)."""
    at = carray(integers_at(block), (9,))
    v = [carray(doubles_at(at[j]), (n,)) for j in range(9)]
    return as_bits(_finish_pass(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
                                from_bits(scale), n))  # fmt: skip


def task_kernels() -> tuple[CompiledKernel, CompiledKernel]:
    """:func:`prepare_task` and :func:`finish_task` as the helper calls them, through their
    addresses (:func:`skbnn.kernels.team.register_task`): the team's loop then links no
    copy of these passes, which only LBBNN's fits post."""
    sig = types.int64(types.int64, types.int64, types.int64, types.int64)
    return (compiled_kernel(sig, (__name__, "prepare_task", None)),
            compiled_kernel(sig, (__name__, "finish_task", None)))  # fmt: skip


def register_tasks() -> None:
    """Let the team's helper take half of the mean-field and flow families' passes over
    their weights (:func:`task_kernels`), compiling or loading them if needed."""
    prepare, finish = task_kernels()
    register_task(PREPARE, prepare)
    register_task(FINISH, finish)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _spike_noise_grad(p, tgt, work, stats, lik, scale):
    # _noise_grad after _spike_lrt_loglik's draw
    cfg = tgt.cfg[0]
    n_w = p - cfg.n_noise
    sw = weight_sum(tgt) if lik == 0 else 0.0
    k = tgt.sizes[tgt.sizes.shape[0] - 1]
    _noise_grad(p, n_w, k, tgt.tau, cfg, stats, sw, cfg.beta, work, scale)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def lbbnn_concrete_term(vparams, p, tgt, temperature, work, ws, stats, rng, with_grad, scale, act,
                        lik):  # fmt: skip
    """One Monte Carlo draw of ``beta loglik + log p(eta)`` at a draw of the weights with
    the indicators relaxed to the concrete (binary Gumbel-softmax) distribution of
    ``temperature`` (Maddison et al. 2017), ``gamma = sigmoid((lambda + logit(u)) / t)``,
    and ``beta`` reparameterized; its gradient in ``vparams`` times ``scale`` added to
    ``work.glam``. ``act`` and ``lik`` are the network's activation and likelihood codes."""
    XT, YT, W, sizes, offsets, prior_mean, prior_scale, tau, cfgs = tgt
    cfg = cfgs[0]
    n = XT.shape[0] // sizes[0]
    n_layers = sizes.shape[0] - 1
    k = sizes[n_layers]
    n_w = p - cfg.n_noise
    beta = cfg.beta
    sw = weight_sum(tgt) if lik == 0 else 0.0
    w = work.w
    gam = work.meff
    for i in range(p):
        e = rng.standard_normal()
        work.eps[i] = e
        b = vparams[i] + work.sigma[i] * e
        if work.psi[i] < 1.0:
            u = rng.random()
            gg = _sigmoid((vparams[2 * p + i] + math.log(u) - math.log1p(-u)) / temperature)
            gam[i] = gg
            w[i] = gg * b
        else:
            gam[i] = 1.0
            w[i] = b
    lp = 0.0
    a0 = cfg.noise_shape
    b0 = cfg.noise_rate
    for o in range(p - n_w):
        tau[o] = math.exp(w[n_w + o])
        lp += a0 * w[n_w + o] - b0 * tau[o] + a0 * math.log(b0) - math.lgamma(a0)
    out_base = forward(w, XT, sizes, offsets, act, n, ws)
    ll = _loglik_delta(ws, out_base, YT, W, sw, tau, lik, k, n, ws, out_base + k * n, stats, cfg,
                       0)  # fmt: skip
    if with_grad:
        g = work.grad
        for i in range(n_w):
            g[i] = 0.0
        _backward(w, XT, sizes, offsets, act, n, ws, g, beta)
        for o in range(p - n_w):
            g[n_w + o] = beta * (0.5 * sw - 0.5 * tau[o] * stats[2 + o]) + a0 - b0 * tau[o]
        glam = work.glam
        for i in range(p):
            gi = scale * g[i]
            gg = gam[i]
            glam[i] += gi * gg
            glam[p + i] += gi * gg * work.eps[i] * work.dsigma[i]
            if work.psi[i] < 1.0:
                b = vparams[i] + work.sigma[i] * work.eps[i]
                glam[2 * p + i] += gi * b * gg * (1.0 - gg) / temperature
    return beta * ll + lp


#: VI_CONFIG's ``lbbnn`` codes: the estimators of the spike-and-slab family's expected
#: log-likelihood.
LBBNN_LRT, LBBNN_CONCRETE, LBBNN_FLOW, LBBNN_LOWRANK = 1, 2, 3, 4


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def lbbnn_flow_term(vparams, p, tgt, vc, work, ws, stats, rng, with_grad, scale, act, lik):
    """One Monte Carlo draw of the spike-and-slab family with multiplicative normalizing
    flows (Louizos and Welling 2017; Skaaret-Lund et al. 2024): ``beta loglik + log p(eta)
    - KL(q(W | z) || p(W)) + log r(z | W) - log q(z)``, its gradient in ``vparams`` times
    ``scale`` added to ``work.glam``.

    Each weight layer draws its latent ``z`` (one per input, :mod:`skbnn.kernels.flows`);
    given ``z``, the slab of weight ``(i, j)`` is ``N(z_i kappa_ij, sigma_ij^2)``, so the
    KL is the mean-field one at the means ``z_i kappa_ij``, and the log-likelihood is drawn
    by the local reparameterization trick at those means. The auxiliary ``r(z | W)`` is
    Gaussian after ``r``'s own flow, with mean ``d0 + d1 nu`` and log variance ``v0 + d2
    nu``, ``nu`` the mean over the layer's outputs ``j`` of ``tanh(sum_i e_i W_ij)``; the
    sum is drawn from the Gaussian of its moments under ``q(W | z)``, as the
    pre-activations are. Every term but the last two is the mean-field family's at the
    scaled means; ``log r - log q`` makes the bound account for ``z``."""
    sizes = tgt.sizes
    offsets = tgt.offsets
    n_layers = sizes.shape[0] - 1
    n_w = p - tgt.cfg[0].n_noise
    hid = vc.flow_hidden
    n_steps = vc.flow_steps
    fb = 3 * p
    lay = work.flay
    fc = work.fcache
    shared = fc[: lay[0, 1]]  # the backward passes' scratch
    keff = work.keff
    value = 0.0
    # z of every layer, -log q(z), and the scaled slab means (the noise's are its own)
    for i in range(n_w, p):
        keff[i] = vparams[i]
    for layer in range(n_layers):
        d = sizes[layer]
        n_out = sizes[layer + 1]
        pb = fb + lay[layer, 0]
        cb = lay[layer, 1]
        zk = fc[cb + d : cb + 2 * d]
        for i in range(d):
            e = rng.standard_normal()
            fc[cb + i] = e
            sd = softplus(vparams[pb + d + i])
            zk[i] = vparams[pb + i] + sd * e
            value += 0.5 * e * e + math.log(sd) + 0.5 * _LOG_2PI
        value += kflows.flow_forward(vparams, pb + kflows.BASE_VECTORS * d, d, hid, n_steps, zk,
                                     fc, cb + 2 * d)  # fmt: skip
        _scale_means(vparams, keff, offsets[layer], d, n_out, zk)
    if not with_grad:
        value += spike_slab_kl_grad(keff, vparams, p, n_w, work, False, scale, work.grad)
        value += _spike_lrt_loglik(keff, vparams, p, tgt, work, ws, stats, rng, act, lik)
        for layer in range(n_layers):
            value += kflows.log_r(vparams, p, sizes, offsets, layer, hid, n_steps, work.meff,
                                  work.gvar, work, rng)  # fmt: skip
        return value
    # the KL at the scaled means, with the weights' moments, in one pass over the weights
    # (in halves, one on the team's helper where one runs, as spike_slab_prepare): its
    # gradient in keff to gk, in rho and lambda added to glam, all times scale
    glam = work.glam
    gk = work.grad
    value += _prepare_weights(keff[:p], vparams[p : 2 * p], vparams[2 * p : 3 * p], gk[:p],
                              glam[p : 2 * p], glam[2 * p : 3 * p], work, n_w, scale,
                              True)  # fmt: skip
    sigma = work.sigma
    grho = glam[p : 2 * p]
    for i in range(n_w, p):
        # the log noise precisions' entropy (their Gamma prior is a Monte Carlo term)
        value += _log(sigma[i]) + 0.5 * (1.0 + _LOG_2PI)
        grho[i] += scale * work.dsigma[i] / sigma[i]
    # the log-likelihood by the local reparameterization trick at those moments
    value += _moments_loglik(vparams, p, tgt, work, ws, stats, rng, act, lik)
    XT, cfg = tgt.XT, tgt.cfg[0]
    n = n_rows(tgt)
    # log r(z | W), keeping what its gradient needs
    for layer in range(n_layers):
        value += kflows.log_r(vparams, p, sizes, offsets, layer, hid, n_steps, work.meff,
                              work.gvar, work, rng)  # fmt: skip
    # gradients in the moments (unscaled): the likelihood's, then log r's; chained to gk,
    # rho and lambda in halves, as spike_slab_finish
    lrt_backward(work.meff, work.gvar, XT, sizes, offsets, act, n, ws, work.w, work.eps,
                 cfg.beta)  # fmt: skip
    for layer in range(n_layers):
        kflows.log_r_grad(vparams, p, sizes, offsets, layer, hid, n_steps, work.meff, work.gvar,
                          work.w, work.eps, work, scale, shared)  # fmt: skip
    # the step's check for inf and NaN, as a sum that is 0 or NaN (added to the value: the
    # epoch kernel checks the value, and need not read the gradient again): the weights'
    # gradients in rho and lambda here, in kappa in _chain_means, the rest at the end
    flag = _finish_weights(keff[:p], gk[:p], grho, glam[2 * p : 3 * p], work, n_w, scale)
    _spike_noise_grad(p, tgt, work, stats, lik, scale)
    # from keff = z kappa to kappa and z, then back through q's flow to its base
    for layer in range(n_layers):
        d = sizes[layer]
        n_out = sizes[layer + 1]
        pb = fb + lay[layer, 0]
        cb = lay[layer, 1]
        zk = fc[cb + d : cb + 2 * d]
        gz = fc[lay[layer + 1, 1] - 2 * d : lay[layer + 1, 1] - d]
        flag += _chain_means(vparams, gk, glam, offsets[layer], d, n_out, zk, gz)
        kflows.flow_backward(vparams, pb + kflows.BASE_VECTORS * d, d, hid, n_steps, gz, scale,
                             fc, cb + 2 * d, glam, shared)  # fmt: skip
        for i in range(d):
            sd = softplus(vparams[pb + d + i])
            glam[pb + i] += gz[i]
            glam[pb + d + i] += (gz[i] * fc[cb + i] + scale / sd) * _sigmoid(vparams[pb + d + i])
    for part in range(3):
        for i in range(part * p + n_w, (part + 1) * p):
            flag += glam[i] * 0.0
    for i in range(fb, glam.shape[0]):
        flag += glam[i] * 0.0
    return value + flag


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _scale_means(kappa, keff, w_start, d, n_out, z):
    # the flow family's slab means of a weight layer: keff = z_i kappa_ij for the weights,
    # kappa for the biases. Row views, never keff[base + j] (see skbnn.kernels._compile)
    for i in range(d):
        lo = w_start + i * n_out
        kr = kappa[lo : lo + n_out]
        row = keff[lo : lo + n_out]
        zi = z[i]
        for j in range(n_out):
            row[j] = kr[j] * zi
    lo = w_start + d * n_out
    kb = kappa[lo : lo + n_out]
    rb = keff[lo : lo + n_out]
    for j in range(n_out):
        rb[j] = kb[j]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _chain_means(kappa, gk, glam, w_start, d, n_out, z, gz):
    # the chain rule of _scale_means: the gradient gk in keff adds z_i gk_ij to glam's
    # kappa part (gk_j for the biases) and sum_j kappa_ij gk_ij to gz_i. One pass over the
    # rows, its sums reassociated (_FM), which vectorizes them. Returns 0 if every kappa
    # gradient it leaves is finite, else NaN (0 * x is NaN for inf or NaN)
    flag = 0.0
    for i in range(d):
        lo = w_start + i * n_out
        kr = kappa[lo : lo + n_out]
        gr = gk[lo : lo + n_out]
        gl = glam[lo : lo + n_out]
        zi = z[i]
        acc = 0.0
        for j in range(n_out):
            g = gr[j]
            t = gl[j] + zi * g
            gl[j] = t
            acc += kr[j] * g
            flag += t * 0.0
        gz[i] += acc
    lo = w_start + d * n_out
    gr = gk[lo : lo + n_out]
    gl = glam[lo : lo + n_out]
    for j in range(n_out):
        t = gl[j] + gr[j]
        gl[j] = t
        flag += t * 0.0
    return flag


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _spike_slab_mc_term(vparams, p, tgt, vc, work, ws, stats, rng, with_grad, scale, act, lik):
    # mc_term for the spike-and-slab family, by the estimator vc.lbbnn says; act and lik
    # are the network's codes, constants in a specialized epoch kernel
    if vc.lbbnn == 1:
        return lbbnn_lrt_term(vparams, p, tgt, work, ws, stats, rng, with_grad, scale, act, lik)
    return lbbnn_concrete_term(vparams, p, tgt, vc.temperature, work, ws, stats, rng, with_grad,
                               scale, act, lik)  # fmt: skip
