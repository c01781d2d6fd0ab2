"""Latent binary BNNs: the spike-and-slab kernels, the exact cases, and the fitted answers.

Exact checks: the kernels' gradients against central differences (both training paths,
every likelihood); the closed-form KL against its definition; ``feature_inclusion_``
against enumeration of every indicator configuration. Statistical checks state their
false-alarm probability where it is one. The sparse-truth test's thresholds come from the
measured relation between a null input's inclusion probability and its t statistic
(``benchmarks/lbbnn_null_alpha.py``): the true inputs' are above 0.9999, a null's is
typically 0.003-0.02 (median 0.007) and passes 0.5 only near ``|t| = 3.9`` (see the test).
"""

import itertools
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import SelectFromModel
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.kernels import density as knet
from skbnn.kernels import lbbnn as klbbnn
from skbnn.kernels import lrt as klrt
from skbnn.kernels import vi as kvi
from skbnn.kernels._compile import call
from skbnn.log_posterior import LogPosterior
from skbnn.methods import LBBNN, VariationalInference
from skbnn.methods.lbbnn import path_probabilities

Z = 4.5  # two-sided normal tail 6.8e-6


def _case(likelihood, local, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((7, 2))
    y = X[:, 0] - X[:, 1] ** 2
    Y = {"gaussian": y, "bernoulli": (y > 0) * 1.0,
         "categorical": np.eye(3)[np.digitize(y, [-1.0, 0.0])]}[likelihood]  # fmt: skip
    target = LogPosterior(X, Y, (3,), "tanh", likelihood, noise="theta")
    # the first layer has indicators, the second is always in (psi = 1)
    method = LBBNN(inclusion_prior=[0.2, 1.0], local_reparameterization=local, init_std=0.3,
                   temperature=0.7)  # fmt: skip
    vcfg = method._vcfg(target)
    lam = method._start(target, np.random.default_rng(0), vcfg)
    p = target.n_params
    lam[p : 2 * p] += 0.3 * rng.standard_normal(p)
    lam[2 * p :] = rng.standard_normal(p)  # inclusion probabilities spread over (0, 1)
    return target, method, vcfg, lam


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli", "categorical"])
@pytest.mark.parametrize("local", [True, False], ids=["lrt", "concrete"])
def test_gradient_of_the_elbo_estimate_is_exact(likelihood, local):
    # With the draws fixed (the same seed), a step's ELBO estimate is a smooth function of
    # lam = [kappa, rho, lambda]; the kernel's gradient must match central differences
    target, method, vcfg, lam = _case(likelihood, local)
    p = target.n_params
    tgt = target.kernel_target(own=True)
    tgt.cfg[0]["beta"] = 1.7  # a minibatch's n / B
    work = method._work(target, vcfg)
    sizes = target.layout.sizes
    ws = np.empty(max(klrt.lrt_workspace_size(sizes, 7), knet.workspace_size(sizes, 7)))
    stats_ = np.empty(2 + int(sizes[-1]))

    def estimate(lam_, with_grad=False):
        kvi.set_sigmas(lam_, p, work)
        klbbnn.set_alphas(lam_, p, work)
        work.glam[:] = 0.0
        value = klbbnn.spike_slab_terms(lam_, p, target.layout.n_weights, work, with_grad)
        value += kvi.mc_term(lam_, p, tgt, vcfg, work, ws, stats_, np.random.default_rng(5),
                             with_grad, 1.0)  # fmt: skip
        return value, work.glam.copy()

    _, grad = estimate(lam, True)
    h = 1e-6
    numeric = np.array(
        [(estimate(lam + e)[0] - estimate(lam - e)[0]) / (2 * h) for e in np.eye(lam.size) * h]
    )
    np.testing.assert_allclose(grad, numeric, rtol=0, atol=1e-7 * np.max(np.abs(grad)))
    # the always-in parameters' lambda never moves
    psi = work.psi
    assert np.all(grad[2 * p :][psi >= 1] == 0) and np.any(grad[2 * p :][psi < 1] != 0)


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli", "categorical"])
@pytest.mark.parametrize("n_mc", [1, 3])
def test_prepared_step_is_the_reference_step(likelihood, n_mc):
    # The epoch kernel's mean-field step by the local reparameterization trick fuses the
    # closed-form terms with the draws' moments (spike_slab_prepare) and applies the chain
    # rule once after its draws (spike_slab_finish): the same value and gradient as the
    # reference composition (the one the finite-difference test above checks), draw for
    # draw, up to rounding
    target, method, vcfg, lam = _case(likelihood, True)
    p, n_w = target.n_params, target.layout.n_weights
    tgt = target.kernel_target(own=True)
    tgt.cfg[0]["beta"] = 1.7
    sizes = target.layout.sizes
    ws = np.empty(max(klrt.lrt_workspace_size(sizes, 7), knet.workspace_size(sizes, 7)))
    stats_ = np.empty(2 + int(sizes[-1]))
    act, lik = int(tgt.cfg[0]["activation"]), int(tgt.cfg[0]["likelihood"])
    ref = method._work(target, vcfg)
    kvi.set_sigmas(lam, p, ref)
    klbbnn.set_alphas(lam, p, ref)
    ref.glam[:] = 0.0
    expected = klbbnn.spike_slab_terms(lam, p, n_w, ref, True)
    rng = np.random.default_rng(5)
    for _ in range(n_mc):
        expected += kvi.mc_term(lam, p, tgt, vcfg, ref, ws, stats_, rng, True, 1.0 / n_mc) / n_mc
    work = method._work(target, vcfg)
    work.glam[:] = np.nan  # every entry is written, none read
    value = klbbnn.spike_slab_prepare(lam, p, n_w, work)
    rng = np.random.default_rng(5)
    for _ in range(n_mc):
        value += klbbnn.lbbnn_lrt_prepared_term(lam, p, tgt, work, ws, stats_, rng, 1.0 / n_mc,
                                                act, lik) / n_mc  # fmt: skip
    assert not call(klbbnn.spike_slab_finish, lam, p, n_w, work, 1.0 / n_mc)
    assert value == pytest.approx(expected, rel=1e-13)
    np.testing.assert_allclose(work.glam, ref.glam, rtol=0,
                               atol=1e-13 * np.max(np.abs(ref.glam)))  # fmt: skip
    np.testing.assert_array_equal(work.alpha, ref.alpha)
    # a non-finite gradient is reported, as the epoch kernel needs it to be
    work.w[0] = np.inf
    assert call(klbbnn.spike_slab_finish, lam, p, n_w, work, 1.0)


def test_closed_form_kl_of_the_spike_and_slab_pair():
    target, method, vcfg, lam = _case("gaussian", True)
    p, n_w = target.n_params, target.layout.n_weights
    work = method._work(target, vcfg)
    kvi.set_sigmas(lam, p, work)
    klbbnn.set_alphas(lam, p, work)
    value = klbbnn.spike_slab_terms(lam, p, n_w, work, False)
    k, s, s0 = lam[:n_w], work.sigma[:n_w], work.slab[:n_w]
    a, psi = work.alpha[:n_w], work.psi[:n_w]
    kl_n = np.log(s0 / s) + (s**2 + k**2) / (2 * s0**2) - 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        spike = np.where(psi < 1, a * np.log(a / psi) + (1 - a) * np.log((1 - a) / (1 - psi)), 0)
    entropy_noise = np.sum(np.log(work.sigma[n_w:]) + 0.5 * (1 + np.log(2 * np.pi)))
    assert value == pytest.approx(-np.sum(a * kl_n + spike) + entropy_noise, rel=1e-12)


def _enumerate_paths(alphas):
    """P(input k has a path to an output), summing over every indicator configuration."""
    flat = np.concatenate([a.ravel() for a in alphas])
    out = np.zeros(alphas[0].shape[0])
    for bits in itertools.product([0, 1], repeat=flat.size):
        g = np.array(bits, dtype=bool)
        prob = np.prod(np.where(g, flat, 1 - flat))
        mats, pos = [], 0
        for a in alphas:
            mats.append(g[pos : pos + a.size].reshape(a.shape))
            pos += a.size
        reach = mats[-1].any(axis=1)
        for m in mats[-2::-1]:
            reach = (m.astype(int) @ reach.astype(int)) > 0
        out += prob * reach
    return out


@pytest.mark.parametrize("certain", [False, True])
@pytest.mark.parametrize("hidden", [(), (3,), (2, 2), (2, 2, 2)])
def test_feature_inclusion_is_the_path_probability(hidden, certain):
    # certain: some indicators are surely off (0) or on (1), as in the median model's
    rng = np.random.default_rng(4)
    sizes = (3, *hidden, 2) if hidden else (3, 2)
    alphas = [rng.uniform(0, 1, (a, b)) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
    if certain:
        alphas = [np.where(a < 0.3, 0.0, np.where(a > 0.8, 1.0, a)) for a in alphas]
    got = path_probabilities(alphas, np.random.default_rng(0))
    exact = _enumerate_paths(alphas)
    if len(hidden) < 2:
        np.testing.assert_allclose(got, exact, rtol=1e-12)
    else:
        # Monte Carlo over 10,000 draws, with a variance below the binomial one of counting
        # paths in as many draws of the indicators: within 4.5 binomial standard errors
        se = np.sqrt(np.clip(exact * (1 - exact), 0, None) / 10_000)
        np.testing.assert_array_less(np.abs(got - exact), Z * se + 1e-12)


def _sparse_linear(seed, n=2000):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 8))
    y = 1.5 * X[:, 0] - 1.0 * X[:, 3] + 0.7 * X[:, 5] + 0.5 * rng.standard_normal(n)
    return X, y


@pytest.mark.statistical
def test_inclusion_recovers_a_sparse_linear_truth(seed):
    # The thresholds come from alpha as a function of the OLS |t| on these data
    # (benchmarks/results/lbbnn_null_alpha.jsonl: `python benchmarks/lbbnn_null_alpha.py
    # --seeds 20 --planted 0 1 2 3 3.25 3.5 3.75 4 4.5 5 6`, then `--seeds 0 --planted 2.75
    # 3 3.25 3.5 3.75 4 --planted-seeds 10`; 675 (|t|, alpha) pairs): alpha at most 0.036
    # below |t| = 2.8 and first above 0.05 at 2.96; 0.07-0.10 at 3.25-3.5; 0.29-0.52 at
    # 3.75-4.0; first above 0.5 at 3.90; above 0.99 from 5.45. Under the truth the five null
    # inputs' t statistics are N(0, 1) (t with 1991 degrees of freedom), nearly independent,
    # and the true inputs' are near 62, 90 and 133 with sd 1. So
    # * every null alpha < 0.5 fails only if some null |t| > 3.8: at most 5 * 1.45e-4 = 7.2e-4;
    # * the nulls' median alpha < 0.05 fails only if three nulls have |t| > 2.8 (P = 5.1e-3
    #   each): at most C(5, 3) * (5.1e-3)^3 = 1.3e-6. It catches nulls that stay near their
    #   prior 0.1, which the first check would not;
    # * every true alpha > 0.99 fails only if a true |t| falls below 5.45: over 55 sd.
    # False-alarm probability below 7.3e-4. (The former threshold, 0.1 on every null, is
    # reached at |t| = 3.33-3.47: about 5 * 8e-4 = 4e-3; one of 197 seeds failed it.)
    X, y = _sparse_linear(seed)
    reg = BayesianMLPRegressor((), method=LBBNN(learning_rate_init=0.01, max_iter=500),
                               random_state=seed).fit(X, y)  # fmt: skip
    alpha = reg.inclusion_probabilities_[0][:, 0]
    truth = np.isin(np.arange(8), [0, 3, 5])
    assert np.all(alpha[truth] > 0.99), alpha
    assert np.all(alpha[~truth] < 0.5), alpha
    assert np.median(alpha[~truth]) < 0.05, alpha
    # in a linear model: alpha on the median probability model's inputs, 0 elsewhere
    np.testing.assert_allclose(reg.feature_inclusion_, alpha * (alpha > 0.5), rtol=1e-12)
    assert reg.density_ == pytest.approx(3 / 8)
    # SelectFromModel keeps the true inputs
    keep = SelectFromModel(reg, prefit=True, importance_getter="feature_inclusion_",
                           threshold=0.5).get_support()  # fmt: skip
    np.testing.assert_array_equal(keep, truth)


@pytest.mark.statistical
def test_psi_one_is_mean_field_vi(seed):
    # every weight always in and the slab equal to the prior: the model and the family are
    # VI's, trained by the same kernel path from the same seed; the ELBOs (estimated
    # differently: exact KL + MC log-likelihood vs MC log p - log q) agree within 4.5
    # combined standard errors, plus the optimizer's difference from rounding (1e-3 nats)
    X, y = _sparse_linear(seed, n=200)
    common = dict(learning_rate_init=0.01, max_iter=300, elbo_samples=2000)
    fits = []
    for method in (LBBNN(inclusion_prior=1.0, **common), VariationalInference(**common)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits.append(BayesianMLPRegressor((4,), method=method, random_state=seed).fit(X, y))
    lb, vi = fits
    se = np.hypot(lb.diagnostics_["elbo_se"], vi.diagnostics_["elbo_se"])
    assert abs(lb.elbo_ - vi.elbo_) <= Z * se + 1e-3
    np.testing.assert_allclose(lb.posterior_.mean, vi.posterior_.mean[0], atol=1e-6)
    assert lb.density_ == 1.0 and np.all(lb.feature_inclusion_ == 1.0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("local", [True, False])
def test_result_does_not_depend_on_n_jobs(local):
    X, y = _sparse_linear(0, n=300)
    fits = [
        BayesianMLPRegressor(
            (4,), method=LBBNN(max_iter=30, local_reparameterization=local), random_state=3,
            n_jobs=n_jobs,
        ).fit(X, y)
        for n_jobs in (1, 2)
    ]  # fmt: skip
    np.testing.assert_array_equal(fits[0].posterior_.thetas, fits[1].posterior_.thetas)
    assert fits[0].elbo_ == fits[1].elbo_
    for a, b in zip(fits[0].inclusion_probabilities_, fits[1].inclusion_probabilities_,
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(a, b)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_classifier_attributes_and_the_median_model():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    clf = BayesianMLPClassifier((5,), method=LBBNN(max_iter=100, learning_rate_init=0.01),
                                random_state=0, n_samples=30).fit(X, y)  # fmt: skip
    shapes = [a.shape for a in clf.inclusion_probabilities_]
    assert shapes == [(4, 5), (5, 3)]
    alpha = np.concatenate([a.ravel() for a in clf.inclusion_probabilities_])
    assert clf.density_ == pytest.approx(np.mean(alpha > 0.5))
    assert clf.feature_inclusion_.shape == (4,)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # training accuracy over random_state 0-29: 0.86-0.98, mean 0.934, sd 0.032; chance is
    # 1/3. 0.6 is 10 sd below the mean and 0.26 below the lowest seed: it fails for a
    # classifier that does not learn, not for an unlucky seed
    assert np.mean(clf.predict(X) == y) > 0.6
    # the median probability model: every draw has exactly the weights with alpha > 0.5
    clf.set_params(method__model="median").fit(X, y)
    layout = clf.predictive_.layout
    weights = np.zeros(layout.n_params, dtype=bool)
    for layer in range(layout.n_layers):
        weights[layout.slices(layer)[0]] = True
    alpha_flat = np.ones(layout.n_params)
    alpha_flat[weights] = np.concatenate([a.ravel() for a in clf.inclusion_probabilities_])
    zero = clf.posterior_.thetas == 0.0
    np.testing.assert_array_equal(zero.all(axis=0), alpha_flat <= 0.5)
    # a refit with another method leaves no LBBNN attributes behind
    clf.set_params(method=VariationalInference(max_iter=5)).fit(X, y)
    assert not hasattr(clf, "inclusion_probabilities_") and not hasattr(clf, "density_")


@pytest.mark.parametrize(
    "params,name",
    [({"inclusion_prior": 0.0}, "inclusion_prior"), ({"inclusion_prior": 1.5}, "inclusion_prior"),
     ({"inclusion_prior": [0.1, 0.2, 0.3]}, "inclusion_prior"),
     ({"temperature": 0.0}, "temperature"), ({"slab_std": -1.0}, "slab_std"),
     ({"init_inclusion": 1.0}, "init_inclusion"), ({"model": "mode"}, "model"),
     ({"n_mc": 0}, "n_mc"), ({"local_reparameterization": "auto"}, "local_reparameterization")],
)  # fmt: skip
def test_bad_knobs_are_refused_by_name(params, name):
    X, y = _sparse_linear(0, n=50)
    with pytest.raises(ValueError, match=name):
        BayesianMLPRegressor((3,), method=LBBNN(max_iter=2, **params)).fit(X, y)


def test_non_gaussian_slab_is_refused():
    X, y = _sparse_linear(0, n=50)
    with pytest.raises(ValueError, match="prior='gaussian'"):
        BayesianMLPRegressor((3,), prior="logistic", method=LBBNN(max_iter=2)).fit(X, y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_slab_std_sets_every_weights_slab():
    X, y = _sparse_linear(0, n=50)
    method = LBBNN(max_iter=2, slab_std=0.7)
    reg = BayesianMLPRegressor((3,), method=method).fit(X, y)
    target = LogPosterior(X, y, (3,), "tanh", "gaussian", noise="theta")
    slab = method._slab(target)
    weights = np.zeros(target.n_params, dtype=bool)
    for layer in range(target.layout.n_layers):
        weights[target.layout.slices(layer)[0]] = True
    assert np.all(slab[weights] == 0.7)
    np.testing.assert_array_equal(slab[~weights][:-1], target.prior_scale[~weights[:-1]])
    assert np.isfinite(reg.elbo_)
