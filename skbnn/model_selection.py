"""Choosing and averaging architectures the Bayesian way: scorers and model averaging."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import ParameterGrid
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted


def evidence_scorer(estimator, X, y) -> float:
    """The fitted estimator's log model evidence, for ``GridSearchCV(scoring=...)``.

    The evidence is a property of the training data, so ``X`` and ``y`` are ignored; use it
    with a single "split" (e.g. ``cv=[(all_rows, all_rows)]``) to rank architectures by
    posterior model probability.

    Parameters
    ----------
    estimator : fitted BayesianMLPRegressor or BayesianMLPClassifier
        Or a Pipeline ending in one.
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
    final = _final_step(estimator)
    if not hasattr(final, "log_evidence_"):
        method = getattr(final, "method", None)
        name = method if isinstance(method, str) else type(method).__name__
        raise TypeError(
            f"{type(final).__name__} fitted with method {name!r} has no log_evidence_; "
            "use a method that estimates the model evidence (such as SMC), or score with "
            "log_predictive_scorer instead"
        )
    return float(final.log_evidence_)


def _final_step(estimator):
    """The estimator itself, or the last step of a Pipeline."""
    return estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator


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


class BayesianModelAverage(MetaEstimatorMixin, BaseEstimator):
    """Average candidate architectures by their posterior model probabilities.

    Every candidate of ``param_grid`` (``estimator`` with those parameters set) is fitted on
    all the data. Its posterior probability is ``p(m | y) ~ p(y | m) p(m)`` from the log
    evidences (``log_evidence_``, so the method must estimate it, e.g. ``method="smc"``)
    and the prior over candidates. Predictions are the probability-weighted mixture of the
    candidates' posterior predictive distributions: the Bayesian answer when the
    architecture itself is uncertain.

    Parameters
    ----------
    estimator : BayesianMLPRegressor or BayesianMLPClassifier
        The template, with a method that estimates the evidence.
    param_grid : dict or list of dicts
        Candidates, as for :class:`sklearn.model_selection.GridSearchCV` (for example
        ``{"hidden_layer_sizes": [(2,), (4,), (4, 4)], "activation": ["relu", "tanh"]}``).
    prior : array-like of shape (n_candidates,), default=None
        Prior probabilities of the candidates in the order of
        ``sklearn.model_selection.ParameterGrid(param_grid)``; ``None`` is uniform. Need not
        be normalized.

    Attributes
    ----------
    candidate_params_ : list of dict
        The parameters of each candidate.
    estimators_ : list of estimators
        The fitted candidates.
    log_evidences_ : ndarray of shape (n_candidates,)
        ``log p(y | candidate)`` in the units of ``y``.
    model_probabilities_ : ndarray of shape (n_candidates,)
        Posterior probabilities of the candidates.
    best_params_ : dict
        The parameters of the most probable candidate.
    best_estimator_ : estimator
        The most probable fitted candidate.
    classes_ : ndarray
        Class labels (classifier only).
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skbnn import BayesianMLPClassifier
    >>> from skbnn.model_selection import BayesianModelAverage
    >>> X, y = load_iris(return_X_y=True)
    >>> bma = BayesianModelAverage(
    ...     BayesianMLPClassifier(method="smc", n_samples=100, random_state=0),
    ...     {"hidden_layer_sizes": [(), (2,)]},
    ... ).fit(X, y)
    >>> bma.model_probabilities_.shape
    (2,)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict"])],
        "param_grid": [dict, list],
        "prior": ["array-like", None],
    }

    def __init__(self, estimator, param_grid, prior=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.prior = prior

    def _is_classifier(self) -> bool:
        return is_classifier(self.estimator)

    def fit(self, X: ArrayLike, y: ArrayLike) -> BayesianModelAverage:
        """Fit every candidate on ``(X, y)`` and weigh them by their evidence.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self : BayesianModelAverage
        """
        self._validate_params()
        self.candidate_params_ = list(ParameterGrid(self.param_grid))
        n = len(self.candidate_params_)
        if self.prior is None:
            log_prior = np.full(n, -np.log(n))
        else:
            prior = np.asarray(self.prior, dtype=np.float64)
            valid = prior.shape == (n,) and np.all(np.isfinite(prior))
            if not valid or np.any(prior < 0) or not np.any(prior > 0):
                raise ValueError(
                    f"prior must hold {n} finite non-negative probabilities, one per candidate "
                    f"of param_grid, not all zero; got {self.prior!r}"
                )
            with np.errstate(divide="ignore"):
                log_prior = np.log(prior / prior.sum())
        self.estimators_ = []
        for params in self.candidate_params_:
            est = clone(self.estimator).set_params(**params).fit(X, y)
            # evidence_scorer unwraps a Pipeline, and its TypeError names a method without
            self.estimators_.append(est)
        self.log_evidences_ = np.array([evidence_scorer(est, X, y) for est in self.estimators_])
        log_post = self.log_evidences_ + log_prior
        if not np.any(np.isfinite(log_post)):
            raise ValueError(
                "no candidate has a finite log evidence plus log prior: "
                f"log_evidences_ = {self.log_evidences_}"
            )
        log_post = np.where(np.isnan(log_post), -np.inf, log_post)
        self.model_probabilities_ = np.exp(log_post - logsumexp(log_post))
        best = int(np.argmax(self.model_probabilities_))
        self.best_params_ = self.candidate_params_[best]
        self.best_estimator_ = self.estimators_[best]
        self.n_features_in_ = self.best_estimator_.n_features_in_
        if hasattr(self.best_estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.best_estimator_.feature_names_in_
        if self._is_classifier():
            self.classes_ = self.best_estimator_.classes_
        return self

    def _weighted(self):
        check_is_fitted(self)
        # candidates with negligible probability need not be evaluated
        keep = self.model_probabilities_ > 1e-12 * self.model_probabilities_.max()
        p = self.model_probabilities_[keep]
        return [e for e, k in zip(self.estimators_, keep, strict=True) if k], p / p.sum()

    @available_if(_is_classifier)
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities averaged over candidates (and each one's posterior).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        estimators, p = self._weighted()
        return sum(w * est.predict_proba(X) for est, w in zip(estimators, p, strict=True))

    @available_if(_is_classifier)
    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: ArrayLike, return_std: bool = False):
        """The model-averaged prediction.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Regressor only: also return the standard deviation of the mixture's posterior
            predictive (within-candidate predictive variance plus the spread of the
            candidates' means).

        Returns
        -------
        y_pred : ndarray
            Regressor: the mixture's predictive mean; classifier: the label with the
            highest model-averaged probability.
        y_std : ndarray
            Only with ``return_std=True`` (regressor).
        """
        if self._is_classifier():
            if return_std:
                raise ValueError("return_std is only available for regression")
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        estimators, p = self._weighted()
        if not return_std:
            return np.tensordot(p, np.stack([est.predict(X) for est in estimators]), axes=1)
        means, variances = [], []
        for est in estimators:
            mean, std = est.predict(X, return_std=True)
            means.append(mean)
            variances.append(std**2)
        means, variances = np.stack(means), np.stack(variances)
        mean = np.tensordot(p, means, axes=1)
        second = np.tensordot(p, variances + means**2, axes=1)
        return mean, np.sqrt(np.maximum(second - mean**2, 0.0))

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight=None) -> float:
        """Accuracy (classifier) or R^2 (regressor) of the model-averaged prediction.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        float
        """
        if self._is_classifier():
            return accuracy_score(y, self.predict(X), sample_weight=sample_weight)
        return r2_score(y, self.predict(X), sample_weight=sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = self.estimator.__sklearn_tags__()
        tags.estimator_type = inner.estimator_type
        tags.target_tags = inner.target_tags
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        return tags
