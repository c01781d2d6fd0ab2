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
from ._compile import _named, njit, record
from ._libm import _LOG_2PI
from .backprop import _backward
from .density import weight_sum
from .layers import forward
from .likelihoods import _loglik_delta
from .lrt import _bases, lrt_backward, lrt_forward
from .optim import _step, batch_target, rows_weight
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
#: always in) and ``slab`` (the slab's sd per network parameter); for the flow estimator,
#: ``keff`` (the slab means scaled by a draw of the latent ``z``), ``flay`` (the flows'
#: layout, :func:`skbnn.kernels.flows.flow_layout`) and ``fcache`` (the flows' scratch).
Work = namedtuple(
    "Work",
    ["sigma", "dsigma", "eps", "w", "grad", "gvar", "glam", "z", "dvz", "minv", "alpha",
     "meff", "psi", "slab", "keff", "flay", "fcache"],
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
    width = 3 if psi is not None else 2 + r
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
        np.ones(p), np.empty(p), psi, slab, np.empty(p if n_flow else 0), flay,
        np.empty(n_cache),
    )  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def softplus(x):
    """``log(1 + e^x)`` without overflow."""
    if x > 0.0:
        return x + math.log1p(math.exp(-x))
    return math.log1p(math.exp(x))


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _sigmoid(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(cache=True, nogil=True, error_model="numpy")
def set_sigmas(vparams, p, work):
    """``sigma = softplus(rho)`` and its derivative ``sigmoid(rho)`` into ``work``."""
    for i in range(p):
        work.sigma[i] = softplus(vparams[p + i])
        work.dsigma[i] = _sigmoid(vparams[p + i])


@njit(cache=True, nogil=True, error_model="numpy")
def analytic_terms(vparams, p, n_w, rank, closed_kl, prior_mean, prior_scale, work, with_grad,
                   entropy_grad):  # fmt: skip
    """``H[q]`` plus, with ``closed_kl``, the exact ``E_q[log p]`` of the weights under
    their Gaussian prior; adds its gradient in ``vparams`` to ``work.glam`` when asked (the
    entropy's only with ``entropy_grad``). Leaves ``M^-1`` of the low-rank family in
    ``work.minv``. ``work.sigma`` must be current (:func:`set_sigmas`)."""
    sigma = work.sigma
    glam = work.glam
    value = 0.5 * p * (1.0 + _LOG_2PI)
    for i in range(p):
        value += math.log(sigma[i])
    if rank > 0:
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
def _noise_draw(vparams, p, n_w, k, tau, cfg, work, rng):
    # the log noise precisions eta ~ q, tau = e^eta, and the MC log prior of eta
    a = cfg.noise_shape
    b = cfg.noise_rate
    lp = 0.0
    for o in range(p - n_w):
        e = rng.standard_normal()
        work.eps[n_w + o] = e
        eta = vparams[n_w + o] + work.sigma[n_w + o] * e
        tau[o] = math.exp(eta)
        lp += a * eta - b * tau[o] + a * math.log(b) - math.lgamma(a)
    return lp


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
                             prior, vc.local)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _spike_slab_mc_term(vparams, p, tgt, vc, work, ws, stats, rng, with_grad, scale, act, lik):
    # mc_term for the spike-and-slab family, by the estimator vc.lbbnn says; act and lik
    # are the network's codes, constants in a specialized epoch kernel
    if vc.lbbnn == 1:
        return lbbnn_lrt_term(vparams, p, tgt, work, ws, stats, rng, with_grad, scale, act, lik)
    return lbbnn_concrete_term(vparams, p, tgt, vc.temperature, work, ws, stats, rng, with_grad,
                               scale, act, lik)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _gaussian_mc_term(vparams, p, tgt, vc, work, ws, stats, rng, with_grad, scale, act, lik, prior,
                      local):  # fmt: skip
    # mc_term for the Gaussian family; vc is the VI_CONFIG record, act, lik and prior the
    # network's codes and local its vc.local, constants in a specialized epoch kernel
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
        for i in range(n_w):
            var[i] = work.sigma[i] * work.sigma[i]
        out_base = lrt_forward(mu, var, XT, sizes, offsets, act, n, ws, rng)
        _, _, _, vbuf, wn = _bases(sizes, n)
        ll = _loglik_delta(ws, out_base, YT, W, sw, tau, lik, k, n, ws, vbuf + wn, stats,
                           cfg, 0)  # fmt: skip
        if with_grad:
            for i in range(p):
                g[i] = 0.0
            gv = work.w  # free until the prior's draw below
            for i in range(n_w):
                gv[i] = 0.0
            lrt_backward(mu, var, XT, sizes, offsets, act, n, ws, g, gv, beta)
            for i in range(n_w):
                work.glam[i] += scale * g[i]
                work.glam[p + i] += scale * gv[i] * 2.0 * work.sigma[i] * work.dsigma[i]
            _noise_grad(p, n_w, k, tau, cfg, stats, sw, beta, work, scale)
        if not vc.closed_kl:
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
    if vc.closed_kl:
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
        if vc.stl:
            _entropy_path(vparams, p, rank, work)
        _accumulate(p, rank, work, 0, p, scale)
    return beta * ll + lp


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _entropy_path(vparams, p, rank, work):
    # adds - d log q(theta) / d theta = Sigma^-1 (theta - mu) to work.grad, by Woodbury:
    # Sigma^-1 = D^-1 - D^-1 V' M^-1 V D^-1
    g = work.grad
    sigma = work.sigma
    if rank == 0:
        for i in range(p):
            g[i] += work.eps[i] / sigma[i]
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
def _noise_grad(p, n_w, k, tau, cfg, stats, sw, beta, work, scale):
    # d/d eta of beta [sw eta / 2 - e^eta ssr / 2] and of eta's Gamma log prior, to vparams
    a = cfg.noise_shape
    b = cfg.noise_rate
    for o in range(p - n_w):
        ge = beta * (0.5 * sw - 0.5 * tau[o] * stats[2 + o]) + a - b * tau[o]
        work.glam[n_w + o] += scale * ge
        work.glam[p + n_w + o] += scale * ge * work.eps[n_w + o] * work.dsigma[n_w + o]


@functools.cache
def run_vi_epoch_for(fam: int, activation: int, likelihood: int, prior: int, local: bool,
                     lbbnn: int = 0):  # fmt: skip
    """The kernel of one epoch of VI for the family ``fam`` (:data:`GAUSSIAN` or
    :data:`SPIKE_SLAB`): one pass over ``data.rows`` in minibatches, one optimizer step on
    the negative ELBO per batch.

    The family, the network's activation, likelihood and prior codes (those of
    :func:`skbnn.kernels.density.logp_grad_for`), whether the Gaussian family draws its
    pre-activations per row (``vcfg``'s ``local``) and whether the spike and slab is
    LBBNN's flow or low-rank family (``lbbnn``, :data:`LBBNN_FLOW` or :data:`LBBNN_LOWRANK`
    as in ``vcfg``; 0 for the others, whose estimator ``vcfg`` chooses) are constants of the
    kernel, so numba compiles their branches only: a VI fit compiles neither LBBNN's terms
    nor the other activations', likelihoods', priors' or estimator's. ``vcfg`` and
    the target must agree with them. Cached on disk per combination, like any kernel.

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

    It returns ``-(sum over batches of (B / n) ELBO_B) / n_w``, with ``ELBO_B`` the
    step's estimate ``(n / B) loglik_B + E_q[log p] + H``: an unbiased estimate of
    ``-ELBO / n_w``; NaN as soon as a step meets a non-finite objective.
    """
    # constants of the closure: numba prunes the other branches before typing them, and the
    # codes reach the kernels below as literals (skbnn.kernels._compile.LITERAL_PARAMETERS)
    spike = int(fam) == SPIKE_SLAB
    act, lik, prior, local = int(activation), int(likelihood), int(prior), bool(local)
    flow = spike and int(lbbnn) == LBBNN_FLOW
    lowrank = spike and int(lbbnn) == LBBNN_LOWRANK

    def kernel(vparams, tgt, data, batch_size, lrs, opt, vcfg, work, ws, stats, rng):
        n = data.rows.shape[0]
        p = work.sigma.shape[0]
        vc = vcfg[0]
        n_w = rows_weight(data)
        cfg = tgt.cfg[0]
        total = 0.0
        b = 0
        inv_mc = 1.0 / vc.n_mc
        for i0 in range(0, n, batch_size):
            nb = min(batch_size, n - i0)
            bt = batch_target(tgt, data, i0, nb)
            cfg.beta = n / nb
            set_sigmas(vparams, p, work)
            glam = work.glam
            for i in range(glam.shape[0]):
                glam[i] = 0.0
            if spike:
                set_alphas(vparams, p, work)
                # the flow family's KL depends on the draw of z: its term has it
                if lowrank:
                    value = lowrank_slab_terms(vparams, p, p - cfg.n_noise, tgt.sizes, tgt.offsets,
                                               vc.rank, work, True)  # fmt: skip
                elif flow:
                    value = 0.0
                else:
                    value = spike_slab_terms(vparams, p, p - cfg.n_noise, work, True)
            else:
                value = analytic_terms(vparams, p, p - cfg.n_noise, vc.rank, vc.closed_kl,
                                       tgt.prior_mean, tgt.prior_scale, work, True,
                                       vc.local or not vc.stl)  # fmt: skip
            for _ in range(vc.n_mc):
                if flow:
                    value += inv_mc * lbbnn_flow_term(vparams, p, bt, vc, work, ws, stats, rng,
                                                      True, inv_mc, act, lik)  # fmt: skip
                elif lowrank:
                    value += inv_mc * lbbnn_lowrank_term(vparams, p, bt, vc, work, ws, stats, rng,
                                                         True, inv_mc, act, lik)  # fmt: skip
                elif spike:
                    value += inv_mc * _spike_slab_mc_term(vparams, p, bt, vc, work, ws, stats, rng,
                                                          True, inv_mc, act, lik)  # fmt: skip
                else:
                    value += inv_mc * _gaussian_mc_term(vparams, p, bt, vc, work, ws, stats, rng,
                                                        True, inv_mc, act, lik, prior,
                                                        local)  # fmt: skip
            if not math.isfinite(value):
                cfg.beta = 1.0
                return np.nan
            for i in range(glam.shape[0]):
                if not math.isfinite(glam[i]):
                    cfg.beta = 1.0
                    return np.nan
            total += -value * nb / n
            _step(vparams, glam, -1.0 / n_w, lrs[b], 0.0, opt, rng)
            b += 1
        cfg.beta = 1.0
        return total / n_w

    variant = "_flow" if flow else "_lowrank" if lowrank else ""
    name = f"run_vi_epoch_{fam}_{act}_{lik}_{prior}_{int(local)}{variant}"
    return njit(cache=True, nogil=True, error_model="numpy")(_named(kernel, name))


# --- the spike-and-slab family of latent binary BNNs (LBBNN; Hubin and Storvik 2019,
# Skaaret-Lund et al. 2024). vparams = [kappa, rho, lambda]: a weight is
# gamma * beta with gamma ~ Bernoulli(alpha = sigmoid(lambda)) and beta ~ N(kappa,
# softplus(rho)^2), under the prior gamma ~ Bernoulli(psi), beta ~ N(0, slab^2). Parameters
# whose psi is 1 (biases, the log noise precisions, or every weight when psi = 1) are
# always in: alpha = 1 and their lambda is never moved, so the family is mean-field VI's.


@njit(cache=True, nogil=True, error_model="numpy")
def set_alphas(vparams, p, work):
    """``alpha = sigmoid(lambda)`` where the prior has an indicator (``psi < 1``), 1
    elsewhere, into ``work.alpha``."""
    for i in range(p):
        work.alpha[i] = _sigmoid(vparams[2 * p + i]) if work.psi[i] < 1.0 else 1.0


@njit(cache=True, nogil=True, error_model="numpy")
def spike_slab_terms(vparams, p, n_w, work, with_grad):
    """``-KL(q || prior)`` of the network parameters in closed form, plus the entropy of
    the log noise precisions (whose Gamma prior is a Monte Carlo term); adds its gradient
    in ``vparams`` to ``work.glam`` when asked. ``work.sigma`` and ``work.alpha`` must be
    current.

    Per weight with an indicator, ``KL = alpha (log(alpha / psi) + KL_N) + (1 - alpha)
    log((1 - alpha) / (1 - psi))`` with ``KL_N = KL(N(kappa, sigma^2) || N(0, slab^2))``;
    ``KL_N`` alone for the parameters that are always in."""
    return _spike_slab_kl(vparams, vparams, p, n_w, work, with_grad, 1.0, work.glam)


@njit(cache=True, nogil=True, error_model="numpy")
def spike_slab_kl(kappa, vparams, p, n_w, work):
    """:func:`spike_slab_terms` at the slab means ``kappa`` (for the flow family, those
    given a draw of ``z``), without the gradient."""
    return _spike_slab_kl(kappa, vparams, p, n_w, work, False, 1.0, work.grad)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _spike_slab_kl(kappa, vparams, p, n_w, work, with_grad, scale, gk):
    # spike_slab_terms with the slab means kappa (for the flow estimator, those scaled by a
    # draw of z), its gradient times scale: in kappa to gk, in rho and lambda to work.glam
    glam = work.glam
    value = 0.0
    for i in range(p):
        s = work.sigma[i]
        ds = work.dsigma[i]
        if i >= n_w:
            value += math.log(s) + 0.5 * (1.0 + _LOG_2PI)
            if with_grad:
                glam[p + i] += scale * ds / s
            continue
        k = kappa[i]
        s0 = work.slab[i]
        s02 = s0 * s0
        kln = math.log(s0 / s) + 0.5 * (s * s + k * k) / s02 - 0.5
        psi = work.psi[i]
        if psi >= 1.0:
            value -= kln
            if with_grad:
                gk[i] -= scale * k / s02
                glam[p + i] -= scale * (s / s02 - 1.0 / s) * ds
            continue
        a = work.alpha[i]
        li = vparams[2 * p + i]
        # log(alpha) and log(1 - alpha) without cancellation at either end
        log_a = -softplus(-li)
        log_1a = -softplus(li)
        d_in = log_a - math.log(psi) + kln
        d_out = log_1a - math.log1p(-psi)
        value -= a * d_in + (1.0 - a) * d_out
        if with_grad:
            gk[i] -= scale * a * k / s02
            glam[p + i] -= scale * a * (s / s02 - 1.0 / s) * ds
            # d KL / d alpha = d_in - d_out (the derivatives of the logs cancel)
            glam[2 * p + i] -= scale * (d_in - d_out) * a * (1.0 - a)
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
    # beta loglik + log p(eta) at one draw: the log noise precisions, then every
    # pre-activation per row by the local reparameterization trick at the slab means keff;
    # leaves the weights' moments in work.meff and work.gvar
    XT, YT, W, sizes, offsets, prior_mean, prior_scale, tau, cfgs = tgt
    cfg = cfgs[0]
    n = XT.shape[0] // sizes[0]
    k = sizes[sizes.shape[0] - 1]
    n_w = p - cfg.n_noise
    sw = weight_sum(tgt) if lik == 0 else 0.0
    lp = _noise_draw(vparams, p, n_w, k, tau, cfg, work, rng)
    meff = work.meff
    var = work.gvar
    for i in range(n_w):
        a = work.alpha[i]
        kk = keff[i]
        s = work.sigma[i]
        meff[i] = a * kk
        var[i] = a * (s * s + (1.0 - a) * kk * kk)
    out_base = lrt_forward(meff, var, XT, sizes, offsets, act, n, ws, rng)
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
    glam = work.glam
    gm = work.w
    gv = work.eps
    for i in range(n_w):
        a = work.alpha[i]
        kk = keff[i]
        s = work.sigma[i]
        gk[i] += scale * (gm[i] * a + gv[i] * 2.0 * a * (1.0 - a) * kk)
        glam[p + i] += scale * gv[i] * 2.0 * a * s * work.dsigma[i]
        glam[2 * p + i] += (scale * (gm[i] * kk + gv[i] * (s * s + (1.0 - 2.0 * a) * kk * kk))
                            * a * (1.0 - a))  # fmt: skip


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
    # z of every layer, -log q(z), and the scaled slab means
    for i in range(p):
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
        w_start = offsets[layer]
        for i in range(d):
            for j in range(n_out):
                keff[w_start + i * n_out + j] *= zk[i]
    gk = work.grad  # the gradient in keff, scaled
    if with_grad:
        for i in range(p):
            gk[i] = 0.0
    value += _spike_slab_kl(keff, vparams, p, n_w, work, with_grad, scale, gk)
    # the log-likelihood by the local reparameterization trick at the scaled means
    value += _spike_lrt_loglik(keff, vparams, p, tgt, work, ws, stats, rng, act, lik)
    # log r(z | W), keeping what its gradient needs
    for layer in range(n_layers):
        value += kflows.log_r(vparams, p, sizes, offsets, layer, hid, n_steps, work.meff,
                              work.gvar, work, rng)  # fmt: skip
    if not with_grad:
        return value
    # gradients in the moments (unscaled): the likelihood's, then log r's
    _spike_lrt_moment_grads(tgt, work, ws, act)
    glam = work.glam
    for layer in range(n_layers):
        kflows.log_r_grad(vparams, p, sizes, offsets, layer, hid, n_steps, work.meff, work.gvar,
                          work.w, work.eps, work, scale, shared)  # fmt: skip
    _spike_lrt_chain(keff, p, n_w, work, scale, gk)
    _spike_noise_grad(p, tgt, work, stats, lik, scale)
    # from keff = z kappa to kappa (the biases' keff is kappa) and z, then back through q's
    # flow to its base
    for i in range(n_w):
        glam[i] += gk[i]
    for layer in range(n_layers):
        d = sizes[layer]
        n_out = sizes[layer + 1]
        pb = fb + lay[layer, 0]
        cb = lay[layer, 1]
        zk = fc[cb + d : cb + 2 * d]
        gz = fc[lay[layer + 1, 1] - 2 * d : lay[layer + 1, 1] - d]
        w_start = offsets[layer]
        for i in range(d):
            acc = 0.0
            for j in range(n_out):
                t = w_start + i * n_out + j
                acc += vparams[t] * gk[t]
                glam[t] += (zk[i] - 1.0) * gk[t]
            gz[i] += acc
        kflows.flow_backward(vparams, pb + kflows.BASE_VECTORS * d, d, hid, n_steps, gz, scale,
                             fc, cb + 2 * d, glam, shared)  # fmt: skip
        for i in range(d):
            sd = softplus(vparams[pb + d + i])
            glam[pb + i] += gz[i]
            glam[pb + d + i] += (gz[i] * fc[cb + i] + scale / sd) * _sigmoid(vparams[pb + d + i])
    return value


# --- LBBNN's low-rank slab (the talk's LBBNN-GP-MVN): per weight layer, the slabs are one
# Gaussian N(kappa, diag(sigma^2) + V' V) with rank rows V, independent of the indicators
# (so the KL is the indicators' plus the slabs'); biases keep their own Gaussian factors.


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


@njit(cache=True, nogil=True, error_model="numpy")
def lowrank_slab_terms(vparams, p, n_w, sizes, offsets, rank, work, with_grad):
    """``-KL(q || prior)`` of the low-rank family in closed form, plus the entropy of the log
    noise precisions; adds its gradient in ``vparams`` to ``work.glam`` when asked.
    ``work.sigma`` and ``work.alpha`` must be current; leaves each layer's ``M^-1`` in its
    scratch.

    Per layer, ``KL(N(kappa, D + V'V) || N(0, S))`` with ``D = diag(sigma^2)`` and ``S`` the
    slab's variances: ``sum KL_N(kappa, sigma) + sum V^2 / (2 s^2) - log det(M) / 2``, ``M
    = I + V D^-1 V'`` (the determinant lemma); per weight with an indicator,
    ``KL(Bernoulli(alpha) || Bernoulli(psi))``; the biases' ``KL_N``."""
    glam = work.glam
    fc = work.fcache
    lay = work.flay
    value = 0.0
    for i in range(n_w, p):
        s = work.sigma[i]
        value += math.log(s) + 0.5 * (1.0 + _LOG_2PI)
        if with_grad:
            glam[p + i] += work.dsigma[i] / s
    for layer in range(sizes.shape[0] - 1):
        n_in = sizes[layer]
        n_out = sizes[layer + 1]
        w_start = offsets[layer]
        n_wl = n_in * n_out
        vb = 3 * p + lay[layer, 0]
        for i in range(w_start, w_start + n_wl + n_out):
            # KL_N of every slab and bias, and the indicators' KL
            s = work.sigma[i]
            k = vparams[i]
            s0 = work.slab[i]
            s02 = s0 * s0
            value -= math.log(s0 / s) + 0.5 * (s * s + k * k) / s02 - 0.5
            if with_grad:
                glam[i] -= k / s02
                glam[p + i] -= (s / s02 - 1.0 / s) * work.dsigma[i]
            psi = work.psi[i]
            if psi < 1.0:
                a = work.alpha[i]
                li = vparams[2 * p + i]
                d_in = -softplus(-li) - math.log(psi)
                d_out = -softplus(li) - math.log1p(-psi)
                value -= a * d_in + (1.0 - a) * d_out
                if with_grad:
                    glam[2 * p + i] -= (d_in - d_out) * a * (1.0 - a)
        if rank == 0:
            continue
        m = np.eye(rank)
        for a in range(rank):
            for t in range(n_wl):
                va = vparams[vb + a * n_wl + t]
                s2 = work.slab[w_start + t] ** 2
                value -= 0.5 * va * va / s2
                if with_grad:
                    glam[vb + a * n_wl + t] -= va / s2
        for a in range(rank):
            for b in range(a, rank):
                acc = 0.0
                for t in range(n_wl):
                    sg = work.sigma[w_start + t]
                    acc += vparams[vb + a * n_wl + t] * vparams[vb + b * n_wl + t] / (sg * sg)
                m[a, b] += acc
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
        # d/dV = M^-1 U, d/dsigma_t = -sigma_t (U' M^-1 U)_tt, U = V D^-1
        for t in range(n_wl):
            sg = work.sigma[w_start + t]
            diag = 0.0
            for a in range(rank):
                mu_a = 0.0
                for b in range(rank):
                    mu_a += minv[a, b] * vparams[vb + b * n_wl + t]
                mu_a /= sg * sg
                glam[vb + a * n_wl + t] += mu_a
                diag += vparams[vb + a * n_wl + t] / (sg * sg) * mu_a
            glam[p + w_start + t] -= sg * diag * work.dsigma[w_start + t]
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
        for a in range(rank):
            u = rng.standard_normal()
            fc[lay[layer, 1] + a] = u
            for t in range(n_wl):
                keff[w_start + t] += vparams[vb + a * n_wl + t] * u
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
        for a in range(rank):
            u = fc[lay[layer, 1] + a]
            for t in range(n_wl):
                glam[vb + a * n_wl + t] += gk[w_start + t] * u
    _spike_noise_grad(p, tgt, work, stats, lik, scale)
    return value
