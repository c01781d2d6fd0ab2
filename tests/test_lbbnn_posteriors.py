"""LBBNN's flow and low-rank families: kernels, the ELBO's gradient and value, the fit.

Exact checks: each flow's Jacobian against central differences (autoregressive, with the
log determinant the kernel returns), the backward pass against central differences, the
gradient of a step's ELBO estimate for both families, and the low-rank family's KL
against its definition. The ELBO's value: the kernel's training estimate and the fit's
final estimate (which draws the indicators and the weights) agree within their Monte
Carlo errors where both are unbiased, and on Bayesian linear regression the bound stays
below the closed-form evidence. Statistical checks use ``Z`` = 4.5 standard errors: a
false alarm probability of 6.8e-6 each.
"""

import numpy as np
import pytest
from scipy import stats

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.kernels import density as knet
from skbnn.kernels import flows as kflows
from skbnn.kernels import helper
from skbnn.kernels import lbbnn as klbbnn
from skbnn.kernels import lbbnn_lowrank as klowrank
from skbnn.kernels import lrt as klrt
from skbnn.kernels import team as kteam
from skbnn.kernels import vi as kvi
from skbnn.log_posterior import LogPosterior
from skbnn.methods import LBBNN

Z = 4.5


def _random_flow(d, h, k, seed=0, scale=0.7):
    rng = np.random.default_rng(seed)
    return scale * rng.standard_normal(k * kflows.step_size(d, h))


@pytest.mark.parametrize("d", [1, 2, 5])
def test_flow_is_autoregressive_with_the_stated_log_determinant(d):
    h, k = 4, 2
    params = _random_flow(d, h, k)
    cache = np.empty(k * kflows.step_cache_size(d, h))

    def f(z):
        z = z.copy()
        logdet = kflows.flow_forward(params, 0, d, h, k, z, cache, 0)
        return z, logdet

    z0 = np.random.default_rng(1).standard_normal(d)
    eps = 1e-6
    jac = np.array([(f(z0 + e)[0] - f(z0 - e)[0]) / (2 * eps) for e in np.eye(d) * eps]).T
    _, logdet = f(z0)
    assert np.log(abs(np.linalg.det(jac))) == pytest.approx(logdet, abs=1e-7)
    # one step is triangular in its order: the first step's output i depends on inputs
    # up to i only
    one = np.empty(kflows.step_cache_size(d, h))

    def step(z):
        z = z.copy()
        kflows.flow_forward(params, 0, d, h, 1, z, one, 0)
        return z

    jac1 = np.array([(step(z0 + e) - step(z0 - e)) / (2 * eps) for e in np.eye(d) * eps]).T
    assert np.all(np.abs(np.triu(jac1, 1)) < 1e-9)


def test_flow_backward_is_the_gradient():
    d, h, k = 4, 3, 3
    params = _random_flow(d, h, k, seed=2)
    cache = np.empty(k * kflows.step_cache_size(d, h))
    weights = np.random.default_rng(3).standard_normal(d)
    c_logdet = 0.8

    def objective(params_, z):
        z = z.copy()
        logdet = kflows.flow_forward(params_, 0, d, h, k, z, cache, 0)
        return weights @ z + c_logdet * logdet

    z0 = np.random.default_rng(4).standard_normal(d)
    objective(params, z0)
    gz = weights.copy()
    gparams = np.zeros_like(params)
    kflows.flow_backward(params, 0, d, h, k, gz, c_logdet, cache, 0, gparams, np.empty(h + d))
    eps = 1e-6
    num_p = [(objective(params + e, z0) - objective(params - e, z0)) / (2 * eps)
             for e in np.eye(params.size) * eps]  # fmt: skip
    num_z = [(objective(params, z0 + e) - objective(params, z0 - e)) / (2 * eps)
             for e in np.eye(d) * eps]  # fmt: skip
    np.testing.assert_allclose(gparams, num_p, rtol=0, atol=1e-7)
    np.testing.assert_allclose(gz, num_z, rtol=0, atol=1e-7)


def _case(likelihood, seed=1, hidden=(3,), posterior="flow", features=2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((7, features))
    y = X[:, 0] - X[:, 1] ** 2
    Y = {"gaussian": y, "bernoulli": (y > 0) * 1.0,
         "categorical": np.eye(3)[np.digitize(y, [-1.0, 0.0])]}[likelihood]  # fmt: skip
    target = LogPosterior(X, Y, hidden, "tanh", likelihood, noise="theta")
    method = LBBNN(inclusion_prior=[0.2, 1.0][: len(hidden) + 1], posterior=posterior,
                   init_std=0.3, flow_steps=2, flow_hidden=3, rank=2)  # fmt: skip
    vcfg = method._vcfg(target)
    lam = method._start(target, np.random.default_rng(0), vcfg)
    p = target.n_params
    lam[p : 2 * p] += 0.3 * rng.standard_normal(p)
    lam[2 * p : 3 * p] = rng.standard_normal(p)
    lam[3 * p :] += 0.3 * rng.standard_normal(lam.size - 3 * p)  # away from the start
    return target, method, vcfg, lam


def _step_estimate(target, method, vcfg, posterior, scale, beta=1.0, n_draws=1, poison=None):
    # a step's ELBO estimate at lam_ with its draws fixed (the same seed), and its gradient:
    # the low-rank family's closed-form terms once per step, then n_draws draws' terms,
    # all times scale, into the gradient zeroed once (as the epoch kernel does)
    p = target.n_params
    layout = target.layout
    tgt = target.kernel_target(own=True)
    tgt.cfg[0]["beta"] = beta
    work = method._work(target, vcfg)
    sizes = layout.sizes
    ws = np.empty(max(klrt.lrt_workspace_size(sizes, 7), knet.workspace_size(sizes, 7)))
    stats_ = np.empty(2 + int(sizes[-1]))

    def estimate(lam_, with_grad=False):
        kvi.set_sigmas(lam_, p, work)
        klbbnn.set_alphas(lam_, p, work)
        work.glam[:] = 0.0
        if poison is not None:
            work.glam[poison] = np.nan
        value = 0.0
        if posterior == "lowrank":
            value = scale * klowrank.lowrank_slab_terms(lam_, p, layout.n_weights, layout.sizes,
                                                   layout.offsets, 2, work, with_grad)  # fmt: skip
            work.glam[:] *= scale
        rng = np.random.default_rng(5)
        for _ in range(n_draws):
            value += scale * kvi.mc_term(lam_, p, tgt, vcfg, work, ws, stats_, rng, with_grad,
                                         scale)  # fmt: skip
        return value, work.glam.copy()

    return estimate


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli", "categorical"])
@pytest.mark.parametrize("posterior", ["flow", "lowrank"])
def test_gradient_of_the_elbo_estimate_is_exact(likelihood, posterior):
    # with the draws fixed (the same seed), a step's estimate is smooth in every parameter:
    # slab, inclusion, and both flows' or the factors
    target, method, vcfg, lam = _case(likelihood, posterior=posterior)
    p = target.n_params
    grad = _assert_gradient_is_exact(_step_estimate(target, method, vcfg, posterior, 0.5,
                                                    beta=1.7), lam)  # fmt: skip
    assert np.any(grad[3 * p :] != 0)


def test_gradient_of_a_step_of_two_flow_draws_is_exact():
    # n_mc = 2: each draw adds half its gradient to the step's, zeroed once
    target, method, vcfg, lam = _case("categorical", posterior="flow")
    _assert_gradient_is_exact(_step_estimate(target, method, vcfg, "flow", 0.5, n_draws=2), lam)


def _assert_gradient_is_exact(estimate, lam):
    # the gradient against central differences in every parameter, and the estimate the
    # same with its gradient as without (the flow family's step computes it on another
    # path); returns the gradient
    value, grad = estimate(lam, True)
    assert value == pytest.approx(estimate(lam)[0], rel=1e-12)
    eps = 1e-6
    numeric = np.array(
        [(estimate(lam + e)[0] - estimate(lam - e)[0]) / (2 * eps) for e in np.eye(lam.size) * eps]
    )
    np.testing.assert_allclose(grad, numeric, rtol=0, atol=1e-7 * np.max(np.abs(grad)))
    return grad


def test_a_flow_step_with_a_nonfinite_gradient_entry_has_a_nan_value():
    # the flow's step checks its gradient for inf and NaN through its value (the epoch
    # kernel reads no gradient entry again): a NaN already in any part of the gradient,
    # which the step adds to, must make the value NaN, and a clean step's must be finite
    target, method, vcfg, lam = _case("gaussian", posterior="flow")
    p = target.n_params
    layout = target.layout
    first, last = layout.slices(0)[0], layout.slices(layout.n_layers - 1)[1]
    regions = {"kappa, first weight": first.start, "kappa, last bias": last.stop - 1,
               "kappa, noise": p - 1, "rho, a weight": p + first.start, "rho, noise": 2 * p - 1,
               "lambda, a weight": 2 * p + first.start + 1, "lambda, noise": 3 * p - 1,
               "flow, first": 3 * p, "flow, last": lam.size - 1}  # fmt: skip
    assert target.n_params > layout.n_weights  # the Gaussian likelihood's noise
    estimate = _step_estimate(target, method, vcfg, "flow", 1.0)
    assert np.isfinite(estimate(lam, True)[0])
    for name, index in regions.items():
        poisoned = _step_estimate(target, method, vcfg, "flow", 1.0, poison=index)
        assert np.isnan(poisoned(lam, True)[0]), name


@pytest.mark.parametrize("posterior", ["flow", "lowrank"])
def test_gradient_is_exact_on_a_layer_of_many_blocks(posterior):
    # a layer of 1,200 weights: more than one of the low-rank family's blocks
    # (LOWRANK_BLOCK); the gradient along random directions against central differences
    target, method, vcfg, lam = _case("categorical", hidden=(40,), posterior=posterior,
                                      features=30)  # fmt: skip
    assert target.layout.sizes[0] * target.layout.sizes[1] > klowrank.LOWRANK_BLOCK
    estimate = _step_estimate(target, method, vcfg, posterior, 1.0)
    _, grad = estimate(lam, True)
    rng = np.random.default_rng(6)
    eps = 1e-6
    for _ in range(4):
        v = rng.standard_normal(lam.size)
        numeric = (estimate(lam + eps * v)[0] - estimate(lam - eps * v)[0]) / (2 * eps)
        assert grad @ v == pytest.approx(numeric, rel=1e-6)


def _kernel_estimates(target, method, vcfg, lam, n, seed=0):
    p = target.n_params
    tgt = target.kernel_target(own=True)
    work = method._work(target, vcfg)
    sizes = target.layout.sizes
    rows = target.n_rows
    ws = np.empty(max(klrt.lrt_workspace_size(sizes, rows), knet.workspace_size(sizes, rows)))
    stats_ = np.empty(2 + int(sizes[-1]))
    rng = np.random.default_rng(11 + seed)
    kvi.set_sigmas(lam, p, work)
    klbbnn.set_alphas(lam, p, work)
    return np.array(
        [kvi.mc_term(lam, p, tgt, vcfg, work, ws, stats_, rng, False, 1.0) for _ in range(n)]
    )


@pytest.mark.statistical
def test_training_estimate_and_final_elbo_agree_where_both_are_unbiased(seed):
    # a linear model with a Gaussian likelihood: the expected log-likelihood depends on the
    # first two moments of the output only, so the local reparameterization is unbiased;
    # with e = 0, r does not depend on W, so its Gaussian summary is exact too
    rng = np.random.default_rng(3 + seed)
    X = rng.standard_normal((30, 3))
    y = X @ [1.0, -0.5, 0.0] + 0.3 * rng.standard_normal(30)
    target = LogPosterior(X, y, (), "tanh", "gaussian", noise="theta")
    method = LBBNN(inclusion_prior=0.4, posterior="flow", init_std=0.2, flow_steps=2,
                   flow_hidden=3)  # fmt: skip
    vcfg = method._vcfg(target)
    lam = method._start(target, np.random.default_rng(0), vcfg)
    p = target.n_params
    lam[2 * p : 3 * p] = rng.standard_normal(p)
    lam[3 * p :] += 0.2 * rng.standard_normal(lam.size - 3 * p)
    d = int(target.layout.sizes[0])
    lam[3 * p + 2 * d : 3 * p + 3 * d] = 0.0  # e
    kernel = _kernel_estimates(target, method, vcfg, lam, 4000, seed)
    final, _, _ = method._elbo(target, lam, vcfg, np.random.default_rng(12 + seed), 4000)
    se = np.hypot(kernel.std(ddof=1), final.std(ddof=1)) / np.sqrt(4000)
    assert abs(kernel.mean() - final.mean()) < Z * se


@pytest.mark.statistical
@pytest.mark.parametrize("posterior", ["flow", "lowrank"])
def test_elbo_is_below_the_evidence_of_bayesian_linear_regression(seed, posterior):
    # psi = 1 (no indicators), a linear network and a fixed noise: Bayesian linear
    # regression, whose evidence is closed form. Every variational bound is below it, and
    # both families hold the mean-field one (the flow's at z = 1, r = q; the low-rank one's
    # at V = 0), whose optimum is known
    rng = np.random.default_rng(4 + seed)
    n, d, noise = 60, 3, 0.5
    X = rng.standard_normal((n, d))
    y = X @ [1.0, -0.5, 0.25] + 2.0 + noise * rng.standard_normal(n)
    noise_std = noise / y.std()  # on the standardized target
    method = LBBNN(inclusion_prior=1.0, posterior=posterior, rank=d, learning_rate="cosine",
                   learning_rate_init=0.01, max_iter=1500, batch_size=n, n_mc=4,
                   elbo_samples=1000)  # fmt: skip
    reg = BayesianMLPRegressor((), activation="identity", noise_std=noise_std, method=method,
                               random_state=seed).fit(X, y)  # fmt: skip
    z = (y - y.mean()) / y.std()
    elbo = reg.elbo_ + n * np.log(y.std())  # the standardized target's density
    phi = np.hstack([X, np.ones((n, 1))])
    prior_var = np.r_[np.full(d, 1.0 / d), 1.0]  # the default prior, fan-in scaled
    precision = phi.T @ phi / noise_std**2 + np.diag(1.0 / prior_var)
    cov_y = phi @ np.diag(prior_var) @ phi.T + noise_std**2 * np.eye(n)
    log_z = stats.multivariate_normal(np.zeros(n), cov_y).logpdf(z)
    meanfield = log_z - 0.5 * (np.sum(np.log(np.diag(precision)))
                               - np.linalg.slogdet(precision)[1])  # fmt: skip
    se = reg.diagnostics_["elbo_se"]
    assert elbo < log_z + Z * se
    assert elbo > meanfield - 1.0, (elbo, meanfield, log_z)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_flow_fit_predicts_and_is_reproducible():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    y = 2.0 * X[:, 0] - X[:, 1] + 0.1 * rng.standard_normal(200)
    method = LBBNN(posterior="flow", learning_rate_init=0.01, max_iter=150)
    a = BayesianMLPRegressor((8,), method=method, random_state=0).fit(X, y)
    b = BayesianMLPRegressor((8,), method=method, random_state=0).fit(X, y)
    mean, std = a.predict(X, return_std=True)
    np.testing.assert_array_equal(mean, b.predict(X))
    assert np.all(np.isfinite(std)) and np.sqrt(np.mean((mean - y) ** 2)) < 0.5
    assert np.isfinite(a.elbo_)
    # the flows trained: z's base mean left its start at 1
    assert np.all(a.posterior_.flow[:4] != 1.0)
    clf = BayesianMLPClassifier((6,), method=LBBNN(posterior="flow", max_iter=30),
                                random_state=0).fit(X, y > 0)  # fmt: skip
    assert clf.predict_proba(X).shape == (200, 2)


def test_flow_needs_the_local_reparameterization():
    X = np.random.default_rng(0).standard_normal((20, 2))
    model = BayesianMLPRegressor(
        (3,), method=LBBNN(posterior="flow", local_reparameterization=False)
    )
    with pytest.raises(ValueError, match="local_reparameterization=True"):
        model.fit(X, X[:, 0])


@pytest.mark.parametrize("hidden, features", [((3,), 2), ((40,), 30)])
def test_lowrank_kl_is_its_definition(hidden, features):
    # the second: a layer of 1,200 weights, more than one block (LOWRANK_BLOCK)
    target, method, vcfg, lam = _case("gaussian", posterior="lowrank", hidden=hidden,
                                      features=features)  # fmt: skip
    layout = target.layout
    p, n_w = target.n_params, layout.n_weights
    work = method._work(target, vcfg)
    kvi.set_sigmas(lam, p, work)
    klbbnn.set_alphas(lam, p, work)
    value = klowrank.lowrank_slab_terms(lam, p, n_w, layout.sizes, layout.offsets, 2, work, False)
    post = method._posterior(target, lam, work.sigma**2, work.alpha, 0, None)
    expected = np.sum(np.log(work.sigma[n_w:]) + 0.5 * (1 + np.log(2 * np.pi)))
    for layer, (w, v) in enumerate(post.blocks):
        b = layout.slices(layer)[1]
        cov = np.diag(work.sigma[w] ** 2) + v.T @ v
        prior = np.diag(work.slab[w] ** 2)
        mean = lam[w]
        quad = np.trace(np.linalg.solve(prior, cov)) + mean @ np.linalg.solve(prior, mean)
        kl = 0.5 * (quad - mean.size + np.linalg.slogdet(prior)[1] - np.linalg.slogdet(cov)[1])
        s, s0, k = work.sigma[b], work.slab[b], lam[b]
        kl += np.sum(np.log(s0 / s) + (s**2 + k**2) / (2 * s0**2) - 0.5)
        a, psi = work.alpha[w], work.psi[w]
        with np.errstate(divide="ignore", invalid="ignore"):
            kl += np.sum(np.where(psi < 1, a * np.log(a / psi)
                                  + (1 - a) * np.log((1 - a) / (1 - psi)), 0))  # fmt: skip
        expected -= kl
    assert value == pytest.approx(expected, rel=1e-10)


def test_lowrank_kl_of_a_wide_layer_is_the_same_with_the_helper():
    # a layer of SPLIT_MIN_WEIGHTS weights or more: its passes run as two fixed halves,
    # the second on the team's helper where one runs, with the same bits either way; its
    # gradient against central differences of the KL along random directions
    target, method, vcfg, lam = _case("gaussian", posterior="lowrank", hidden=(256,),
                                      features=260)  # fmt: skip
    layout = target.layout
    assert layout.sizes[0] * layout.sizes[1] >= kteam.SPLIT_MIN_WEIGHTS
    p = target.n_params

    def kl(lam_, with_grad):
        work = method._work(target, vcfg)
        kvi.set_sigmas(lam_, p, work)
        klbbnn.set_alphas(lam_, p, work)
        work.glam[:] = 0.0
        value = klowrank.lowrank_slab_terms(lam_, p, layout.n_weights, layout.sizes,
                                            layout.offsets, 2, work, with_grad)  # fmt: skip
        return value, work.glam.copy()

    alone, grad = kl(lam, True)
    klowrank.register_tasks()
    before = helper.served[0]
    with helper.team():
        teamed, teamed_grad = kl(lam, True)
    if not kteam.DISABLED:
        assert helper.served[0] >= before + 2  # the helper took the halves
    assert teamed == alone
    np.testing.assert_array_equal(teamed_grad, grad)
    rng = np.random.default_rng(4)
    eps = 1e-5
    for _ in range(3):
        v = rng.standard_normal(lam.size)
        numeric = (kl(lam + eps * v, False)[0] - kl(lam - eps * v, False)[0]) / (2 * eps)
        assert grad @ v == pytest.approx(numeric, rel=1e-6)


@pytest.mark.statistical
def test_lowrank_training_estimate_and_final_elbo_agree(seed):
    # a linear model with a Gaussian likelihood: the local reparameterization is unbiased
    rng = np.random.default_rng(3 + seed)
    X = rng.standard_normal((30, 3))
    y = X @ [1.0, -0.5, 0.0] + 0.3 * rng.standard_normal(30)
    target = LogPosterior(X, y, (), "tanh", "gaussian", noise="theta")
    method = LBBNN(inclusion_prior=0.4, posterior="lowrank", init_std=0.2, rank=2)
    vcfg = method._vcfg(target)
    lam = method._start(target, np.random.default_rng(0), vcfg)
    p = target.n_params
    lam[2 * p : 3 * p] = rng.standard_normal(p)
    lam[3 * p :] = 0.3 * rng.standard_normal(lam.size - 3 * p)
    layout = target.layout
    work = method._work(target, vcfg)
    kvi.set_sigmas(lam, p, work)
    klbbnn.set_alphas(lam, p, work)
    exact = klowrank.lowrank_slab_terms(lam, p, layout.n_weights, layout.sizes, layout.offsets, 2,
                                   work, False)  # fmt: skip
    kernel = exact + _kernel_estimates(target, method, vcfg, lam, 4000, seed)
    final, _, _ = method._elbo(target, lam, vcfg, np.random.default_rng(12 + seed), 4000)
    se = np.hypot(kernel.std(ddof=1), final.std(ddof=1)) / np.sqrt(4000)
    assert abs(kernel.mean() - final.mean()) < Z * se


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_lowrank_fit_predicts_and_is_reproducible():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    y = 2.0 * X[:, 0] - X[:, 1] + 0.1 * rng.standard_normal(200)
    method = LBBNN(posterior="lowrank", learning_rate_init=0.01, max_iter=150)
    a = BayesianMLPRegressor((8,), method=method, random_state=0).fit(X, y)
    b = BayesianMLPRegressor((8,), method=method, random_state=0).fit(X, y)
    mean, std = a.predict(X, return_std=True)
    np.testing.assert_array_equal(mean, b.predict(X))
    assert np.all(np.isfinite(std)) and np.sqrt(np.mean((mean - y) ** 2)) < 0.5
    assert np.isfinite(a.elbo_) and np.any(a.posterior_.factors != 0)
