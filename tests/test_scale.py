"""Many rows: the bounded passes over all rows, and the default budgets that keep a fit on
10^6 rows to minutes (doc/performance.md, ``benchmarks/scale.py``).

- an :class:`~skbnn.log_posterior.Evaluator` on more rows than one workspace block sums
  the blocks, and gives the unblocked value, gradient and statistics to rounding;
- prediction chunks its rows by the outputs and the threads' workspaces together;
- ``max_iter=None`` caps the epochs at a budget of row visits on many rows, and leaves
  fewer rows alone;
- a member that ran all its epochs with a loss that only fluctuates does not warn;
- Laplace's polish runs fewer full-batch iterations on many rows.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import skbnn.log_posterior as lp
from skbnn import BayesianMLPRegressor
from skbnn.kernels import density as knet
from skbnn.log_posterior import LogPosterior
from skbnn.methods import SGHMC, DeepEnsemble, VariationalInference
from skbnn.methods._optim import (
    MIN_BUDGET_EPOCHS,
    ROW_BUDGET,
    Member,
    Settings,
    row_budget,
    still_improving,
)
from skbnn.methods.laplace import MIN_POLISH_ITER, POLISH_ROWS


@pytest.mark.parametrize(
    "likelihood, noise, outputs",
    [
        ("gaussian", "fixed", 2),
        ("gaussian", "theta", 1),
        ("gaussian", "gibbs", 1),
        ("heteroscedastic", "fixed", 1),
        ("bernoulli", "fixed", 1),
        ("categorical", "fixed", 3),
    ],
)
@pytest.mark.parametrize("subset", [False, True])
def test_evaluator_in_blocks_is_the_evaluator_in_one(monkeypatch, likelihood, noise, outputs,
                                                     subset):  # fmt: skip
    rng = np.random.default_rng(0)
    n = 1003
    X = rng.standard_normal((n, 3))
    labels = {"bernoulli": (rng.random((n, 1)) < 0.5).astype(float),
              "categorical": np.eye(3)[rng.integers(0, 3, n)]}  # fmt: skip
    Y = labels.get(likelihood, rng.standard_normal((n, outputs)))
    target = LogPosterior(X, Y, (6, 4), "tanh", likelihood, noise=noise,
                          sample_weight=rng.random(n) + 0.5)  # fmt: skip
    rows = np.sort(rng.choice(n, 700, replace=False)) if subset else None
    theta = 0.3 * rng.standard_normal(target.n_params)
    one = target.evaluator(None, rows)
    assert len(one.blocks) == 1
    value, grad = one(theta, 0.7)
    grad, stats = grad.copy(), one.stats.copy()
    # blocks of 40 rows: the sum runs over many, the last one short
    per_row = int(knet.workspace_size(target.layout.sizes, 1))
    monkeypatch.setattr(lp, "BLOCK_BYTES", 8 * per_row * 40)
    blocked = target.evaluator(None, rows)
    assert len(blocked.blocks) > 10
    value_b, grad_b = blocked(theta, 0.7)
    np.testing.assert_allclose(value_b, value, rtol=1e-12)
    np.testing.assert_allclose(grad_b, grad, rtol=1e-10, atol=1e-12 * np.abs(grad).max())
    np.testing.assert_allclose(blocked.stats[:2], stats[:2], rtol=1e-12)
    if likelihood == "gaussian":
        np.testing.assert_allclose(blocked.stats[2:], stats[2:], rtol=1e-12)
    assert blocked.value(theta, 0.7) == value_b
    # beta reaches every block
    np.testing.assert_allclose(blocked.value(theta, 1.0), one.value(theta, 1.0), rtol=1e-12)


@pytest.mark.parametrize("noise", ["fixed", "theta"])
def test_batch_evaluations_in_blocks_are_the_batch_evaluations(monkeypatch, noise):
    # VI's and LBBNN's ELBO and Laplace's Hessian evaluate many draws on all rows
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((500, 3)), rng.standard_normal((500, 1))
    target = LogPosterior(X, Y, (5,), "relu", "gaussian", noise=noise)
    thetas = 0.3 * rng.standard_normal((5, target.n_params))
    loglik, logprior = target.loglik_batch(thetas, n_jobs=2)
    logp, grads = target.logp_grad_batch(thetas, beta=0.5, n_jobs=2)
    monkeypatch.setattr(
        lp, "BLOCK_BYTES", 8 * int(knet.workspace_size(target.layout.sizes, 1)) * 48
    )
    assert lp.block_rows(target.layout.sizes) < target.n_rows
    loglik_b, logprior_b = target.loglik_batch(thetas, n_jobs=2)
    logp_b, grads_b = target.logp_grad_batch(thetas, beta=0.5, n_jobs=2)
    np.testing.assert_allclose(loglik_b, loglik, rtol=1e-12)
    np.testing.assert_allclose(logprior_b, logprior, rtol=1e-12)
    np.testing.assert_allclose(logp_b, logp, rtol=1e-12)
    np.testing.assert_allclose(grads_b, grads, rtol=1e-9, atol=1e-12 * np.abs(grads).max())


def test_evaluator_of_a_marginalized_noise_stays_in_one_block(monkeypatch):
    # log int p(y | theta, tau) p(tau) dtau is not a sum over rows
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((300, 2)), rng.standard_normal((300, 1))
    target = LogPosterior(X, Y, (4,), "tanh", "gaussian", noise="marginal")
    monkeypatch.setattr(lp, "BLOCK_BYTES", 8 * 64)
    assert len(target.evaluator().blocks) == 1


def test_prediction_chunks_count_the_workspace(monkeypatch):
    """The rows per chunk leave room for every thread's activations, not just the outputs:
    with few draws, a chunk of a wide network's rows would otherwise hold gigabytes."""
    import skbnn.posterior as po

    seen = []
    real = po.knet.forward_batch_for

    def spy(activation):
        kernel = real(activation)

        def run(thetas, xt, sizes, offsets, m, out):
            seen.append(m)
            return kernel(thetas, xt, sizes, offsets, m, out)

        return run

    monkeypatch.setattr(po.knet, "forward_batch_for", spy)
    rng = np.random.default_rng(0)
    reg = BayesianMLPRegressor(hidden_layer_sizes=(50, 50), method=DeepEnsemble(max_iter=2),
                               n_samples=2, random_state=0, n_jobs=2)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg.fit(rng.standard_normal((100, 3)), rng.standard_normal(100))
    monkeypatch.setattr(po, "_CHUNK_BYTES", 2**20)
    seen.clear()
    reg.predict(rng.standard_normal((20_000, 3)))
    net = reg.predictive_.network()
    k = net.n_outputs
    per_row = 8 * (k * 2 + 2 * int(knet.workspace_size(net.layout.sizes, 1)))
    assert max(seen) <= 2**20 // per_row
    assert sum(seen) == 2 * 20_000  # each of the two threads ran one draw on every row


def _target(n_rows: int):
    return SimpleNamespace(n_rows=n_rows, likelihood="gaussian", noise_in_theta=False)


@pytest.mark.parametrize("n_rows", [10_000, 50_000])
def test_the_row_budget_leaves_fewer_rows_alone(n_rows):
    s = DeepEnsemble()._settings(_target(n_rows))
    steps = -(-n_rows // s.batch_size)
    assert s.max_iter == max(200, -(-300_000 // steps))


@pytest.mark.parametrize("n_rows", [200_000, 1_000_000, 5_000_000])
def test_the_row_budget_caps_the_epochs_on_many_rows(n_rows):
    cap = max(MIN_BUDGET_EPOCHS, -(-ROW_BUDGET // n_rows))
    assert DeepEnsemble()._settings(_target(n_rows)).max_iter == cap
    assert VariationalInference()._settings(_target(n_rows)).max_iter <= cap
    assert SGHMC()._settings(_target(n_rows)).max_iter <= cap
    assert row_budget(n_rows, 3) == 3  # an explicit shorter run is kept
    # one member visits at most the budget's rows (or the minimum epochs')
    assert cap * n_rows <= max(ROW_BUDGET + n_rows, MIN_BUDGET_EPOCHS * n_rows)


def test_laplace_polish_iterations_follow_the_rows():
    def iterations(n_rows, lbfgs_iter):
        return row_budget(n_rows, lbfgs_iter, POLISH_ROWS, MIN_POLISH_ITER)

    assert iterations(1_000, 300) == 300
    assert iterations(1_000_000, 300) == max(MIN_POLISH_ITER, POLISH_ROWS // 1_000_000)
    assert iterations(10**8, 300) == MIN_POLISH_ITER
    assert iterations(1_000, 50) == 50


def _member(curve):
    m = Member(np.zeros(1))
    m.loss_curve = list(curve)
    return m


def test_still_improving_tells_a_trend_from_noise():
    s = Settings(solver="adam", tol=1e-4, n_iter_no_change=10)
    rng = np.random.default_rng(0)
    noise = 0.002 * rng.standard_normal(30)
    # flat: the stopping rule may never fire (a new best now and then), but nothing to gain
    assert not still_improving(_member(-0.01 + noise), s)
    # falling by 1e-3 per epoch, ten times tol, under the same noise
    assert still_improving(_member(-0.001 * np.arange(30) + noise), s)
    # too few epochs to tell: counted as not converged, as before
    assert still_improving(_member([1.0, 0.9, 0.95]), s)
    # L-BFGS reports its own convergence
    assert still_improving(_member(-0.01 + noise), Settings(solver="lbfgs"))
