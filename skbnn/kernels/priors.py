"""Log prior densities of the network's parameters and their gradients: Gaussian, logistic
and the scale mixture; and the Gamma prior of the noise precisions sampled in ``theta``."""

import math

from numba.extending import overload

from ._compile import _FM, _OVERLOAD, _dispatch, njit
from ._libm import _FM_EXACT, _LOG_2PI, _exp_neg, _log, _log1p_unit, _tanh


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _logistic_logpdf(z):
    # log of the standard logistic density e^-z / (1 + e^-z)^2, symmetric in z, as
    # -|z| - 2 log1p(e^-|z|) so neither term overflows; NaN stays NaN, +-inf gives -inf
    a = abs(z)
    return -a - 2.0 * _log1p_unit(_exp_neg(-a))


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _mixture_logpdf(d, s1, s2, log_w1, log_w2):
    """``log(w1 N(d | 0, s1^2) + w2 N(d | 0, s2^2)) + log(2 pi) / 2`` and its derivative in
    ``d``, by log-sum-exp: each component's weight in the derivative is its posterior
    responsibility. NaN stays NaN; +-inf gives -inf."""
    z1 = d / s1
    z2 = d / s2
    l1 = log_w1 - 0.5 * z1 * z1 - math.log(s1)
    l2 = log_w2 - 0.5 * z2 * z2 - math.log(s2)
    top = l1 if l1 > l2 else l2
    if not top > -math.inf:
        # both components underflow (|d| infinite), or NaN
        return top, -d / (max(s1, s2) ** 2)
    e1 = math.exp(l1 - top)
    e2 = math.exp(l2 - top)
    total = e1 + e2
    return top + math.log(total), -d * (e1 / (s1 * s1) + e2 / (s2 * s2)) / total


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _noise_terms(theta, tgt, k, n_w):
    # With the noise in theta (log precisions eta), move it into tau and return the log
    # prior of eta: tau ~ Gamma(a, b) gives log p(eta) = a*eta - b*e^eta + a log b - lgamma(a).
    tau = tgt.tau
    a = tgt.cfg[0].noise_shape
    b = tgt.cfg[0].noise_rate
    lp = 0.0
    for o in range(k):
        eta = theta[n_w + o]
        tau[o] = math.exp(eta)
        lp += a * eta - b * tau[o] + a * math.log(b) - math.lgamma(a)
    return lp


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def log_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
    """The prior's log density of ``theta[:n_w]`` (the network parameters), and with
    ``with_grad`` its gradient written over ``grad[:n_w]``: ``prior`` (``cfg.prior``, or
    a constant, see :func:`skbnn.kernels.density.logp_grad_for`) 0 Gaussian (sds
    ``prior_scale``), 1 logistic (scales) or 2 the scale mixture (first sds), each centred
    at ``prior_mean``."""
    return _prior_terms(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior)


def _prior_terms(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
    """:func:`log_prior` for prior ``prior`` (compiled by its overload)."""
    # run only without numba's compiler (NUMBA_DISABLE_JIT): the overload's run-time branching
    args = (theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior)
    return _prior_terms_overload(*args)(*args)


@overload(_prior_terms, **_OVERLOAD)
def _prior_terms_overload(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
    def logistic(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
        return _logistic_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)

    def mixture(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
        return _mixture_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)

    def gaussian(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
        return _gaussian_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)

    def any_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
        if prior == 1:
            return _logistic_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)
        if prior == 2:
            return _mixture_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)
        return _gaussian_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)

    return _dispatch(prior, {1: logistic, 2: mixture}, gaussian) or any_prior


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _logistic_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad):
    lp = 0.0
    for i in range(n_w):
        s = prior_scale[i]
        lp += _logistic_logpdf((theta[i] - prior_mean[i]) / s) - _log(s)
    if with_grad:
        for i in range(n_w):
            # d/dw log p(w) = -tanh((w - mu) / 2s) / s
            s = prior_scale[i]
            grad[i] = -_tanh(0.5 * (theta[i] - prior_mean[i]) / s) / s
    return lp


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _mixture_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad):
    lp = 0.0
    lp -= 0.5 * n_w * _LOG_2PI
    log_w1 = math.log(cfg.mix_weight)
    log_w2 = math.log1p(-cfg.mix_weight)
    for i in range(n_w):
        s = prior_scale[i]
        lpi, dlpi = _mixture_logpdf(theta[i] - prior_mean[i], s, cfg.mix_ratio * s,
                                    log_w1, log_w2)  # fmt: skip
        lp += lpi
        if with_grad:
            grad[i] = dlpi
    return lp


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _gaussian_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad):
    lp = 0.0
    lp -= 0.5 * n_w * _LOG_2PI
    for i in range(n_w):
        s = prior_scale[i]
        z = (theta[i] - prior_mean[i]) / s
        # _log, not math.log: a libm call per parameter kept the loop scalar, a large
        # share of a small network's gradient
        lp -= 0.5 * z * z + _log(s)
    if with_grad:
        for i in range(n_w):
            s = prior_scale[i]
            grad[i] = -(theta[i] - prior_mean[i]) / (s * s)
    return lp
