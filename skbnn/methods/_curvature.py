"""Laplace's curvatures: one strategy per ``Laplace(hessian=...)`` option, behind one
interface, as laplace-torch's curvature backends are.

A strategy computes the likelihood's curvature at a MAP over the covered parameters
(:meth:`Curvature.likelihood`), assembles the posterior precision from it and the prior's
(:meth:`Curvature.precision`), and answers what empirical Bayes and the polish ask of that
precision: the covariance, the marginal variances, the GGN's quadratic form and the
effective parameters of one output. :class:`~skbnn.methods.Laplace` never asks which
strategy it has. The covered parameters (all, or the last layer's with
``subset="last_layer"``) are the strategies' argument ``first_layer``: any curvature
covers either, as laplace-torch's ``subset_of_weights`` and ``hessian_structure`` are two
independent choices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, eigh
from scipy.special import expit, softmax

from .._kron import KronPrecision, likelihood_factors
from ..exceptions import ConvergenceWarning, warn
from ..posterior import cholesky_inverse


@dataclass
class Precision:
    """The posterior precision a strategy assembles, and what the polish needs of it."""

    #: ``H``: a ``(q, q)`` matrix, a ``(q,)`` diagonal or a :class:`KronPrecision`
    precision: object
    logdet: float
    #: the Cholesky factor of a matrix ``H`` (scipy's ``cho_factor``), else None
    factor: tuple | None
    #: whether the GGN stood in for an exact Hessian that was not positive definite
    fallback: bool
    #: ``g -> G^-1 g`` with ``G`` the GGN plus the prior's precision (the Gauss-Newton
    #: step), or None where no step is taken
    ggn_solve: Callable | None


def weighted(target, curvature: np.ndarray) -> np.ndarray:
    """The likelihood's GGN (or its diagonal) under the current noise precisions: the
    per-output parts weighed by them for a Gaussian likelihood, else the one part."""
    if target.likelihood == "gaussian":
        return np.tensordot(target.tau, curvature, axes=1)
    return curvature[0]


def full_hessian(target, theta: np.ndarray, sl: slice, n_jobs: int) -> np.ndarray:
    """The negative Hessian of the log posterior over ``theta[sl]`` by central
    differences of the analytic gradient, symmetrized."""
    idx = np.arange(sl.start, sl.stop)
    # the step that balances truncation (h^2) against rounding (eps / h)
    h = 6e-6 * np.maximum(1.0, np.abs(theta[idx]))
    q = idx.size
    thetas = np.repeat(theta[None], 2 * q, axis=0)
    thetas[np.arange(q), idx] += h
    thetas[q + np.arange(q), idx] -= h
    _, grads = target.logp_grad_batch(thetas, n_jobs=n_jobs)
    H = -(grads[:q, sl] - grads[q:, sl]) / (2.0 * h[:, None])
    return 0.5 * (H + H.T)


#: How many times float64's rounding of the matrix (its size times eps times its largest
#: diagonal entry) an eigenvalue must exceed for its log to be right to about 1 %
RESOLVED = 100.0


def factorize(precision: np.ndarray, prior_prec: np.ndarray, fix: Callable[[str], str]) -> tuple:
    """``(H, log det H, Cholesky factor of H or None)``, with ``H`` made positive definite
    (with a warning naming the cause, read off the prior's precision ``prior_prec``, and
    its fix) when it is not. The matrices here are the Gauss-Newton matrix plus
    ``prior_prec`` (the exact Hessian gives way to them before), so only a prior with
    negative curvature or rounding can make them indefinite.

    Rounding is judged by the prior, not by whether the Cholesky factorization happens to
    succeed: where the GGN is singular (more weights than rows, dead units), a prior
    precision below float64's resolution of ``H`` leaves eigenvalues that are rounding
    noise, which a Cholesky factor takes as they come on one CPU and refuses on another,
    and the log determinant is off by orders of magnitude either way. ``fix("rounding")``
    is the runnable fix the warning then names (asked for only then)."""
    negative = int(np.sum(np.asarray(prior_prec) < 0))
    # the prior's own cause, when it is one, and the fix that removes it
    prior_cause = (
        f"the prior's curvature at the MAP is negative for {negative} of the "
        f"{np.size(prior_prec)} weights (a prior that is not Gaussian, between the scales "
        "of its components), more than the likelihood's curvature makes up for there. Fit "
        "under the Gaussian prior, whose curvature is positive: prior='gaussian'"
    )
    if precision.ndim == 1:
        if np.all(precision > 0) and np.all(np.isfinite(precision)):
            return precision, float(np.sum(np.log(precision))), None
        raise ValueError(
            "the diagonal Hessian has non-positive or non-finite entries: "
            + (prior_cause if negative else "check the data")
        )
    if not np.all(np.isfinite(precision)):
        raise ValueError(
            "the Hessian at the MAP is not finite; lower learning_rate_init or check the data"
        )
    resolution = RESOLVED * precision.shape[0] * np.finfo(float).eps * np.max(np.diag(precision))
    try:
        factor = cho_factor(precision, lower=True)
        logdet = 2.0 * float(np.sum(np.log(np.diag(factor[0]))))
        # a prior with negative curvature is judged by Cholesky alone, as before: its
        # cause is the prior's, and an eigendecomposition per factorization would cost it
        if negative or np.min(prior_prec) >= resolution:
            return precision, logdet, factor
    except LinAlgError:
        factor = None
    vals, vecs = eigh(precision)
    if factor is not None and vals.min() >= resolution:
        return precision, logdet, factor
    floor = max(vals.max(), 1.0) * 1e-8
    low = int(np.sum(vals < floor))
    cause = (
        prior_cause
        if negative
        else (
            "the Gauss-Newton matrix is positive semi-definite and the prior's precision "
            "positive, so rounding is the cause: the smallest prior precision, "
            f"{np.min(prior_prec):.3g}, is below what float64 resolves beside the largest "
            f"eigenvalue, {vals.max():.3g}. To fix it, {fix('rounding')}"
        )
    )
    warn(
        f"the Hessian of the negative log posterior at the MAP is not positive definite "
        f"to float64's precision ({low} of {vals.size} eigenvalues below {floor:.3g}, the "
        f"smallest {vals.min():.3g}). Those eigenvalues were raised to the floor, so the "
        "covariance and evidence are finite but not a Laplace approximation there. The "
        f"cause: {cause}.",
        ConvergenceWarning,
    )
    vals = np.maximum(vals, floor)
    repaired = (vecs * vals) @ vecs.T
    return repaired, float(np.sum(np.log(vals))), cho_factor(repaired, lower=True)


def _cholesky_solve(factor):
    return None if factor is None else (lambda g, factor=factor: cho_solve(factor, g))


class Curvature:
    """One ``hessian=`` option of :class:`~skbnn.methods.Laplace`."""

    #: the ``hessian=`` value
    name: str = ""
    #: whether Gauss-Newton and Newton steps polish the MAP (they solve with the GGN)
    polishes: bool = True

    def likelihood(self, target, net, theta, first_layer):
        """The likelihood's curvature at ``theta`` over the covered parameters, without
        the noise precision (which the updates change)."""
        raise NotImplementedError

    def precision(self, target, theta, sl, n_jobs, curvature, prior_prec, first_layer,
                  fix: Callable[[str], str]) -> Precision:  # fmt: skip
        """The posterior precision: the likelihood's ``curvature`` under the current noise
        precisions plus the prior's precision ``prior_prec`` over ``theta[sl]``.
        ``fix(cause)`` is the runnable fix that a warning or an error names for ``cause``:
        ``"ggn"`` (toward the GGN) or ``"rounding"`` (a prior too wide to resolve)."""
        raise NotImplementedError

    def covariance(self, state) -> np.ndarray:
        """``H^-1``: the matrix, or its diagonal where ``H`` is not a matrix."""
        raise NotImplementedError

    def variances(self, covariance: np.ndarray) -> np.ndarray:
        """The marginal variances of :meth:`covariance`'s value."""
        return covariance

    def ggn_quadratic(self, target, state, step: np.ndarray) -> float:
        """``step' G step`` with ``G`` the likelihood's GGN (the prior's part excluded)."""
        raise NotImplementedError

    def output_effective_parameters(self, target, state, o: int, covariance) -> float:
        """The effective parameters that output ``o``'s likelihood determines:
        ``tau_o tr(H^-1 G_o)``."""
        return float(np.sum(target.tau[o] * state.curvature[o] * covariance))


class _Jacobians(Curvature):
    """The GGN from the network's Jacobian, a pass of the rows in chunks."""

    def _reduce(self, M: np.ndarray) -> np.ndarray:
        """One chunk's part of the GGN from its rows' ``M`` (``G = M M'``)."""
        return np.matmul(M, M.transpose(0, 2, 1))

    def likelihood(self, target, net, theta, first_layer):
        """``(k, q, q)`` per output of a Gaussian likelihood, else ``(1, q, q)``."""
        n, d = target.n_rows, target.n_features
        X = target.XT.reshape(d, n).T
        W = target.W
        lik = target.likelihood

        def part(rows, f, J):
            w = W[rows]
            if lik == "gaussian":
                M = J * np.sqrt(w)
            elif lik == "bernoulli":
                p = expit(f[0])
                M = J * np.sqrt(w * p * (1.0 - p))
            else:
                # diag(p) - p p^T = A A^T, A[o, j] = (delta_oj - p_o) sqrt(p_j): row j of A^T J
                # is sqrt(p_j) (J_j - sum_o p_o J_o), k passes over J; laid out output-inside-row,
                # the outputs' blocks (which do not separate) are one matrix without a copy
                p, (k, q, m) = softmax(f, axis=0), J.shape
                mean, M = sum(p[o] * J[o] for o in range(k)), np.empty((q, k, m))
                for o in range(k):
                    np.multiply(J[o] - mean, np.sqrt(p[o] * w), out=M[:, o, :])
                M = M.reshape(1, q, k * m)
            return self._reduce(M)

        parts = net.map_jacobians(X, theta, first_layer, part)
        # summed in chunk order: the same bits for any n_jobs
        total = parts[0].copy()
        for p in parts[1:]:
            total += p
        return total

    def covariance(self, state) -> np.ndarray:
        return cholesky_inverse(state.factor[0])

    def variances(self, covariance: np.ndarray) -> np.ndarray:
        return np.diag(covariance)

    def ggn_quadratic(self, target, state, step: np.ndarray) -> float:
        return float(step @ (weighted(target, state.curvature) @ step))


class GGN(_Jacobians):
    """The generalized Gauss-Newton matrix plus the prior's precision."""

    name = "ggn"

    def precision(self, target, theta, sl, n_jobs, curvature, prior_prec, first_layer,
                  fix: Callable[[str], str]) -> Precision:  # fmt: skip
        precision = weighted(target, curvature) + np.diag(prior_prec)
        precision, logdet, factor = factorize(precision, prior_prec, fix)
        return Precision(precision, logdet, factor, False, _cholesky_solve(factor))


class FullHessian(_Jacobians):
    """The exact Hessian by differences of the gradient, the GGN standing in where it is
    not positive definite; its polish still steps with the GGN."""

    name = "full"

    def precision(self, target, theta, sl, n_jobs, curvature, prior_prec, first_layer,
                  fix: Callable[[str], str]) -> Precision:  # fmt: skip
        lik = weighted(target, curvature)
        precision = full_hessian(target, theta, sl, n_jobs)
        fallback = False
        try:
            cho_factor(precision, lower=True)
        except LinAlgError:
            # a saddle or a ridge (such as hidden units that collapsed into one): the
            # Laplace approximation does not exist there; the GGN is its positive
            # definite stand-in
            precision = lik + np.diag(prior_prec)
            fallback = True
        precision, logdet, factor = factorize(precision, prior_prec, fix)
        ggn = factor if fallback else cho_factor(lik + np.diag(prior_prec), lower=True)
        return Precision(precision, logdet, factor, fallback, _cholesky_solve(ggn))


class Diagonal(_Jacobians):
    """The GGN's diagonal (not the empirical Fisher's) plus the prior's precision; no
    polish (a diagonal solve is no Gauss-Newton step)."""

    name = "diag"
    polishes = False

    def _reduce(self, M: np.ndarray) -> np.ndarray:
        return np.einsum("kqm,kqm->kq", M, M)

    def precision(self, target, theta, sl, n_jobs, curvature, prior_prec, first_layer,
                  fix: Callable[[str], str]) -> Precision:  # fmt: skip
        precision, logdet, factor = factorize(
            weighted(target, curvature) + prior_prec, prior_prec, fix
        )
        return Precision(precision, logdet, factor, False, None)

    def covariance(self, state) -> np.ndarray:
        return 1.0 / state.precision

    def variances(self, covariance: np.ndarray) -> np.ndarray:
        return covariance

    def ggn_quadratic(self, target, state, step: np.ndarray) -> float:
        return float(step @ (weighted(target, state.curvature) * step))


class Kronecker(Curvature):
    """K-FAC: one ``A (x) G`` block per weight matrix and one ``G`` per bias vector
    (:mod:`skbnn._kron`), each plus its group's prior precision."""

    name = "kron"

    def likelihood(self, target, net, theta, first_layer):
        """The Kronecker factors (:class:`~skbnn._kron.KronFactors`)."""
        return likelihood_factors(target, net, theta, first_layer)

    def precision(self, target, theta, sl, n_jobs, curvature, prior_prec, first_layer,
                  fix: Callable[[str], str]) -> Precision:  # fmt: skip
        """The factors under the current noise precisions, plus each weight matrix's and
        bias vector's prior precision, which must be one number per group (the Kronecker
        structure has no room for more)."""
        layout = target.layout
        start = int(layout.offsets[first_layer])
        deltas = []
        for layer in range(first_layer, layout.n_layers):
            for g in layout.slices(layer):
                prec = prior_prec[g.start - start : g.stop - start]
                if np.ptp(prec) > 1e-12 * np.max(prec):
                    raise ValueError(
                        "Laplace(hessian='kron') needs one prior precision per weight matrix "
                        "and bias vector, as the Gaussian prior gives; this prior's curvature "
                        f"varies within them. Use {fix('ggn')}."
                    )
                deltas.append(float(np.mean(prec)))
        tau = target.tau if target.likelihood == "gaussian" else np.ones(1)
        G = [np.tensordot(tau, g, axes=1) for g in curvature.G]
        precision = KronPrecision(layout, first_layer, curvature.A, G, deltas)
        return Precision(precision, precision.logdet(), None, False, precision.solve)

    def covariance(self, state) -> np.ndarray:
        return state.precision.diag_inverse()

    def ggn_quadratic(self, target, state, step: np.ndarray) -> float:
        prec = state.precision
        return float(step @ (prec.matvec(step) - prec.prior_diagonal() * step))

    def output_effective_parameters(self, target, state, o: int, covariance) -> float:
        curv = state.curvature
        return target.tau[o] * state.precision.trace_inverse_times(curv.A, [g[o] for g in curv.G])


#: The strategy of each ``hessian=`` option.
CURVATURES: dict = {c.name: c for c in (GGN(), FullHessian(), Diagonal(), Kronecker())}
