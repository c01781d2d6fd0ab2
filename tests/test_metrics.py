"""skbnn.metrics against closed forms, quadrature, brute force and scikit-learn."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy import integrate, stats
from sklearn.calibration import calibration_curve
from sklearn.datasets import load_iris
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import DeepEnsemble, Laplace, VariationalInference
from skbnn.metrics import (
    PITDisplay,
    PredictiveBandDisplay,
    crps_ensemble,
    crps_gaussian,
    crps_mixture,
    expected_calibration_error,
    interval_coverage,
    log_predictive_density,
    mean_interval_width,
    pit_ensemble,
    pit_mixture,
)
from skbnn.model_selection import log_predictive_scorer


def _crps_by_quadrature(cdf, y, lo, hi):
    """The definition: integral of (F(x) - 1{x >= y})^2 over the real line, split at y."""
    left = integrate.quad(lambda x: cdf(x) ** 2, lo, y, epsabs=1e-12, epsrel=1e-10)[0]
    right = integrate.quad(lambda x: (1 - cdf(x)) ** 2, y, hi, epsabs=1e-12, epsrel=1e-10)[0]
    return left + right


def test_crps_gaussian_is_the_integral_of_its_definition():
    rng = np.random.default_rng(0)
    y, mu, sd = rng.normal(size=5), rng.normal(size=5), rng.uniform(0.2, 3, 5)
    want = [
        _crps_by_quadrature(stats.norm(m, s).cdf, t, m - 40 * s, m + 40 * s)
        for t, m, s in zip(y, mu, sd, strict=True)
    ]
    got = crps_gaussian(y, mu, sd, multioutput="raw_values")
    assert got.shape == (1,)
    np.testing.assert_allclose(got[0], np.mean(want), rtol=1e-8)
    # one row at a time, through sample_weight
    for i in range(5):
        one = np.eye(5)[i]
        np.testing.assert_allclose(crps_gaussian(y, mu, sd, sample_weight=one), want[i], rtol=1e-8)


def test_crps_mixture_is_the_integral_of_its_definition_and_a_gaussian_when_single():
    rng = np.random.default_rng(1)
    mu, sd, w = rng.normal(size=(4, 3)) * 2, rng.uniform(0.3, 2, (4, 3)), np.array([0.2, 0.5, 0.3])
    y = rng.normal(size=4)
    for i in range(4):

        def cdf(x, i=i):
            return np.sum(w * stats.norm.cdf((x - mu[i]) / sd[i]))

        want = _crps_by_quadrature(cdf, y[i], -60, 60)
        got = crps_mixture(y[i : i + 1], mu[i : i + 1], sd[i : i + 1], w)
        np.testing.assert_allclose(got, want, rtol=1e-7)
    # weights are normalized; one component is crps_gaussian
    np.testing.assert_allclose(crps_mixture(y, mu, sd, 10 * w), crps_mixture(y, mu, sd, w))
    np.testing.assert_allclose(
        crps_mixture(y, mu[:, 0], sd[:, 0]), crps_gaussian(y, mu[:, 0], sd[:, 0]), rtol=1e-12
    )


@pytest.mark.parametrize("df", [1.5, 3.0, 30.0])
def test_crps_mixture_of_student_ts_is_the_integral_of_its_definition(df):
    rng = np.random.default_rng(2)
    mu, sd, w = rng.normal(size=(3, 3)) * 2, rng.uniform(0.3, 2, (3, 3)), np.array([0.2, 0.5, 0.3])
    y = rng.normal(size=3)
    got = crps_mixture(y, mu, sd, w, df=df, multioutput="raw_values")
    scores = []
    for i in range(3):

        def cdf(x, i=i):
            return np.sum(w * stats.t.cdf(x, df, mu[i], sd[i]))

        scores.append(_crps_by_quadrature(cdf, y[i], -np.inf, np.inf))
    np.testing.assert_allclose(got, np.mean(scores), rtol=1e-7)
    # many degrees of freedom: the Gaussian's
    np.testing.assert_allclose(
        crps_mixture(y, mu, sd, w, df=1e7), crps_mixture(y, mu, sd, w), rtol=1e-6
    )


def test_crps_mixture_of_student_ts_just_above_one_degree_of_freedom_is_finite():
    # the quadrature's reach, 10 ** (17 / (df - 1)), must not overflow near df = 1
    for df in (1.01, 1.05):
        assert np.isfinite(crps_mixture([0.5], [[0.0, 1.0]], [[1.0, 0.5]], df=df))


def test_crps_mixture_of_student_ts_needs_a_mean():
    with pytest.raises(ValueError, match="'df' parameter of crps_mixture"):
        crps_mixture([0.0], [[0.0]], [[1.0]], df=1.0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_crps_mixtures_quadrature_advice_scores_without_it(monkeypatch):
    # a budget that allows no halving leaves every row's spread term coarse; the warning's
    # advice, crps_ensemble on the fit's draws, followed as printed, scores with none
    import skbnn.metrics._scores

    monkeypatch.setattr(skbnn.metrics._scores, "SPREAD_BUDGET", 1)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    y = X[:, 0] + 0.3 * rng.standard_t(3, 60)
    method = DeepEnsemble(noise_df=5.0, max_iter=100)
    reg = BayesianMLPRegressor(hidden_layer_sizes=(3,), method=method, random_state=0).fit(X, y)
    means, scales, weights, df = reg.predict_mixture(X, return_df=True)
    with pytest.warns(UserWarning, match=r"crps_ensemble on draws \(y_samples = reg.sample_y"):
        crps_mixture(y, means, scales, weights, df=df)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        y_samples = reg.sample_y(X, n_samples=1000)
        assert np.isfinite(crps_ensemble(y, y_samples))


def test_mixture_spread_is_the_double_sum():
    # the kernel sums the pairs i < j twice and the diagonal once: the full double sum,
    # with one row of weights for all rows or each row's own
    from skbnn.metrics._scores import _abs_normal_mean, mixture_spread

    rng = np.random.default_rng(2)
    mu, var = rng.normal(size=(30, 2, 7)) * 3, rng.uniform(0.1, 2, (30, 2, 7))
    w = rng.dirichlet(np.ones(7), size=30)
    w[3, 2] = 0.0
    w[3] /= w[3].sum()
    pair = _abs_normal_mean(
        mu[..., :, None] - mu[..., None, :], var[..., :, None] + var[..., None, :]
    )
    want = np.einsum("nkij,ni,nj->nk", pair, w, w)
    np.testing.assert_allclose(mixture_spread(mu, var, w), want, rtol=1e-12)
    want_shared = np.einsum("nkij,i,j->nk", pair, w[0], w[0])
    np.testing.assert_allclose(mixture_spread(mu, var, w[0]), want_shared, rtol=1e-12)


def test_crps_ensemble_is_its_energy_form():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(6, 9)), rng.normal(size=6)
    pair = np.abs(x[:, :, None] - x[:, None, :]).sum(axis=(1, 2))
    near = np.abs(x - y[:, None]).mean(axis=1)
    np.testing.assert_allclose(crps_ensemble(y, x), np.mean(near - pair / (2 * 81)), rtol=1e-12)
    np.testing.assert_allclose(
        crps_ensemble(y, x, fair=True), np.mean(near - pair / (2 * 9 * 8)), rtol=1e-12
    )
    # draws of one point mass: the absolute error
    np.testing.assert_allclose(crps_ensemble(y, np.repeat(y[:, None] + 1.5, 4, axis=1)), 1.5)


def test_fair_crps_ensemble_is_unbiased_for_the_gaussian():
    # 4000 rows of 5 draws from N(0, 1) with y ~ N(0, 1): the fair estimate's mean over
    # rows estimates E_y CRPS(N(0, 1), y) = E|X - y| - E|X - X'| / 2 = 2/sqrt(pi) -
    # 1/sqrt(pi) without bias (X - y and X - X' are both N(0, 2)); the test
    # allows 4 standard errors of that mean (false alarm 6e-5), where the plain estimate
    # is off by E|X - X'| / (2 m) = 0.113, 14 of them.
    rng = np.random.default_rng(4)
    y, x = rng.normal(size=4000), rng.normal(size=(4000, 5))
    want = 1 / np.sqrt(np.pi)
    rows = [crps_ensemble(y[i : i + 1], x[i : i + 1], fair=True) for i in range(4000)]
    se = np.std(rows) / np.sqrt(4000)
    assert abs(np.mean(rows) - want) < 4 * se
    assert abs(crps_ensemble(y, x) - want) > 8 * se


def test_pit_mixture_is_the_mixture_cdf_and_uniform_for_its_own_draws():
    rng = np.random.default_rng(5)
    n, S = 3000, 4
    mu, sd = rng.normal(size=(n, S)), rng.uniform(0.5, 2, (n, S))
    w = np.array([0.1, 0.2, 0.3, 0.4])
    comp = rng.choice(S, size=n, p=w)
    y = rng.normal(mu[np.arange(n), comp], sd[np.arange(n), comp])
    pit = pit_mixture(y, mu, sd, w)
    want = np.sum(w * stats.norm.cdf(y[:, None], mu, sd), axis=1)
    np.testing.assert_allclose(pit, want, rtol=1e-12)
    # a calibrated predictive: uniform PIT (false alarm of the KS test: 1e-4)
    assert stats.kstest(pit, "uniform").pvalue > 1e-4
    # and a too narrow one is not
    assert stats.kstest(pit_mixture(y, mu, sd / 2, w), "uniform").pvalue < 1e-4


def test_pit_ensemble_counts_draws_below_and_ties_half():
    x = np.array([[0.0, 1.0, 2.0, 3.0], [1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(pit_ensemble([1.5, 1.0], x), [0.5, 0.5])
    np.testing.assert_allclose(pit_ensemble([-1.0, 2.0], x), [0.0, 1.0])
    # multi-output layout, as sample_y returns it
    assert pit_ensemble(np.zeros((2, 3)), np.zeros((2, 3, 5))).shape == (2, 3)


def test_log_predictive_density_is_exact_and_survives_the_far_tail():
    rng = np.random.default_rng(6)
    mu, sd, y = rng.normal(size=(5, 3)), rng.uniform(0.5, 2, (5, 3)), rng.normal(size=5)
    w = np.array([0.5, 0.25, 0.25])
    naive = np.log(np.sum(w * stats.norm.pdf(y[:, None], mu, sd), axis=1))
    np.testing.assert_allclose(log_predictive_density(y, mu, sd, w), naive.mean(), rtol=1e-12)
    # 60 sd out, where the densities underflow to 0 and their log to -inf
    mu, sd = np.array([[0.0, 1.0]]), np.array([[1.0, 1.0]])
    got = log_predictive_density([60.0], mu, sd)
    log1 = stats.norm.logpdf(60.0, 1.0)  # the dominant component
    want = log1 + np.log(0.5 + 0.5 * np.exp(stats.norm.logpdf(60.0) - log1))
    with np.errstate(divide="ignore"):
        assert np.log(np.mean(stats.norm.pdf(60.0, mu, sd))) == -np.inf
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # several targets: the joint density of independent components
    y2, mu2, sd2 = rng.normal(size=(4, 2)), rng.normal(size=(4, 2, 3)), np.ones((4, 2, 3))
    joint = np.log(np.mean(np.prod(stats.norm.pdf(y2[..., None], mu2, sd2), axis=1), axis=1))
    np.testing.assert_allclose(log_predictive_density(y2, mu2, sd2), joint.mean(), rtol=1e-12)


def test_intervals_coverage_and_width():
    y = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    lo, hi = y - 1, y + np.array([[1.0, -0.5], [1.0, 1.0], [-0.5, 1.0]])
    assert interval_coverage(y, lo, y + 1) == 1.0  # the ends count as inside
    np.testing.assert_allclose(
        interval_coverage(y, lo, np.maximum(hi, lo), multioutput="raw_values"), [2 / 3, 2 / 3]
    )
    np.testing.assert_allclose(
        interval_coverage(y[:, 0], lo[:, 0], np.maximum(hi, lo)[:, 0], sample_weight=[1, 1, 2]),
        0.5,
    )
    np.testing.assert_allclose(mean_interval_width(lo, y + 1, multioutput=[1, 3]), 2.0)
    with pytest.raises(ValueError, match="y_lower must not exceed y_upper"):
        interval_coverage(y, y + 1, y)
    with pytest.raises(ValueError, match=r"y_upper must have shape \(n_samples, n_outputs\)"):
        interval_coverage(y, lo, hi[:, 0])


def test_expected_calibration_error_summarizes_calibration_curve():
    rng = np.random.default_rng(7)
    p = rng.uniform(size=500)
    y = (rng.uniform(size=500) < p**1.5).astype(int)
    for strategy in ("uniform", "quantile"):
        prob_true, prob_pred = calibration_curve(y, p, n_bins=8, strategy=strategy)
        # the rows in each non-empty bin, in calibration_curve's binning
        if strategy == "uniform":
            bins = np.linspace(0, 1, 9)
        else:
            bins = np.percentile(p, np.linspace(0, 100, 9))
        counts = np.bincount(np.searchsorted(bins[1:-1], p), minlength=8)
        counts = counts[counts > 0]
        want = np.sum(counts * np.abs(prob_true - prob_pred)) / 500
        got = expected_calibration_error(y, p, n_bins=8, strategy=strategy)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # string labels: the positive class is the larger one unless named
    labels = np.array(["no", "yes"])[y]
    assert expected_calibration_error(labels, p) == expected_calibration_error(y, p)
    flipped = expected_calibration_error(labels, 1 - p, pos_label="no")
    np.testing.assert_allclose(flipped, expected_calibration_error(y, p))


def test_top_label_expected_calibration_error():
    rng = np.random.default_rng(8)
    proba = rng.dirichlet(np.ones(3), size=300)
    y = np.array(["a", "b", "c"])[rng.integers(0, 3, 300)]
    conf, top = proba.max(axis=1), proba.argmax(axis=1)
    hit = np.array(["a", "b", "c"])[top] == y
    want = 0.0
    for lo, hi in zip(np.linspace(0, 1, 11)[:-1], np.linspace(0, 1, 11)[1:], strict=True):
        inside = (conf > lo) & (conf <= hi)
        want += abs(hit[inside].sum() - conf[inside].sum()) / 300
    np.testing.assert_allclose(expected_calibration_error(y, proba), want, rtol=1e-12)
    with pytest.raises(ValueError, match="pass labels=clf.classes_"):
        expected_calibration_error(y[:2], proba[:2])
    with pytest.raises(ValueError, match="1-D y_prob is the positive class"):
        expected_calibration_error(y, conf)
    with pytest.raises(ValueError, match="outside"):
        expected_calibration_error(y, proba + 0.5)


@pytest.mark.parametrize(
    "call",
    [
        lambda: crps_gaussian([0.0, 1.0], [0.0, 1.0], [1.0, 0.0]),
        lambda: crps_mixture([0.0], [[0.0, 1.0]], [[1.0, 1.0]], [1.0, -1.0]),
        lambda: crps_mixture([0.0], [[0.0, 1.0]], [[1.0, 1.0]], [1.0, 1.0, 1.0]),
        lambda: pit_mixture([0.0], [[0.0, 1.0]], [[1.0]]),
        lambda: crps_ensemble([0.0, np.nan], [[0.0], [1.0]]),
        lambda: crps_ensemble([0.0], [[0.0]], fair=True),
        lambda: log_predictive_density([[0.0]], [[0.0, 1.0]], [[1.0, 1.0]]),
    ],
    ids=["std<=0", "weights<0", "weights-size", "stds-shape", "nan", "fair-one-draw", "layout"],
)
def test_bad_input_names_the_problem(call):
    with pytest.raises(ValueError, match="y_std|weights|y_stds|y_true|y_samples|y_means"):
        call()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # short VI
@pytest.mark.parametrize("n_outputs", [1, 2])
@pytest.mark.parametrize("method", ["laplace", "vi"])
def test_predict_mixture_is_the_estimators_predictive(method, n_outputs):
    rng = np.random.default_rng(9)
    X = rng.normal(size=(60, 2))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])[:, :n_outputs] * 5 + 10
    Y = Y + 0.3 * rng.normal(size=Y.shape)
    y = Y[:, 0] if n_outputs == 1 else Y
    m = {
        "laplace": Laplace(optimize_prior=False),  # the linearized predictive: fvar > 0
        "vi": VariationalInference(max_iter=30),
    }[method]
    reg = BayesianMLPRegressor((5,), method=m, n_samples=50, random_state=0).fit(X, y)
    X_new, y_new = X[:20] + 0.1, y[:20]
    means, stds, w = reg.predict_mixture(X_new)
    assert means.shape == stds.shape == (20, *y.shape[1:], w.size)
    np.testing.assert_allclose(w.sum(), 1.0)
    # its moments are predict's; its density is log_predictive_scorer's
    mean, std = reg.predict(X_new, return_std=True)
    np.testing.assert_allclose(means @ w, mean, rtol=1e-10)
    var = (stds**2 + (means - mean[..., None]) ** 2) @ w
    np.testing.assert_allclose(np.sqrt(var), std, rtol=1e-8)
    np.testing.assert_allclose(
        log_predictive_density(y_new, means, stds, w), log_predictive_scorer(reg, X_new, y_new),
        rtol=1e-10,
    )  # fmt: skip
    # its CDF at predict_interval's bounds is the interval's tail probabilities
    lower, upper = reg.predict_interval(X_new, coverage=0.8)
    np.testing.assert_allclose(pit_mixture(lower, means, stds, w), 0.1, atol=1e-6)
    np.testing.assert_allclose(pit_mixture(upper, means, stds, w), 0.9, atol=1e-6)
    # and sample_y draws from it: the fair ensemble CRPS of 4000 draws is an unbiased
    # estimate of the exact one, with sd about 2 sd(X) / sqrt(4000) (a U-statistic whose
    # first projection is 1-Lipschitz in X, so of variance at most Var X); 5 of them
    # give a false alarm of 6e-7 a row
    draws = reg.sample_y(X_new, 4000, random_state=1)
    for i in range(20):
        one = slice(i, i + 1)
        exact = crps_mixture(y_new[one], means[one], stds[one], w, multioutput="raw_values")
        est = crps_ensemble(y_new[one], draws[one], fair=True, multioutput="raw_values")
        assert np.all(np.abs(est - exact) < 5 * 2 * np.sqrt(var[i]) / np.sqrt(4000))


def test_expected_calibration_error_of_a_classifier():
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    clf = BayesianMLPClassifier((4,), method=Laplace(optimize_prior=False), random_state=0)
    proba = clf.fit(X, y).predict_proba(X)
    ece = expected_calibration_error(y, proba, labels=clf.classes_)
    assert 0 <= ece <= 1
    # a classifier that says 1/3 everywhere, right a third of the time, is calibrated
    assert expected_calibration_error(y, np.full((150, 3), 1 / 3)) == pytest.approx(0, abs=1e-12)


# --- Display objects -----------------------------------------------------------------


def _gap_regressor(pipeline=False):
    rng = np.random.default_rng(10)
    x = np.concatenate([rng.uniform(-3, -1, 30), rng.uniform(1, 3, 30)])
    y = np.sin(x) + 0.1 * rng.normal(size=60)
    reg = BayesianMLPRegressor((8,), method=Laplace(optimize_prior=False), random_state=0)
    if pipeline:
        reg = make_pipeline(StandardScaler(), reg)
    return reg.fit(x[:, None], y), x, y


def test_predictive_band_display_from_estimator():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    reg, x, y = _gap_regressor()
    grid = np.linspace(3.5, -3.5, 50)[:, None]  # unsorted on purpose
    disp = PredictiveBandDisplay.from_estimator(reg, grid, X_train=x, y_train=y, random_state=0)
    assert np.all(np.diff(disp.x) > 0)
    lower, upper = reg.predict_interval(grid[::-1], coverage=0.9)
    np.testing.assert_allclose(disp.y_lower[0], lower)  # the widest first
    np.testing.assert_allclose(disp.y_upper[0], upper)
    assert np.all(disp.y_lower[0] <= disp.y_lower[1]) and np.all(disp.y_upper[1] <= upper)
    np.testing.assert_allclose(disp.y_mean, reg.predict(grid[::-1]))
    assert disp.f_draws.shape == (5, 50) and len(disp.draw_lines_) == 5
    assert len(disp.bands_) == 2 and disp.scatter_ is not None
    assert disp.ax_.get_legend() is not None and disp.figure_ is disp.ax_.figure
    # the band widens in the gap (|x| < 1) over where the data are
    width = disp.y_upper[0] - disp.y_lower[0]
    inside, data = np.abs(disp.x) < 0.5, (np.abs(disp.x) > 1.5) & (np.abs(disp.x) < 2.5)
    assert width[inside].mean() > width[data].mean()
    # the draws are seeded by random_state
    again = PredictiveBandDisplay.from_estimator(reg, grid, random_state=0, n_draws=5)
    np.testing.assert_array_equal(again.f_draws, disp.f_draws)
    # a Pipeline works: its last step gets the transformed rows, the plot the raw x
    pipe, x, y = _gap_regressor(pipeline=True)
    disp = PredictiveBandDisplay.from_estimator(pipe, grid, coverage=0.8, n_draws=0)
    np.testing.assert_allclose(disp.y_lower[0], pipe[-1].predict_interval(
        pipe[:-1].transform(grid[::-1]), coverage=0.8)[0])  # fmt: skip
    np.testing.assert_allclose(disp.x, grid[::-1, 0])
    assert disp.f_draws is None and disp.draw_lines_ == []
    with pytest.raises(ValueError, match="one input feature"):
        PredictiveBandDisplay.from_estimator(reg, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="coverage must be"):
        PredictiveBandDisplay.from_estimator(reg, grid, coverage=1.2)
    matplotlib.pyplot.close("all")


def test_predictive_band_display_from_predictions_sorts_and_orders_levels():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    x = np.array([2.0, 0.0, 1.0])
    lo = np.array([[-1.0, -3.0, -2.0], [-2.0, -6.0, -4.0]])  # 50 %, then 90 %
    disp = PredictiveBandDisplay.from_predictions(x, [0, 0, 0], lo, -lo, coverage=[0.5, 0.9])
    np.testing.assert_array_equal(disp.x, [0, 1, 2])
    np.testing.assert_array_equal(disp.coverage, [0.9, 0.5])
    np.testing.assert_array_equal(disp.y_lower, [[-6, -4, -2], [-3, -2, -1]])
    with pytest.raises(ValueError, match=r"must have shape \(2, 3\)"):
        PredictiveBandDisplay.from_predictions(x, [0, 0, 0], lo[0], -lo[0], coverage=[0.5, 0.9])
    matplotlib.pyplot.close("all")


def test_pit_display_coverage_and_histogram():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    reg, x, y = _gap_regressor()
    rng = np.random.default_rng(11)
    X_new = rng.uniform(-3, 3, (200, 1))
    y_new = np.sin(X_new[:, 0]) + 0.1 * rng.normal(size=200)
    disp = PITDisplay.from_estimator(reg, X_new, y_new)
    same = PITDisplay.from_predictions(y_new, *reg.predict_mixture(X_new))
    np.testing.assert_array_equal(disp.pit, same.pit)
    # the coverage curve at a level is the share of targets in predict_interval's interval
    lower, upper = reg.predict_interval(X_new, coverage=0.9)
    i = np.flatnonzero(np.isclose(disp.nominal_, 0.9))[0]
    np.testing.assert_allclose(disp.observed_[i], interval_coverage(y_new, lower, upper),
                               atol=1 / 200)  # fmt: skip
    assert disp.observed_[0] <= disp.observed_[-1] == 1.0
    assert np.all(np.diff(disp.observed_) >= 0)
    hist = PITDisplay(pit=disp.pit).plot(kind="histogram", n_bins=8)
    heights = np.array([bar.get_height() for bar in hist.line_])
    np.testing.assert_allclose(heights.sum() / 8, 1.0)
    with pytest.raises(ValueError, match="kind must be"):
        PITDisplay(pit=disp.pit).plot(kind="qq")
    # a classifier has no predictive density of y: the error says what to use instead
    clf = BayesianMLPClassifier((2,), method=Laplace(optimize_prior=False), random_state=0)
    clf.fit(X_new, (y_new > 0).astype(int))
    with pytest.raises(TypeError, match="CalibrationDisplay"):
        PITDisplay.from_estimator(clf, X_new, y_new)
    with pytest.raises(TypeError, match="CalibrationDisplay"):
        PredictiveBandDisplay.from_estimator(clf, X_new)
    matplotlib.pyplot.close("all")


def test_importing_the_metrics_does_not_import_matplotlib():
    code = "import sys, skbnn.metrics; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
