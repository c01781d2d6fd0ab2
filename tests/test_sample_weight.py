"""``sample_weight``: a per-row weight on the log-likelihood, in every method.

The weights live in the kernels' target (``W``), where each row's log-likelihood term and
its gradient are multiplied by its weight and every count of rows (the noise precision's
conditional and its integral) sums the weights. The estimators merge equal rows into one of
summed weight, drop rows of weight 0 and order the rows canonically, so integer weights give
exactly the fit of repeated rows (sklearn's ``check_sample_weight_equivalence_on_dense_data``
runs for every method in test_sklearn_api.py). The posterior with fractional weights is
checked against Bayesian linear regression's closed form in test_exact_posterior.py.
"""

import numpy as np
import pytest

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.kernels import density as knet
from skbnn.kernels import optim as kopt
from skbnn.log_posterior import LogPosterior
from skbnn.methods import NUTS, SMC, DeepEnsemble
from skbnn.priors import HierarchicalPrior

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: (likelihood, noise handling, network outputs per row of Y)
CASES = [
    ("gaussian", "fixed"),
    ("gaussian", "marginal"),
    ("gaussian", "theta"),
    ("heteroscedastic", "fixed"),
    ("bernoulli", "fixed"),
    ("categorical", "fixed"),
]


def _data(likelihood, n=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    if likelihood == "bernoulli":
        Y = (rng.random((n, 1)) < 0.5).astype(float)
    elif likelihood == "categorical":
        Y = np.eye(3)[rng.integers(0, 3, n)]
    else:
        Y = rng.standard_normal((n, 2))
    return X, Y


def _target(likelihood, noise, X, Y, w=None):
    return LogPosterior(X, Y, (4,), "tanh", likelihood, prior=HierarchicalPrior(), noise=noise,
                  noise_precision=2.0, sample_weight=w)  # fmt: skip


def _logp_grad(target, theta):
    value, grad = target.evaluator()(theta)
    return value, grad.copy()


@pytest.mark.parametrize(("likelihood", "noise"), CASES)
def test_integer_weights_are_repeated_rows_in_the_log_density(likelihood, noise):
    X, Y = _data(likelihood)
    w = np.array([0, 1, 2, 3, 1, 0, 4, 1, 1, 2, 5, 1])
    weighted = _target(likelihood, noise, X, Y, w.astype(float))
    repeated = _target(likelihood, noise, X.repeat(w, axis=0), Y.repeat(w, axis=0))
    theta = 0.7 * np.random.default_rng(1).standard_normal(weighted.n_params)
    lp_w, g_w = _logp_grad(weighted, theta)
    lp_r, g_r = _logp_grad(repeated, theta)
    assert np.isfinite(lp_w)
    np.testing.assert_allclose(lp_w, lp_r, rtol=1e-12)
    np.testing.assert_allclose(g_w, g_r, rtol=1e-10, atol=1e-12)
    assert weighted.weight_sum == repeated.weight_sum == w.sum()


@pytest.mark.parametrize(("likelihood", "noise"), [c for c in CASES if c[1] != "marginal"])
def test_fractional_weights_scale_each_rows_term(likelihood, noise):
    # The log-likelihood and its gradient are linear in the weights; with W = 0 only the prior
    # is left, so f(wa + wb) + f(0) = f(wa) + f(wb) for the log density and its gradient.
    X, Y = _data(likelihood)
    rng = np.random.default_rng(2)
    wa, wb = rng.uniform(0, 2, len(X)), rng.uniform(0, 2, len(X))
    theta = 0.7 * rng.standard_normal(_target(likelihood, noise, X, Y).n_params)
    f = {
        key: _logp_grad(_target(likelihood, noise, X, Y, w), theta)
        for key, w in {"ab": wa + wb, "a": wa, "b": wb, "0": np.zeros(len(X))}.items()
    }
    np.testing.assert_allclose(f["ab"][0] + f["0"][0], f["a"][0] + f["b"][0], rtol=1e-12)
    np.testing.assert_allclose(f["ab"][1] + f["0"][1], f["a"][1] + f["b"][1], rtol=1e-10,
                               atol=1e-12)  # fmt: skip


def test_marginal_noise_counts_rows_by_weight():
    # log int prod_i N(y_i | f_i, 1/tau)^w_i Gamma(tau | a, b) dtau, in closed form
    from scipy.special import gammaln

    X, Y = _data("gaussian")
    w = np.random.default_rng(3).uniform(0.1, 3, len(X))
    target = _target("gaussian", "marginal", X, Y, w)
    theta = 0.5 * np.random.default_rng(4).standard_normal(target.n_params)
    ev = target.evaluator()
    value = ev.value(theta)
    f = np.empty((1, 2, len(X)))
    from skbnn.kernels import density as knet

    knet.forward_batch(theta[None], target.XT, target.layout.sizes, target.layout.offsets,
                       target.activation_code, len(X), f)  # fmt: skip
    a, b = target.noise_prior
    ssr = np.sum(w * (Y.T - f[0]) ** 2, axis=1)
    sw = w.sum()
    loglik = np.sum(
        gammaln(a + sw / 2) - gammaln(a) + a * np.log(b) - (a + sw / 2) * np.log(b + ssr / 2)
        - sw / 2 * np.log(2 * np.pi)
    )  # fmt: skip
    np.testing.assert_allclose(value - ev.stats[1], loglik, rtol=1e-12)


def test_minibatch_epoch_weights_its_rows():
    # one full-batch SGD step of the training engine on weighted rows is the step on the
    # repeated rows (the kernel gathers each batch's weights with its rows)
    X, Y = _data("gaussian")
    w = np.array([1, 2, 3, 1, 1, 2, 1, 1, 4, 1, 1, 2])
    steps = []
    weighted = _target("gaussian", "fixed", X, Y, w.astype(float))
    repeated = _target("gaussian", "fixed", X.repeat(w, axis=0), Y.repeat(w, axis=0))
    for target in (weighted, repeated):
        p, n = target.n_params, target.n_rows
        theta = 0.3 * np.ones(p)
        data = kopt.Batches(target.XT, target.YT, target.W, np.arange(n), np.empty(3 * n),
                            np.empty(2 * n), np.empty(n))  # fmt: skip
        opt = kopt.optimizer(1, p, momentum=0.0)  # plain SGD
        mom = kopt.Moments(np.zeros(1, dtype=kopt.MOMENTS), np.empty(0), np.empty(0),
                           np.empty((0, 0)))  # fmt: skip
        tgt = knet.density_target(target.kernel_target())
        none = np.empty(0)
        loss = np.empty(1)
        kopt.run_epochs(theta, tgt, data, n, np.array([0.1]), none, none, opt, mom,
                        target.workspace(), np.empty(p), np.empty(4), np.random.default_rng(0),
                        loss)  # fmt: skip
        steps.append((loss[0], theta))
    np.testing.assert_allclose(steps[0][0], steps[1][0], rtol=1e-12)
    np.testing.assert_allclose(steps[0][1], steps[1][1], rtol=1e-12)


def _nuts():
    return NUTS(n_chains=2, n_warmup=30, max_tree_depth=5)


@pytest.mark.parametrize(
    ("cls", "method"),
    [(BayesianMLPRegressor, _nuts), (BayesianMLPRegressor, lambda: SMC(n_mcmc_steps=2)),
     (BayesianMLPClassifier, _nuts), (BayesianMLPClassifier, lambda: DeepEnsemble())],
    ids=["nuts-regressor", "smc-regressor", "nuts-classifier", "ensemble-classifier"],
)  # fmt: skip
def test_integer_weights_permutations_and_ones_give_the_same_fit(cls, method):
    # exact, not within Monte Carlo error: the fits see the same rows in the same order
    rng = np.random.default_rng(0)
    X = rng.standard_normal((25, 3))
    y = X[:, 0] - X[:, 1] + 0.3 * rng.standard_normal(25)
    if cls is BayesianMLPClassifier:
        y = np.where(y > 0, "yes", "no")
    w = rng.integers(0, 4, 25)
    w[:2] = 1  # both classes keep a row

    def fit(X, y, sample_weight=None):
        est = cls(hidden_layer_sizes=(3,), method=method(), n_samples=20, random_state=0)
        return est.fit(X, y, sample_weight=sample_weight)

    base = fit(X, y, w)
    perm = rng.permutation(25)
    others = [
        fit(X.repeat(w, axis=0), y.repeat(w)),  # repeated rows
        fit(X[perm], y[perm], w[perm]),  # another order
        fit(X.repeat(w, axis=0), y.repeat(w), np.ones(w.sum())),  # weights of one
    ]
    predict = "predict_proba" if cls is BayesianMLPClassifier else "predict"
    for other in others:
        np.testing.assert_array_equal(base.posterior_.thetas, other.posterior_.thetas)
        np.testing.assert_array_equal(getattr(base, predict)(X), getattr(other, predict)(X))
        if hasattr(base, "log_evidence_"):
            assert base.log_evidence_ == other.log_evidence_


@pytest.mark.parametrize(
    ("sample_weight", "match"),
    [(-np.ones(10), "(?i)negative"), (np.zeros(10), "non-zero"), (np.ones(9), "9"),
     (np.ones((10, 2)), "1D")],
)  # fmt: skip
def test_bad_sample_weight_is_refused(sample_weight, match):
    X = np.random.default_rng(0).standard_normal((10, 2))
    with pytest.raises(ValueError, match=match):
        BayesianMLPRegressor().fit(X, X[:, 0], sample_weight=sample_weight)


def test_the_evidence_counts_the_standardizations_jacobian_by_weight():
    # y in other units (8 y: a power of two, so the standardized targets are the same bits)
    # is the same standardized fit, so the evidence, a density of y, moves by exactly
    # -log(8) per row, and a row of weight w counts w times
    rng = np.random.default_rng(5)
    X = rng.standard_normal((20, 2))
    y = 50.0 + 10.0 * (X[:, 0] + 0.2 * rng.standard_normal(20))
    w = rng.uniform(0.5, 3.0, 20)
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(), activation="identity", method=SMC(n_mcmc_steps=2), n_samples=50,
        random_state=0,
    )  # fmt: skip
    base = est.fit(X, y, sample_weight=w).log_evidence_
    scaled = est.fit(X, 8.0 * y, sample_weight=w).log_evidence_
    np.testing.assert_allclose(scaled - base, -w.sum() * np.log(8.0), rtol=1e-9)


def test_model_average_passes_sample_weight_to_every_candidate():
    from skbnn.model_selection import BayesianModelAverage

    rng = np.random.default_rng(6)
    X = rng.standard_normal((20, 2))
    y = X[:, 0] + 0.3 * rng.standard_normal(20)
    w = rng.integers(1, 4, 20)
    est = BayesianMLPRegressor(method=SMC(n_mcmc_steps=2), n_samples=50, random_state=0)
    grid = {"hidden_layer_sizes": [(), (2,)]}
    weighted = BayesianModelAverage(est, grid).fit(X, y, sample_weight=w)
    repeated = BayesianModelAverage(est, grid).fit(X.repeat(w, axis=0), y.repeat(w))
    np.testing.assert_array_equal(weighted.log_evidences_, repeated.log_evidences_)
