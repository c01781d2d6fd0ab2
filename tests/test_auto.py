"""``method="auto"``: the method it runs follows from the problem's size alone, and the
fitted estimator says which ran."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, load_iris

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import NUTS, SGHMC, DeepEnsemble
from skbnn.methods._auto import NUTS_MAX_WORK, SGHMC_MIN_ROWS, resolve


def test_the_rule_is_rows_times_parameters_for_regression_and_rows_for_classes():
    # deterministic: each threshold's two sides, and no timing involved
    assert isinstance(resolve(NUTS_MAX_WORK // 100, 100, 1, "regression"), NUTS)
    assert isinstance(resolve(NUTS_MAX_WORK // 100 + 1, 100, 1, "regression"), DeepEnsemble)
    # regression never goes to SGHMC, however many rows
    assert isinstance(resolve(10**7, 100, 1, "regression"), DeepEnsemble)
    # the regression ensemble lets its held-out rows choose the noise; a classifier's has none
    assert resolve(10**7, 100, 1, "regression").noise_df == "auto"
    assert resolve(10, 10, 2, "classification").noise_df is None
    assert isinstance(resolve(10, 10, 2, "classification"), DeepEnsemble)
    assert isinstance(resolve(SGHMC_MIN_ROWS - 1, 10**5, 2, "classification"), DeepEnsemble)
    assert isinstance(resolve(SGHMC_MIN_ROWS, 10, 10, "classification"), SGHMC)


@pytest.mark.parametrize(
    "hidden, expected", [((10,), NUTS), ((100,), DeepEnsemble)], ids=["small", "wide"]
)
def test_the_fitted_estimator_records_what_auto_ran(hidden, expected):
    # deterministic: diabetes with 10 units is 442 x 121 rows x parameters; with 100 units,
    # 442 x 1,201, beyond the threshold. The method object that ran is a fitted attribute,
    # and the constructor's parameter stays "auto". Two members are enough to say so
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    n_samples = 8 if expected is NUTS else 2
    est = BayesianMLPRegressor(hidden, n_samples=n_samples, random_state=0).fit(X, y)
    assert type(est.method_) is expected and est.method == "auto"
    assert np.all(np.isfinite(est.predict(X[:5])))
    # the ensemble says which noise its held-out rows chose
    assert ("noise" in est.diagnostics_) == (expected is DeepEnsemble)


def test_a_default_classifier_is_a_deep_ensemble():
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    clf = BayesianMLPClassifier(random_state=0).fit(X, y)
    assert isinstance(clf.method_, DeepEnsemble) and clf.method == "auto"


def test_a_default_classifier_on_many_rows_samples_with_sghmc():
    # deterministic: the choice, a fit without a warning, and probabilities that are ones
    from sklearn.datasets import make_classification

    X, y = make_classification(SGHMC_MIN_ROWS, n_features=4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = BayesianMLPClassifier(random_state=0).fit(X, y)
    assert isinstance(clf.method_, SGHMC) and clf.method == "auto"
    proba = clf.predict_proba(X[:100])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)


def test_a_named_method_runs_as_a_copy():
    # the fitted method_ is the method that ran, not the constructor's object
    X, y = load_diabetes(return_X_y=True)
    method = DeepEnsemble(max_iter=5)
    est = BayesianMLPRegressor(method=method, n_samples=2, random_state=0).fit(X[:50], y[:50])
    assert est.method_ is not method and est.method_.get_params() == method.get_params()
