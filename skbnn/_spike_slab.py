"""The spike-and-slab posteriors of latent binary BNNs (``method="lbbnn"``): each weight in
the network with its inclusion probability, its value from a Gaussian slab, the slab's
means scaled by a normalizing flow or correlated through a low-rank factor. Re-exported by
:mod:`skbnn.posterior`."""

from __future__ import annotations

import numpy as np

from ._draws import WeightedDraws, stored_draws


class SpikeSlabPosterior(WeightedDraws):
    """A spike-and-slab mean-field ``q`` over ``theta`` (latent binary BNNs) that draws on
    demand.

    Parameter ``i`` is ``gamma_i * beta_i`` with ``gamma_i ~ Bernoulli(alpha[i])`` and
    ``beta_i ~ N(mean[i], var[i])``, all independent; ``alpha`` is 1 for the parameters that
    are always in (biases, log noise precisions). ``model="average"`` draws ``gamma`` too,
    so predictions average over the sparse networks (Bayesian model averaging);
    ``model="median"`` keeps the median probability model, ``gamma_i = [alpha_i > 0.5]``
    (Barbieri and Berger 2004), and draws only ``beta``. ``n_draws`` draws are made once,
    from ``random_state``, so predictions are deterministic.

    Parameters
    ----------
    mean : ndarray of shape (n_params,)
        The mean of each ``beta_i`` (``kappa`` of a weight's slab; the Gaussian factor's
        mean for the parameters always in), in the layout of :mod:`skbnn.layout`.
    var : ndarray of shape (n_params,)
        The variance of each ``beta_i``.
    alpha : ndarray of shape (n_params,)
        The inclusion probability of every parameter; 1 for those always in.
    n_draws : int, default=100
        Number of draws stored at construction; predictions use these.
    random_state : int, Generator or SeedSequence, default=None
        Seeds the stored draws.
    n_noise : int, default=0
        Trailing parameters that are log noise precisions; their exponentials become each
        draw's ``noise_precision``.
    noise_precision : ndarray, default=None
        The fixed noise precision when ``n_noise == 0`` (regression), else None.
    model : {"average", "median"}, default="average"
        ``"average"`` draws the indicators (Bayesian model averaging over sparse
        networks); ``"median"`` fixes them at ``alpha > 0.5`` (the median probability
        model) and draws only the slab.
    """

    def __init__(self, mean, var, alpha, n_draws: int = 100, random_state=None,
                 n_noise: int = 0, noise_precision=None, model: str = "average"):  # fmt: skip
        self.mean = np.asarray(mean, dtype=np.float64)
        self.var = np.asarray(var, dtype=np.float64)
        self.alpha = np.asarray(alpha, dtype=np.float64)
        self.model = model
        self.n_noise = int(n_noise)
        thetas, noise_precision = stored_draws(self, n_draws, random_state, noise_precision)
        super().__init__(thetas, noise_precision=noise_precision)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` fresh draws of ``theta`` (with the indicators of :attr:`model`)."""
        return spike_slab_draws(self.mean, self.var, self.alpha, n, rng, self.model == "median")

    def __repr__(self) -> str:
        return (
            f"SpikeSlabPosterior({self.mean.size} parameters, {self.model} model, "
            f"{self.n_draws} stored draws)"
        )


def spike_slab_draws(mean, var, alpha, n: int, rng: np.random.Generator,
                     median: bool = False) -> np.ndarray:  # fmt: skip
    """Draws of a spike-and-slab mean-field ``q``: independent ``gamma_i * beta_i``.

    Parameters
    ----------
    mean : ndarray of shape (n_params,) or (n, n_params)
        The slab's means: ``beta_i ~ N(mean_i, var_i)``; one row per draw where they
        differ (given each draw's latent variables, :class:`FlowSpikeSlabPosterior`).
    var : ndarray of shape (n_params,)
        The slab's variances.
    alpha : ndarray of shape (n_params,)
        Inclusion probabilities: ``gamma_i ~ Bernoulli(alpha_i)``.
    n : int
        Number of draws.
    rng : numpy.random.Generator
        Draws the slab (``n * n_params`` standard normals) and then, unless ``median``, the
        indicators (as many uniforms).
    median : bool, default=False
        Fix ``gamma_i = [alpha_i > 0.5]`` (the median probability model) instead of
        drawing it.

    Returns
    -------
    ndarray of shape (n, n_params)
        The draws; an excluded parameter is exactly 0.
    """
    p = np.shape(mean)[-1]
    # in place, and the indicators' uniforms a draw at a time (the stream of one call for
    # all of them): at MNIST's size each n x p temporary is hundreds of megabytes
    beta = rng.standard_normal((n, p))
    beta *= np.sqrt(var)
    beta += mean
    if median:
        beta *= alpha > 0.5
        return beta
    for s in range(n):
        beta[s] *= rng.random(p) < alpha
    return beta


def _latent_index(layout) -> np.ndarray:
    """For every parameter of ``layout``, the column of the flow family's latent ``z``
    (every weight layer's inputs, in order) that scales its slab mean; -1 for the biases
    and the noise, which no ``z`` scales."""
    index = np.full(layout.n_params, -1, dtype=np.int64)
    col = 0
    for layer in range(layout.n_layers):
        fan_in, fan_out = int(layout.sizes[layer]), int(layout.sizes[layer + 1])
        w = layout.slices(layer)[0]
        index[w] = col + np.repeat(np.arange(fan_in), fan_out)
        col += fan_in
    return index


class FlowSpikeSlabPosterior(SpikeSlabPosterior):
    """LBBNN's flow family: a spike and slab whose slab means are scaled, per input of
    each weight layer, by latent variables ``z`` from a normalizing flow, drawn on demand.

    A draw takes ``z`` from the flow (:func:`skbnn.kernels.flows.latent_draws`), then every
    weight ``gamma_ij * beta_ij`` with ``beta_ij ~ N(z_i mean_ij, var_ij)`` and ``gamma``
    as in :class:`SpikeSlabPosterior` (drawn, or fixed at the median probability model).
    ``z`` makes the weights of an input dependent, across its outputs and, through the
    flow, across inputs.

    Parameters
    ----------
    mean, var, alpha
        As in :class:`SpikeSlabPosterior`; ``mean`` is before scaling by ``z``.
    flow : ndarray
        The flows' parameters (:mod:`skbnn.kernels.flows`).
    layout : skbnn.layout.Layout
        The network's layout.
    flow_hidden, flow_steps : int
        Hidden units and steps of each flow.
    n_draws, random_state, n_noise, noise_precision, model
        As in :class:`SpikeSlabPosterior`.
    """

    def __init__(self, mean, var, alpha, flow, layout, flow_hidden: int, flow_steps: int,
                 n_draws: int = 100, random_state=None, n_noise: int = 0,
                 noise_precision=None, model: str = "average"):  # fmt: skip
        self.flow = np.asarray(flow, dtype=np.float64)
        self.sizes = np.asarray(layout.sizes, dtype=np.int64)
        self.index = _latent_index(layout)
        self.flow_hidden = int(flow_hidden)
        self.flow_steps = int(flow_steps)
        super().__init__(mean, var, alpha, n_draws, random_state, n_noise, noise_precision, model)

    def latent(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` draws of ``z`` (every weight layer's inputs, in order) and ``log q(z)``."""
        from .kernels.flows import latent_draws

        eps = rng.standard_normal((n, int(self.sizes[:-1].sum())))
        return latent_draws(self.flow, self.sizes, self.flow_hidden, self.flow_steps, eps)

    def scaled_means(self, z: np.ndarray) -> np.ndarray:
        """The slab means given each row of ``z``: shape ``(len(z), n_params)``."""
        factor = np.where(self.index >= 0, z[:, np.maximum(self.index, 0)], 1.0)
        return self.mean * factor

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` fresh draws of ``theta``: ``z``, then the weights given it."""
        z, _ = self.latent(n, rng)
        return spike_slab_draws(self.scaled_means(z), self.var, self.alpha, n, rng,
                                self.model == "median")  # fmt: skip

    def __repr__(self) -> str:
        return (
            f"FlowSpikeSlabPosterior({self.mean.size} parameters, {self.flow_steps} flow "
            f"steps, {self.model} model, {self.n_draws} stored draws)"
        )


class LowRankSpikeSlabPosterior(SpikeSlabPosterior):
    """LBBNN's low-rank family: per weight layer, the slabs are one Gaussian ``N(mean,
    diag(var) + V'V)`` with ``rank`` rows ``V``, drawn on demand.

    A draw takes every layer's ``u ~ N(0, I)``, then every weight ``gamma_ij * beta_ij``
    with ``beta_ij ~ N(mean_ij + (V'u)_ij, var_ij)`` and ``gamma`` as in
    :class:`SpikeSlabPosterior`. The biases (and noise) keep their independent factors.

    Parameters
    ----------
    mean, var, alpha
        As in :class:`SpikeSlabPosterior`.
    factors : ndarray
        Every weight layer's ``V``, ``rank x (n_in n_out)`` row-major, layer after layer
        (:func:`skbnn.kernels.lbbnn_lowrank.lowrank_layout`).
    layout : skbnn.layout.Layout
        The network's layout.
    rank : int
        Rows of each layer's ``V``.
    n_draws, random_state, n_noise, noise_precision, model
        As in :class:`SpikeSlabPosterior`.
    """

    def __init__(self, mean, var, alpha, factors, layout, rank: int, n_draws: int = 100,
                 random_state=None, n_noise: int = 0, noise_precision=None,
                 model: str = "average"):  # fmt: skip
        self.rank = int(rank)
        self.factors = np.asarray(factors, dtype=np.float64)
        self.blocks = []  # (weights' slice, that layer's V)
        pos = 0
        for layer in range(layout.n_layers):
            w = layout.slices(layer)[0]
            size = self.rank * (w.stop - w.start)
            self.blocks.append((w, self.factors[pos : pos + size].reshape(self.rank, -1)))
            pos += size
        super().__init__(mean, var, alpha, n_draws, random_state, n_noise, noise_precision, model)

    def slab_means(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """The slab means of ``n`` draws: ``mean + V'u`` per layer, shape ``(n, n_params)``."""
        means = np.repeat(self.mean[None, :], n, axis=0)
        for w, v in self.blocks:
            means[:, w] += rng.standard_normal((n, self.rank)) @ v
        return means

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` fresh draws of ``theta``: each layer's ``u``, then the weights given it."""
        return spike_slab_draws(self.slab_means(n, rng), self.var, self.alpha, n, rng,
                                self.model == "median")  # fmt: skip

    def __repr__(self) -> str:
        return (
            f"LowRankSpikeSlabPosterior({self.mean.size} parameters, rank {self.rank}, "
            f"{self.model} model, {self.n_draws} stored draws)"
        )
