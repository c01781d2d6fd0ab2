"""Numba kernels of variational inference (Bayes by Backprop, Blundell et al. 2015).

The variational family is a Gaussian over ``theta`` (weights, biases and any trailing log
noise precisions), stored flat as ``vparams = [mu, rho, V]``: the mean ``mu``, the diagonal
sds ``sigma = softplus(rho)`` and, for the low-rank family, ``rank`` rows ``V`` (row-major,
``rank x n_params``) so that ``q = N(mu, diag(sigma^2) + V' V)``.

The ELBO is ``E_q[loglik] + E_q[log p(theta)] + H[q]``. The entropy ``H`` is exact (with
the matrix determinant lemma for the low-rank part), and so is ``E_q[log p]`` of the
weights under a Gaussian prior (the closed-form KL); other priors, and the Gamma prior of
the log noise precisions, are Monte Carlo terms at a draw of ``theta``. The expected
log-likelihood is estimated by the reparameterization trick, either at a draw of all
weights (shared by the rows of a minibatch) or, for the mean-field family, by the local
reparameterization trick (Kingma et al. 2015): each dense layer's pre-activations are
drawn per row from their Gaussian, ``N(a mu_W + mu_b, a^2 sigma_W^2 + sigma_b^2)``, which
is the same as an independent draw of the weights for every row, so the estimate is
unbiased for every layer and its variance falls with the batch size.

A step ascends ``(n / B) loglik_B + E_q[log p] + H`` (the minibatch's likelihood scaled to
the training rows, the prior and entropy once), whose average over an epoch's batches,
weighted by their rows, is exactly an unbiased estimate of the ELBO: the per-epoch
objective is the ELBO, with no ad-hoc KL weights.

Where the weights are drawn (no local reparameterization), the entropy's gradient is the
path derivative at the draw, ``Sigma^-1 (theta - mu)`` chained through the draw ("sticking
the landing", Roeder et al. 2017): it drops a term of expectation zero, so the gradient
stays unbiased, and its variance shrinks as ``q`` approaches the posterior (to zero for
the Monte Carlo terms), so the optimizer settles instead of jittering around the optimum.

``VI_CONFIG`` holds ``n_mc`` (draws per step), ``local`` (1: local reparameterization),
``closed_kl`` (1: the weights' Gaussian prior term in closed form), ``rank`` and ``stl``
(1: the path-derivative entropy gradient; 0: the analytic one, for gradient checks).
"""

import functools
import math
from collections import namedtuple

import numpy as np

from . import flows as kflows
from ._compile import _FM, _named, njit, record
from ._libm import _LOG_2PI, _exp_neg, _log, _log1p_unit
from ._vcommon import _noise_draw, _noise_grad
from .backprop import _backward
from .density import weight_sum
from .layers import forward
from .lbbnn import (
    LBBNN_CONCRETE,
    LBBNN_FLOW,
    LBBNN_LOWRANK,
    LBBNN_LRT,
    _spike_slab_mc_term,
    lbbnn_concrete_term,
    lbbnn_flow_term,
    lbbnn_lrt_prepared_term,
    set_alphas,
    spike_slab_finish,
    spike_slab_prepare,
    spike_slab_terms,
)
from .lbbnn_lowrank import lbbnn_lowrank_term, lowrank_layout, lowrank_slab_terms
from .likelihoods import _loglik_delta
from .lrt import _bases, backward_pass, lrt_forward
from .optim import batch_target, descent_step, rows_weight
from .priors import log_prior

VI_CONFIG = record(
    [
        ("n_mc", np.int64),
        ("local", np.int64),
        ("closed_kl", np.int64),
        ("rank", np.int64),
        ("stl", np.int64),
        ("lbbnn", np.int64),
        ("temperature", np.float64),
        ("flow_steps", np.int64),
        ("flow_hidden", np.int64),
    ],
    align=True,
)

#: Scratch arrays of one member: ``sigma`` and ``dsigma`` (softplus and its derivative at
#: rho), ``eps`` (a draw's standard normals), ``w`` (a draw of theta), ``grad`` and
#: ``gvar`` (gradients in theta and in the weights' variances), ``glam`` (the gradient in
#: vparams), ``z`` (the low-rank normals), ``dvz`` and ``minv`` (the low-rank entropy's
#: ``M^-1 U`` and ``M^-1``); for the spike-and-slab family, ``alpha`` (inclusion
#: probabilities), ``meff`` (the effective means, or a draw's relaxed indicators) and the
#: prior's constants ``psi`` (prior inclusion probability per parameter, 1 for those
#: always in) and ``slab`` (the slab's sd per network parameter), and from them ``klc``,
#: the rows ``-log psi``, ``-log(1 - psi)``, ``log slab - 1/2`` and ``slab^-2`` (the KL's
#: constants, read by each step rather than computed); for the flow estimator,
#: ``keff`` (the slab means scaled by a draw of the latent ``z``), ``flay`` (the flows'
#: layout, :func:`skbnn.kernels.flows.flow_layout`) and ``fcache`` (the flows' scratch).
Work = namedtuple(
    "Work",
    ["sigma", "dsigma", "eps", "w", "grad", "gvar", "glam", "z", "dvz", "minv", "alpha",
     "meff", "psi", "slab", "klc", "keff", "flay", "fcache"],
)  # fmt: skip


def new_work(n_params: int, rank: int, psi=None, slab=None, sizes=None, flow_hidden: int = 0,
             flow_steps: int = -1, slab_rank: int = 0) -> Work:  # fmt: skip
    """Scratch arrays for a member with ``n_params`` parameters and ``rank`` factors; with
    ``psi`` and ``slab``, for the spike-and-slab family (``vparams`` has ``3 n_params``
    entries); with the network's ``sizes`` and ``flow_steps >= 0``, for its flow estimator
    too (``vparams`` has the flows' parameters after those), or with ``slab_rank > 0``, for
    its low-rank slab (``vparams`` has every layer's factors after those,
    :func:`lowrank_layout`)."""
    p, r = int(n_params), int(rank)
    spike = psi is not None
    width = 3 if spike else 2 + r
    psi = np.ones(p) if psi is None else np.ascontiguousarray(psi, dtype=np.float64)
    slab = np.ones(p) if slab is None else np.ascontiguousarray(slab, dtype=np.float64)
    if flow_steps >= 0:
        flay = kflows.flow_layout(np.asarray(sizes, dtype=np.int64), flow_hidden, flow_steps)
    elif slab_rank > 0:
        flay = lowrank_layout(np.asarray(sizes, dtype=np.int64), slab_rank)
    else:
        flay = np.zeros((1, 2), np.int64)
    n_flow, n_cache = int(flay[-1, 0]), int(flay[-1, 1])
    return Work(
        np.empty(p), np.empty(p), np.empty(p), np.empty(p), np.empty(p), np.empty(p),
        np.empty(width * p + n_flow), np.empty(r), np.empty((r, p)), np.empty((r, r)),
        np.ones(p), np.empty(p), psi, slab,
        _kl_constants(psi, slab) if spike else np.empty((4, 0)),
        np.empty(p if n_flow else 0), flay, np.empty(n_cache),
    )  # fmt: skip


def _kl_constants(psi: np.ndarray, slab: np.ndarray) -> np.ndarray:
    # Work.klc; psi = 1 (always in) gives -log(1 - psi) = inf, which the steps never use
    out = np.empty((4, psi.size))
    with np.errstate(divide="ignore"):
        out[0] = -np.log(psi)
        out[1] = -np.log1p(-psi)
    out[2] = np.log(slab) - 0.5
    out[3] = 1.0 / (slab * slab)
    return out


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def set_sigmas(vparams, p, work):
    """``sigma = softplus(rho)`` and its derivative ``sigmoid(rho)`` into ``work``."""
    rho = vparams[p : 2 * p]
    sigma = work.sigma
    dsigma = work.dsigma
    for i in range(p):
        # both from one exponential of _libm's, as in meanfield_terms: math's libm calls
        # would keep the loop scalar
        r = rho[i]
        e = _exp_neg(-abs(r))
        sigma[i] = (r if r > 0.0 else 0.0) + _log1p_unit(e)
        dsigma[i] = (1.0 if r >= 0.0 else e) / (1.0 + e)


@njit(cache=True, nogil=True, error_model="numpy")
def analytic_terms(vparams, p, n_w, rank, closed_kl, prior_mean, prior_scale, work, with_grad,
                   entropy_grad):  # fmt: skip
    """``H[q]`` plus, with ``closed_kl``, the exact ``E_q[log p]`` of the weights under
    their Gaussian prior; adds its gradient in ``vparams`` to ``work.glam`` when asked (the
    entropy's only with ``entropy_grad``). Leaves ``M^-1`` of the low-rank family in
    ``work.minv``. ``work.sigma`` must be current (:func:`set_sigmas`)."""
    value = _diagonal_entropy(p, work)
    if rank > 0:
        value = _lowrank_entropy(value, vparams, p, rank, work, with_grad, entropy_grad)
    return _diagonal_rest(value, vparams, p, n_w, rank, closed_kl, prior_mean, prior_scale, work,
                          with_grad, entropy_grad)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def meanfield_terms(vparams, p, n_w, closed_kl, prior_mean, prior_scale, work, entropy_grad,
                    local=False, log_scale=np.nan):  # fmt: skip
    """:func:`set_sigmas` and :func:`analytic_terms` of the mean-field family (``rank`` 0)
    with its gradient, in one pass over the parameters.

    The epoch kernels of that family call this one, and so compile none of the linear
    algebra of the low-rank factors. Equal to those two to within rounding, not bit for
    bit: it sums in another order and evaluates ``softplus``, the logistic and the logs
    with :mod:`skbnn.kernels._libm`'s functions.

    Parameters
    ----------
    vparams : ndarray of shape (2 * p,)
        ``[mu, rho]``.
    p : int
        Parameters of ``theta``.
    n_w : int
        Network parameters among them (the weights' Gaussian prior covers ``[0, n_w)``).
    closed_kl : int
        Nonzero to include the closed-form ``E_q[log p]`` of the weights.
    prior_mean, prior_scale : ndarray of shape (n_w,) or longer
        The weights' Gaussian prior.
    work : Work
        ``sigma`` and ``dsigma`` are written, and ``glam[:2 p]`` is overwritten (not added
        to) with the gradient of the returned value in ``vparams``.
    entropy_grad : bool
        Whether that gradient includes the entropy's.
    local : bool
        With ``closed_kl``, prepare the local reparameterization's step instead
        (:func:`local_finish`): for ``[0, n_w)``, ``work.gvar`` gets the variances
        ``sigma^2``, ``work.eps`` gets ``2 sigma dsigma`` (their derivative in ``rho``) and
        ``work.w`` zeros, while ``sigma`` and ``dsigma`` are left as they were there.
    log_scale : float
        ``sum(log(prior_scale[:n_w]))`` (:func:`prior_log_scale`), if known.

    Returns
    -------
    float
        ``H[q]``, plus ``E_q[log p]`` of the weights with ``closed_kl``.
    """
    sigma = work.sigma
    dsigma = work.dsigma
    glam = work.glam
    mu = vparams[:p]
    rho = vparams[p : 2 * p]
    gmu = glam[:p]
    grho = glam[p : 2 * p]
    prep = local and closed_kl != 0
    # one exponential per parameter gives both softplus and the logistic, and the libm
    # calls of math.exp and math.log1p would keep these loops scalar
    log_sigma = 0.0
    quad = 0.0
    m = n_w if closed_kl else 0
    for i in range(m):
        r = rho[i]
        e = _exp_neg(-abs(r))
        s = (r if r > 0.0 else 0.0) + _log1p_unit(e)
        # one division for the logistic and the entropy's d sigma / sigma: divisions, not
        # memory, bound this loop
        q = 1.0 / ((1.0 + e) * s)
        num = 1.0 if r >= 0.0 else e
        d = num * (s * q)
        inv = 1.0 / (prior_scale[i] * prior_scale[i])
        dm = mu[i] - prior_mean[i]
        log_sigma += _log(s)
        quad += (dm * dm + s * s) * inv
        gmu[i] = -dm * inv
        grho[i] = (num * q if entropy_grad else 0.0) - s * inv * d
        if prep:
            work.gvar[i] = s * s
            work.eps[i] = 2.0 * s * d
            work.w[i] = 0.0
        else:
            sigma[i] = s
            dsigma[i] = d
    for i in range(m, p):
        r = rho[i]
        e = _exp_neg(-abs(r))
        s = (r if r > 0.0 else 0.0) + _log1p_unit(e)
        q = 1.0 / ((1.0 + e) * s)
        num = 1.0 if r >= 0.0 else e
        sigma[i] = s
        dsigma[i] = num * (s * q)
        log_sigma += _log(s)
        gmu[i] = 0.0
        grho[i] = num * q if entropy_grad else 0.0
    value = 0.5 * p * (1.0 + _LOG_2PI) + log_sigma
    if closed_kl:
        if math.isnan(log_scale):
            log_scale = prior_log_scale(prior_scale, n_w)
        value -= 0.5 * n_w * _LOG_2PI + 0.5 * quad + log_scale
    return value


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def prior_log_scale(prior_scale, n_w):
    """``sum(log(prior_scale[:n_w]))``: the Gaussian prior's share of
    :func:`meanfield_terms`, the same at every step of a fit."""
    total = 0.0
    for i in range(n_w):
        total += _log(prior_scale[i])
    return total


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def local_finish(glam, work, p, n_w):
    """Ends a step of the mean-field family prepared by :func:`meanfield_terms` with
    ``local``: adds the gradient in the variances that the draws accumulated in ``work.w``
    to ``glam``'s ``rho`` part, by the chain rule through ``work.eps``. Returns whether any
    of ``glam[:2 p]`` is inf or NaN (:func:`nonfinite`)."""
    flag = 0.0
    for i in range(n_w):
        gr = glam[p + i] + work.w[i] * work.eps[i]
        glam[p + i] = gr
        # 0 * x is 0 for finite x and NaN for inf or NaN, and _FM does not assume finite
        # values, so the sum says whether any is; unlike an early exit, it vectorizes
        flag += glam[i] * 0.0 + gr * 0.0
    for i in range(n_w, p):
        flag += glam[i] * 0.0 + glam[p + i] * 0.0
    return flag != 0.0


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def nonfinite(x, n):
    """Whether any of ``x[:n]`` is inf or NaN."""
    flag = 0.0
    for i in range(n):
        # as in local_finish: one vectorized sum, NaN iff an element is not finite
        flag += x[i] * 0.0
    return flag != 0.0


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _diagonal_entropy(p, work):
    # the entropy of N(mu, diag(sigma^2))
    sigma = work.sigma
    value = 0.5 * p * (1.0 + _LOG_2PI)
    for i in range(p):
        value += math.log(sigma[i])
    return value


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _lowrank_entropy(value, vparams, p, rank, work, with_grad, entropy_grad):
    # adds the low-rank factors' share of the entropy, log det(M) / 2, and its gradient
    sigma = work.sigma
    glam = work.glam
    # H = sum log sigma + log det(M) / 2 with M = I + V D^-1 V' (determinant lemma);
    # d H / d V = M^-1 U and d H / d sigma_i = 1 / sigma_i - sigma_i (U' M^-1 U)_ii for
    # U = V D^-1
    m = np.eye(rank)
    for a in range(rank):
        va = vparams[(2 + a) * p : (3 + a) * p]
        for b in range(a, rank):
            vb = vparams[(2 + b) * p : (3 + b) * p]
            acc = 0.0
            for i in range(p):
                acc += va[i] * vb[i] / (sigma[i] * sigma[i])
            m[a, b] += acc
            m[b, a] = m[a, b]
    chol = np.linalg.cholesky(m)
    for a in range(rank):
        value += math.log(chol[a, a])
    minv = np.linalg.inv(m)
    work.minv[:, :] = minv
    if with_grad and entropy_grad:
        dvz = work.dvz
        for a in range(rank):
            for i in range(p):
                dvz[a, i] = 0.0
        for a in range(rank):
            for b in range(rank):
                c = minv[a, b]
                vb = vparams[(2 + b) * p : (3 + b) * p]
                for i in range(p):
                    dvz[a, i] += c * vb[i] / (sigma[i] * sigma[i])
        for a in range(rank):
            va = vparams[(2 + a) * p : (3 + a) * p]
            for i in range(p):
                glam[(2 + a) * p + i] += dvz[a, i]
                # (U' M^-1 U)_ii = sum_a U_ai (M^-1 U)_ai
                glam[p + i] -= (
                    sigma[i] * (va[i] / (sigma[i] * sigma[i])) * dvz[a, i] * (work.dsigma[i])
                )
    return value


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _diagonal_rest(value, vparams, p, n_w, rank, closed_kl, prior_mean, prior_scale, work,
                   with_grad, entropy_grad):  # fmt: skip
    # the diagonal entropy's gradient and the closed-form E_q[log p]
    sigma = work.sigma
    glam = work.glam
    if with_grad and entropy_grad:
        for i in range(p):
            glam[p + i] += work.dsigma[i] / sigma[i]
    if closed_kl:
        value -= 0.5 * n_w * _LOG_2PI
        for i in range(n_w):
            s2 = prior_scale[i] * prior_scale[i]
            dm = vparams[i] - prior_mean[i]
            v = sigma[i] * sigma[i]
            for a in range(rank):
                v += vparams[(2 + a) * p + i] ** 2
            value -= 0.5 * (dm * dm + v) / s2 + math.log(prior_scale[i])
            if with_grad:
                glam[i] -= dm / s2
                glam[p + i] -= sigma[i] / s2 * work.dsigma[i]
                for a in range(rank):
                    glam[(2 + a) * p + i] -= vparams[(2 + a) * p + i] / s2
    return value


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _draw_theta(vparams, p, rank, work, rng, first, last):
    # theta[first:last] = mu + sigma eps (+ V' z), the normals kept in work.eps and work.z
    w = work.w
    for i in range(first, last):
        e = rng.standard_normal()
        work.eps[i] = e
        w[i] = vparams[i] + work.sigma[i] * e
    for a in range(rank):
        za = rng.standard_normal()
        work.z[a] = za
        va = vparams[(2 + a) * p : (3 + a) * p]
        for i in range(first, last):
            w[i] += va[i] * za


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _accumulate(p, rank, work, first, last, scale):
    # chain rule from d/d theta (work.grad) to d/d vparams for theta = mu + sigma eps + V' z
    g = work.grad
    glam = work.glam
    for i in range(first, last):
        glam[i] += scale * g[i]
        glam[p + i] += scale * g[i] * work.eps[i] * work.dsigma[i]
    for a in range(rank):
        za = scale * work.z[a]
        for i in range(first, last):
            glam[(2 + a) * p + i] += za * g[i]


#: The variational families, :func:`run_vi_epoch_for`'s ``fam``: VI_CONFIG's ``lbbnn`` is
#: 0 for the first and the estimator (1 or 2) for the second.
GAUSSIAN, SPIKE_SLAB = 0, 1


@njit(cache=True, nogil=True, error_model="numpy")
def mc_term(vparams, p, tgt, vcfg, work, ws, stats, rng, with_grad, scale):
    """One Monte Carlo draw of ``beta loglik + log p`` on the rows of ``tgt`` (without the
    weights' Gaussian prior under ``closed_kl``), its gradient in ``vparams`` times ``scale``
    added to ``work.glam``. Compiled with both families' branches, chosen by ``vcfg``; a
    fit's epochs compile one (:func:`run_vi_epoch_for`)."""
    vc = vcfg[0]
    cfg = tgt.cfg[0]
    act, lik, prior = cfg.activation, cfg.likelihood, cfg.prior
    if vc.lbbnn == LBBNN_FLOW:
        return lbbnn_flow_term(vparams, p, tgt, vc, work, ws, stats, rng, with_grad, scale, act,
                               lik)  # fmt: skip
    if vc.lbbnn == LBBNN_LOWRANK:
        return lbbnn_lowrank_term(vparams, p, tgt, vc, work, ws, stats, rng, with_grad, scale,
                                  act, lik)  # fmt: skip
    if vc.lbbnn:
        return _spike_slab_mc_term(vparams, p, tgt, vc, work, ws, stats, rng, with_grad, scale, act,
                                   lik)  # fmt: skip
    return _gaussian_mc_term(vparams, p, tgt, vc, work, ws, stats, rng, with_grad, scale, act, lik,
                             prior, vc.local, vc.rank > 0)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _gaussian_mc_term(vparams, p, tgt, vc, work, ws, stats, rng, with_grad, scale, act, lik, prior,
                      local, lowrank, prepared=False, closed=-1, backward=None):  # fmt: skip
    # mc_term for the Gaussian family; vc is the VI_CONFIG record, act, lik and prior the
    # network's codes, local its vc.local and lowrank whether vc.rank > 0, constants in a
    # specialized epoch kernel; prepared: meanfield_terms prepared the step (local), whose
    # gradient in the variances local_finish completes after the draws; closed: 1 or 0,
    # the kernel's constant for vc.closed_kl, which -1 reads; backward: lrt_backward by
    # address (lrt.lrt_backward_kernel), or None to link it
    XT, YT, W, sizes, offsets, prior_mean, prior_scale, tau, cfgs = tgt
    cfg = cfgs[0]
    n = XT.shape[0] // sizes[0]
    n_layers = sizes.shape[0] - 1
    k = sizes[n_layers]
    n_w = p - cfg.n_noise
    rank = vc.rank
    beta = cfg.beta
    sw = weight_sum(tgt) if lik == 0 else 0.0
    g = work.grad
    if local:
        lp = _noise_draw(vparams, p, n_w, k, tau, cfg, work, rng)
        mu = vparams[:p]
        var = work.gvar  # holds the variances until the backward pass
        if not prepared:
            for i in range(n_w):
                var[i] = work.sigma[i] * work.sigma[i]
        out_base = lrt_forward(mu, var, XT, sizes, offsets, act, n, ws, rng)
        _, _, _, vbuf, wn = _bases(sizes, n)
        ll = _loglik_delta(ws, out_base, YT, W, sw, tau, lik, k, n, ws, vbuf + wn, stats,
                           cfg, 0)  # fmt: skip
        if with_grad and prepared:
            # straight into glam, and the variances' gradient summed over the draws: no
            # zeroing and no accumulating pass per draw
            backward_pass(backward, mu, var, XT, sizes, offsets, act, n, ws, work.glam, work.w,
                          beta * scale)  # fmt: skip
            _noise_grad(p, n_w, k, tau, cfg, stats, sw, beta, work, scale)
        elif with_grad:
            for i in range(p):
                g[i] = 0.0
            gv = work.w  # free until the prior's draw below
            for i in range(n_w):
                gv[i] = 0.0
            backward_pass(backward, mu, var, XT, sizes, offsets, act, n, ws, g, gv, beta)
            for i in range(n_w):
                work.glam[i] += scale * g[i]
                work.glam[p + i] += scale * gv[i] * 2.0 * work.sigma[i] * work.dsigma[i]
            _noise_grad(p, n_w, k, tau, cfg, stats, sw, beta, work, scale)
        if closed == 0 or (closed < 0 and not vc.closed_kl):
            _draw_theta(vparams, p, 0, work, rng, 0, n_w)
            lp += log_prior(work.w, prior_mean, prior_scale, cfg, n_w, g, with_grad, prior)
            if with_grad:
                _accumulate(p, 0, work, 0, n_w, scale)
        return beta * ll + lp
    _draw_theta(vparams, p, rank, work, rng, 0, p)
    w = work.w
    lp = 0.0
    for o in range(p - n_w):
        tau[o] = math.exp(w[n_w + o])
        lp += cfg.noise_shape * w[n_w + o] - cfg.noise_rate * tau[o]
        lp += cfg.noise_shape * math.log(cfg.noise_rate) - math.lgamma(cfg.noise_shape)
    out_base = forward(w, XT, sizes, offsets, act, n, ws)
    ll = _loglik_delta(ws, out_base, YT, W, sw, tau, lik, k, n, ws, out_base + k * n, stats,
                       cfg, 0)  # fmt: skip
    if closed == 1 or (closed < 0 and vc.closed_kl):
        if with_grad:
            for i in range(n_w):
                g[i] = 0.0
    else:
        lp += log_prior(w, prior_mean, prior_scale, cfg, n_w, g, with_grad, prior)
    if with_grad:
        _backward(w, XT, sizes, offsets, act, n, ws, g, beta)
        a = cfg.noise_shape
        b = cfg.noise_rate
        for o in range(p - n_w):
            g[n_w + o] = beta * (0.5 * sw - 0.5 * tau[o] * stats[2 + o]) + a - b * tau[o]
        if vc.stl and lowrank:
            _entropy_path(vparams, p, rank, work)
        elif vc.stl:
            _diagonal_entropy_path(p, work)
        _accumulate(p, rank, work, 0, p, scale)
    return beta * ll + lp


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _entropy_path(vparams, p, rank, work):
    # adds - d log q(theta) / d theta = Sigma^-1 (theta - mu) to work.grad, by Woodbury:
    # Sigma^-1 = D^-1 - D^-1 V' M^-1 V D^-1
    g = work.grad
    sigma = work.sigma
    if rank == 0:
        _diagonal_entropy_path(p, work)
        return
    t = np.zeros(rank)
    for i in range(p):
        ui = (work.w[i] - vparams[i]) / (sigma[i] * sigma[i])
        g[i] += ui
        for a in range(rank):
            t[a] += vparams[(2 + a) * p + i] * ui
    sol = work.minv @ t
    for a in range(rank):
        va = vparams[(2 + a) * p : (3 + a) * p]
        for i in range(p):
            g[i] -= va[i] * sol[a] / (sigma[i] * sigma[i])


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _diagonal_entropy_path(p, work):
    # _entropy_path of the mean-field family: Sigma^-1 (theta - mu) = eps / sigma
    g = work.grad
    for i in range(p):
        g[i] += work.eps[i] / work.sigma[i]


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _clear_step(vparams, p, work):
    # a step's start where its closed-form terms add to the gradient: current sigmas, and
    # the gradient zeroed
    set_sigmas(vparams, p, work)
    glam = work.glam
    for i in range(glam.shape[0]):
        glam[i] = 0.0


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _clear_flow_step(vparams, p, n_w, work):
    # _clear_step and set_alphas of the flow family, whose term sets the weights' sigmas and
    # alphas itself (lbbnn_flow_term): here only the log noise precisions', which are
    # always in
    glam = work.glam
    for i in range(glam.shape[0]):
        glam[i] = 0.0
    for i in range(n_w, p):
        r = vparams[p + i]
        e = _exp_neg(-abs(r))
        work.sigma[i] = (r if r > 0.0 else 0.0) + _log1p_unit(e)
        work.dsigma[i] = (1.0 if r >= 0.0 else e) / (1.0 + e)
        work.alpha[i] = 1.0


@functools.cache
def run_vi_epoch_for(fam: int, activation: int, likelihood: int, prior: int, local: bool,
                     lbbnn: int = 0, factors: bool = False, adam: bool = True):  # fmt: skip
    """The kernel of one epoch of VI for the family ``fam`` (:data:`GAUSSIAN` or
    :data:`SPIKE_SLAB`): one pass over ``data.rows`` in minibatches, one optimizer step on
    the negative ELBO per batch.

    The family, the network's activation, likelihood and prior codes (those of
    :func:`skbnn.kernels.density.logp_grad_for`), whether the Gaussian family draws its
    pre-activations per row (``vcfg``'s ``local``), the spike and slab's estimator
    (``lbbnn``, one of :mod:`skbnn.kernels.lbbnn`'s codes, as in ``vcfg``; ignored for the
    Gaussian family), whether the Gaussian family has low-rank factors (``factors``,
    ``vcfg``'s ``rank`` above 0) and whether the optimizer is Adam (``adam``; else SGD, the
    optimizer's ``kind`` 1) are constants of the kernel, so numba compiles their branches
    only: a VI fit compiles neither LBBNN's terms nor the other activations', likelihoods',
    priors', estimator's or optimizers', a mean-field fit none of the low-rank family's
    linear algebra, and LBBNN's fit none of its other estimators'. The Gaussian family's
    KL is in closed form where the prior is Gaussian (``vcfg``'s ``closed_kl``). ``vcfg``,
    the optimizer and the target must agree with them. Cached on disk per combination,
    like any kernel.

    The kernel's parameters:

    vparams : ndarray of shape ((2 + rank) * n_params,) (``3 n_params`` for the spike and slab)
        ``[mu, rho, V]`` (or ``[kappa, rho, lambda]``), updated in place.
    tgt : KernelTarget
        The member's own target over all rows (its ``cfg.beta`` and ``tau`` are written).
    data : skbnn.kernels.optim.Batches
    batch_size : int
    lrs : ndarray of shape (n_batches,)
    opt : skbnn.kernels.optim.Optimizer
    vcfg : ndarray of dtype :data:`VI_CONFIG`, shape (1,)
    work : Work
    ws : ndarray
        Workspace for ``batch_size`` rows (the larger of the two passes').
    stats : ndarray of shape (2 + n_outputs,)
    rng : numpy.random.Generator
    backward : CompiledKernel or None
        The local reparameterization's backward pass by address
        (:func:`skbnn.kernels.lrt.lrt_backward_kernel`), for the Gaussian mean-field
        family's and the spike and slab's local reparameterization estimator, so that this
        kernel compiles without it; None: the kernel links
        :func:`skbnn.kernels.lrt.lrt_backward` itself where it needs it.
    prepare, finish : CompiledKernel or None, default=None
        For the spike and slab's local reparameterization estimator: its passes over the
        weights by address (:func:`skbnn.kernels.lbbnn.task_kernels`), so that this kernel
        compiles without them; None links them.

    It returns ``-(sum over batches of (B / n) ELBO_B) / n_w``, with ``ELBO_B`` the
    step's estimate ``(n / B) loglik_B + E_q[log p] + H``: an unbiased estimate of
    ``-ELBO / n_w``; NaN as soon as a step meets a non-finite objective.
    """
    # constants of the closure: numba prunes the other branches before typing them, and the
    # codes reach the kernels below as literals (skbnn.kernels._compile.LITERAL_PARAMETERS).
    # A branch is pruned only where its condition is one of these itself, not a variable
    # of the kernel computed from them.
    spike = int(fam) == SPIKE_SLAB
    act, lik, prior, local = int(activation), int(likelihood), int(prior), bool(local)
    estimator = int(lbbnn) if spike else 0
    if spike and estimator not in (LBBNN_LRT, LBBNN_CONCRETE, LBBNN_FLOW, LBBNN_LOWRANK):
        raise ValueError(f"the spike-and-slab family needs its estimator's code, got {lbbnn!r}")
    flow = estimator == LBBNN_FLOW
    lowrank = estimator == LBBNN_LOWRANK
    # LBBNN's mean-field family by the local reparameterization trick: its closed-form
    # terms and the draws' moments in one pass, the chain rule once after the draws
    spike_lrt = estimator == LBBNN_LRT
    lowrank_gaussian = not spike and bool(factors)
    meanfield = not spike and not lowrank_gaussian
    # the Gaussian mean-field family's local reparameterization, which prepares its steps
    # where the weights' prior term is in closed form: where the prior is Gaussian
    meanfield_local = meanfield and local
    closed_kl = 1 if prior == 0 else 0  # prior 0: the Gaussian (kernels.priors.log_prior)
    prep = meanfield_local and closed_kl == 1
    use_adam = bool(adam)

    def kernel(vparams, tgt, data, batch_size, lrs, opt, vcfg, work, ws, stats, rng, backward,
               prepare=None, finish=None):  # fmt: skip
        n = data.rows.shape[0]
        p = work.sigma.shape[0]
        vc = vcfg[0]
        n_w = rows_weight(data, 0, n)
        cfg = tgt.cfg[0]
        total = 0.0
        b = 0
        inv_mc = 1.0 / vc.n_mc
        log_scale = prior_log_scale(tgt.prior_scale, p - cfg.n_noise) if meanfield else 0.0
        for i0 in range(0, n, batch_size):
            nb = min(batch_size, n - i0)
            bt = batch_target(tgt, data, i0, nb)
            cfg.beta = n / nb
            glam = work.glam
            if spike_lrt:
                value = spike_slab_prepare(vparams, p, p - cfg.n_noise, work, prepare)
            elif flow:
                # the flow family's KL depends on the draw of z: its term has it, and sets
                # the weights' sigmas and alphas in the same pass
                _clear_flow_step(vparams, p, p - cfg.n_noise, work)
                value = 0.0
            elif spike:
                _clear_step(vparams, p, work)
                set_alphas(vparams, p, work)
                if lowrank:
                    value = lowrank_slab_terms(vparams, p, p - cfg.n_noise, tgt.sizes, tgt.offsets,
                                               vc.rank, work, True)  # fmt: skip
                else:
                    value = spike_slab_terms(vparams, p, p - cfg.n_noise, work, True)
            elif lowrank_gaussian:
                _clear_step(vparams, p, work)
                value = analytic_terms(vparams, p, p - cfg.n_noise, vc.rank, vc.closed_kl,
                                       tgt.prior_mean, tgt.prior_scale, work, True,
                                       vc.local or not vc.stl)  # fmt: skip
            else:
                # sets work.sigma and all of glam, which has no factors' share here
                value = meanfield_terms(vparams, p, p - cfg.n_noise, vc.closed_kl, tgt.prior_mean,
                                        tgt.prior_scale, work, vc.local or not vc.stl, prep,
                                        log_scale)  # fmt: skip
            for _ in range(vc.n_mc):
                if flow:
                    value += inv_mc * lbbnn_flow_term(vparams, p, bt, vc, work, ws, stats, rng,
                                                      True, inv_mc, act, lik)  # fmt: skip
                elif lowrank:
                    value += inv_mc * lbbnn_lowrank_term(vparams, p, bt, vc, work, ws, stats, rng,
                                                         True, inv_mc, act, lik)  # fmt: skip
                elif spike_lrt:
                    value += inv_mc * lbbnn_lrt_prepared_term(vparams, p, bt, work, ws, stats,
                                                              rng, inv_mc, act, lik,
                                                              backward)  # fmt: skip
                elif spike:
                    value += inv_mc * lbbnn_concrete_term(vparams, p, bt, vc.temperature, work, ws,
                                                          stats, rng, True, inv_mc, act,
                                                          lik)  # fmt: skip
                else:
                    value += inv_mc * _gaussian_mc_term(vparams, p, bt, vc, work, ws, stats, rng,
                                                        True, inv_mc, act, lik, prior,
                                                        local, lowrank_gaussian, prep, closed_kl,
                                                        backward)  # fmt: skip
            if spike_lrt:
                bad = spike_slab_finish(vparams, p, p - cfg.n_noise, work, inv_mc, finish)
            elif flow:
                # the flow's term adds its gradient's check to its value (NaN if any
                # entry is inf or NaN), tested below
                bad = False
            elif meanfield_local:
                if prep:
                    bad = local_finish(glam, work, p, p - cfg.n_noise)
                else:
                    bad = nonfinite(glam, glam.shape[0])
            else:
                bad = nonfinite(glam, glam.shape[0])
            if bad or not math.isfinite(value):
                cfg.beta = 1.0
                return np.nan
            total += -value * nb / n
            descent_step(vparams, glam, -1.0 / n_w, lrs[b], opt, use_adam)
            b += 1
        cfg.beta = 1.0
        return total / n_w

    variant = ("_flow" if flow else "_lowrank" if lowrank or lowrank_gaussian
               else "_concrete" if estimator == LBBNN_CONCRETE else "")  # fmt: skip
    name = f"run_vi_epoch_{fam}_{act}_{lik}_{prior}_{int(local)}{variant}"
    return njit(cache=True, nogil=True, error_model="numpy")(_named(kernel, name))
