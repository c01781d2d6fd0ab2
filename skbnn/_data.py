"""Data preparation for the estimators: checks, row weights, label encoding and target
scaling, everything between the user's ``(X, y, sample_weight)`` and the rows a
:class:`skbnn.log_posterior.LogPosterior` is built from."""

from __future__ import annotations

from numbers import Integral
from typing import NamedTuple

import numpy as np
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .exceptions import DataScaleWarning, RepeatedRowsWarning, warn

# A feature whose root mean square exceeds this is far from standardized: the priors assume
# inputs of unit scale (StandardScaler gives 1; a 0/1 or one-hot feature stays below 1).
MAX_FEATURE_RMS = 10.0


class TrainingRows(NamedTuple):
    """The training rows as the likelihood sees them (see :func:`weighted_rows`)."""

    X: np.ndarray
    Y: np.ndarray
    W: np.ndarray

    @property
    def weight_sum(self) -> float:
        """The number of rows counted by their weights."""
        return float(self.W.sum())


def check_hidden_layer_sizes(sizes) -> tuple[int, ...]:
    """``hidden_layer_sizes`` as a tuple of positive ints (an int is one layer)."""
    if isinstance(sizes, Integral):
        sizes = (sizes,)
    try:
        sizes = tuple(sizes)
    except TypeError:
        raise ValueError(
            f"hidden_layer_sizes must be a tuple of positive ints, got {sizes!r}"
        ) from None
    if not all(isinstance(s, Integral) and s >= 1 for s in sizes):
        raise ValueError(f"hidden_layer_sizes must be a tuple of positive ints, got {sizes!r}")
    return tuple(int(s) for s in sizes)


def validate_X(estimator, X) -> np.ndarray:
    """``X`` checked against what the fitted ``estimator`` was fitted on (the number of
    features, their names) as a float array: the input of its ``predictive_``."""
    check_is_fitted(estimator)
    return validate_data(estimator, X, reset=False, dtype=np.float64)


def weighted_rows(X, Y, sample_weight) -> TrainingRows:
    """The training rows as the likelihood sees them: ``(X, Y, weights)``.

    Rows equal in ``X`` and ``Y`` are merged into one whose weight is the sum of theirs, rows
    of weight zero are dropped, and the rows are put in a canonical order. The likelihood is
    the same (a row of weight ``w`` counts ``w`` times), so integer weights give exactly the
    fit of repeated rows, a permutation of the rows gives the same fit, and duplicated rows
    cost one pass.
    """
    # refuses negative weights and all zeros
    w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    Z = np.ascontiguousarray(np.hstack([X, Y]), dtype=np.float64)
    # bytes of each row as one opaque item: np.unique sorts and merges them in one pass
    rows = Z.view(np.dtype((np.void, Z.dtype.itemsize * Z.shape[1]))).ravel()
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    weights = np.bincount(inverse.ravel(), weights=w, minlength=len(first))
    keep = weights > 0
    Z = Z[first[keep]]
    return TrainingRows(Z[:, : X.shape[1]], Z[:, X.shape[1] :], weights[keep])


#: The share of the rows that may repeat another before :class:`RepeatedRowsWarning`.
MAX_REPEATED_SHARE = 0.1


def warn_repeated(n_rows: int, data: TrainingRows, sample_weight) -> None:
    """A RepeatedRowsWarning when at least ``MAX_REPEATED_SHARE`` of the ``n_rows`` rows
    (of positive weight) were merged into another by :func:`weighted_rows`."""
    if sample_weight is not None:
        n_rows = int(np.count_nonzero(np.asarray(sample_weight) > 0))
    repeated = n_rows - data.X.shape[0]
    if n_rows and repeated >= MAX_REPEATED_SHARE * n_rows:
        warn(
            f"{repeated} of the {n_rows} training rows repeat another row exactly (in X and "
            "y). Each copy counts as a separate observation, as a frequency weight does "
            "(sample_weight=3 is three copies), so the posterior is as sure as that many "
            "observations would make it and follows the repeated rows closely. If the "
            "copies are not separate observations (oversampling, augmentation, a join "
            "that repeated rows), keep one of each: _, keep = "
            "np.unique(np.column_stack([X, y]), axis=0, return_index=True); "
            "X, y = np.take(X, keep, axis=0), np.take(y, keep, axis=0).",
            RepeatedRowsWarning,
        )


def feature_rms(X: np.ndarray, axis: int = 0) -> np.ndarray:
    """The root mean square of every feature of ``X`` (its rows along ``axis``), exact for
    finite values up to float64's largest, whose squares would overflow."""
    scale = np.max(np.abs(X), axis=axis, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    return np.squeeze(scale, axis) * np.sqrt(np.mean((X / scale) ** 2, axis=axis))


def warn_unscaled(X, estimator) -> None:
    """A DataScaleWarning when a feature is far from standardized."""
    rms = feature_rms(X, axis=0) if X.shape[0] else np.zeros(0)
    if rms.size and rms.max() > MAX_FEATURE_RMS:
        j = int(np.argmax(rms))
        warn(
            f"X has {int(np.sum(rms > MAX_FEATURE_RMS))} feature(s) far from standardized "
            f"(the largest root mean square is {rms[j]:.3g}, in column {j}). The priors "
            "assume inputs of unit scale: unscaled features make the posterior narrow in "
            "some directions, which slows every method, and the prior a poor fit. Put a "
            f"StandardScaler before the estimator: make_pipeline(StandardScaler(), "
            f"{type(estimator).__name__}(...)).",
            DataScaleWarning,
        )


def weighted_mean_sd(Y: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean and population sd of each column of ``Y``, without overflow or
    underflow: the columns are divided by their largest magnitude first, so a y of 1e160
    (whose squares overflow) or 1e-200 (whose squares underflow to a "constant" y) is
    standardized as well as a y of 1."""
    big = np.max(np.abs(Y), axis=0)
    if np.all((big > 1e-100) & (big < 1e100)):
        # no square can overflow or underflow: the plain formula, the bits of earlier fits
        big = np.ones_like(big)
    else:
        big = np.where(big > 0, big, 1.0)
        Y = Y / big
    mean = np.average(Y, axis=0, weights=W)
    sd = np.sqrt(np.average((Y - mean) ** 2, axis=0, weights=W))
    return mean * big, sd * big


def standardize(
    Y: np.ndarray, W: np.ndarray, infer_noise: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Z, mean, scale)``: the targets ``Y`` standardized by their weighted mean and
    population sd per output, ``Y = Z * scale + mean``. A constant output keeps its
    original units (scale 1), with a DataScaleWarning where the noise is inferred (a
    fixed noise sd does not shrink)."""
    mean, scale = weighted_mean_sd(Y, W)
    if infer_noise and np.any(scale == 0):
        warn(
            f"y is constant (output(s) {np.flatnonzero(scale == 0).tolist()}): the "
            "network can fit it exactly, so an inferred noise sd shrinks to what its "
            "prior allows and sampling is slow. The prediction is the constant; a "
            "DummyRegressor gives it at once, or fix the noise sd (in y's units) "
            "instead of inferring it: noise_std=0.1.",
            DataScaleWarning,
        )
    # a constant output has no scale to standardize by; leave it in original units
    scale = np.where(scale > 0, scale, 1.0)
    return (Y - mean) / scale, mean, scale


def rounding_variance(Y: np.ndarray, scale: np.ndarray) -> float | None:
    """The variance of rounding to the grid the targets lie on, on the standardized scale:
    ``(h / scale) ** 2 / 12`` for an output whose values are all multiples of a spacing
    ``h`` from its smallest (integers: 1), the smallest over the outputs; ``None`` when
    an output has fewer than three distinct values (any two lie on a grid) or lies on
    no grid (continuous targets).

    A target rounded to ``h`` is the true value plus an error spread evenly over
    ``h``, of variance ``h ** 2 / 12`` (Sheppard's correction): a noise the network
    predicts cannot be smaller, and a density that ignores this can pile onto the
    grid's points without bound.

    Parameters
    ----------
    Y : ndarray of shape (n_rows, n_outputs)
        The targets, in their own units.
    scale : ndarray of shape (n_outputs,)
        The standardization's scale of each output (:func:`standardize`).

    Returns
    -------
    float or None
    """
    variances = []
    for col, s in zip(Y.T, scale, strict=True):
        values = np.unique(col)
        if values.size < 3:
            return None
        h = np.diff(values).min()
        steps = (values - values[0]) / h
        # the values' own rounding error, relative to the steps they span
        if np.max(np.abs(steps - np.round(steps))) > 1e-6:
            return None
        variances.append((h / s) ** 2 / 12.0)
    return float(min(variances))


def encode_labels(y, estimator) -> tuple[np.ndarray, np.ndarray, str]:
    """``(classes, Y, likelihood)`` of class labels ``y``: 0/1 codes in one column with the
    Bernoulli likelihood for two classes, a one-hot matrix with the categorical one for
    more. Refuses labels of other kinds and a single class."""
    check_classification_targets(y)
    kind = type_of_target(y)
    name = type(estimator).__name__
    if kind not in ("binary", "multiclass"):
        raise ValueError(f"{name} supports binary and multiclass y, got {kind}")
    encoder = LabelEncoder()
    codes = encoder.fit_transform(y)
    classes = encoder.classes_
    if len(classes) < 2:
        raise ValueError(
            f"{name} needs samples of at least 2 classes in the data, but "
            f"the data contains only one class: {classes[0]!r}"
        )
    if len(classes) == 2:
        return classes, codes[:, None].astype(np.float64), "bernoulli"
    return classes, np.eye(len(classes))[codes], "categorical"
