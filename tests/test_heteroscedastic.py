"""Samplers of the HMC family with a network that predicts each row's noise
(``heteroscedastic=True``): the variance head is sampled with the weights."""

import numpy as np
import pytest

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn._data import rounding_variance
from skbnn.kernels.likelihoods import HETERO_MIN_VAR
from skbnn.log_posterior import LogPosterior
from skbnn.methods import MAMS, NUTS, DeepEnsemble


def _noisy_ramp(seed, n=200):
    # noise sd 0.1 + x on [0, 1]: 0.15 at x = 0.05, 1.05 at x = 0.95
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 1))
    y = 2 * X[:, 0] + (0.1 + X[:, 0]) * rng.standard_normal(n)
    return X, y


def _fit(method, seed=0, **kw):
    X, y = _noisy_ramp(seed)
    return BayesianMLPRegressor(
        hidden_layer_sizes=(5,), method=method, n_samples=100, random_state=seed, **kw
    ).fit(X, y)


@pytest.mark.statistical
def test_sampled_noise_follows_the_noise(seed):
    # ~0.7 s. The noise sd is 7 times larger at x = 0.95 than at x = 0.05. Over 30 seeds
    # the sampled aleatoric sd's ratio had a log with mean 1.43 and sd 0.125 (min 1.20):
    # asking for a ratio above 2 (log 0.69) is 5.9 sd below that mean, a false alarm of
    # ~2e-9 for a normal tail and < 1e-5 for a heavier one.
    est = _fit(NUTS(n_chains=2, n_warmup=150, heteroscedastic=True), seed=seed)
    assert est.posterior_.heteroscedastic
    ends = np.array([[0.05], [0.95]])
    aleatoric = est.predict_std(ends, kind="aleatoric")
    assert aleatoric[1] > 2 * aleatoric[0] > 0
    lower, upper = est.predict_interval(ends, coverage=0.9)
    assert upper[1] - lower[1] > upper[0] - lower[0]
    total = est.predict_std(ends)
    assert np.all(np.isfinite(total)) and np.all(total >= aleatoric)


def test_diagnostics_watch_the_means_and_the_noise():
    est = _fit(MAMS(n_chains=2, n_warmup=60, n_modes=2, heteroscedastic=True))
    diag = est.diagnostics_
    # one mean and one variance output per target, at every monitored row
    assert diag["rhat_outputs"].shape[1] == 2
    assert np.all(np.isfinite(diag["rhat_outputs"]))
    assert np.isclose(diag["mode_weights"].sum(), 1.0)
    draws = est.sample_y(np.array([[0.5]]), n_samples=5, random_state=0)
    assert draws.shape == (1, 5) and np.all(np.isfinite(draws))


def test_homoscedastic_by_default():
    est = _fit(NUTS(n_chains=2, n_warmup=40))
    assert not est.posterior_.heteroscedastic
    assert est.posterior_.noise_precision is not None


def test_heteroscedastic_sampler_needs_noise_std_none():
    X, y = _noisy_ramp(0, n=30)
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(2,), method=NUTS(heteroscedastic=True), noise_std=1.0
    )
    with pytest.raises(ValueError, match="noise_std must be None"):
        est.fit(X, y)


def test_heteroscedastic_sampler_classifier_is_an_error():
    X, y = _noisy_ramp(0, n=30)
    est = BayesianMLPClassifier(hidden_layer_sizes=(2,), method=NUTS(heteroscedastic=True))
    with pytest.raises(ValueError, match="heteroscedastic=True applies to regression only"):
        est.fit(X, y > 1)


def test_rounding_variance_reads_the_grid_the_targets_lie_on():
    rng = np.random.default_rng(0)
    ratings = rng.integers(3, 9, 60).astype(float)  # wine's quality scores, say
    halves = rng.integers(0, 9, 60) / 2.0 + 0.25
    scale = np.array([2.0, 0.5])
    # Sheppard's correction: the variance of rounding to h, h^2 / 12, on the standardized
    # scale; the smallest over the outputs
    both = rounding_variance(np.column_stack([ratings, halves]), scale)
    assert both == pytest.approx(min((1 / 2.0) ** 2, (0.5 / 0.5) ** 2) / 12, rel=1e-12)
    assert rounding_variance(ratings[:, None] * 1000.0, np.ones(1)) == pytest.approx(1e6 / 12)
    # on no grid, or on too few values to tell: none, for the whole fit
    assert rounding_variance(rng.standard_normal((60, 1)), np.ones(1)) is None
    assert rounding_variance(np.column_stack([ratings, rng.standard_normal(60)]), scale) is None
    assert rounding_variance(np.array([[0.3], [7.1], [0.3]]), np.ones(1)) is None


def test_the_floor_enters_the_likelihood_and_its_gradient():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((23, 4)), rng.standard_normal(23)
    plain = LogPosterior(X, Y, (5,), "tanh", "heteroscedastic")
    floored = LogPosterior(X, Y, (5,), "tanh", "heteroscedastic", min_var=0.3)
    assert plain.min_var == HETERO_MIN_VAR and floored.min_var == 0.3
    for theta in plain.sample_prior(rng, 3):
        # the kernel's log-likelihood is the rows' (computed apart, in numpy), and the
        # floor changes it
        ll = floored.loglik_logprior(theta)[0]
        assert ll == pytest.approx(floored.pointwise_loglik(theta[None]).sum(), rel=1e-10)
        assert abs(ll - plain.loglik_logprior(theta)[0]) > 1e-3
        value, grad = floored.logp_and_grad(theta)
        step = 1e-6 * rng.standard_normal(theta.size)
        ahead, behind = floored.logp(theta + step), floored.logp(theta - step)
        assert (ahead - behind) / 2 == pytest.approx(grad @ step, rel=1e-5, abs=1e-9)


def test_integer_targets_keep_each_draws_noise_above_their_rounding():
    # integer targets a network fits exactly (five plateaus): without the floor, the
    # members shrink their noise onto them (their aleatoric sd was 0.04-0.05 here, a
    # density spike), with it no row's is below the rounding's sd, 1 / sqrt(12)
    rng = np.random.default_rng(0)
    X = (np.repeat(np.arange(-2.0, 3.0), 24) + 0.05 * rng.standard_normal(120))[:, None]
    y = np.round(X[:, 0])
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(8,), method=DeepEnsemble(heteroscedastic=True), n_samples=2,
        random_state=0,
    ).fit(X, y)  # fmt: skip
    assert est.posterior_.min_var == pytest.approx((1.0 / y.std()) ** 2 / 12, rel=1e-12)
    aleatoric = est.predict_std(X, kind="aleatoric")
    assert np.all(aleatoric >= 1.0 / np.sqrt(12.0) * (1 - 1e-9))
    # nor does the floor reach targets on no grid
    est.fit(X, y + 0.01 * rng.standard_normal(y.size))
    assert est.posterior_.min_var == HETERO_MIN_VAR
