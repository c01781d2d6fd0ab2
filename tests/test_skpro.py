"""skbnn in skpro: ``skbnn.skpro.BayesianMLPProbaRegressor`` passes skpro's own estimator
checks, and its distribution is the regressor's posterior predictive.

skpro's ``check_estimator`` runs unmodified on the regressor and on the mixture
distribution it returns. The other tests hold skpro's view of a fit to skbnn's own: the
distribution's mean and variance are ``predict(X, return_std=True)``'s, its quantiles
``predict_interval``'s, skpro's CRPS and log loss skbnn's ``crps_mixture`` and
``log_predictive_density``, on the same fit.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from skbnn import BayesianMLPRegressor
from skbnn.exceptions import ConvergenceWarning
from skbnn.methods import NUTS, Laplace
from skbnn.metrics import crps_mixture, log_predictive_density

pytest.importorskip("skpro")
from skpro.distributions.empirical import Empirical  # noqa: E402
from skpro.distributions.normal_mixture import NormalMixture  # noqa: E402
from skpro.metrics import CRPS, LogLoss  # noqa: E402
from skpro.utils import check_estimator  # noqa: E402

from skbnn.skpro import BayesianMLPProbaRegressor, PosteriorPredictiveMixture  # noqa: E402

#: Tiny fits: a Laplace approximation of a three-unit network takes a fraction of a second
SMALL = {"hidden_layer_sizes": (3,), "n_samples": 30, "random_state": 0}


def _method():
    return Laplace(max_iter=200)


def _frames(n_outputs=1, n_rows=40, seed=0):
    """X and y as data frames with an index and names of their own, y far from zero mean
    and unit scale (and a second output on another scale) so that mixed-up units show."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, 3))
    f = np.tanh(X[:, 0]) + 0.5 * X[:, 1]
    y = np.column_stack([10.0 + 3.0 * f, -200.0 + 50.0 * f][:n_outputs])
    y = y + rng.standard_normal(y.shape) * [0.3, 5.0][:n_outputs]
    index = pd.Index(np.arange(n_rows) * 3 + 7, name="row")
    X = pd.DataFrame(X, index=index, columns=["a", "b", "c"])
    return X, pd.DataFrame(y, index=index, columns=["first", "second"][:n_outputs])


def _failures(results: dict) -> dict:
    return {name: result for name, result in results.items() if result != "PASSED"}


def test_regressor_passes_skpros_check_estimator():
    results = check_estimator(BayesianMLPProbaRegressor, verbose=False)
    assert len(results) > 50
    assert not _failures(results), _failures(results)


# skpro fills in the L2 norm of the density by Monte Carlo, and says so, for NormalMixture too
@pytest.mark.filterwarnings("ignore:.*pdfnorm:UserWarning")
def test_mixture_distribution_passes_skpros_check_estimator():
    results = check_estimator(PosteriorPredictiveMixture, verbose=False)
    assert len(results) > 100
    assert not _failures(results), _failures(results)


def test_the_regressors_parameters_are_skbnns_with_its_defaults():
    # the wrapper must follow BayesianMLPRegressor when a parameter is added there
    ours = inspect.signature(BayesianMLPProbaRegressor).parameters
    for name, param in inspect.signature(BayesianMLPRegressor).parameters.items():
        assert name in ours, f"BayesianMLPProbaRegressor lacks {name!r}"
        assert ours[name].default == param.default, name
    # and passes every one of them on
    from skbnn.skpro import _REGRESSOR_PARAMS

    assert set(_REGRESSOR_PARAMS) == set(BayesianMLPRegressor().get_params(deep=False))


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_predict_proba_is_the_regressors_predictive(n_outputs):
    X, y = _frames(n_outputs)
    X_test = X.iloc[::3]
    proba_reg = BayesianMLPProbaRegressor(method=_method(), **SMALL).fit(X, y)
    reg = BayesianMLPRegressor(method=_method(), **SMALL).fit(X.to_numpy(), y.to_numpy().squeeze())
    mean, std = reg.predict(X_test.to_numpy(), return_std=True)
    mean, std = mean.reshape(-1, n_outputs), std.reshape(-1, n_outputs)

    dist = proba_reg.predict_proba(X_test)
    assert isinstance(dist, PosteriorPredictiveMixture)
    assert isinstance(dist, NormalMixture)
    assert dist.index.equals(X_test.index) and dist.columns.equals(y.columns)
    np.testing.assert_allclose(dist.mean().to_numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(dist.var().to_numpy(), std**2, rtol=1e-10)
    np.testing.assert_allclose(proba_reg.predict(X_test).to_numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(proba_reg.predict_var(X_test).to_numpy(), std**2, rtol=1e-10)

    # intervals: the regressor's are skbnn's exactly, the distribution's ppf (skpro's
    # bisection on the same mixture) within its tolerance
    lower, upper = (b.reshape(-1, n_outputs) for b in reg.predict_interval(X_test.to_numpy(), 0.8))
    interval = proba_reg.predict_interval(X_test, coverage=0.8)
    for j, name in enumerate(y.columns):
        np.testing.assert_allclose(interval[(name, 0.8, "lower")], lower[:, j], rtol=1e-12)
        np.testing.assert_allclose(interval[(name, 0.8, "upper")], upper[:, j], rtol=1e-12)
    quantiles = dist.quantile([0.1, 0.9])
    scale = std.max()
    for j, name in enumerate(y.columns):
        np.testing.assert_allclose(quantiles[(name, 0.1)], lower[:, j], atol=1e-6 * scale)
        np.testing.assert_allclose(quantiles[(name, 0.9)], upper[:, j], atol=1e-6 * scale)


def test_skpros_crps_and_log_loss_are_skbnns():
    X, y = _frames(2)
    X_test, y_test = X.iloc[::2], y.iloc[::2]
    proba_reg = BayesianMLPProbaRegressor(method=_method(), **SMALL).fit(X.iloc[1::2], y.iloc[1::2])
    dist = proba_reg.predict_proba(X_test)
    means, stds, weights = proba_reg.estimator_.predict_mixture(X_test.to_numpy())

    crps = CRPS(multioutput="raw_values")(y_test, dist)
    expected = crps_mixture(y_test.to_numpy(), means, stds, weights, multioutput="raw_values")
    np.testing.assert_allclose(np.ravel(crps), expected, rtol=1e-10)

    # skpro's log loss scores each output's marginal: that output's mixture
    log_loss = LogLoss(multioutput="raw_values")(y_test, dist)
    for j in range(2):
        lpd = log_predictive_density(y_test.to_numpy()[:, j], means[:, j], stds[:, j], weights)
        np.testing.assert_allclose(np.ravel(log_loss)[j], -lpd, rtol=1e-10)


def test_the_mixtures_self_energy_is_exact():
    # E|X - X'| = 2 * integral of F (1 - F): two components far apart, unequal weights and
    # sds, where the spread of the means dominates
    pi, mu, sigma = np.array([0.3, 0.7]), np.array([-4.0, 5.0]), np.array([0.5, 2.0])
    d = PosteriorPredictiveMixture(pi=pi, mu=mu, sigma=sigma)

    def cdf(x):
        return float(np.sum(pi * stats.norm.cdf(x, mu, sigma)))

    pieces = [(-np.inf, -4.0), (-4.0, 5.0), (5.0, np.inf)]
    expected = sum(2 * integrate.quad(lambda x: cdf(x) * (1 - cdf(x)), a, b)[0] for a, b in pieces)
    assert d.energy() == pytest.approx(expected, rel=1e-8)
    # a single normal: 2 sd / sqrt(pi)
    one = PosteriorPredictiveMixture(pi=[1.0], mu=[3.0], sigma=[2.0])
    assert one.energy() == pytest.approx(4 / np.sqrt(np.pi), rel=1e-12)


def test_the_mixtures_variance_survives_a_large_mean():
    # E[X^2] - E[X]^2 would cancel to nothing here
    d = PosteriorPredictiveMixture(
        pi=[[0.5, 0.5]], mu=[[[1e9], [1e9 + 2.0]]], sigma=[[[1.0], [1.0]]]
    )
    assert float(d.var().iloc[0, 0]) == pytest.approx(2.0, rel=1e-12)


def test_subsets_keep_the_exact_mixture():
    X, y = _frames(2)
    dist = BayesianMLPProbaRegressor(method=_method(), **SMALL).fit(X, y).predict_proba(X)
    assert isinstance(dist.iloc[:3], PosteriorPredictiveMixture)
    assert isinstance(dist.iloc[:3, 1:], PosteriorPredictiveMixture)
    assert isinstance(dist.iat[0, 1], PosteriorPredictiveMixture)
    assert dist.iloc[:3, 1:].var().to_numpy() == pytest.approx(dist.var().to_numpy()[:3, 1:])


@pytest.mark.statistical
def test_mixture_draws_follow_the_mixture(seed):
    # each row's 4000 draws against its exact CDF: a KS test at a false-alarm probability
    # of 0.001 per row
    pi = np.array([[0.3, 0.7], [0.5, 0.5]])
    mu = np.array([[-4.0, 5.0], [0.0, 1.0]])
    sigma = np.array([[0.5, 2.0], [1.0, 0.1]])
    d = PosteriorPredictiveMixture(
        pi=pi, mu=mu[:, :, None], sigma=sigma[:, :, None], index=pd.Index(["p", "q"])
    )
    # skpro's distributions draw from numpy's global state
    np.random.seed(0 + seed)  # noqa: NPY002
    n = 4000
    draws = d.sample(n)
    assert draws.index.equals(pd.MultiIndex.from_product([pd.RangeIndex(n), d.index]))
    for i, row in enumerate(d.index):
        x = draws.xs(row, level=1).to_numpy()[:, 0]

        def cdf(t, i=i):
            return np.sum(pi[i] * stats.norm.cdf(np.asarray(t)[:, None], mu[i], sigma[i]), axis=1)

        assert stats.kstest(x, cdf).pvalue > 0.001


@pytest.mark.statistical
def test_empirical_distribution_holds_joint_draws(seed):
    X, y = _frames(2)
    X_test = X.iloc[:5]
    params = {**SMALL, "random_state": 0 + seed}
    reg = BayesianMLPProbaRegressor(
        method=_method(), distribution="empirical", n_draws=2000, **params
    ).fit(X, y)
    dist = reg.predict_proba(X_test)
    assert isinstance(dist, Empirical)
    assert dist.index.equals(X_test.index) and dist.columns.equals(y.columns)
    # the draws are sample_y's with the regressor's seed: the same each call
    draws = reg.estimator_.sample_y(X_test.to_numpy(), 2000, 0 + seed)
    np.testing.assert_allclose(dist.mean().to_numpy(), draws.mean(axis=-1), rtol=1e-12)
    pd.testing.assert_frame_equal(dist.mean(), reg.predict_proba(X_test).mean())
    # and they estimate the exact predictive: means within 4 Monte Carlo standard errors
    exact = reg.predict(X_test).to_numpy()
    sd = np.sqrt(reg.predict_var(X_test).to_numpy())
    assert np.all(np.abs(dist.mean().to_numpy() - exact) < 4 * sd / np.sqrt(2000))
    # sampled as wholes: one draw of all rows is one of sample_y's draws
    one = dist.sample().to_numpy()
    assert np.any(np.all(np.isclose(draws, one[:, :, None]), axis=(0, 1)))


# tiny chains cannot converge, and say so
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_warm_start_continues_the_chains_after_set_params():
    # skbase's set_params resets a fitted object: the regressor must outlive it, and the
    # continued chains equal one fit of the larger n_samples, as BayesianMLPRegressor's
    X, y = _frames()
    nuts = NUTS(n_chains=2, n_warmup=30)
    params = {**SMALL, "method": nuts, "warm_start": True}
    reg = BayesianMLPProbaRegressor(**{**params, "n_samples": 20}).fit(X, y)
    first = reg.estimator_
    reg.set_params(n_samples=40).fit(X, y)
    assert reg.estimator_ is first
    once = BayesianMLPProbaRegressor(**{**params, "n_samples": 40, "warm_start": False})
    np.testing.assert_array_equal(reg.predict(X), once.fit(X, y).predict(X))
    fresh = reg.clone()
    assert not hasattr(fresh, "estimator_") and not hasattr(fresh, "_warm__estimator")


def test_skbnns_warnings_point_at_the_users_line():
    # through skpro's fit and skbase's layers, as through scikit-learn's
    X, y = _frames()
    tiny = NUTS(n_chains=2, n_warmup=10)
    with pytest.warns(ConvergenceWarning) as caught:
        BayesianMLPProbaRegressor(**{**SMALL, "method": tiny, "n_samples": 10}).fit(X, y)
    assert all(w.filename == __file__ for w in caught), [w.filename for w in caught]


def test_bad_settings_are_refused():
    X, y = _frames()
    with pytest.raises(ValueError, match="distribution must be"):
        BayesianMLPProbaRegressor(distribution="normal", **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="n_draws must be"):
        BayesianMLPProbaRegressor(n_draws=0, **SMALL).fit(X, y)


def test_skbnn_does_not_import_skpro():
    code = "import skbnn, sys; assert 'skpro' not in sys.modules, 'skbnn imported skpro'"
    subprocess.run([sys.executable, "-c", code], check=True)
