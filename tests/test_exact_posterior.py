"""Samplers against closed forms: with no hidden layer the regressor is Bayesian linear
regression, whose posterior, predictive distribution and noise posterior are known.

Every comparison is a z-score: the estimate minus the exact value, over its Monte Carlo
standard error (MCSE). The MCSE of a posterior average is the sd of the averaged quantity
over sqrt(ESS), with the ESS of that very quantity estimated from the run's own chains
(``ess_mean``, Stan's multi-chain estimator): the draws of f for a predictive mean, of
(f - mean)^2 for the epistemic variance, of (f - mean)^2 + sigma^2 for the total variance,
of Phi((q - f) / sigma) for a predictive quantile q (delta method: that MCSE over the
predictive density at q). Errors of draws made afterwards (``sample_y``) come from their
number. A z-score must stay below ``Z = 4.5``: two-sided normal tail 6.8e-6 per comparison.
A case makes 15-20 comparisons, so its false-alarm probability is below 1.4e-4 (a union
bound; the comparisons at five points of one posterior are strongly correlated); the few
tests that make more say so. Over 30 offsets the 9750 z-scores of 12 cases had sd 0.97,
4.6 % beyond 2 and 0.19 % beyond 3 (normal: 4.55 %, 0.27 %), max 3.8: the MCSEs are right.

The MCSE from an estimated ESS is trustworthy only when the ESS is not tiny, so every ESS
must exceed ``MIN_ESS = 400``: a floor, not a performance claim. The runs reach 1100-3300
(NUTS, HMC and MAMS with 4000 draws, MALA with 10000, adaptive Metropolis with 30000), so only a
broken sampler goes below it. R-hat has no bar here (it had 1.01): at these ESS split R-hat
fluctuates by a few thousandths with chi-square tails, so a fixed bar is a chance outcome;
chains that disagree lower the multi-chain ESS, which borrows the between-chain variance,
and shift the averages, which the z-scores catch.
"""

from functools import lru_cache

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import logsumexp, ndtr

from skbnn import BayesianMLPRegressor
from skbnn.diagnostics import ess_mean
from skbnn.kernels.predict import mixture_quantiles
from skbnn.methods import HMC, MALA, MAMS, NUTS, SMC, AdaptiveMetropolis

N_ROWS, N_FEATURES, NOISE = 60, 3, 0.4
#: z-score bound: two-sided normal tail 6.8e-6 per comparison
Z = 4.5
#: floor on every ESS an MCSE is computed from (the runs reach three times more)
MIN_ESS = 400
#: draws per method for about the same ESS: MALA takes one gradient per draw, adaptive
#: Metropolis none, and both move less far per draw than a NUTS or HMC trajectory
N_DRAWS = {MALA: 10000, AdaptiveMetropolis: 30000}


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_ROWS, N_FEATURES))
    y = X @ np.array([1.0, -0.5, 0.25]) + 2.0 + NOISE * rng.standard_normal(N_ROWS)
    X_test = rng.standard_normal((5, N_FEATURES)) * 1.5
    return X, y, X_test


def _closed_form(X, y, X_test, noise_std, w=None):
    """Posterior predictive of Bayesian linear regression on the standardized target; with
    row weights ``w`` each row's likelihood is raised to its weight (weighted least squares,
    and the weighted mean and sd standardize the target)."""
    w = np.ones(len(y)) if w is None else w
    y_mean = np.average(y, weights=w)
    y_std = np.sqrt(np.average((y - y_mean) ** 2, weights=w))
    z = (y - y_mean) / y_std
    phi = np.hstack([X, np.ones((len(X), 1))])
    # GaussianPrior(std=1, fan_in_scaling=True): weights N(0, 1/d), bias N(0, 1)
    prior_var = np.r_[np.full(X.shape[1], 1.0 / X.shape[1]), 1.0]
    tau = 1.0 / noise_std**2
    precision = tau * (phi.T * w) @ phi + np.diag(1.0 / prior_var)
    cov = np.linalg.inv(precision)
    mean = cov @ (tau * (phi.T * w) @ z)
    phi_t = np.hstack([X_test, np.ones((len(X_test), 1))])
    f_mean = phi_t @ mean
    f_var = np.einsum("ij,jk,ik->i", phi_t, cov, phi_t)
    return (
        f_mean * y_std + y_mean,
        np.sqrt(f_var) * y_std,
        np.sqrt(f_var + 1.0 / tau) * y_std,
    )


def _noise_grid(X, y, X_test):
    """The exact posterior with inferred noise, as a mixture over a grid of precisions.

    Integrating the weights out, z ~ N(0, Phi S Phi^T + I / tau) on the standardized target
    z; with the Gamma(1, 1e-3) prior on tau the posterior of log tau is one-dimensional and a
    fine grid is exact. Given tau the predictive is the fixed-noise closed form. Returns the
    grid weights, tau, and the mean and variance of f given each tau at ``X_test``
    (standardized scale).
    """
    z = (y - y.mean()) / y.std()
    phi = np.hstack([X, np.ones((len(X), 1))])
    phi_t = np.hstack([X_test, np.ones((len(X_test), 1))])
    prior_var = np.r_[np.full(X.shape[1], 1.0 / X.shape[1]), 1.0]
    evals, evecs = np.linalg.eigh(phi @ np.diag(prior_var) @ phi.T)
    proj2 = (evecs.T @ z) ** 2
    log_tau = np.linspace(-3, 8, 2001)
    tau = np.exp(log_tau)
    marg_var = evals[None, :] + 1.0 / tau[:, None]
    log_lik = -0.5 * (np.log(marg_var).sum(axis=1) + (proj2 / marg_var).sum(axis=1))
    # Gamma(1, 1e-3) on tau, with the Jacobian of log tau
    log_post = log_lik + log_tau - 1e-3 * tau
    w = np.exp(log_post - logsumexp(log_post))
    post_cov = np.linalg.inv(tau[:, None, None] * (phi.T @ phi) + np.diag(1.0 / prior_var))
    coef = np.einsum("gij,j->gi", post_cov, phi.T @ z) * tau[:, None]
    f_mean = coef @ phi_t.T
    f_var = np.einsum("nj,gjk,nk->gn", phi_t, post_cov, phi_t)
    return w, tau, f_mean, f_var


def _inferred_noise_quadrature(X, y, X_test):
    """Posterior of the noise and predictive moments at ``X_test`` by quadrature.

    Returns E[sigma], sd[sigma], and the predictive mean, epistemic sd and total sd at
    ``X_test``, all in original units.
    """
    w, tau, f_mean, f_var = _noise_grid(X, y, X_test)
    y_mean, y_std = y.mean(), y.std()
    sigma = 1.0 / np.sqrt(tau)
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


@lru_cache
def _quadrature(data_seed):
    X, y, X_test = _data(data_seed)
    return _inferred_noise_quadrature(X, y, X_test)


def _exact_quantiles(X, y, X_test, probs, noise_std=None):
    """Exact predictive quantiles at ``X_test`` (original units), shape (n_points, n_probs).

    With fixed noise the predictive is Gaussian: mean + z_p * total sd. With inferred noise
    it is a scale mixture over the precision grid; its CDF is inverted by brentq.
    """
    probs = np.asarray(probs)
    if noise_std is not None:
        mean, _, total = _closed_form(X, y, X_test, noise_std)
        return mean[:, None] + stats.norm.ppf(probs)[None, :] * total[:, None]
    w, tau, f_mean, f_var = _noise_grid(X, y, X_test)
    loc = f_mean * y.std() + y.mean()
    scale = np.sqrt(f_var + 1.0 / tau[:, None]) * y.std()
    out = np.empty((len(X_test), len(probs)))
    for i in range(len(X_test)):
        lo, hi = loc[:, i].min() - 20 * scale.max(), loc[:, i].max() + 20 * scale.max()
        for j, p in enumerate(probs):
            cdf = lambda x, i=i, p=p: w @ ndtr((x - loc[:, i]) / scale[:, i]) - p  # noqa: E731
            out[i, j] = optimize.brentq(cdf, lo, hi, xtol=1e-12, rtol=1e-14)
    return out


def _draws(reg, X_test, y, output=0, w=None):
    """Per draw, the network output f at ``X_test`` and the noise variance, original units
    (``w``: the row weights the fit was given).

    Returns f of shape (n_points, n_chains, n_draws) and sigma^2 of shape (n_chains, n_draws).
    """
    Y = y.reshape(len(y), -1)
    w = np.ones(len(Y)) if w is None else w
    y_mean = np.average(Y[:, output], weights=w)
    y_std = np.sqrt(np.average((Y[:, output] - y_mean) ** 2, weights=w))
    k, d = Y.shape[1], X_test.shape[1]
    thetas = reg.posterior_.thetas
    w = thetas[:, : d * k].reshape(-1, d, k)[:, :, output]
    b = thetas[:, d * k + output]
    f = (w @ X_test.T + b[:, None]) * y_std + y_mean
    sigma2 = y_std**2 / np.broadcast_to(reg.posterior_.noise_precision, (len(thetas), k))[:, output]
    n_chains, n_draws = reg.posterior_.chain_shape
    return f.T.reshape(len(X_test), n_chains, n_draws), sigma2.reshape(n_chains, n_draws)


def _mcse(x):
    """MCSE of the average of ``x`` (n_chains, n_draws), from the ESS of ``x`` itself."""
    ess = ess_mean(x)
    assert ess > MIN_ESS, ess
    return x.std() / np.sqrt(ess)


def _column(a, output):
    return a if a.ndim == 1 else a[:, output]


def _predictive_z(reg, X_test, y, exact_mean, exact_epi, exact_total, output=0, w=None):
    """z-scores of the predictive mean, epistemic and total variance at each point."""
    mean, total = (_column(a, output) for a in reg.predict(X_test, return_std=True))
    epi = _column(reg.predict_std(X_test, kind="epistemic"), output)
    f, sigma2 = _draws(reg, X_test, y, output, w)
    z = []
    for i in range(len(X_test)):
        sq = (f[i] - f[i].mean()) ** 2
        z.append((mean[i] - exact_mean[i]) / _mcse(f[i]))
        z.append((epi[i] ** 2 - exact_epi[i] ** 2) / _mcse(sq))
        z.append((total[i] ** 2 - exact_total[i] ** 2) / _mcse(sq + sigma2))
    return np.array(z)


def _interval_z(reg, X_test, y, exact_q, coverages, output=0):
    """z-scores of ``predict_interval``'s bounds against the exact quantiles ``exact_q``.

    A bound q solves F(q) = p for the mixture CDF F over the draws; its error is that of
    F(q), the average of g = Phi((q - f) / sigma) over the draws, over the predictive
    density at q (delta method). The density is the draws' average of the Gaussian
    densities, whose own Monte Carlo error is of second order here.
    """
    f, sigma2 = _draws(reg, X_test, y, output)
    sigma = np.sqrt(sigma2)
    z = []
    for c, coverage in enumerate(coverages):
        bounds = [_column(b, output) for b in reg.predict_interval(X_test, coverage=coverage)]
        for side in range(2):
            for i in range(len(X_test)):
                q = exact_q[i, 2 * c + side]
                g = ndtr((q - f[i]) / sigma)
                density = np.mean(stats.norm.pdf(q, f[i], sigma))
                z.append((bounds[side][i] - q) * density / _mcse(g))
    return np.array(z)


def _probs(coverages):
    return np.ravel([[(1 - c) / 2, (1 + c) / 2] for c in coverages])


# ---------------------------------------------------------------------------------------
# fixed noise: the posterior is Gaussian
# ---------------------------------------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize(
    "method",
    [NUTS(n_chains=4, n_warmup=400), NUTS(n_chains=4, n_warmup=400, gibbs_output_layer=True)],
    ids=["nuts", "nuts-gibbs-output"],
)
def test_weighted_rows_give_weighted_linear_regression(method, seed):
    # sample_weight raises each row's likelihood to its weight: the posterior is weighted
    # least squares under the prior (the Gibbs draws of the output layer weight the Gram
    # matrix too). Fractional weights, 15 comparisons: false alarm < 1e-4.
    X, y, X_test = _data(0 + seed)
    w = np.random.default_rng(100 + seed).uniform(0.1, 4.0, len(y))
    noise_std = 0.5
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(),
        activation="identity",
        method=method,
        n_samples=4000,
        noise_std=noise_std,
        random_state=0 + seed,
    ).fit(X, y, sample_weight=w)
    exact = _closed_form(X, y, X_test, noise_std, w)
    z = _predictive_z(reg, X_test, y, *exact, w=w)
    assert np.all(np.abs(z) < Z), z
    # the weights matter here: the unweighted posterior is far from the weighted one
    z_unweighted = _predictive_z(reg, X_test, y, *_closed_form(X, y, X_test, noise_std), w=w)
    assert np.max(np.abs(z_unweighted)) > 2 * Z


@pytest.mark.statistical
@pytest.mark.parametrize(
    "method",
    [
        NUTS(n_chains=4, n_warmup=400),
        HMC(n_chains=4, n_warmup=400),
        NUTS(n_chains=4, n_warmup=400, metric="dense"),
        HMC(n_chains=4, n_warmup=400, metric="dense"),
        HMC(n_chains=4, n_warmup=400, metric="diagonal_grad"),
        NUTS(n_chains=4, n_warmup=400, metric="low_rank"),
        HMC(n_chains=4, n_warmup=400, metric="low_rank"),
        NUTS(n_chains=4, n_warmup=400, gibbs_output_layer=True),
        NUTS(n_chains=4, n_warmup=400, n_temperatures=3),
        HMC(n_chains=4, n_warmup=400, n_temperatures=3),
        MALA(n_warmup=1000, thin=1),
        MALA(n_warmup=1000, thin=1, metric="dense"),
        MALA(n_warmup=1000, thin=1, metric="diagonal_grad"),
        MALA(n_warmup=1000, thin=1, metric="low_rank"),
        AdaptiveMetropolis(variant="dense"),
        AdaptiveMetropolis(variant="diagonal"),
        # chains started at their MAPs: the start must not bias the draws after warm-up
        NUTS(n_chains=4, n_warmup=400, init="map"),
        HMC(n_chains=4, n_warmup=400, init="map"),
        MALA(n_warmup=1000, thin=1, init="map"),
        AdaptiveMetropolis(init="map"),
        MAMS(n_chains=4, n_warmup=400),
        MAMS(n_chains=4, n_warmup=400, integrator="leapfrog", metric="diagonal_grad"),
        MAMS(n_chains=4, n_warmup=400, init="map"),
    ],
    ids=[
        "nuts",
        "hmc",
        "nuts-dense",
        "hmc-dense",
        "hmc-diagonal-grad",
        "nuts-low-rank",
        "hmc-low-rank",
        "nuts-gibbs-output",
        "nuts-pt",
        "hmc-pt",
        "mala",
        "mala-dense",
        "mala-diagonal-grad",
        "mala-low-rank",
        "amcmc-dense",
        "amcmc-diagonal",
        "nuts-map",
        "hmc-map",
        "mala-map",
        "amcmc-map",
        "mams",
        "mams-leapfrog-diagonal-grad",
        "mams-map",
    ],  # fmt: skip
)
def test_linear_regression_posterior_predictive(method, seed):
    # 15 comparisons (mean, epistemic and total variance at 5 points): false alarm < 1e-4
    X, y, X_test = _data(0 + seed)
    noise_std = 0.5  # fixed, on the standardized scale
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(),
        activation="identity",
        method=method,
        n_samples=N_DRAWS.get(type(method), 4000),
        noise_std=noise_std,
        random_state=0 + seed,
    ).fit(X, y)
    z = _predictive_z(reg, X_test, y, *_closed_form(X, y, X_test, noise_std))
    assert np.all(np.abs(z) < Z), z
    # The posterior is a 4-d Gaussian: within the adapted step size's stability range the
    # energy error of a leapfrog path (or the log ratio of a Langevin or random-walk
    # proposal) is a quadratic form of a few sd, never the 1000 that counts as divergent.
    # Not a chance outcome: a divergence here means a broken integrator or adaptation.
    assert reg.diagnostics_["divergences"] == 0


@pytest.mark.statistical
@pytest.mark.parametrize(
    "method",
    [NUTS(n_chains=4, n_warmup=400), MALA(n_warmup=1000, thin=1), AdaptiveMetropolis()],
    ids=["nuts", "mala", "amcmc"],
)
def test_predict_interval_matches_exact_quantiles(method, seed):
    # 2 coverages x 2 bounds x 5 points = 20 comparisons: false alarm < 1.4e-4
    X, y, X_test = _data(0 + seed)
    reg = BayesianMLPRegressor(
        (), activation="identity", method=method, n_samples=N_DRAWS.get(type(method), 4000),
        noise_std=0.5, random_state=0 + seed,
    ).fit(X, y)  # fmt: skip
    coverages = (0.5, 0.9)
    exact_q = _exact_quantiles(X, y, X_test, _probs(coverages), noise_std=0.5)
    z = _interval_z(reg, X_test, y, exact_q, coverages)
    assert np.all(np.abs(z) < Z), z


@pytest.mark.statistical
def test_sample_y_matches_the_exact_predictive(seed):
    """Draws of ``sample_y`` against the exact Gaussian predictive.

    Each draw picks a posterior draw and adds noise, so given the posterior draws the
    n draws are independent draws of the fitted mixture: the error of their mean, variance,
    quantiles and covariance is the sampling error of n draws plus the mixture's own Monte
    Carlo error (from the chains' ESS), added in quadrature. Comparisons: mean, variance and
    3 quantiles at 5 points, the covariance of two points: 26 at Z = 4.5, 1.8e-4; and a KS
    test at one point against the fitted mixture's CDF (exact given the draws) at level
    1e-4. Together below 3e-4.
    """
    X, y, X_test = _data(0 + seed)
    reg = BayesianMLPRegressor(
        (), activation="identity", method=NUTS(n_chains=4, n_warmup=400), n_samples=4000,
        noise_std=0.5, random_state=0 + seed,
    ).fit(X, y)  # fmt: skip
    n = 20000
    ys = reg.sample_y(X_test, n_samples=n, random_state=1 + seed)
    assert ys.shape == (len(X_test), n)
    mean, epi, total = _closed_form(X, y, X_test, 0.5)
    f, sigma2 = _draws(reg, X_test, y)
    sigma = np.sqrt(sigma2)
    probs = np.array([0.05, 0.5, 0.95])
    exact_q = _exact_quantiles(X, y, X_test, probs, noise_std=0.5)
    z = []
    for i in range(len(X_test)):
        sq = (f[i] - f[i].mean()) ** 2
        dev = ys[i] - ys[i].mean()
        se_mean = np.sqrt(total[i] ** 2 / n + _mcse(f[i]) ** 2)
        z.append((ys[i].mean() - mean[i]) / se_mean)
        # the variance of a sample variance is (m4 - s^4) / n
        se_var = np.sqrt((np.mean(dev**4) - np.mean(dev**2) ** 2) / n + _mcse(sq + sigma2) ** 2)
        z.append((np.mean(dev**2) - total[i] ** 2) / se_var)
        for j, p in enumerate(probs):
            q = exact_q[i, j]
            density = stats.norm.pdf(q, mean[i], total[i])
            se_q = np.sqrt(p * (1 - p) / n + _mcse(ndtr((q - f[i]) / sigma)) ** 2) / density
            z.append((np.quantile(ys[i], p) - q) / se_q)
    # A draw is jointly coherent across rows: the covariance of two rows' draws is the
    # epistemic covariance. Two points far out on one ray, where the weights' uncertainty
    # dominates the noise, make it large (independent draws per row would give 0).
    X_ray = np.outer([4.0, 8.0], np.ones(N_FEATURES) / np.sqrt(N_FEATURES))
    pair = reg.sample_y(X_ray, n_samples=n, random_state=2 + seed)
    phi_ray = np.hstack([X_ray, np.ones((2, 1))])
    _, _, exact_cov = _linear_posterior(X, y, 0.5)
    cov = phi_ray[0] @ exact_cov @ phi_ray[1] * y.var()
    f_ray, _ = _draws(reg, X_ray, y)
    prod = (f_ray[0] - f_ray[0].mean()) * (f_ray[1] - f_ray[1].mean())
    d0, d1 = pair[0] - pair[0].mean(), pair[1] - pair[1].mean()
    se_cov = np.sqrt(np.var(d0 * d1) / n + _mcse(prod) ** 2)
    z.append((np.mean(d0 * d1) - cov) / se_cov)
    assert np.all(np.abs(z) < Z), np.array(z)
    assert cov > 2 * Z * se_cov, (cov, se_cov)  # about 25 se_cov

    i = int(np.argmax(epi / total))  # where the mixture is least like one Gaussian
    flat_f, flat_sigma = f[i].ravel(), sigma.ravel()
    sub = ys[i, :2000]
    fitted_cdf = ndtr((sub[:, None] - flat_f[None, :]) / flat_sigma[None, :]).mean(axis=1)
    assert stats.kstest(fitted_cdf, "uniform").pvalue > 1e-4


def _linear_posterior(X, y, noise_std):
    """Posterior mean and covariance of (weights, bias) on the standardized scale."""
    z = (y - y.mean()) / y.std()
    phi = np.hstack([X, np.ones((len(X), 1))])
    prior_var = np.r_[np.full(X.shape[1], 1.0 / X.shape[1]), 1.0]
    tau = 1.0 / noise_std**2
    cov = np.linalg.inv(tau * phi.T @ phi + np.diag(1.0 / prior_var))
    return phi, cov @ (tau * phi.T @ z), cov


def _two_outputs(seed):
    X, y, X_test = _data(seed)
    rng = np.random.default_rng(100 + seed)
    y2 = X @ np.array([-0.3, 0.8, 0.0]) - 1.0 + 0.2 * rng.standard_normal(N_ROWS)
    return X, np.column_stack([y, 10 * y2]), X_test


@pytest.mark.statistical
def test_multi_output_regression_is_one_linear_regression_per_output(seed):
    # Each output has its own standardization, weights, bias and (fixed) noise: the
    # posterior factorizes, and each output's predictive is its own closed form. 2 outputs
    # x 15 moments + 2 outputs x 20 interval bounds = 70 comparisons: false alarm < 5e-4.
    X, Y, X_test = _two_outputs(0 + seed)
    reg = BayesianMLPRegressor(
        (), activation="identity", method=NUTS(n_chains=4, n_warmup=400), n_samples=4000,
        noise_std=0.5, random_state=0 + seed,
    ).fit(X, Y)  # fmt: skip
    coverages = (0.5, 0.9)
    z = []
    for o in range(2):
        exact = _closed_form(X, Y[:, o], X_test, 0.5)
        z.append(_predictive_z(reg, X_test, Y, *exact, output=o))
        exact_q = _exact_quantiles(X, Y[:, o], X_test, _probs(coverages), noise_std=0.5)
        z.append(_interval_z(reg, X_test, Y, exact_q, coverages, output=o))
    z = np.concatenate(z)
    assert np.all(np.abs(z) < Z), z
    assert reg.sample_y(X_test, 3, random_state=seed).shape == (len(X_test), 2, 3)


# ---------------------------------------------------------------------------------------
# inferred noise: a scale mixture, by quadrature over the noise precision
# ---------------------------------------------------------------------------------------


def _check_noise(reg, y, sigma_mean, sigma_sd, output=0):
    """z-score of ``noise_std_`` (the posterior mean of sigma) against the quadrature."""
    _, sigma2 = _draws(reg, np.zeros((1, N_FEATURES)), y, output)
    ess = ess_mean(np.sqrt(sigma2))
    assert ess > MIN_ESS, ess
    noise = np.atleast_1d(reg.noise_std_)[output]
    return (noise - sigma_mean) / (sigma_sd / np.sqrt(ess))


@pytest.mark.statistical
@pytest.mark.parametrize(
    "method",
    [
        NUTS(n_chains=4, n_warmup=300),
        NUTS(n_chains=4, n_warmup=300, noise_update="gibbs"),
        NUTS(n_chains=4, n_warmup=300, gibbs_output_layer=True),
        NUTS(n_chains=4, n_warmup=300, noise_update="gibbs", gibbs_output_layer=True),
        HMC(n_chains=4, n_warmup=300),
        HMC(n_chains=4, n_warmup=300, noise_update="gibbs"),
        NUTS(n_chains=4, n_warmup=300, n_temperatures=4, max_temperature=3.0),
        NUTS(n_chains=4, n_warmup=300, n_temperatures=4, max_temperature=3.0, noise_update="gibbs"),
        MALA(n_warmup=1000, thin=1),
        MALA(n_warmup=1000, thin=1, noise_update="gibbs"),
        AdaptiveMetropolis(),
        AdaptiveMetropolis(noise_update="gibbs"),
        NUTS(n_chains=4, n_warmup=300, init="map"),
        NUTS(n_chains=4, n_warmup=300, noise_update="gibbs", init="map"),
        MALA(n_warmup=1000, thin=1, init="map"),
        MAMS(n_chains=4, n_warmup=300),
        MAMS(n_chains=4, n_warmup=300, noise_update="gibbs"),
    ],
    ids=[
        "nuts",
        "nuts-gibbs-noise",
        "nuts-gibbs-output",
        "nuts-gibbs-both",
        "hmc",
        "hmc-gibbs-noise",
        "nuts-pt",
        "nuts-pt-gibbs-noise",
        "mala",
        "mala-gibbs-noise",
        "amcmc",
        "amcmc-gibbs-noise",
        "nuts-map",
        "nuts-gibbs-noise-map",
        "mala-map",
        "mams",
        "mams-gibbs-noise",
    ],  # fmt: skip
)
def test_inferred_noise_matches_quadrature(method, seed):
    # 1 + 15 comparisons: false alarm < 1.1e-4
    X, y, X_test = _data(1 + seed)
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(),
        activation="identity",
        method=method,
        n_samples=N_DRAWS.get(type(method), 4000),
        random_state=1 + seed,
    ).fit(X, y)
    sigma_mean, sigma_sd, *exact = _quadrature(1 + seed)
    z = np.r_[_check_noise(reg, y, sigma_mean, sigma_sd), _predictive_z(reg, X_test, y, *exact)]
    assert np.all(np.abs(z) < Z), z


@pytest.mark.statistical
def test_predict_interval_with_inferred_noise_matches_the_scale_mixture(seed):
    # the predictive is a scale mixture of Gaussians over the noise precision, its exact
    # quantiles those of the quadrature's mixture; 20 comparisons: false alarm < 1.4e-4
    X, y, X_test = _data(1 + seed)
    reg = BayesianMLPRegressor(
        (), activation="identity", method=NUTS(n_chains=4, n_warmup=300), n_samples=4000,
        random_state=1 + seed,
    ).fit(X, y)  # fmt: skip
    coverages = (0.5, 0.9)
    exact_q = _exact_quantiles(X, y, X_test, _probs(coverages))
    z = _interval_z(reg, X_test, y, exact_q, coverages)
    assert np.all(np.abs(z) < Z), z


@pytest.mark.statistical
def test_multi_output_inferred_noise_is_one_noise_per_output(seed):
    # each output has its own noise precision with its own Gamma prior, integrated out of
    # the density separately: the posterior still factorizes, so each output matches the
    # quadrature on its own column (outputs with noise sds 0.4 and 2 in original units).
    # 2 x (1 + 15) comparisons: false alarm < 2.2e-4
    X, Y, X_test = _two_outputs(1 + seed)
    reg = BayesianMLPRegressor(
        (), activation="identity", method=NUTS(n_chains=4, n_warmup=300), n_samples=4000,
        random_state=1 + seed,
    ).fit(X, Y)  # fmt: skip
    assert reg.noise_std_.shape == (2,)
    z = []
    for o in range(2):
        sigma_mean, sigma_sd, *exact = _inferred_noise_quadrature(X, Y[:, o], X_test)
        z.append([_check_noise(reg, Y, sigma_mean, sigma_sd, output=o)])
        z.append(_predictive_z(reg, X_test, Y, *exact, output=o))
    z = np.concatenate(z)
    assert np.all(np.abs(z) < Z), z


# ---------------------------------------------------------------------------------------
# weighted draws (SMC without resampling) and the mixture quantile kernel
# ---------------------------------------------------------------------------------------


@pytest.mark.statistical
def test_sample_y_draws_weighted_particles_by_their_weights(seed):
    """``sample_y`` picks each SMC particle with its weight, not uniformly.

    SMC never resampling (``resample_threshold=0``) ends with very unequal weights (their
    ESS is a few percent of the particles). At inputs 1e6 times a unit vector the draw of a
    linear model is 1e6 times one weight plus O(1): it names the particle it came from
    (neighbouring particles' weights differ by ~1e-2, the O(1) part shifts a weight by
    ~1e-6). So the test counts how often each particle was drawn: a chi-square test of the
    counts against n * weight, at level 1e-4 (false alarm 1e-4), over cells of particles
    with an expected count of at least 5 (the light particles pooled). Had the draws
    ignored the weights, the counts would sit near n / N each and the statistic would be
    about n times the chi-square distance between the weights and uniform ones, many
    times its critical value (ESS of the weights under half the particles); the last
    assertion checks that power on the counts drawn.
    """
    X, y, _ = _data(0 + seed)
    reg = BayesianMLPRegressor(
        (), activation="identity", method=SMC(resample_threshold=0.0), n_samples=200,
        noise_std=0.5, random_state=0 + seed,
    ).fit(X, y)  # fmt: skip
    w = reg.posterior_.normalized_weights()
    assert reg.posterior_.weights is not None and 1.0 / np.sum(w**2) < 0.5 * len(w)
    big = 1e6
    n = 20000
    draws = reg.sample_y(big * np.eye(N_FEATURES), n_samples=n, random_state=1 + seed)
    slopes = (draws.T - y.mean()) / (y.std() * big)  # (n, 3): a particle's weights + ~1e-6
    particles = reg.posterior_.thetas[:, :N_FEATURES]
    dist = np.linalg.norm(slopes[:, None, :] - particles[None, :, :], axis=2)
    nearest = dist.argmin(axis=1)
    gap = np.sort(dist, axis=1)[:, :2]
    # each draw is named: it lies ~1e-6 from its particle; two of the 200 particles (sd
    # ~0.07 in 3-d) closer than 1e-4 have probability ~1e-5
    assert np.all(gap[:, 0] < 1e-5) and np.all(gap[:, 1] > 1e-4)
    counts = np.bincount(nearest, minlength=len(w))
    # cells of particles with an expected count of at least 5 (the lightest pooled)
    cell = np.empty(len(w), dtype=int)
    k, acc = 0, 0.0
    for i in np.argsort(w):
        cell[i], acc = k, acc + n * w[i]
        if acc >= 5:
            k, acc = k + 1, 0.0
    cell[cell == k] = max(k - 1, 0)  # a light remainder joins the last cell

    def chi2(fractions):
        expected = np.bincount(cell, weights=n * fractions)
        return np.sum((np.bincount(cell, weights=counts) - expected) ** 2 / expected)

    critical = stats.chi2.isf(1e-4, cell.max())
    assert chi2(w) < critical, (chi2(w), critical)
    # uniform draws would land n / N times on each particle; the counts sit near n * w,
    # so the statistic against uniform fractions is about n * chi2-distance(w, uniform)
    uniform = np.full(len(w), 1.0 / len(w))
    assert chi2(uniform) > 10 * critical


@pytest.mark.statistical
def test_sample_y_moments_on_weighted_particles(seed):
    # The mean and variance of n sample_y draws against the weighted mixture of the
    # particles (given the particles the draws are independent draws of it): 2 comparisons
    # at 5 points at Z = 4.5, 6.8e-5.
    X, y, X_test = _data(0 + seed)
    reg = BayesianMLPRegressor(
        (), activation="identity", method=SMC(resample_threshold=0.0), n_samples=200,
        noise_std=0.5, random_state=0 + seed,
    ).fit(X, y)  # fmt: skip
    n = 20000
    ys = reg.sample_y(X_test, n_samples=n, random_state=1 + seed)
    w = reg.posterior_.normalized_weights()
    th = reg.posterior_.thetas
    f = (th[:, :N_FEATURES] @ X_test.T + th[:, N_FEATURES : N_FEATURES + 1]) * y.std() + y.mean()
    sigma2 = (0.5 * y.std()) ** 2
    m = w @ f
    v = w @ (f - m) ** 2 + sigma2
    dev = ys - ys.mean(axis=1, keepdims=True)
    z_mean = (ys.mean(axis=1) - m) / np.sqrt(v / n)
    se_var = np.sqrt((np.mean(dev**4, axis=1) - np.mean(dev**2, axis=1) ** 2) / n)
    z_var = (np.mean(dev**2, axis=1) - v) / se_var
    assert np.all(np.abs(np.r_[z_mean, z_var]) < Z), (z_mean, z_var)


@pytest.mark.parametrize("n_components", [1, 3, 200])
def test_mixture_quantiles_against_brentq(n_components):
    # deterministic: the kernel's bisection against scipy's root of the same mixture CDF
    rng = np.random.default_rng(n_components)
    n_points = 4
    mu = rng.normal(0, 3, (n_points, n_components))
    mu[1] *= 100  # well-separated components: a quantile may fall in a gap
    sd = rng.uniform(0.1, 2.0, n_components)
    w = rng.dirichlet(np.ones(n_components))
    if n_components > 1:
        w[0] = 0.0  # a particle whose weight underflowed: no mass
        w /= w.sum()
    probs = np.array([1e-6, 0.025, 0.3, 0.5, 0.9, 1 - 1e-6])
    out = np.empty((n_points, probs.size))
    mixture_quantiles(mu, sd[None, :], w, probs, out)
    for i in range(n_points):
        for j, p in enumerate(probs):
            cdf = lambda x, i=i, p=p: w @ ndtr((x - mu[i]) / sd) - p  # noqa: E731
            lo, hi = mu[i].min() - 50 * sd.max(), mu[i].max() + 50 * sd.max()
            exact = optimize.brentq(cdf, lo, hi, xtol=1e-13, rtol=1e-15)
            assert out[i, j] == pytest.approx(exact, rel=1e-10, abs=1e-10)
    if n_components == 1:
        np.testing.assert_allclose(out, mu + sd[0] * stats.norm.ppf(probs), rtol=1e-10)


def test_mixture_quantiles_of_a_nonfinite_mixture_are_nan():
    # a point whose components hold a NaN mean or an infinite sd has no quantile: NaN, as
    # numpy's min and max would give, not a number from a bracket that is not one; the
    # other points are as if computed alone
    rng = np.random.default_rng(0)
    mu = rng.normal(size=(4, 5))
    sd = rng.uniform(0.5, 1.5, (4, 5))
    w, probs = np.full(5, 0.2), np.array([0.05, 0.95])
    alone = np.empty((4, 2))
    mixture_quantiles(mu, sd, w, probs, alone)
    mu[1, 2], sd[2, 4], mu[3, 0] = np.nan, np.inf, -np.inf
    out = np.empty((4, 2))
    mixture_quantiles(mu, sd, w, probs, out)
    assert np.isnan(out[1:]).all()
    np.testing.assert_array_equal(out[0], alone[0])


@pytest.mark.statistical
@pytest.mark.parametrize(
    "method",
    [NUTS(n_chains=4, n_warmup=300, target_rhat=1.01, target_ess=3000),
     HMC(n_chains=4, n_warmup=400, target_rhat=1.01, target_ess=3000),
     MALA(n_warmup=500, thin=1, target_rhat=1.01, target_ess=3000)],
    ids=["nuts", "hmc", "mala"],
)  # fmt: skip
def test_sampling_until_converged_keeps_the_draws_exact(method, seed):
    # the ESS target is three times the 1000 kept draws, so the chains must be extended
    # (in blocks, with their adapted step size and metric) and then thinned back to 1000:
    # the kept draws must still match the closed form. 15 comparisons: false alarm < 1e-4
    # per method.
    X, y, X_test = _data(0 + seed)
    noise_std = 0.5
    reg = BayesianMLPRegressor(hidden_layer_sizes=(), activation="identity", method=method,
                               n_samples=1000, noise_std=noise_std,
                               random_state=0 + seed).fit(X, y)  # fmt: skip
    d = reg.diagnostics_
    assert d["stopped_because"] == "targets_met"
    assert d["n_draws_sampled_per_chain"] > d["n_draws_per_chain"] == 250
    assert reg.posterior_.n_draws == 1000
    z = _predictive_z(reg, X_test, y, *_closed_form(X, y, X_test, noise_std))
    assert np.all(np.abs(z) < Z), z
