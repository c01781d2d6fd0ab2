"""The chain driver: warm-up schedule, divergence accounting, warnings, progress bar."""

import warnings

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import HMC, NUTS
from skbnn.methods._mcmc import stan_windows
from skbnn.model_selection import evidence_scorer, log_predictive_scorer


def _windows(sched):
    ends = np.flatnonzero(sched[:, 1])
    starts = np.r_[np.flatnonzero(sched[:, 0])[0], ends[:-1] + 1]
    return [(int(a), int(b)) for a, b in zip(starts, ends, strict=True)]


def test_stan_windows_match_stan():
    # Stan's schedule for 1000 warm-up iterations: buffer 75, windows 25, 50, 100, 200 and a
    # last one stretched to the terminal buffer of 50
    assert _windows(stan_windows(1000)) == [
        (75, 99),
        (100, 149),
        (150, 249),
        (250, 449),
        (450, 949),
    ]
    # short warm-ups shrink to 15 % / 75 % / 10 %
    assert _windows(stan_windows(100)) == [(15, 89)]
    # the stretch rule applies from the second window on, as in Stan's compute_next_window
    assert _windows(stan_windows(175)) == [(75, 99), (100, 124)]
    assert _windows(stan_windows(151)) == [(75, 99), (100, 100)]
    assert not stan_windows(19).any()
    sched = stan_windows(500)
    assert sched[:, 0].sum() == 500 - 75 - 50


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    return X, X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)


def test_divergences_are_counted_and_warned():
    X, y = _data()
    # a target acceptance of 5 % drives the step size far past the integrator's stability
    # limit, so trajectories blow up (energy errors above 1000)
    method = NUTS(n_chains=2, n_warmup=50, target_accept=0.05)
    reg = BayesianMLPRegressor(hidden_layer_sizes=(3,), method=method, n_samples=40, random_state=0)
    with pytest.warns(ConvergenceWarning, match="divergent transitions"):
        reg.fit(X, y)
    d = reg.diagnostics_
    assert d["divergences"] == d["divergences_per_chain"].sum() > 0
    assert d["warmup_divergences"] > 0


def test_too_short_chains_warn_instead_of_passing_silently():
    X, y = _data()
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(3,), method=NUTS(n_chains=3, n_warmup=5), n_samples=6, random_state=0
    )
    with pytest.warns(ConvergenceWarning, match="R-hat"):
        reg.fit(X, y)
    assert np.isnan(reg.diagnostics_["rhat_loglik"])


def test_converged_run_does_not_warn_and_reports_consistent_figures():
    X, y = _data()
    method = NUTS(n_chains=4, n_warmup=300, max_tree_depth=6)
    reg = BayesianMLPRegressor(hidden_layer_sizes=(), activation="identity", method=method,
                               n_samples=800, random_state=0)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        reg.fit(X, y)
    d = reg.diagnostics_
    assert d["n_chains"] == 4 and d["n_draws_per_chain"] == 200
    assert d["n_grad_evals"] == d["n_grad_evals_per_chain"].sum()
    # each kept draw costs its leapfrog steps: the total exceeds the kept draws' share
    assert d["n_grad_evals"] > d["mean_n_leapfrog"].sum() * 200
    assert np.all(d["mean_tree_depth"] <= 6)
    assert np.all((d["accept_rate"] > 0.6) & (d["accept_rate"] <= 1))
    assert d["compile_time"] >= 0 and d["wall_time"] >= d["compile_time"]
    assert np.all(np.isfinite(d["e_bfmi"])) and np.all(d["e_bfmi"] > 0.3)


def test_hmc_path_length_sets_steps():
    X, y = _data()
    method = HMC(n_chains=2, n_warmup=100, path_length=1.0, step_jitter=0.0)
    reg = BayesianMLPRegressor(hidden_layer_sizes=(), activation="identity", method=method,
                               n_samples=100, random_state=0).fit(X, y)  # fmt: skip
    d = reg.diagnostics_
    expected = np.ceil(1.0 / d["step_size"])
    np.testing.assert_array_equal(d["mean_n_leapfrog"], expected)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_progress_bar_when_verbose(capsys):
    X, y = _data()
    BayesianMLPRegressor(hidden_layer_sizes=(2,), method=NUTS(n_chains=2, n_warmup=20),
                         n_samples=20, random_state=0, verbose=1).fit(X, y)  # fmt: skip
    err = capsys.readouterr().err
    # 2 chains x (20 warm-up + 10 kept) iterations
    assert "NUTS 2 chains" in err and "60/60" in err


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_log_predictive_scorer_matches_mixture_density():
    X, y = _data()
    reg = BayesianMLPRegressor(hidden_layer_sizes=(3,), method=NUTS(n_chains=2, n_warmup=50),
                               n_samples=30, random_state=0).fit(X, y)  # fmt: skip
    # the density of y is the average over draws of N(y | f_s(x), sigma_s^2), original units
    f = np.stack(
        [_single_draw_prediction(reg, s, X) for s in range(reg.posterior_.n_draws)]
    )  # (S, n)
    sd = y.std() / np.sqrt(reg.posterior_.noise_precision[:, 0])
    density = norm.pdf(y[None, :], f, sd[:, None]).mean(axis=0)
    assert log_predictive_scorer(reg, X, y) == pytest.approx(np.mean(np.log(density)), rel=1e-10)
    with pytest.raises(TypeError, match="has no log_evidence_"):
        evidence_scorer(reg, X, y)


def _single_draw_prediction(reg, s, X):
    coefs, intercepts = reg._layout.unpack(reg.posterior_.thetas[s])
    h = np.tanh(X @ coefs[0] + intercepts[0])
    return (h @ coefs[1] + intercepts[1])[:, 0] * reg._y_std[0] + reg._y_mean[0]


def test_log_predictive_scorer_in_grid_search_and_for_classifiers():
    X, y = _data()
    grid = GridSearchCV(
        BayesianMLPRegressor(method=NUTS(n_chains=2, n_warmup=30), n_samples=20, random_state=0),
        {"hidden_layer_sizes": [(), (3,)]},
        scoring=log_predictive_scorer,
        cv=2,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        grid.fit(X, y)
        assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))
        labels = np.where(y > np.median(y), "hi", "lo")
        clf = BayesianMLPClassifier(hidden_layer_sizes=(2,), method=NUTS(n_chains=2, n_warmup=30),
                                    n_samples=20, random_state=0).fit(X, labels)  # fmt: skip
    proba = clf.predict_proba(X)
    index = np.searchsorted(clf.classes_, labels)
    expected = np.mean(np.log(proba[np.arange(len(labels)), index]))
    assert log_predictive_scorer(clf, X, labels) == pytest.approx(expected)


def test_dense_metric_learns_correlations():
    # nearly collinear features make the weight posterior a narrow, tilted ellipse: a
    # diagonal metric needs long trajectories, the adapted dense one sees a round target
    rng = np.random.default_rng(0)
    x = rng.standard_normal(200)
    X = np.c_[x, x + 0.02 * rng.standard_normal(200)]
    y = X @ [1.0, 1.0] + 0.1 * rng.standard_normal(200)
    leapfrogs = {}
    for metric in ("diagonal", "dense"):
        method = NUTS(n_chains=2, n_warmup=400, metric=metric)
        reg = BayesianMLPRegressor(
            hidden_layer_sizes=(), activation="identity", method=method, n_samples=400,
            noise_std=0.1, random_state=0,
        ).fit(X, y)  # fmt: skip
        leapfrogs[metric] = reg.diagnostics_["mean_n_leapfrog"].mean()
    assert leapfrogs["dense"] < 0.25 * leapfrogs["diagonal"], leapfrogs


def test_output_layer_gibbs_draws_from_exact_conditional():
    # Given the hidden layer, the output layer of a Gaussian-likelihood network has a
    # Gaussian conditional; draws must match its mean and covariance within Monte Carlo error
    from skbnn.kernels import hmc as khmc
    from skbnn.network import NetworkLayout
    from skbnn.priors import GaussianPrior
    from skbnn.target import Target

    rng = np.random.default_rng(3)
    n, d, h = 30, 2, 3
    X = rng.standard_normal((n, d))
    Y = rng.standard_normal((n, 2))
    layout = NetworkLayout((d, h, 2))
    target = Target(X, Y, (h,), "tanh", "gaussian", GaussianPrior().stds(layout),
                    noise_precision=np.array([4.0, 0.5]))  # fmt: skip
    target.floats[2] = 0.7  # a tempered likelihood scales the data precision
    tgt, ws = target.as_tuple(), target.workspace()
    theta = target.sample_prior(rng, 1)[0]
    w_slice, b_slice = layout.slices(1)
    n_draws = 4000
    draws = np.empty((n_draws, h + 1, 2))
    gen = np.random.default_rng(4)
    for s in range(n_draws):
        khmc._gibbs_output_layer(gen, theta, tgt, ws)
        draws[s, :h] = theta[w_slice].reshape(h, 2)
        draws[s, h] = theta[b_slice]
    coefs, intercepts = layout.unpack(theta)
    phi = np.c_[np.tanh(X @ coefs[0] + intercepts[0]), np.ones(n)]
    prior_sd = np.r_[np.full(h, 1 / np.sqrt(h)), 1.0]
    for o, tau in enumerate([4.0, 0.5]):
        precision = 0.7 * tau * phi.T @ phi + np.diag(1 / prior_sd**2)
        cov = np.linalg.inv(precision)
        mean = cov @ (0.7 * tau * phi.T @ Y[:, o])
        sample = draws[:, :, o]
        se = np.sqrt(np.diag(cov) / n_draws)
        assert np.all(np.abs(sample.mean(axis=0) - mean) < 4 * se)
        # relative sd of a variance estimate is sqrt(2 / n_draws) = 2.2 %: 10 % is 4.5 of it
        np.testing.assert_allclose(np.cov(sample.T), cov, rtol=0.1, atol=0.1 * np.abs(cov).max())


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("verbose", [0, 1])
def test_more_chains_than_threads_interleave_without_changing_the_draws(verbose):
    # 3 chains on 2 threads run in short blocks, switching chains between blocks; on 1
    # thread each chain runs in one piece: the draws must be identical
    from skbnn.methods import _mcmc

    X, y = _data()

    def fit(n_jobs):
        return BayesianMLPRegressor(
            hidden_layer_sizes=(2,), method=NUTS(n_chains=3, n_warmup=80), n_samples=120,
            random_state=0, n_jobs=n_jobs, verbose=verbose,
        ).fit(X, y)  # fmt: skip

    calls = []
    original = _mcmc._run_interleaved

    def spy(chains, n_blocks, advance, n_workers):
        calls.append((n_blocks, n_workers))
        return original(chains, n_blocks, advance, n_workers)

    _mcmc._run_interleaved = spy
    try:
        serial, threaded = fit(1), fit(2)
    finally:
        _mcmc._run_interleaved = original
    assert len(calls) == 1 and calls[0][1] == 2 and calls[0][0] >= 40
    np.testing.assert_array_equal(serial.posterior_.thetas, threaded.posterior_.thetas)
    np.testing.assert_array_equal(
        serial.diagnostics_["n_grad_evals_per_chain"],
        threaded.diagnostics_["n_grad_evals_per_chain"],
    )


def test_a_failing_chain_stops_the_interleaved_run():
    from skbnn.methods._mcmc import _run_interleaved

    chains = [{"pos": 0} for _ in range(3)]

    def advance(chain):
        if chain is chains[1] and chain["pos"] == 2:
            raise RuntimeError("chain 1 broke")
        chain["pos"] += 1

    with pytest.raises(RuntimeError, match="chain 1 broke"):
        _run_interleaved(chains, 10, advance, 2)
    assert chains[1]["pos"] == 2 and all(c["pos"] < 10 for c in chains[::2])


def _prior_target(hidden, activation, n_outputs=3, beta=1.0, seed=0, noise="fixed"):
    from skbnn.network import NetworkLayout
    from skbnn.priors import GaussianPrior
    from skbnn.target import Target

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((7, 4))
    Y = rng.standard_normal((7, n_outputs))
    layout = NetworkLayout((4, *hidden, n_outputs))
    # prior sds differ per parameter, so a mix-up of indices shows
    std = GaussianPrior(1.3).stds(layout) * rng.uniform(0.5, 2.0, layout.n_weights)
    target = Target(X, Y, hidden, activation, "gaussian", std, noise=noise)
    target.floats[2] = beta
    return target, layout


def _unit_norms(thetas, layout, prior_std):
    # per hidden unit of every hidden layer: (sum of squared standardized incoming weights
    # and bias, fan_in + 1), chi-square with fan_in + 1 degrees of freedom under the prior,
    # and (sum of squared standardized outgoing weights, fan_out)
    z = thetas[:, : layout.n_weights] / prior_std
    out = []
    for layer in range(layout.n_layers - 1):
        (w1, b1), (w2, _) = layout.slices(layer), layout.slices(layer + 1)
        fan_in, h, k = (int(s) for s in layout.sizes[layer : layer + 3])
        incoming = (z[:, w1].reshape(-1, fan_in, h) ** 2).sum(axis=1) + z[:, b1] ** 2
        outgoing = (z[:, w2].reshape(-1, h, k) ** 2).sum(axis=2)
        out += [(incoming, fan_in + 1), (outgoing, k)]
    return out


@pytest.mark.parametrize(
    "hidden, activation, n_outputs",
    [((2,), "relu", 3), ((3, 2), "relu", 1), ((3, 2), "identity", 1), ((2,), "relu", 9)],
)
def test_rescale_move_keeps_the_function_and_the_prior(hidden, activation, n_outputs):
    # The move multiplies a unit's incoming parameters by c and its outgoing weights by 1/c:
    # the network's output must not change, and applied to exact prior draws it must return
    # exact prior draws, which fixes the conditional of c (a half-unit error in the Jacobian
    # exponent shifts the norms' log-means by ~25 standard errors). 9 outputs > 5 incoming
    # parameters makes the GIG exponent negative.
    from scipy.special import digamma, polygamma

    from skbnn.kernels.hmc import rescale_units

    target, layout = _prior_target(hidden, activation, n_outputs)
    tgt = target.as_tuple()
    rng = np.random.default_rng(1)
    n = 20_000
    before = target.sample_prior(rng, n)
    after = before.copy()
    g = np.zeros(target.n_params)
    for theta in after:
        rescale_units(rng, theta, g, tgt)
    assert np.mean(np.any(after != before, axis=1)) > 0.99
    ll_before, _ = target.loglik_batch(before[:200])
    ll_after, _ = target.loglik_batch(after[:200])
    np.testing.assert_allclose(ll_after, ll_before, rtol=1e-10, atol=1e-9)
    for norms, dof in _unit_norms(after, layout, target.prior_std):
        # E[log chi2_m] = digamma(m / 2) + log 2, Var = trigamma(m / 2)
        se = np.sqrt(polygamma(1, dof / 2) / n)
        assert np.all(np.abs(np.log(norms).mean(axis=0) - digamma(dof / 2) - np.log(2)) < 4 * se)


@pytest.mark.parametrize("noise", ["fixed", "marginal"])
@pytest.mark.parametrize("hidden", [(3,), (3, 2)])
def test_rescale_move_carries_the_gradient_and_log_density(hidden, noise):
    # The move updates the gradient by scaling instead of a pass over the data, and returns
    # the change of the log density: both must match a fresh evaluation at the new point.
    from skbnn.kernels.hmc import rescale_units

    target, _ = _prior_target(hidden, "relu", n_outputs=2, noise=noise)
    tgt = target.as_tuple()
    rng = np.random.default_rng(3)
    for theta in target.sample_prior(rng, 20):
        lp, g = target.logp_and_grad(theta)
        dlp = rescale_units(rng, theta, g, tgt)
        lp_new, g_new = target.logp_and_grad(theta)
        assert lp + dlp == pytest.approx(lp_new, rel=1e-10, abs=1e-9)
        np.testing.assert_allclose(g, g_new, rtol=1e-9, atol=1e-9 * np.abs(g_new).max())


def test_rescale_is_skipped_without_the_symmetry():
    # tanh units have no scale symmetry: the option must change nothing, not even the
    # gradient count
    X, y = _data()

    def fit(rescale):
        reg = BayesianMLPRegressor(
            hidden_layer_sizes=(3,), activation="tanh", n_samples=100, random_state=0,
            method=NUTS(n_chains=2, n_warmup=60, rescale_units=rescale),
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return reg.fit(X, y)

    on, off = fit(True), fit(False)
    np.testing.assert_array_equal(on.posterior_.thetas, off.posterior_.thetas)
    assert on.diagnostics_["n_grad_evals"] == off.diagnostics_["n_grad_evals"]


@pytest.mark.parametrize("metric", ["diagonal", "diagonal_grad"])
def test_nuts_with_rescale_moves_samples_a_relu_prior(metric):
    # With the likelihood tempered away (beta = 0) the posterior is the prior: NUTS with the
    # scale moves in between trajectories must reproduce the chi-square law of the units'
    # norms (log-means within 4 Monte Carlo standard errors from the bulk ESS), and the
    # moves must have changed the chain.
    from scipy.special import digamma

    from skbnn.diagnostics import ess_bulk

    target, layout = _prior_target((3,), "relu", n_outputs=2, beta=0.0)
    runs = {
        rescale: NUTS(n_chains=2, n_warmup=300, metric=metric, rescale_units=rescale).run(
            target, n_samples=4000, random_state=0, n_jobs=1, verbose=0
        )
        for rescale in (True, False)
    }
    thetas = runs[True].posterior.thetas
    assert not np.allclose(thetas, runs[False].posterior.thetas)
    for norms, dof in _unit_norms(thetas, layout, target.prior_std):
        logs = np.log(norms).reshape(2, 2000, -1)
        for j in range(logs.shape[2]):
            se = logs[:, :, j].std() / np.sqrt(ess_bulk(logs[:, :, j]))
            assert abs(logs[:, :, j].mean() - digamma(dof / 2) - np.log(2)) < 4 * se


def test_gradient_balanced_metric_estimate():
    # Fed draws x ~ N(0, S) with their gradients -S^-1 x, the window's estimate must be
    # sqrt(S_ii / (S^-1)_ii): the variance when S is diagonal, and between the marginal and
    # the conditional variance when it is not. Relative sd of each variance estimate is
    # sqrt(2 / n) = 1 %, so 4 % is four of it.
    from skbnn.kernels.hmc import _welford
    from skbnn.methods._mcmc import _update_metric

    rng = np.random.default_rng(0)
    d, n = 4, 20_000
    a = rng.standard_normal((d, d))
    for cov in (np.diag([0.01, 1.0, 4.0, 100.0]), a @ a.T + 0.1 * np.eye(d)):
        prec = np.linalg.inv(cov)
        draws = rng.multivariate_normal(np.zeros(d), cov, size=n)
        chain = {
            "metric": (np.ones(d), np.zeros((1, 1)), np.zeros((1, 1))),
            "sc": np.zeros(9),
            "w_mean": np.zeros(d),
            "w_m2": np.zeros((3, d)),
            "grad_metric": True,
        }
        for x in draws:
            _welford(x, -prec @ x, chain["w_mean"], chain["w_m2"], chain["sc"], False)
        _update_metric(chain, dense=False)
        expected = np.sqrt(np.diag(cov) / np.diag(prec))
        # Stan's regularization: shrink towards 1e-3 with the weight of 5 draws
        expected = n / (n + 5.0) * expected + 1e-3 * 5.0 / (n + 5.0)
        np.testing.assert_allclose(chain["metric"][0], expected, rtol=0.04)
        assert not np.any(chain["w_m2"]) and chain["sc"][6] == 0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # gamma 0.1, 10
def test_adaptive_metropolis_gamma_scales_the_proposal():
    from skbnn.methods import AdaptiveMetropolis

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = X @ np.array([1.0, -0.5, 0.25]) + 0.4 * rng.standard_normal(60)

    def fit(gamma):
        method = AdaptiveMetropolis(n_chains=2, n_warmup=2000, gamma=gamma)
        reg = BayesianMLPRegressor((), activation="identity", method=method, n_samples=4000)
        return reg.set_params(noise_std=0.3, random_state=0).fit(X, y).diagnostics_

    small, optimal, large = fit(0.1), fit(1.0), fit(10.0)
    # smaller steps are accepted more often; the proposal variances grow with gamma (not
    # exactly 100-fold: the running covariance includes each chain's own transient)
    assert small["accept_rate"].min() > optimal["accept_rate"].max()
    assert optimal["accept_rate"].min() > large["accept_rate"].max()
    assert np.all(large["inverse_mass_matrix"] > 10 * small["inverse_mass_matrix"])
    assert 0.15 < optimal["accept_rate"].mean() < 0.45  # near the optimal 0.234-0.35


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 5 draws
def test_adaptive_metropolis_warns_about_large_dense_covariances():
    from skbnn.methods import AdaptiveMetropolis

    rng = np.random.default_rng(1)
    X = rng.standard_normal((20, 30))
    y = rng.standard_normal(20)
    method = AdaptiveMetropolis(n_chains=1, n_warmup=5, t0=2, t_adapt=2)
    reg = BayesianMLPRegressor((40,), method=method, n_samples=5, random_state=0)
    with pytest.warns(UserWarning, match="variant='diagonal'"):
        reg.fit(X, y)  # 30*40 + 40 + 40 + 1 = 1281 parameters
    method.set_params(variant="diagonal")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*covariance per chain")
        reg.fit(X, y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # short runs
@pytest.mark.parametrize("method_cls", ["MALA", "AdaptiveMetropolis"])
def test_thinning_keeps_every_thin_th_state_of_the_same_chain(method_cls):
    from skbnn import methods

    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 2))
    y = X[:, 0] - X[:, 1] + 0.3 * rng.standard_normal(40)
    cls = getattr(methods, method_cls)

    def fit(thin, n_samples):
        method = cls(n_chains=2, n_warmup=200, thin=thin)
        return BayesianMLPRegressor((3,), method=method, n_samples=n_samples, random_state=0)

    thinned = fit(5, 60).fit(X, y)
    full = fit(1, 300).fit(X, y)
    a = thinned.posterior_.thetas.reshape(2, 30, -1)
    b = full.posterior_.thetas.reshape(2, 150, -1)
    np.testing.assert_array_equal(a, b[:, 4::5])
    # every transition's acceptance is counted, not only the kept ones
    np.testing.assert_allclose(
        thinned.diagnostics_["accept_rate"], full.diagnostics_["accept_rate"], rtol=1e-12
    )
    assert thinned.diagnostics_["n_grad_evals"] == full.diagnostics_["n_grad_evals"]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # short runs
def test_logistic_prior_end_to_end_and_tunable():
    from sklearn.datasets import load_iris

    from skbnn.methods import SMC
    from skbnn.priors import LogisticPrior

    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    nuts = NUTS(n_chains=2, n_warmup=100)
    clf = BayesianMLPClassifier((3,), method=nuts, prior="logistic", n_samples=100)
    assert clf.set_params(random_state=0).fit(X, y).score(X, y) > 0.9
    search = GridSearchCV(
        BayesianMLPClassifier((2,), method=SMC(n_mcmc_steps=2), prior=LogisticPrior(),
                              n_samples=60, random_state=0),
        {"prior__scale": [0.3, 3.0]}, scoring=evidence_scorer,
        cv=[(np.arange(len(y)), np.arange(len(y)))],
    ).fit(X, y)  # fmt: skip
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and scores[0] != scores[1]
