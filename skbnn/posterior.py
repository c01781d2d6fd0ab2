"""Posterior representations that prediction consumes."""

from __future__ import annotations

import numpy as np


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

    Attributes
    ----------
    n_draws : int
    """

    def __init__(self, thetas, weights=None, noise_precision=None, chain_shape=None):
        self.thetas = np.ascontiguousarray(thetas, dtype=np.float64)
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        self.noise_precision = None if noise_precision is None else np.asarray(noise_precision)
        self.chain_shape = chain_shape
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

    def __repr__(self) -> str:
        kind = "weighted" if self.weights is not None else "equally weighted"
        return f"WeightedDraws({self.n_draws} {kind} draws of {self.thetas.shape[1]} parameters)"
