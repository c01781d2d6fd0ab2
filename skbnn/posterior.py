"""Posterior representations, and how each one predicts.

A posterior decides how it predicts; the estimators only summarize what it yields, chunk by
chunk of rows (:class:`ForwardPass` runs the network):

* :meth:`WeightedDraws.components` gives the predictive of ``y`` as a weighted mixture of
  Gaussians in the network output: each component's mean, the variance of the function
  within it (zero for a draw of the weights; the linearized network's ``J Sigma J^T`` for
  Laplace's GLM predictive), and the observation noise. Means, the epistemic and aleatoric
  variances, intervals and the log predictive density all follow from it.
* :meth:`WeightedDraws.function_draws` gives joint draws of the network output over all
  rows (``sample_y``).
* :meth:`WeightedDraws.class_probabilities` gives the predictive class probabilities and
  their spread.
"""

from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

from ._draws import (
    WeightedDraws,
    class_probabilities,
    draws_mean_sd,
    shannon_entropy,
    stored_draws,
)
from ._kron import KronPrecision, output_derivatives
from ._spike_slab import (
    FlowSpikeSlabPosterior,
    LowRankSpikeSlabPosterior,
    SpikeSlabPosterior,
    spike_slab_draws,
)
from .kernels import backprop as kbackprop
from .kernels import density as knet

# Bytes of network outputs held at once while predicting; bounds memory for large X.
_CHUNK_BYTES = 64 * 2**20
# Bytes of one chunk of per-row Jacobians (several chunks run at once on threads).
_JACOBIAN_BYTES = 16 * 2**20
# Chunks in flight per thread while map_derivatives folds their results.
_FOLD_CHUNKS_PER_THREAD = 4


_CONTROLLER = None
# single_threaded_blas's state: the threads inside it, and the limits to restore
_BLAS_LOCK = threading.Lock()
_BLAS_USERS = 0
_BLAS_LIMITS = None


@contextlib.contextmanager
def single_threaded_blas():
    """A context in which BLAS runs on one thread.

    BLAS's thread count is one setting for the whole process, so the context counts the
    threads inside it: the first in sets one thread, the last out restores the count the
    first found. Two fits on two threads would otherwise restore it under each other, and
    the one still running would compute its products on several threads, whose sums give
    other last bits.

    The controller that finds the loaded BLAS libraries is built once per process:
    ``threadpool_limits`` rescans them at every call, which costs as much as a small
    Laplace fit."""
    global _CONTROLLER, _BLAS_USERS, _BLAS_LIMITS
    with _BLAS_LOCK:
        if _BLAS_USERS == 0:
            if _CONTROLLER is None:
                from threadpoolctl import ThreadpoolController

                _CONTROLLER = ThreadpoolController()
            _free_openblas()
            _BLAS_LIMITS = _CONTROLLER.limit(limits=1, user_api="blas")
            _free_openblas()
        _BLAS_USERS += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS -= 1
            if _BLAS_USERS == 0:
                _free_openblas()
                _BLAS_LIMITS.restore_original_limits()
                _free_openblas()
                _BLAS_LIMITS = None


def _free_openblas() -> None:
    # threadpoolctl lets one thread at a time set OpenBLAS's process-wide thread count
    # (the first to set it) and silently ignores the others: the last thread out of
    # single_threaded_blas is often not the first in, and must be let restore it
    import threadpoolctl

    blas = getattr(threadpoolctl, "OpenBLASController", None)
    if hasattr(blas, "clear_controlling_thread"):
        blas.clear_controlling_thread(force=True)


def cholesky_inverse(factor) -> np.ndarray:
    """``A^-1`` from the lower Cholesky factor ``L`` of ``A = L L^T`` (what is above its
    diagonal is ignored, as :func:`scipy.linalg.cho_factor` leaves it).

    LAPACK's ``potri``: two thirds of the flops of solving ``A X = I`` with the factor."""
    from scipy.linalg import LinAlgError, lapack

    inv, info = lapack.dpotri(factor, lower=1)
    if info != 0:
        raise LinAlgError(f"LAPACK dpotri failed (info={info})")
    lower = np.tril(inv)
    return lower + np.tril(inv, -1).T


def lower_inverse(factor) -> np.ndarray:
    """``L^-1`` of the lower triangle ``L`` of ``factor`` (what is above the diagonal is
    ignored). LAPACK's ``trtri``: a third of the flops of solving ``L X = I``."""
    from scipy.linalg import LinAlgError, lapack

    inv, info = lapack.dtrtri(np.tril(factor), lower=1)
    if info != 0:
        raise LinAlgError(f"LAPACK dtrtri failed (info={info})")
    return inv


class ForwardPass:
    """A fitted network's architecture, run over many rows on threads.

    Parameters
    ----------
    layout : skbnn.layout.NetworkLayout
    activation : int
        Kernel code of the hidden-layer activation.
    n_jobs : int
        Threads; results never depend on it.
    """

    def __init__(self, layout, activation: int, n_jobs: int = 1):
        self.layout = layout
        self.activation = int(activation)
        self.n_jobs = max(1, int(n_jobs))

    @property
    def n_outputs(self) -> int:
        """Number of network outputs."""
        return int(self.layout.sizes[-1])

    def outputs(self, X, thetas):
        """Generator over row chunks: ``(rows slice, outputs of shape (S, k, n_chunk))``.

        Rows are chunked so that the outputs and the threads' workspaces (every layer's
        activations) take at most 64 MB at once; within a chunk the draws are split over the
        threads running the GIL-free kernel.
        """
        from .utils import thread_map

        n, k = X.shape[0], self.n_outputs
        n_draws = thetas.shape[0]
        n_threads = max(1, min(self.n_jobs, n_draws))
        per_row = k * n_draws + n_threads * int(knet.workspace_size(self.layout.sizes, 1))
        chunk = max(1, _CHUNK_BYTES // (8 * per_row))
        # writable: a model loaded with joblib's mmap_mode holds read-only draws, which
        # numba would compile the kernel for again (a copy of the draws costs less)
        thetas = np.require(thetas[:, : self.layout.n_weights], np.float64, ["C", "W"])
        bounds = np.linspace(0, n_draws, n_threads + 1).astype(int)
        sizes, offsets = self.layout.sizes, self.layout.offsets
        predict = knet.forward_batch_for(self.activation)
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            xt = np.array(X[lo:hi].T, dtype=np.float64, order="C").ravel()
            out = np.empty((n_draws, k, hi - lo))

            def part(ab, xt=xt, out=out, m=hi - lo):
                a, b = ab
                predict(thetas[a:b], xt, sizes, offsets, m, out[a:b])

            thread_map(part, list(zip(bounds[:-1], bounds[1:], strict=True)), n_threads)
            yield slice(lo, hi), out

    def map_jacobians(self, X, theta, first_layer: int, fn) -> list:
        """``[fn(rows, f, J) for each chunk of rows]``, the chunks on threads.

        ``f`` (shape ``(k, m)``) are the outputs at ``theta`` and ``J`` (``(k, q, m)``) their
        Jacobian in the parameters of layers ``first_layer`` and above
        (:func:`skbnn.kernels.backprop.jacobian`). The chunks do not depend on the number of
        threads and BLAS runs single-threaded inside ``fn``, so a caller that combines the
        results in order gets the same bits for any ``n_jobs``.
        """
        from .utils import thread_map

        layout = self.layout
        n, k = X.shape[0], self.n_outputs
        q = layout.n_weights - int(layout.offsets[first_layer])
        chunk = max(1, _JACOBIAN_BYTES // (8 * k * q))
        theta = np.require(theta[: layout.n_weights], np.float64, ["C", "W"])
        sizes, offsets = layout.sizes, layout.offsets

        def part(lo):
            hi = min(n, lo + chunk)
            m = hi - lo
            xt = np.array(X[lo:hi].T, dtype=np.float64, order="C").ravel()
            ws = np.empty(knet.workspace_size(sizes, m))
            f = np.empty((k, m))
            J = np.empty((k, q, m))
            kbackprop.jacobian(theta, xt, sizes, offsets, self.activation, m, first_layer, ws, f, J)
            return fn(slice(lo, hi), f, J)

        with single_threaded_blas():
            return thread_map(part, list(range(0, n, chunk)), self.n_jobs)

    def map_derivatives(self, X, theta, first_layer: int, fn, combine=None):
        """``[fn(rows, f, inputs, deltas) for each chunk of rows]``, the chunks on threads
        as in :meth:`map_jacobians`: the outputs ``f`` (``(k, m)``), every layer's inputs,
        and per layer from ``first_layer`` on the outputs' derivatives in its
        pre-activations (:func:`skbnn._kron.output_derivatives`), from which the Jacobian
        follows without being formed.

        With ``combine``, the results are folded in the order of the chunks instead,
        ``combine(combine(r0, r1), r2)...``, as they come, a few chunks per thread at a
        time: for results as large as a chunk's Kronecker factors, of which a list over
        every chunk would hold thousands at once. The fold's order does not depend on
        ``n_jobs``."""
        from .utils import thread_map

        layout = self.layout
        n, k = X.shape[0], self.n_outputs
        widest = int(np.max(layout.sizes))
        chunk = max(1, _JACOBIAN_BYTES // (8 * (k + 1) * widest * layout.n_layers))
        theta = np.require(theta[: layout.n_weights], np.float64, ["C", "W"])

        def part(lo):
            rows = slice(lo, min(n, lo + chunk))
            inputs, f, deltas = output_derivatives(
                layout, self.activation, theta, np.asarray(X[rows], dtype=np.float64),
                first_layer,
            )  # fmt: skip
            return fn(rows, f, inputs, deltas)

        starts = list(range(0, n, chunk))
        with single_threaded_blas():
            if combine is None:
                return thread_map(part, starts, self.n_jobs)
            total = None
            group = _FOLD_CHUNKS_PER_THREAD * max(1, int(self.n_jobs))
            for g in range(0, len(starts), group):
                for result in thread_map(part, starts[g : g + group], self.n_jobs):
                    total = result if total is None else combine(total, result)
            return total


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
        self.mean = np.atleast_2d(np.asarray(mean, dtype=np.float64))
        self.var = np.atleast_2d(np.asarray(var, dtype=np.float64))
        self.factor = None if factor is None else np.asarray(factor, dtype=np.float64)
        self.n_noise = int(n_noise)
        thetas, noise_precision = stored_draws(self, n_draws, random_state, noise_precision)
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


class LaplacePosterior(GaussianPosterior):
    """The Laplace approximation ``N(theta*, H^-1)``, predicting by the linearized network.

    The Gaussian covers the parameters of the layers from ``first_layer`` on (all of them,
    or the last layer alone); the others stay at the MAP. With ``predictive="glm"`` (the
    default of :class:`skbnn.methods.Laplace`) the network is linearized at the MAP,
    ``f(x; theta) ~ f(x; theta*) + J(x) (theta - theta*)``, so the function at ``x`` is
    Gaussian with mean ``f(x; theta*)`` and covariance ``J(x) Sigma J(x)^T`` (Immer et al.
    2021; MacKay 1992): closed form for regression, and for classification the probit
    approximation of the averaged softmax (``link_approx="probit"``, Spiegelhalter and
    Lauritzen; its multiclass form as in laplace-torch) or an average over draws of the
    Gaussian logits (``"mc"``). With ``predictive="mc"`` it predicts like any
    :class:`GaussianPosterior`: draws of ``theta`` pushed through the network.

    Parameters
    ----------
    theta : ndarray of shape (n_params,)
        The MAP.
    precision : ndarray of shape (q, q), (q,) for a diagonal, or KronPrecision
        The posterior precision ``H`` of the ``q`` parameters of layers ``first_layer`` and
        above (positive definite); a :class:`~skbnn._kron.KronPrecision` holds a
        Kronecker-factored one by its factors' eigendecompositions, and the GLM predictive
        and the draws then never form a ``q x q`` matrix.
    first_layer : int
    layout : skbnn.layout.NetworkLayout
    predictive : {"glm", "mc"}, default="glm"
    link_approx : {"probit", "mc"}, default="probit"
    n_draws : int, default=100
        Draws of ``theta`` stored (``predictive="mc"``, and :attr:`thetas`).
    n_link_samples : int, default=100
        Draws of the linearized function behind the classifier's spread of probabilities
        (and its ``"mc"`` link).
    random_state : int, Generator or SeedSequence, default=None
    noise_precision : ndarray of shape (n_outputs,), default=None
        The Gaussian likelihood's noise precision at the MAP (regression).
    log_evidence : float, default=None
        The Laplace evidence on the standardized scale.
    precision_factor : ndarray of shape (q, q), default=None
        The lower Cholesky factor of ``precision`` when the caller has it (what is above
        its diagonal is ignored); computed here otherwise.

    Attributes
    ----------
    hessian : ndarray
        ``precision`` as given.
    start : int
        Index in ``theta`` of the first parameter the Gaussian covers.
    """

    def __init__(
        self,
        theta,
        precision,
        first_layer: int,
        layout,
        predictive: str = "glm",
        link_approx: str = "probit",
        n_draws: int = 100,
        n_link_samples: int = 100,
        random_state=None,
        noise_precision=None,
        log_evidence=None,
        precision_factor=None,
    ):
        from scipy.linalg import cholesky

        from .utils import seed_sequence

        theta = np.asarray(theta, dtype=np.float64)
        self._kron = precision if isinstance(precision, KronPrecision) else None
        self.hessian = precision if self._kron else np.asarray(precision, dtype=np.float64)
        self.first_layer = int(first_layer)
        self.start = int(layout.offsets[self.first_layer])
        self.stop = int(layout.n_weights)
        self.predictive_kind = predictive
        self.link_approx = link_approx
        self.log_evidence = log_evidence
        q = self.stop - self.start
        var = np.zeros((1, theta.size))
        factor = None
        self._scale = self._sd = None
        if self._kron is not None:
            var[0, self.start : self.stop] = self._kron.diag_inverse()
        elif self.hessian.ndim == 1:
            self._sd = 1.0 / np.sqrt(self.hessian)
            var[0, self.start : self.stop] = self._sd**2
        else:
            # Sigma = H^-1 = L^-T L^-1 with H = L L^T, so F = L^-1 has F^T F = Sigma
            if precision_factor is None:
                precision_factor = cholesky(self.hessian, lower=True)
            self._scale = lower_inverse(precision_factor)
            factor = np.zeros((1, q, theta.size))
            factor[0, :, self.start : self.stop] = self._scale
        draws, links = seed_sequence(random_state).spawn(2)
        self._n_link = int(n_link_samples)
        self._link_seed = links
        # the stored draws are made on first use (the GLM predictive never reads them),
        # from the same stream as at construction, so they are the same bits
        self._draw_seed, self._n_stored = draws, int(n_draws)
        super().__init__(
            theta[None], var, factor, n_draws=0, random_state=draws,
            noise_precision=noise_precision,
        )  # fmt: skip

    @property
    def thetas(self) -> np.ndarray:
        """The ``n_draws`` stored draws of ``theta``, made on first use."""
        if self._thetas.shape[0] < self._n_stored:
            rng = np.random.default_rng(self._draw_seed)
            self._thetas = np.ascontiguousarray(self.sample(self._n_stored, rng))
        return self._thetas

    @thetas.setter
    def thetas(self, value) -> None:
        self._thetas = value

    @property
    def n_draws(self) -> int:
        """Number of stored draws."""
        return self._n_stored

    @property
    def theta(self) -> np.ndarray:
        """The MAP."""
        return self.mean[0]

    def deviations(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` draws of ``theta - theta*`` over the covered parameters, shape ``(n, q)``."""
        z = rng.standard_normal((n, self.stop - self.start))
        return self._form.sample_deviations(z)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` fresh draws of ``theta``."""
        out = np.repeat(self.mean[:1], n, axis=0)
        out[:, self.start : self.stop] += self.deviations(n, rng)
        return out

    @property
    def _form(self) -> _CovarianceForm:
        """The covariance's form (full, diagonal or Kronecker-factored), built from the
        stored factors, so that pickles hold what they always held."""
        if self._kron is not None:
            return _KronForm(self._kron)
        return _DiagonalForm(self._sd) if self._scale is None else _FullForm(self._scale)

    def covariance_root(self) -> np.ndarray:
        """A square root ``F`` of the covariance of the covered parameters, ``F^T F =
        Sigma``: the one the linearized predictive uses.

        Returns
        -------
        ndarray of shape (q,) or (r, q)
            The standard deviations for a diagonal precision (``F`` is their diagonal);
            else ``F`` itself: the inverse of the precision's Cholesky factor, or the
            block-diagonal root of a Kronecker-factored one (``q x q`` numbers: for
            exports of small networks).
        """
        if isinstance(self._form, _DiagonalForm):
            return self._sd.copy()
        q = self.stop - self.start
        return self._times_factor(np.eye(q)[None])[0]

    def link_deviations(self) -> np.ndarray:
        """The draws of ``theta - theta*`` (over the covered parameters, shape
        ``(n_link_samples, q)``) behind a linearized classifier's spread of probabilities
        and its ``link_approx="mc"`` average: the same at every call."""
        return self.deviations(self._n_link, np.random.default_rng(self._link_seed))

    def _times_factor(self, J):
        # J (k, q, m) -> G (k, q', m) with G^T G = J^T Sigma J per row
        return self._form.times_factor(J)

    def _map_linearized(self, net: ForwardPass, X, fn) -> list:
        """``[fn(rows, f, lin) for each chunk of rows]``: the outputs at the MAP and the
        network linearized there (:class:`_JacobianChunk`, or :class:`_KronChunk`, which
        never forms the Jacobian), the chunks on threads as
        :meth:`ForwardPass.map_jacobians` runs them."""
        return self._form.map_linearized(net, X, self.theta, self.first_layer, fn)

    def _tau(self, n_targets):
        return np.broadcast_to(self.noise_precision, (self.n_draws, n_targets))[0]

    def function_moments(self, net: ForwardPass, X) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the linearized network output at each row of ``X``.

        ``f(x; theta*)`` and ``J(x) Sigma J(x)^T``, the Gaussian of the GLM predictive
        before any noise or link (laplace-torch's functional mean and variance), whatever
        ``predictive`` is. On the standardized scale for a regressor; logits for a
        classifier.

        Parameters
        ----------
        net : ForwardPass
        X : ndarray of shape (n_rows, n_features)

        Returns
        -------
        mean : ndarray of shape (n_rows, n_outputs)
        cov : ndarray of shape (n_rows, n_outputs, n_outputs)
        """
        k = net.n_outputs
        mean = np.empty((X.shape[0], k))
        cov = np.empty((X.shape[0], k, k))

        def part(rows, f, lin):
            mean[rows] = f.T
            cov[rows] = lin.covariance()

        self._map_linearized(net, X, part)
        return mean, cov

    def components(self, net: ForwardPass, X, n_targets: int):
        """See :meth:`WeightedDraws.components`; one component under the GLM predictive,
        with the linearized function's variance ``diag(J Sigma J^T)``."""
        if self.predictive_kind != "glm":
            yield from super().components(net, X, n_targets)
            return
        sd = (1.0 / np.sqrt(self._tau(n_targets)))[None, :, None]
        w = np.ones(1)

        def part(rows, f, lin):
            return rows, f[None], lin.variances()[None]

        for rows, mean, fvar in self._map_linearized(net, X, part):
            yield rows, w, mean, fvar, sd

    def function_draws(self, net: ForwardPass, X, n_targets: int, n: int, rng):
        """See :meth:`WeightedDraws.function_draws`; under the GLM predictive, draws of the
        linearized network ``f(x; theta*) + J(x) delta`` with ``delta ~ N(0, Sigma)``."""
        if self.predictive_kind != "glm":
            yield from super().function_draws(net, X, n_targets, n, rng)
            return
        delta = self.deviations(n, rng)
        sd = np.broadcast_to(
            (1.0 / np.sqrt(self._tau(n_targets)))[None, :, None], (n, n_targets, 1)
        )

        def part(rows, f, lin):
            return rows, f[None] + lin.shifts(delta)

        for rows, f in self._map_linearized(net, X, part):
            yield rows, f, sd

    def class_probabilities(self, net: ForwardPass, X, binary: bool):
        """See :meth:`WeightedDraws.class_probabilities`. Under the GLM predictive the
        mean is the probit approximation (or the average over draws of the Gaussian
        logits, ``link_approx="mc"``) and the spread is over those draws."""
        if self.predictive_kind != "glm":
            yield from super().class_probabilities(net, X, binary)
            return
        yield from self._map_linearized(net, X, self._glm_classes(binary, entropy=False))

    def class_entropies(self, net: ForwardPass, X, binary: bool):
        """See :meth:`WeightedDraws.class_entropies`. Under the GLM predictive the mean is
        :meth:`class_probabilities`' and the expected entropy is over the draws of the
        Gaussian logits."""
        if self.predictive_kind != "glm":
            yield from super().class_entropies(net, X, binary)
            return
        yield from self._map_linearized(net, X, self._glm_classes(binary, entropy=True))

    def _glm_classes(self, binary: bool, entropy: bool):
        """The chunk function of the GLM predictive's class probabilities: ``(rows, mean,
        sd)``, or ``(rows, mean, expected entropy)`` with ``entropy``."""
        delta = self.link_deviations()
        w = np.full(len(delta), 1.0 / len(delta))

        def part(rows, f, lin):
            draws = class_probabilities(f[None] + lin.shifts(delta), binary)
            mean, sd = draws_mean_sd(w, draws)
            if self.link_approx == "probit":
                kappa = 1.0 / np.sqrt(1.0 + (math.pi / 8.0) * lin.variances())
                mean = class_probabilities((kappa * f)[None], binary)[0]
            return rows, mean, (w @ shannon_entropy(draws) if entropy else sd)

        return part

    def covariance(self, component: int = 0) -> np.ndarray:
        """The full covariance matrix (``n_params`` squared: small models)."""
        block = self._form.block_covariance()
        if block is None:
            return super().covariance(component)
        cov = np.zeros((self.mean.shape[1],) * 2)
        cov[self.start : self.stop, self.start : self.stop] = block
        return cov

    def __repr__(self) -> str:
        kind = self._form.kind
        return (
            f"LaplacePosterior({kind} covariance over {self.stop - self.start} of "
            f"{self.mean.shape[1]} parameters, {self.predictive_kind} predictive)"
        )


class _CovarianceForm:
    """How a :class:`LaplacePosterior`'s covariance ``Sigma`` over the covered parameters
    is held, and what its predictions ask of it: draws of ``theta - theta*``, the
    linearized network's chunks, and the matrix itself."""

    #: the form's name in the posterior's repr
    kind: str = ""

    def sample_deviations(self, z: np.ndarray) -> np.ndarray:
        """``(n, q)`` draws of ``N(0, Sigma)`` from standard normal ``z``."""
        raise NotImplementedError

    def times_factor(self, J: np.ndarray) -> np.ndarray:
        """``J`` ``(k, q, m)`` -> ``G`` ``(k, q', m)`` with ``G^T G = J^T Sigma J`` per row."""
        raise NotImplementedError

    def map_linearized(self, net: ForwardPass, X, theta, first_layer: int, fn) -> list:
        """``[fn(rows, f, lin) for each chunk of rows]``, ``lin`` a :class:`_JacobianChunk`."""
        return net.map_jacobians(
            X,
            theta,
            first_layer,
            lambda rows, f, J: fn(rows, f, _JacobianChunk(self.times_factor, J)),
        )

    def block_covariance(self) -> np.ndarray | None:
        """``Sigma`` as a matrix, or None where the Gaussian's own factors give it."""
        return None


class _FullForm(_CovarianceForm):
    """``Sigma = F^T F`` by the inverse ``F`` of the precision's Cholesky factor."""

    kind = "full"

    def __init__(self, scale: np.ndarray):
        self.scale = scale

    def sample_deviations(self, z: np.ndarray) -> np.ndarray:
        return z @ self.scale

    def times_factor(self, J: np.ndarray) -> np.ndarray:
        return np.matmul(self.scale, J)


class _DiagonalForm(_CovarianceForm):
    """A diagonal ``Sigma`` by its standard deviations."""

    kind = "diagonal"

    def __init__(self, sd: np.ndarray):
        self.sd = sd

    def sample_deviations(self, z: np.ndarray) -> np.ndarray:
        return z * self.sd

    def times_factor(self, J: np.ndarray) -> np.ndarray:
        return J * self.sd[None, :, None]


class _KronForm(_CovarianceForm):
    """A Kronecker-factored ``Sigma`` (:class:`~skbnn._kron.KronPrecision`): the
    linearized network from the layers' inputs and output derivatives, never the
    Jacobian."""

    kind = "Kronecker-factored"

    def __init__(self, kron: KronPrecision):
        self.kron = kron

    def sample_deviations(self, z: np.ndarray) -> np.ndarray:
        return self.kron.sample_deviations(z)

    def times_factor(self, J: np.ndarray) -> np.ndarray:
        return self.kron.inverse_sqrt_times(J)

    def map_linearized(self, net: ForwardPass, X, theta, first_layer: int, fn) -> list:
        kron = self.kron
        return net.map_derivatives(
            X, theta, first_layer,
            lambda rows, f, inputs, deltas: fn(rows, f, _KronChunk(kron, inputs, deltas)),
        )  # fmt: skip

    def block_covariance(self) -> np.ndarray:
        return self.kron.inverse()


class _JacobianChunk:
    """A chunk of rows of the linearized network, by its Jacobian ``J`` (``(k, q, m)``) and
    ``times_factor(J) = F J`` with ``F^T F = Sigma``."""

    def __init__(self, times_factor, J):
        self.times_factor, self.J = times_factor, J

    def covariance(self) -> np.ndarray:
        """``J Sigma J^T`` per row, ``(m, k, k)``."""
        G = self.times_factor(self.J)
        return np.einsum("oqm,lqm->mol", G, G)

    def variances(self) -> np.ndarray:
        """Its diagonal, ``(k, m)``."""
        return (self.times_factor(self.J) ** 2).sum(axis=1)

    def shifts(self, delta) -> np.ndarray:
        """``J delta_s`` per row for deviations ``delta`` (``(s, q)``), ``(s, k, m)``."""
        return np.einsum("sq,kqm->skm", delta, self.J)


class _KronChunk:
    """A chunk of rows of the linearized network under a Kronecker-factored covariance, by
    the layers' inputs and output derivatives (:func:`skbnn._kron.output_derivatives`)."""

    def __init__(self, kron, inputs, deltas):
        self.kron, self.inputs, self.deltas = kron, inputs, deltas

    def covariance(self) -> np.ndarray:
        return self.kron.function_covariance(self.inputs, self.deltas)

    def variances(self) -> np.ndarray:
        return np.diagonal(self.covariance(), axis1=1, axis2=2).T

    def shifts(self, delta) -> np.ndarray:
        return self.kron.function_shifts(self.inputs, self.deltas, delta)


__all__ = [
    "ForwardPass",
    "GaussianPosterior",
    "LaplacePosterior",
    "WeightedDraws",
    "class_probabilities",
    "stored_draws",
    "FlowSpikeSlabPosterior",
    "LowRankSpikeSlabPosterior",
    "SpikeSlabPosterior",
    "spike_slab_draws",
]
