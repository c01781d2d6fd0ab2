"""The log-density that every method consumes."""

from __future__ import annotations

import copy
import math
import threading
from enum import StrEnum

import numpy as np

from ._draws import noise_logpdf
from .kernels import density as knet
from .kernels.likelihoods import HETERO_MIN_VAR
from .layout import ACTIVATIONS, LIKELIHOODS, NetworkLayout
from .priors import (
    NOISE_PRECISION_RATE,
    NOISE_PRECISION_SHAPE,
    GaussianPrior,
    PriorDensity,
    PriorKind,
    prior_density,
)

#: The kernels' rows are padded to a multiple of this many (one 64-byte cache line of
#: float64) with zero-weight rows, and their arrays start on a cache line: every row of the
#: feature-major data and of the workspace then starts on a vector boundary; rows that
#: straddle them slow every gradient.
ROW_ALIGN = 8
#: An :class:`Evaluator` on more rows than fit a workspace of this size takes its rows in
#: blocks: the workspace holds every layer's activations of every row it evaluates.
BLOCK_BYTES = 64 * 2**20
# threads that evaluate the same target build its blocks once
_BLOCKS_LOCK = threading.Lock()


class NoiseMode(StrEnum):
    """How a Gaussian likelihood's noise precision is handled (:class:`LogPosterior`'s
    ``noise``, a plain string there): held at the given precision (``FIXED``), held but
    updated between trajectories by the method (``GIBBS``), integrated out of the density
    (``MARGINAL``), or as trailing log precisions in ``theta`` (``THETA``)."""

    FIXED = "fixed"
    GIBBS = "gibbs"
    MARGINAL = "marginal"
    THETA = "theta"


def noise_mode(likelihood: str, infer: bool, handling: str) -> str:
    """The ``noise`` of a fit's :class:`LogPosterior`.

    Parameters
    ----------
    likelihood : str
        The likelihood the method fits (:meth:`skbnn.methods.BaseMethod.likelihood`).
    infer : bool
        Whether the noise is inferred (the regressor's ``noise_std=None``).
    handling : str
        How the method treats an inferred noise
        (:attr:`skbnn.methods.BaseMethod.noise_handling`).

    Returns
    -------
    str
        ``"fixed"`` where there is no noise to infer (a classifier, a network that predicts
        the noise of every row, or a ``noise_std`` given), else ``handling``.
    """
    if likelihood != "gaussian" or not infer:
        return NoiseMode.FIXED.value
    return handling


def _check_noise_df(noise_df, likelihood: str) -> None:
    if noise_df is not None and likelihood != "heteroscedastic":
        raise ValueError(
            f"noise_df={noise_df!r} is a Student-t noise of each row, which only the "
            f"heteroscedastic likelihood has; got likelihood={likelihood!r}"
        )


def padded_rows(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`ROW_ALIGN`."""
    return -(-int(n) // ROW_ALIGN) * ROW_ALIGN


def block_rows(sizes) -> int:
    """Rows whose workspace for the network of layer ``sizes`` fills :data:`BLOCK_BYTES`, a
    multiple of :data:`ROW_ALIGN`."""
    per_row = int(knet.workspace_size(np.asarray(sizes, dtype=np.int64), 1))
    return max(ROW_ALIGN, BLOCK_BYTES // (8 * per_row) // ROW_ALIGN * ROW_ALIGN)


def aligned_empty(size: int) -> np.ndarray:
    """An uninitialized float64 vector of ``size`` elements starting on a 64-byte boundary."""
    buf = np.empty(int(size) + ROW_ALIGN)
    start = (-buf.ctypes.data % 64) // 8
    return buf[start : start + int(size)]


def _pad_rows(a: np.ndarray, n: int, m: int) -> np.ndarray:
    # feature-major (k * n,) to (k * m,): each of the k rows gets m - n zeros after its n
    k = a.size // n
    out = aligned_empty(k * m)
    view = out.reshape(k, m)
    view[:, :n] = a.reshape(k, n)
    view[:, n:] = 0.0
    return out


class LogPosterior:
    """Posterior log-density of an MLP's parameters given data.

    ``logp(theta) = beta * loglik(theta) + logprior(theta)`` over the flat vector described in
    :mod:`skbnn.layout`. Methods only see this object; it never sees how the data were
    validated or scaled. It is built whole: data, network, likelihood, prior and noise.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
    Y : ndarray of shape (n_rows, n_outputs)
        Standardized targets (Gaussian), 0/1 labels in one column (Bernoulli) or a one-hot
        matrix (categorical).
    hidden_layer_sizes : tuple of int
    activation : str
    likelihood : {"gaussian", "heteroscedastic", "bernoulli", "categorical"}
        ``heteroscedastic`` is a Gaussian whose variance the network predicts per row: it
        has two outputs per target column, the mean and a raw variance mapped through
        ``softplus(f) + min_var``.
    prior : prior object from :mod:`skbnn.priors`, default=None
        ``None`` means ``GaussianPrior()``.
    noise : {"fixed", "gibbs", "marginal", "theta"}
        How a Gaussian likelihood's noise precision is handled (:class:`NoiseMode`): held
        at ``noise_precision``, held in ``noise_precision`` but updated between
        trajectories by the method (``gibbs``), integrated out of the density against its
        Gamma prior (``marginal``; the method draws it from its conditional afterwards),
        or as trailing log precisions in ``theta`` (``theta``: sampled or optimized with
        the weights).
    noise_precision : float or ndarray of shape (n_outputs,)
        Initial or fixed noise precision per output.
    noise_shape, noise_rate : float
        The Gamma prior of each noise precision.
    sample_weight : ndarray of shape (n_rows,), default=None
        A non-negative weight per row that multiplies the row's log-likelihood; ``None`` is
        ones. An integer weight is exactly a repeated row (every count of rows in the
        likelihood, such as the noise precision's conditional, sums the weights).
    noise_df : float, default=None
        The heteroscedastic likelihood only: each row's noise is a Student-t of this many
        degrees of freedom (above 2), whose squared scale is the variance the network
        predicts; ``None``: Gaussian.
    min_var : float, default=None
        The heteroscedastic likelihood only: what is added to every row's predicted
        variance. ``None``: 1e-6, which keeps it positive; on targets rounded to a grid,
        the variance of that rounding (:func:`skbnn._data.rounding_variance`), so that no
        draw's density can pile onto the grid's points.

    Attributes
    ----------
    layout : skbnn.layout.NetworkLayout
    prior_scale : ndarray of shape (n_weights,)
        Per-parameter prior standard deviations (Gaussian) or scales (logistic); under a
        hierarchical prior, their value at the prior mean of each layer precision.
    prior_mean : ndarray of shape (n_weights,)
        Zero: the prior is centred. Methods that anchor each member elsewhere (randomized
        MAP) pass their own to :meth:`kernel_target`.
    cfg : ndarray of dtype :data:`skbnn.kernels.density.CONFIG`, shape (1,)
        The scalar settings the kernels read by name.
    """

    def __init__(
        self,
        X,
        Y,
        hidden_layer_sizes,
        activation,
        likelihood,
        prior=None,
        noise: str = NoiseMode.FIXED.value,
        noise_precision=1.0,
        noise_shape=NOISE_PRECISION_SHAPE,
        noise_rate=NOISE_PRECISION_RATE,
        sample_weight=None,
        noise_df=None,
        min_var=None,
    ):
        _check_noise_df(noise_df, likelihood)
        X = np.asarray(X, dtype=np.float64)
        Y = np.asarray(Y, dtype=np.float64)
        if Y.ndim == 1:
            Y = Y[:, None]
        self.n_rows, self.n_features = X.shape
        self.n_outputs = Y.shape[1]
        self.likelihood = likelihood
        self.noise_df = None if noise_df is None else float(noise_df)
        self.min_var = HETERO_MIN_VAR if min_var is None else float(min_var)
        self.activation = activation
        gaussian = likelihood == "gaussian"
        self.noise = noise if gaussian else NoiseMode.FIXED.value
        n_noise = self.n_outputs if self.noise == NoiseMode.THETA else 0
        n_net = 2 * self.n_outputs if likelihood == "heteroscedastic" else self.n_outputs
        self.layout = NetworkLayout((self.n_features, *hidden_layer_sizes, n_net), n_noise=n_noise)
        self.XT = np.ascontiguousarray(X.T).ravel()
        self.YT = np.ascontiguousarray(Y.T).ravel()
        self.W = (
            np.ones(self.n_rows)
            if sample_weight is None
            else np.ascontiguousarray(sample_weight, dtype=np.float64)
        )
        self.prior = GaussianPrior() if prior is None else prior
        self.prior_scale = np.ascontiguousarray(self.prior.stds(self.layout), dtype=np.float64)
        self.prior_mean = np.zeros(self.layout.n_weights)
        self.tau = np.broadcast_to(
            np.asarray(noise_precision, dtype=np.float64), (self.n_outputs,)
        ).copy()
        hyper = self.prior.hyperprior()
        shape, rate, fan_in = (1.0, 1.0, True) if hyper is None else hyper
        self.cfg = np.zeros(1, dtype=knet.CONFIG)
        self.cfg[0] = (
            ACTIVATIONS[activation],
            LIKELIHOODS[likelihood],
            n_noise,
            1 if self.noise == NoiseMode.MARGINAL else 0,
            int(self.prior.kernel_id),
            0 if hyper is None else 1,
            noise_shape,
            noise_rate,
            1.0,
            shape,
            rate,
            1.0 if fan_in else 0.0,
            *self.prior.mixture(),
            0.0 if noise_df is None else noise_df,
            self.min_var,
        )

    def with_noise_df(self, noise_df: float | None) -> LogPosterior:
        """This log posterior with a Student-t noise of ``noise_df`` degrees of freedom
        (``None``: the Gaussian) in place of its own. Only the settings (``cfg``) are
        copied: the data and their padded copies, the noise precisions and the prior's
        scales and mean are shared with this one, so a method that updates those in place
        (Laplace's empirical Bayes) updates both.

        Parameters
        ----------
        noise_df : float or None

        Returns
        -------
        LogPosterior
        """
        _check_noise_df(noise_df, self.likelihood)
        other = copy.copy(self)
        other.noise_df = None if noise_df is None else float(noise_df)
        other.cfg = self.cfg.copy()
        other.cfg[0]["noise_df"] = 0.0 if noise_df is None else float(noise_df)
        return other

    @classmethod
    def tiny(cls, codes: tuple[int, int, int]) -> LogPosterior:
        """A log posterior of six rows and two tanh units that stands in for a fit's at its
        first compile: its kernels compile for the fit's activation, likelihood and prior
        ``codes`` (:attr:`compile_codes`).

        numba compiles a kernel for its arguments' types, never their values, and every
        log posterior hands the kernels arrays of the same types, whatever its data,
        network, likelihood or noise; only the codes are compiled as constants. So a
        method's first fit compiles its kernels by calling them on this one, where each
        call is cheap.

        Parameters
        ----------
        codes : tuple of int
            The fit's :attr:`kernel_codes`.

        Returns
        -------
        LogPosterior
        """
        x = np.linspace(-1.0, 1.0, 6)[:, None]
        tiny = cls(x, x[:, 0], (2,), "tanh", "gaussian")
        tiny.compile_codes = tuple(codes)
        return tiny

    def _cfg(self, name):
        return self.cfg[0][name].item()

    @property
    def beta(self) -> float:
        """The power of the likelihood (1 for the posterior; SMC tempers it)."""
        return float(self._cfg("beta"))

    @beta.setter
    def beta(self, value: float) -> None:
        self.cfg[0]["beta"] = value

    @property
    def activation_code(self) -> int:
        """Kernel code of the hidden-layer activation."""
        return int(self._cfg("activation"))

    #: Codes that a fit's warm-up problem stands in for (see :attr:`kernel_codes`).
    compile_codes: tuple[int, int, int] | None = None

    @property
    def kernel_codes(self) -> tuple[int, int, int]:
        """The activation, likelihood and prior codes the network kernel is compiled for
        (:func:`skbnn.kernels.density.logp_grad_for`): this target's, or
        :attr:`compile_codes` when set (a fit's first compile runs a tiny problem that
        stands in for the fit's target)."""
        return knet.target_codes(self) if self.compile_codes is None else self.compile_codes

    @property
    def noise_prior(self) -> tuple[float, float]:
        """``(shape, rate)`` of the Gamma prior of each noise precision."""
        return float(self._cfg("noise_shape")), float(self._cfg("noise_rate"))

    @property
    def hyperprior(self) -> tuple[float, float, bool] | None:
        """``(shape, rate, fan_in_scaling)`` of a hierarchical prior's layer precisions."""
        if not self.hierarchical:
            return None
        return (
            float(self._cfg("hyper_shape")),
            float(self._cfg("hyper_rate")),
            bool(self._cfg("fan_in")),
        )

    @property
    def prior_var(self) -> np.ndarray:
        """Prior variance of each network parameter: ``s^2`` for the Gaussian prior,
        ``(pi s)^2 / 3`` for the logistic, ``w s^2 + (1 - w) (r s)^2`` for the scale
        mixture (weight ``w``, sd ratio ``r``)."""
        return self.prior_density.variance_factor(self.mixture) * self.prior_scale**2

    @property
    def mixture(self) -> tuple[float, float]:
        """``(weight of the first component, sd ratio)`` of a scale-mixture prior."""
        return float(self._cfg("mix_weight")), float(self._cfg("mix_ratio"))

    @property
    def hierarchical(self) -> bool:
        """Whether the weights' per-layer precisions are sampled (HierarchicalPrior)."""
        return bool(self._cfg("hierarchical"))

    @property
    def prior_kind(self) -> PriorKind:
        """The prior's density (an int for the kernels)."""
        return PriorKind(int(self._cfg("prior")))

    @property
    def prior_density(self) -> PriorDensity:
        """The prior's density outside the kernels: its variance, draws, log density and
        curvature, and whether it is Gaussian."""
        return prior_density(self.prior_kind)

    @property
    def noise_in_theta(self) -> bool:
        """Whether ``theta`` ends with log noise precisions (``noise="theta"``)."""
        return self.noise == NoiseMode.THETA

    @property
    def noise_at_tau(self) -> bool:
        """Whether the likelihood is Gaussian with its noise precisions outside ``theta``,
        in :attr:`tau`: fixed, or updated there by a sampler (an optimizer holds them)."""
        return self.likelihood == "gaussian" and not self.noise_in_theta

    @property
    def weight_sum(self) -> float:
        """The number of rows counted by their weights."""
        return float(self.W.sum())

    def weight_of(self, rows) -> float:
        """The number of the rows ``rows`` (indices) counted by their weights."""
        return float(self.W[rows].sum())

    @property
    def n_params(self) -> int:
        """Length of ``theta``."""
        return self.layout.n_params

    def kernel_target(
        self, own: bool = True, XT=None, YT=None, prior_mean=None, W=None, padded: bool = False
    ) -> knet.KernelTarget:
        """The named tuple the numba kernels take.

        Parameters
        ----------
        own : bool, default=True
            Give the tuple private copies of what kernels write: the noise precisions, the
            settings, and the prior scales (which a hierarchical prior updates). One chain,
            member or thread owns one such tuple.
        XT, YT, W : ndarray, default=None
            Feature-major data and row weights of other rows (a minibatch); default all
            rows.
        prior_mean : ndarray of shape (n_weights,), default=None
            The prior's centre (randomized MAP's anchor); default zero.
        padded : bool, default=False
            Pad the rows to :func:`padded_rows` with rows of weight zero, which change
            nothing in the log density, its gradient or the Gibbs draws, and align them
            (:data:`ROW_ALIGN`): faster, for kernels that use every row. Minibatching
            kernels need the rows as they are. The workspace must then be
            ``workspace(n, padded=True)``.
        """
        XT = self.XT if XT is None else XT
        YT = self.YT if YT is None else YT
        W = self.W if W is None else W
        if padded:
            XT, YT, W = self._padded_data(XT, YT, W)
        return knet.KernelTarget(
            XT,
            YT,
            W,
            self.layout.sizes,
            self.layout.offsets,
            self.prior_mean if prior_mean is None else np.ascontiguousarray(prior_mean),
            self.prior_scale.copy() if own and self.hierarchical else self.prior_scale,
            self.tau.copy() if own else self.tau,
            self.cfg.copy() if own else self.cfg,
        )

    def _padded_data(self, XT, YT, W) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # The full data's padded copy is made once and shared by every kernel target; it
        # remembers the arrays it copied, so replacing one (target.W = ...) makes a new one.
        full = XT is self.XT and YT is self.YT and W is self.W
        cached = getattr(self, "_padded", None)
        if full and cached is not None:
            (x0, y0, w0), out = cached
            if x0 is XT and y0 is YT and w0 is W:
                return out
        n = W.shape[0]
        m = padded_rows(n)
        out = (_pad_rows(XT, n, m), _pad_rows(YT, n, m), _pad_rows(W, n, m))
        if full:
            self._padded = ((XT, YT, W), out)
        return out

    def _blocks_data(self, block: int) -> list:
        """The padded feature-major data of every block of ``block`` rows, made once and
        shared by the evaluators on all rows (they only read it); like the padded copy, it
        remembers the arrays it copied."""
        with _BLOCKS_LOCK:
            cached = getattr(self, "_blocks", None)
            if cached is not None:
                (x0, y0, w0, b0), data = cached
                if x0 is self.XT and y0 is self.YT and w0 is self.W and b0 == block:
                    return data
            rows = np.arange(self.n_rows)
            data = [self._padded_data(*self.rows_data(rows[lo : lo + block]))
                    for lo in range(0, self.n_rows, block)]  # fmt: skip
            self._blocks = ((self.XT, self.YT, self.W, block), data)
            return data

    def __getstate__(self) -> dict:
        # the padded copies are rebuilt where they are needed rather than pickled
        return {**self.__dict__, "_padded": None, "_blocks": None}

    def workspace(self, n_rows: int | None = None, padded: bool = False) -> np.ndarray:
        """A fresh scratch buffer for one thread, for ``n_rows`` rows (default all); with
        ``padded``, for a kernel target made with ``padded=True`` from those rows."""
        n = self.n_rows if n_rows is None else n_rows
        if padded:
            return aligned_empty(knet.workspace_size(self.layout.sizes, padded_rows(n)))
        return np.empty(knet.workspace_size(self.layout.sizes, n))

    def evaluator(self, prior_mean=None, rows=None, YT=None) -> Evaluator:
        """A reusable evaluator of the log density and its gradient (one per thread), on
        all rows or on ``rows``; see :class:`Evaluator`."""
        return Evaluator(self, prior_mean, rows, YT)

    def rows_data(self, rows, YT=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Feature-major copies of the data and weights of ``rows`` (of ``YT`` if given, a
        member's perturbed targets), as :meth:`kernel_target` takes them."""
        XT = np.ascontiguousarray(self.XT.reshape(self.n_features, self.n_rows)[:, rows])
        YT = self.YT if YT is None else YT
        YT = np.ascontiguousarray(YT.reshape(-1, self.n_rows)[:, rows])
        return XT.ravel(), YT.ravel(), np.ascontiguousarray(self.W[rows])

    def logp_and_grad(self, theta, beta: float = 1.0) -> tuple[float, np.ndarray]:
        """``beta * loglik + logprior`` at ``theta`` and its gradient."""
        value, grad = self.evaluator()(theta, beta)
        return value, grad.copy()

    def logp(self, theta, beta: float = 1.0) -> float:
        """``beta * loglik + logprior`` at ``theta``."""
        return self.loglik_logprior(theta, beta)[2]

    def loglik_logprior(self, theta, beta: float = 1.0) -> tuple[float, float, float]:
        """``(loglik, logprior, beta * loglik + logprior)`` at ``theta``."""
        ev = self.evaluator()
        value = ev.value(theta, beta)
        return ev.stats[0], ev.stats[1], value

    def loglik_batch(self, thetas, n_jobs: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Log-likelihood and log-prior of each row of ``thetas``: what
        :meth:`loglik_logprior` gives for one, without the gradient's kernel.

        The log-likelihood is :meth:`pointwise_loglik`'s, summed with the rows' weights
        (the network's forward pass, which prediction compiles too, on ``n_jobs``
        threads); the log-prior :meth:`log_prior_batch`'s. The result does not depend on
        ``n_jobs``.
        """
        thetas = np.ascontiguousarray(thetas, dtype=np.float64)
        if self.noise != NoiseMode.MARGINAL:
            loglik = np.zeros(thetas.shape[0])
            for rows, terms in self._pointwise_chunks(thetas, None, n_jobs):
                loglik += terms @ self.W[rows]
            return loglik, self.log_prior_batch(thetas)
        # the network kernel's under marginalized noise: the Gaussian's at each output's
        # precision given the weighted residuals, (a + sw / 2) / (b + ssr / 2)
        ssr = np.zeros((thetas.shape[0], self.n_outputs))
        for rows, y, f in self._outputs(thetas, n_jobs):
            ssr += (y - f) ** 2 @ self.W[rows]
        a, b = self.noise_prior
        sw = self.weight_sum
        tau = (a + 0.5 * sw) / (b + 0.5 * ssr)
        loglik = np.sum(0.5 * sw * (np.log(tau) - math.log(2 * math.pi)) - 0.5 * tau * ssr, axis=1)
        return loglik, self.log_prior_batch(thetas)

    def log_prior_batch(self, thetas) -> np.ndarray:
        """The log prior density of each row of ``thetas``: the weights' prior at the
        current :attr:`prior_scale`, and with ``noise="theta"`` the Gamma prior of each
        noise precision, as a density of its log."""
        thetas = np.asarray(thetas, dtype=np.float64)
        n_w = self.layout.n_weights
        density, mixture = self.prior_density, self.mixture
        mean, scale = self.prior_mean[:n_w], self.prior_scale[:n_w]
        out = np.array([density.log_density_curvature(theta[:n_w], mean, scale, mixture)[0]
                        for theta in thetas])  # fmt: skip
        if self.layout.n_noise:
            a, b = self.noise_prior
            eta = thetas[:, n_w:]
            out += np.sum(a * eta - b * np.exp(eta) + a * math.log(b) - math.lgamma(a), axis=1)
        return out

    def _blocked_batch(self, thetas, beta, logp, grads, stats) -> None:
        # many rows: one evaluator whose blocks bound the workspace, draw after draw
        ev = self.evaluator()
        for s in range(thetas.shape[0]):
            logp[s], grads[s] = ev(thetas[s], beta)
            stats[s] = ev.stats

    def logp_grad_batch(
        self, thetas, beta: float = 1.0, n_jobs: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """``beta * loglik + logprior`` and its gradient at each row of ``thetas``.

        The rows are split over ``n_jobs`` threads of the shared pool, each with its own
        kernel target and workspace (:func:`skbnn.kernels.density.logp_grad_batch`); the
        result does not depend on ``n_jobs``.

        Returns
        -------
        logp : ndarray of shape (n_thetas,)
        grads : ndarray of shape (n_thetas, n_params)
        """
        from .utils import thread_map

        thetas = np.ascontiguousarray(thetas, dtype=np.float64)
        m = thetas.shape[0]
        logp = np.empty(m)
        grads = np.empty((m, self.n_params))
        stats = np.empty((m, 2 + int(self.layout.sizes[-1])))
        cuts = np.linspace(0, m, max(1, min(int(n_jobs), m)) + 1).astype(int)

        def part(bounds):
            a, b = bounds
            if self.n_rows > block_rows(self.layout.sizes):
                self._blocked_batch(thetas[a:b], beta, logp[a:b], grads[a:b], stats[a:b])
                return
            tgt = knet.density_target(
                self.kernel_target(own=True, padded=True), codes=self.kernel_codes
            )
            tgt.cfg[0]["beta"] = beta
            knet.logp_grad_batch(
                thetas[a:b], tgt, self.workspace(padded=True), logp[a:b], grads[a:b], stats[a:b]
            )

        thread_map(part, list(zip(cuts[:-1], cuts[1:], strict=True)), int(n_jobs))
        return logp, grads

    def pointwise_loglik(
        self, thetas, noise_precision=None, n_jobs: int = 1, rows=None
    ) -> np.ndarray:
        """Each training row's log-likelihood under each row of ``thetas``, unweighted.

        What leave-one-out cross-validation by PSIS and the stacking of chains read: a row's
        ``sample_weight`` multiplies its term in the posterior, not here.

        Parameters
        ----------
        thetas : ndarray of shape (n_thetas, n_params)
        noise_precision : ndarray of shape (n_thetas, n_outputs), default=None
            Each draw's Gaussian noise precision; ``None``: the target's own, or the
            trailing log precisions of ``theta`` under ``noise="theta"``.
        n_jobs : int, default=1
            Threads of the forward pass; the result does not depend on it.
        rows : array-like of int, default=None
            Only these training rows (the network runs on them alone); default all.

        Returns
        -------
        ndarray of shape (n_thetas, n_rows) or (n_thetas, len(rows))
        """
        thetas = np.ascontiguousarray(thetas, dtype=np.float64)
        n = self.n_rows if rows is None else len(rows)
        out = np.empty((thetas.shape[0], n))
        for chunk, terms in self._pointwise_chunks(thetas, noise_precision, n_jobs, rows):
            out[:, chunk] = terms
        return out

    def _outputs(self, thetas, n_jobs: int, rows=None):
        # (rows slice, their targets (k, m), each draw's outputs (S, k_net, m)) over the
        # forward pass's chunks of rows (of ``rows`` alone, when given)
        from .posterior import ForwardPass

        X = self.XT.reshape(self.n_features, self.n_rows).T
        Y = self.YT.reshape(self.n_outputs, self.n_rows)
        if rows is not None:
            X, Y = X[rows], Y[:, rows]
        net = ForwardPass(self.layout, self.activation_code, n_jobs)
        for chunk, f in net.outputs(X, thetas):
            yield chunk, Y[:, chunk], f

    def _pointwise_chunks(self, thetas, noise_precision, n_jobs: int, rows=None):
        # (rows slice, each draw's log-likelihood of each of those rows) over the forward
        # pass's chunks of rows
        if self.likelihood == "gaussian":
            if noise_precision is not None:
                tau = np.asarray(noise_precision, dtype=np.float64)
            elif self.layout.n_noise:
                tau = np.exp(thetas[:, self.layout.n_weights :])
            else:
                tau = np.broadcast_to(self.tau, (thetas.shape[0], self.n_outputs))
            tau = tau[:, :, None]
        for chunk, y, f in self._outputs(thetas, n_jobs, rows):
            if self.likelihood == "gaussian":
                ll = 0.5 * (np.log(tau) - np.log(2 * np.pi) - tau * (y - f) ** 2)
                yield chunk, ll.sum(axis=1)
            elif self.likelihood == "heteroscedastic":
                k = self.n_outputs
                scale = np.sqrt(np.logaddexp(0.0, f[:, k:]) + self.min_var)
                ll = noise_logpdf(y - f[:, :k], scale, self.noise_df)
                yield chunk, ll.sum(axis=1)
            elif self.likelihood == "bernoulli":
                # log sigmoid(+-f) without overflow
                yield chunk, -np.logaddexp(0.0, np.where(y[0] > 0.5, -f[:, 0], f[:, 0]))
            else:
                lse = np.logaddexp.reduce(f, axis=1)
                yield chunk, np.einsum("skn,kn->sn", f, y) - lse

    def sample_prior(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draws of ``theta`` from the prior, shape ``(size, n_params)``."""
        out = self.prior_density.standard_draws(
            rng, size, self.n_params, self.layout.n_weights, self.mixture
        )
        out[:, : self.layout.n_weights] *= self.prior_scale
        out[:, : self.layout.n_weights] += self.prior_mean
        if self.layout.n_noise:
            a, b = self.noise_prior
            out[:, self.layout.n_weights :] = np.log(
                rng.gamma(a, 1.0 / b, (size, self.layout.n_noise))
            )
        return out


class Evaluator:
    """Log density and gradient of one :class:`LogPosterior`, reusing its buffers.

    Holds a private kernel target, a workspace for its rows, a gradient and a stats
    buffer, so repeated calls (an optimizer's iterations) allocate nothing. On more rows
    than :func:`block_rows` it holds one target per block of rows and a workspace for one
    block, and sums the blocks: memory stays bounded on any number of rows. Not
    thread-safe: one evaluator per thread.

    Parameters
    ----------
    target : LogPosterior
    prior_mean : ndarray of shape (n_weights,), default=None
        The prior's centre; default zero.
    rows : ndarray of int, default=None
        Evaluate on these rows only (copied once); default all rows.
    YT : ndarray, default=None
        Feature-major targets of all rows to use instead of the target's (randomized MAP's
        perturbed targets).

    Attributes
    ----------
    grad : ndarray of shape (n_params,)
        The gradient of the last call (overwritten by the next).
    stats : ndarray
        ``[loglik, logprior, ssr_0, ...]`` of the last call.
    """

    def __init__(self, target: LogPosterior, prior_mean=None, rows=None, YT=None):
        self.n_rows = target.n_rows if rows is None else len(rows)
        self._codes = target.kernel_codes
        self.grad = np.empty(target.n_params)
        self.stats = np.empty(2 + int(target.layout.sizes[-1]))
        self._no_grad = np.empty(0)
        block = block_rows(target.layout.sizes)
        if self.n_rows <= block or target.cfg[0]["noise_marginal"]:
            # the marginalized noise's density is not a sum over rows: one block
            XT = W = None
            if rows is not None:
                XT, YT, W = target.rows_data(rows, YT)
            self.blocks = [target.kernel_target(own=True, XT=XT, YT=YT, prior_mean=prior_mean,
                                                W=W, padded=True)]  # fmt: skip
            self.ws = target.workspace(self.n_rows, padded=True)
            self._prior = None
        else:
            none = np.empty(0)
            # no rows: the prior alone. Its writable parameters are shared by the blocks,
            # which run one after another
            self._prior = target.kernel_target(own=True, XT=none, YT=none, W=none,
                                               prior_mean=prior_mean)  # fmt: skip
            shared = {k: getattr(self._prior, k) for k in ("prior_mean", "prior_scale", "tau",
                                                           "cfg")}  # fmt: skip
            if rows is None and YT is None:
                data = target._blocks_data(block)
            else:
                rows = np.arange(self.n_rows) if rows is None else np.asarray(rows)
                data = [target._padded_data(*target.rows_data(rows[lo : lo + block], YT))
                        for lo in range(0, self.n_rows, block)]  # fmt: skip
            self.blocks = [
                target.kernel_target(own=False, XT=XT, YT=YT_b, W=W)._replace(**shared)
                for XT, YT_b, W in data
            ]
            self.ws = target.workspace(block, padded=True)
            self._part_grad = np.empty(target.n_params)
            self._part_stats = np.empty_like(self.stats)
        self._cfg = self.blocks[0].cfg

    def _set_beta(self, beta):
        if beta != self._cfg[0]["beta"]:
            self._cfg[0]["beta"] = beta

    def _evaluate(self, theta, beta: float, with_grad: bool) -> float:
        self._set_beta(beta)
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        # the network kernel the samplers and the training engine use, compiled or cached
        kernel = knet.logp_grad_for(*self._codes)
        grad = self.grad if with_grad else self._no_grad
        if self._prior is None:
            return kernel(theta, self.blocks[0], self.ws, grad, self.stats, with_grad)
        # every block's density counts the prior once: take all but one of them back
        extra = len(self.blocks) - 1
        value = -extra * kernel(theta, self._prior, self._no_grad, grad, self.stats, with_grad)
        grad *= -extra
        self.stats[0] = 0.0
        self.stats[2:] = 0.0
        part_grad = self._part_grad if with_grad else self._no_grad
        for tgt in self.blocks:
            value += kernel(theta, tgt, self.ws, part_grad, self._part_stats, with_grad)
            grad += part_grad
            self.stats[0] += self._part_stats[0]
            self.stats[2:] += self._part_stats[2:]
        return value

    def __call__(self, theta, beta: float = 1.0) -> tuple[float, np.ndarray]:
        """``(beta * loglik + logprior, gradient)``; the gradient is :attr:`grad`."""
        return self._evaluate(theta, beta, True), self.grad

    def value(self, theta, beta: float = 1.0) -> float:
        """``beta * loglik + logprior`` without the gradient."""
        return self._evaluate(theta, beta, False)
