"""MCMC chains through joblib's backend: the same bits wherever the chains run (issue 21).

Under ``joblib.parallel_config(backend=...)`` with a backend whose tasks run in other
processes ("loky" here, "dask" on a cluster: tests/test_dask.py), every chain of a fit is
one task; the default stays the shared thread pool.
"""

import joblib
import numpy as np
import pytest

from skbnn import BayesianMLPRegressor
from skbnn.methods import HMC, MALA, NUTS, _chains

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (40, 2))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(40)
    return X, y


@pytest.fixture
def spy(monkeypatch):
    calls = []
    original = _chains.run_elsewhere

    def run(blocks, chains, n_jobs):
        calls.append(len(chains))
        return original(blocks, chains, n_jobs)

    monkeypatch.setattr(_chains, "run_elsewhere", run)
    return calls


def test_the_default_and_the_threading_backend_keep_the_chains_local(spy):
    X, y = _data()
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(3,), method=NUTS(n_chains=2, n_warmup=20), n_samples=20,
        random_state=0, n_jobs=2,
    )  # fmt: skip
    est.fit(X, y)
    with joblib.parallel_config(backend="threading", n_jobs=2):
        est.fit(X, y)
    assert spy == []


@pytest.mark.parametrize(
    "method, extra",
    [
        (NUTS(n_chains=3, n_warmup=30), {}),
        (HMC(n_chains=2, n_warmup=30), {}),
        (MALA(n_chains=2, n_warmup=30), {}),
        # extended in rounds until the bulk ESS is met: each round goes through the backend
        (NUTS(n_chains=2, n_warmup=30, target_ess=60), {}),
        (NUTS(n_chains=2, n_warmup=30), {"warm_start": True}),
    ],
    ids=["nuts", "hmc", "mala", "nuts-extended", "nuts-warm-start"],
)
def test_chains_on_other_processes_draw_the_same_bits(spy, method, extra):
    X, y = _data()

    def fit():
        est = BayesianMLPRegressor(
            hidden_layer_sizes=(3,), method=method, n_samples=30, random_state=1, **extra
        )
        est.fit(X, y)
        if extra.get("warm_start"):
            # the continued chains, also through the backend
            est.set_params(n_samples=60).fit(X, y)
        return est

    local = fit()
    assert spy == []
    with joblib.parallel_config(backend="loky", n_jobs=2):
        other = fit()
    assert spy and all(n == method.n_chains for n in spy)
    np.testing.assert_array_equal(local.posterior_.thetas, other.posterior_.thetas)
    np.testing.assert_array_equal(
        local.posterior_.noise_precision, other.posterior_.noise_precision
    )
    for key in ("n_grad_evals_per_chain", "divergences_per_chain", "step_size"):
        np.testing.assert_array_equal(local.diagnostics_[key], other.diagnostics_[key])
    np.testing.assert_array_equal(local.predict(X), other.predict(X))


@pytest.mark.parametrize("name", ["ensemble", "rms", "swag"])
def test_members_on_other_processes_train_the_same_bits(monkeypatch, name):
    from skbnn.methods import METHODS, _optim

    seen = []
    original = _optim.backend_elsewhere
    monkeypatch.setattr(_optim, "backend_elsewhere", lambda: seen.append(original()) or seen[-1])
    X, y = _data()

    def fit():
        method = METHODS[name]().set_params(max_iter=30)
        return BayesianMLPRegressor(
            hidden_layer_sizes=(3,), method=method, n_samples=4, random_state=1
        ).fit(X, y)

    local = fit()
    with joblib.parallel_config(backend="loky", n_jobs=2):
        other = fit()
    # the members trained locally, then through the backend
    assert seen == [False, True]
    np.testing.assert_array_equal(local.posterior_.thetas, other.posterior_.thetas)
    np.testing.assert_array_equal(local.predict(X), other.predict(X))
