"""Samplers against closed forms: with no hidden layer the regressor is Bayesian linear
regression, whose posterior, predictive distribution and noise posterior are known.

Tolerances come from Monte Carlo error: the predictive mean must lie within 4 Monte Carlo
standard errors (posterior sd / sqrt(ESS), the ESS estimated from the chains); the
relative Monte Carlo error of a standard deviation is about 1 / sqrt(2 ESS), so with the
ESS these runs reach (> 1500) the 10 % band on the epistemic sd is over 5 standard errors
wide, and the 3 % band on the total sd (which is mostly the known noise) is wider still.
"""

import numpy as np
import pytest
from scipy.special import logsumexp

from skbnn import BayesianMLPRegressor
from skbnn.diagnostics import ess_mean
from skbnn.methods import HMC, MALA, NUTS, AdaptiveMetropolis

N_ROWS, N_FEATURES, NOISE = 60, 3, 0.4


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_ROWS, N_FEATURES))
    y = X @ np.array([1.0, -0.5, 0.25]) + 2.0 + NOISE * rng.standard_normal(N_ROWS)
    X_test = rng.standard_normal((5, N_FEATURES)) * 1.5
    return X, y, X_test


def _closed_form(X, y, X_test, noise_std):
    """Posterior predictive of Bayesian linear regression on the standardized target."""
    y_mean, y_std = y.mean(), y.std()
    z = (y - y_mean) / y_std
    phi = np.hstack([X, np.ones((len(X), 1))])
    # GaussianPrior(std=1, fan_in_scaling=True): weights N(0, 1/d), bias N(0, 1)
    prior_var = np.r_[np.full(X.shape[1], 1.0 / X.shape[1]), 1.0]
    tau = 1.0 / noise_std**2
    precision = tau * phi.T @ phi + np.diag(1.0 / prior_var)
    cov = np.linalg.inv(precision)
    mean = cov @ (tau * phi.T @ z)
    phi_t = np.hstack([X_test, np.ones((len(X_test), 1))])
    f_mean = phi_t @ mean
    f_var = np.einsum("ij,jk,ik->i", phi_t, cov, phi_t)
    return (
        f_mean * y_std + y_mean,
        np.sqrt(f_var) * y_std,
        np.sqrt(f_var + 1.0 / tau) * y_std,
    )


def _check_predictive(reg, X, y, X_test, exact_mean, exact_epi, exact_total, min_ess):
    """The fitted linear model's predictive against the exact one, within Monte Carlo error."""
    mean, total = reg.predict(X_test, return_std=True)
    epi = reg.predict_std(X_test, kind="epistemic")
    # Monte Carlo standard error of each predictive mean from the chains' ESS
    n_chains, n_draws = reg.posterior_.chain_shape
    thetas = reg.posterior_.thetas.reshape(n_chains, n_draws, -1)
    phi_t = np.hstack([X_test, np.ones((len(X_test), 1))])
    f = np.einsum("cdp,np->ncd", thetas, phi_t) * y.std() + y.mean()
    ess = np.array([ess_mean(fi) for fi in f])
    assert ess.min() > min_ess, ess
    mcse = exact_epi / np.sqrt(ess)
    assert np.all(np.abs(mean - exact_mean) < 4 * mcse), (mean - exact_mean) / mcse
    np.testing.assert_allclose(epi, exact_epi, rtol=0.10)
    np.testing.assert_allclose(total, exact_total, rtol=0.03)


@pytest.mark.parametrize(
    "method",
    [
        NUTS(n_chains=4, n_warmup=400),
        HMC(n_chains=4, n_warmup=400),
        NUTS(n_chains=4, n_warmup=400, metric="dense"),
        HMC(n_chains=4, n_warmup=400, metric="dense"),
        NUTS(n_chains=4, n_warmup=400, gibbs_output_layer=True),
        NUTS(n_chains=4, n_warmup=400, n_temperatures=3),
        HMC(n_chains=4, n_warmup=400, n_temperatures=3),
    ],
    ids=["nuts", "hmc", "nuts-dense", "hmc-dense", "nuts-gibbs-output", "nuts-pt", "hmc-pt"],
)
def test_linear_regression_posterior_predictive(method):
    _check_linear_regression(method, n_samples=4000)


@pytest.mark.parametrize("method", [MALA(), MALA(metric="dense")], ids=["mala", "mala-dense"])
def test_linear_regression_posterior_predictive_mala(method):
    # one gradient per draw: ten times the draws of NUTS for the same ESS bar
    _check_linear_regression(method, n_samples=40000)


@pytest.mark.parametrize("variant", ["dense", "diagonal"], ids=["amcmc-dense", "amcmc-diagonal"])
def test_linear_regression_posterior_predictive_adaptive_metropolis(variant):
    # a random walk: twenty times the draws of NUTS for the same ESS bar
    _check_linear_regression(AdaptiveMetropolis(variant=variant), n_samples=80000)


def _check_linear_regression(method, n_samples):
    X, y, X_test = _data()
    noise_std = 0.5  # fixed, on the standardized scale
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(),
        activation="identity",
        method=method,
        n_samples=n_samples,
        noise_std=noise_std,
        random_state=0,
    ).fit(X, y)
    _check_predictive(reg, X, y, X_test, *_closed_form(X, y, X_test, noise_std), min_ess=1500)
    assert reg.diagnostics_["divergences"] == 0
    assert reg.diagnostics_["rhat_loglik"] < 1.01


def _inferred_noise_quadrature(X, y, X_test):
    """Posterior of the noise and predictive at ``X_test`` by quadrature over the precision.

    Integrating the weights out, z ~ N(0, Phi S Phi^T + I / tau) on the standardized target
    z; with the Gamma(1, 1e-3) prior on tau the posterior of log tau is one-dimensional and a
    fine grid is exact. Given tau the predictive is the fixed-noise closed form, so its
    moments are grid averages. Returns E[sigma], sd[sigma], and the predictive mean,
    epistemic sd and total sd at ``X_test``, all in original units.
    """
    y_mean, y_std = y.mean(), y.std()
    z = (y - y_mean) / y_std
    phi = np.hstack([X, np.ones((len(X), 1))])
    phi_t = np.hstack([X_test, np.ones((len(X_test), 1))])
    prior_var = np.r_[np.full(X.shape[1], 1.0 / X.shape[1]), 1.0]
    k = phi @ np.diag(prior_var) @ phi.T
    log_tau = np.linspace(-3, 8, 2001)
    log_post = np.empty_like(log_tau)
    f_mean = np.empty((log_tau.size, len(X_test)))
    f_var = np.empty_like(f_mean)
    for i, lt in enumerate(log_tau):
        cov = k + np.eye(len(z)) * np.exp(-lt)
        sign, logdet = np.linalg.slogdet(cov)
        log_lik = -0.5 * (logdet + z @ np.linalg.solve(cov, z))
        # Gamma(1, 1e-3) on tau, with the Jacobian of log tau
        log_post[i] = log_lik + lt - 1e-3 * np.exp(lt)
        tau = np.exp(lt)
        post_cov = np.linalg.inv(tau * phi.T @ phi + np.diag(1.0 / prior_var))
        f_mean[i] = phi_t @ (post_cov @ (tau * phi.T @ z))
        f_var[i] = np.einsum("ij,jk,ik->i", phi_t, post_cov, phi_t)
    w = np.exp(log_post - logsumexp(log_post))
    sigma = np.exp(-0.5 * log_tau)
    sigma_mean = w @ sigma
    sigma_sd = np.sqrt(w @ sigma**2 - sigma_mean**2)
    mean = w @ f_mean
    epi_var = w @ (f_var + f_mean**2) - mean**2
    total_var = epi_var + w @ sigma**2
    return (
        sigma_mean * y_std,
        sigma_sd * y_std,
        mean * y_std + y_mean,
        np.sqrt(epi_var) * y_std,
        np.sqrt(total_var) * y_std,
    )


@pytest.mark.parametrize(
    "method",
    [
        NUTS(n_chains=4, n_warmup=300),
        NUTS(n_chains=4, n_warmup=300, noise_update="gibbs"),
        NUTS(n_chains=4, n_warmup=300, gibbs_output_layer=True),
        NUTS(n_chains=4, n_warmup=300, noise_update="gibbs", gibbs_output_layer=True),
        HMC(n_chains=4, n_warmup=300),
        NUTS(n_chains=4, n_warmup=300, n_temperatures=4, max_temperature=3.0),
        NUTS(n_chains=4, n_warmup=300, n_temperatures=4, max_temperature=3.0, noise_update="gibbs"),
        MALA(),
        AdaptiveMetropolis(),
    ],
    ids=[
        "nuts",
        "nuts-gibbs-noise",
        "nuts-gibbs-output",
        "nuts-gibbs-both",
        "hmc",
        "nuts-pt",
        "nuts-pt-gibbs-noise",
        "mala",
        "amcmc",
    ],  # fmt: skip
)
def test_inferred_noise_matches_quadrature(method):
    X, y, X_test = _data(seed=1)
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(),
        activation="identity",
        method=method,
        n_samples={MALA: 40000, AdaptiveMetropolis: 80000}.get(type(method), 4000),
        random_state=1,
    ).fit(X, y)
    sigma_mean, sigma_sd, exact_mean, exact_epi, exact_total = _inferred_noise_quadrature(
        X, y, X_test
    )
    n_chains, n_draws = reg.posterior_.chain_shape
    sd_draws = y.std() / np.sqrt(reg.posterior_.noise_precision[:, 0])
    ess = ess_mean(sd_draws.reshape(n_chains, n_draws))
    assert abs(reg.noise_std_ - sigma_mean) < 4 * sigma_sd / np.sqrt(ess)

    _check_predictive(reg, X, y, X_test, exact_mean, exact_epi, exact_total, min_ess=1000)
