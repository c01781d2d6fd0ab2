"""Draws of the network's parameters and how they predict: :class:`WeightedDraws`, the
base of every posterior in :mod:`skbnn.posterior` and :mod:`skbnn._spike_slab`, which both
import it from here, so that neither imports the other."""

from __future__ import annotations

import numpy as np
from scipy.special import entr, expit, gammaln, softmax, stdtr, stdtrit

from .kernels.likelihoods import HETERO_MIN_VAR


def class_probabilities(f, binary: bool) -> np.ndarray:
    """Class probabilities ``(S, n, n_classes)`` from network outputs ``(S, k, n)``."""
    if binary:
        # expit never overflows, and p(class 0) = expit(-f) keeps its precision where
        # p(class 1) rounds to 1
        return np.stack([expit(-f[:, 0, :]), expit(f[:, 0, :])], axis=-1)
    return softmax(np.transpose(f, (0, 2, 1)), axis=-1)


def shannon_entropy(p: np.ndarray) -> np.ndarray:
    """Shannon entropy in nats over the last axis, with ``0 log 0 = 0``."""
    return entr(p).sum(axis=-1)


def draws_mean_sd(w, p):
    """Weighted mean and sd over the first axis (two passes: ``E[p^2] - m^2`` cancels
    catastrophically for p near 0 or 1)."""
    m = np.einsum("s,s...->...", w, p)
    return m, np.sqrt(np.einsum("s,s...->...", w, (p - m[None]) ** 2))


def noise_logpdf(resid, scale, df=None) -> np.ndarray:
    """Log density of the residuals ``resid`` under the observation noise of scale
    ``scale`` (broadcast): a Gaussian of that sd, or with ``df`` a Student-t of ``df``
    degrees of freedom and that scale."""
    z = resid / scale
    if df is None:
        return -0.5 * (z * z + np.log(2.0 * np.pi)) - np.log(scale)
    # log(1 + z^2/df) as 2 log(|z| / sqrt(df)) + log1p(df / z^2) beyond |z| = 1, where z^2
    # would overflow to inf (and the density to 0) from |z| near 1e154
    z = np.abs(z)
    far = z > 1.0
    zf, zn = np.where(far, z, 1.0), np.where(far, 1.0, z)
    root = np.sqrt(df)
    log_kernel = np.where(
        far, 2.0 * np.log(zf / root) + np.log1p((root / zf) ** 2), np.log1p(zn * zn / df)
    )
    const = gammaln(0.5 * (df + 1.0)) - gammaln(0.5 * df) - 0.5 * np.log(df * np.pi)
    return const - np.log(scale) - 0.5 * (df + 1.0) * log_kernel


def noise_draws(rng: np.random.Generator, shape, df=None) -> np.ndarray:
    """Standardized observation noise: normal, or with ``df`` Student-t."""
    return rng.standard_normal(shape) if df is None else rng.standard_t(df, shape)


def student_mixture_quantile(mu, sd, w, p, df: float) -> np.ndarray:
    """The ``p[i]`` quantile of row ``i``'s mixture of Student-t's of ``df`` degrees of
    freedom, locations ``mu[i]`` and scales ``sd[i]`` (``(n, S)``), weights ``w[i]`` (or
    ``w`` ``(S,)`` for all rows), for ``p`` strictly inside (0, 1).

    Newton's method on the mixture's CDF, kept inside a bracket that shrinks at every
    step and bisected where Newton leaves it: the quantile of a mixture lies between its
    components' quantiles, which bracket it from the start. An upper quantile is minus
    the lower one of the mirrored mixture, whose CDF there is a small number that keeps
    its precision.
    """
    w = np.broadcast_to(w, mu.shape)
    upper = p > 0.5
    q = np.where(upper, 1.0 - p, p)
    mu = np.where(upper[:, None], -mu, mu)
    comp = mu + sd * stdtrit(df, q)[:, None]
    lo, hi = comp.min(axis=1), comp.max(axis=1)
    x = np.sum(w * comp, axis=1)
    # a quantile at zero meets no relative tolerance
    floor = 1e-15 * sd.min(axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(200):
            resid = x[:, None] - mu
            g = np.sum(w * stdtr(df, resid / sd), axis=1) - q
            below = g < 0.0
            lo, hi = np.where(below, x, lo), np.where(below, hi, x)
            dens = np.sum(w * np.exp(noise_logpdf(resid, sd, df)), axis=1)
            step = x - g / dens
            # Newton's step where it stays inside the bracket, else its midpoint
            new = np.where((step > lo) & (step < hi), step, 0.5 * (lo + hi))
            done = np.abs(new - x) <= 4e-16 * np.maximum(np.abs(lo), np.abs(hi)) + floor
            x = new
            if np.all(done):
                break
    return np.where(upper, -x, x)


def student_mixture_quantiles(mu, sd, w, probs, df: float, out) -> None:
    """Quantiles of mixtures of Student-t's of ``df`` degrees of freedom, the counterpart
    of :func:`skbnn.kernels.predict.mixture_quantiles` (same parameters, ``sd`` the
    components' scales), vectorized over the points by :func:`student_mixture_quantile`.
    """
    mu = np.asarray(mu, dtype=np.float64)
    sd = np.broadcast_to(np.asarray(sd, dtype=np.float64), mu.shape)
    finite = np.all(np.isfinite(mu) & np.isfinite(sd), axis=1)
    out[~finite] = np.nan
    for j, p in enumerate(probs):
        p_rows = np.full(int(finite.sum()), p)
        out[finite, j] = student_mixture_quantile(mu[finite], sd[finite], w, p_rows, df)


def noise_variance_factor(df=None) -> float:
    """The noise's variance over its squared scale: 1 for the Gaussian, ``df / (df - 2)``
    for a Student-t of ``df > 2`` degrees of freedom."""
    return 1.0 if df is None else df / (df - 2.0)


class WeightedDraws:
    """A posterior represented by (optionally weighted) draws of ``theta``.

    Parameters
    ----------
    thetas : ndarray of shape (n_draws, n_params)
        Parameter vectors (layout of :mod:`skbnn.layout`).
    weights : ndarray of shape (n_draws,), default=None
        Normalized importance weights; ``None`` means equal weights (MCMC draws).
    noise_precision : ndarray of shape (n_draws, n_outputs), default=None
        Noise precision of each draw on the standardized scale (regression only).
    chain_shape : tuple of int, default=None
        ``(n_chains, n_draws_per_chain)`` when the draws are consecutive MCMC chains (kept in
        chain order, possibly truncated at the end to ``n_draws``).
    heteroscedastic : bool, default=False
        Whether each draw's network predicts the noise per row (two outputs per target: the
        mean and a raw variance mapped through ``softplus + min_var``) instead of carrying a
        noise precision.
    noise_df : float, default=None
        With ``heteroscedastic``, the noise of each row is a Student-t of this many degrees
        of freedom whose scale is the draw's predicted sd (see :meth:`predictive`);
        ``None``: Gaussian.
    min_var : float, default=None
        With ``heteroscedastic``, what is added to each row's predicted variance: the
        likelihood's (:class:`~skbnn.log_posterior.LogPosterior`); ``None``: 1e-6.

    Attributes
    ----------
    n_draws : int
    """

    #: Read by posteriors pickled before the Student-t noise existed: Gaussian.
    noise_df = None
    #: Read by posteriors pickled before the variance floor followed the targets' grid.
    min_var = HETERO_MIN_VAR

    def __init__(
        self,
        thetas,
        weights=None,
        noise_precision=None,
        chain_shape=None,
        heteroscedastic=False,
        noise_df=None,
        min_var=None,
    ):
        self.thetas = np.ascontiguousarray(thetas, dtype=np.float64)
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        self.noise_precision = None if noise_precision is None else np.asarray(noise_precision)
        self.chain_shape = chain_shape
        self.heteroscedastic = bool(heteroscedastic)
        self.noise_df = None if noise_df is None else float(noise_df)
        self.min_var = HETERO_MIN_VAR if min_var is None else float(min_var)
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
        """Each draw's predictive mean and noise scale from its network outputs.

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
            The observation noise of each draw, per row when heteroscedastic: the sd of a
            Gaussian noise, the scale of a Student-t one (:attr:`noise_df`).
        """
        if self.heteroscedastic:
            raw = outputs[:, n_targets:]
            return outputs[:, :n_targets], np.sqrt(np.logaddexp(0.0, raw) + self.min_var)
        tau = np.broadcast_to(self.noise_precision, (self.n_draws, n_targets))
        if index is not None:
            tau = tau[index]
        return outputs, (1.0 / np.sqrt(tau))[:, :, None]

    def noise_variances(self, n_targets: int) -> np.ndarray | None:
        """Each draw's observation noise variance (standardized scale), ``(n_draws,
        n_targets)``; None for a classifier, and when heteroscedastic (each draw's network
        predicts it per row: see :meth:`predictive`)."""
        if self.heteroscedastic or self.noise_precision is None:
            return None
        tau = np.broadcast_to(self.noise_precision, (self.n_draws, n_targets))
        return (1.0 / np.sqrt(tau)) ** 2

    def components(self, net, X, n_targets: int):
        """The predictive of ``y`` as a mixture of Gaussians (or Student-t's, see
        :attr:`noise_df`) in the network output.

        Parameters
        ----------
        net : ForwardPass
        X : ndarray of shape (n_rows, n_features)
        n_targets : int

        Yields
        ------
        rows : slice
        weights : ndarray of shape (S,)
            Normalized component weights.
        mean : ndarray of shape (S, n_targets, n_chunk)
            Each component's mean of the network output (standardized scale).
        fvar : ndarray of shape (S, n_targets, n_chunk) or None
            The variance of the network output within each component; None (zero) for
            draws of the weights.
        noise_sd : ndarray of shape (S, n_targets, n_chunk) or (S, n_targets, 1)
            Each component's observation noise sd (its scale for a Student-t noise).
        """
        w = self.normalized_weights()
        for rows, out in net.outputs(X, self.thetas):
            mean, sd = self.predictive(out, n_targets)
            yield rows, w, mean, None, sd

    def function_draws(self, net, X, n_targets: int, n: int, rng):
        """``n`` joint draws of the network output over all rows of ``X``.

        Yields ``(rows, f, noise_sd)`` per chunk: ``f`` of shape ``(n, n_targets, n_chunk)``
        and each draw's noise sd as in :meth:`components`; draw ``s`` is the same function
        in every chunk.
        """
        idx = self.sample_indices(n, rng)
        for rows, out in net.outputs(X, self.thetas[idx]):
            yield (rows, *self.predictive(out, n_targets, idx))

    def class_probabilities(self, net, X, binary: bool):
        """Posterior-averaged class probabilities and their spread across draws.

        Yields ``(rows, mean, sd)`` per chunk, both of shape ``(n_chunk, n_classes)``.
        """
        w = self.normalized_weights()
        for rows, f in net.outputs(X, self.thetas):
            yield (rows, *draws_mean_sd(w, class_probabilities(f, binary)))

    def class_entropies(self, net, X, binary: bool):
        """Posterior-averaged class probabilities and the posterior average of each draw's
        entropy, the aleatoric part of the predictive entropy.

        Yields ``(rows, mean, expected_entropy)`` per chunk, of shapes
        ``(n_chunk, n_classes)`` and ``(n_chunk,)``.
        """
        w = self.normalized_weights()
        for rows, f in net.outputs(X, self.thetas):
            p = class_probabilities(f, binary)
            yield rows, np.einsum("s,s...->...", w, p), w @ shannon_entropy(p)

    def __repr__(self) -> str:
        kind = "weighted" if self.weights is not None else "equally weighted"
        return f"WeightedDraws({self.n_draws} {kind} draws of {self.thetas.shape[1]} parameters)"


def stored_draws(posterior, n_draws: int, random_state, noise_precision):
    """``(thetas, noise_precision)``: ``n_draws`` draws from a posterior that samples on
    demand (its ``sample`` and ``n_noise``), seeded by ``random_state``, and the noise
    precision of each draw when the noise is among the parameters (its last ``n_noise``,
    a log precision), else ``noise_precision`` as given."""
    from .utils import seed_sequence

    rng = np.random.default_rng(seed_sequence(random_state))
    thetas = posterior.sample(n_draws, rng)
    if posterior.n_noise:
        # a wide Gaussian over the log precision (an unsettled SWAG phase, which warns)
        # can draw values whose exp is 0 or inf: infinite or zero noise sds
        noise_precision = np.exp(np.clip(thetas[:, -posterior.n_noise :], -700.0, 700.0))
    return thetas, noise_precision
