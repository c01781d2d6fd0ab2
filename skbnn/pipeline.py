"""A scikit-learn Pipeline through which the whole predictive distribution reaches the user.

scikit-learn's :class:`~sklearn.pipeline.Pipeline` forwards ``predict`` (with its keyword
arguments, so ``predict(X, return_std=True)`` works), ``predict_proba`` and ``score``, but
not the methods a Bayesian estimator adds. :class:`Pipeline` is the same class with those
methods too: each runs ``X`` through every step but the last, then calls the final
estimator's method. :func:`make_pipeline` is the drop-in for scikit-learn's::

    from skbnn.pipeline import make_pipeline

    pipe = make_pipeline(StandardScaler(), BayesianMLPRegressor()).fit(X, y)
    low, high = pipe.predict_interval(X_test, coverage=0.9)

A method is there when the final step has it: ``predict_interval`` on a regressor,
``predict_entropy`` on a classifier. Everything else (``GridSearchCV``, ``clone``, pickling,
slicing, ``set_params``) is scikit-learn's.
"""

from __future__ import annotations

from sklearn import pipeline as _sk
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

__all__ = ["Pipeline", "make_pipeline"]


def _final_has(name: str):
    def check(self) -> bool:
        # raising AttributeError (not returning False) names the step that lacks it
        getattr(self._final_estimator, name)
        return True

    return check


def _forwarded(name: str, summary: str, returns: str):
    """The Pipeline method that transforms ``X`` and calls the final step's ``name``."""

    def method(self, X, *args, **kwargs):
        check_is_fitted(self)
        Xt = X
        for _, _, transform in self._iter(with_final=False):
            Xt = transform.transform(Xt)
        return getattr(self.steps[-1][1], name)(Xt, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"""{summary}

        Transforms ``X`` with every step but the last, then returns the final estimator's
        ``{name}``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input of the first step.
        *args, **kwargs
            Passed to the final estimator's ``{name}``.

        Returns
        -------
        {returns}
        """
    return available_if(_final_has(name))(method)


class Pipeline(_sk.Pipeline):
    """scikit-learn's Pipeline, with the final Bayesian estimator's predictive methods.

    Parameters, attributes and behaviour are those of :class:`sklearn.pipeline.Pipeline`.
    Added: :meth:`predict_interval`, :meth:`predict_std`, :meth:`sample_y`,
    :meth:`predict_mixture` and :meth:`predict_entropy`, each available when the final
    step has it.

    Parameters
    ----------
    steps : list of (str, estimator) tuples
    transform_input : list of str, default=None
    memory : str or object with the joblib.Memory interface, default=None
    verbose : bool, default=False

    See Also
    --------
    make_pipeline : Build one without naming the steps.

    Examples
    --------
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skbnn import BayesianMLPRegressor
    >>> from skbnn.pipeline import Pipeline
    >>> pipe = Pipeline([("scale", StandardScaler()), ("bnn", BayesianMLPRegressor())])
    """

    predict_interval = _forwarded(
        "predict_interval",
        "Central predictive interval of the final regressor.",
        "lower, upper : ndarrays",
    )
    predict_std = _forwarded(
        "predict_std",
        "Predictive standard deviation of the final estimator.",
        "ndarray",
    )
    sample_y = _forwarded(
        "sample_y",
        "Draws from the final regressor's posterior predictive.",
        "ndarray",
    )
    predict_mixture = _forwarded(
        "predict_mixture",
        "The final regressor's predictive as a Gaussian mixture.",
        "means, stds, weights : ndarrays",
    )
    predict_entropy = _forwarded(
        "predict_entropy",
        "Entropy of the final classifier's predictive class distribution.",
        "ndarray of shape (n_samples,)",
    )


def make_pipeline(*steps, memory=None, transform_input=None, verbose: bool = False) -> Pipeline:
    """Build a :class:`Pipeline` from estimators, naming each after its class.

    The drop-in for :func:`sklearn.pipeline.make_pipeline`, with the same arguments and
    step names.

    Parameters
    ----------
    *steps : list of estimators
    memory : str or object with the joblib.Memory interface, default=None
    transform_input : list of str, default=None
    verbose : bool, default=False

    Returns
    -------
    Pipeline

    Examples
    --------
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skbnn import BayesianMLPRegressor
    >>> from skbnn.pipeline import make_pipeline
    >>> make_pipeline(StandardScaler(), BayesianMLPRegressor()).steps[1][0]
    'bayesianmlpregressor'
    """
    plain = _sk.make_pipeline(
        *steps, memory=memory, transform_input=transform_input, verbose=verbose
    )
    return Pipeline(plain.steps, memory=memory, transform_input=transform_input, verbose=verbose)
