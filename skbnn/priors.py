"""Priors over the network parameters and the regression noise."""

from __future__ import annotations

import math
from enum import IntEnum
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval

from .layout import NetworkLayout

#: Shape of the Gamma prior on each output's noise precision ``1 / sigma**2`` (standardized
#: target). Shape 1 and rate 1e-3 are close to flat for any noise sd above 0.03 of the target's
#: sd, so hundreds of rows overwhelm it; it is still proper, which a model evidence needs.
NOISE_PRECISION_SHAPE = 1.0
#: Rate of the Gamma prior on the noise precision (see ``NOISE_PRECISION_SHAPE``).
NOISE_PRECISION_RATE = 1e-3


_LOG_2PI = math.log(2.0 * math.pi)


class PriorKind(IntEnum):
    """Code of a prior's density in the numba kernels (the ``prior`` field of
    :data:`skbnn.kernels.density.CONFIG`), which read it as a plain int."""

    GAUSSIAN = 0
    LOGISTIC = 1
    SCALE_MIXTURE = 2


class PriorDensity:
    """What a prior's density computes outside the kernels, per :class:`PriorKind`: its
    variance, standardized draws, and log density with the negative Hessian's diagonal.

    The fitted target knows its prior by the kernels' code (:class:`PriorKind`); it asks
    :func:`prior_density` for the kind's object instead of branching on the code. The
    scale mixture's parameters ``mixture = (w, ratio)`` are passed to every method
    (``w N(0, s^2) + (1 - w) N(0, (ratio s)^2)``); the other kinds ignore them.
    """

    kind: PriorKind
    #: whether the density is Gaussian (the conjugate updates, exact Gibbs moves and
    #: variational closed forms need it)
    gaussian: bool = False

    def variance_factor(self, mixture: tuple[float, float]) -> float:
        """The variance of a parameter over the square of its scale."""
        raise NotImplementedError

    def standard_draws(self, rng: np.random.Generator, size: int, n_params: int,
                       n_weights: int, mixture: tuple[float, float]) -> np.ndarray:  # fmt: skip
        """``(size, n_params)`` draws at unit scale and zero location for the first
        ``n_weights`` columns (the network's parameters; the rest are overwritten)."""
        return rng.standard_normal((size, n_params))

    def log_density_curvature(self, theta, mean, scale, mixture=None) -> tuple:
        """See :func:`log_density_curvature`."""
        raise NotImplementedError


class _Gaussian(PriorDensity):
    kind = PriorKind.GAUSSIAN
    gaussian = True

    def variance_factor(self, mixture):
        return 1.0

    def log_density_curvature(self, theta, mean, scale, mixture=None):
        z = (theta - mean) / scale
        logp = float(np.sum(-0.5 * z * z - np.log(scale)) - 0.5 * z.size * _LOG_2PI)
        return logp, 1.0 / (scale * scale)


class _Logistic(PriorDensity):
    kind = PriorKind.LOGISTIC

    def variance_factor(self, mixture):
        return np.pi**2 / 3.0

    def standard_draws(self, rng, size, n_params, n_weights, mixture):
        return rng.logistic(size=(size, n_params))

    def log_density_curvature(self, theta, mean, scale, mixture=None):
        z = (theta - mean) / scale
        a = np.abs(z)
        logp = float(np.sum(-a - 2.0 * np.log1p(np.exp(-a)) - np.log(scale)))
        return logp, (1.0 - np.tanh(0.5 * z) ** 2) / (2.0 * scale * scale)


class _ScaleMixture(PriorDensity):
    kind = PriorKind.SCALE_MIXTURE

    def variance_factor(self, mixture):
        w, r = mixture
        return w + (1.0 - w) * r * r

    def standard_draws(self, rng, size, n_params, n_weights, mixture):
        out = rng.standard_normal((size, n_params))
        # the second component's draws, scaled by its sd over the first's
        w, r = mixture
        second = rng.random((size, n_weights)) >= w
        out[:, :n_weights][second] *= r
        return out

    def log_density_curvature(self, theta, mean, scale, mixture=None):
        # w1 N(0, s1^2) + w2 N(0, s2^2): with responsibilities r_k, the negative second
        # derivative is A - d^2 V, A and V the mean and variance of 1/s_k^2 under r
        w, ratio = mixture
        d = theta - mean
        inv = np.stack([1.0 / scale**2, 1.0 / (ratio * scale) ** 2])
        log_comp = np.stack([
            math.log(w) - 0.5 * d * d * inv[0] - np.log(scale),
            math.log1p(-w) - 0.5 * d * d * inv[1] - np.log(ratio * scale),
        ])  # fmt: skip
        top = np.max(log_comp, axis=0)
        log_total = top + np.log(np.sum(np.exp(log_comp - top), axis=0))
        r = np.exp(log_comp - log_total)
        mean_inv = np.sum(r * inv, axis=0)
        var_inv = np.sum(r * inv * inv, axis=0) - mean_inv * mean_inv
        logp = float(np.sum(log_total) - 0.5 * d.size * _LOG_2PI)
        return logp, mean_inv - d * d * var_inv


_DENSITIES = {d.kind: d for d in (_Gaussian(), _Logistic(), _ScaleMixture())}


def prior_density(kind: PriorKind) -> PriorDensity:
    """The density object of a prior's kernel code."""
    return _DENSITIES[PriorKind(kind)]


def log_density_curvature(kind: PriorKind, theta, mean, scale, mixture=None):
    """The prior's log density at ``theta`` and its negative Hessian's diagonal there.

    Parameters
    ----------
    kind : PriorKind
    theta, mean, scale : ndarray of shape (q,)
        The parameters, and their prior's location and scale (per parameter).
    mixture : tuple of float, default=None
        ``(w, ratio)`` of the scale mixture: ``w N(0, scale^2) + (1 - w) N(0, (ratio
        scale)^2)``; unused by the other kinds.

    Returns
    -------
    logp : float
    curvature : ndarray of shape (q,)
        ``-d^2 log p / d theta^2``, the prior's share of the Laplace approximation's
        precision.
    """
    return prior_density(kind).log_density_curvature(theta, mean, scale, mixture)


def _layer_scales(layout: NetworkLayout, weight: float, bias: float, fan_in_scaling: bool):
    """``weight`` for every weight (over ``sqrt(fan_in)`` if scaled), ``bias`` for biases."""
    out = np.full(layout.n_weights, float(bias))
    fan_in = layout.fan_in()
    weights = fan_in > 0
    out[weights] = weight / (np.sqrt(fan_in[weights]) if fan_in_scaling else 1.0)
    return out


class _BasePrior(BaseEstimator):
    """What the estimators ask of a prior (not public)."""

    #: The prior's density in the numba kernels.
    kernel_id = PriorKind.GAUSSIAN

    def mixture(self) -> tuple[float, float]:
        """``(pi, sigma2 / sigma1)`` of a scale-mixture prior; ``(1, 1)`` otherwise."""
        return (1.0, 1.0)

    def hyperprior(self) -> tuple[float, float, bool] | None:
        """``(shape, rate, fan_in_scaling)`` of sampled layer precisions, or None."""
        return None

    def stds(self, layout: NetworkLayout) -> np.ndarray:
        """Per-parameter prior scales for the network part of ``theta``.

        Standard deviations for the Gaussian priors (for a hierarchical prior at the prior
        mean of every layer precision), scale parameters for the logistic.

        Parameters
        ----------
        layout : NetworkLayout

        Returns
        -------
        ndarray of shape (layout.n_weights,)
        """
        self._validate_params()
        return _layer_scales(layout, *self._layer_args())

    def _layer_args(self) -> tuple[float, float, bool]:
        """``(weight scale before fan-in scaling, bias scale, fan_in_scaling)``."""
        raise NotImplementedError


class GaussianPrior(_BasePrior):
    """Independent zero-mean Gaussian prior on every weight and bias.

    Parameters
    ----------
    std : float, default=1.0
        Prior standard deviation of the biases, and of the weights before fan-in scaling.
    fan_in_scaling : bool, default=True
        If True, a weight of a layer with ``m`` inputs has standard deviation
        ``std / sqrt(m)``, so the prior variance of every pre-activation stays of order
        ``std**2`` whatever the width (the scaling of Neal, 1996). Biases keep ``std``.

    Examples
    --------
    >>> from skbnn.priors import GaussianPrior
    >>> GaussianPrior(std=2.0).get_params()
    {'fan_in_scaling': True, 'std': 2.0}
    """

    _parameter_constraints: dict = {
        "std": [Interval(Real, 0, None, closed="neither")],
        "fan_in_scaling": ["boolean"],
    }

    def __init__(self, std: float = 1.0, fan_in_scaling: bool = True):
        self.std = std
        self.fan_in_scaling = fan_in_scaling

    def _layer_args(self):
        return self.std, self.std, self.fan_in_scaling


class LogisticPrior(_BasePrior):
    """Independent logistic prior on every weight and bias.

    ``p(w) = exp(-w / s) / (s (1 + exp(-w / s))^2)``: bell-shaped like a Gaussian of sd
    ``s pi / sqrt(3)`` near zero, but with exponential tails, so a few large weights cost
    less than under a Gaussian. This is the prior of the talk's iris experiment.

    Parameters
    ----------
    scale : float, default=1.0
        Scale ``s`` of every weight and bias (before fan-in scaling).
    fan_in_scaling : bool, default=False
        If True, a weight of a layer with ``m`` inputs has scale ``scale / sqrt(m)`` (biases
        keep ``scale``), as :class:`GaussianPrior` does. Off by default, as in the talk.

    Examples
    --------
    >>> from skbnn.priors import LogisticPrior
    >>> LogisticPrior(scale=0.5).get_params()
    {'fan_in_scaling': False, 'scale': 0.5}
    """

    kernel_id = PriorKind.LOGISTIC

    _parameter_constraints: dict = {
        "scale": [Interval(Real, 0, None, closed="neither")],
        "fan_in_scaling": ["boolean"],
    }

    def __init__(self, scale: float = 1.0, fan_in_scaling: bool = False):
        self.scale = scale
        self.fan_in_scaling = fan_in_scaling

    def _layer_args(self):
        return self.scale, self.scale, self.fan_in_scaling


class HierarchicalPrior(_BasePrior):
    """Gaussian weights whose per-layer precision is learned: a Gamma hyperprior.

    The weights of hidden or output layer ``l`` are ``N(0, c_l^2 / lambda_l)`` with
    ``lambda_l ~ Gamma(shape, rate)`` and ``c_l = 1 / sqrt(fan_in)`` (or 1); biases keep
    ``N(0, bias_std^2)``. The data choose each layer's amount of regularization (Neal
    1996, MacKay 1992). Sampling ``lambda`` jointly with the weights by HMC meets a funnel,
    so the MCMC methods instead draw each ``lambda_l`` from its conjugate conditional
    ``Gamma(shape + m_l / 2, rate + sum(w^2 / c_l^2) / 2)`` after every transition (Neal's
    scheme); the log density and its gradient change only through the prior, so the update
    needs no pass over the data. Chains start at ``lambda_l = shape / rate``. In SMC each
    particle draws its own ``lambda`` from the hyperprior and updates it by the same Gibbs
    step after each of its moves. The draws of ``lambda`` are kept in
    ``posterior_.prior_precision``.

    Parameters
    ----------
    shape : float, default=2.0
        Shape of the Gamma hyperprior on each layer's precision.
    rate : float, default=2.0
        Rate of the Gamma hyperprior. With the defaults the prior precision has mean 1 (the
        scale of ``GaussianPrior()``) and a 90 % interval of about 0.18-2.4, i.e. weight
        sds from 0.65 to 2.4 times ``c_l``: weakly informative; marginally each weight is
        Student-t with ``2 shape = 4`` degrees of freedom.
    fan_in_scaling : bool, default=True
        Scale each layer's weights by ``1 / sqrt(fan_in)``, as :class:`GaussianPrior` does.
    bias_std : float, default=1.0
        Standard deviation of every bias (fixed).

    Examples
    --------
    >>> from skbnn.priors import HierarchicalPrior
    >>> HierarchicalPrior(shape=3.0).get_params()["shape"]
    3.0
    """

    _parameter_constraints: dict = {
        "shape": [Interval(Real, 0, None, closed="neither")],
        "rate": [Interval(Real, 0, None, closed="neither")],
        "fan_in_scaling": ["boolean"],
        "bias_std": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        shape: float = 2.0,
        rate: float = 2.0,
        fan_in_scaling: bool = True,
        bias_std: float = 1.0,
    ):
        self.shape = shape
        self.rate = rate
        self.fan_in_scaling = fan_in_scaling
        self.bias_std = bias_std

    def hyperprior(self) -> tuple[float, float, bool]:
        """``(shape, rate, fan_in_scaling)`` of the layers' sampled precisions."""
        return (self.shape, self.rate, self.fan_in_scaling)

    def _layer_args(self):
        return 1.0 / np.sqrt(self.shape / self.rate), self.bias_std, self.fan_in_scaling


class ScaleMixturePrior(_BasePrior):
    """A mixture of two zero-mean Gaussians on every weight and bias.

    ``p(w) = pi N(w | 0, sigma1^2) + (1 - pi) N(w | 0, sigma2^2)``, the scale-mixture prior
    of Bayes by Backprop (Blundell et al. 2015): with ``sigma2`` much smaller than
    ``sigma1`` it puts mass ``1 - pi`` in a narrow spike at zero and ``pi`` in a broad
    slab, so that many weights are pulled to zero while a few are free to be large.
    Usable by every method that uses the log density and its gradient (the samplers,
    SMC, the training engine's methods, and Laplace with ``optimize_prior=False``); the
    exact Gibbs moves that need a Gaussian prior are switched off under it.

    Parameters
    ----------
    pi : float, default=0.5
        Weight of the ``sigma1`` component, in (0, 1).
    sigma1 : float, default=1.0
        Standard deviation of the first component (before fan-in scaling).
    sigma2 : float, default=exp(-6)
        Standard deviation of the second component (before fan-in scaling). Blundell et
        al. searched ``-log sigma1`` in {0, 1, 2}, ``-log sigma2`` in {6, 7, 8} and ``pi``
        in {1/4, 1/2, 3/4}; the defaults are the first of each but ``pi``.
    fan_in_scaling : bool, default=False
        If True, both sds of a weight of a layer with ``m`` inputs are divided by
        ``sqrt(m)`` (biases keep theirs), as :class:`GaussianPrior` does. Off by default,
        as in Blundell et al.

    Examples
    --------
    >>> from skbnn.priors import ScaleMixturePrior
    >>> ScaleMixturePrior(pi=0.25).get_params()["pi"]
    0.25
    """

    kernel_id = PriorKind.SCALE_MIXTURE

    _parameter_constraints: dict = {
        "pi": [Interval(Real, 0, 1, closed="neither")],
        "sigma1": [Interval(Real, 0, None, closed="neither")],
        "sigma2": [Interval(Real, 0, None, closed="neither")],
        "fan_in_scaling": ["boolean"],
    }

    def __init__(
        self,
        pi: float = 0.5,
        sigma1: float = 1.0,
        sigma2: float = float(np.exp(-6.0)),
        fan_in_scaling: bool = False,
    ):
        self.pi = pi
        self.sigma1 = sigma1
        self.sigma2 = sigma2
        self.fan_in_scaling = fan_in_scaling

    def mixture(self) -> tuple[float, float]:
        """``(pi, sigma2 / sigma1)``."""
        self._validate_params()
        return (float(self.pi), float(self.sigma2) / float(self.sigma1))

    def _layer_args(self):
        return self.sigma1, self.sigma1, self.fan_in_scaling


PRIORS = {
    "gaussian": GaussianPrior,
    "logistic": LogisticPrior,
    "hierarchical": HierarchicalPrior,
    "scale_mixture": ScaleMixturePrior,
}
