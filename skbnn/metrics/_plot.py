"""Display objects in scikit-learn's pattern: computed values in ``__init__``, drawing in
``plot``, and ``from_estimator`` / ``from_predictions`` to compute and draw at once.
matplotlib is imported only inside ``plot``."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import norm
from sklearn.utils.validation import check_is_fitted

from .._data import validate_X
from ..utils import last_step
from ._scores import pit_mixture


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "plotting needs matplotlib: pip install 'skbnn[plot]' (or pip install matplotlib)"
        ) from exc
    return plt


def axes_or_new(ax):
    if ax is None:
        _, ax = _pyplot().subplots()
    else:
        _pyplot()
    return ax


def _last_step(estimator, X):
    """A fitted regressor and ``X`` transformed for it: a :class:`~sklearn.pipeline.Pipeline`
    has no ``predict_interval``, so the rows go through every step but the last."""
    check_is_fitted(estimator)
    reg, X = last_step(estimator, X)
    if not hasattr(reg, "predict_mixture"):
        raise TypeError(
            f"this plot draws a regressor's predictive distribution; got "
            f"{type(reg).__name__}. For a classifier's probabilities use "
            "sklearn.calibration.CalibrationDisplay"
        )
    return reg, X


def _coverages(coverage) -> np.ndarray:
    levels = np.atleast_1d(np.asarray(coverage, dtype=np.float64))
    if levels.ndim != 1 or levels.size == 0 or np.any((levels <= 0) | (levels >= 1)):
        raise ValueError(f"coverage must be a float or floats in (0, 1), got {coverage!r}")
    return np.sort(levels)[::-1]


class PredictiveBandDisplay:
    """The predictive of a regressor over a one-dimensional input: its mean, central
    intervals and a few posterior draws of the function.

    The intervals hold the predictive of ``y`` (function and noise); the draws are of the
    function alone, so where data are missing they fan out with the epistemic part.
    Build it with :meth:`from_estimator` or :meth:`from_predictions`; the constructor
    only stores.

    Parameters
    ----------
    x : ndarray of shape (n_points,)
        The input, sorted.
    y_mean : ndarray of shape (n_points,)
    y_lower, y_upper : ndarrays of shape (n_levels, n_points)
        One interval per coverage level, widest first.
    coverage : ndarray of shape (n_levels,)
    f_draws : ndarray of shape (n_draws, n_points), default=None
        Posterior draws of the function.
    x_train, y_train : ndarrays of shape (n_train,), default=None
        Training points to show.
    estimator_name : str, default=None

    Attributes
    ----------
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure
    line_ : matplotlib Line2D
        The mean.
    bands_ : list of matplotlib PolyCollection
        One per coverage level.
    draw_lines_ : list of matplotlib Line2D
    scatter_ : matplotlib PathCollection or None

    Examples
    --------
    >>> from skbnn.metrics import PredictiveBandDisplay
    >>> PredictiveBandDisplay.from_estimator(reg, X_grid, X_train=X, y_train=y)  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        x,
        y_mean,
        y_lower,
        y_upper,
        coverage,
        f_draws=None,
        x_train=None,
        y_train=None,
        estimator_name=None,
    ):
        self.x = x
        self.y_mean = y_mean
        self.y_lower = y_lower
        self.y_upper = y_upper
        self.coverage = coverage
        self.f_draws = f_draws
        self.x_train = x_train
        self.y_train = y_train
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, name=None, band_kwargs=None, line_kwargs=None,
             draw_kwargs=None, scatter_kwargs=None) -> PredictiveBandDisplay:  # fmt: skip
        """Draw it.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            A new figure's when None.
        name : str, default=None
            The legend's name for the mean; the estimator's class by default.
        band_kwargs, line_kwargs, draw_kwargs, scatter_kwargs : dict, default=None
            Passed to ``fill_between``, ``plot`` (mean and draws) and ``scatter``.

        Returns
        -------
        PredictiveBandDisplay
        """
        ax = axes_or_new(ax)
        name = name if name is not None else self.estimator_name
        color = (line_kwargs or {}).get("color", "C0")
        self.bands_ = []
        levels = np.asarray(self.coverage)
        for i, c in enumerate(levels):
            kw = {"color": color, "alpha": 0.15 + 0.15 * i / max(1, levels.size - 1),
                  "linewidth": 0, "label": f"{100 * c:g} % predictive interval"}  # fmt: skip
            kw.update(band_kwargs or {})
            self.bands_.append(ax.fill_between(self.x, self.y_lower[i], self.y_upper[i], **kw))
        self.draw_lines_ = []
        if self.f_draws is not None:
            for j, f in enumerate(self.f_draws):
                kw = {"color": color, "linewidth": 0.7, "alpha": 0.6,
                      "label": "posterior draws of f" if j == 0 else None}  # fmt: skip
                kw.update(draw_kwargs or {})
                self.draw_lines_.append(ax.plot(self.x, f, **kw)[0])
        kw = {"color": color, "linewidth": 2, "label": "predictive mean"
              + (f" ({name})" if name else "")}  # fmt: skip
        kw.update(line_kwargs or {})
        self.line_ = ax.plot(self.x, self.y_mean, **kw)[0]
        self.scatter_ = None
        if self.x_train is not None:
            kw = {"color": "k", "s": 10, "zorder": 3, "label": "training data"}
            kw.update(scatter_kwargs or {})
            self.scatter_ = ax.scatter(self.x_train, self.y_train, **kw)
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.legend(loc="best", fontsize="small")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X: ArrayLike, *, coverage=(0.5, 0.9), n_draws: int = 5,
                       X_train=None, y_train=None, random_state=None, ax=None, name=None,
                       **plot_kwargs) -> PredictiveBandDisplay:  # fmt: skip
        """Predict over ``X`` and draw.

        Parameters
        ----------
        estimator : fitted BayesianMLPRegressor, or a Pipeline ending in one
            One input feature, one target.
        X : array-like of shape (n_points, 1)
            Where to draw the predictive, e.g. ``np.linspace(a, b, 200)[:, None]``.
        coverage : float or sequence of floats, default=(0.5, 0.9)
            The central intervals to shade.
        n_draws : int, default=5
            Posterior draws of the function to show (0 for none).
        X_train, y_train : array-like, default=None
            Training points to show.
        random_state : int, RandomState instance or None, default=None
            Picks the draws.
        ax : matplotlib Axes, default=None
        name : str, default=None
        **plot_kwargs
            Passed to :meth:`plot`.

        Returns
        -------
        PredictiveBandDisplay
        """
        reg, Xt = _last_step(estimator, X)
        x = np.asarray(X, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != 1:
            raise ValueError(f"PredictiveBandDisplay needs one input feature, X has shape "
                             f"{x.shape}: pass X of shape (n_points, 1)")  # fmt: skip
        if getattr(reg, "n_outputs_", 1) != 1:
            raise ValueError("PredictiveBandDisplay draws one target; the estimator has "
                             f"{reg.n_outputs_}")  # fmt: skip
        if not (isinstance(n_draws, Integral) and n_draws >= 0):
            raise ValueError(f"n_draws must be a non-negative int, got {n_draws!r}")
        levels = _coverages(coverage)
        order = np.argsort(x[:, 0], kind="stable")
        Xt = Xt[order] if not hasattr(Xt, "iloc") else Xt.iloc[order]
        bounds = [reg.predict_interval(Xt, coverage=c) for c in levels]
        f_draws = None
        if n_draws:
            if not hasattr(reg, "posterior_"):
                raise ValueError(
                    f"n_draws draws functions of one fitted network; {type(reg).__name__} "
                    "has none of its own: pass n_draws=0"
                )
            draws = reg.predictive_.function_draws(
                validate_X(reg, Xt), n_draws, random_state, n_jobs=reg.n_jobs
            )
            f_draws = draws[:, 0, :].T
        disp = cls(
            x=x[order, 0],
            y_mean=reg.predict(Xt),
            y_lower=np.array([b[0] for b in bounds]),
            y_upper=np.array([b[1] for b in bounds]),
            coverage=levels,
            f_draws=f_draws,
            x_train=None if X_train is None else np.asarray(X_train, dtype=float).ravel(),
            y_train=None if y_train is None else np.asarray(y_train, dtype=float).ravel(),
            estimator_name=type(reg).__name__,
        )
        return disp.plot(ax=ax, name=name, **plot_kwargs)

    @classmethod
    def from_predictions(cls, x: ArrayLike, y_mean: ArrayLike, y_lower: ArrayLike,
                         y_upper: ArrayLike, *, coverage=0.9, f_draws=None, x_train=None,
                         y_train=None, ax=None, name=None,
                         **plot_kwargs) -> PredictiveBandDisplay:  # fmt: skip
        """Draw computed predictions.

        Parameters
        ----------
        x, y_mean : array-like of shape (n_points,)
        y_lower, y_upper : array-like of shape (n_points,) or (n_levels, n_points)
            The interval per coverage level, in the order of ``coverage``.
        coverage : float or sequence of floats, default=0.9
        f_draws : array-like of shape (n_draws, n_points), default=None
        x_train, y_train : array-like, default=None
        ax : matplotlib Axes, default=None
        name : str, default=None
        **plot_kwargs
            Passed to :meth:`plot`.

        Returns
        -------
        PredictiveBandDisplay
        """
        x = np.asarray(x, dtype=np.float64).ravel()
        levels = np.atleast_1d(np.asarray(coverage, dtype=np.float64))
        _coverages(levels)
        lo = np.atleast_2d(np.asarray(y_lower, dtype=np.float64))
        hi = np.atleast_2d(np.asarray(y_upper, dtype=np.float64))
        if lo.shape != (levels.size, x.size) or hi.shape != lo.shape:
            raise ValueError(f"y_lower and y_upper must have shape ({levels.size}, {x.size}) "
                             f"for {levels.size} coverage level(s) and {x.size} points; got "
                             f"{lo.shape} and {hi.shape}")  # fmt: skip
        order, widest = np.argsort(x, kind="stable"), np.argsort(levels)[::-1]
        draws = None if f_draws is None else np.atleast_2d(np.asarray(f_draws, float))[:, order]
        disp = cls(
            x=x[order],
            y_mean=np.asarray(y_mean, dtype=np.float64).ravel()[order],
            y_lower=lo[widest][:, order],
            y_upper=hi[widest][:, order],
            coverage=levels[widest],
            f_draws=draws,
            x_train=None if x_train is None else np.asarray(x_train, dtype=float).ravel(),
            y_train=None if y_train is None else np.asarray(y_train, dtype=float).ravel(),
        )
        return disp.plot(ax=ax, name=name, **plot_kwargs)


class PITDisplay:
    """Calibration of a regressor's predictive, from the probability integral transform
    (PIT) values of held-out targets.

    ``kind="coverage"`` (a reliability diagram for regression) plots, for each nominal
    level ``c``, the share of targets inside their central ``c`` interval against ``c``:
    on the diagonal for a calibrated predictive, below it where the intervals are too
    narrow. ``kind="histogram"`` plots the PIT values' histogram: flat for a calibrated
    predictive, U-shaped where it is too narrow, a hump where too wide. Both shade where a
    calibrated predictive falls 95 % of the time with this many targets (pointwise,
    binomial).

    Parameters
    ----------
    pit : ndarray of shape (n_targets,)
        From :func:`pit_mixture` or :func:`pit_ensemble`.
    estimator_name : str, default=None

    Attributes
    ----------
    nominal_, observed_ : ndarrays
        The coverage curve (``kind="coverage"``).
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure
    line_ : matplotlib Line2D or BarContainer
        The curve or the histogram's bars.

    Examples
    --------
    >>> from skbnn.metrics import PITDisplay
    >>> PITDisplay.from_estimator(reg, X_test, y_test)  # doctest: +SKIP
    """

    def __init__(self, *, pit, estimator_name=None):
        self.pit = pit
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, kind: str = "coverage", n_bins: int = 10, name=None,
             **kwargs) -> PITDisplay:  # fmt: skip
        """Draw it.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
        kind : {"coverage", "histogram"}, default="coverage"
        n_bins : int, default=10
            The histogram's bins.
        name : str, default=None
            The legend's name; the estimator's class by default.
        **kwargs
            Passed to ``plot`` (coverage) or ``bar`` (histogram).

        Returns
        -------
        PITDisplay
        """
        if kind not in ("coverage", "histogram"):
            raise ValueError(f"kind must be 'coverage' or 'histogram', got {kind!r}")
        if not (isinstance(n_bins, Integral) and n_bins >= 1):
            raise ValueError(f"n_bins must be a positive int, got {n_bins!r}")
        ax = axes_or_new(ax)
        name = name if name is not None else self.estimator_name
        pit = np.asarray(self.pit, dtype=np.float64).ravel()
        n = pit.size
        z = norm.ppf(0.975)
        if kind == "coverage":
            self.nominal_ = np.linspace(0, 1, 101)
            self.observed_ = central_coverage(pit, self.nominal_)
            half = z * np.sqrt(self.nominal_ * (1 - self.nominal_) / n)
            ax.fill_between(self.nominal_, self.nominal_ - half, self.nominal_ + half,
                            color="0.85", label="95 % band of a calibrated predictive")  # fmt: skip
            ax.plot([0, 1], [0, 1], color="0.4", linestyle="--", linewidth=1)
            kw = {"label": name or "observed"}
            kw.update(kwargs)
            self.line_ = ax.plot(self.nominal_, self.observed_, **kw)[0]
            ax.set_xlabel("nominal coverage of the central interval")
            ax.set_ylabel("observed coverage")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_aspect("equal")
        else:
            counts, edges = np.histogram(pit, bins=n_bins, range=(0, 1))
            density = counts * n_bins / max(n, 1)
            p = 1 / n_bins
            half = z * np.sqrt(p * (1 - p) / max(n, 1)) * n_bins
            # over the bars, translucent, so that it shows where they reach
            ax.axhspan(1 - half, 1 + half, color="0.3", alpha=0.2, zorder=3,
                       label="95 % band of a calibrated predictive")  # fmt: skip
            kw = {"label": name or "PIT", "alpha": 0.8}
            kw.update(kwargs)
            self.line_ = ax.bar(edges[:-1], density, width=1 / n_bins, align="edge", **kw)
            ax.axhline(1, color="0.4", linestyle="--", linewidth=1)
            ax.set_xlabel("PIT value")
            ax.set_ylabel("density")
            ax.set_xlim(0, 1)
        ax.legend(loc="best", fontsize="small")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X: ArrayLike, y: ArrayLike, *, kind: str = "coverage",
                       ax=None, name=None, **kwargs) -> PITDisplay:  # fmt: skip
        """PIT values of held-out rows under a fitted regressor's exact predictive
        (:meth:`~skbnn.BayesianMLPRegressor.predict_mixture`, Gaussian or Student-t),
        and their plot.

        Parameters
        ----------
        estimator : fitted BayesianMLPRegressor, or a Pipeline ending in one
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Every target's values are pooled.
        kind : {"coverage", "histogram"}, default="coverage"
        ax : matplotlib Axes, default=None
        name : str, default=None
        **kwargs
            Passed to :meth:`plot`.

        Returns
        -------
        PITDisplay
        """
        reg, Xt = _last_step(estimator, X)
        *mixture, df = reg.predict_mixture(Xt, return_df=True)
        pit = pit_mixture(y, *mixture, df=df)
        disp = cls(pit=pit.ravel(), estimator_name=type(reg).__name__)
        return disp.plot(ax=ax, kind=kind, name=name, **kwargs)

    @classmethod
    def from_predictions(cls, y_true: ArrayLike, y_means: ArrayLike, y_stds: ArrayLike,
                         weights: ArrayLike | None = None, *, df: float | None = None,
                         kind: str = "coverage", ax=None, name=None,
                         **kwargs) -> PITDisplay:  # fmt: skip
        """PIT values under given Gaussian (or, with ``df``, Student-t) mixtures
        (:func:`pit_mixture`'s arguments; a mean and sd per row is a Gaussian), and their
        plot. For draws, build it from
        :func:`pit_ensemble`: ``PITDisplay(pit=pit_ensemble(y, draws)).plot()``.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
        y_means, y_stds : array-like
        weights : array-like of shape (S,), default=None
        df : float, default=None
            The degrees of freedom of Student-t components (``y_stds`` their scales).
        kind : {"coverage", "histogram"}, default="coverage"
        ax : matplotlib Axes, default=None
        name : str, default=None
        **kwargs
            Passed to :meth:`plot`.

        Returns
        -------
        PITDisplay
        """
        pit = pit_mixture(y_true, y_means, y_stds, weights, df=df)
        return cls(pit=pit.ravel()).plot(ax=ax, kind=kind, name=name, **kwargs)


def central_coverage(pit: ArrayLike, nominal: ArrayLike | Real) -> np.ndarray:
    """Observed coverage of the central intervals at each nominal level: the share of PIT
    values within ``nominal / 2`` of one half (both ends inside)."""
    distance = np.abs(2 * np.asarray(pit, dtype=np.float64).ravel() - 1)
    return np.mean(distance[None, :] <= np.atleast_1d(nominal)[:, None] + 1e-12, axis=1)
