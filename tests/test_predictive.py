"""The fitted predictive (``predictive_``): it predicts by itself, pickles, gives the
estimator's bits, and a model average's is a mixture of its candidates'."""

import ast
import copy
import pathlib
import pickle

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import skbnn
from skbnn import BayesianMLPClassifier, BayesianMLPRegressor, Predictive, PredictiveMixture
from skbnn.methods import NUTS, DeepEnsemble, Laplace
from skbnn.model_selection import BayesianModelAverage, log_predictive_scorer
from skbnn.posterior import WeightedDraws

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: a sampler's draws, a linearized Gaussian, heteroscedastic members
METHODS = {
    "nuts": lambda: NUTS(n_chains=2, n_warmup=30, max_tree_depth=4),
    "laplace": lambda: Laplace(max_iter=50),
    "ensemble": lambda: DeepEnsemble(max_iter=50, heteroscedastic=True),
}


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


def _regressor_outputs(est, X, y) -> dict:
    mean, std = est.predict(X, return_std=True)
    out = {"mean": mean, "std": std, "sample_y": est.sample_y(X, 4, random_state=1)}
    for kind in ("epistemic", "aleatoric"):
        out[kind] = est.predict_std(X, kind=kind)
    out["lower"], out["upper"] = est.predict_interval(X, coverage=0.8)
    out["means"], out["stds"], out["weights"] = est.predict_mixture(X)
    out["lpd"] = np.array(log_predictive_scorer(est, X, y))
    return out


def _predictive_outputs(predictive, X, y) -> dict:
    """What :func:`_regressor_outputs` gets from the estimator, from the predictive alone
    (one target: the estimator squeezes its second axis)."""
    mean, std = predictive.mean(X, return_std=True)
    out = {"mean": mean[:, 0], "std": std[:, 0]}
    out["sample_y"] = predictive.sample_y(X, 4, random_state=1)[:, 0]
    for kind in ("epistemic", "aleatoric"):
        out[kind] = predictive.std(X, kind=kind)[:, 0]
    lower, upper = predictive.interval(X, coverage=0.8)
    out["lower"], out["upper"] = lower[:, 0], upper[:, 0]
    means, stds, out["weights"] = predictive.mixture(X)
    out["means"], out["stds"] = means[:, 0], stds[:, 0]
    out["lpd"] = np.array(np.mean(predictive.log_predictive_density(X, y)))
    return out


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("name", METHODS)
def test_a_regressors_predictive_predicts_alone_the_estimators_bits(name):
    X, y = _data()
    X_new, y_new = _data(9, seed=1)
    est = BayesianMLPRegressor((3,), method=METHODS[name](), n_samples=20, random_state=0)
    est.fit(X, y)
    assert isinstance(est.predictive_, Predictive)
    assert est.predictive_.posterior is est.posterior_
    expected = _regressor_outputs(est, X_new, y_new)
    predictive = pickle.loads(pickle.dumps(est.predictive_))
    del est
    _assert_same(_predictive_outputs(predictive, X_new, y_new), expected)


def test_the_predictives_moments_are_the_estimators_in_the_units_of_y():
    X, y = _data()
    est = BayesianMLPRegressor((3,), method=METHODS["nuts"](), n_samples=20, random_state=0)
    est.fit(X, 100 + 50 * y)
    mean, epistemic, aleatoric = est.predictive_.moments(X)
    np.testing.assert_allclose(mean[:, 0], est.predict(X), rtol=1e-12)
    np.testing.assert_allclose(
        np.sqrt(epistemic[:, 0]), est.predict_std(X, "epistemic"), rtol=1e-12
    )
    np.testing.assert_allclose(
        np.sqrt(aleatoric[:, 0]), est.predict_std(X, "aleatoric"), rtol=1e-12
    )


@pytest.mark.statistical
def test_function_draws_are_the_networks_output_over_the_posterior(seed):
    X, y = _data()
    est = BayesianMLPRegressor((3,), method=METHODS["nuts"](), n_samples=40, random_state=seed)
    est.fit(X, y)
    draws = est.predictive_.function_draws(X[:5], 4000, random_state=seed)
    assert draws.shape == (5, 1, 4000)
    # the draws pick posterior draws at random: their mean is within its Monte Carlo error
    se = est.predict_std(X[:5], kind="epistemic") / np.sqrt(4000)
    assert np.all(np.abs(draws[:, 0].mean(axis=1) - est.predict(X[:5])) < 5 * se + 1e-12)
    # sample_y adds the noise to the same functions
    noisy = est.predictive_.sample_y(X[:5], 4000, random_state=seed)
    noise_sd = np.std(noisy - draws, axis=-1)[:, 0]
    np.testing.assert_allclose(noise_sd, est.predict_std(X[:5], kind="aleatoric"), rtol=0.1)


def test_per_draw_predictives_average_to_the_predictive():
    X, y = _data()
    est = BayesianMLPRegressor((3,), method=METHODS["nuts"](), n_samples=20, random_state=0)
    est.fit(X, 3 * y + 1)
    w = est.posterior_.normalized_weights()
    ((rows, mean, sd),) = est.predictive_.per_draw(X)
    assert rows == slice(0, len(X)) and mean.shape == sd.shape == (20, 1, len(X))
    np.testing.assert_allclose(np.einsum("s,skn->nk", w, mean)[:, 0], est.predict(X), rtol=1e-12)
    ((_, mean2, _),) = est.predictive_.per_draw(X, index=np.array([3, 7]))
    np.testing.assert_array_equal(mean2, mean[[3, 7]])


@pytest.mark.parametrize("name", ["nuts", "laplace"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_a_classifiers_predictive_predicts_alone_the_estimators_bits(name, n_classes):
    X, _ = _data(45)
    labels = np.array(["a", "b", "c"])[np.digitize(X[:, 0], [-0.4, 0.4][: n_classes - 1])]
    est = BayesianMLPClassifier((3,), method=METHODS[name](), n_samples=20, random_state=0)
    est.fit(X, labels)
    expected = {"proba": est.predict_proba(X), "std": est.predict_std(X),
                "lpd": np.array(log_predictive_scorer(est, X, labels))}  # fmt: skip
    for kind in ("total", "epistemic", "aleatoric"):
        expected[kind] = est.predict_entropy(X, kind=kind)
    predictive = pickle.loads(pickle.dumps(est.predictive_))
    del est
    proba, std = predictive.class_probabilities(X)
    got = {"proba": proba, "std": std,
           "lpd": np.array(np.mean(predictive.log_predictive_density(X, labels)))}  # fmt: skip
    for kind in ("total", "epistemic", "aleatoric"):
        got[kind] = predictive.entropy(X, kind=kind)
    _assert_same(got, expected)
    np.testing.assert_array_equal(predictive.classes, np.unique(labels))
    with pytest.raises(TypeError, match="class probabilities and entropies"):
        predictive.moments(X)
    with pytest.raises(ValueError, match="labels not seen"):
        predictive.log_predictive_density(X[:1], ["z"])


def test_a_predictive_refuses_inputs_of_another_width_and_the_other_task():
    X, y = _data()
    est = BayesianMLPRegressor((2,), method=METHODS["laplace"](), random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"shape \(n_samples, 2\)"):
        est.predictive_.mean(X[:, :1])
    with pytest.raises(TypeError, match="no class probabilities"):
        est.predictive_.class_probabilities(X)
    with pytest.raises(ValueError, match="y_mean and y_std, or a classifier's classes"):
        Predictive(est.posterior_, est.predictive_.layout, 0)
    assert "Predictive(2-2-1 network, 1 target(s)" in repr(est.predictive_)


def test_a_pickle_keeps_one_posterior_and_predicts_the_same_bits():
    X, y = _data()
    est = BayesianMLPRegressor((3,), method=METHODS["laplace"](), random_state=0).fit(X, y)
    loaded = pickle.loads(pickle.dumps(est))
    assert loaded.predictive_.posterior is loaded.posterior_
    _assert_same(_regressor_outputs(loaded, X, y), _regressor_outputs(est, X, y))


@pytest.mark.parametrize("cls", [BayesianMLPRegressor, BayesianMLPClassifier])
def test_a_pickle_from_before_the_predictive_unpickles_into_it(cls):
    X, y = _data()
    target = y if cls is BayesianMLPRegressor else (y > 0).astype(int)
    est = cls((3,), method=METHODS["laplace"](), random_state=0).fit(X, target)
    # the state such a pickle held: the predictive's parts among the estimator's privates
    state = est.__getstate__()
    predictive = state.pop("predictive_")
    state["posterior_"] = predictive.posterior
    state["_layout"], state["_act"] = predictive.layout, predictive.activation
    if cls is BayesianMLPRegressor:
        state["_y_mean"], state["_y_std"] = predictive.y_mean, predictive.y_std
    old = cls.__new__(cls)
    old.__setstate__(state)
    assert not {"posterior_", "_layout", "_act", "_y_mean", "_y_std"} & set(vars(old))
    assert old.posterior_ is old.predictive_.posterior
    method = "predict_interval" if cls is BayesianMLPRegressor else "predict_proba"
    np.testing.assert_array_equal(getattr(old, method)(X), getattr(est, method)(X))


def test_setting_the_posterior_sets_the_predictives():
    X, y = _data()
    est = BayesianMLPRegressor((3,), method=METHODS["nuts"](), n_samples=20, random_state=0)
    est.fit(X, y)
    before = est.predictive_
    one = WeightedDraws(
        est.posterior_.thetas[:1], noise_precision=est.posterior_.noise_precision[:1]
    )
    est.posterior_ = one
    assert est.predictive_.posterior is one and before.posterior is not one
    ((_, mean, _),) = before.per_draw(X, index=np.array([0]))
    np.testing.assert_array_equal(est.predict(X), mean[0, 0])


def _average(pipeline=False):
    X, y = _data(60)
    est = BayesianMLPRegressor(method="laplace", random_state=0)
    grid = {"hidden_layer_sizes": [(2,), (3,)]}
    if pipeline:
        est = make_pipeline(StandardScaler(), est)
        grid = {"bayesianmlpregressor__" + k: v for k, v in grid.items()}
        X = 3 * X + 1
    return BayesianModelAverage(est, grid).fit(X, y), X, y


@pytest.mark.parametrize("pipeline", [False, True])
def test_a_model_averages_predictive_is_a_mixture_of_its_candidates(pipeline):
    bma, X, y = _average(pipeline)
    mixture = bma.predictive_
    assert isinstance(mixture, PredictiveMixture)
    fitted, weights = bma._weighted()
    finals = [e[-1] if pipeline else e for e in fitted]
    assert all(p is f.predictive_ for p, f in zip(mixture.predictives, finals, strict=True))
    np.testing.assert_array_equal(mixture.weights, weights)
    # the inputs as each candidate sees them: the same array without Pipelines
    inputs = [e[:-1].transform(X) for e in fitted] if pipeline else X
    expected = _regressor_outputs(bma, X, y)
    alone = pickle.loads(pickle.dumps(mixture))
    del bma
    _assert_same(_predictive_outputs(alone, inputs, y), expected)


def test_a_mixture_of_one_predictive_is_that_predictive():
    X, y = _data()
    est = BayesianMLPRegressor((3,), method=METHODS["nuts"](), n_samples=20, random_state=0)
    est.fit(X, y)
    one = PredictiveMixture([est.predictive_], [1.0])
    for a, b in zip(one.moments(X), est.predictive_.moments(X), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(one.std(X), est.predictive_.std(X), rtol=1e-14)
    # (the weights are renormalized: to the last bit)
    for a, b in zip(one.mixture(X), est.predictive_.mixture(X), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-15)
    np.testing.assert_allclose(one.interval(X), est.predictive_.interval(X), rtol=1e-12)
    draws = one.function_draws(X, 3, random_state=0)
    assert draws.shape == (len(X), 1, 3)
    with pytest.raises(ValueError, match="sum to one"):
        PredictiveMixture([est.predictive_], [0.5])
    with pytest.raises(ValueError, match="one per component"):
        one.mean([X, X])


def test_a_classifier_averages_predictive_mixes_probabilities_and_entropies():
    X, y = _data(60)
    bma = BayesianModelAverage(
        BayesianMLPClassifier(method="laplace", random_state=0),
        {"hidden_layer_sizes": [(), (2,)]},
    ).fit(X, y > 0)
    proba, std = bma.predictive_.class_probabilities(X)
    np.testing.assert_array_equal(proba, bma.predict_proba(X))
    np.testing.assert_array_equal(std, bma.predict_std(X))
    for kind in ("total", "epistemic", "aleatoric"):
        np.testing.assert_array_equal(
            bma.predictive_.entropy(X, kind), bma.predict_entropy(X, kind)
        )
    np.testing.assert_array_equal(bma.predictive_.classes, [False, True])


def _estimator_private_names() -> set:
    """The private attributes and methods the estimators define or set on themselves."""
    tree = ast.parse((pathlib.Path(skbnn.__file__).parent / "estimators.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("_"):
            names.add(node.name)
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "self" and node.attr.startswith("_")):  # fmt: skip
            names.add(node.attr)
    return {n for n in names if not n.startswith("__")}


def test_no_other_module_reads_the_estimators_private_attributes():
    # what predicts goes through predictive_; the one stated exception is the evidence
    # scorers' check of the data an evidence is of
    allowed = {"_evidence_data"}
    names = _estimator_private_names() - allowed
    assert {"_run", "_squeeze"} <= names
    root = pathlib.Path(skbnn.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "estimators.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in names:
                own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
                if not own:
                    found.append(f"{path.name}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert not found


def test_the_band_plot_draws_a_networks_functions_from_its_predictive():
    pytest.importorskip("matplotlib")
    import matplotlib

    from skbnn.metrics import PredictiveBandDisplay

    matplotlib.use("Agg")
    X, y = _data()
    est = BayesianMLPRegressor((3,), method=METHODS["laplace"](), random_state=0)
    est.fit(X[:, :1], y)
    grid = np.linspace(-2, 2, 9)[:, None]
    disp = PredictiveBandDisplay.from_estimator(est, grid, n_draws=3, random_state=2)
    draws = est.predictive_.function_draws(grid, 3, random_state=2)
    np.testing.assert_array_equal(disp.f_draws, draws[:, 0, :].T)
    # a model average has no single network to draw, and says so
    bma = BayesianModelAverage(est, {"hidden_layer_sizes": [(), (2,)]}).fit(X[:, :1], y)
    disp = PredictiveBandDisplay.from_estimator(bma, grid, n_draws=0)
    np.testing.assert_array_equal(disp.y_mean, bma.predict(grid))
    with pytest.raises(ValueError, match="pass n_draws=0"):
        PredictiveBandDisplay.from_estimator(bma, grid, n_draws=2)
    matplotlib.pyplot.close("all")


def test_a_model_average_pickled_before_the_predictive_unpickles_into_it():
    bma, X, y = _average()
    state = dict(copy.deepcopy(bma).__getstate__())
    for est in state["estimators_"]:
        # as those pickles held them (see the estimators' test above)
        predictive = est.__dict__.pop("predictive_")
        est.__dict__.update(posterior_=predictive.posterior, _layout=predictive.layout,
                            _act=predictive.activation, _y_mean=predictive.y_mean,
                            _y_std=predictive.y_std)  # fmt: skip
    del state["predictive_"]
    old = pickle.loads(pickle.dumps(_Pickled(BayesianModelAverage, state)))
    np.testing.assert_array_equal(old.predict_interval(X)[0], bma.predict_interval(X)[0])


class _Pickled:
    """Pickles as an instance of ``cls`` with ``state``, as an older skbnn wrote it."""

    def __init__(self, cls, state):
        self.cls, self.state = cls, state

    def __reduce__(self):
        return (self.cls.__new__, (self.cls,), self.state)
