"""The scoring functions of :mod:`skbnn.metrics`."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp, ndtr, stdtr, stdtrit
from sklearn.utils import check_consistent_length, column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from .._draws import noise_logpdf
from ..exceptions import warn
from ..kernels.predict import mixture_spread as kernel_mixture_spread

_MULTIOUTPUT = [StrOptions({"raw_values", "uniform_average"}), "array-like"]
_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)

#: A Student-t's degrees of freedom, or None for the Gaussian.
_DF = [Interval(Real, 0, None, closed="neither"), None]


def _validated(*arrays: str, optional: tuple = (), **constraints):
    """scikit-learn's ``validate_params`` for array arguments, optional arrays and others."""
    spec = {name: ["array-like"] for name in arrays}
    spec.update({name: ["array-like", None] for name in optional})
    spec.update(constraints)
    return validate_params(spec, prefer_skip_nested_validation=True)


def checked_finite(name: str, a) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinity")
    return a


def _targets(y_true) -> tuple[np.ndarray, bool]:
    """``y_true`` as ``(n, k)`` and whether it came as one target."""
    y = checked_finite("y_true", y_true)
    if y.ndim == 1:
        return y[:, None], True
    if y.ndim == 2:
        return y, False
    raise ValueError(f"y_true must be 1-D or 2-D, got shape {y.shape}")


def _per_row(name: str, a, y: np.ndarray, single: bool, last_axis: bool) -> np.ndarray:
    """An array of one value per row and target as ``(n, k)``; with ``last_axis``, of
    several per row and target (draws or components) as ``(n, k, S)``, where the shape of
    ``y_true`` is one."""
    a = checked_finite(name, a)
    n, k = y.shape
    layout = "(n_samples,)" if single else "(n_samples, n_outputs)"
    if last_axis:
        if a.ndim == y.ndim - single:  # the shape of y_true: one component
            a = a[..., None]
        layout = "(n_samples, m)" if single else "(n_samples, n_outputs, m)"
    if single:
        a = a[:, None]
    if a.shape[:2] != (n, k) or a.ndim != 2 + last_axis:
        shown = np.shape(a[:, 0]) if single and a.ndim > 1 else a.shape
        raise ValueError(f"{name} must have shape {layout} to match y_true, got {shown}")
    return a


def _stds(name: str, sd: np.ndarray, means: np.ndarray) -> np.ndarray:
    if sd.shape != means.shape:
        raise ValueError(f"{name} must have the shape of the means")
    if np.any(sd <= 0):
        raise ValueError(f"{name} must be positive")
    return sd


def _mixture_weights(weights, n_components: int) -> np.ndarray:
    if weights is None:
        return np.full(n_components, 1.0 / n_components)
    w = checked_finite("weights", weights).ravel()
    if w.shape != (n_components,):
        raise ValueError(f"weights must have one entry per component ({n_components}), "
                         f"got shape {np.shape(weights)}")  # fmt: skip
    if np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be non-negative with a positive sum")
    return w / w.sum()


def _average(scores: np.ndarray, sample_weight, multioutput, single: bool):
    """Average ``(n, k)`` scores over rows, then over targets as sklearn's metrics do."""
    if sample_weight is not None:
        sample_weight = checked_finite("sample_weight", column_or_1d(sample_weight))
        check_consistent_length(scores, sample_weight)
        if np.any(sample_weight < 0) or sample_weight.sum() <= 0:
            raise ValueError("sample_weight must be non-negative with a positive sum")
    per_target = np.average(scores, axis=0, weights=sample_weight)
    if isinstance(multioutput, str) and multioutput == "raw_values":
        return per_target
    if isinstance(multioutput, str):
        return float(np.mean(per_target))
    mo = checked_finite("multioutput", multioutput).ravel()
    if mo.shape != per_target.shape:
        raise ValueError(f"multioutput has {mo.size} weights for {per_target.size} targets")
    return float(np.average(per_target, weights=mo))


@_validated("y_true", "y_lower", "y_upper", optional=("sample_weight",), multioutput=_MULTIOUTPUT)
def interval_coverage(
    y_true: ArrayLike,
    y_lower: ArrayLike,
    y_upper: ArrayLike,
    *,
    sample_weight: ArrayLike | None = None,
    multioutput="uniform_average",
) -> float | np.ndarray:
    """Share of the targets inside their predicted intervals.

    A 90 % interval of a calibrated predictive covers about 90 % of new targets.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_lower, y_upper : array-like of the same shape
        The interval's bounds, as ``predict_interval`` returns them. Both ends count as
        inside.
    sample_weight : array-like of shape (n_samples,), default=None
    multioutput : {"raw_values", "uniform_average"} or array-like, default="uniform_average"
        How to combine the targets, as in :func:`sklearn.metrics.r2_score`.

    Returns
    -------
    float or ndarray of shape (n_outputs,)

    Examples
    --------
    >>> from skbnn.metrics import interval_coverage
    >>> interval_coverage([1.0, 2.0, 3.0, 4.0], [0, 0, 0, 0], [2, 2, 2, 2])
    0.5
    """
    y, single = _targets(y_true)
    lo = _per_row("y_lower", y_lower, y, single, last_axis=False)
    hi = _per_row("y_upper", y_upper, y, single, last_axis=False)
    if np.any(lo > hi):
        raise ValueError("y_lower must not exceed y_upper")
    inside = ((lo <= y) & (y <= hi)).astype(np.float64)
    return _average(inside, sample_weight, multioutput, single)


@_validated("y_lower", "y_upper", optional=("sample_weight",), multioutput=_MULTIOUTPUT)
def mean_interval_width(
    y_lower: ArrayLike,
    y_upper: ArrayLike,
    *,
    sample_weight: ArrayLike | None = None,
    multioutput="uniform_average",
) -> float | np.ndarray:
    """Mean width of the predicted intervals, in the units of the target.

    Read it beside :func:`interval_coverage`: of two methods with the nominal coverage,
    the one with narrower intervals is sharper.

    Parameters
    ----------
    y_lower, y_upper : array-like of shape (n_samples,) or (n_samples, n_outputs)
    sample_weight : array-like of shape (n_samples,), default=None
    multioutput : {"raw_values", "uniform_average"} or array-like, default="uniform_average"

    Returns
    -------
    float or ndarray of shape (n_outputs,)

    Examples
    --------
    >>> from skbnn.metrics import mean_interval_width
    >>> mean_interval_width([0.0, 1.0], [2.0, 2.0])
    1.5
    """
    lo, single = _targets(y_lower)
    hi = _per_row("y_upper", y_upper, lo, single, last_axis=False)
    if np.any(lo > hi):
        raise ValueError("y_lower must not exceed y_upper")
    return _average(hi - lo, sample_weight, multioutput, single)


@_validated("y_true", "y_mean", "y_std", optional=("sample_weight",), multioutput=_MULTIOUTPUT)
def crps_gaussian(
    y_true: ArrayLike,
    y_mean: ArrayLike,
    y_std: ArrayLike,
    *,
    sample_weight: ArrayLike | None = None,
    multioutput="uniform_average",
) -> float | np.ndarray:
    """Mean continuous ranked probability score of Gaussian predictives (lower is better).

    ``CRPS(F, y) = integral of (F(x) - 1{x >= y})^2 dx``, in the units of the target; for
    ``N(mu, sigma^2)`` it is ``sigma (z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi))`` with
    ``z = (y - mu) / sigma`` (Gneiting and Raftery 2007). It rewards sharpness and
    calibration at once, and is the absolute error for a point forecast.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_mean, y_std : array-like of the same shape
        As ``predict(X, return_std=True)`` returns them. The estimators' predictive is a
        mixture, of which this is the Gaussian with the same two moments; for the exact
        score use :func:`crps_mixture` or :func:`crps_ensemble`.
    sample_weight : array-like of shape (n_samples,), default=None
    multioutput : {"raw_values", "uniform_average"} or array-like, default="uniform_average"

    Returns
    -------
    float or ndarray of shape (n_outputs,)

    Examples
    --------
    >>> from skbnn.metrics import crps_gaussian
    >>> round(crps_gaussian([0.0], [0.0], [1.0]), 4)
    0.2337
    """
    y, single = _targets(y_true)
    mu = _per_row("y_mean", y_mean, y, single, last_axis=False)
    sd = _stds("y_std", _per_row("y_std", y_std, y, single, last_axis=False), mu)
    return _average(_crps_normal(y - mu, sd), sample_weight, multioutput, single)


def _crps_normal(d: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """The CRPS of ``N(0, sd^2)`` at ``d``."""
    z = d / sd
    pdf = np.exp(-0.5 * z**2 - _LOG_SQRT_2PI)
    return sd * (z * (2 * ndtr(z) - 1) + 2 * pdf - 1 / np.sqrt(np.pi))


def _abs_normal_mean(d: np.ndarray, var: np.ndarray) -> np.ndarray:
    """``E|D|`` for ``D ~ N(d, var)``."""
    sd = np.sqrt(var)
    z = d / sd
    return d * (2 * ndtr(z) - 1) + 2 * sd * np.exp(-0.5 * z**2 - _LOG_SQRT_2PI)


@_validated(
    "y_true", "y_samples", optional=("sample_weight",), multioutput=_MULTIOUTPUT, fair=["boolean"]
)
def crps_ensemble(
    y_true: ArrayLike,
    y_samples: ArrayLike,
    *,
    sample_weight: ArrayLike | None = None,
    multioutput="uniform_average",
    fair: bool = False,
) -> float | np.ndarray:
    """Mean continuous ranked probability score of predictives given by draws.

    The energy form ``E|X - y| - E|X - X'| / 2`` over the empirical distribution of the
    ``m`` draws, computed from the sorted draws in ``O(m log m)`` per row.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_samples : array-like of shape (n_samples, m) or (n_samples, n_outputs, m)
        Draws from each row's predictive, as ``sample_y(X, m)`` returns them.
    sample_weight : array-like of shape (n_samples,), default=None
    multioutput : {"raw_values", "uniform_average"} or array-like, default="uniform_average"
    fair : bool, default=False
        Divide the spread term by ``m (m - 1)`` instead of ``m^2``: the unbiased estimate
        of the CRPS of the distribution the draws come from (Ferro 2014), instead of the
        CRPS of the empirical distribution of the draws.

    Returns
    -------
    float or ndarray of shape (n_outputs,)

    Examples
    --------
    >>> from skbnn.metrics import crps_ensemble
    >>> crps_ensemble([0.0], [[-1.0, 1.0]])
    0.5
    """
    y, single = _targets(y_true)
    x = np.sort(_per_row("y_samples", y_samples, y, single, last_axis=True), axis=-1)
    m = x.shape[-1]
    if m < (2 if fair else 1):
        raise ValueError(f"y_samples needs at least {2 if fair else 1} draws per row, got {m}")
    spread = np.sum((2 * np.arange(1, m + 1) - m - 1) * x, axis=-1)
    spread /= m * (m - 1) if fair else m * m
    scores = np.mean(np.abs(x - y[..., None]), axis=-1) - spread
    return _average(scores, sample_weight, multioutput, single)


def _mixture(y_true, y_means, y_stds, weights):
    y, single = _targets(y_true)
    mu = _per_row("y_means", y_means, y, single, last_axis=True)
    sd = _stds("y_stds", _per_row("y_stds", y_stds, y, single, last_axis=True), mu)
    return y, single, mu, sd, _mixture_weights(weights, mu.shape[-1])


@_validated(
    "y_true",
    "y_means",
    "y_stds",
    optional=("weights", "sample_weight"),
    multioutput=_MULTIOUTPUT,
    df=[Interval(Real, 1, None, closed="neither"), None],
)
def crps_mixture(
    y_true: ArrayLike,
    y_means: ArrayLike,
    y_stds: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    sample_weight: ArrayLike | None = None,
    multioutput="uniform_average",
    df: float | None = None,
) -> float | np.ndarray:
    """Mean continuous ranked probability score of Gaussian or Student-t mixtures.

    For the mixture ``sum_i w_i N(mu_i, s_i^2)``,
    ``CRPS = sum_i w_i E|N(mu_i - y, s_i^2)| - 1/2 sum_ij w_i w_j E|N(mu_i - mu_j,
    s_i^2 + s_j^2)|`` (Grimit et al. 2006), in closed form. The pairwise term costs
    ``S^2`` per row: for thousands of components, :func:`crps_ensemble` on draws is
    cheaper.

    With ``df``, the components are Student-t's of that many degrees of freedom with
    locations ``y_means`` and scales ``y_stds`` (a fit with ``noise_df``:
    ``predict_mixture(X, return_df=True)`` returns them). The first term is in closed
    form; the spread term ``E|X - X'|`` has none for t's, and is ``2 * integral of
    F (1 - F)`` by double-exponential quadrature, to about ``1e-8`` (relative): every
    node evaluates every component's CDF, so for many rows and components
    :func:`crps_ensemble` on draws is far cheaper. Narrow components far apart can exhaust
    its budget, which warns.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_means, y_stds : array-like of shape (n_samples, S) or (n_samples, n_outputs, S)
        The components, as ``predict_mixture`` returns them.
    weights : array-like of shape (S,), default=None
        Component weights (normalized here); equal when None.
    sample_weight : array-like of shape (n_samples,), default=None
    multioutput : {"raw_values", "uniform_average"} or array-like, default="uniform_average"
    df : float, default=None
        The Student-t components' degrees of freedom, above 1 (a t of fewer has no mean,
        and an infinite CRPS); None: Gaussian components.

    Returns
    -------
    float or ndarray of shape (n_outputs,)

    Examples
    --------
    >>> from skbnn.metrics import crps_mixture
    >>> round(crps_mixture([0.0], [[0.0]], [[1.0]]), 4)  # one component: a Gaussian
    0.2337
    """
    y, single, mu, sd, w = _mixture(y_true, y_means, y_stds, weights)
    if df is None:
        var = sd**2
        scores = np.einsum("nks,s->nk", _abs_normal_mean(mu - y[..., None], var), w)
        scores -= 0.5 * mixture_spread(mu, var, w)
        return _average(scores, sample_weight, multioutput, single)
    n, k, S = mu.shape
    scores = np.einsum("nks,s->nk", sd * student_abs_mean((y[..., None] - mu) / sd, df), w)
    spread = student_mixture_spread(
        mu.reshape(n * k, S),
        sd.reshape(n * k, S),
        np.broadcast_to(w, (n * k, S)),
        float(df),
        advice="crps_ensemble on draws (y_samples = reg.sample_y(X, n_samples=1000)) "
        "scores without it",
    )
    scores -= 0.5 * spread.reshape(n, k)
    return _average(scores, sample_weight, multioutput, single)


def student_abs_mean(z: np.ndarray, df: float) -> np.ndarray:
    """``E|T - z|`` for a standard Student-t ``T`` of ``df`` degrees of freedom (above 1):
    ``z (2 F(z) - 1) + 2 f(z) (df + z^2) / (df - 1)``, the CRPS's first term per unit
    scale."""
    dens = np.exp(noise_logpdf(z, 1.0, df))
    return np.abs(z) * (1.0 - 2.0 * stdtr(df, -np.abs(z))) + 2.0 * dens * (df + z**2) / (df - 1)


#: The self-energy's quadrature (:func:`student_mixture_spread`) stops halving its step
#: when a halving changes it by less than this (relative), after one by less than 1e-3:
#: its error is then far smaller, as it roughly squares per halving
SPREAD_RTOL = 1e-8
#: Evaluations of a component's CDF (nodes x components) one entry's quadrature may spend
SPREAD_BUDGET = 2**22
#: Elements of the (entries, nodes, components) blocks evaluated at once
SPREAD_BLOCK = 2**18


def spread_integrand(t, center, width, mu, scale, w, df):
    """``F (1 - F) dx/dt`` at the nodes ``t`` (n,) of each row's mixture, (m, n), with
    ``x = center + width * sinh(pi/2 sinh t)``; ``F`` and ``1 - F`` are summed from each
    component's smaller tail, so both keep their precision far out."""
    m, S = mu.shape
    u = 0.5 * np.pi * np.sinh(t)
    dxdt = 0.5 * np.pi * np.cosh(t) * np.cosh(u)
    out = np.empty((m, t.size))
    nb = min(t.size, max(1, SPREAD_BLOCK // S))
    rb = max(1, SPREAD_BLOCK // (S * nb))
    for a in range(0, m, rb):
        rows = slice(a, a + rb)
        wr = w[rows, :, None]
        for b in range(0, t.size, nb):
            nodes = slice(b, b + nb)
            x = center[rows, None] + width[rows, None] * np.sinh(u[nodes])
            z = (x[:, :, None] - mu[rows, None, :]) / scale[rows, None, :]
            tail = stdtr(df, -np.abs(z))
            left = z < 0.0
            below = np.matmul(np.where(left, tail, 1.0 - tail), wr)[..., 0]
            above = np.matmul(np.where(left, 1.0 - tail, tail), wr)[..., 0]
            out[rows, nodes] = below * above * (width[rows, None] * dxdt[nodes])
    return out


def student_mixture_spread(mu, scale, w, df: float, advice: str) -> np.ndarray:
    """``E|X - X'|`` of each row's mixture of Student-t's, rows of ``(m, S)`` arrays
    (weights summing to one): ``2 * integral of F (1 - F)``, by the trapezoidal rule after
    the double-exponential substitution ``x = c + b sinh(pi/2 sinh t)`` (``c`` the mixture's
    centre, ``b`` its spread), which makes the power-law tails decay double-exponentially.
    The step is halved until two successive halvings change the sum by less than 1e-3 and
    ``SPREAD_RTOL`` (relative), or until the next halving would exceed ``SPREAD_BUDGET``
    evaluations per row, which warns, with ``advice``, if the last one still changed it
    by more than 1e-6."""
    m, S = mu.shape
    if m == 0:
        return np.zeros(0)
    center = np.einsum("ms,ms->m", w, mu)
    width = np.sqrt(np.einsum("ms,ms->m", w, scale**2 + (mu - center[:, None]) ** 2))
    # standardized distance beyond which a component's tail adds below rounding: its mass
    # there (the quantile of 1e-18) and its integral, which decays as z**(1 - df)
    # (the exponent capped: below df = 1.06 it would overflow, and reach is capped anyway)
    z_far = max(-stdtrit(df, 1e-18), 10.0 ** min(17.0 / (df - 1.0), 300.0))
    reach = np.max((np.abs(mu - center[:, None]) + z_far * scale) / width[:, None])
    t_max = np.arcsinh(2.0 / np.pi * np.arcsinh(min(reach, 1e100)))
    h = 0.5
    n_half = int(np.ceil(t_max / h))
    t = np.arange(-n_half, n_half + 1) * h
    total = spread_integrand(t, center, width, mu, scale, w, df).sum(axis=1)
    estimate = h * total
    change = np.full(m, np.inf)
    active = np.arange(m)
    level = 0
    while active.size and (4 * n_half * 2**level + 1) * S <= SPREAD_BUDGET:
        level += 1
        h /= 2
        half = n_half * 2 ** (level - 1)
        t = (2 * np.arange(-half, half) + 1) * h  # the nodes between the last ones
        args = (center[active], width[active], mu[active], scale[active], w[active], df)
        total[active] += spread_integrand(t, *args).sum(axis=1)
        new = h * total[active]
        last = np.abs(new - estimate[active]) / new
        # an under-resolved narrow component can give two close sums by chance: the one
        # before must have been close as well
        converged = (last <= SPREAD_RTOL) & (change[active] <= 1e-3)
        change[active], estimate[active] = last, new
        active = active[~converged]
    coarse = active[change[active] > 1e-6]
    if coarse.size:
        warn(
            f"The self-energy (the CRPS's spread term) of {coarse.size} of {m} entries "
            f"is a quadrature whose last step changed it by up to {change[coarse].max():.0e} "
            "(relative): their Student-t components are narrow against the spread of their "
            f"locations. {advice}.",
            UserWarning,
        )
    return 2.0 * estimate


def mixture_spread(mu: np.ndarray, var: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``E|X - X'|`` for two independent draws of each entry's Gaussian mixture.

    ``sum_ij w_i w_j E|N(mu_i - mu_j, var_i + var_j)|``: the spread term of the CRPS (and
    skpro's self-energy), ``S^2 / 2`` terms per entry, by
    :func:`skbnn.kernels.predict.mixture_spread`.

    Parameters
    ----------
    mu, var : ndarrays of shape (n, k, S)
        The components' means and variances.
    weights : ndarray of shape (S,) or (n, S)
        The components' weights, summing to one (per row when 2-D).

    Returns
    -------
    ndarray of shape (n, k)
    """
    n, k, S = mu.shape
    weights = np.asarray(weights, dtype=np.float64)
    # one row of weights for all, or each row's repeated for its k entries
    w = weights[None] if weights.ndim == 1 else np.repeat(weights, k, axis=0)
    out = np.empty(n * k)
    kernel_mixture_spread(
        np.ascontiguousarray(mu, dtype=np.float64).reshape(n * k, S),
        np.ascontiguousarray(var, dtype=np.float64).reshape(n * k, S),
        np.ascontiguousarray(w),
        out,
    )
    return out.reshape(n, k)


@_validated("y_true", "y_samples")
def pit_ensemble(y_true: ArrayLike, y_samples: ArrayLike) -> np.ndarray:
    """Probability integral transform values from draws of the predictive.

    The share of each row's draws below its target, ties counted half. For a calibrated
    predictive the values are uniform on [0, 1] (on the grid of steps ``1/m``); a U shape
    says the intervals are too narrow, a hump that they are too wide.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_samples : array-like of shape (n_samples, m) or (n_samples, n_outputs, m)
        As ``sample_y(X, m)`` returns them.

    Returns
    -------
    ndarray of the shape of ``y_true``

    Examples
    --------
    >>> from skbnn.metrics import pit_ensemble
    >>> pit_ensemble([0.5, 3.0], [[0.0, 1.0], [0.0, 1.0]])
    array([0.5, 1. ])
    """
    y, single = _targets(y_true)
    x = _per_row("y_samples", y_samples, y, single, last_axis=True)
    yy = y[..., None]
    pit = (np.sum(x < yy, axis=-1) + 0.5 * np.sum(x == yy, axis=-1)) / x.shape[-1]
    return pit[:, 0] if single else pit


@_validated("y_true", "y_means", "y_stds", optional=("weights",), df=_DF)
def pit_mixture(
    y_true: ArrayLike,
    y_means: ArrayLike,
    y_stds: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    df: float | None = None,
) -> np.ndarray:
    """Probability integral transform values under Gaussian mixtures (or Student-t
    mixtures, with ``df``): each row's predictive CDF at its target, computed exactly.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_means, y_stds : array-like of shape (n_samples, S) or (n_samples, n_outputs, S)
        The components, as ``predict_mixture`` returns them; ``(n_samples,)`` is one
        Gaussian per row.
    weights : array-like of shape (S,), default=None
    df : float, default=None
        The degrees of freedom of Student-t components, whose scales ``y_stds`` then
        holds (a fit with ``noise_df``: ``predict_mixture(X, return_df=True)`` returns
        them); None for Gaussian components.

    Returns
    -------
    ndarray of the shape of ``y_true``

    Examples
    --------
    >>> from skbnn.metrics import pit_mixture
    >>> pit_mixture([0.0, 1.0], [0.0, 0.0], [1.0, 1.0]).round(3)
    array([0.5  , 0.841])
    """
    y, single, mu, sd, w = _mixture(y_true, y_means, y_stds, weights)
    z = (y[..., None] - mu) / sd
    pit = np.einsum("nks,s->nk", ndtr(z) if df is None else stdtr(df, z), w)
    pit = np.clip(pit, 0.0, 1.0)  # the weighted sum may round past 1
    return pit[:, 0] if single else pit


def mixture_log_density(y: np.ndarray, mu: np.ndarray, sd: np.ndarray, w: np.ndarray,
                        df: float | None = None):  # fmt: skip
    """Log density of each row's targets ``(n, k)`` under the mixture whose components
    are ``(n, k, S)``, joint over the targets (each component is independent across
    them); a component of weight 0 drops out. Gaussian components of sd ``sd``, or with
    ``df`` Student-t's of that scale."""
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    if df is None:
        r = (y[..., None] - mu) / sd
        logp = np.sum(-0.5 * r**2 - np.log(sd) - _LOG_SQRT_2PI, axis=1)
    else:
        logp = np.sum(noise_logpdf(y[..., None] - mu, sd, df), axis=1)
    return logsumexp(logw[None, :] + logp, axis=1)


@_validated("y_true", "y_means", "y_stds", optional=("weights", "sample_weight"), df=_DF)
def log_predictive_density(
    y_true: ArrayLike,
    y_means: ArrayLike,
    y_stds: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    sample_weight: ArrayLike | None = None,
    df: float | None = None,
) -> float:
    """Mean log density of the targets under their Gaussian-mixture predictives (or
    Student-t mixtures, with ``df``).

    ``log sum_i w_i N(y | mu_i, s_i^2)``, with the log-sum-exp taken exactly rather
    than the density averaged (which underflows far in the tails); with several targets,
    their joint density (each component is independent across targets). This is the
    "test log-likelihood" of the Bayesian deep-learning literature, the score
    :func:`skbnn.model_selection.log_predictive_scorer` returns for a fitted estimator.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_means, y_stds : array-like of shape (n_samples, S) or (n_samples, n_outputs, S)
        The components, as ``predict_mixture`` returns them; the shape of ``y_true`` is
        one Gaussian per row.
    weights : array-like of shape (S,), default=None
    sample_weight : array-like of shape (n_samples,), default=None
    df : float, default=None
        The degrees of freedom of Student-t components, whose scales ``y_stds`` then
        holds (a fit with ``noise_df``: ``predict_mixture(X, return_df=True)`` returns
        them); None for Gaussian components.

    Returns
    -------
    float

    Examples
    --------
    >>> from skbnn.metrics import log_predictive_density
    >>> round(log_predictive_density([0.0], [[-1.0, 1.0]], [[1.0, 1.0]]), 4)
    -1.4189
    """
    y, single, mu, sd, w = _mixture(y_true, y_means, y_stds, weights)
    return _average(mixture_log_density(y, mu, sd, w, df)[:, None], sample_weight,
                    "uniform_average", True)  # fmt: skip


@_validated(
    "y_true",
    "y_prob",
    optional=("labels", "sample_weight"),
    n_bins=[Interval(Integral, 1, None, closed="left")],
    strategy=[StrOptions({"uniform", "quantile"})],
    pos_label=[None, Integral, str, np.bool_, bool],
)
def expected_calibration_error(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    n_bins: int = 10,
    strategy: str = "uniform",
    labels: ArrayLike | None = None,
    pos_label=None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Expected calibration error of predicted class probabilities (lower is better).

    The rows are binned by predicted probability; the score is the mean over bins,
    weighted by their share of rows, of ``|observed frequency - mean predicted
    probability|`` (Naeini et al. 2015). The bins are those of
    :func:`sklearn.calibration.calibration_curve`, whose points this summarizes, and
    :class:`sklearn.calibration.CalibrationDisplay` draws them.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        The class labels.
    y_prob : array-like of shape (n_samples,) or (n_samples, n_classes)
        1-D: the probability of the positive class (binary problems; the score of
        ``calibration_curve``'s points). 2-D, as ``predict_proba`` returns it: the
        top-label calibration error (Guo et al. 2017), which bins the largest probability
        of each row and compares it with how often that class is the true one.
    n_bins : int, default=10
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins on [0, 1], or bins holding equal numbers of rows.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of a 2-D ``y_prob`` (a classifier's ``classes_``); by
        default the sorted labels of ``y_true``, which must then show every class.
    pos_label : int, str or bool, default=None
        The positive class of a 1-D ``y_prob``; by default the larger of two labels (as
        ``calibration_curve`` chooses it for {0, 1} or {-1, 1}).
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    float

    Examples
    --------
    >>> from skbnn.metrics import expected_calibration_error
    >>> round(expected_calibration_error([0, 1, 1, 1], [0.2, 0.8, 0.8, 0.8], n_bins=5), 4)
    0.2
    """
    y = column_or_1d(y_true)
    p = checked_finite("y_prob", y_prob)
    check_consistent_length(y, p)
    if np.any(p < 0) or np.any(p > 1):
        raise ValueError("y_prob has values outside [0, 1]")
    if p.ndim == 1:
        classes = np.unique(y)
        if classes.size > 2:
            raise ValueError(
                f"a 1-D y_prob is the positive class's probability, for binary problems; "
                f"y_true has {classes.size} classes: pass predict_proba's 2-D output"
            )
        if pos_label is None:
            pos_label = classes[-1]
        conf, hit = p, (y == pos_label).astype(np.float64)
    elif p.ndim == 2:
        classes = np.unique(y) if labels is None else np.asarray(labels)
        if classes.size != p.shape[1]:
            raise ValueError(
                f"y_prob has {p.shape[1]} columns but there are {classes.size} labels: "
                "pass labels=clf.classes_"
                + (" (y_true does not show every class)" if labels is None else "")
            )
        top = np.argmax(p, axis=1)
        conf, hit = p[np.arange(p.shape[0]), top], (classes[top] == y).astype(np.float64)
    else:
        raise ValueError(f"y_prob must be 1-D or 2-D, got shape {p.shape}")
    sw = np.ones(conf.shape[0]) if sample_weight is None else column_or_1d(sample_weight)
    sw = checked_finite("sample_weight", sw)
    check_consistent_length(conf, sw)
    if strategy == "quantile":
        bins = np.percentile(conf, np.linspace(0, 100, n_bins + 1))
    else:
        bins = np.linspace(0.0, 1.0, n_bins + 1)
    ids = np.searchsorted(bins[1:-1], conf)  # calibration_curve's binning
    total = np.bincount(ids, weights=sw, minlength=n_bins)
    gap = np.bincount(ids, weights=sw * hit, minlength=n_bins) - np.bincount(
        ids, weights=sw * conf, minlength=n_bins
    )
    return float(np.sum(np.abs(gap)) / total.sum())
