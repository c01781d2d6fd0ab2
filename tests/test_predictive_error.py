"""The Monte Carlo error a regression's ConvergenceWarning reads is the expected
``sqrt(2 KL)`` of the estimated predictive density from the exact one: checked against
closed forms on independent draws, where the truth is ``K / N`` for ``N`` draws and a
constant ``K`` of the posterior, so that the draws the advice asks for are the draws
that bring the error under its bound.

Each check averages the estimate's square over independent replicates and allows four of
that average's standard errors (a false alarm with probability about 6e-5) plus 10 %, the
estimator's own bias: over 60 replicates it ran 7 % and 9 % high at 250 draws a chain and
2 % and 6 % at 1,000 (the ESS from few draws runs low), far inside the advice's margin
(``DRAWS_MARGIN``, a factor of 2)."""

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from skbnn.methods._convergence import predictive_error, predictive_modes
from skbnn.methods._records import ChainDiagnostics

BIAS = 0.10
REPLICATES = 30


def _error(f, noise_var, likelihood):
    """The judged error at each monitored row from draws ``f`` and noise variances of
    shape (chains, draws, 1, rows), every chain a mode of its own (as NUTS's dispersed
    chains are)."""
    if likelihood == "gaussian":
        monitored, taus = f, 1.0 / noise_var[:, :, :, 0]
    else:
        # the heteroscedastic head's raw output, whose softplus is the variance
        v = noise_var - 1e-6
        monitored, taus = np.concatenate([f, v + np.log(-np.expm1(-v))], axis=2), None
    groups = np.arange(f.shape[0])
    modes = predictive_modes(groups, monitored, taus, likelihood, 1)
    return predictive_error(ChainDiagnostics(predictive_modes=modes))


def _check(ratios):
    ratios = np.ravel(ratios)
    mean, se = ratios.mean(), ratios.std(ddof=1) / np.sqrt(ratios.size)
    assert abs(mean - 1.0) < BIAS + 4 * se, (mean, se)


@pytest.mark.parametrize("draws", [250, 1000])
def test_the_error_of_a_gaussian_predictive_is_its_closed_form(draws):
    # f ~ N(0, s^2) with unit noise: E[N(y; f, 1)^2] = N(y; 0, 1/2 + s^2) / (2 sqrt(pi)),
    # whose integral over p = N(0, 1 + s^2) is 1 + s^2: the truth is s^2 / N at any s,
    # where the mean's and sd's errors of the Gaussian form give s^2 (1 + 2 s^2) /
    # (N (1 + s^2)^2), 18 % less at s = 0.7
    s, chains = 0.7, 4
    ratios = []
    for seed in range(REPLICATES):
        f = np.random.default_rng(seed).normal(0.0, s, (chains, draws, 1, 5))
        error = _error(f, np.ones_like(f), "gaussian")
        ratios.append(error**2 * chains * draws / s**2)
    _check(ratios)


@pytest.mark.parametrize("draws", [250, 1000])
def test_a_few_draws_of_a_wide_noise_do_not_rule_the_error(draws):
    # one draw in a hundred has a noise variance 50 times the rest's: the predictive's
    # variance is ruled by them, its density is not. The truth K / N from the closed
    # form, with the error falling as the square root of the draws
    s, var, prob, chains = 0.5, np.array([0.5, 1.0, 50.0]), np.array([0.6, 0.39, 0.01]), 4

    def p(y):
        return np.sum(prob * norm.pdf(y, 0.0, np.sqrt(var + s**2)))

    def squared(y):
        # E over f and the noise of N(y; f, v)^2
        return np.sum(prob * norm.pdf(y, 0.0, np.sqrt(var / 2 + s**2)) / np.sqrt(4 * np.pi * var))

    # 14 sds of the widest noise each side: beyond, the density underflows
    k = integrate.quad(lambda y: squared(y) / p(y) - p(y), -100.0, 100.0, limit=200)[0]
    ratios = []
    for seed in range(REPLICATES):
        rng = np.random.default_rng(seed)
        f = rng.normal(0.0, s, (chains, draws, 1, 5))
        noise_var = rng.choice(var, p=prob, size=f.shape)
        error = _error(f, noise_var, "heteroscedastic")
        ratios.append(error**2 * chains * draws / k)
    _check(ratios)
