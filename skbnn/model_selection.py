"""Choosing and averaging architectures the Bayesian way: scorers and model averaging."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import ParameterGrid
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_array, check_is_fitted

from ._data import validate_X
from .exceptions import ConvergenceWarning, collected_warnings, raise_warnings
from .methods import METHODS
from .predictive import PredictiveMixture, check_predictive_args
from .utils import data_difference, last_step

#: What to do instead, in every refusal of an evidence-based score.
_EVIDENCE_USE = (
    "To choose or average architectures by their evidence, use "
    "skbnn.model_selection.BayesianModelAverage (it fits every candidate on all rows), or "
    "GridSearchCV(..., scoring=evidence_scorer, cv=[(all_rows, all_rows)]) with "
    "all_rows = np.arange(n_samples); to score held-out data, use log_predictive_scorer."
)


def evidence_scorer(estimator, X, y) -> float:
    """The fitted estimator's log model evidence, for ``GridSearchCV(scoring=...)``.

    The evidence ``log p(y | X, architecture)`` is a property of the data the estimator was
    fitted on: it cannot score other rows. So ``X, y`` must be exactly those data, and the
    scorer refuses anything else instead of returning the training evidence for them. The
    ways to choose or average architectures by evidence are
    :class:`BayesianModelAverage`, which fits every candidate on all rows, or a
    ``GridSearchCV`` with a single split that trains and scores on all rows::

        all_rows = np.arange(len(y))
        GridSearchCV(est, grid, scoring=evidence_scorer, cv=[(all_rows, all_rows)])

    ``GridSearchCV`` turns a scorer's exception into a NaN score and a ``UserWarning``
    carrying the message (its ``error_score=np.nan``); pass ``error_score="raise"`` to get
    the exception itself. ``search.score(X_test, y_test)`` raises it directly.

    Parameters
    ----------
    estimator : fitted BayesianMLPRegressor or BayesianMLPClassifier
        Or a Pipeline ending in one.
    X : array-like of shape (n_samples, n_features)
        The training inputs (for a Pipeline, before its transformers). Compared with the
        inputs the estimator saw, up to the last bits a transformer's ``transform`` may
        differ by from its ``fit_transform``.
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        The training targets, compared exactly.

    Returns
    -------
    float
        ``log_evidence_`` of the (final) estimator.

    Raises
    ------
    TypeError
        If the estimator's method does not estimate the evidence (e.g. NUTS, HMC).
    ValueError
        If ``X, y`` are not the data the estimator was fitted on: a test fold of a k-fold
        ``cv``, or ``search.score(X_test, y_test)``.
    """
    final = _final_step(estimator)
    log_evidence = _log_evidence(final)
    _check_training_data(estimator, final, X, y, "evidence_scorer", "log_evidence_")
    return log_evidence


def elbo_scorer(estimator, X, y) -> float:
    """The fitted estimator's evidence lower bound ``elbo_``, for
    ``GridSearchCV(scoring=...)`` over variational fits (``method="vi"``).

    The ELBO is ``log p(y | X, architecture) - KL(q || posterior)``: a lower bound on the
    log evidence, short of it by how badly the variational family fits the posterior.
    That gap grows with the number of weights and with the posterior's correlations and
    modes, which mean-field ``q`` cannot represent, so ranking architectures by the ELBO
    is biased toward simpler models (smaller or narrower networks than the evidence would
    pick). Use it to compare variational fits with one another, not with
    ``log_evidence_`` of SMC or Laplace; to score held-out data, use
    :func:`log_predictive_scorer`. Like :func:`evidence_scorer`, it scores only the
    training data, so use it with ``cv=[(all_rows, all_rows)]``.

    Parameters
    ----------
    estimator : fitted BayesianMLPRegressor or BayesianMLPClassifier
        Fitted with variational inference, or a Pipeline ending in one.
    X : array-like of shape (n_samples, n_features)
        The training inputs (for a Pipeline, before its transformers).
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        The training targets.

    Returns
    -------
    float
        ``elbo_`` of the (final) estimator.

    Raises
    ------
    TypeError
        If the estimator was not fitted by variational inference.
    ValueError
        If ``X, y`` are not the data the estimator was fitted on.
    """
    final = _final_step(estimator)
    if not hasattr(final, "elbo_"):
        method = getattr(final, "method", None)
        name = method if isinstance(method, str) else type(method).__name__
        raise TypeError(
            f"{type(final).__name__} fitted with method {name!r} has no elbo_; elbo_scorer "
            "scores variational fits (method='vi' or 'lbbnn'). Use evidence_scorer for a method "
            "that estimates the evidence, or log_predictive_scorer."
        )
    _check_training_data(estimator, final, X, y, "elbo_scorer", "elbo_")
    return float(final.elbo_)


def _check_training_data(estimator, final, X, y, scorer: str, attribute: str) -> None:
    """Refuse ``X, y`` unless they are the data ``final``'s ``attribute`` is of."""
    fingerprint = getattr(final, "_evidence_data", None)
    if fingerprint is None:
        raise TypeError(
            f"{type(final).__name__} does not record the data its {attribute} is of, so "
            f"{scorer} cannot check that it is scoring them. " + _EVIDENCE_USE
        )
    difference = data_difference(fingerprint, _transform(estimator, X), y)
    if difference is not None:
        raise ValueError(
            f"{scorer}: these X, y are not the data {type(final).__name__} was "
            f"fitted on ({difference}). The {attribute} is a property of the training "
            "data and cannot score other rows: on the test folds of a k-fold cv, or in "
            "search.score(X_test, y_test), it would return the training value whatever "
            "the data. " + _EVIDENCE_USE
        )


def _log_evidence(final) -> float:
    """``final.log_evidence_``, or the ``TypeError`` that names a method without one."""
    if not hasattr(final, "log_evidence_"):
        method = getattr(final, "method", None)
        name = method if isinstance(method, str) else type(method).__name__
        if hasattr(final, "elbo_"):
            raise TypeError(
                f"{type(final).__name__} fitted with method {name!r} (variational "
                "inference) has no log_evidence_: its elbo_ is a lower bound on the log "
                "evidence, short of it by KL(q || posterior), not the evidence. Score "
                "variational fits with elbo_scorer (biased toward simpler models), or use "
                "a method that estimates the evidence (SMC, Laplace)."
            )
        raise TypeError(
            f"{type(final).__name__} fitted with method {name!r} has no log_evidence_; "
            "use a method that estimates the model evidence (such as SMC), or score with "
            "log_predictive_scorer instead"
        )
    return float(final.log_evidence_)


def _method_without_evidence(final) -> str | None:
    """The name of ``final``'s method if it is known not to estimate the evidence.

    ``None`` when it does, or when that is only known after fitting: an unknown method name
    (the estimator's fit raises the error that lists the valid ones) or an estimator that
    is not ours.
    """
    if not hasattr(final, "method"):
        return None
    method = final.method
    if method == "auto":
        # NUTS, the deep ensemble or SGHMC, by the data's size: none has an evidence
        return "auto"
    cls = METHODS.get(method) if isinstance(method, str) else type(method)
    if cls is None or getattr(cls, "provides_evidence", False):
        return None
    return method if isinstance(method, str) else cls.__name__


def _finite_or_minus_inf(log_post: np.ndarray) -> np.ndarray:
    """NaN log probabilities (a fit without a finite evidence) as minus infinity."""
    return np.where(np.isnan(log_post), -np.inf, log_post)


def _fit_candidate(estimator, X, y, fit_params, screen=False):
    """``estimator.fit(X, y, **fit_params)``: a module-level function, so that joblib can
    send it to worker processes. A ``screen`` fit is cut short on purpose, so its
    convergence warnings are not the user's concern and are dropped (gathered, not
    filtered: a filter is process-wide, and would silence fits in other threads too)."""
    if not screen:
        return estimator.fit(X, y, **fit_params)
    with collected_warnings() as caught:
        fitted = estimator.fit(X, y, **fit_params)
    raise_warnings([w for w in caught if not issubclass(w[1], ConvergenceWarning)])
    return fitted


def _final_step(estimator):
    """The estimator itself, or the last step of a Pipeline."""
    return estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator


def _transform(estimator, X):
    """``X`` as the final step of a Pipeline sees it (``X`` itself for an estimator)."""
    return check_array(last_step(estimator, X)[1], dtype=np.float64)


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
    final, X = last_step(estimator, X)
    if isinstance(final, BayesianModelAverage):
        inputs, n_jobs = final._inputs(X), final._n_jobs()
    else:
        inputs, n_jobs = validate_X(final, X), final.n_jobs
    return float(np.mean(final.predictive_.log_predictive_density(inputs, y, n_jobs=n_jobs)))


class BayesianModelAverage(MetaEstimatorMixin, BaseEstimator):
    """Choose or average candidate architectures by their posterior model probabilities.

    This is the way to use the model evidence for model selection. Every candidate of
    ``param_grid`` (``estimator`` with those parameters set) is fitted on all the rows, as
    the evidence ``p(y | X, m)`` requires: it is a property of the data a model was fitted
    on, not a held-out score. The posterior probability of a candidate is
    ``p(m | y) ~ p(y | m) p(m)``, from the log evidences and the prior over candidates.
    Predictions are the probability-weighted mixture of the candidates' posterior
    predictive distributions: the Bayesian answer when the architecture itself is
    uncertain. The average offers what a single estimator offers, on that mixture:
    ``predict(X, return_std=True)``, ``predict_std``, ``predict_interval``,
    ``predict_mixture`` and ``sample_y`` for a regressor, ``predict_proba`` and
    ``predict_std`` for a classifier, and :func:`log_predictive_scorer`. For selection
    alone, use ``best_params_`` and ``best_estimator_`` as those of ``GridSearchCV``;
    ``cv_results_`` tabulates the candidates.

    Every candidate's method must estimate the evidence (``method="smc"`` or
    ``"laplace"``). Each one's
    method is resolved first (the template's ``method`` or ``param_grid``'s, a name or an
    object, in a Pipeline too), and a method without an evidence (NUTS, HMC, ...) is a
    ``TypeError`` before anything is fitted.

    Parameters
    ----------
    estimator : BayesianMLPRegressor or BayesianMLPClassifier
        The template, with a method that estimates the evidence; or a Pipeline ending in
        one.
    param_grid : dict or list of dicts
        Candidates, as for :class:`sklearn.model_selection.GridSearchCV` (for example
        ``{"hidden_layer_sizes": [(2,), (4,), (4, 4)], "activation": ["relu", "tanh"]}``).
    prior : array-like of shape (n_candidates,), default=None
        Prior probabilities of the candidates in the order of
        ``sklearn.model_selection.ParameterGrid(param_grid)``; ``None`` is uniform. Need not
        be normalized.
    n_jobs : int, default=None
        Number of candidates fitted at once, with :class:`joblib.Parallel`: ``None`` means 1
        unless in a :func:`joblib.parallel_config` context, ``-1`` means all processors.
        Under ``joblib.parallel_config(backend="dask")`` the candidates are fitted on the
        workers of a ``distributed`` cluster (:doc:`/dask`). The results do not depend on
        it: each candidate is fitted from its own clone with its own copy of
        ``random_state``, and they are collected in the order of ``param_grid``.
    screen : dict, default=None
        Parameters of a cheap first fit that ranks the candidates, set on each one on top
        of its own (for a Pipeline, with the step's prefix: ``{"bnn__method": ...}``).
        ``None`` fits every candidate once, as given. With a screen, every candidate is
        fitted with these parameters first; only those whose screened log evidence plus
        log prior comes within ``screen_margin`` nats of the best one's are then fitted as
        given, and they alone carry probability. For example,
        ``{"method": Laplace(optimize_prior=False)}`` screens SMC candidates by Laplace
        under the same prior, whose evidence is close to SMC's at a small fraction of its
        cost (:doc:`/choosing` measures where a screen pays and where it misranks). A
        refitted candidate is fitted exactly as without a screen. The screened fits may
        stop short on purpose, so their convergence warnings are silenced.
    screen_margin : float, default=10.0
        Nats below the best screened candidate within which a candidate is refitted. It
        must exceed the screen's error in the *differences* between candidates' log
        evidences: a candidate it drops would have had a probability below
        ``exp(-screen_margin)`` times the best one's, were the screen exact.

    Attributes
    ----------
    candidate_params_ : list of dict
        The parameters of each candidate.
    estimators_ : list of estimators
        The fitted candidates.
    log_evidences_ : ndarray of shape (n_candidates,)
        ``log p(y | candidate)`` in the units of ``y``; NaN for a candidate the screen
        dropped.
    screen_log_evidences_ : ndarray of shape (n_candidates,)
        The screened fits' log evidences (only with a ``screen``).
    refitted_ : ndarray of bool of shape (n_candidates,)
        Which candidates the screen kept and were fitted as given (all of them without a
        ``screen``). The ``estimators_`` of the others are their screened fits, which
        carry no probability.
    model_probabilities_ : ndarray of shape (n_candidates,)
        Posterior probabilities of the candidates.
    best_index_ : int
        The index of the most probable candidate.
    best_params_ : dict
        The parameters of the most probable candidate.
    best_estimator_ : estimator
        The most probable fitted candidate.
    cv_results_ : dict of ndarray
        One entry per candidate, in the form of ``GridSearchCV``'s (``pandas.DataFrame``
        takes it): ``params``, ``param_<name>`` (masked arrays), ``log_evidence``,
        ``model_probability`` and ``rank`` (1 for the most probable; by log evidence plus
        log prior, ties sharing the lower rank); with a ``screen``, also
        ``screen_log_evidence`` and ``refitted``, and a dropped candidate ranks below
        every refitted one, by its screened evidence.
    predictive_ : skbnn.predictive.PredictiveMixture
        The model-averaged predictive distribution: the ``predictive_`` of every
        candidate that carries probability, weighted by its probability. Every prediction
        method calls it with ``X`` as each candidate sees it.
    classes_ : ndarray
        Class labels (classifier only).
    n_outputs_ : int
        Targets the regressor predicts (regressor only).
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
        "n_jobs": [Integral, None],
        "screen": [dict, None],
        "screen_margin": [Interval(Real, 0, np.inf, closed="both")],
    }

    def __init__(
        self, estimator, param_grid, prior=None, n_jobs=None, screen=None, screen_margin=10.0
    ):
        self.estimator = estimator
        self.param_grid = param_grid
        self.prior = prior
        self.n_jobs = n_jobs
        self.screen = screen
        self.screen_margin = screen_margin

    def _is_classifier(self) -> bool:
        return is_classifier(self.estimator)

    def fit(self, X: ArrayLike, y: ArrayLike, **fit_params) -> BayesianModelAverage:
        """Fit every candidate on ``(X, y)`` and weigh them by their evidence.

        Raises ``TypeError`` before fitting anything if a candidate's method does not
        estimate the evidence.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        **fit_params : dict
            Passed to every candidate's ``fit``, such as ``sample_weight`` (for a
            Pipeline, ``<step>__sample_weight``); the evidences are then of the weighted
            rows.

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
        candidates = [clone(self.estimator).set_params(**p) for p in self.candidate_params_]
        # a screen's method must estimate the evidence too, for it ranks by it
        screen = self.screen
        screened = [] if screen is None else [clone(e).set_params(**screen) for e in candidates]
        refused = [
            f"candidate {i} {params!r}{role} has method {name!r}"
            for role, ests in (("", candidates), (" under the screen", screened))
            if ests
            for i, (params, est) in enumerate(zip(self.candidate_params_, ests, strict=True))
            if (name := _method_without_evidence(_final_step(est))) is not None
        ]
        if refused:
            raise TypeError(
                "BayesianModelAverage weighs candidates by their model evidence, which these "
                f"methods do not estimate: {'; '.join(refused)}. Use a method that does "
                "(method='smc'), or compare candidates by held-out log predictive density "
                "with GridSearchCV(scoring=log_predictive_scorer). Nothing was fitted."
            )
        self.refitted_ = np.ones(n, dtype=bool)
        if self.screen is None:
            # (not left over from an earlier fit with a screen)
            self.__dict__.pop("screen_log_evidences_", None)
            self.estimators_ = self._fit_all(candidates, X, y, fit_params)
        else:
            self.estimators_ = self._fit_all(screened, X, y, fit_params, screen=True)
            self.screen_log_evidences_ = self._log_evidences()
            screen_post = _finite_or_minus_inf(self.screen_log_evidences_ + log_prior)
            # (if no screened fit has a finite evidence, every candidate is refitted)
            self.refitted_ = screen_post >= np.max(screen_post) - self.screen_margin
            kept = np.flatnonzero(self.refitted_)
            refits = self._fit_all([candidates[i] for i in kept], X, y, fit_params)
            for i, est in zip(kept, refits, strict=True):
                self.estimators_[i] = est
        self.log_evidences_ = self._log_evidences()
        self.log_evidences_[~self.refitted_] = np.nan
        log_post = self.log_evidences_ + log_prior
        if not np.any(np.isfinite(log_post)):
            raise ValueError(
                "no candidate has a finite log evidence plus log prior: "
                f"log_evidences_ = {self.log_evidences_}"
            )
        log_post = _finite_or_minus_inf(log_post)
        self.model_probabilities_ = np.exp(log_post - logsumexp(log_post))
        best = int(np.argmax(log_post))
        self.best_index_ = best
        self.best_params_ = self.candidate_params_[best]
        self.best_estimator_ = self.estimators_[best]
        self.n_features_in_ = self.best_estimator_.n_features_in_
        if hasattr(self.best_estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.best_estimator_.feature_names_in_
        if self._is_classifier():
            self.classes_ = self.best_estimator_.classes_
        else:
            self.n_outputs_ = _final_step(self.best_estimator_).n_outputs_
        self.cv_results_ = self._results_table(log_post)
        self.predictive_ = self._mixture()
        return self

    def _mixture(self) -> PredictiveMixture:
        """The candidates' predictives weighted by their probabilities."""
        estimators, p = self._weighted()
        return PredictiveMixture([_final_step(e).predictive_ for e in estimators], p)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "model_probabilities_" in state and "predictive_" not in state:
            # pickled before the predictive object: its candidates' are rebuilt
            self.predictive_ = self._mixture()

    def _fit_all(self, candidates, X, y, fit_params, screen=False) -> list:
        """The candidates fitted on exactly ``(X, y)``, so that their evidences need no
        data check, in their order."""
        # sklearn's Parallel (not joblib's) carries the scikit-learn configuration and the
        # warning filters into worker processes, as GridSearchCV does; each clone already
        # holds its own copy of random_state, so the fits do not depend on where they run
        return Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_candidate)(est, X, y, fit_params, screen) for est in candidates
        )

    def _log_evidences(self) -> np.ndarray:
        return np.array([_log_evidence(_final_step(e)) for e in self.estimators_])

    def _results_table(self, log_post) -> dict:
        """``cv_results_``: the candidates in ``GridSearchCV``'s tabular form."""
        n = len(self.candidate_params_)
        table = {"params": self.candidate_params_}
        for i, params in enumerate(self.candidate_params_):
            for name, value in params.items():
                # masked where a candidate of a list of grids lacks the parameter, as sklearn
                column = table.setdefault(
                    f"param_{name}", np.ma.MaskedArray(np.empty(n, dtype=object), mask=True)
                )
                column[i] = value
        table["log_evidence"] = self.log_evidences_
        table["model_probability"] = self.model_probabilities_
        rank = rankdata(-log_post, method="min")
        if self.screen is not None:
            table["screen_log_evidence"] = self.screen_log_evidences_
            table["refitted"] = self.refitted_
            dropped = ~self.refitted_
            rank[dropped] = np.count_nonzero(self.refitted_) + rankdata(
                -self.screen_log_evidences_[dropped], method="min"
            )
        table["rank"] = rank.astype(np.int32)
        return table

    def _is_regressor(self) -> bool:
        return not self._is_classifier()

    def _weighted(self):
        """The fitted candidates that carry probability, and those probabilities
        renormalized."""
        check_is_fitted(self)
        # candidates with negligible probability need not be evaluated
        keep = self.model_probabilities_ > 1e-12 * self.model_probabilities_.max()
        p = self.model_probabilities_[keep]
        return [e for e, k in zip(self.estimators_, keep, strict=True) if k], p / p.sum()

    def _inputs(self, X) -> list:
        """``X`` as each candidate that carries probability sees it (through its Pipeline's
        earlier steps, then its own input checks): the inputs of ``predictive_``."""
        estimators, _ = self._weighted()
        return [validate_X(*last_step(est, X)) for est in estimators]

    def _n_jobs(self):
        """The threads a candidate predicts on: its own ``n_jobs``."""
        return getattr(_final_step(self.best_estimator_), "n_jobs", None)

    def _squeeze(self, a):
        return a[:, 0] if a.ndim > 1 and self.n_outputs_ == 1 else a

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
        inputs = self._inputs(X)
        return self.predictive_.class_probabilities(inputs, n_jobs=self._n_jobs())[0]

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
        inputs = self._inputs(X)
        out = self.predictive_.mean(inputs, return_std, n_jobs=self._n_jobs())
        return tuple(map(self._squeeze, out)) if return_std else self._squeeze(out)

    def predict_std(self, X: ArrayLike, kind: str = "total") -> np.ndarray:
        """Standard deviation of the model-averaged prediction.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        kind : {"total", "epistemic", "aleatoric"}, default="total"
            Regressor: ``epistemic`` is the spread of the network output over every
            candidate's posterior draws, the candidates weighted by their probabilities
            (so it includes the spread between candidates); ``aleatoric`` the
            probability-weighted observation noise; ``total`` both. Classifier: the
            spread of each class probability over the same draws; only ``"total"``.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_outputs); classifier
        (n_samples, n_classes)
        """
        check_predictive_args(kind=kind)
        if self._is_classifier():
            if kind != "total":
                raise ValueError(f"a classifier's predict_std has kind='total' only; got {kind!r}")
            inputs = self._inputs(X)
            return self.predictive_.class_probabilities(inputs, n_jobs=self._n_jobs())[1]
        inputs = self._inputs(X)
        return self._squeeze(self.predictive_.std(inputs, kind, n_jobs=self._n_jobs()))

    @available_if(_is_classifier)
    def predict_entropy(self, X: ArrayLike, kind: str = "total") -> np.ndarray:
        """Entropy of the model-averaged class distribution, in nats, and its two parts.

        As :meth:`~skbnn.BayesianMLPClassifier.predict_entropy`, over every candidate's
        posterior draws weighted by the candidates' probabilities: the epistemic part
        includes the candidates' disagreement.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        kind : {"total", "epistemic", "aleatoric"}, default="total"

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_predictive_args(kind=kind)
        inputs = self._inputs(X)
        return self.predictive_.entropy(inputs, kind, n_jobs=self._n_jobs())

    @available_if(_is_regressor)
    def predict_mixture(self, X: ArrayLike, return_df: bool = False) -> tuple:
        """The model-averaged predictive distribution of ``y`` as one Gaussian mixture.

        The components of every candidate's
        :meth:`~skbnn.BayesianMLPRegressor.predict_mixture`, each candidate's weights
        multiplied by its posterior probability: :mod:`skbnn.metrics` scores it exactly.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_df : bool, default=False
            Also return the components' degrees of freedom, as
            :meth:`~skbnn.BayesianMLPRegressor.predict_mixture` does: None, since the
            methods that estimate an evidence have Gaussian noise.

        Returns
        -------
        y_means, y_stds : ndarrays of shape (n_samples, S) or (n_samples, n_outputs, S)
            Each component's mean and standard deviation, in the units of ``y``.
        weights : ndarray of shape (S,)
            The components' weights, summing to one.
        df : None
            With ``return_df``.
        """
        inputs = self._inputs(X)
        means, stds, *rest = self.predictive_.mixture(inputs, n_jobs=self._n_jobs(),
                                                      return_df=return_df)  # fmt: skip
        if self.n_outputs_ == 1:
            means, stds = means[:, 0], stds[:, 0]
        return (means, stds, *rest)

    @available_if(_is_regressor)
    def predict_interval(
        self, X: ArrayLike, coverage: float = 0.9
    ) -> tuple[np.ndarray, np.ndarray]:
        """Equal-tailed interval of the model-averaged predictive distribution of ``y``.

        Quantiles of the mixture of :meth:`predict_mixture`, by bisection on its CDF.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        coverage : float, default=0.9
            Probability mass inside the interval, in (0, 1).

        Returns
        -------
        lower, upper : ndarrays of shape (n_samples,) or (n_samples, n_outputs)
        """
        check_predictive_args(coverage=coverage)
        inputs = self._inputs(X)
        lower, upper = self.predictive_.interval(inputs, coverage, n_jobs=self._n_jobs())
        return self._squeeze(lower), self._squeeze(upper)

    @available_if(_is_regressor)
    def sample_y(self, X: ArrayLike, n_samples: int = 1, random_state=None) -> np.ndarray:
        """Draws from the model-averaged predictive distribution of ``y``.

        Each draw picks a candidate with its posterior probability, then draws from that
        candidate's predictive (:meth:`~skbnn.BayesianMLPRegressor.sample_y`), so a draw
        is jointly coherent across the rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_outputs, n_samples)
        """
        check_predictive_args(n_samples=n_samples)
        inputs = self._inputs(X)
        out = self.predictive_.sample_y(inputs, n_samples, random_state, n_jobs=self._n_jobs())
        return out[:, 0, :] if self.n_outputs_ == 1 else out

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
