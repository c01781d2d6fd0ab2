"""The log-density that every method consumes."""

from __future__ import annotations

import numpy as np

from .kernels import network as knet
from .network import ACTIVATIONS, LIKELIHOODS, NetworkLayout
from .priors import NOISE_PRECISION_RATE, NOISE_PRECISION_SHAPE


class Target:
    """Posterior log-density of an MLP's parameters given data.

    ``logp(theta) = beta * loglik(theta) + logprior(theta)`` over the flat vector described in
    :mod:`skbnn.network`. Methods only see this object; it never sees how the data were
    validated or scaled.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
    Y : ndarray of shape (n_rows, n_outputs)
        Standardized targets (Gaussian), 0/1 labels in one column (Bernoulli) or a one-hot
        matrix (categorical).
    hidden_layer_sizes : tuple of int
    activation : str
    likelihood : {"gaussian", "bernoulli", "categorical"}
    prior_std : ndarray of shape (n_weights,)
        Per-parameter prior standard deviations of the Gaussian prior.
    noise : {"fixed", "gibbs", "marginal", "theta"}
        How a Gaussian likelihood's noise precision is handled: held at ``noise_precision``,
        held in ``noise_precision`` but updated between trajectories by the method
        (``gibbs``), integrated out of the density against its Gamma prior (``marginal``;
        the method draws it from its conditional afterwards), or sampled as trailing log
        precisions in ``theta`` (``theta``).
    noise_precision : float or ndarray of shape (n_outputs,)
        Initial or fixed noise precision per output.
    """

    def __init__(
        self,
        X,
        Y,
        hidden_layer_sizes,
        activation,
        likelihood,
        prior_std,
        noise="fixed",
        noise_precision=1.0,
        noise_shape=NOISE_PRECISION_SHAPE,
        noise_rate=NOISE_PRECISION_RATE,
    ):
        X = np.asarray(X, dtype=np.float64)
        Y = np.asarray(Y, dtype=np.float64)
        if Y.ndim == 1:
            Y = Y[:, None]
        self.n_rows, self.n_features = X.shape
        self.n_outputs = Y.shape[1]
        self.likelihood = likelihood
        self.noise = noise if likelihood == "gaussian" else "fixed"
        n_noise = self.n_outputs if self.noise == "theta" else 0
        self.layout = NetworkLayout(
            (self.n_features, *hidden_layer_sizes, self.n_outputs), n_noise=n_noise
        )
        self.XT = np.ascontiguousarray(X.T).ravel()
        self.YT = np.ascontiguousarray(Y.T).ravel()
        self.prior_std = np.ascontiguousarray(prior_std, dtype=np.float64)
        self.tau = np.broadcast_to(
            np.asarray(noise_precision, dtype=np.float64), (self.n_outputs,)
        ).copy()
        self.ints = np.array(
            [
                self.n_rows,
                ACTIVATIONS[activation],
                LIKELIHOODS[likelihood],
                n_noise,
                1 if self.noise == "marginal" else 0,
                0,
                0,
            ],
            dtype=np.int64,
        )
        # the last three: a hierarchical prior's Gamma shape and rate, and 1 for fan-in
        # scaled weights
        self.floats = np.array([noise_shape, noise_rate, 1.0, 1.0, 1.0, 1.0], dtype=np.float64)

    def set_prior(self, scales, kind: int = 0, hierarchical=None) -> None:
        """Use the prior with per-parameter ``scales`` and density code ``kind``.

        ``kind`` 0 is the Gaussian (``scales`` are standard deviations), 1 the logistic
        (``scales`` are its scale parameters). ``hierarchical = (shape, rate, fan_in)``
        makes each layer's weight precision a Gamma(shape, rate) variable that the MCMC
        methods update by Gibbs steps (``scales`` then hold its starting value).
        """
        self.prior_std = np.ascontiguousarray(scales, dtype=np.float64)
        self.ints[5] = kind
        self.ints[6] = 0 if hierarchical is None else 1
        if hierarchical is not None:
            shape, rate, fan_in = hierarchical
            self.floats[3:6] = shape, rate, 1.0 if fan_in else 0.0

    @property
    def prior_var(self) -> np.ndarray:
        """Prior variance of each network parameter: ``s^2`` for the Gaussian prior,
        ``(pi s)^2 / 3`` for the logistic."""
        factor = np.pi**2 / 3.0 if self.prior_kind == 1 else 1.0
        return factor * self.prior_std**2

    @property
    def hierarchical(self) -> bool:
        """Whether the weights' per-layer precisions are sampled (HierarchicalPrior)."""
        return bool(self.ints[6])

    @property
    def prior_kind(self) -> int:
        """Density code of the prior: 0 Gaussian, 1 logistic."""
        return int(self.ints[5])

    @property
    def n_params(self) -> int:
        """Length of ``theta``."""
        return self.layout.n_params

    def as_tuple(self, own_noise: bool = True) -> tuple:
        """The tuple the numba kernels take; with ``own_noise`` a private noise array
        (and private prior scales, which a hierarchical prior updates)."""
        tau = self.tau.copy() if own_noise else self.tau
        prior_std = self.prior_std.copy() if own_noise and self.hierarchical else self.prior_std
        return (
            self.XT,
            self.YT,
            self.layout.sizes,
            self.layout.offsets,
            prior_std,
            tau,
            self.ints,
            self.floats.copy(),
        )

    def workspace(self) -> np.ndarray:
        """A fresh scratch buffer for one thread."""
        return np.empty(self.layout.workspace_size(self.n_rows))

    def logp_and_grad(self, theta, beta: float = 1.0) -> tuple[float, np.ndarray]:
        """``beta * loglik + logprior`` at ``theta`` and its gradient."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        tgt = self.as_tuple()
        tgt[7][2] = beta
        grad = np.empty(self.n_params)
        stats = np.empty(2 + self.n_outputs)
        value = knet.logp_grad(theta, tgt, self.workspace(), grad, stats, True)
        return value, grad

    def logp(self, theta, beta: float = 1.0) -> float:
        """``beta * loglik + logprior`` at ``theta``."""
        return self.loglik_logprior(theta, beta)[2]

    def loglik_logprior(self, theta, beta: float = 1.0) -> tuple[float, float, float]:
        """``(loglik, logprior, beta * loglik + logprior)`` at ``theta``."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        tgt = self.as_tuple()
        tgt[7][2] = beta
        stats = np.empty(2 + self.n_outputs)
        value = knet.logp_grad(theta, tgt, self.workspace(), np.empty(0), stats, False)
        return stats[0], stats[1], value

    def loglik_batch(self, thetas) -> tuple[np.ndarray, np.ndarray]:
        """Log-likelihood and log-prior of each row of ``thetas`` (threads over rows)."""
        thetas = np.ascontiguousarray(thetas, dtype=np.float64)
        stats = np.empty((thetas.shape[0], 2 + self.n_outputs))
        knet.loglik_batch(thetas, self.as_tuple(), stats)
        return stats[:, 0].copy(), stats[:, 1].copy()

    def sample_prior(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draws of ``theta`` from the prior, shape ``(size, n_params)``."""
        if self.prior_kind == 1:
            out = rng.logistic(size=(size, self.n_params))
        else:
            out = rng.standard_normal((size, self.n_params))
        out[:, : self.layout.n_weights] *= self.prior_std
        if self.layout.n_noise:
            a, b = self.floats[0], self.floats[1]
            out[:, self.layout.n_weights :] = np.log(
                rng.gamma(a, 1.0 / b, (size, self.layout.n_noise))
            )
        return out
