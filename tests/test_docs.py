"""The docs say what the code does: the generated methods table is current, and the
documented Pipeline pattern for predictive sds and intervals works."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import skbnn

DOC = Path(__file__).resolve().parents[1] / "doc"


def _doc_module(name):
    spec = importlib.util.spec_from_file_location(name, DOC / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _methods_table():
    return _doc_module("methods_table")


def test_choosing_table_matches_the_benchmark_results():
    # doc/choosing.md's cost-against-fidelity table is rendered from benchmarks/results
    table = _doc_module("choosing_table")
    documented = table.current((DOC / "choosing.md").read_text())
    assert documented is not None, "doc/choosing.md lost its table markers"
    assert documented == table.render(), (
        "doc/choosing.md's table differs from benchmarks/results; regenerate it with "
        "`python doc/choosing_table.py --write`"
    )


def test_methods_table_in_index_matches_the_code():
    # no fit, well under a second
    table = _methods_table()
    documented = table.current((DOC / "user_guide.md").read_text())
    assert documented is not None, "doc/user_guide.md lost its methods-table markers"
    assert documented == table.render(), (
        "doc/user_guide.md's methods table differs from the methods' get_params(); "
        "regenerate it with `python doc/methods_table.py --write`"
    )


# a tiny run cannot converge and says so; only the plumbing is tested here
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_documented_pipeline_pattern_reaches_std_and_interval():
    # doc/user_guide.md, "Predictions": the pattern for predict_std / predict_interval in a
    # Pipeline, and return_std forwarded by Pipeline.predict. Tiny fit: 0.4 s warm.
    rng = np.random.default_rng(0)
    X = rng.normal(loc=5.0, scale=3.0, size=(40, 2)).astype(np.float32)
    y = (np.sin(X[:, 0] / 3.0) + 0.1 * rng.normal(size=40)).astype(np.float32)
    model = skbnn.BayesianMLPRegressor(
        hidden_layer_sizes=(3,),
        method=skbnn.methods.NUTS(n_chains=2, n_warmup=50),
        n_samples=40,
        random_state=0,
    )
    pipe = make_pipeline(StandardScaler(), model).fit(X, y)

    mean, std = pipe.predict(X, return_std=True)
    Xt = pipe[:-1].transform(X)
    mean_direct, std_direct = pipe[-1].predict(Xt, return_std=True)
    np.testing.assert_array_equal(mean, mean_direct)
    np.testing.assert_array_equal(std, std_direct)
    np.testing.assert_array_equal(pipe[-1].predict_std(Xt), std)
    lower, upper = pipe[-1].predict_interval(Xt, coverage=0.9)
    assert lower.shape == upper.shape == mean.shape == (40,)
    assert np.all(lower < mean) and np.all(mean < upper)
    # float32 in, float64 out, as doc/user_guide.md explains
    assert mean.dtype == std.dtype == lower.dtype == np.float64
