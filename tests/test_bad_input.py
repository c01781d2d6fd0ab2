"""Bad input to BayesianMLPRegressor and BayesianMLPClassifier fails early and clearly.

Every test checks both the exception type and its message: an error that is raised for the
wrong reason (say, a numba typing error deep in a kernel) must not pass. The estimator checks
its data, its own parameters and the prediction arguments before any method runs, so those
cases run once, with one fast method (``VALIDATING_METHOD``); a method's own parameters are
checked by the method, so those cases bring their method. Tiny runs; all random inputs use
fixed seeds.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.exceptions import DataScaleWarning
from skbnn.methods import HMC, NUTS, SWAG, DeepEnsemble, RandomizedMAP
from skbnn.predictive import PredictiveMixture
from skbnn.priors import GaussianPrior

# Tiny runs cannot converge and say so with a ConvergenceWarning on nearly every fit.
# That warning is tested where convergence is (the method tests); here it is only noise.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

ESTIMATORS = [BayesianMLPRegressor, BayesianMLPClassifier]

#: A fresh fast method object, and its number of draws, for each method the cases run for
FAST_METHODS = {
    "nuts": (lambda: NUTS(n_chains=2, n_warmup=30, max_tree_depth=5), 40),
    "ensemble": (lambda: DeepEnsemble(max_iter=20), 3),
    "rms": (lambda: RandomizedMAP(max_iter=20), 3),
    "swag": (lambda: SWAG(max_iter=20, swa_epochs=3, rank=2), 20),
}


#: The method of the cases whose error arises before any method runs: whichever ran, the
#: estimator raises first (before a fit: validate_data, the parameter checks; before a
#: prediction: check_is_fitted and validate_data), so the fastest to fit stands for all.
VALIDATING_METHOD = "ensemble"


def _fast(cls, method_name="nuts", **params):
    make, n_samples = FAST_METHODS[method_name]
    defaults = {
        "hidden_layer_sizes": (3,),
        "method": make(),
        "n_samples": n_samples,
        "random_state": 0,
    }
    return cls(**{**defaults, **params})


def _data(cls, n_rows=20):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_rows, 3))
    y = X[:, 0] + 0.1 * rng.standard_normal(n_rows)
    return (X, y) if cls is BayesianMLPRegressor else (X, (y > 0).astype(int))


@pytest.fixture(scope="module")
def fitted():
    """One fitted estimator of each kind, shared by the prediction tests."""
    return {cls: _fast(cls, VALIDATING_METHOD).fit(*_data(cls)) for cls in ESTIMATORS}


def _prediction_methods(cls):
    if cls is BayesianMLPRegressor:
        return ["predict", "predict_std", "predict_interval", "sample_y"]
    return ["predict", "predict_proba", "predict_log_proba", "predict_std"]


_ALL_PREDICTIONS = [(cls, name) for cls in ESTIMATORS for name in _prediction_methods(cls)]
_IDS = [f"{cls.__name__}.{name}" for cls, name in _ALL_PREDICTIONS]

# --------------------------------------------------------------------------------------
# Non-finite data
# --------------------------------------------------------------------------------------

NON_FINITE = [(np.nan, "Input X contains NaN"), (np.inf, "Input X contains infinity")]


@pytest.mark.parametrize("value, message", NON_FINITE, ids=["nan", "inf"])
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_fit_rejects_non_finite_X(cls, value, message):
    X, y = _data(cls)
    X[3, 1] = value
    with pytest.raises(ValueError, match=message):
        _fast(cls, VALIDATING_METHOD).fit(X, y)


@pytest.mark.parametrize("value, message", NON_FINITE, ids=["nan", "inf"])
@pytest.mark.parametrize("cls, name", _ALL_PREDICTIONS, ids=_IDS)
def test_predict_rejects_non_finite_X(fitted, cls, name, value, message):
    X, _ = _data(cls)
    X[0, 2] = value
    with pytest.raises(ValueError, match=message):
        getattr(fitted[cls], name)(X)


def test_fit_rejects_nan_in_y():
    X, y = _data(BayesianMLPRegressor)
    y[5] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        _fast(BayesianMLPRegressor, VALIDATING_METHOD).fit(X, y)


def test_classifier_rejects_nan_in_y():
    X, y = _data(BayesianMLPRegressor)  # float labels, so a NaN can be put in
    y = (y > 0).astype(float)
    y[5] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        _fast(BayesianMLPClassifier, VALIDATING_METHOD).fit(X, y)


# --------------------------------------------------------------------------------------
# Shapes, sizes and target types
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_features", [2, 4])
@pytest.mark.parametrize("cls, name", _ALL_PREDICTIONS, ids=_IDS)
def test_predict_rejects_wrong_number_of_features(fitted, cls, name, n_features):
    X = np.zeros((4, n_features))
    message = f"X has {n_features} features, but {cls.__name__} is expecting 3 features"
    with pytest.raises(ValueError, match=message):
        getattr(fitted[cls], name)(X)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_fit_rejects_a_single_row(cls):
    X, y = _data(cls)
    message = rf"Found array with 1 sample\(s\).* a minimum of 2 is required by {cls.__name__}"
    with pytest.raises(ValueError, match=message):
        _fast(cls, VALIDATING_METHOD).fit(X[:1], y[:1])


@pytest.mark.parametrize("label", [0, "only"], ids=["int", "str"])
def test_classifier_rejects_a_single_class(label):
    X, _ = _data(BayesianMLPClassifier)
    y = np.full(len(X), label, dtype=object if isinstance(label, str) else int)
    with pytest.raises(ValueError, match="at least 2 classes.* only one class"):
        _fast(BayesianMLPClassifier, VALIDATING_METHOD).fit(X, y)


@pytest.mark.parametrize(
    "make_y",
    [
        pytest.param(lambda n: np.array(["a", "b"] * (n // 2), dtype=object), id="object-array"),
        pytest.param(lambda n: ["a", "b"] * (n // 2), id="list"),
        pytest.param(lambda n: np.array(["a", "b"] * (n // 2)), id="unicode-array"),
    ],
)
def test_regressor_rejects_string_y(make_y):
    X, _ = _data(BayesianMLPRegressor)
    with pytest.raises(ValueError, match="could not convert string to float"):
        _fast(BayesianMLPRegressor, VALIDATING_METHOD).fit(X, make_y(len(X)))


# --------------------------------------------------------------------------------------
# Invalid parameter values: raised by fit, with the parameter's name in the message
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_unknown_method_name_lists_the_valid_names(cls):
    with pytest.raises(ValueError, match="'method' parameter") as excinfo:
        _fast(cls, method="nutz").fit(*_data(cls))
    message = str(excinfo.value)
    assert "'nutz'" in message
    for name in ("'nuts'", "'hmc'", "'ensemble'", "'rms'", "'swag'"):
        assert name in message


INVALID_PARAMS = [
    ({"activation": "softplus"}, r"'activation' parameter.*Got 'softplus'"),
    ({"n_samples": 0}, r"'n_samples' parameter.*\[1, inf\) or None\. Got 0"),
    ({"hidden_layer_sizes": (0,)}, r"hidden_layer_sizes must be a tuple of positive ints.*\(0,\)"),
    ({"hidden_layer_sizes": (-1,)}, r"hidden_layer_sizes must be a tuple of positive ints.*-1"),
    ({"hidden_layer_sizes": (4, 0)}, r"hidden_layer_sizes must be a tuple of positive ints"),
    ({"hidden_layer_sizes": "abc"}, r"'hidden_layer_sizes' parameter.*Got 'abc'"),
    ({"prior": "laplace"}, r"'prior' parameter.*'gaussian'.*Got 'laplace'"),
    ({"prior": GaussianPrior(std=0)}, r"'std' parameter of GaussianPrior.*Got 0"),
]


@pytest.mark.parametrize(
    "params, message", INVALID_PARAMS, ids=[repr(p)[1:-1] for p, _ in INVALID_PARAMS]
)
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_invalid_parameter_values(cls, params, message):
    est = _fast(cls, VALIDATING_METHOD, **params)  # __init__ only stores, it never validates
    with pytest.raises(ValueError, match=message):
        est.fit(*_data(cls))
    assert not hasattr(est, "posterior_")


# The method's own knobs: each case brings its method, which checks them when it runs,
# whichever estimator runs it; so each runs once, on the regressor.
_OPTIMIZERS = [DeepEnsemble, RandomizedMAP, SWAG]
INVALID_METHOD_PARAMS = [
    ({"method": NUTS(target_accept=1.5)}, r"'target_accept' parameter of NUTS.*Got 1\.5"),
    ({"method": NUTS(n_chains=0)}, r"'n_chains' parameter of NUTS.*Got 0"),
    ({"method": HMC(path_length=-1)}, r"'path_length' parameter of HMC.*Got -1"),
    ({"method": NUTS(max_delta_energy=1.0)}, r"'max_delta_energy' parameter of NUTS.*Got 1\.0"),
    ({"method": NUTS(metric="full")}, r"'metric' parameter of NUTS.*'dense'.*Got 'full'"),
    ({"method": SWAG(rank=-1)}, r"'rank' parameter of SWAG.*\[2, inf\)\. Got -1 "),
    ({"method": SWAG(rank=1)}, r"'rank' parameter of SWAG.*\[2, inf\)\. Got 1 "),
    ({"method": SWAG(swa_learning_rate=0)}, r"'swa_learning_rate' parameter of SWAG.*Got 0 "),
    ({"method": SWAG(swa_learning_rate=-1)}, r"'swa_learning_rate' parameter of SWAG.*Got -1 "),
    ({"method": SWAG(covariance="full")}, r"'covariance' parameter of SWAG.*Got 'full'"),
    ({"method": SWAG(n_members=0)}, r"'n_members' parameter of SWAG.*Got 0 "),
    ({"method": SWAG(swa_epochs=0)}, r"'swa_epochs' parameter of SWAG.*Got 0 "),
    ({"method": DeepEnsemble(data_fraction=0)},
     r"'data_fraction' parameter of DeepEnsemble.*\(0\.0, 1\.0\]\. Got 0 "),
    ({"method": DeepEnsemble(data_fraction=1.5)},
     r"'data_fraction' parameter of DeepEnsemble.*\(0\.0, 1\.0\]\. Got 1\.5 "),
    ({"method": DeepEnsemble(batch_size=0)}, r"'batch_size' parameter of DeepEnsemble.*Got 0 "),
    ({"method": DeepEnsemble(validation_fraction=1.0)},
     r"'validation_fraction' parameter of DeepEnsemble.*\(0\.0, 1\.0\)\. Got 1\.0 "),
    ({"method": DeepEnsemble(solver="newton")},
     r"'solver' parameter of DeepEnsemble.*'lbfgs'.*Got 'newton'"),
    *[
        ({"method": cls(learning_rate_init=lr)},
         rf"'learning_rate_init' parameter of {cls.__name__}.*\(0\.0, inf\)\. Got {lr} ")
        for cls in _OPTIMIZERS
        for lr in (0, -1)
    ],
]  # fmt: skip


@pytest.mark.parametrize(
    "params, message",
    INVALID_METHOD_PARAMS,
    ids=[repr(p)[1:-1] for p, _ in INVALID_METHOD_PARAMS],
)
def test_invalid_method_parameter_values(params, message):
    est = _fast(BayesianMLPRegressor, **params)
    with pytest.raises(ValueError, match=message):
        est.fit(*_data(BayesianMLPRegressor))
    assert not hasattr(est, "posterior_")


# Knobs valid on their own that these data cannot honour: the message names the knob.
KNOBS_TOO_BIG_FOR_THE_DATA = [
    # 20 rows x 0.99 rounds to every row held out (a fraction that rounds to no row holds
    # out none: early stopping is the default, and must not fail on a few rows)
    (DeepEnsemble(solver="adam", early_stopping=True, validation_fraction=0.99),
     r"validation_fraction=0\.99 leaves no training rows out of 20"),
    # one collection epoch is one snapshot, and a low-rank covariance needs two
    (SWAG(swa_epochs=1, max_iter=5), r"SWAG collected 1 snapshot.*raise swa_epochs \(1\)"),
]  # fmt: skip


@pytest.mark.parametrize(
    "method, message",
    KNOBS_TOO_BIG_FOR_THE_DATA,
    ids=[repr(m) for m, _ in KNOBS_TOO_BIG_FOR_THE_DATA],
)
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_knobs_the_data_cannot_honour(cls, method, message):
    est = _fast(cls, method=method)
    with pytest.raises(ValueError, match=message):
        est.fit(*_data(cls))
    assert not hasattr(est, "posterior_")


@pytest.mark.parametrize("noise_std", [-1, 0.0], ids=["negative", "zero"])
def test_regressor_rejects_non_positive_noise_std(noise_std):
    est = _fast(BayesianMLPRegressor, VALIDATING_METHOD, noise_std=noise_std)
    with pytest.raises(ValueError, match=rf"'noise_std' parameter.*Got {noise_std}"):
        est.fit(*_data(BayesianMLPRegressor))


# --------------------------------------------------------------------------------------
# Invalid arguments of the prediction methods
# --------------------------------------------------------------------------------------


def test_predict_std_rejects_unknown_kind(fitted):
    X, _ = _data(BayesianMLPRegressor)
    with pytest.raises(ValueError, match="kind must be one of .*'epistemic'.*got 'bogus'"):
        fitted[BayesianMLPRegressor].predict_std(X, kind="bogus")


@pytest.mark.parametrize("coverage", [1.5, 1.0, 0.0, -0.1])
def test_predict_interval_rejects_coverage_outside_unit_interval(fitted, coverage):
    X, _ = _data(BayesianMLPRegressor)
    message = re.escape(f"coverage must be a float in (0, 1), got {coverage!r}")
    with pytest.raises(ValueError, match=message):
        fitted[BayesianMLPRegressor].predict_interval(X, coverage=coverage)


@pytest.mark.parametrize("n_samples", [0, -2, 1.5])
def test_sample_y_rejects_non_positive_n_samples(fitted, n_samples):
    X, _ = _data(BayesianMLPRegressor)
    message = re.escape(f"n_samples must be a positive int, got {n_samples!r}")
    with pytest.raises(ValueError, match=message):
        fitted[BayesianMLPRegressor].sample_y(X, n_samples=n_samples)


# --------------------------------------------------------------------------------------
# Not fitted
# --------------------------------------------------------------------------------------


_UNFITTED = [pytest.param(cls, name, id=f"{cls.__name__}.{name}") for cls, name in _ALL_PREDICTIONS]


@pytest.mark.parametrize("cls, name", _UNFITTED)
def test_predicting_before_fit_raises_not_fitted(cls, name):
    X, _ = _data(cls)
    with pytest.raises(NotFittedError, match=f"This {cls.__name__} instance is not fitted yet"):
        getattr(_fast(cls, VALIDATING_METHOD), name)(X)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_score_before_fit_raises_not_fitted(cls):
    X, y = _data(cls)
    with pytest.raises(NotFittedError, match=f"This {cls.__name__} instance is not fitted yet"):
        _fast(cls, VALIDATING_METHOD).score(X, y)


# --------------------------------------------------------------------------------------
# Data whose scale makes the fit slow: a DataScaleWarning says what to do
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_unscaled_features_warn_and_point_to_standard_scaler(cls):
    X, y = _data(cls)
    X = X * np.array([1.0, 300.0, 1.0]) + np.array([0.0, 0.0, 50.0])
    with pytest.warns(
        DataScaleWarning, match=r"2 feature\(s\).*column 1.*StandardScaler"
    ) as caught:
        _fast(cls).fit(X, y)
    # the pipeline it writes, built as printed around the same estimator, is silent
    (w,) = [w for w in caught if issubclass(w.category, DataScaleWarning)]
    code = re.search(r"(make_pipeline\(StandardScaler\(\), \w+)\(\.\.\.\)\)", str(w.message))
    assert code.group(1).endswith(cls.__name__)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataScaleWarning)
        make_pipeline(StandardScaler(), _fast(cls)).fit(X, y)


def test_features_whose_squares_overflow_warn_with_their_true_scale():
    # 1e200 squared is beyond float64: the warning names the scale, not inf, and numpy
    # has nothing to warn about inside skbnn
    X, y = _data(BayesianMLPRegressor)
    X = X * np.array([1.0, 1e200, 1.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fast(BayesianMLPRegressor).fit(X, y)
    assert not [w for w in caught if w.category is RuntimeWarning], [str(w.message) for w in caught]
    (scale,) = [str(w.message) for w in caught if w.category is DataScaleWarning]
    rms = np.sqrt(np.mean((X[:, 1] / 1e200) ** 2)) * 1e200
    assert f"the largest root mean square is {rms:.3g}, in column 1" in scale


def test_a_prediction_beyond_float64_is_refused_by_its_own_error_alone():
    # a linear network at inputs of 1e300: the predictive's spread overflows. The sd is
    # refused with skbnn's ValueError, the finite mean returned, and numpy says nothing
    X, y = _data(BayesianMLPRegressor)
    reg = BayesianMLPRegressor(hidden_layer_sizes=(), activation="identity", random_state=0,
                               method=DeepEnsemble(max_iter=20))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(X, y)
    far = X * 1e300
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.all(np.isfinite(reg.predict(far)))
        for call in (lambda: reg.predict(far, return_std=True), lambda: reg.predict_std(far)):
            with pytest.raises(ValueError, match="prediction overflows float64"):
                call()


def test_a_mixture_whose_spread_overflows_is_refused_by_its_own_error_alone():
    # Two components whose own moments are finite, with means 4e154 apart: the variance of
    # the mixture (4e308) is beyond float64. The mixture refuses it as a component does
    X, y = _data(BayesianMLPRegressor)
    fits = []
    for shift in (2e154, -2e154):
        reg = BayesianMLPRegressor(hidden_layer_sizes=(), activation="identity", random_state=0,
                                   method=DeepEnsemble(max_iter=20))  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.append(reg.fit(X, 1e152 * (y - y.mean()) / y.std() + shift).predictive_)
    mixture = PredictiveMixture(fits, [0.5, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for p in fits:  # each component alone is within float64
            assert all(np.all(np.isfinite(a)) for a in p.moments(X[:5]))
        assert np.all(np.isfinite(mixture.mean(X[:5])))
        calls = (mixture.moments, lambda X: mixture.mean(X, return_std=True), mixture.std)
        for call in calls:
            with pytest.raises(ValueError, match="prediction overflows float64"):
                call(X[:5])


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_standardized_and_binary_features_do_not_warn(cls):
    X, y = _data(cls)
    X = np.column_stack([X, np.random.default_rng(1).integers(0, 2, len(X))])  # a 0/1 feature
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataScaleWarning)
        _fast(cls).fit(X, y)


def test_a_constant_target_warns_and_predicts_the_constant():
    X, _ = _data(BayesianMLPRegressor)
    y = np.column_stack([np.full(len(X), 7.5), X[:, 0]])
    with pytest.warns(DataScaleWarning, match=r"y is constant \(output\(s\) \[0\]\)") as caught:
        reg = _fast(BayesianMLPRegressor).fit(X, y)
    # the data pin f to the constant within about the inferred noise sd (0.011 over five
    # seeds here; the predictions were within 0.0075): 0.1 is nine such sds
    assert np.allclose(reg.predict(X)[:, 0], 7.5, atol=0.1)
    # the fix as printed: a fixed noise sd, which cannot shrink, and no warning
    (w,) = [w for w in caught if issubclass(w.category, DataScaleWarning)]
    noise_std = float(re.search(r"noise_std=(\d+(?:\.\d+)?)", str(w.message)).group(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataScaleWarning)
        reg = _fast(BayesianMLPRegressor, noise_std=noise_std).fit(X, y)
    assert np.allclose(reg.predict(X)[:, 0], 7.5, atol=0.1)
