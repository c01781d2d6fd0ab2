"""The ONNX export (``skbnn.onnx.to_onnx``): onnxruntime's outputs are the estimator's
predictions, for every method, regression and classification, alone and in a Pipeline."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline as sk_make_pipeline
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import (
    HMC,
    LBBNN,
    MALA,
    MAMS,
    MCLMC,
    NUTS,
    SGHMC,
    SMC,
    SWAG,
    AdaptiveMetropolis,
    DeepEnsemble,
    Laplace,
    RandomizedMAP,
    VariationalInference,
)
from skbnn.model_selection import BayesianModelAverage
from skbnn.pipeline import make_pipeline

onnx = pytest.importorskip("onnx")
pytest.importorskip("skl2onnx")
ort = pytest.importorskip("onnxruntime")
from skbnn.onnx import to_onnx  # noqa: E402 - after the skips

pytestmark = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning", "ignore::skbnn.exceptions.SlowFitWarning"
)

#: float64 graphs compute what the estimator does in another order: rounding only
RTOL = 1e-5

#: One tiny configuration per method and per way a posterior predicts: draws of every
#: sampler, weighted SMC particles, ensembles (heteroscedastic ones predict the noise per
#: row, a Gaussian's or a Student-t's), Gaussians drawn on demand, spike-and-slab draws,
#: and the Laplace variants (the linearized predictive under each covariance, on all
#: layers or the last, and its draws)
METHODS = {
    "nuts": lambda: NUTS(n_chains=2, n_warmup=30, max_tree_depth=4),
    "nuts_modes": lambda: NUTS(
        n_chains=4, n_warmup=30, max_tree_depth=4, n_modes=2, mode_weights="stacking"
    ),
    "nuts_hetero": lambda: NUTS(n_chains=2, n_warmup=30, max_tree_depth=4, heteroscedastic=True),
    "nuts_student": lambda: NUTS(
        n_chains=2, n_warmup=30, max_tree_depth=4, heteroscedastic=True, noise_df=4.0
    ),
    "hmc": lambda: HMC(n_chains=2, n_warmup=30),
    "mala": lambda: MALA(n_chains=2, n_warmup=60),
    "amcmc": lambda: AdaptiveMetropolis(n_chains=2, n_warmup=200, variant="diagonal"),
    "mclmc": lambda: MCLMC(n_chains=2, n_warmup=60),
    "mams": lambda: MAMS(n_chains=2, n_warmup=60),
    "smc": lambda: SMC(n_mcmc_steps=2),
    "sghmc": lambda: SGHMC(n_chains=2, max_iter=50),
    "ensemble": lambda: DeepEnsemble(max_iter=50),
    "ensemble_hetero": lambda: DeepEnsemble(max_iter=50, heteroscedastic=True),
    "ensemble_student": lambda: DeepEnsemble(max_iter=50, noise_df=3.0),
    "rms": lambda: RandomizedMAP(max_iter=50),
    "swag": lambda: SWAG(max_iter=50, swa_epochs=5, rank=3),
    "laplace": lambda: Laplace(max_iter=50),
    "laplace_diag": lambda: Laplace(max_iter=50, hessian="diag"),
    "laplace_kron": lambda: Laplace(max_iter=50, hessian="kron"),
    "laplace_last": lambda: Laplace(max_iter=50, subset="last_layer"),
    "laplace_mc": lambda: Laplace(max_iter=50, predictive="mc"),
    "laplace_link_mc": lambda: Laplace(max_iter=50, link_approx="mc"),
    "vi": lambda: VariationalInference(max_iter=100, learning_rate_init=0.01),
    "lbbnn": lambda: LBBNN(max_iter=100, learning_rate_init=0.01),
    "lbbnn_median": lambda: LBBNN(max_iter=100, learning_rate_init=0.01, model="median"),
    "lbbnn_flow": lambda: LBBNN(
        max_iter=100, learning_rate_init=0.01, posterior="flow", flow_hidden=4
    ),
    "lbbnn_lowrank": lambda: LBBNN(
        max_iter=100, learning_rate_init=0.01, posterior="lowrank", rank=2
    ),
}
#: methods whose likelihood only a regressor has
REGRESSION_ONLY = {"nuts_hetero", "nuts_student", "ensemble_hetero", "ensemble_student"}
#: where a configuration means nothing to one task (a regressor has no link)
CLASSIFICATION_ONLY = {"laplace_link_mc"}


def _fast(cls, name, **params):
    n_samples = 3 if name.startswith(("ensemble", "rms")) else 20
    params = {
        "hidden_layer_sizes": (5,),
        "method": METHODS[name](),
        "n_samples": n_samples,
        "random_state": 0,
        **params,
    }
    return cls(**params)


def _data(n=40, n_features=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_features))
    f = np.tanh(X[:, 0]) + 0.5 * X[:, 1]
    return X, f, rng


def _regression(n_outputs=1, seed=0):
    """Targets far from zero mean and unit scale, so the units show."""
    X, f, rng = _data(seed=seed)
    y = 10.0 + 3.0 * f + 0.3 * rng.standard_normal(len(f))
    if n_outputs == 2:
        y = np.column_stack([y, -200.0 + 50.0 * f + 5.0 * rng.standard_normal(len(f))])
    return X, y


def _classification(n_classes=2, seed=0):
    X, f, rng = _data(seed=seed)
    return X, np.digitize(f + 0.2 * rng.standard_normal(len(f)), [-0.5, 0.5][: n_classes - 1])


def _run(model, X, dtype=np.float64, **kwargs):
    session = ort.InferenceSession(to_onnx(model, X, dtype=dtype, **kwargs).SerializeToString())
    return session.run(None, {"X": np.asarray(X, dtype=dtype)})


def _check_regressor(model, X, n_outputs=1, rtol=RTOL):
    mean, std = _run(model, X)
    expected_mean, expected_std = model.predict(X, return_std=True)
    assert mean.shape == std.shape == (len(X), n_outputs)
    shape = mean.shape if n_outputs > 1 else (len(X),)
    np.testing.assert_allclose(mean.reshape(shape), expected_mean, rtol=rtol)
    np.testing.assert_allclose(std.reshape(shape), expected_std, rtol=rtol)


def _check_classifier(model, X, rtol=RTOL):
    label, proba = _run(model, X)
    np.testing.assert_allclose(proba, model.predict_proba(X), rtol=rtol)
    np.testing.assert_array_equal(label, model.predict(X))


@pytest.mark.parametrize("name", sorted(set(METHODS) - CLASSIFICATION_ONLY))
def test_a_regressors_graph_gives_its_mean_and_std(name):
    X, y = _regression()
    est = _fast(BayesianMLPRegressor, name).fit(X, y)
    X_new, _ = _regression(seed=1)
    _check_regressor(est, X_new)


@pytest.mark.parametrize("name", sorted(set(METHODS) - REGRESSION_ONLY))
@pytest.mark.parametrize("n_classes", [2, 3])
def test_a_classifiers_graph_gives_its_labels_and_probabilities(name, n_classes):
    X, y = _classification(n_classes)
    est = _fast(BayesianMLPClassifier, name).fit(X, y)
    X_new, _ = _classification(n_classes, seed=1)
    _check_classifier(est, X_new)


@pytest.mark.parametrize("name", ["nuts", "laplace", "laplace_kron", "ensemble_hetero"])
def test_every_output_of_a_multi_output_regressor(name):
    X, y = _regression(n_outputs=2)
    est = _fast(BayesianMLPRegressor, name).fit(X, y)
    _check_regressor(est, _regression(n_outputs=2, seed=1)[0], n_outputs=2)


@pytest.mark.parametrize("activation", ["identity", "relu", "tanh", "logistic"])
@pytest.mark.parametrize("name", ["nuts", "laplace"])
def test_every_activation_and_two_hidden_layers(activation, name):
    X, y = _regression()
    est = _fast(BayesianMLPRegressor, name, hidden_layer_sizes=(4, 3), activation=activation).fit(
        X, y
    )
    _check_regressor(est, _regression(seed=1)[0])


@pytest.mark.parametrize("hidden", [(), (5,), (4, 3)])
def test_draws_beyond_one_group_of_the_graph(hidden):
    # 300 draws: more than one group of at most 512 units of the widest layer
    X, y = _classification(3)
    clf = _fast(BayesianMLPClassifier, "nuts", hidden_layer_sizes=hidden, n_samples=300)
    _check_classifier(clf.fit(X, y), X)
    X, y = _regression()
    reg = _fast(BayesianMLPRegressor, "nuts", hidden_layer_sizes=hidden, n_samples=300)
    _check_regressor(reg.fit(X, y), X)


@pytest.mark.parametrize("name", ["nuts", "laplace"])
def test_no_hidden_layer(name):
    X, y = _classification(3)
    est = _fast(BayesianMLPClassifier, name, hidden_layer_sizes=()).fit(X, y)
    _check_classifier(est, _classification(3, seed=1)[0])


def test_a_fixed_noise_is_in_the_std():
    X, y = _regression()
    est = _fast(BayesianMLPRegressor, "nuts", noise_std=0.5).fit(X, y)
    _check_regressor(est, _regression(seed=1)[0])


def test_float_labels_come_back_as_floats():
    X, y = _classification(3)
    est = _fast(BayesianMLPClassifier, "ensemble").fit(X, np.array([-1.0, 2.0, 3.0])[y])
    label, _ = _run(est, X)
    assert label.dtype == np.float64
    np.testing.assert_array_equal(label, est.predict(X))


def test_string_labels_come_back_as_strings():
    X, y = _classification(3)
    est = _fast(BayesianMLPClassifier, "ensemble").fit(X, np.array(["a", "b", "c"])[y])
    label, _ = _run(est, X)
    assert label.dtype.kind in "OU"
    np.testing.assert_array_equal(label, est.predict(X))


@pytest.mark.parametrize("pipeline", [sk_make_pipeline, make_pipeline])
@pytest.mark.parametrize("name", ["nuts", "laplace"])
def test_a_pipeline_converts_its_scaler_with_skl2onnx(pipeline, name):
    X, y = _regression()
    X = 50.0 + 10.0 * X
    reg = pipeline(StandardScaler(), _fast(BayesianMLPRegressor, name)).fit(X, y)
    _check_regressor(reg, X)
    Xc, yc = _classification(3)
    clf = pipeline(StandardScaler(), _fast(BayesianMLPClassifier, name)).fit(Xc, yc)
    _check_classifier(clf, Xc)


def test_the_graph_is_named_and_typed_as_documented():
    X, y = _regression()
    est = _fast(BayesianMLPRegressor, "ensemble").fit(X, y)
    model = to_onnx(est, X)
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == ["X"]
    assert [o.name for o in model.graph.output] == ["mean", "std"]
    double = onnx.TensorProto.DOUBLE
    assert {o.type.tensor_type.elem_type for o in model.graph.output} == {double}
    X, y = _classification()
    clf = _fast(BayesianMLPClassifier, "ensemble").fit(X, y)
    assert [o.name for o in to_onnx(clf, X).graph.output] == ["label", "probabilities"]


@pytest.mark.parametrize("name", ["nuts", "laplace"])
def test_a_float32_graph_agrees_to_single_precision(name):
    X, y = _regression()
    est = _fast(BayesianMLPRegressor, name).fit(X, y)
    mean, std = _run(est, X, dtype=np.float32)
    assert mean.dtype == std.dtype == np.float32
    expected_mean, expected_std = est.predict(X, return_std=True)
    np.testing.assert_allclose(mean[:, 0], expected_mean, rtol=1e-4)
    np.testing.assert_allclose(std[:, 0], expected_std, rtol=1e-4)
    X, y = _classification(3)
    clf = _fast(BayesianMLPClassifier, name).fit(X, y)
    _, proba = _run(clf, X, dtype=np.float32)
    assert proba.dtype == np.float32
    # float32 keeps no probability below its smallest normal number, 1e-38
    np.testing.assert_allclose(proba, clf.predict_proba(X), rtol=1e-4, atol=1e-30)


def test_an_unfitted_estimator_is_a_not_fitted_error():
    X, _ = _regression()
    with pytest.raises(NotFittedError):
        to_onnx(BayesianMLPRegressor(), X)
    with pytest.raises(NotFittedError):
        to_onnx(sk_make_pipeline(StandardScaler(), BayesianMLPClassifier()), X)


def test_a_model_of_another_kind_is_a_type_error():
    X, y = _regression()
    with pytest.raises(TypeError, match="LinearRegression"):
        to_onnx(LinearRegression().fit(X, y), X)
    with pytest.raises(TypeError, match="LinearRegression"):
        to_onnx(sk_make_pipeline(StandardScaler(), LinearRegression()).fit(X, y), X)
    grid = {"hidden_layer_sizes": [(), (2,)]}
    average = BayesianModelAverage(_fast(BayesianMLPRegressor, "laplace"), grid)
    with pytest.raises(TypeError, match="BayesianModelAverage"):
        to_onnx(average.fit(X, y), X)


def test_a_posterior_that_predicts_otherwise_is_not_implemented():
    from skbnn.posterior import WeightedDraws

    class Tempered(WeightedDraws):
        def components(self, net, X, n_targets):  # pragma: no cover - never run
            yield from super().components(net, X, n_targets)

    X, y = _regression()
    est = _fast(BayesianMLPRegressor, "ensemble").fit(X, y)
    p = est.posterior_
    est.posterior_ = Tempered(p.thetas, noise_precision=p.noise_precision)
    with pytest.raises(NotImplementedError, match="Tempered"):
        to_onnx(est, X)


def test_bad_arguments_are_value_errors():
    X, y = _regression()
    est = _fast(BayesianMLPRegressor, "ensemble").fit(X, y)
    with pytest.raises(ValueError, match="features"):
        to_onnx(est, X[:, :2])
    with pytest.raises(ValueError, match="dtype"):
        to_onnx(est, X, dtype=np.int64)
    with pytest.raises(ValueError, match="2-D"):
        to_onnx(est, X[0])


def test_skbnn_does_not_import_onnx():
    """onnx and skl2onnx are an optional extra (``skbnn[onnx]``), imported by a conversion."""
    code = (
        "import sys, skbnn, skbnn.methods, skbnn.pipeline, skbnn.onnx; "
        "assert not {'onnx', 'skl2onnx', 'onnxruntime'} & set(sys.modules), 'imported onnx'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
