"""``method="auto"``: the method it runs follows from the problem's size alone, and the
fitted estimator says which ran."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, load_iris

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import MCLMC, NUTS, SGHMC, DeepEnsemble
from skbnn.methods._auto import (
    AUTO_MCLMC,
    MCLMC_MAX_WORK,
    MCLMC_MIN_ROWS,
    NUTS_MAX_WORK,
    SGHMC_MIN_ROWS,
    auto_knob_message,
    resolve,
)


def test_the_rule_is_rows_times_parameters_for_regression_and_rows_for_classes():
    # deterministic: each threshold's two sides, and no timing involved
    assert isinstance(resolve(NUTS_MAX_WORK // 100, 100, 1, "regression"), NUTS)
    assert isinstance(resolve(NUTS_MAX_WORK // 100 + 1, 100, 1, "regression"), MCLMC)
    assert isinstance(resolve(MCLMC_MAX_WORK // 100, 100, 1, "regression"), MCLMC)
    assert isinstance(resolve(MCLMC_MAX_WORK // 100 + 1, 100, 1, "regression"), DeepEnsemble)
    # past NUTS's size on few rows (a wide network), the ensemble
    assert isinstance(resolve(MCLMC_MIN_ROWS, 1_000, 1, "regression"), MCLMC)
    assert isinstance(resolve(MCLMC_MIN_ROWS - 1, 1_000, 1, "regression"), DeepEnsemble)
    # regression never goes to SGHMC, however many rows
    assert isinstance(resolve(10**7, 100, 1, "regression"), DeepEnsemble)
    # the regression ensemble lets its held-out rows choose the noise; a classifier's has none
    assert resolve(10**7, 100, 1, "regression").noise_df == "auto"
    assert resolve(10, 10, 2, "classification").noise_df is None
    assert isinstance(resolve(10, 10, 2, "classification"), DeepEnsemble)
    assert isinstance(resolve(SGHMC_MIN_ROWS - 1, 10**5, 2, "classification"), DeepEnsemble)
    assert isinstance(resolve(SGHMC_MIN_ROWS, 10, 10, "classification"), SGHMC)
    # classification never goes to MCLMC, whatever its size
    assert not isinstance(resolve(NUTS_MAX_WORK // 100 + 1, 100, 2, "classification"), MCLMC)


def test_past_nuts_size_auto_runs_a_chain_in_each_of_eight_optima():
    # deterministic: the knobs measured (doc/choosing.md), each chain from an optimum of
    # its own, and a method object as a user writes it
    method = resolve(NUTS_MAX_WORK // 100 + 1, 100, 1, "regression")
    assert method.get_params() == {**MCLMC().get_params(), **AUTO_MCLMC}
    assert method.n_modes == method.n_chains == 8
    assert "MCLMC" in auto_knob_message("method__n_warmup", 10)
    # a noise per row where the noise is inferred, as the ensemble's; one where it is given
    assert method.likelihood("gaussian", infer_noise=True) == "heteroscedastic"
    assert method.likelihood("gaussian", infer_noise=False) == "gaussian"


@pytest.mark.parametrize(
    "rows, hidden, expected",
    [(442, (10,), NUTS), (2_100, (10,), MCLMC), (42_000, (10,), DeepEnsemble)],
    ids=["small", "middle", "large"],
)
def test_the_fitted_estimator_records_what_auto_ran(rows, hidden, expected):
    # deterministic: with 10 units, 442 x 121 rows x parameters is within NUTS's bound;
    # 2,100 rows of 10 (2,100 x 121) just past it, within MCLMC's; 42,000 rows of 10
    # (42,000 x 121) past both. The method object that ran is a fitted attribute, and the
    # constructor's parameter stays "auto". Two ensemble members are enough to say so
    from sklearn.datasets import make_regression

    if rows == 442:
        X, y = load_diabetes(return_X_y=True)
    else:
        X, y = make_regression(rows, 10, noise=1.0, random_state=0)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    n_samples = 2 if expected is DeepEnsemble else 8
    est = BayesianMLPRegressor(hidden, n_samples=n_samples, random_state=0).fit(X, y)
    assert type(est.method_) is expected and est.method == "auto"
    assert np.all(np.isfinite(est.predict(X[:5])))
    # the ensemble says which noise its held-out rows chose
    assert ("noise" in est.diagnostics_) == (expected is DeepEnsemble)
    # past NUTS's size, the noise of every row, as the ensemble predicts it
    assert est.posterior_.heteroscedastic == (expected is not NUTS)


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
