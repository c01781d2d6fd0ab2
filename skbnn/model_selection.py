"""Scorers for choosing architectures the Bayesian way."""

from __future__ import annotations

import numpy as np


def evidence_scorer(estimator, X, y) -> float:
    """The fitted estimator's log model evidence, for ``GridSearchCV(scoring=...)``.

    The evidence is a property of the training data, so ``X`` and ``y`` are ignored; use it
    with a single "split" (e.g. ``cv=[(all_rows, all_rows)]``) to rank architectures by
    posterior model probability.

    Parameters
    ----------
    estimator : fitted BayesianMLPRegressor or BayesianMLPClassifier
    X, y : ignored

    Returns
    -------
    float
        ``estimator.log_evidence_``.

    Raises
    ------
    TypeError
        If the estimator's method does not estimate the evidence (e.g. NUTS, HMC).
    """
    if not hasattr(estimator, "log_evidence_"):
        method = getattr(estimator, "method", None)
        name = method if isinstance(method, str) else type(method).__name__
        raise TypeError(
            f"{type(estimator).__name__} fitted with method {name!r} has no log_evidence_; "
            "use a method that estimates the model evidence (such as SMC), or score with "
            "log_predictive_scorer instead"
        )
    return float(estimator.log_evidence_)


def log_predictive_scorer(estimator, X, y) -> float:
    """Mean log posterior predictive density of held-out data (higher is better).

    For a regressor the density of ``y`` in its original units (the mixture over posterior
    draws of the Gaussian observation model, noise included); for a classifier the log of
    the posterior-averaged probability of the true label. Averaged over rows, this is the
    Bayesian cross-validation score.

    Parameters
    ----------
    estimator : fitted BayesianMLPRegressor or BayesianMLPClassifier
        Or a Pipeline ending in one.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)

    Returns
    -------
    float
    """
    final = estimator
    if hasattr(estimator, "steps"):
        for _, step in estimator.steps[:-1]:
            if step is not None and step != "passthrough":
                X = step.transform(X)
        final = estimator.steps[-1][1]
    return float(np.mean(final._log_predictive_density(X, y)))
