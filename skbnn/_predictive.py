"""Checks and summaries the estimators and the model average share in their predictive
methods."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from scipy.special import entr


def check_predictive_args(kind="total", coverage=0.5, n_samples=1) -> None:
    """``ValueError`` naming a predictive method's argument that is out of its range."""
    if kind not in ("total", "epistemic", "aleatoric"):
        raise ValueError(f"kind must be one of 'total', 'epistemic', 'aleatoric'; got {kind!r}")
    if not (isinstance(coverage, Real) and 0 < coverage < 1):
        raise ValueError(f"coverage must be a float in (0, 1), got {coverage!r}")
    if not (isinstance(n_samples, Integral) and n_samples >= 1):
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")


def entropy_parts(proba: np.ndarray, aleatoric: np.ndarray, kind: str) -> np.ndarray:
    """The ``kind`` part of the predictive entropy, from the averaged class probabilities
    and the average of the draws' entropies."""
    total = entr(proba).sum(axis=1)
    if kind == "total":
        return total
    # the difference is the mutual information, >= 0 up to rounding
    aleatoric = np.minimum(aleatoric, total)
    return aleatoric if kind == "aleatoric" else total - aleatoric


def finite_prediction(a: np.ndarray) -> np.ndarray:
    """``a``, or a ValueError when a prediction overflowed float64: inputs far beyond the
    training data's scale (or a y near 1e300) can take the network's outputs, their spread
    or their units beyond its range, which must not come back as inf or NaN."""
    if not np.all(np.isfinite(a)):
        raise ValueError(
            "the prediction overflows float64 at these inputs (the network's outputs, or "
            "their spread in the units of y, are beyond its range): check X for extreme "
            "values (standardize X) and y's scale"
        )
    return a
