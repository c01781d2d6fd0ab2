"""skbnn in skpro: ``skbnn.skpro.BayesianMLPProbaRegressor`` passes skpro's own estimator
checks, and its distribution is the regressor's posterior predictive.

skpro's ``check_estimator`` runs unmodified on the regressor and on the mixture
distributions it returns (of normals, and of Student-t's for a fit with ``noise_df``). The
other tests hold skpro's view of a fit to skbnn's own: the distribution's mean and
variance are ``predict(X, return_std=True)``'s, its quantiles ``predict_interval``'s,
skpro's CRPS and log loss skbnn's ``crps_mixture`` and ``log_predictive_density``, on the
same fit; and the Student-t mixture is scipy's Student-t's, mixed by hand.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

from skbnn import BayesianMLPRegressor
from skbnn.exceptions import ConvergenceWarning
from skbnn.methods import NUTS, DeepEnsemble, Laplace
from skbnn.metrics import crps_mixture, log_predictive_density

pytest.importorskip("skpro")
from skpro.distributions.empirical import Empirical  # noqa: E402
from skpro.distributions.normal_mixture import NormalMixture  # noqa: E402
from skpro.metrics import CRPS, LogLoss  # noqa: E402
from skpro.utils import check_estimator  # noqa: E402

import skbnn.skpro  # noqa: E402
from skbnn.skpro import (  # noqa: E402
    BayesianMLPProbaRegressor,
    PosteriorPredictiveMixture,
    PosteriorPredictiveStudentMixture,
)

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
@pytest.mark.parametrize(
    "distribution", [PosteriorPredictiveMixture, PosteriorPredictiveStudentMixture]
)
def test_mixture_distributions_pass_skpros_check_estimator(distribution):
    results = check_estimator(distribution, verbose=False)
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


# --- the mixture of Student-t's, for a fit with Student-t noise ---------------------------

#: Three components over two columns in four rows, each row with weights of its own, far
#: apart against some of their scales
_PI = np.array([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1], [1 / 3, 1 / 3, 1 / 3], [0.05, 0.05, 0.9]])
_MU = np.array(
    [
        [[-6.0, 100.0], [0.0, 101.0], [4.0, 95.0]],
        [[1.0, -3.0], [1.5, -3.0], [2.0, -2.0]],
        [[0.0, 0.0], [0.0, 10.0], [0.0, -10.0]],
        [[-50.0, 7.0], [50.0, 7.5], [0.0, 8.0]],
    ]
)
_SIGMA = np.array(
    [
        [[0.5, 1.0], [2.0, 0.2], [1.0, 3.0]],
        [[1.0, 1.0], [1.0, 0.1], [0.3, 1.0]],
        [[0.1, 1.0], [1.0, 1.0], [10.0, 1.0]],
        [[1.0, 0.5], [1.0, 0.5], [5.0, 0.5]],
    ]
)
_DF = 3.5


def _student_mixture():
    return PosteriorPredictiveStudentMixture(
        pi=_PI,
        mu=_MU,
        sigma=_SIGMA,
        df=_DF,
        index=pd.Index(list("pqrs"), name="row"),
        columns=pd.Index(["u", "v"]),
    )


def _scipy_mixture(function, x):
    """``sum_k pi_k function(x)`` of scipy's Student-t's, per entry of ``x`` (rows, columns)."""
    x = np.asarray(x)[:, None, :]
    return np.sum(_PI[:, :, None] * function(x, _DF, loc=_MU, scale=_SIGMA), axis=1)


def test_student_mixture_is_scipys_student_t_mixture():
    d = _student_mixture()
    comp_mean = stats.t.mean(_DF, loc=_MU, scale=_SIGMA)
    comp_var = stats.t.var(_DF, loc=_MU, scale=_SIGMA)
    mean = np.sum(_PI[:, :, None] * comp_mean, axis=1)
    np.testing.assert_allclose(d.mean().to_numpy(), mean, rtol=1e-12)
    # the law of total variance
    second = np.sum(_PI[:, :, None] * (comp_var + comp_mean**2), axis=1)
    np.testing.assert_allclose(d.var().to_numpy(), second - mean**2, rtol=1e-10)

    x = mean + 5 * np.random.default_rng(0).standard_normal((4, 2))
    x_frame = pd.DataFrame(x, index=d.index, columns=d.columns)
    pdf = _scipy_mixture(stats.t.pdf, x)
    np.testing.assert_allclose(d.pdf(x_frame).to_numpy(), pdf, rtol=1e-12)
    np.testing.assert_allclose(d.log_pdf(x_frame).to_numpy(), np.log(pdf), rtol=1e-12)
    cdf = _scipy_mixture(stats.t.cdf, x)
    np.testing.assert_allclose(d.cdf(x_frame).to_numpy(), cdf, rtol=1e-12)
    # far in a tail, where every component's density underflows, the log density is finite
    far = pd.DataFrame(np.full((4, 2), 1e200), index=d.index, columns=d.columns)
    assert np.all(np.isfinite(d.log_pdf(far).to_numpy()))


def test_student_mixture_quantiles_invert_its_cdf():
    # (skpro's check_estimator holds ppf(cdf(x)) to x for draws x)
    d = _student_mixture()
    for p in [1e-10, 1e-3, 0.1, 0.5, 0.77, 0.999, 1 - 1e-9]:
        q = d.ppf(pd.DataFrame(np.full((4, 2), p), index=d.index, columns=d.columns))
        assert q.index.equals(d.index) and q.columns.equals(d.columns)
        # against scipy's CDF, or its survival function in the upper tail
        if p < 0.5:
            np.testing.assert_allclose(_scipy_mixture(stats.t.cdf, q), p, rtol=1e-12)
        else:
            np.testing.assert_allclose(_scipy_mixture(stats.t.sf, q), 1 - p, rtol=1e-9)
    edges = pd.DataFrame([[0.0, 1.0]] * 4, index=d.index, columns=d.columns)
    assert np.all(d.ppf(edges).to_numpy() == [-np.inf, np.inf])
    # the quantile of a scalar distribution
    one = d.iat[1, 0]
    assert float(one.cdf(one.ppf(0.3))) == pytest.approx(0.3, rel=1e-14)


def _pieces(cuts):
    """The real line cut at ``cuts``, as (start, end) pairs."""
    cuts = np.unique(cuts)
    return [(-np.inf, cuts[0]), *zip(cuts[:-1], cuts[1:], strict=True), (cuts[-1], np.inf)]


def _quad(integrand, cuts) -> float:
    """scipy's adaptive quadrature over the real line, piece by piece."""
    return sum(
        integrate.quad(integrand, a, b, epsabs=0, epsrel=1e-12, limit=200)[0]
        for a, b in _pieces(cuts)
    )


def _self_energy(pi, mu, sigma, df):
    """``E|X - X'| = 2 * integral of F (1 - F)``, cut at the components' locations and a
    few scales from them, with ``1 - F`` from the survival functions."""

    def integrand(x):
        cdf, sf = stats.t.cdf(x, df, mu, sigma), stats.t.sf(x, df, mu, sigma)
        return np.sum(pi * cdf) * np.sum(pi * sf)

    return 2 * _quad(integrand, np.concatenate([mu - 3 * sigma, mu, mu + 3 * sigma]))


def test_student_mixtures_self_energy_is_exact_to_the_quadrature():
    d = _student_mixture()
    energy = d.energy()
    assert energy.index.equals(d.index) and list(energy.columns) == ["energy"]
    # skpro's energy of a row is the sum over its columns
    expected = [
        sum(_self_energy(_PI[i], _MU[i, :, j], _SIGMA[i, :, j], _DF) for j in range(2))
        for i in range(4)
    ]
    np.testing.assert_allclose(energy.to_numpy()[:, 0], expected, rtol=1e-9)
    # a single Student-t's in closed form (Jordan, Krueger and Lerch's CRPS of the t)
    for df in [2.2, 3.5, 30.0]:
        one = PosteriorPredictiveStudentMixture(pi=[1.0], mu=[3.0], sigma=[2.0], df=df)
        beta = special.beta
        closed = 8 * np.sqrt(df) * beta(0.5, df - 0.5) / ((df - 1) * beta(0.5, df / 2) ** 2)
        assert one.energy() == pytest.approx(closed, rel=1e-10)


def test_student_mixtures_crps_is_the_integral_of_the_squared_cdf_error():
    # skpro's CRPS: E|X - y| (closed form) - E|X - X'| / 2 (the quadrature), against
    # integral of (F(x) - 1{x >= y})^2 by scipy
    d = _student_mixture().iloc[:2, :1]
    y = np.array([[0.3], [8.0]])
    crps = d.energy(pd.DataFrame(y, index=d.index, columns=d.columns)) - 0.5 * d.energy()
    for i in range(2):
        pi, mu, sigma, at = _PI[i], _MU[i, :, 0], _SIGMA[i, :, 0], y[i, 0]

        def integrand(x, pi=pi, mu=mu, sigma=sigma, at=at):
            if x < at:
                return np.sum(pi * stats.t.cdf(x, _DF, mu, sigma)) ** 2
            return np.sum(pi * stats.t.sf(x, _DF, mu, sigma)) ** 2

        expected = _quad(integrand, np.concatenate([mu, [at]]))
        assert float(crps.iloc[i, 0]) == pytest.approx(expected, rel=1e-9)


def test_student_mixtures_quadrature_warns_when_its_budget_runs_out(monkeypatch):
    monkeypatch.setattr(skbnn.metrics._scores, "SPREAD_BUDGET", 2**10)
    # components a thousand scales apart
    d = PosteriorPredictiveStudentMixture(
        pi=[0.5, 0.5], mu=[-10.0, 10.0], sigma=[0.01, 0.01], df=3.0
    )
    with pytest.warns(UserWarning, match="self-energy .* 1 of 1 entries"):
        d.energy()


def test_student_mixture_refuses_df_without_a_variance():
    for df in [2.0, np.inf, np.nan]:
        with pytest.raises(ValueError, match="df must be a finite number above 2"):
            PosteriorPredictiveStudentMixture(pi=[1.0], mu=[0.0], sigma=[1.0], df=df)


def test_student_mixtures_subsets_keep_their_class_and_df():
    d = _student_mixture()
    for sub in [d.iloc[1:3], d.iloc[:, 1:], d.iloc[[0, 3], [1]], d.iat[2, 1], d.loc[["q"], ["v"]]]:
        assert type(sub) is PosteriorPredictiveStudentMixture
        assert sub.df == _DF
    np.testing.assert_allclose(d.iloc[1:3, 1:].var().to_numpy(), d.var().to_numpy()[1:3, 1:])
    np.testing.assert_allclose(d.iloc[1:3].energy().to_numpy(), d.energy().to_numpy()[1:3])
    assert float(d.iat[2, 1].var()) == pytest.approx(d.var().to_numpy()[2, 1], rel=1e-14)


@pytest.mark.statistical
def test_student_mixture_draws_follow_the_mixture(seed):
    # each entry's 4000 draws against its exact CDF: a KS test at a false-alarm probability
    # of 1e-4 per entry, 8e-4 for the eight entries
    d = _student_mixture()
    np.random.seed(1 + seed)  # noqa: NPY002
    n = 4000
    draws = d.sample(n)
    assert draws.index.equals(pd.MultiIndex.from_product([pd.RangeIndex(n), d.index]))
    for i, row in enumerate(d.index):
        x = draws.xs(row, level=1).to_numpy()
        for j in range(2):

            def cdf(t, i=i, j=j):
                t = np.asarray(t)[:, None]
                return np.sum(_PI[i] * stats.t.cdf(t, _DF, _MU[i, :, j], _SIGMA[i, :, j]), axis=1)

            assert stats.kstest(x[:, j], cdf).pvalue > 1e-4


# the short ensemble's members may stop before converging, and say so
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_the_quadratures_advice_scores_without_it(monkeypatch):
    # a budget that allows no halving leaves every entry's self-energy coarse; the
    # warning's advice, distribution="empirical", followed as printed, scores draws
    monkeypatch.setattr(skbnn.metrics._scores, "SPREAD_BUDGET", 1)
    X, y = _frames()
    method = DeepEnsemble(heteroscedastic=True, noise_df=5, max_iter=200)
    params = {"hidden_layer_sizes": (3,), "method": method, "random_state": 0}
    reg = BayesianMLPProbaRegressor(**params).fit(X, y)
    with pytest.warns(UserWarning, match='distribution="empirical" scores draws instead'):
        CRPS()(y, reg.predict_proba(X))
    advised = BayesianMLPProbaRegressor(**params, distribution="empirical").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert np.isfinite(CRPS()(y, advised.predict_proba(X)))


# the short ensemble's members may stop before converging, and say so
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_predict_proba_of_a_student_t_fit_is_its_predictive():
    X, y = _frames()
    X_test, y_test = X.iloc[::4], y.iloc[::4]
    method = DeepEnsemble(heteroscedastic=True, noise_df=5, max_iter=200)
    reg = BayesianMLPProbaRegressor(hidden_layer_sizes=(3,), method=method, random_state=0)
    dist = reg.fit(X, y).predict_proba(X_test)
    assert type(dist) is PosteriorPredictiveStudentMixture and dist.df == 5
    assert dist.index.equals(X_test.index) and dist.columns.equals(y.columns)
    estimator, rows = reg.estimator_, X_test.to_numpy()
    mean, std = estimator.predict(rows), estimator.predict_std(rows)
    np.testing.assert_allclose(dist.mean().to_numpy()[:, 0], mean, rtol=1e-12)
    np.testing.assert_allclose(dist.var().to_numpy()[:, 0], std**2, rtol=1e-10)
    np.testing.assert_allclose(reg.predict(X_test).to_numpy()[:, 0], mean, rtol=1e-12)
    np.testing.assert_allclose(reg.predict_var(X_test).to_numpy()[:, 0], std**2, rtol=1e-10)
    lpd = estimator.predictive_.log_predictive_density(rows, y_test.to_numpy()[:, 0])
    np.testing.assert_allclose(dist.log_pdf(y_test).to_numpy()[:, 0], lpd, rtol=1e-12)
    # the distribution's quantiles (its own root finding) are skbnn's
    interval = reg.predict_interval(X_test, coverage=0.8)
    quantiles = dist.quantile([0.1, 0.9])
    for side, alpha in [("lower", 0.1), ("upper", 0.9)]:
        np.testing.assert_allclose(
            quantiles[("first", alpha)], interval[("first", 0.8, side)], atol=1e-9 * std.max()
        )
    # and skpro scores it
    assert np.isfinite(CRPS()(y_test, dist)) and np.isfinite(LogLoss()(y_test, dist))
