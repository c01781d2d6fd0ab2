"""The Student-t noise (``noise_df``): the kernel's log-likelihood and gradient, the
predictive each prediction reads, and the knob's validation."""

import pickle

import numpy as np
import pytest
import scipy.stats

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.log_posterior import LogPosterior
from skbnn.methods import MCLMC, NUTS, DeepEnsemble, RandomizedMAP
from skbnn.metrics import log_predictive_density, pit_mixture
from skbnn.posterior import ForwardPass

pytestmark = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning", "ignore::skbnn.exceptions.SlowFitWarning"
)


def _target(df, hidden=(5,), activation="tanh", k=1, weights=None, seed=0, n=23, d=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    # a few rows far out, where the t's tails and the Gaussian's differ most
    Y = rng.standard_normal((n, k)) * np.where(rng.random((n, 1)) < 0.2, 8.0, 1.0)
    return LogPosterior(
        X, Y, hidden, activation, "heteroscedastic", sample_weight=weights, noise_df=df
    )


def _outputs(target, theta):
    X = target.XT.reshape(target.n_features, target.n_rows).T
    net = ForwardPass(target.layout, target.activation_code, 1)
    return np.concatenate([f for _, f in net.outputs(X, theta[None])], axis=2)[0]


@pytest.mark.parametrize("df", [2.5, 5.0, 30.0])
@pytest.mark.parametrize("k", [1, 2])
def test_loglik_is_scipys_student_t(df, k):
    weights = np.random.default_rng(4).integers(0, 4, 23).astype(float)
    target = _target(df, k=k, weights=weights)
    theta = target.sample_prior(np.random.default_rng(1), 1)[0]
    loglik = target.logp(theta, 1.0) - target.logp(theta, 0.0)
    f = _outputs(target, theta)
    Y = target.YT.reshape(k, -1)
    scale = np.sqrt(np.logaddexp(0.0, f[k:]) + 1e-6)
    expected = scipy.stats.t.logpdf(Y, df, f[:k], scale)
    np.testing.assert_allclose(loglik, np.sum(weights * expected), rtol=1e-11)
    # the pointwise terms PSIS and stacking read are the same, unweighted
    np.testing.assert_allclose(
        target.pointwise_loglik(theta[None])[0], expected.sum(axis=0), rtol=1e-11
    )


@pytest.mark.parametrize("activation", ["relu", "tanh", "identity"])
@pytest.mark.parametrize("hidden", [(), (4,), (3, 5)])
def test_gradient_matches_finite_differences(activation, hidden):
    # along random directions, each mixing every parameter: the central difference of
    # the log density against the gradient's projection
    target = _target(4.0, hidden=hidden, activation=activation, k=2)
    rng = np.random.default_rng(2)
    theta = target.sample_prior(rng, 1)[0]
    value, grad = target.logp_and_grad(theta, beta=0.7)
    assert np.isfinite(value)
    eps = 1e-6
    for v in rng.standard_normal((6, theta.size)):
        fd = (target.logp(theta + eps * v, 0.7) - target.logp(theta - eps * v, 0.7)) / (2 * eps)
        np.testing.assert_allclose(grad @ v, fd, rtol=1e-6, atol=1e-6 * np.abs(grad) @ np.abs(v))


def test_many_degrees_of_freedom_approach_the_gaussian_as_one_over_nu():
    # log t_nu(z) = log N(z) + (z^4 - 2 z^2 - 1) / (4 nu) + O(1 / nu^2): ten times the
    # degrees of freedom, a tenth of the difference, in the density and its gradient (the
    # next term changes the ratio by 5e-4 here)
    gaussian = _target(None)
    theta = gaussian.sample_prior(np.random.default_rng(3), 1)[0]
    a, ga = gaussian.logp_and_grad(theta)
    (b5, g5), (b6, g6) = (_target(nu).logp_and_grad(theta) for nu in (1e5, 1e6))
    assert abs(b5 - a) > 0
    np.testing.assert_allclose((b6 - a) / (b5 - a), 0.1, rtol=2e-3)
    np.testing.assert_allclose(
        g6 - ga, 0.1 * (g5 - ga), rtol=2e-3, atol=2e-3 * np.abs(g5 - ga).max()
    )


def test_noise_df_needs_the_heteroscedastic_likelihood():
    X = np.zeros((4, 1))
    with pytest.raises(ValueError, match="only the heteroscedastic likelihood"):
        LogPosterior(X, X[:, 0], (), "tanh", "gaussian", noise_df=5.0)


def _data(seed=0, n=120):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    y = 10.0 + 3.0 * np.sin(X[:, 0]) + X[:, 1] + 0.5 * rng.standard_t(3, n)
    return X, y


@pytest.fixture(scope="module")
def fitted():
    X, y = _data()
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(6,),
        method=DeepEnsemble(max_iter=200, noise_df=3.0),
        n_samples=4,
        random_state=0,
    )
    return est.fit(X, y), X, y


def _components(est, X):
    # each draw's location and scale in the units of y, by the per-draw path
    (rows, loc, scale), *rest = est.predictive_.per_draw(X)
    assert not rest and rows == slice(0, len(X))
    return loc[:, 0], scale[:, 0], est.posterior_.normalized_weights()


def test_the_predictive_is_the_mixture_of_student_ts(fitted):
    est, X, y = fitted
    assert est.predictive_.noise_df == est.posterior_.noise_df == 3.0
    loc, scale, w = _components(est, X[:30])
    density = w @ scipy.stats.t.pdf(y[None, :30], 3.0, loc, scale)
    np.testing.assert_allclose(
        est.predictive_.log_predictive_density(X[:30], y[:30]), np.log(density), rtol=1e-12
    )
    # the variance of a t of 3 degrees of freedom is 3 times its squared scale
    mean, std = est.predict(X[:30], return_std=True)
    var = w @ (3.0 * scale**2 + loc**2) - (w @ loc) ** 2
    np.testing.assert_allclose(mean, w @ loc, rtol=1e-12)
    np.testing.assert_allclose(std, np.sqrt(var), rtol=1e-10)
    np.testing.assert_allclose(
        est.predict_std(X[:30], kind="aleatoric"), np.sqrt(w @ (3.0 * scale**2)), rtol=1e-10
    )
    # noise_std_ is the noise's sd averaged over the training rows, not the t's scale
    _, all_scales, _ = _components(est, X)
    np.testing.assert_allclose(est.noise_std_, np.sqrt(3.0) * np.mean(w @ all_scales))
    lower, upper = est.predict_interval(X[:30], coverage=0.8)
    for bound, p in ((lower, 0.1), (upper, 0.9)):
        cdf = w @ scipy.stats.t.cdf(bound[None], 3.0, loc, scale)
        np.testing.assert_allclose(cdf, p, atol=1e-12)


@pytest.mark.statistical
def test_sample_y_draws_from_the_predictive(fitted, seed):
    # a Kolmogorov-Smirnov test of 4,000 draws at one row against the mixture's CDF:
    # a false alarm in 1e-4 of seeds at the level asked
    est, X, _ = fitted
    loc, scale, w = _components(est, X[:1])
    draws = est.sample_y(X[:1], n_samples=4000, random_state=seed).ravel()

    def cdf(x):
        return w @ scipy.stats.t.cdf(np.atleast_1d(x)[None], 3.0, loc[:, :1], scale[:, :1])

    assert scipy.stats.kstest(draws, cdf).pvalue > 1e-4


def test_predict_mixture_gives_the_student_ts_only_when_asked(fitted):
    est, X, y = fitted
    # the three-value form promises Gaussians: a t's scales in their place would be
    # scored as sds by every caller that does not look
    with pytest.raises(ValueError, match="return_df=True"):
        est.predict_mixture(X)
    means, scales, weights, df = est.predict_mixture(X[:30], return_df=True)
    loc, scale, w = _components(est, X[:30])
    assert df == 3.0
    np.testing.assert_allclose(means, loc.T, rtol=1e-12)
    np.testing.assert_allclose(scales, scale.T, rtol=1e-12)
    np.testing.assert_allclose(weights, w)
    # the public scores read them as the predictive does
    lpd = est.predictive_.log_predictive_density(X[:30], y[:30])
    np.testing.assert_allclose(
        log_predictive_density(y[:30], means, scales, weights, df=df), lpd.mean(), rtol=1e-12
    )
    pit = pit_mixture(y[:30], means, scales, weights, df=df)
    np.testing.assert_allclose(pit, w @ scipy.stats.t.cdf(y[None, :30], 3.0, loc, scale))
    # a Gaussian fit returns None for df, and its mixture as before
    gauss = BayesianMLPRegressor(hidden_layer_sizes=(2,), method=DeepEnsemble(max_iter=50),
                                 n_samples=2, random_state=0).fit(X, y)  # fmt: skip
    *three, df = gauss.predict_mixture(X[:5], return_df=True)
    assert df is None
    for a, b in zip(three, gauss.predict_mixture(X[:5]), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("df", [1.0, 3.0, 30.0])
def test_metrics_score_student_t_mixtures_as_scipy(df):
    rng = np.random.default_rng(5)
    y = rng.standard_normal((7, 2)) * 3
    mu, scale = rng.standard_normal((7, 2, 4)), rng.uniform(0.5, 2.0, (7, 2, 4))
    w = rng.dirichlet(np.ones(4))
    comps = scipy.stats.t(df, mu, scale)
    joint = np.log(np.einsum("nks,s->n", np.prod(comps.pdf(y[..., None]), axis=1)[:, None], w))
    np.testing.assert_allclose(log_predictive_density(y, mu, scale, w, df=df), joint.mean())
    np.testing.assert_allclose(
        pit_mixture(y, mu, scale, w, df=df), comps.cdf(y[..., None]) @ w, rtol=1e-12
    )
    with pytest.raises(ValueError, match="df"):
        pit_mixture(y, mu, scale, w, df=0.0)


def test_pit_display_reads_the_student_ts(fitted):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from skbnn.metrics import PITDisplay

    est, X, y = fitted
    disp = PITDisplay.from_estimator(est, X[:30], y[:30])
    loc, scale, w = _components(est, X[:30])
    np.testing.assert_allclose(disp.pit, w @ scipy.stats.t.cdf(y[None, :30], 3.0, loc, scale))


def test_arviz_log_likelihood_is_the_student_ts():
    pytest.importorskip("arviz")
    from skbnn.diagnostics import to_inference_data

    X, y = _data(n=40)
    method = NUTS(n_chains=2, n_warmup=30, max_tree_depth=4, heteroscedastic=True, noise_df=3.0)
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(3,), method=method, n_samples=20, random_state=0
    ).fit(X, y)
    idata = to_inference_data(est, X=X[:10], y=y[:10])
    loglik = idata.log_likelihood["y"].values.reshape(-1, 10)
    loc, scale, _ = _components(est, X[:10])
    np.testing.assert_allclose(loglik, scipy.stats.t.logpdf(y[:10], 3.0, loc, scale))


def test_a_pickled_fit_keeps_its_noise(fitted):
    est, X, y = fitted
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(
        again.predictive_.log_predictive_density(X, y),
        est.predictive_.log_predictive_density(X, y),
    )


@pytest.mark.parametrize(
    "method",
    [
        NUTS(n_chains=2, n_warmup=40, max_tree_depth=4, heteroscedastic=True, noise_df=5.0),
        MCLMC(n_chains=2, n_warmup=60, n_modes=2, init="map", heteroscedastic=True, noise_df=5),
        RandomizedMAP(max_iter=40, noise_df=5.0),
    ],
    ids=["nuts", "mclmc_modes", "rms"],
)
def test_every_method_with_a_noise_head_fits_it(method):
    X, y = _data(n=60)
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(4,), method=method, n_samples=20, random_state=0
    ).fit(X, y)
    assert est.posterior_.noise_df == 5.0
    assert np.all(np.isfinite(est.predictive_.log_predictive_density(X, y)))
    lower, upper = est.predict_interval(X[:5])
    assert np.all(lower < upper)


def test_noise_df_without_a_noise_head_is_an_error():
    X, y = _data(n=30)
    with pytest.raises(ValueError, match="needs heteroscedastic=True"):
        BayesianMLPRegressor(hidden_layer_sizes=(2,), method=NUTS(noise_df=5.0)).fit(X, y)
    with pytest.raises(ValueError, match="needs heteroscedastic=True"):
        BayesianMLPRegressor(
            hidden_layer_sizes=(2,), method=DeepEnsemble(noise_df=5.0), noise_std=1.0
        ).fit(X, y)
    with pytest.raises(ValueError, match="needs heteroscedastic=True"):
        BayesianMLPClassifier(hidden_layer_sizes=(2,), method=DeepEnsemble(noise_df=5.0)).fit(
            X, y > 10
        )


@pytest.mark.parametrize("df", [2.0, 1.0, -3.0])
def test_noise_df_must_leave_a_variance(df):
    X, y = _data(n=30)
    est = BayesianMLPRegressor(method=DeepEnsemble(noise_df=df))
    with pytest.raises(ValueError, match="noise_df"):
        est.fit(X, y)


def test_a_stage_before_must_sample_the_same_noise():
    X, y = _data(n=30)
    first = MCLMC(n_chains=2, heteroscedastic=True, noise_df=5.0)
    method = NUTS(n_chains=2, heteroscedastic=True, noise_df=4.0, init=first)
    with pytest.raises(ValueError, match="noise_df"):
        BayesianMLPRegressor(hidden_layer_sizes=(2,), method=method).fit(X, y)
