"""What the variational families share: the transforms of their raw scale and inclusion
parameters, and the Gaussian factor of the log noise precisions (its draw, with its Monte
Carlo log prior, and its gradient)."""

import math

from ._compile import njit


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
def _noise_grad(p, n_w, k, tau, cfg, stats, sw, beta, work, scale):
    # d/d eta of beta [sw eta / 2 - e^eta ssr / 2] and of eta's Gamma log prior, to vparams
    a = cfg.noise_shape
    b = cfg.noise_rate
    for o in range(p - n_w):
        ge = beta * (0.5 * sw - 0.5 * tau[o] * stats[2 + o]) + a - b * tau[o]
        work.glam[n_w + o] += scale * ge
        work.glam[p + n_w + o] += scale * ge * work.eps[n_w + o] * work.dsigma[n_w + o]
