"""The scale-mixture prior (``skbnn.priors.ScaleMixturePrior``) against scipy, differences
and an exact posterior.

* The kernel's log prior against scipy's normal densities mixed by log-sum-exp, and its
  gradient against central differences of the whole log density (rounding only: 1e-6).
* Prior draws against the mixture's CDF (Kolmogorov-Smirnov, false alarm 1e-4 each).
* Laplace's prior curvature against second differences of scipy's log density.
* NUTS on Bayesian linear regression with one feature under the mixture: its posterior
  means and second moments against a 2-D quadrature of the exact posterior, as z-scores
  from Monte Carlo standard errors below ``Z = 4.5`` (4 comparisons: false alarm 3e-5),
  and the same draws far from the posterior under a Gaussian prior, so the test fails if
  the mixture were ignored.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.diagnostics import ess_mean
from skbnn.log_posterior import LogPosterior
from skbnn.methods import NUTS, Laplace
from skbnn.priors import ScaleMixturePrior, log_density_curvature

Z = 4.5


def _logpdf(d, pi, s1, s2):
    return logsumexp(
        [math.log(pi) + stats.norm.logpdf(d, 0, s1), math.log1p(-pi) + stats.norm.logpdf(d, 0, s2)],
        axis=0,
    )


def _target(prior, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((15, 3))
    y = np.tanh(X[:, 0]) + 0.2 * rng.standard_normal(15)
    return LogPosterior(X, y[:, None], (4,), "tanh", "gaussian", prior=prior, noise_precision=4.0)


@pytest.mark.parametrize("fan_in_scaling", [False, True])
def test_kernel_log_prior_and_gradient(fan_in_scaling):
    prior = ScaleMixturePrior(pi=0.3, sigma1=1.5, sigma2=0.05, fan_in_scaling=fan_in_scaling)
    target = _target(prior)
    s1 = target.prior_scale
    if fan_in_scaling:
        assert s1[0] == pytest.approx(1.5 / math.sqrt(3))
    else:
        np.testing.assert_allclose(s1, 1.5)
    rng = np.random.default_rng(1)
    # weights in the spike, in the slab and between
    theta = rng.choice([0.01, 0.3, 2.0], target.n_params) * rng.standard_normal(target.n_params)
    evaluator = target.evaluator()
    value, grad = evaluator(theta)
    expected = np.sum(_logpdf(theta, 0.3, s1, 0.05 * s1 / 1.5))
    assert evaluator.stats[1] == pytest.approx(expected, rel=1e-12)
    h = 1e-6
    for i in range(target.n_params):
        up, down = theta.copy(), theta.copy()
        up[i] += h
        down[i] -= h
        fd = (evaluator.value(up) - evaluator.value(down)) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-6, abs=1e-6 * (1 + abs(fd))), i
    # far out in the tails the density underflows to -inf, not NaN; NaN stays NaN
    theta[0] = 1e200
    assert evaluator.value(theta) == -math.inf
    theta[0] = math.nan
    assert math.isnan(evaluator.value(theta))


@pytest.mark.statistical
def test_prior_draws_are_the_mixture(seed):
    prior = ScaleMixturePrior(pi=0.25, sigma1=2.0, sigma2=0.1, fan_in_scaling=True)
    target = _target(prior)
    draws = target.sample_prior(np.random.default_rng(0 + seed), 4000)
    w1 = target.layout.slices(0)[0]  # fan-in 3
    b1 = target.layout.slices(0)[1]
    for sl, s1 in [(w1, 2.0 / math.sqrt(3)), (b1, 2.0)]:
        x = draws[:, sl].ravel()
        s2 = s1 * 0.1 / 2.0

        def cdf(v, s1=s1, s2=s2):
            return 0.25 * stats.norm.cdf(v, 0, s1) + 0.75 * stats.norm.cdf(v, 0, s2)

        assert stats.kstest(x, cdf).pvalue > 1e-4
        np.testing.assert_allclose(target.prior_var[sl], 0.25 * s1**2 + 0.75 * s2**2)


def test_laplace_prior_curvature_is_the_second_derivative():
    target = _target(ScaleMixturePrior(pi=0.6, sigma1=1.0, sigma2=0.2))
    theta = np.linspace(-1.5, 1.5, target.n_params)
    sl = slice(0, target.layout.n_weights)
    logp, curvature = log_density_curvature(
        target.prior_kind, theta[sl], target.prior_mean[sl], target.prior_scale[sl], target.mixture
    )
    assert logp == pytest.approx(np.sum(_logpdf(theta, 0.6, 1.0, 0.2)), rel=1e-12)
    h = 1e-4
    second = (
        _logpdf(theta + h, 0.6, 1.0, 0.2)
        - 2 * _logpdf(theta, 0.6, 1.0, 0.2)
        + _logpdf(theta - h, 0.6, 1.0, 0.2)
    ) / h**2
    np.testing.assert_allclose(curvature, -second, rtol=1e-5, atol=1e-4)
    # between the components the log density is convex: a negative "precision"
    assert np.any(curvature < 0)


@pytest.mark.parametrize(
    "knob, value", [("pi", 0.0), ("pi", 1.0), ("sigma1", 0.0), ("sigma2", -1.0)]
)
def test_bad_knobs_raise_a_value_error_naming_them(knob, value):
    X = np.random.default_rng(0).standard_normal((10, 2))
    est = BayesianMLPRegressor((2,), prior=ScaleMixturePrior(**{knob: value}))
    with pytest.raises(ValueError, match=f"'{knob}' parameter of ScaleMixturePrior"):
        est.fit(X, X[:, 0])


def test_by_name_with_nested_knobs_and_laplace_empirical_bayes_refuses_it():
    est = BayesianMLPClassifier(prior="scale_mixture").set_params(prior__pi=0.25)
    assert isinstance(est.prior, ScaleMixturePrior) and est.prior.pi == 0.25
    assert est.get_params()["prior__sigma2"] == pytest.approx(math.exp(-6))
    X = np.random.default_rng(0).standard_normal((12, 2))
    reg = BayesianMLPRegressor((2,), method=Laplace(), prior="scale_mixture")
    with pytest.raises(ValueError, match="scale-mixture prior"):
        reg.fit(X, X[:, 0])


def _grid_moments(x, z, noise_std, logprior):
    """Posterior mean and second moment of (w, b) for z ~ N(w x + b, noise_std^2)."""
    grid = np.linspace(-2.5, 2.5, 1001)
    W, B = np.meshgrid(grid, grid, indexing="ij")
    resid = z[None, None, :] - W[..., None] * x[None, None, :] - B[..., None]
    logpost = -0.5 * np.sum(resid**2, axis=-1) / noise_std**2 + logprior(W) + logprior(B)
    p = np.exp(logpost - logpost.max())
    p /= p.sum()
    return [np.sum(p * W), np.sum(p * B), np.sum(p * W * W), np.sum(p * B * B)]


@pytest.mark.statistical
def test_nuts_samples_the_posterior_under_the_mixture(seed):
    # one feature, no hidden layer: the posterior of (w, b) on the standardized scale is
    # prior(w) prior(b) N(z | w x + b, 0.8^2), computed on a 1001 x 1001 grid. The
    # likelihood's sd of w (about 0.18) is between the spike's (0.1) and the slab's (1.0)
    rng = np.random.default_rng(10 + seed)
    x = rng.standard_normal(20)
    y = 0.3 * x + rng.standard_normal(20)
    prior = ScaleMixturePrior(pi=0.5, sigma1=1.0, sigma2=0.1)
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(),
        activation="identity",
        method=NUTS(n_chains=4, n_warmup=500),
        prior=prior,
        n_samples=4000,
        noise_std=0.8,
        random_state=0 + seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg.fit(x[:, None], y)
    z = (y - y.mean()) / y.std()
    n_chains, n_draws = reg.posterior_.chain_shape
    thetas = reg.posterior_.thetas[:, :2].T.reshape(2, n_chains, n_draws)
    draws = [thetas[0], thetas[1], thetas[0] ** 2, thetas[1] ** 2]

    def zscores(exact):
        out = []
        for d, e in zip(draws, exact, strict=True):
            ess = ess_mean(d)
            assert ess > 400, ess
            out.append((d.mean() - e) / (d.std() / math.sqrt(ess)))
        return np.array(out)

    exact = _grid_moments(x, z, 0.8, lambda v: _logpdf(v, 0.5, 1.0, 0.1))
    assert np.all(np.abs(zscores(exact)) < Z), zscores(exact)
    gaussian = _grid_moments(x, z, 0.8, lambda v: stats.norm.logpdf(v))
    assert np.max(np.abs(zscores(gaussian))) > 2 * Z
