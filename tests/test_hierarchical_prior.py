"""HierarchicalPrior: Gibbs updates of the per-layer weight precisions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from skbnn import BayesianMLPRegressor
from skbnn.kernels import hmc as khmc
from skbnn.kernels import network as knet
from skbnn.methods import NUTS, SMC
from skbnn.priors import GaussianPrior, HierarchicalPrior
from skbnn.target import Target


@pytest.mark.parametrize("fan_in", [True, False])
@pytest.mark.parametrize("noise", ["fixed", "marginal"])
def test_gibbs_update_carries_log_density_and_gradient(fan_in, noise):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((25, 3)), rng.standard_normal(25)
    prior = HierarchicalPrior(shape=1.5, rate=0.7, fan_in_scaling=fan_in)
    target = Target(X, y, (4, 2), "tanh", "gaussian", np.ones(1), noise=noise)
    target.set_prior(prior.stds(target.layout), 0, (1.5, 0.7, fan_in))
    tgt = target.as_tuple()
    assert tgt[4] is not target.prior_std  # each chain owns its scales
    q = rng.standard_normal(target.n_params) * 0.5
    ws = target.workspace()
    g, st = np.empty(target.n_params), np.empty(3)
    lp = knet.logp_grad(q, tgt, ws, g, st, True)
    old = tgt[4].copy()
    dlp = khmc.gibbs_prior_precision(np.random.default_rng(1), q, g, tgt)
    assert not np.array_equal(tgt[4], old)
    g_fresh, st_fresh = np.empty(target.n_params), np.empty(3)
    lp_fresh = knet.logp_grad(q, tgt, ws, g_fresh, st_fresh, True)
    assert lp + dlp == pytest.approx(lp_fresh, rel=1e-12, abs=1e-10)
    np.testing.assert_allclose(g, g_fresh, rtol=1e-12, atol=1e-12)
    # one scale per layer's weights; biases untouched
    layout = target.layout
    for layer in range(layout.n_layers):
        w, b = layout.slices(layer)
        assert np.ptp(tgt[4][w]) == 0
        np.testing.assert_array_equal(tgt[4][b], old[b])


def test_gibbs_conditional_is_the_gamma_posterior():
    # with fixed weights, the precisions drawn are Gamma(a + m/2, b + S/2) of each layer
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((10, 3)), rng.standard_normal(10)
    target = Target(X, y, (4,), "tanh", "gaussian", np.ones(1))
    target.set_prior(HierarchicalPrior().stds(target.layout), 0, (2.0, 2.0, False))
    tgt = target.as_tuple()
    q = rng.standard_normal(target.n_params)
    g = np.zeros(target.n_params)
    draws = []
    r = np.random.default_rng(3)
    for _ in range(4000):
        khmc.gibbs_prior_precision(r, q, g, tgt)
        draws.append(1.0 / tgt[4][[0, 16]] ** 2)  # first weight of each layer
    draws = np.array(draws)
    for col, (start, m) in enumerate([(0, 12), (16, 4)]):
        shape, rate = 2.0 + m / 2, 2.0 + 0.5 * np.sum(q[start : start + m] ** 2)
        mean, sd = shape / rate, np.sqrt(shape) / rate
        assert abs(draws[:, col].mean() - mean) < 4 * sd / np.sqrt(len(draws))


def _linear_fit(X, y, prior, n_samples=1000):
    method = NUTS(n_chains=2, n_warmup=300)
    reg = BayesianMLPRegressor((), activation="identity", method=method, prior=prior,
                               n_samples=n_samples, random_state=0)  # fmt: skip
    return reg.fit(X, y)


def test_tiny_true_weights_give_a_large_precision():
    # With no hidden layer the weights are identified. Tiny true weights and enough rows
    # concentrate 40 weights near zero (posterior sd about 0.05 on the standardized
    # scale), which puts lambda's conditional near Gamma(22, 4), mean 5.5; weights that
    # explain y keep it near its prior mean of 1.
    rng = np.random.default_rng(4)
    X = rng.standard_normal((400, 40))
    noise = 0.3 * rng.standard_normal(400)
    tiny = _linear_fit(X, X @ (0.001 * rng.standard_normal(40)) + noise, HierarchicalPrior())
    large = _linear_fit(X, X @ rng.standard_normal(40) + noise, HierarchicalPrior())
    lam_tiny, lam_large = tiny.posterior_.prior_precision, large.posterior_.prior_precision
    assert lam_tiny.shape == (1000, 1)
    # above the prior's 95 % point, and several times the precision of the large weights
    assert np.median(lam_tiny) > stats.gamma(2.0, scale=0.5).ppf(0.95)  # 2.37
    assert np.median(lam_tiny) > 3 * np.median(lam_large)


@pytest.mark.parametrize("seed", [0, 1])
def test_hierarchical_prior_predicts_at_least_as_well_as_a_wrong_fixed_scale(seed):
    # few rows, many features, tiny weights: a fixed prior five times too wide overfits
    rng = np.random.default_rng(seed)
    X, w = rng.standard_normal((25, 15)), 0.02 * rng.standard_normal(15)
    y = X @ w + 0.3 * rng.standard_normal(25)
    X_test = rng.standard_normal((500, 15))
    y_test = X_test @ w + 0.3 * rng.standard_normal(500)
    mse = [
        np.mean((_linear_fit(X, y, prior).predict(X_test) - y_test) ** 2)
        for prior in (HierarchicalPrior(), GaussianPrior(std=5.0))
    ]
    assert mse[0] <= mse[1], mse


def test_one_precision_per_layer_is_recorded():
    rng = np.random.default_rng(6)
    X, y = rng.standard_normal((40, 3)), rng.standard_normal(40)
    method = NUTS(n_chains=2, n_warmup=50)
    reg = BayesianMLPRegressor((4, 3), activation="tanh", method=method,
                               prior="hierarchical", n_samples=40, random_state=0)  # fmt: skip
    with pytest.warns(Warning):  # a short run
        reg.fit(X, y)
    lam = reg.posterior_.prior_precision
    assert lam.shape == (40, 3) and np.all(lam > 0)
    assert np.all(np.ptp(lam, axis=0) > 0)  # every layer's precision moves


def test_smc_evidence_and_precision_match_quadrature():
    # Linear regression with fixed noise: given lambda the evidence is Gaussian, so
    # p(y) = integral N(z; 0, K / lambda + B + sigma^2 I) Gamma(lambda | a, b) dlambda is a
    # one-dimensional integral over log lambda, and so is E[lambda | y].
    from scipy.special import logsumexp
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(7)
    X = rng.standard_normal((40, 3))
    y = X @ np.array([0.3, -0.2, 0.1]) + 0.5 * rng.standard_normal(40)
    z = (y - y.mean()) / y.std()
    noise_sd = 0.8
    a, b = 2.0, 2.0
    gram = X @ X.T / 3.0  # fan-in scaled weights: c^2 = 1/3
    log_lam = np.linspace(-6.0, 6.0, 1201)
    log_joint = np.array([
        multivariate_normal(np.zeros(40), gram / np.exp(t) + 1.0 + noise_sd**2 * np.eye(40))
        .logpdf(z) + stats.gamma(a, scale=1 / b).logpdf(np.exp(t)) + t
        for t in log_lam
    ])  # fmt: skip
    exact = logsumexp(log_joint) + np.log(log_lam[1] - log_lam[0]) - 40 * np.log(y.std())
    post = np.exp(log_joint - logsumexp(log_joint))
    lam_mean = post @ np.exp(log_lam)

    reg = BayesianMLPRegressor(
        (), activation="identity", method=SMC(), prior="hierarchical", noise_std=noise_sd,
        n_samples=2000, random_state=7,
    ).fit(X, y)  # fmt: skip
    assert abs(reg.log_evidence_ - exact) < 0.5, (reg.log_evidence_, exact)
    lam = reg.posterior_.prior_precision[:, 0]
    w = reg.posterior_.normalized_weights()
    lam_sd = np.sqrt(post @ np.exp(2 * log_lam) - lam_mean**2)
    assert abs(w @ lam - lam_mean) < 4 * lam_sd / np.sqrt(reg.diagnostics_["ess"])


def test_smc_hierarchical_same_result_for_any_n_jobs():
    rng = np.random.default_rng(8)
    X, y = rng.standard_normal((30, 2)), rng.standard_normal(30)
    fits = [
        BayesianMLPRegressor((3,), activation="tanh", method=SMC(n_mcmc_steps=2),
                             prior="hierarchical", n_samples=60, random_state=0,
                             n_jobs=n_jobs).fit(X, y)
        for n_jobs in (1, 2)
    ]  # fmt: skip
    np.testing.assert_array_equal(fits[0].posterior_.thetas, fits[1].posterior_.thetas)
    np.testing.assert_array_equal(
        fits[0].posterior_.prior_precision, fits[1].posterior_.prior_precision
    )
    assert fits[0].posterior_.prior_precision.shape == (60, 2)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # short runs
@pytest.mark.parametrize("method", ["nuts", "hmc", "mala", "amcmc", "smc"])
def test_every_method_samples_the_precisions(method):
    rng = np.random.default_rng(9)
    X, y = rng.standard_normal((30, 2)), rng.standard_normal(30)
    reg = BayesianMLPRegressor((3,), activation="tanh", method=method, prior="hierarchical",
                               n_samples=40, random_state=0).fit(X, y)  # fmt: skip
    lam = reg.posterior_.prior_precision
    assert lam.shape == (40, 2) and np.all(np.isfinite(lam)) and np.all(lam > 0)
    assert np.unique(lam[:, 0]).size > 1  # the precisions move
