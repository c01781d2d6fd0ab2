"""Persistence: a pickled fitted estimator predicts the same bits in a fresh process, and a
pickle from another skbnn version warns as scikit-learn's own estimators do."""

import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import sklearn.exceptions
from sklearn.datasets import load_iris

import skbnn
from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.exceptions import InconsistentVersionWarning
from skbnn.methods import NUTS, SMC, DeepEnsemble, Laplace, VariationalInference

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: one of each way a posterior predicts: draws of a sampler, weighted particles, members,
#: a linearized Gaussian (Laplace's GLM predictive) and draws from a fitted q
METHODS = {
    "nuts": lambda: NUTS(n_chains=2, n_warmup=30, max_tree_depth=4),
    "smc": lambda: SMC(n_mcmc_steps=2),
    "ensemble": lambda: DeepEnsemble(max_iter=30),
    "laplace": lambda: Laplace(max_iter=30),
    "vi": lambda: VariationalInference(max_iter=30),
}

#: what the fresh process computes from each pickle, and the test in this one
PREDICT = """
import pickle, sys
import numpy as np

out = {}
for path in sys.argv[2:]:
    with open(path, "rb") as f:
        est = pickle.load(f)
    X = np.load(sys.argv[1])
    name = path.rsplit("/", 1)[-1]
    if hasattr(est, "predict_proba"):
        out[name + "proba"] = est.predict_proba(X)
        out[name + "std"] = est.predict_std(X)
        out[name + "label"] = est.predict(X)
    else:
        mean, std = est.predict(X, return_std=True)
        out[name + "mean"], out[name + "std"] = mean, std
        out[name + "interval"] = np.stack(est.predict_interval(X, 0.8))
        out[name + "sample_y"] = est.sample_y(X, 3, random_state=0)
np.savez(sys.argv[1] + ".out.npz", **out)
"""


def _predictions(est, X) -> dict:
    if hasattr(est, "predict_proba"):
        return {"proba": est.predict_proba(X), "std": est.predict_std(X), "label": est.predict(X)}
    mean, std = est.predict(X, return_std=True)
    return {
        "mean": mean,
        "std": std,
        "interval": np.stack(est.predict_interval(X, 0.8)),
        "sample_y": est.sample_y(X, 3, random_state=0),
    }


def test_a_fresh_process_predicts_the_same_bits(tmp_path):
    rng = np.random.default_rng(0)
    X_reg = rng.standard_normal((30, 2))
    y_reg = np.sin(X_reg[:, 0]) + 0.1 * rng.standard_normal(30)
    X_iris, y_iris = load_iris(return_X_y=True)
    X_iris = (X_iris - X_iris.mean(0)) / X_iris.std(0)
    for cls, X, y in ((BayesianMLPRegressor, X_reg, y_reg),
                      (BayesianMLPClassifier, X_iris, y_iris)):  # fmt: skip
        X_new = X[:9] + 0.05
        x_path = tmp_path / f"{cls.__name__}-X.npy"
        np.save(x_path, X_new)
        fitted = {}
        for name, method in METHODS.items():
            est = cls(hidden_layer_sizes=(3,), method=method(), n_samples=20, random_state=0)
            fitted[f"{cls.__name__}-{name}.pkl"] = est.fit(X, y)
            (tmp_path / f"{cls.__name__}-{name}.pkl").write_bytes(pickle.dumps(est))
        paths = [str(tmp_path / name) for name in fitted]
        subprocess.run(
            [sys.executable, "-c", textwrap.dedent(PREDICT), str(x_path), *paths],
            check=True,
            timeout=600,
        )
        loaded = np.load(str(x_path) + ".out.npz")
        for name, est in fitted.items():
            for key, value in _predictions(est, X_new).items():
                np.testing.assert_array_equal(loaded[name + key], value, err_msg=name)


def _readonly_signatures(dispatcher) -> list:
    from numba.core import types

    return [sig for sig in dispatcher.signatures
            if any(isinstance(arg, types.Array) and not arg.mutable for arg in sig)]  # fmt: skip


@pytest.mark.parametrize("cls", [BayesianMLPRegressor, BayesianMLPClassifier])
def test_a_model_loaded_as_read_only_memory_maps_predicts_without_compiling(tmp_path, cls):
    # joblib.load(mmap_mode="r") hands back read-only arrays, and numba types a read-only
    # array apart from a writable one: passed on as loaded, the draws and the layout made
    # prediction compile its kernels again, for seconds, in every process that loaded the
    # model (the ensemble's forward pass and Laplace's Jacobian did)
    import joblib
    from numba.core import event

    from skbnn.kernels import backprop
    from skbnn.kernels import density as knet

    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    y = y if cls is BayesianMLPClassifier else X[:, 0] + 0.1 * np.sin(3 * X[:, 1])
    X = X[:, 1:]
    for name, method in METHODS.items():
        est = cls(hidden_layer_sizes=(3,), method=method(), n_samples=20, random_state=0)
        before = _predictions(est.fit(X, y), X[:9])
        joblib.dump(est, tmp_path / f"{name}.joblib")
        loaded = joblib.load(tmp_path / f"{name}.joblib", mmap_mode="r")
        # what the test is about: the loaded posterior's arrays are read-only
        arrays = [a for a in vars(loaded.posterior_).values() if isinstance(a, np.ndarray)]
        assert arrays and not any(a.flags.writeable for a in arrays), name
        with event.install_recorder("numba:compile") as compiled:
            after = _predictions(loaded, X[:9])
        names = {e[1].data["dispatcher"].py_func.__name__ for e in compiled.buffer}
        assert names == set(), name
        for key, value in before.items():
            np.testing.assert_array_equal(after[key], value, err_msg=name)
    for kernel in (knet.forward_batch_for(2), backprop.jacobian):
        assert _readonly_signatures(kernel) == []


def _fitted():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20, 2))
    return BayesianMLPRegressor(
        hidden_layer_sizes=(2,), method=Laplace(max_iter=20), random_state=0
    ).fit(X, X[:, 0])


def test_a_pickle_from_another_version_warns(monkeypatch):
    est = _fitted()
    monkeypatch.setattr(skbnn._version, "__version__", "0.0.1")
    data = pickle.dumps(est)
    monkeypatch.undo()
    with pytest.warns(InconsistentVersionWarning) as record:
        loaded = pickle.loads(data)
    (warning,) = [w.message for w in record if isinstance(w.message, InconsistentVersionWarning)]
    # users who filter scikit-learn's warning filter this one too
    assert isinstance(warning, sklearn.exceptions.InconsistentVersionWarning)
    assert warning.original_version == "0.0.1" and warning.current_version == skbnn.__version__
    assert "BayesianMLPRegressor" in str(warning) and "skbnn version 0.0.1" in str(warning)
    # the warning does not keep the state from loading
    np.testing.assert_array_equal(loaded.predict(np.ones((2, 2))), est.predict(np.ones((2, 2))))
    assert "_skbnn_version" not in vars(loaded)


def test_a_pickle_of_this_version_loads_silently():
    est = _fitted()
    with warnings.catch_warnings():
        warnings.simplefilter("error", sklearn.exceptions.InconsistentVersionWarning)
        loaded = pickle.loads(pickle.dumps(est))
    assert "_skbnn_version" not in vars(loaded) and "_skbnn_version" not in vars(est)


def test_a_pickle_without_a_version_warns_as_unknown():
    est = _fitted()
    state = est.__getstate__()
    del state["_skbnn_version"]
    fresh = BayesianMLPRegressor.__new__(BayesianMLPRegressor)
    with pytest.warns(InconsistentVersionWarning, match="version unknown"):
        fresh.__setstate__(state)
