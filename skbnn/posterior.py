"""Posterior representations that prediction consumes."""

from __future__ import annotations

import numpy as np

from .kernels.network import HETERO_MIN_VAR


class WeightedDraws:
    """A posterior represented by (optionally weighted) draws of ``theta``.

    Parameters
    ----------
    thetas : ndarray of shape (n_draws, n_params)
        Parameter vectors (layout of :mod:`skbnn.network`).
    weights : ndarray of shape (n_draws,), default=None
        Normalized importance weights; ``None`` means equal weights (MCMC draws).
    noise_precision : ndarray of shape (n_draws, n_outputs), default=None
        Noise precision of each draw on the standardized scale (regression only).
    chain_shape : tuple of int, default=None
        ``(n_chains, n_draws_per_chain)`` when the draws are consecutive MCMC chains (kept in
        chain order, possibly truncated at the end to ``n_draws``).
    heteroscedastic : bool, default=False
        Whether each draw's network predicts the noise per row (two outputs per target: the
        mean and a raw variance mapped through ``softplus + 1e-6``) instead of carrying a
        noise precision.

    Attributes
    ----------
    n_draws : int
    """

    def __init__(
        self, thetas, weights=None, noise_precision=None, chain_shape=None, heteroscedastic=False
    ):
        self.thetas = np.ascontiguousarray(thetas, dtype=np.float64)
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        self.noise_precision = None if noise_precision is None else np.asarray(noise_precision)
        self.chain_shape = chain_shape
        self.heteroscedastic = bool(heteroscedastic)
        #: Draws of each layer's weight precision, shape (n_draws, n_layers), under a
        #: hierarchical prior; None otherwise.
        self.prior_precision = None

    @property
    def n_draws(self) -> int:
        """Number of stored draws."""
        return self.thetas.shape[0]

    def normalized_weights(self) -> np.ndarray:
        """Weights summing to one (equal weights when unweighted)."""
        if self.weights is None:
            return np.full(self.n_draws, 1.0 / self.n_draws)
        return self.weights / self.weights.sum()

    def sample_indices(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Indices of ``n`` draws taken with probability proportional to their weights."""
        return rng.choice(self.n_draws, size=n, p=self.normalized_weights())

    def predictive(self, outputs, n_targets: int, index=None) -> tuple[np.ndarray, np.ndarray]:
        """Each draw's predictive mean and noise sd from its network outputs.

        Parameters
        ----------
        outputs : ndarray of shape (n_draws, n_network_outputs, n_rows)
            The network run with each stored draw (standardized scale).
        n_targets : int
        index : ndarray of int, default=None
            Which stored draws ``outputs`` come from (default: all, in order).

        Returns
        -------
        mean : ndarray of shape (n_draws, n_targets, n_rows)
        noise_sd : ndarray of shape (n_draws, n_targets, n_rows) or (n_draws, n_targets, 1)
            The Gaussian observation noise of each draw: per row when heteroscedastic.
        """
        if self.heteroscedastic:
            raw = outputs[:, n_targets:]
            return outputs[:, :n_targets], np.sqrt(np.logaddexp(0.0, raw) + HETERO_MIN_VAR)
        tau = np.broadcast_to(self.noise_precision, (self.n_draws, n_targets))
        if index is not None:
            tau = tau[index]
        return outputs, (1.0 / np.sqrt(tau))[:, :, None]

    def __repr__(self) -> str:
        kind = "weighted" if self.weights is not None else "equally weighted"
        return f"WeightedDraws({self.n_draws} {kind} draws of {self.thetas.shape[1]} parameters)"


class GaussianPosterior(WeightedDraws):
    """A Gaussian (or an equal mixture of Gaussians) over ``theta`` that draws on demand.

    Component ``c`` is ``N(mean[c], diag(var[c]) + factor[c].T @ factor[c])``: a diagonal
    plus a low-rank covariance, as SWAG fits (Maddox et al. 2019); several components are
    MultiSWAG's independent runs (Wilson and Izmailov 2020). The moments are never changed
    by drawing. ``n_draws`` draws are made once at construction, from ``random_state``, so
    predictions are deterministic; :meth:`sample` gives fresh ones.

    Parameters
    ----------
    mean : ndarray of shape (n_components, n_params)
    var : ndarray of shape (n_components, n_params)
        The diagonal part of each covariance.
    factor : ndarray of shape (n_components, rank, n_params), default=None
        The low-rank part; ``None`` for a diagonal covariance.
    n_draws : int, default=100
    random_state : int, Generator or SeedSequence, default=None
    n_noise : int, default=0
        Trailing parameters that are log noise precisions; their exponentials become each
        draw's ``noise_precision``.
    noise_precision : ndarray, default=None
        The fixed noise precision when ``n_noise == 0`` (regression), else None.
    """

    def __init__(
        self,
        mean,
        var,
        factor=None,
        n_draws: int = 100,
        random_state=None,
        n_noise: int = 0,
        noise_precision=None,
    ):
        from .utils import seed_sequence

        self.mean = np.atleast_2d(np.asarray(mean, dtype=np.float64))
        self.var = np.atleast_2d(np.asarray(var, dtype=np.float64))
        self.factor = None if factor is None else np.asarray(factor, dtype=np.float64)
        self.n_noise = int(n_noise)
        rng = np.random.default_rng(seed_sequence(random_state))
        thetas = self.sample(n_draws, rng)
        if self.n_noise:
            noise_precision = np.exp(thetas[:, -self.n_noise :])
        super().__init__(thetas, noise_precision=noise_precision)

    @property
    def n_components(self) -> int:
        """Number of Gaussians in the mixture (MultiSWAG's runs)."""
        return self.mean.shape[0]

    def covariance(self, component: int = 0) -> np.ndarray:
        """The full covariance matrix of one component (``n_params`` squared: small models)."""
        cov = np.diag(self.var[component])
        if self.factor is not None:
            cov += self.factor[component].T @ self.factor[component]
        return cov

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` fresh draws; draw ``i`` comes from component ``i % n_components``."""
        comp = np.arange(n) % self.n_components
        out = self.mean[comp] + np.sqrt(self.var[comp]) * rng.standard_normal(
            (n, self.mean.shape[1])
        )
        if self.factor is not None:
            z = rng.standard_normal((n, self.factor.shape[1]))
            for c in range(self.n_components):
                out[comp == c] += z[comp == c] @ self.factor[c]
        return out

    def __repr__(self) -> str:
        kind = "diagonal" if self.factor is None else f"rank-{self.factor.shape[1]} + diagonal"
        return (
            f"GaussianPosterior({self.n_components} component(s), {kind} covariance over "
            f"{self.mean.shape[1]} parameters, {self.n_draws} stored draws)"
        )
