"""Adaptive annealed SMC against closed forms, and its mechanics.

With no hidden layer the regressor is Bayesian linear regression, whose evidence and
predictive are known exactly (with the noise fixed, or by one-dimensional quadrature over
the noise precision when it is inferred), and a one-feature logistic regression has two
parameters, so its evidence is a two-dimensional integral a grid computes exactly.

Tolerances. The relative variance of the evidence estimate is about the sum over stages of
``1 / ESS_t - 1 / N`` (perfect mixing, Chopin 2004); each stage's exponent keeps the
conditional ESS at ``target_ess * N``, so that is ``n_stages * (1 / target_ess - 1) / N``,
computed from each run's own stage count (:func:`_evidence_sd`). On these small targets the
moves mix well, and the error's sd measured over seeds is 0.7-1.3 times that figure (fixed
noise 0.9, 30 seeds; inferred noise 1.3, 30 seeds; logistic regression 1.2 and 0.7, 15
seeds each; 200 particles 1.0-1.2, 20 seeds per resampling scheme). Evidence checks allow 5
of them: at 1.3 times the figure that is 3.8 sd, two-sided normal 1.4e-4 (8.6e-4 even at
1.5 times). Predictive means and noise sd must lie within 4 Monte Carlo standard errors
(two-sided normal, 6.3e-5 each), with the ESS of the final weights (Kish) as the sample
size, which is at least ``resample_threshold * N``: a run whose ESS falls below that
resamples.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit, logsumexp
from scipy.stats import multivariate_normal
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import SMC
from skbnn.methods.smc import _multinomial, _residual, _systematic
from skbnn.priors import GaussianPrior, LogisticPrior

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


def _exact_inferred_noise(X, y):
    """Log evidence, E[sigma | y] and sd[sigma | y] (original units) with the noise inferred.

    The weights integrate out in closed form, so with tau ~ Gamma(1, 1e-3) everything is a
    one-dimensional integral over tau, on a fine grid of log tau: the evidence, and the
    posterior of tau that gives the moments of sigma = tau^-1/2 (the quadrature of
    ``test_exact_posterior._inferred_noise_quadrature``).
    """
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
    log_z = logsumexp(log_joint) + np.log(step) - len(z) * np.log(y_std)
    w = np.exp(log_joint - logsumexp(log_joint))
    sigma = np.exp(-0.5 * log_tau)
    sigma_mean = w @ sigma
    sigma_sd = np.sqrt(w @ sigma**2 - sigma_mean**2)
    return log_z, sigma_mean * y_std, sigma_sd * y_std


def _linear(method, **params):
    defaults = {"hidden_layer_sizes": (), "activation": "identity", "random_state": 0}
    return BayesianMLPRegressor(method=method, **{**defaults, **params})


def _evidence_sd(est):
    """The sd of ``log_evidence_`` that perfectly mixing moves would give (module docstring)."""
    d = est.diagnostics_
    rho = est.method.target_ess
    return np.sqrt(d["n_stages"] * (1.0 / rho - 1.0) / d["n_particles"])


@pytest.mark.statistical
@pytest.mark.parametrize("base", [0, 1])
def test_fixed_noise_evidence_and_predictive_match_closed_form(base, seed):
    # 1 + 5 + 5 comparisons (the total sd's error is the epistemic one's, scaled): 1e-4 +
    # 3.2e-4 + 3.2e-4, under 1e-3. 1.5 s.
    X, y, X_test = _data(base + seed)
    noise_std = 0.3
    reg = _linear(SMC(), n_samples=2000, noise_std=noise_std, random_state=base + seed)
    reg.fit(X, y)
    exact_log_z, exact_mean, exact_epi, exact_total = _exact_fixed_noise(X, y, X_test, noise_std)
    tol = 5 * _evidence_sd(reg)
    assert abs(reg.log_evidence_ - exact_log_z) < tol, (reg.log_evidence_, exact_log_z, tol)

    mean, total = reg.predict(X_test, return_std=True)
    epi = reg.predict_std(X_test, kind="epistemic")
    ess = reg.diagnostics_["ess"]
    assert ess >= 0.5 * 2000  # by construction (module docstring), not by chance
    mcse = exact_epi / np.sqrt(ess)
    assert np.all(np.abs(mean - exact_mean) < 4 * mcse), (mean - exact_mean) / mcse
    # the f draws are Gaussian, so their sd estimated from ESS draws has relative sd
    # 1 / sqrt(2 ESS); with the noise fixed, total^2 = epi^2 + noise^2 passes a relative
    # error on scaled by (epi / total)^2
    rel_se = 1.0 / np.sqrt(2 * ess)
    np.testing.assert_allclose(epi, exact_epi, rtol=4 * rel_se)
    np.testing.assert_array_less(
        np.abs(total / exact_total - 1), 4 * rel_se * (exact_epi / exact_total) ** 2
    )


@pytest.mark.statistical
def test_inferred_noise_evidence_and_noise_match_quadrature(seed):
    # every particle carries a noise draw from its Gamma conditional, so the weighted mean
    # of the particles' noise sd estimates E[sigma | y] with sd[sigma | y] / sqrt(ESS); the
    # quadrature over the noise precision gives both exactly. 1.4e-4 + 6.3e-5. 3 s.
    X, y, _ = _data(2 + seed)
    reg = _linear(SMC(), n_samples=2000, random_state=2 + seed).fit(X, y)
    exact, sigma_mean, sigma_sd = _exact_inferred_noise(X, y)
    tol = 5 * _evidence_sd(reg)
    assert abs(reg.log_evidence_ - exact) < tol, (reg.log_evidence_, exact, tol)
    mcse = sigma_sd / np.sqrt(reg.diagnostics_["ess"])
    assert abs(reg.noise_std_ - sigma_mean) < 4 * mcse, (reg.noise_std_, sigma_mean, mcse)


@pytest.mark.statistical
@pytest.mark.parametrize("prior", ["gaussian", "logistic"])
def test_logistic_regression_evidence_matches_grid(prior, seed):
    # 5 perfect-mixing sd (module docstring): 1.4e-4. 3-5 s.
    from scipy import stats

    rng = np.random.default_rng(3 + seed)
    x = rng.standard_normal(80)
    labels = (rng.random(80) < expit(1.5 * x - 0.5)).astype(int)
    # the objects, not the names: the classifier's "gaussian" is N(0, 3^2)
    prior_obj = GaussianPrior() if prior == "gaussian" else LogisticPrior()
    clf = BayesianMLPClassifier(
        hidden_layer_sizes=(), method=SMC(), prior=prior_obj, n_samples=2000,
        random_state=3 + seed,
    ).fit(x[:, None], labels)  # fmt: skip
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
    tol = 5 * _evidence_sd(clf)
    assert abs(clf.log_evidence_ - exact) < tol, (clf.log_evidence_, exact, tol)


def test_evidence_is_in_original_units():
    # rescaling y by c multiplies its density by c^-n; nothing else changes. c is a power of
    # two so that the standardized target is the same to the last bit: with c = 1000 its
    # last bits differ, the runs take different paths on some CPUs, and the two evidences
    # differ by Monte Carlo error (0.05 nats on a generic x86-64 build) instead of exactly
    c = 2.0**10
    X, y, _ = _data(4)
    small = _linear(SMC(), n_samples=300, noise_std=0.3).fit(X, y)
    big = _linear(SMC(), n_samples=300, noise_std=0.3).fit(X, c * y)
    np.testing.assert_array_equal(big.posterior_.thetas, small.posterior_.thetas)
    assert big.log_evidence_ == pytest.approx(small.log_evidence_ - N_ROWS * np.log(c), rel=1e-12)


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


@pytest.mark.statistical
def test_step_size_and_path_length_tuning(seed):
    X, y, _ = _data(6 + seed)
    reg = _linear(SMC(), n_samples=500, random_state=0 + seed).fit(X, y)
    smc = reg.diagnostics_["smc"]
    eps, n_leap = smc["step_size"], smc["n_leapfrog"]
    # the talk's start, eps ~ U(0, 0.1) and L ~ U{1..50}, over its whole range: 500 draws
    # miss an end 5 % wide with probability 0.95^500 = 7e-12, and miss L = 1 (or 50) with
    # probability 0.98^500 = 4e-5; 8e-5 in all
    assert 0 < eps[0].min() < 0.005 and 0.095 < eps[0].max() < 0.1
    assert n_leap[0].min() == 1 and n_leap[0].max() == 50
    # every new L is a previous L moved by -1, 0 or +1, and every new eps is positive
    for before, after in zip(n_leap[:-1], n_leap[1:], strict=True):
        assert after.max() <= before.max() + 1 and after.min() >= max(1, before.min() - 1)
    assert np.all(eps > 0)
    # selection by jumping distance per gradient prefers the larger of those tiny steps:
    # the median grew 2.0-2.5-fold over 30 seeds (log ratio 0.79, sd 0.055), so no growth
    # is 14 sd away
    assert np.median(eps[-1]) > np.median(eps[0])


@pytest.mark.statistical
def test_max_leapfrog_bounds_every_path_length(seed):
    X, y, _ = _data(6 + seed)
    reg = _linear(SMC(max_leapfrog=5), n_samples=200, random_state=0 + seed).fit(X, y)
    n_leap = reg.diagnostics_["smc"]["n_leapfrog"]
    # the bound is reached: 200 initial draws from U{1..5} all miss 5 with probability
    # 0.8^200 = 4e-20
    assert n_leap.max() == 5 and n_leap.min() >= 1


def test_conditional_ess_with_unequal_weights():
    # the exponent keeps the conditional ESS N (sum W w)^2 / sum W w^2 of the incremental
    # weights w given the current weights W (Zhou, Johansen & Aston 2016), not their ESS
    from skbnn.log_posterior import LogPosterior
    from skbnn.methods.smc import _TemperedLoglik

    rng = np.random.default_rng(13)
    X, y, _ = _data(13)
    target = LogPosterior(X, (y - y.mean()) / y.std(), (), "identity", "gaussian")
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

    # and the case tells the two rules apart: the exponent that keeps the plain ESS of the
    # incremental weights at N / 2 steps 30 % further (0.148 against 0.137), so an
    # implementation of the plain rule fails the assertion above by far more than its
    # tolerance (the weights are fixed draws of numpy's generator, the same on every CPU)
    def plain_ess(lam_new):
        inc = np.exp((lam_new - lam) * stats[:, 0])
        return inc.sum() ** 2 / (inc**2).sum() / n - 0.5

    plain = brentq(plain_ess, lam, 1.0)
    assert abs((plain - lam) / (new - lam) - 1.0) > 0.1, (plain, new)


@pytest.mark.parametrize("scheme", [_systematic, _multinomial, _residual])
def test_resampling_never_picks_a_zero_weight(scheme):
    w = np.array([0.0, 0.5, 0.0, 0.5, 0.0])
    rng = np.random.default_rng(14)
    for _ in range(200):
        assert not np.isin(scheme(w, rng), [0, 2, 4]).any()


@pytest.mark.statistical
@pytest.mark.parametrize("scheme", [_systematic, _multinomial, _residual])
def test_resampling_is_unbiased(scheme, seed):
    # each count's mean over 4000 independent rounds, within 4.5 standard errors: two-sided
    # normal 6.8e-6 each, 20 counts: 1.4e-4
    rng = np.random.default_rng(7 + seed)
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
    assert np.all(np.abs(mean - 20 * w) < 4.5 * se), (mean - 20 * w) / se


def test_systematic_and_residual_keep_the_integer_part():
    w = np.array([0.26, 0.49, 0.0, 0.25])
    rng = np.random.default_rng(8)
    for scheme in (_systematic, _residual):
        for _ in range(50):
            c = np.bincount(scheme(w, rng), minlength=4)
            assert np.all(c >= np.floor(4 * w)) and np.all(c <= np.ceil(4 * w))


@pytest.mark.statistical
@pytest.mark.parametrize("resampling", ["systematic", "residual", "multinomial"])
def test_every_resampling_scheme_fits(resampling, seed):
    # 200 particles: 5 perfect-mixing sd (about 0.2 nats each; module docstring), 1.4e-4
    X, y, _ = _data(9 + seed)
    reg = _linear(
        SMC(resampling=resampling), n_samples=200, noise_std=0.3, random_state=0 + seed
    ).fit(X, y)
    exact_log_z = _exact_fixed_noise(X, y, X[:1], 0.3)[0]
    tol = 5 * _evidence_sd(reg)
    assert abs(reg.log_evidence_ - exact_log_z) < tol, (reg.log_evidence_, exact_log_z, tol)


def test_same_seed_same_result_for_any_n_jobs():
    X, y, _ = _data(10)
    net = {"hidden_layer_sizes": (3,), "activation": "tanh", "n_samples": 100}
    one = BayesianMLPRegressor(method=SMC(), n_jobs=1, random_state=0, **net).fit(X, y)
    two = BayesianMLPRegressor(method=SMC(), n_jobs=2, random_state=0, **net).fit(X, y)
    np.testing.assert_array_equal(one.posterior_.thetas, two.posterior_.thetas)
    np.testing.assert_array_equal(one.posterior_.weights, two.posterior_.weights)
    assert one.log_evidence_ == two.log_evidence_
    # and the result comes from random_state: another seed starts from other prior draws
    # and moves them with other momenta, so no particle of one run is a particle of the
    # other (continuous draws coincide with probability 0). A seed that were ignored, or a
    # stream shared between seeds, would leave particles in common.
    other = BayesianMLPRegressor(method=SMC(), n_jobs=2, random_state=1, **net).fit(X, y)
    shared = (one.posterior_.thetas[:, None, :] == other.posterior_.thetas[None]).all(axis=2)
    assert not shared.any()


@pytest.mark.statistical
@pytest.mark.parametrize("max_stages", [1, 2])
def test_max_stages_warns_and_still_ends_at_the_posterior(max_stages, seed):
    # the warning is certain, not likely: the schedule needs 8-9 stages on these data (the
    # log-likelihoods of prior draws spread over hundreds of nats with the noise sd 0.3 on
    # the standardized scale), so one or two stages cannot reach lambda = 1 on their own
    X, y, _ = _data(11 + seed)
    with pytest.warns(ConvergenceWarning, match=f"max_stages={max_stages} at lambda="):
        reg = _linear(
            SMC(max_stages=max_stages), n_samples=100, noise_std=0.3, random_state=0 + seed
        ).fit(X, y)
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
    from skbnn.log_posterior import LogPosterior

    X, y, _ = _data(15)
    target = LogPosterior(X, y, (), "identity", "gaussian", noise="theta")
    with pytest.raises(ValueError, match="noise fixed or marginalized"):
        SMC().run(target, 10, 0, 1, 0)


def test_refit_with_mcmc_drops_the_evidence():
    from skbnn.methods import NUTS

    X, y, _ = _data(12)
    reg = _linear(SMC(), n_samples=100, noise_std=0.3).fit(X, y)
    assert np.isfinite(reg.log_evidence_)
    reg.set_params(method=NUTS(n_chains=2, n_warmup=50)).fit(X, y)
    assert not hasattr(reg, "log_evidence_")


@pytest.mark.statistical
@pytest.mark.parametrize("kind", [0, 1], ids=["gaussian", "logistic"])
def test_hmc_moves_leave_a_non_gaussian_target_invariant(kind, seed):
    # prior-only target (lambda = 0): exact prior draws must stay prior draws after many
    # moves with mixed step sizes and path lengths, for a Gaussian and a logistic prior.
    # The particles move independently, so the KS test is exact: p < 2.5e-4 for either of
    # the 2 coordinates has probability 5e-4. 2.5 s.
    from scipy import stats

    from skbnn.kernels import density as knet
    from skbnn.kernels import smc as ksmc
    from skbnn.log_posterior import LogPosterior

    rng = np.random.default_rng(16 + seed)
    X, y = rng.standard_normal((30, 1)), rng.standard_normal(30)
    from skbnn.priors import GaussianPrior, LogisticPrior

    prior = LogisticPrior() if kind else GaussianPrior(fan_in_scaling=False)
    target = LogPosterior(X, y, (), "identity", "gaussian", prior=prior)
    tgt = knet.density_target(target.kernel_target())
    tgt.cfg[0]["beta"] = 0.0
    n, d = 20000, 2
    thetas = target.sample_prior(rng, n)
    grads, logps, st = np.zeros((n, d)), np.zeros(n), np.zeros((n, 3))
    inv_m = np.full(d, 2.0)
    out = ksmc.MoveStats(np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64))
    particles = ksmc.Particles(thetas, grads, logps, st, target.prior_scale[None, :])
    for _ in range(20):
        eps, n_leap = rng.uniform(0.05, 0.6, n), rng.integers(1, 20, n)
        z, u = rng.standard_normal((n, d)), rng.random(n)
        proposals = ksmc.Proposals(eps, n_leap, z, u, np.zeros((n, 0)))
        ksmc.hmc_moves(particles, proposals, inv_m, tgt, 0, n, True, out)
    law = stats.logistic if kind else stats.norm
    for j in range(d):
        assert stats.kstest(thetas[:, j], law.cdf).pvalue > 2.5e-4


def test_max_time_ends_tempering_within_one_stage_and_says_how_far_it_got():
    # a budget far below what the 8-9 stages take: the first stage always reweights, the
    # deadline has passed before its moves start (certain: the reweighting alone takes
    # more than 1e-6 s), and the second jumps to lambda = 1 with a warning
    X, y, _ = _data(11)
    with pytest.warns(ConvergenceWarning, match=r"max_time=1e-06 s at lambda=.* after 1 stages"):
        reg = _linear(SMC(max_time=1e-6), n_samples=100, noise_std=0.3).fit(X, y)
    d = reg.diagnostics_
    assert d["stopped_because"] == "max_time" and d["n_stages"] == 2
    assert d["smc"]["lambda"][-1] == 1.0 and d["smc"]["lambda"][0] < 1.0
    np.testing.assert_array_equal(d["smc"]["moved"], [0.0, 0.0])
    free = _linear(SMC(), n_samples=100, noise_std=0.3).fit(X, y)
    assert free.diagnostics_["stopped_because"] == "lambda_reached_1"
    assert np.all(free.diagnostics_["smc"]["moved"] == 1.0)
    with pytest.raises(ValueError, match="max_time"):
        _linear(SMC(max_time=0), n_samples=100).fit(X, y)


def test_max_time_bounds_a_first_stage_that_would_take_ten_times_longer():
    # 400 particles on 3,000 rows: one stage's moves take 5-7 s on one thread of the
    # reference machine (over 3 s on any a few times faster), ten times the budget. The
    # moves stop at the deadline after the particle ranges already running, each a few
    # hundredths of a second, so the run ends near 0.5 s; 1.5 s leaves a second of stall
    X, y = make_friedman1(3000, 10, random_state=0)
    method = SMC(max_time=0.5)
    with pytest.warns(ConvergenceWarning, match=r"(?s)max_time=0.5 s.*moves at lambda=1 ran"):
        reg = BayesianMLPRegressor(method=method, n_samples=400, random_state=0).fit(X, y)
    d = reg.diagnostics_
    assert d["stopped_because"] == "max_time"
    assert d["smc"]["stage_time"].sum() < 3 * method.max_time
    assert d["smc"]["moved"][0] < 1.0
    assert np.all(np.isfinite(reg.predict(X[:5])))
