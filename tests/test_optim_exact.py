"""The optimization methods against exact answers.

Randomized MAP with a Gaussian likelihood of fixed noise and no hidden layer draws exactly
from the posterior of Bayesian linear regression (randomize-then-optimize), so its members
are independent exact draws: the Monte Carlo standard error of a member average is the
exact posterior sd over sqrt(members), with no ESS to estimate. Every comparison is a
z-score below ``Z = 4.5`` (two-sided normal tail 6.8e-6); a test makes at most 24, so its
false-alarm probability is below 1.7e-4 (union bound). The solver's own error (L-BFGS to a
gradient of 1e-10 on a quadratic) is far below these errors.

SWAG's moments are deterministic functions of the iterates, checked exactly; the draws of
a Gaussian posterior are checked against its stated covariance with z-scores of the same
bound.
"""

import numpy as np
import pytest

from skbnn import BayesianMLPRegressor
from skbnn.kernels import density as knet
from skbnn.kernels import optim as kopt
from skbnn.log_posterior import LogPosterior
from skbnn.methods import RandomizedMAP
from skbnn.posterior import GaussianPosterior

N_ROWS, N_FEATURES, NOISE = 60, 3, 0.4
Z = 4.5
MEMBERS = 1000


def _data(seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_ROWS, N_FEATURES))
    y = X @ np.array([1.0, -0.5, 0.25]) + 2.0 + NOISE * rng.standard_normal(N_ROWS)
    X_test = rng.standard_normal((5, N_FEATURES)) * 1.5
    return X, y, X_test


def _posterior(X, z, noise_std):
    """Exact posterior of the weights and bias on the standardized target ``z``."""
    phi = np.hstack([X, np.ones((len(X), 1))])
    # GaussianPrior(std=1, fan_in_scaling=True): weights N(0, 1/d), bias N(0, 1)
    prior_var = np.r_[np.full(X.shape[1], 1.0 / X.shape[1]), 1.0]
    precision = phi.T @ phi / noise_std**2 + np.diag(1.0 / prior_var)
    cov = np.linalg.inv(precision)
    return cov @ (phi.T @ z) / noise_std**2, cov


@pytest.mark.statistical
def test_randomized_map_is_exact_for_bayesian_linear_regression(seed):
    # 1000 independent exact draws: 4 parameter means, 4 variances, 5 predictive means and
    # 5 epistemic sds, each a z-score against the closed form (module docstring): 18
    # comparisons, false-alarm probability below 1.3e-4. About 3 s.
    X, y, X_test = _data(seed)
    noise_std = NOISE / y.std()  # on the standardized target, where noise_std lives
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(),
        activation="identity",
        method=RandomizedMAP(solver="lbfgs", tol=1e-10),
        n_samples=MEMBERS,
        noise_std=noise_std,
        random_state=0 + seed,
        n_jobs=2,
    ).fit(X, y)
    assert reg.diagnostics_["converged"].all()
    assert reg.diagnostics_["perturbed_targets"]
    z = (y - y.mean()) / y.std()
    mean, cov = _posterior(X, z, noise_std)
    thetas = reg.posterior_.thetas  # [w_1, w_2, w_3, b] on the standardized scale
    assert thetas.shape == (MEMBERS, N_FEATURES + 1)
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(thetas.mean(0) - mean) / (sd / np.sqrt(MEMBERS)), Z)
    # the sample variance of m normal draws has sd var * sqrt(2 / (m - 1))
    var_se = sd**2 * np.sqrt(2.0 / (MEMBERS - 1))
    np.testing.assert_array_less(np.abs(thetas.var(0, ddof=1) - sd**2) / var_se, Z)

    phi_t = np.hstack([X_test, np.ones((len(X_test), 1))])
    f_mean = phi_t @ mean
    f_sd = np.sqrt(np.einsum("ij,jk,ik->i", phi_t, cov, phi_t))
    pred = (reg.predict(X_test) - y.mean()) / y.std()
    np.testing.assert_array_less(np.abs(pred - f_mean) / (f_sd / np.sqrt(MEMBERS)), Z)
    # the epistemic sd is the sd of m normal draws: its own sd is about sd / sqrt(2 (m - 1))
    epi = reg.predict_std(X_test, kind="epistemic") / y.std()
    np.testing.assert_array_less(np.abs(epi - f_sd) / (f_sd / np.sqrt(2 * (MEMBERS - 1))), Z)
    # the noise is the fixed one, in original units
    assert reg.noise_std_ == pytest.approx(NOISE)


def test_swag_moments_are_those_of_the_snapshots():
    # deterministic: one full-batch step per epoch, a snapshot after every step; the kernel's
    # running mean, mean square and ring buffer of deviations against numpy on the iterates
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 2))
    target = LogPosterior(X, X[:, 0] - X[:, 1], (3,), "tanh", "gaussian", noise="theta")
    p = target.n_params
    theta = 0.3 * rng.standard_normal(p)
    tgt = knet.density_target(target.kernel_target())
    rows = np.arange(30)
    data = kopt.Batches(
        target.XT, target.YT, target.W, rows, np.empty(2 * 30), np.empty(30), np.empty(30)
    )
    opt = kopt.optimizer(1, p, momentum=0.5)  # SGD with momentum 0.5
    rank = 4
    mcfg = np.zeros(1, dtype=kopt.MOMENTS)
    mom = kopt.Moments(mcfg, np.zeros(p), np.zeros(p), np.zeros((rank, p)))
    ws = target.workspace()
    snapshots, means = [], []
    for _ in range(7):
        loss = np.empty(1)
        kopt.run_epochs(
            theta,
            tgt,
            data,
            30,
            np.array([0.05]),
            np.empty(0),
            np.ones(1, np.int8),
            opt,
            mom,
            ws,
            np.empty(p),
            np.empty(3),
            rng,
            loss,
        )
        assert np.isfinite(loss[0])
        snapshots.append(theta.copy())
        means.append(np.mean(snapshots, axis=0))
    snapshots = np.array(snapshots)
    assert mcfg[0]["n"] == 7
    np.testing.assert_allclose(mom.mean, snapshots.mean(0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(mom.sq_mean, (snapshots**2).mean(0), rtol=1e-12, atol=1e-14)
    # snapshot i's deviation from the running mean after it sits in row i % rank
    for i in range(7 - rank, 7):
        np.testing.assert_allclose(
            mom.dev[i % rank], snapshots[i] - means[i], rtol=1e-10, atol=1e-13
        )


@pytest.mark.statistical
def test_gaussian_posterior_draws_have_the_stated_covariance(seed):
    # 200,000 draws of a 4-parameter mixture component: the 10 distinct entries of the
    # sample covariance and the 4 means as z-scores against the stated moments. The sd of
    # a sample covariance entry is sqrt((S_ij^2 + S_ii S_jj) / n) for Gaussian draws. 14
    # comparisons at Z = 4.5: false-alarm probability below 1e-4. Drawing leaves the
    # moments untouched.
    rng = np.random.default_rng(3 + seed)
    mean = rng.standard_normal((1, 4))
    var = rng.uniform(0.1, 1.0, (1, 4))
    factor = rng.standard_normal((1, 3, 4)) * 0.5
    post = GaussianPosterior(mean, var, factor, n_draws=10, random_state=1 + seed)
    before = (post.mean.copy(), post.var.copy(), post.factor.copy())
    n = 200_000
    draws = post.sample(n, np.random.default_rng(2 + seed))
    for a, b in zip(before, (post.mean, post.var, post.factor), strict=True):
        np.testing.assert_array_equal(a, b)
    cov = np.diag(var[0]) + factor[0].T @ factor[0]
    np.testing.assert_allclose(post.covariance(), cov)
    se_mean = np.sqrt(np.diag(cov) / n)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean[0]) / se_mean, Z)
    sample = np.cov(draws, rowvar=False)
    se = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / n)
    iu = np.triu_indices(4)
    np.testing.assert_array_less(np.abs(sample - cov)[iu] / se[iu], Z)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_batched_gradient_is_the_single_one(n_jobs):
    # deterministic: the batched kernel on the shared pool gives bit-identical log densities
    # and gradients to one evaluation at a time, with the noise inside theta (which the
    # kernel writes into the target) and a tempered likelihood
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    target = LogPosterior(X, X[:, 0], (4,), "tanh", "gaussian", noise="theta")
    thetas = target.sample_prior(rng, 7)
    logp, grads = target.logp_grad_batch(thetas, beta=0.5, n_jobs=n_jobs)
    for theta, lp, g in zip(thetas, logp, grads, strict=True):
        lp1, g1 = target.logp_and_grad(theta, beta=0.5)
        assert lp == lp1
        np.testing.assert_array_equal(g, g1)


def test_adam_steps_are_the_textbook_ones():
    # deterministic: the Adam kernel, whose bias corrections are factors outside its loop,
    # takes Kingma and Ba's steps to within rounding, over gradients of 40 orders of
    # magnitude (the small ones below epsilon)
    from skbnn.kernels import optim as kopt
    from skbnn.kernels._compile import call

    rng = np.random.default_rng(0)
    n, scale, lr = 1000, -0.5, 1e-2
    theta = rng.standard_normal(n)
    opt = kopt.optimizer(0, n)
    m1, m2, ref = np.zeros(n), np.zeros(n), theta.copy()
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, 6):
        g = rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))
        call(kopt._adam, theta, g, scale, lr, opt, t)
        m1 = b1 * m1 + (1 - b1) * scale * g
        m2 = b2 * m2 + (1 - b2) * (scale * g) ** 2
        step = lr * (m1 / (1 - b1**t)) / (np.sqrt(m2 / (1 - b2**t)) + eps)
        # the kernel's own subtraction rounds at theta's scale
        assert np.all(np.abs(theta - ref + step) <= 1e-12 * np.abs(step) + 4e-16 * np.abs(ref))
        ref = theta.copy()
    np.testing.assert_allclose(opt.m1, m1, rtol=1e-15)
    np.testing.assert_allclose(opt.m2, m2, rtol=1e-15)
