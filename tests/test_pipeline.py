"""skbnn.pipeline: the final estimator's predictive methods reachable on a Pipeline, which
stays a scikit-learn Pipeline for cloning, pickling, slicing and grid search."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn import pipeline as sk_pipeline
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import DeepEnsemble, Laplace
from skbnn.pipeline import Pipeline, make_pipeline

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = 30.0 * rng.standard_normal((n, 3)) + 5.0  # unscaled: the scaler's work shows
    y = np.tanh(X[:, 0] / 30.0) + 0.1 * rng.standard_normal(n)
    return X, y


def _regressor():
    return BayesianMLPRegressor((4,), method=Laplace(), random_state=0)


def test_make_pipeline_names_steps_as_scikit_learn_does():
    pipe = make_pipeline(StandardScaler(), _regressor(), verbose=False)
    plain = sk_pipeline.make_pipeline(StandardScaler(), _regressor())
    assert isinstance(pipe, Pipeline) and isinstance(pipe, sk_pipeline.Pipeline)
    assert [name for name, _ in pipe.steps] == [name for name, _ in plain.steps]
    assert pipe.get_params().keys() == plain.get_params().keys()


def test_regressor_predictive_methods_are_the_final_steps_on_transformed_rows():
    X, y = _data()
    pipe = make_pipeline(StandardScaler(), _regressor()).fit(X, y)
    reg, Xt = pipe[-1], pipe[:-1].transform(X)
    for got, want in [
        (pipe.predict_interval(X, coverage=0.8), reg.predict_interval(Xt, coverage=0.8)),
        (pipe.predict_std(X, kind="epistemic"), reg.predict_std(Xt, kind="epistemic")),
        (pipe.sample_y(X, 3, random_state=1), reg.sample_y(Xt, 3, random_state=1)),
        (pipe.predict_mixture(X), reg.predict_mixture(Xt)),
    ]:
        got, want = (r if isinstance(r, tuple) else (r,) for r in (got, want))
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)
    # a regressor has no entropy; the error names the method
    assert not hasattr(pipe, "predict_entropy")
    with pytest.raises(AttributeError, match="predict_entropy"):
        pipe.predict_entropy(X)


def test_classifier_entropy_through_the_pipeline():
    X, y = _data()
    labels = (y > 0).astype(int)
    pipe = make_pipeline(
        StandardScaler(),
        BayesianMLPClassifier((4,), method=DeepEnsemble(max_iter=50), n_samples=4, random_state=0),
    ).fit(X, labels)
    Xt = pipe[:-1].transform(X)
    for kind in ("total", "epistemic", "aleatoric"):
        np.testing.assert_array_equal(
            pipe.predict_entropy(X, kind=kind), pipe[-1].predict_entropy(Xt, kind=kind)
        )
    np.testing.assert_array_equal(pipe.predict_std(X), pipe[-1].predict_std(Xt))
    assert not hasattr(pipe, "predict_interval") and not hasattr(pipe, "sample_y")


def test_unfitted_pipeline_says_so():
    pipe = make_pipeline(StandardScaler(), _regressor())
    with pytest.raises(NotFittedError):
        pipe.predict_interval(np.zeros((2, 3)))


def test_clone_pickle_slice_and_grid_search_keep_the_methods():
    X, y = _data()
    pipe = make_pipeline(StandardScaler(), _regressor())
    assert type(clone(pipe)) is Pipeline
    pipe.fit(X, y)
    assert type(pipe[:1]) is Pipeline and type(pipe[-1:]) is Pipeline
    again = pickle.loads(pickle.dumps(pipe))
    np.testing.assert_array_equal(again.predict_std(X), pipe.predict_std(X))

    search = GridSearchCV(pipe, {"bayesianmlpregressor__hidden_layer_sizes": [(2,), (4,)]}, cv=2)
    search.fit(X, y)
    best = search.best_estimator_
    assert type(best) is Pipeline
    low, high = best.predict_interval(X[:5], coverage=0.9)
    assert np.all(low < high)
    # GridSearchCV itself forwards predict only; the fitted pipeline carries the rest
    assert not hasattr(search, "predict_interval")
