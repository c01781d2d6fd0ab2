"""Adaptive annealed SMC against closed forms, and its mechanics.

With no hidden layer the regressor is Bayesian linear regression, whose evidence and
predictive are known exactly (with the noise fixed, or by one-dimensional quadrature over
the noise precision when it is inferred), and a one-feature logistic regression has two
parameters, so its evidence is a two-dimensional integral a grid computes exactly.

Tolerances: the relative variance of the evidence estimate is about the sum over stages of
``1 / ESS_t - 1 / N`` (perfect mixing, Chopin 2004), so for the runs below (N >= 1000,
about ten stages at ESS N / 2) its sd is about 0.1 nats; the issue's 0.5 nats is five of
them. Predictive means must lie within 4 Monte Carlo standard errors, with the ESS of the
final weights (Kish) as the sample size.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, logsumexp
from scipy.stats import multivariate_normal
from sklearn.exceptions import ConvergenceWarning

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import SMC
from skbnn.methods.smc import _multinomial, _residual, _systematic

N_ROWS, N_FEATURES = 60, 3


def _data(seed=0, noise=0.4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_ROWS, N_FEATURES))
    y = X @ np.array([1.0, -0.5, 0.25]) + 2.0 + noise * rng.standard_normal(N_ROWS)
    X_test = rng.standard_normal((5, N_FEATURES)) * 1.5
    return X, y, X_test


def _prior_gram(X):
    # GaussianPrior(std=1, fan_in_scaling=True): weights N(0, 1/d), bias N(0, 1)
    phi = np.hstack([X, np.ones((len(X), 1))])
    prior_var = np.r_[np.full(X.shape[1], 1.0 / X.shape[1]), 1.0]
    return phi, prior_var, phi @ np.diag(prior_var) @ phi.T


def _exact_fixed_noise(X, y, X_test, noise_std):
    """Log evidence (original units) and predictive of Bayesian linear regression."""
    y_mean, y_std = y.mean(), y.std()
    z = (y - y_mean) / y_std
    phi, prior_var, gram = _prior_gram(X)
    log_z = multivariate_normal(np.zeros(len(z)), gram + noise_std**2 * np.eye(len(z))).logpdf(z)
    tau = 1.0 / noise_std**2
    cov = np.linalg.inv(tau * phi.T @ phi + np.diag(1.0 / prior_var))
    mean = cov @ (tau * phi.T @ z)
    phi_t = np.hstack([X_test, np.ones((len(X_test), 1))])
    f_mean = phi_t @ mean
    f_var = np.einsum("ij,jk,ik->i", phi_t, cov, phi_t)
    return (
        log_z - len(z) * np.log(y_std),
        f_mean * y_std + y_mean,
        np.sqrt(f_var) * y_std,
        np.sqrt(f_var + 1.0 / tau) * y_std,
    )


def _exact_inferred_noise_evidence(X, y):
    """Log evidence with tau ~ Gamma(1, 1e-3) integrated on a fine grid of log tau."""
    y_mean, y_std = y.mean(), y.std()
    z = (y - y_mean) / y_std
    _, _, gram = _prior_gram(X)
    log_tau = np.linspace(-6.0, 10.0, 4001)
    log_joint = np.empty_like(log_tau)
    for i, lt in enumerate(log_tau):
        lik = multivariate_normal(np.zeros(len(z)), gram + np.exp(-lt) * np.eye(len(z)))
        # Gamma(1, b) density b exp(-b tau), times the Jacobian tau of log tau
        log_joint[i] = lik.logpdf(z) + np.log(1e-3) - 1e-3 * np.exp(lt) + lt
    step = log_tau[1] - log_tau[0]
    return logsumexp(log_joint) + np.log(step) - len(z) * np.log(y_std)


def _linear(method, **params):
    defaults = {"hidden_layer_sizes": (), "activation": "identity", "random_state": 0}
    return BayesianMLPRegressor(method=method, **{**defaults, **params})


@pytest.mark.parametrize("seed", [0, 1])
def test_fixed_noise_evidence_and_predictive_match_closed_form(seed):
    X, y, X_test = _data(seed)
    noise_std = 0.3
    reg = _linear(SMC(), n_samples=2000, noise_std=noise_std, random_state=seed).fit(X, y)
    exact_log_z, exact_mean, exact_epi, exact_total = _exact_fixed_noise(X, y, X_test, noise_std)
    assert abs(reg.log_evidence_ - exact_log_z) < 0.5, (reg.log_evidence_, exact_log_z)

    mean, total = reg.predict(X_test, return_std=True)
    epi = reg.predict_std(X_test, kind="epistemic")
    ess = reg.diagnostics_["ess"]
    assert ess > 500, ess
    mcse = exact_epi / np.sqrt(ess)
    assert np.all(np.abs(mean - exact_mean) < 4 * mcse), (mean - exact_mean) / mcse
    np.testing.assert_allclose(epi, exact_epi, rtol=0.10)
    np.testing.assert_allclose(total, exact_total, rtol=0.03)


def test_inferred_noise_evidence_matches_quadrature():
    X, y, _ = _data(2)
    reg = _linear(SMC(), n_samples=2000, random_state=2).fit(X, y)
    exact = _exact_inferred_noise_evidence(X, y)
    assert abs(reg.log_evidence_ - exact) < 0.5, (reg.log_evidence_, exact)
    # every particle carries a noise draw from its conditional, near the true noise sd
    assert 0.3 < reg.noise_std_ < 0.55


@pytest.mark.parametrize("prior", ["gaussian", "logistic"])
def test_logistic_regression_evidence_matches_grid(prior):
    from scipy import stats

    rng = np.random.default_rng(3)
    x = rng.standard_normal(80)
    labels = (rng.random(80) < expit(1.5 * x - 0.5)).astype(int)
    clf = BayesianMLPClassifier(
        hidden_layer_sizes=(), method=SMC(), prior=prior, n_samples=2000, random_state=3
    ).fit(x[:, None], labels)
    # prior: weight and bias N(0, 1) (fan-in 1) or standard logistic; a grid over +-8
    # (+-20 for the heavier logistic tails) holds all the posterior mass
    half = 8.0 if prior == "gaussian" else 20.0
    grid = np.linspace(-half, half, 801)
    w, b = np.meshgrid(grid, grid, indexing="ij")
    f = w[..., None] * x + b[..., None]
    loglik = np.sum(labels * f - np.logaddexp(0.0, f), axis=-1)
    law = stats.norm if prior == "gaussian" else stats.logistic
    log_prior = law.logpdf(w) + law.logpdf(b)
    exact = logsumexp(loglik + log_prior) + 2 * np.log(grid[1] - grid[0])
    assert abs(clf.log_evidence_ - exact) < 0.5, (clf.log_evidence_, exact)


def test_evidence_is_in_original_units():
    # rescaling y by c multiplies its density by c^-n; nothing else changes
    X, y, _ = _data(4)
    small = _linear(SMC(), n_samples=300, noise_std=0.3).fit(X, y)
    big = _linear(SMC(), n_samples=300, noise_std=0.3).fit(X, 1000.0 * y)
    assert big.log_evidence_ == pytest.approx(small.log_evidence_ - N_ROWS * np.log(1000.0))


def test_tempering_schedule_keeps_the_target_ess():
    X, y, _ = _data(5)
    target_ess = 0.6
    reg = _linear(SMC(target_ess=target_ess, resample_threshold=1.0), n_samples=500).fit(X, y)
    smc = reg.diagnostics_["smc"]
    lam = smc["lambda"]
    assert lam[-1] == 1.0 and np.all(np.diff(lam) > 0)
    # with resampling every stage the weights before each step are equal, so the ESS after
    # reweighting is the conditional ESS the bisection solved for (the last step may stop
    # short of it at lambda = 1)
    assert np.all(smc["resampled"])
    np.testing.assert_allclose(smc["ess"][:-1], target_ess * 500, rtol=1e-6)
    assert smc["ess"][-1] >= target_ess * 500 * (1 - 1e-6)
    assert smc["n_stages"] == len(lam) == len(smc["accept_rate"])
    assert smc["step_size"].shape == smc["n_leapfrog"].shape == (len(lam), 500)
    assert reg.diagnostics_["n_grad_evals"] == smc["n_grad_evals"] > 0


def test_step_size_and_path_length_tuning():
    X, y, _ = _data(6)
    reg = _linear(SMC(), n_samples=500).fit(X, y)
    smc = reg.diagnostics_["smc"]
    eps, n_leap = smc["step_size"], smc["n_leapfrog"]
    # the talk's start, eps ~ U(0, 0.1) and L ~ U{1..50}, over its whole range
    assert 0 < eps[0].min() < 0.005 and 0.095 < eps[0].max() < 0.1
    assert n_leap[0].min() == 1 and n_leap[0].max() == 50
    # every new L is a previous L moved by -1, 0 or +1, and every new eps is positive
    for before, after in zip(n_leap[:-1], n_leap[1:], strict=True):
        assert after.max() <= before.max() + 1 and after.min() >= max(1, before.min() - 1)
    assert np.all(eps > 0)
    # selection by jumping distance per gradient prefers the larger of those tiny steps
    assert np.median(eps[-1]) > np.median(eps[0])


def test_max_leapfrog_bounds_every_path_length():
    X, y, _ = _data(6)
    reg = _linear(SMC(max_leapfrog=5), n_samples=200).fit(X, y)
    n_leap = reg.diagnostics_["smc"]["n_leapfrog"]
    assert n_leap.max() == 5 and n_leap.min() >= 1


def test_conditional_ess_with_unequal_weights():
    # the exponent keeps the conditional ESS N (sum W w)^2 / sum W w^2 of the incremental
    # weights w given the current weights W (Zhou, Johansen & Aston 2016), not their ESS
    from skbnn.methods.smc import _TemperedLoglik
    from skbnn.target import Target

    rng = np.random.default_rng(13)
    X, y, _ = _data(13)
    target = Target(X, (y - y.mean()) / y.std(), (), "identity", "gaussian", np.ones(4))
    tempered = _TemperedLoglik(target)
    n = 400
    stats = np.zeros((n, 3))
    stats[:, 0] = -50.0 * rng.exponential(size=n)
    logw = rng.normal(scale=1.5, size=n)
    logw -= logsumexp(logw)
    lam = 0.1
    ll_prev = tempered(stats, lam)
    new = SMC(target_ess=0.5)._next_lambda(tempered, stats, lam, ll_prev, logw)
    assert lam < new < 1.0
    w, inc = np.exp(logw), np.exp((new - lam) * stats[:, 0])
    cess = (w @ inc) ** 2 / (w @ inc**2)
    assert cess == pytest.approx(0.5, rel=1e-8)
    # and not the plain ESS of the incremental weights, which differs here
    assert inc.sum() ** 2 / (inc**2).sum() / n != pytest.approx(0.5, rel=1e-2)


@pytest.mark.parametrize("scheme", [_systematic, _multinomial, _residual])
def test_resampling_never_picks_a_zero_weight(scheme):
    w = np.array([0.0, 0.5, 0.0, 0.5, 0.0])
    rng = np.random.default_rng(14)
    for _ in range(200):
        assert not np.isin(scheme(w, rng), [0, 2, 4]).any()


@pytest.mark.parametrize("scheme", [_systematic, _multinomial, _residual])
def test_resampling_is_unbiased(scheme):
    rng = np.random.default_rng(7)
    w = rng.dirichlet(np.full(20, 1.0))
    reps = 4000
    counts = np.zeros(20)
    sq = np.zeros(20)
    for _ in range(reps):
        c = np.bincount(scheme(w, rng), minlength=20)
        assert c.sum() == 20
        counts += c
        sq += c**2
    mean = counts / reps
    # the sample variance, floored by the multinomial's for counts that rarely vary
    var = np.maximum(sq / reps - mean**2, 20 * w * (1 - w))
    se = np.sqrt(var / reps)
    assert np.all(np.abs(mean - 20 * w) < 4 * se), (mean - 20 * w) / se


def test_systematic_and_residual_keep_the_integer_part():
    w = np.array([0.26, 0.49, 0.0, 0.25])
    rng = np.random.default_rng(8)
    for scheme in (_systematic, _residual):
        for _ in range(50):
            c = np.bincount(scheme(w, rng), minlength=4)
            assert np.all(c >= np.floor(4 * w)) and np.all(c <= np.ceil(4 * w))


@pytest.mark.parametrize("resampling", ["systematic", "residual", "multinomial"])
def test_every_resampling_scheme_fits(resampling):
    X, y, _ = _data(9)
    reg = _linear(SMC(resampling=resampling), n_samples=200, noise_std=0.3).fit(X, y)
    exact_log_z = _exact_fixed_noise(X, y, X[:1], 0.3)[0]
    # 200 particles: the evidence's sd is about 0.25 nats
    assert abs(reg.log_evidence_ - exact_log_z) < 1.25


def test_same_seed_same_result_for_any_n_jobs():
    X, y, _ = _data(10)
    net = {"hidden_layer_sizes": (3,), "activation": "tanh", "n_samples": 100}
    one = BayesianMLPRegressor(method=SMC(), n_jobs=1, random_state=0, **net).fit(X, y)
    two = BayesianMLPRegressor(method=SMC(), n_jobs=2, random_state=0, **net).fit(X, y)
    np.testing.assert_array_equal(one.posterior_.thetas, two.posterior_.thetas)
    np.testing.assert_array_equal(one.posterior_.weights, two.posterior_.weights)
    assert one.log_evidence_ == two.log_evidence_
    other = BayesianMLPRegressor(method=SMC(), n_jobs=2, random_state=1, **net).fit(X, y)
    assert other.log_evidence_ != one.log_evidence_


@pytest.mark.parametrize("max_stages", [1, 2])
def test_max_stages_warns_and_still_ends_at_the_posterior(max_stages):
    X, y, _ = _data(11)
    with pytest.warns(ConvergenceWarning, match=f"max_stages={max_stages} at lambda="):
        reg = _linear(SMC(max_stages=max_stages), n_samples=100, noise_std=0.3).fit(X, y)
    assert reg.diagnostics_["smc"]["lambda"][-1] == 1.0
    assert reg.diagnostics_["n_stages"] == max_stages


def test_max_stages_that_suffice_do_not_warn():
    import warnings

    X, y, _ = _data(11)
    free = _linear(SMC(), n_samples=100, noise_std=0.3).fit(X, y)
    n_stages = free.diagnostics_["n_stages"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        capped = _linear(SMC(max_stages=n_stages), n_samples=100, noise_std=0.3).fit(X, y)
    assert capped.log_evidence_ == free.log_evidence_


def test_smc_refuses_noise_inside_theta():
    from skbnn.target import Target

    X, y, _ = _data(15)
    target = Target(X, y, (), "identity", "gaussian", np.ones(4), noise="theta")
    with pytest.raises(ValueError, match="noise fixed or marginalized"):
        SMC().run(target, 10, 0, 1, 0)


def test_refit_with_mcmc_drops_the_evidence():
    from skbnn.methods import NUTS

    X, y, _ = _data(12)
    reg = _linear(SMC(), n_samples=100, noise_std=0.3).fit(X, y)
    assert np.isfinite(reg.log_evidence_)
    reg.set_params(method=NUTS(n_chains=2, n_warmup=50)).fit(X, y)
    assert not hasattr(reg, "log_evidence_")


@pytest.mark.parametrize("kind", [0, 1], ids=["gaussian", "logistic"])
def test_hmc_moves_leave_a_non_gaussian_target_invariant(kind):
    # prior-only target (lambda = 0): exact prior draws must stay prior draws after many
    # moves with mixed step sizes and path lengths, for a Gaussian and a logistic prior
    from scipy import stats

    from skbnn.kernels import smc as ksmc
    from skbnn.target import Target

    rng = np.random.default_rng(16)
    X, y = rng.standard_normal((30, 1)), rng.standard_normal(30)
    target = Target(X, y, (), "identity", "gaussian", np.ones(2))
    target.set_prior(np.ones(2), kind)
    tgt = target.as_tuple()
    tgt[7][2] = 0.0
    n, d = 20000, 2
    thetas = target.sample_prior(rng, n)
    grads, logps, st = np.zeros((n, d)), np.zeros(n), np.zeros((n, 3))
    inv_m = np.full(d, 2.0)
    out = (np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64))
    for _ in range(20):
        eps, n_leap = rng.uniform(0.05, 0.6, n), rng.integers(1, 20, n)
        z, u = rng.standard_normal((n, d)), rng.random(n)
        ksmc.hmc_moves(thetas, grads, logps, st, eps, n_leap, inv_m, z, u, tgt,
                       target.prior_std[None, :], np.zeros((n, 0)), 0, n, True, *out)  # fmt: skip
    law = stats.logistic if kind else stats.norm
    for j in range(d):
        assert stats.kstest(thetas[:, j], law.cdf).pvalue > 0.01
