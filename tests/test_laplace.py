"""The Laplace approximation (``skbnn.methods.Laplace``) against closed forms and explicit
numpy computations.

What is checked, and why each tolerance is what it is:

* Bayesian linear regression with fixed noise (no hidden layer) is a Gaussian model, so its
  Laplace posterior, evidence and GLM predictive *are* the closed form, for ``ggn`` and
  ``full``. After the Gauss-Newton polish the MAP's gradient is at rounding (~1e-14), the
  GGN is the exact precision and the central differences of the ``full`` Hessian are exact
  for a quadratic up to rounding (``eps |grad| / h``, ~1e-11 relative), so 1e-8 relative
  on moments and 1e-6 nats on the evidence leave orders of magnitude for rounding only.
* The Jacobian kernel against central differences of the forward pass: with step ``h`` the
  error is ``h^2 / 6 |f'''| + eps |f| / h``, below 1e-9 for the O(1) weights and inputs
  used, against a tolerance of 1e-7.
* The GGN, the gradient and the evidence against numpy re-implementations (an independent
  backpropagation): same arithmetic in another order, so agreement to ~1e-10 relative.
* Empirical Bayes against the closed-form evidence of Bayesian linear regression as a
  function of the precisions, its maximum found by Nelder-Mead.
* Monte Carlo quantities (``sample_y``, ``link_approx="mc"``, ``predictive="mc"``) as
  z-scores against their exact values, each below ``Z = 4.5`` (two-sided normal tail 6.8e-6
  per comparison); these tests are marked ``statistical``, state their number of
  comparisons and move their seeds with ``SKBNN_TEST_SEED_OFFSET``.
* Safeguards, knob validation, and determinism across ``n_jobs`` (bit for bit).

Every network is tiny (at most 27 parameters but for the dead-ReLU case) so the file runs
in well under a minute once numba's cache is warm.
"""

from __future__ import annotations

import copy
import math
import sys
import warnings
from functools import lru_cache

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import minimize
from scipy.special import expit, softmax
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

import skbnn.methods.laplace as laplace_module
import skbnn.posterior as posterior_module
from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.kernels import backprop as kbackprop
from skbnn.kernels import density as knet
from skbnn.layout import ACTIVATIONS, NetworkLayout
from skbnn.methods import Laplace
from skbnn.methods.laplace import log_symmetric_modes
from skbnn.model_selection import log_predictive_scorer
from skbnn.posterior import WeightedDraws
from skbnn.priors import GaussianPrior, LogisticPrior

#: z-score bound of every Monte Carlo comparison: two-sided normal tail 6.8e-6
Z = 4.5
_LOG_2PI = math.log(2.0 * math.pi)

# --------------------------------------------------------------------------------------
# numpy references
# --------------------------------------------------------------------------------------

_ACT = {
    "identity": (lambda z: z, lambda z, a: np.ones_like(z)),
    "tanh": (np.tanh, lambda z, a: 1.0 - a * a),
    "relu": (lambda z: np.maximum(z, 0.0), lambda z, a: (z > 0).astype(float)),
    "logistic": (expit, lambda z, a: a * (1.0 - a)),
}


def _slices(sizes):
    """``[(W slice, b slice)]`` per layer, in skbnn's layout (W row-major fan_in x fan_out)."""
    out, pos = [], 0
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        w = slice(pos, pos + fan_in * fan_out)
        b = slice(w.stop, w.stop + fan_out)
        out.append((w, b))
        pos = b.stop
    return out


def _forward(theta, X, sizes, activation):
    """Pre-activations and activations of every layer (the output layer is linear)."""
    act = _ACT[activation][0]
    a, zs, acts = X, [], [X]
    layers = _slices(sizes)
    for layer, (w, b) in enumerate(layers):
        z = a @ theta[w].reshape(sizes[layer], sizes[layer + 1]) + theta[b]
        a = act(z) if layer < len(layers) - 1 else z
        zs.append(z)
        acts.append(a)
    return zs, acts


def _jacobian(theta, X, sizes, activation):
    """``J[i, o, j] = d f_o(x_i) / d theta_j``, by backpropagation in numpy."""
    dact = _ACT[activation][1]
    zs, acts = _forward(theta, X, sizes, activation)
    layers = _slices(sizes)
    n, k = X.shape[0], sizes[-1]
    J = np.zeros((n, k, layers[-1][1].stop))
    for o in range(k):
        delta = np.zeros((n, k))
        delta[:, o] = 1.0
        for layer in range(len(layers) - 1, -1, -1):
            w, b = layers[layer]
            J[:, o, w] = (acts[layer][:, :, None] * delta[:, None, :]).reshape(n, -1)
            J[:, o, b] = delta
            if layer:
                W = theta[w].reshape(sizes[layer], sizes[layer + 1])
                delta = (delta @ W.T) * dact(zs[layer - 1], acts[layer])
    return acts[-1], J


def _output_hessian(f, likelihood, tau=None):
    """Lambda per row, shape (n, k, k): the likelihood's negative Hessian in the output."""
    n, k = f.shape
    if likelihood == "gaussian":
        return np.broadcast_to(np.diag(tau), (n, k, k))
    if likelihood == "bernoulli":
        p = expit(f[:, 0])
        return (p * (1 - p))[:, None, None]
    p = softmax(f, axis=1)
    return np.einsum("nk,kl->nkl", p, np.eye(k)) - p[:, :, None] * p[:, None, :]


def _ggn(J, lam, w):
    """``sum_i w_i J_i^T Lambda_i J_i``."""
    return np.einsum("n,nkp,nkl,nlq->pq", w, J, lam, J)


def _prior_precision(sizes, std, fan_in_scaling=True):
    """GaussianPrior(std, fan_in_scaling)'s precision per parameter: weights of a layer
    with m inputs N(0, std^2 / m), biases N(0, std^2)."""
    out = []
    for (w, b), fan_in in zip(_slices(sizes), sizes[:-1], strict=True):
        scale = fan_in if fan_in_scaling else 1.0
        out += [np.full(w.stop - w.start, scale / std**2), np.full(b.stop - b.start, 1 / std**2)]
    return np.concatenate(out)


def _sizes(est):
    return [int(s) for s in est.predictive_.layout.sizes]


# --------------------------------------------------------------------------------------
# Bayesian linear regression
# --------------------------------------------------------------------------------------

N_ROWS, N_FEATURES = 60, 3


def _linear_data(seed=0, shift=(0.0, 0.0, 0.0)):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_ROWS, N_FEATURES)) + np.asarray(shift)
    y = X @ np.array([1.0, -0.5, 0.25]) + 2.0 + 0.4 * rng.standard_normal(N_ROWS)
    X_test = rng.standard_normal((5, N_FEATURES)) * 1.5
    return X, y, X_test


def _blr(X, y, noise_std, lam_w=None, lam_b=1.0):
    """Closed form of Bayesian linear regression on the standardized target ``z``.

    Prior precisions ``lam_w`` of the weights (default ``d``: GaussianPrior(std=1) with
    fan-in scaling) and ``lam_b`` of the bias; noise precision ``1 / noise_std^2``. Returns
    the design, the posterior mean and covariance, the evidence of ``z`` and of ``y``
    (original units: minus ``n log y_std``), and the target's mean and sd.
    """
    n, d = X.shape
    lam_w = float(d) if lam_w is None else lam_w
    y_mean, y_std = y.mean(), y.std()
    z = (y - y_mean) / y_std
    phi = np.hstack([X, np.ones((n, 1))])
    prior_prec = np.r_[np.full(d, lam_w), lam_b]
    tau = 1.0 / noise_std**2
    precision = tau * phi.T @ phi + np.diag(prior_prec)
    cov = np.linalg.inv(precision)
    mean = cov @ (tau * phi.T @ z)
    marginal = phi @ np.diag(1.0 / prior_prec) @ phi.T + np.eye(n) / tau
    log_z = stats.multivariate_normal(np.zeros(n), marginal).logpdf(z)
    return {
        "phi": phi, "z": z, "mean": mean, "cov": cov, "precision": precision,
        "log_evidence_z": log_z, "log_evidence": log_z - n * math.log(y_std),
        "y_mean": y_mean, "y_std": y_std, "tau": tau, "prior_precision": prior_prec,
    }  # fmt: skip


def _relative(a, b):
    """Largest entry of |a - b| over the largest entry of |b|."""
    return float(np.max(np.abs(np.asarray(a) - b)) / np.max(np.abs(b)))


def _blr_estimator(hessian, **params):
    return BayesianMLPRegressor(
        (),
        method=Laplace(hessian=hessian, optimize_prior=False),
        noise_std=0.6,
        random_state=0,
        **params,
    )


@pytest.mark.parametrize("hessian", ["ggn", "full"])
def test_linear_regression_posterior_and_evidence_are_the_closed_form(hessian):
    X, y, _ = _linear_data()
    est = _blr_estimator(hessian).fit(X, y)
    exact = _blr(X, y, 0.6)
    post = est.posterior_
    assert _relative(post.theta, exact["mean"]) < 1e-8
    assert _relative(post.covariance(), exact["cov"]) < 1e-8
    assert _relative(post.hessian, exact["precision"]) < 1e-8
    assert abs(post.log_evidence - exact["log_evidence_z"]) < 1e-6
    assert abs(est.log_evidence_ - exact["log_evidence"]) < 1e-6
    assert est.diagnostics_["hessian"] == hessian  # no fallback on a quadratic


@pytest.mark.parametrize("hessian", ["ggn", "full"])
def test_integer_sample_weights_are_repeated_rows_in_the_closed_form(hessian):
    # weight k is the row repeated k times (0: left out); the closed form is computed on
    # the repeated rows themselves, the fit on the weighted ones
    X, y, _ = _linear_data()
    w = np.random.default_rng(1).integers(0, 4, N_ROWS)
    est = _blr_estimator(hessian).fit(X, y, sample_weight=w)
    exact = _blr(np.repeat(X, w, axis=0), np.repeat(y, w), 0.6)
    assert _relative(est.posterior_.theta, exact["mean"]) < 1e-8
    assert _relative(est.posterior_.covariance(), exact["cov"]) < 1e-8
    assert abs(est.log_evidence_ - exact["log_evidence"]) < 1e-6


@pytest.mark.parametrize("hessian", ["ggn", "full"])
def test_two_outputs_are_two_independent_closed_forms(hessian):
    # theta = [W (d x 2) row-major, b (2)]: the outputs share no parameter, so the
    # posterior is the product of each output's closed form and the evidence their sum
    X, y, _ = _linear_data()
    rng = np.random.default_rng(3)
    Y = np.column_stack([y, -3.0 * y + 5.0 * X[:, 1] + rng.standard_normal(len(y))])
    est = _blr_estimator(hessian).fit(X, Y)
    theta, cov = est.posterior_.theta, est.posterior_.covariance()
    evidence = 0.0
    index = [np.r_[np.arange(o, 2 * N_FEATURES, 2), 2 * N_FEATURES + o] for o in range(2)]
    for o in range(2):
        exact = _blr(X, Y[:, o], 0.6)
        assert _relative(theta[index[o]], exact["mean"]) < 1e-8
        assert _relative(cov[np.ix_(index[o], index[o])], exact["cov"]) < 1e-8
        evidence += exact["log_evidence"]
    # "full" differentiates numerically: its cross-output block is ~1e-11, not 0
    assert np.max(np.abs(cov[np.ix_(index[0], index[1])])) < 1e-8 * np.max(np.abs(cov))
    assert abs(est.log_evidence_ - evidence) < 1e-6


def test_linear_regression_glm_predictive_is_the_closed_form():
    X, y, X_test = _linear_data()
    est = _blr_estimator("ggn").fit(X, y)
    e = _blr(X, y, 0.6)
    phi_t = np.hstack([X_test, np.ones((len(X_test), 1))])
    mean = (phi_t @ e["mean"]) * e["y_std"] + e["y_mean"]
    epistemic = np.sqrt(np.einsum("ij,jk,ik->i", phi_t, e["cov"], phi_t)) * e["y_std"]
    aleatoric = np.full(len(X_test), 0.6 * e["y_std"])
    total = np.hypot(epistemic, aleatoric)

    assert _relative(est.predict(X_test), mean) < 1e-8
    for kind, expected in [("epistemic", epistemic), ("aleatoric", aleatoric), ("total", total)]:
        np.testing.assert_allclose(est.predict_std(X_test, kind=kind), expected, rtol=1e-8)
    np.testing.assert_allclose(est.predict(X_test, return_std=True)[1], total, rtol=1e-8)
    # the predictive of y is N(mean, total^2): equal-tailed Gaussian quantiles
    for coverage in (0.5, 0.9):
        lower, upper = est.predict_interval(X_test, coverage=coverage)
        half = stats.norm.ppf(0.5 + coverage / 2) * total
        np.testing.assert_allclose(upper - mean, half, rtol=1e-8)
        np.testing.assert_allclose(mean - lower, half, rtol=1e-8)
    # and its log density (the Bayesian cross-validation score)
    y_test = mean + np.linspace(-2.0, 2.0, len(X_test)) * total
    expected = stats.norm(mean, total).logpdf(y_test).mean()
    assert abs(log_predictive_scorer(est, X_test, y_test) - expected) < 1e-8


@pytest.mark.statistical
def test_linear_regression_sample_y_draws_the_closed_form_predictive(seed):
    # sample_y draws the linearized function (jointly over the rows) plus noise: at each of
    # the 5 test points the draws' mean and sd, and between two points their covariance
    # (only the shared function draw correlates them), against the closed form. 11 z-scores
    # below Z: false-alarm probability below 11 * 6.8e-6 = 7.5e-5 (union bound).
    X, y, X_test = _linear_data(seed=seed)
    est = _blr_estimator("ggn").fit(X, y)
    e = _blr(X, y, 0.6)
    phi_t = np.hstack([X_test, np.ones((len(X_test), 1))])
    mean = (phi_t @ e["mean"]) * e["y_std"] + e["y_mean"]
    f_cov = phi_t @ e["cov"] @ phi_t.T * e["y_std"] ** 2
    cov = f_cov + np.eye(len(X_test)) * (0.6 * e["y_std"]) ** 2
    sd = np.sqrt(np.diag(cov))

    n = 20000
    draws = est.sample_y(X_test, n_samples=n, random_state=seed)
    assert draws.shape == (len(X_test), n)
    z_mean = (draws.mean(axis=1) - mean) / (sd / math.sqrt(n))
    # the sd of a normal sample's sd is sd / sqrt(2 (n - 1))
    z_sd = (draws.std(axis=1, ddof=1) - sd) / (sd / math.sqrt(2 * (n - 1)))
    # the sample covariance of a bivariate normal has variance (s11 s22 + s12^2) / n; the two
    # points most correlated through the function
    corr = f_cov / np.outer(sd, sd) - np.eye(len(X_test))
    i, j = np.unravel_index(np.argmax(np.abs(corr)), corr.shape)
    c_hat = np.cov(draws[i], draws[j])[0, 1]
    z_cov = (c_hat - cov[i, j]) / math.sqrt((cov[i, i] * cov[j, j] + cov[i, j] ** 2) / n)
    assert np.all(np.abs(z_mean) < Z), z_mean
    assert np.all(np.abs(z_sd) < Z), z_sd
    assert abs(z_cov) < Z, z_cov
    # the test can tell joint draws from independent ones: the covariance is many SEs from 0
    assert abs(cov[i, j]) / math.sqrt(cov[i, i] * cov[j, j] / n) > 10 * Z


def test_diagonal_hessian_is_the_diagonal_of_the_exact_precision():
    # hessian="diag" keeps diag(H) of the GGN: the mean is still the MAP (the closed form,
    # to the L-BFGS tolerance: no Newton polish), the covariance diag(1 / diag(H)), and the
    # evidence Laplace's formula with log det diag(H): it is NOT the exact evidence, and the
    # gap is the difference of the log determinants.
    X, y, _ = _linear_data(shift=(1.0, 0.0, 0.0))  # a non-centred column: H not diagonal
    est = _blr_estimator("diag").fit(X, y)
    e = _blr(X, y, 0.6)
    post = est.posterior_
    # |theta - theta*| <= ||H^-1|| |grad|, the gradient from the fit's own diagnostics
    grad_bound = np.linalg.norm(e["cov"], 2) * est.diagnostics_["gradient_norm"] * 2.0
    assert np.max(np.abs(post.theta - e["mean"])) <= grad_bound + 1e-12
    diag = np.diag(e["precision"])
    np.testing.assert_allclose(post.hessian, diag, rtol=1e-10)
    np.testing.assert_allclose(post.covariance(), np.diag(1.0 / diag), rtol=1e-10)
    gap = 0.5 * (np.sum(np.log(diag)) - np.linalg.slogdet(e["precision"])[1])
    assert gap > 0.01  # Hadamard's inequality, strict for this non-diagonal H
    # the MAP error moves the evidence at second order only: (grad_bound)^2 * |H|
    assert abs(post.log_evidence - (e["log_evidence_z"] - gap)) < 1e-6
    assert est.diagnostics_["newton_steps"] == 0


def test_diagonal_hessian_is_exact_when_the_precision_is_diagonal():
    # one centred feature: phi^T phi = diag(sum x^2, n) up to the rounding of sum x (~1e-15)
    X, y, _ = _linear_data()
    X = X[:, :1] - X[:, :1].mean()
    exact = _blr(X, y, 0.6)
    off = exact["precision"][0, 1] / math.sqrt(np.prod(np.diag(exact["precision"])))
    assert abs(off) < 1e-12
    diag = _blr_estimator("diag").fit(X, y)
    ggn = _blr_estimator("ggn").fit(X, y)
    assert abs(diag.log_evidence_ - exact["log_evidence"]) < 1e-6
    assert abs(diag.log_evidence_ - ggn.log_evidence_) < 1e-6
    assert _relative(diag.posterior_.covariance(), exact["cov"]) < 1e-8


# --------------------------------------------------------------------------------------
# The Jacobian kernel and the GGN
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("activation", ["tanh", "relu", "logistic"])
@pytest.mark.parametrize("first_layer", [0, 2])
def test_jacobian_kernel_matches_central_differences(activation, first_layer):
    # two hidden layers, three outputs; first_layer=2 is the last layer alone
    layout = NetworkLayout((3, 4, 5, 3))
    rng = np.random.default_rng(0)
    n, k = 7, 3
    X = rng.standard_normal((n, 3))
    theta = rng.standard_normal(layout.n_weights)
    act = ACTIVATIONS[activation]
    XT = np.ascontiguousarray(X.T).ravel()
    start = int(layout.offsets[first_layer])
    q = layout.n_weights - start
    f = np.empty((k, n))
    J = np.empty((k, q, n))
    ws = np.empty(knet.workspace_size(layout.sizes, n))
    kbackprop.jacobian(theta, XT, layout.sizes, layout.offsets, act, n, first_layer, ws, f, J)

    h = 1e-5
    thetas = np.repeat(theta[None], 2 * q, axis=0)
    thetas[np.arange(q), start + np.arange(q)] += h
    thetas[q + np.arange(q), start + np.arange(q)] -= h
    if activation == "relu":
        # central differences are exact for a piecewise linear network (no truncation
        # error) unless a step crosses a kink: no step changes any unit's on/off pattern
        def pattern(th):
            return [z > 0 for z in _forward(th, X, [3, 4, 5, 3], "relu")[0][:-1]]

        ref = pattern(theta)
        for th in thetas:
            assert all(np.array_equal(a, b) for a, b in zip(pattern(th), ref, strict=True))
    out = np.empty((2 * q, k, n))
    knet.forward_batch(thetas, XT, layout.sizes, layout.offsets, act, n, out)
    fd = (out[:q] - out[q:]) / (2 * h)  # (q, k, n)
    base = np.empty((1, k, n))
    knet.forward_batch(theta[None], XT, layout.sizes, layout.offsets, act, n, base)
    np.testing.assert_array_equal(f, base[0])
    # error of central differences: h^2 / 6 |f'''| + eps |f| / h, below 1e-9 here
    np.testing.assert_allclose(J.transpose(1, 0, 2), fd, rtol=0, atol=1e-7)
    # and the numpy backpropagation the other tests use agrees with the kernel
    _, J_np = _jacobian(theta, X, [3, 4, 5, 3], activation)
    np.testing.assert_allclose(J, J_np[:, :, start:].transpose(1, 2, 0), rtol=0, atol=1e-12)


def _binary_data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = (rng.random(n) < expit(2.0 * X[:, 0] - X[:, 1])).astype(int)
    return X, y


def _iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _smooth_data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = np.tanh(X[:, 0]) + 0.5 * X[:, 1] + 0.2 * rng.standard_normal(n)
    return X, y


@lru_cache
def _fit_problem(problem, subset="all", hessian="ggn"):
    """A small network's Laplace fit under a fixed prior (std 2, fan-in scaled) and, for
    regression, a fixed noise sd of 0.5, with row weights that are not integers so the
    weighting shows: (estimator, X, labels or z, likelihood, row weights). Shared by the
    tests that only read it."""
    n = 150 if problem == "categorical" else 40
    sample_weight = np.random.default_rng(5).uniform(0.5, 2.0, n)
    method = {"optimize_prior": False, "subset": subset, "hessian": hessian}
    common = {
        "hidden_layer_sizes": (3,),
        "method": Laplace(**method),
        "prior": GaussianPrior(std=2.0),
        "random_state": 0,
    }
    if problem == "gaussian":
        X, y = _smooth_data()
        est = BayesianMLPRegressor(noise_std=0.5, **common).fit(X, y, sample_weight=sample_weight)
        z = (y - est.predictive_.y_mean[0]) / est.predictive_.y_std[0]
        return est, X, z[:, None], "gaussian", sample_weight
    X, y = _binary_data() if problem == "bernoulli" else _iris()
    est = BayesianMLPClassifier(**common).fit(X, y, sample_weight=sample_weight)
    Y = y[:, None].astype(float) if problem == "bernoulli" else np.eye(3)[y]
    return est, X, Y, problem, sample_weight


@pytest.mark.parametrize("subset", ["all", "last_layer"])
@pytest.mark.parametrize("problem", ["gaussian", "bernoulli", "categorical"])
def test_ggn_is_j_lambda_j_plus_the_prior_precision(problem, subset):
    est, X, _, lik, w = _fit_problem(problem, subset)
    sizes = _sizes(est)
    theta = est.posterior_.theta
    f, J = _jacobian(theta, X, sizes, "tanh")
    lam = _output_hessian(f, lik, tau=np.array([4.0]))
    expected = _ggn(J, lam, w) + np.diag(_prior_precision(sizes, 2.0))
    start = est.posterior_.start
    assert start == (0 if subset == "all" else _slices(sizes)[-1][0].start)
    assert _relative(est.posterior_.hessian, expected[start:, start:]) < 1e-10


@pytest.mark.parametrize("problem", ["gaussian", "bernoulli", "categorical"])
def test_full_hessian_matches_numpy_differences_and_is_the_ggn_on_the_last_layer(problem):
    # hessian="full" is the exact Hessian of the negative log posterior: against central
    # differences (step 1e-5) of numpy's analytic gradient, whose error (h^2 |g^(3)| +
    # eps |g| / h, ~1e-9) and the kernel's ("about 8 significant digits") both sit far
    # below 1e-6 relative. On the last layer the output is linear in the parameters, so
    # there the exact Hessian is the GGN itself.
    est = _fit_problem(problem, "all", hessian="full")[0]
    assert est.diagnostics_["hessian"] == "full"  # a strict mode here: no fallback
    ggn, X, Y, lik, w = _fit_problem(problem, "all")
    sizes = _sizes(est)
    lam = _prior_precision(sizes, 2.0)

    def grad(theta):
        f, J = _jacobian(theta, X, sizes, "tanh")
        if lik == "gaussian":
            r = 4.0 * (Y - f)
        elif lik == "bernoulli":
            r = Y - expit(f)
        else:
            r = Y - softmax(f, axis=1)
        return np.einsum("n,nk,nkp->p", w, r, J) - lam * theta

    theta, h = est.posterior_.theta, 1e-5
    H = -np.array([(grad(theta + h * e) - grad(theta - h * e)) / (2 * h) for e in np.eye(len(lam))])
    H = 0.5 * (H + H.T)
    assert _relative(est.posterior_.hessian, H) < 1e-6
    assert _relative(ggn.posterior_.hessian, H) > 1e-3  # the test tells full from GGN
    last_full = _fit_problem(problem, "last_layer", hessian="full")[0]
    last_ggn = _fit_problem(problem, "last_layer")[0]
    assert last_full.diagnostics_["hessian"] == "full"
    assert _relative(last_full.posterior_.hessian, last_ggn.posterior_.hessian) < 1e-7


def _log_posterior_terms(est, X, Y, lik, w, prior_precision, tau=None, start=0):
    """Numpy log-likelihood (rows weighted by ``w``), log prior over ``theta[start:]``, and
    the gradient of the log posterior over ``theta[start:]``, at the fitted MAP
    (standardized scale)."""
    sizes = _sizes(est)
    theta = est.posterior_.theta
    f, J = _jacobian(theta, X, sizes, est.activation)
    if lik == "gaussian":
        r = Y - f
        rows = 0.5 * np.log(tau) - 0.5 * _LOG_2PI - 0.5 * tau * r**2
        dlogp_df = tau * r
    elif lik == "bernoulli":
        rows = Y * f - np.logaddexp(0.0, f)
        dlogp_df = Y - expit(f)
    else:
        rows = Y * (f - np.logaddexp.reduce(f, axis=1, keepdims=True))
        dlogp_df = Y - softmax(f, axis=1)
    loglik = float(np.sum(w[:, None] * rows))
    dlogp_df = w[:, None] * dlogp_df
    lam = prior_precision[start:]
    th = theta[start:]
    logprior = np.sum(0.5 * np.log(lam) - 0.5 * _LOG_2PI - 0.5 * lam * th**2)
    grad = np.einsum("nk,nkp->p", dlogp_df, J)[start:] - lam * th
    return loglik, logprior, grad


def _assert_stationary(est, grad, hessian=None):
    """The MAP is stationary enough for Laplace's evidence: a Newton step ``H^-1 grad`` from
    it would move no parameter by more than 1e-5 of its posterior sd and raise the log
    posterior (so the evidence) by ``grad^T H^-1 grad / 2`` < 1e-10 nats; a MAP left where
    the training engine stops (loss per row changing by < tol = 1e-4) misses both by
    orders of magnitude. The reported ``gradient_norm`` is this gradient's largest entry.
    ``hessian``: the dense precision, when the posterior holds it in another form."""
    hessian = est.posterior_.hessian if hessian is None else hessian
    step = np.linalg.solve(hessian, grad)
    sd = np.sqrt(np.diag(np.linalg.inv(hessian)))
    assert np.max(np.abs(step) / sd) < 1e-5
    assert 0.5 * grad @ step < 1e-10
    assert abs(est.diagnostics_["gradient_norm"] - np.max(np.abs(grad))) < 1e-10


def _laplace_evidence(loglik, logprior, hessian):
    q = hessian.shape[0]
    return loglik + logprior + 0.5 * q * _LOG_2PI - 0.5 * np.linalg.slogdet(hessian)[1]


@pytest.mark.parametrize("subset", ["all", "last_layer"])
@pytest.mark.parametrize("problem", ["gaussian", "bernoulli", "categorical"])
def test_evidence_is_laplace_formula_at_a_stationary_map(problem, subset):
    # log p(y | theta*) + log p(theta*) + (q/2) log 2 pi - (1/2) log det H, from numpy, with
    # the log prior over the q covered parameters only (last layer: the evidence of that
    # layer given the features below); the MAP is stationary in the covered parameters.
    # Over all layers, plus the log number of symmetric copies of the mode (counted from
    # numpy's inverse of the Hessian); none for the last layer alone (the features below
    # it are fixed)
    est, X, Y, lik, w = _fit_problem(problem, subset)
    sizes = _sizes(est)
    start = est.posterior_.start
    loglik, logprior, grad = _log_posterior_terms(
        est, X, Y, lik, w, _prior_precision(sizes, 2.0), tau=4.0, start=start
    )
    symmetric = 0.0
    if subset == "all":
        variance = np.diag(np.linalg.inv(est.posterior_.hessian))
        symmetric = log_symmetric_modes(
            est.predictive_.layout, est.posterior_.theta, variance, "tanh"
        )
        assert 0.0 < symmetric <= math.log(6 * 2**3)
    assert est.diagnostics_["log_symmetric_modes"] == pytest.approx(symmetric, abs=1e-9)
    expected = _laplace_evidence(loglik, logprior, est.posterior_.hessian) + symmetric
    assert abs(est.posterior_.log_evidence - expected) < 1e-8
    _assert_stationary(est, grad)
    # one update under a fixed prior and noise: the first evidence is the reported one,
    # in the same units
    assert est.diagnostics_["init_log_evidence"].tolist() == [est.log_evidence_]
    if problem == "gaussian":
        # the density of y in original units: the weighted row count times log y_std
        y_std = est.predictive_.y_std[0]
        assert abs(est.log_evidence_ - (expected - w.sum() * math.log(y_std))) < 1e-8
    else:
        assert est.log_evidence_ == est.posterior_.log_evidence


def _units(layout, theta, layer=0):
    """Views (W_in columns, b, W_out rows) of one hidden layer's units, writable."""
    sizes = layout.sizes
    fan_in, h, fan_out = (int(v) for v in sizes[layer : layer + 3])
    (w, b), (w2, _) = layout.slices(layer), layout.slices(layer + 1)
    return theta[w].reshape(fan_in, h), theta[b], theta[w2].reshape(h, fan_out)


def _set_unit(layout, theta, j, values, layer=0):
    w_in, b, w_out = _units(layout, theta, layer)
    fan_in = w_in.shape[0]
    w_in[:, j], b[j], w_out[j] = values[:fan_in], values[fan_in], values[fan_in + 1 :]


def _get_unit(layout, theta, j, layer=0):
    w_in, b, w_out = _units(layout, theta, layer)
    return np.concatenate([w_in[:, j], [b[j]], w_out[j]])


@pytest.mark.parametrize(
    "case, relu, tanh",
    [
        # four distinct units: 4! orderings, times 2^4 sign patterns for tanh
        ("distinct", 24, 24 * 16),
        # units 0 and 1 equal: the copies that swap them coincide
        ("equal pair", 12, 24 * 16 // 2),
        # unit 3 = -unit 2: distinct for ReLU; for tanh, swapping and flipping both is a
        # copy that coincides
        ("opposite pair", 24, 24 * 16 // 2),
        # unit 3 at zero: a tanh flip maps it to itself
        ("one at zero", 24, 24 * 16 // 2),
        # units 2 and 3 at zero: interchangeable, and flips map each to itself
        ("two at zero", 12, 24 * 16 // (2 * 4)),
        # within one posterior sd in the sum of squares: the same unit
        ("near pair", 12, 24 * 16 // 2),
    ],
)
def test_log_symmetric_modes_counts_the_distinct_copies(case, relu, tanh):
    layout = NetworkLayout((3, 4, 2))
    rng = np.random.default_rng(0)
    # units 10 posterior sds apart and from zero, but where the case says otherwise
    theta = 10.0 * rng.choice([-1.0, 1.0], layout.n_weights) + rng.uniform(-1, 1, layout.n_weights)
    variance = np.full(layout.n_weights, 1.0)
    if case == "equal pair":
        _set_unit(layout, theta, 1, _get_unit(layout, theta, 0))
    elif case == "opposite pair":
        _set_unit(layout, theta, 3, -_get_unit(layout, theta, 2))
    elif case == "one at zero":
        _set_unit(layout, theta, 3, np.zeros(6))
    elif case == "two at zero":
        _set_unit(layout, theta, 2, np.zeros(6))
        _set_unit(layout, theta, 3, np.zeros(6))
    elif case == "near pair":
        # 6 parameters each 0.25 sd apart, both units' copies moved: 2 * 6 * 0.0625 = 0.75
        _set_unit(layout, theta, 1, _get_unit(layout, theta, 0) + 0.25)
    for activation, count in [("relu", relu), ("logistic", relu), ("tanh", tanh)]:
        got = log_symmetric_modes(layout, theta, variance, activation)
        assert got == pytest.approx(math.log(count), abs=1e-12), activation
    assert log_symmetric_modes(layout, theta, variance, "identity") == 0.0


def test_log_symmetric_modes_scales_by_the_posterior_sd_and_multiplies_over_layers():
    layout = NetworkLayout((3, 4, 3, 2))
    rng = np.random.default_rng(1)
    theta = 10.0 * rng.choice([-1.0, 1.0], layout.n_weights) + rng.uniform(-1, 1, layout.n_weights)
    # units 0 and 1 of the first hidden layer 1 apart in each of their 6 parameters
    _set_unit(layout, theta, 1, _get_unit(layout, theta, 0) + 1.0)
    narrow = np.full(layout.n_weights, 1.0)  # 2 * 6 * 1 = 12 > 1: distinct
    wide = np.full(layout.n_weights, 16.0)  # sd 4: 2 * 6 / 16 = 0.75 < 1: the same
    assert log_symmetric_modes(layout, theta, narrow, "relu") == pytest.approx(
        math.log(24 * 6), abs=1e-12
    )
    assert log_symmetric_modes(layout, theta, wide, "relu") == pytest.approx(
        math.log(12 * 6), abs=1e-12
    )
    # no hidden layer: no symmetry
    assert log_symmetric_modes(NetworkLayout((3, 2)), np.ones(8), np.ones(8), "tanh") == 0.0


@pytest.mark.statistical
def test_n_init_polishes_on_the_initialization_with_the_highest_evidence(seed):
    # iris with two ReLU units, whose initializations often end in modes nats apart; a
    # fixed prior, so one update. Every initialization gets a short polish, whose evidence
    # (symmetric copies counted) init_log_evidence reports, and the best one is polished on:
    # the full polish changes the winner's evidence by tenths at most (see n_init), so
    # the reported evidence is the best initialization's, within 0.5 nats. Measured over
    # 100 seed offsets: log_evidence_ - max(init_log_evidence) was -0.23 to +0.007, and in
    # 97 of them another initialization ended over a nat below the best, so a wrong pick
    # fails. (The other 3 put every initialization in one mode: no false alarm, no power.)
    X, y = _iris()

    def fit(n_init):
        method = Laplace(optimize_prior=False, n_init=n_init)
        est = BayesianMLPClassifier((2,), activation="relu", method=method, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(X, y)
        return est

    one, many = fit(1), fit(6)
    inits = many.diagnostics_["init_log_evidence"]
    assert inits.shape == (6,) and np.all(np.isfinite(inits))
    assert many.log_evidence_ == many.posterior_.log_evidence
    assert abs(many.log_evidence_ - inits.max()) <= 0.5
    assert np.isfinite(many.diagnostics_["log_symmetric_modes"])
    # n_init=1 has nothing to rank: its one initialization is polished in full
    assert one.diagnostics_["init_log_evidence"].tolist() == [one.log_evidence_]


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_the_counted_copies_are_the_same_network(activation):
    # What the count rests on: a unit is its column of W_l, its bias and its row of
    # W_{l+1}; permuting units (and, for tanh, flipping a unit's signs) gives the same
    # outputs, at the same prior density (exchangeable within a layer, symmetric)
    layout = NetworkLayout((3, 3, 2, 2))
    rng = np.random.default_rng(2)
    theta = rng.standard_normal(layout.n_weights)
    X = rng.standard_normal((20, 3))
    sign = -1.0 if activation == "tanh" else 1.0
    copy_ = theta.copy()
    for layer, order in [(0, [(2, sign), (0, 1.0), (1, sign)]), (1, [(1, sign), (0, 1.0)])]:
        # from the copy: relabelling layer 0 already moved the rows of W_2
        units = [_get_unit(layout, copy_, j, layer) for j in range(len(order))]
        for j, (src, s) in enumerate(order):
            _set_unit(layout, copy_, j, s * units[src], layer)
    assert not np.allclose(theta, copy_)
    f, _ = _jacobian(theta, X, list(layout.sizes), activation)
    g, _ = _jacobian(copy_, X, list(layout.sizes), activation)
    np.testing.assert_allclose(f, g, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.sort(np.abs(theta)), np.sort(np.abs(copy_)), rtol=0, atol=0)


# --------------------------------------------------------------------------------------
# The classifier's GLM predictive
# --------------------------------------------------------------------------------------


def _function_variance(est, X):
    """``f(x; theta*)`` and ``diag(J Sigma J^T)`` per row and output, from numpy."""
    f, J = _jacobian(est.posterior_.theta, X, _sizes(est), est.activation)
    J = J[:, :, est.posterior_.start :]
    cov = np.linalg.inv(est.posterior_.hessian)
    return f, np.einsum("nkp,pq,nkq->nk", J, cov, J)


@pytest.mark.parametrize("subset", ["all", "last_layer"])
@pytest.mark.parametrize("problem", ["bernoulli", "categorical"])
def test_probit_predictive_by_hand(problem, subset):
    # softmax(f / sqrt(1 + pi/8 var f)) per class (expit for one logit), the variance
    # J Sigma J^T from numpy's Jacobian and the inverse of the reported precision
    est, X, *_ = _fit_problem(problem, subset)
    X_test = np.vstack([X[:10], 3.0 * X[:3]])  # a few points away from the data
    f, var = _function_variance(est, X_test)
    kappa = 1.0 / np.sqrt(1.0 + math.pi / 8.0 * var)
    if problem == "bernoulli":
        p1 = expit(kappa[:, 0] * f[:, 0])
        expected = np.column_stack([1.0 - p1, p1])
    else:
        expected = softmax(kappa * f, axis=1)
    np.testing.assert_allclose(est.predict_proba(X_test), expected, rtol=1e-9, atol=1e-14)
    # the linearized predictive is not the MAP's plug-in: the variance pulls towards 1/2
    if problem == "bernoulli":
        plug_in = np.column_stack([expit(-f[:, 0]), expit(f[:, 0])])
    else:
        plug_in = softmax(f, axis=1)
    assert np.max(np.abs(expected - plug_in)) > 1e-3


@pytest.mark.parametrize("subset", ["all", "last_layer"])
@pytest.mark.parametrize("problem", ["gaussian", "categorical"])
def test_function_moments_are_j_sigma_j_by_hand(problem, subset):
    # the full covariance between outputs, J Sigma J^T per row, from numpy's Jacobian and
    # the inverse of the reported precision
    est, X, *_ = _fit_problem(problem, subset)
    X_test = np.vstack([X[:7], 3.0 * X[:3]])
    mean, cov = est.posterior_.function_moments(est.predictive_.network(), X_test)
    f, J = _jacobian(est.posterior_.theta, X_test, _sizes(est), est.activation)
    J = J[:, :, est.posterior_.start :]
    expected = np.einsum("nkp,pq,nlq->nkl", J, np.linalg.inv(est.posterior_.hessian), J)
    np.testing.assert_allclose(mean, f, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cov, expected, rtol=1e-8, atol=1e-12 * np.abs(expected).max())
    assert cov.shape == (len(X_test), f.shape[1], f.shape[1])
    if problem == "categorical":
        # the outputs' covariances are not zero: it is not the diagonal alone
        assert np.max(np.abs(cov[:, 0, 1])) > 1e-3 * np.max(cov[:, 0, 0])


@pytest.mark.statistical
def test_mc_link_averages_the_gaussian_logits(seed):
    # link_approx="mc" averages expit over 100 draws of the linearized logit, whose exact
    # mean E[expit(f + sqrt(v) e)] and sd are one-dimensional integrals (Gauss-Hermite, 80
    # nodes: exact to rounding for this smooth integrand). Each row's z-score uses the
    # exact sd over sqrt(100) (not the draws' own: at a far point where p is near 0 with a
    # large logit variance the draws are skewed, and 100 of them underestimated the sd by
    # half at one seed of twelve). 13 rows, false alarm below 13 * 6.8e-6 = 8.8e-5 in the
    # normal approximation. Over seeds 0-99 the 1300 z-scores had sd 1.00, 4.2 % beyond 2
    # and 0.15 % beyond 3 (normal: 4.55 %, 0.27 %), max 3.7.
    X, y = _binary_data(seed=seed)
    common = {
        "hidden_layer_sizes": (3,), "prior": GaussianPrior(std=2.0), "random_state": seed,
    }  # fmt: skip
    mc = BayesianMLPClassifier(
        method=Laplace(optimize_prior=False, link_approx="mc"), **common
    ).fit(X, y)
    probit = BayesianMLPClassifier(method=Laplace(optimize_prior=False), **common).fit(X, y)
    X_test = np.vstack([X[:10], 3.0 * X[:3]])
    f, var = _function_variance(mc, X_test)
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / math.sqrt(2 * math.pi)
    g = expit(f[:, :1] + np.sqrt(var[:, :1]) * nodes)
    exact = g @ weights
    sd = np.sqrt((g - exact[:, None]) ** 2 @ weights)
    z = (mc.predict_proba(X_test)[:, 1] - exact) / (sd / 10.0)
    assert np.all(np.abs(z) < Z), z
    # the spread is over the same draws of the logits whichever link averages them
    np.testing.assert_array_equal(mc.predict_std(X_test), probit.predict_std(X_test))
    np.testing.assert_array_equal(mc.posterior_.hessian, probit.posterior_.hessian)


# --------------------------------------------------------------------------------------
# Kronecker-factored GGN (hessian="kron")
# --------------------------------------------------------------------------------------


def _kfac_by_hand(est, X, lik, w, tau=None):
    """K-FAC of the covered layers from numpy's forward pass and Jacobian: per layer the
    weight block ``A (x) G`` (``A`` the weighted mean of the inputs' outer products, ``G``
    the weighted sum of ``J_b^T Lambda J_b`` over rows, ``J_b`` the Jacobian in the
    layer's bias) and the bias block ``G``, as laplace-torch's KronLaplace; zero
    elsewhere."""
    sizes = _sizes(est)
    theta = est.posterior_.theta
    f, J = _jacobian(theta, X, sizes, est.activation)
    lam = _output_hessian(f, lik, tau)
    _, acts = _forward(theta, X, sizes, est.activation)
    layers = _slices(sizes)
    p = layers[-1][1].stop
    out = np.zeros((p, p))
    first = len(layers) - 1 if est.posterior_.start > 0 else 0
    for layer in range(first, len(layers)):
        a = acts[layer]
        A = np.einsum("n,ni,nj->ij", w, a, a) / w.sum()
        wsl, bsl = layers[layer]
        G = np.einsum("n,nkp,nkl,nlq->pq", w, J[:, :, bsl], lam, J[:, :, bsl])
        out[wsl, wsl] = np.kron(A, G)
        out[bsl, bsl] = G
    start = est.posterior_.start
    return out[start:, start:]


@pytest.mark.parametrize("subset", ["all", "last_layer"])
@pytest.mark.parametrize("problem", ["gaussian", "bernoulli", "categorical"])
def test_kron_precision_is_kfac_by_hand_plus_the_prior_precision(problem, subset):
    est, X, _, lik, w = _fit_problem(problem, subset, "kron")
    expected = _kfac_by_hand(est, X, lik, w, tau=np.array([4.0]))
    start = est.posterior_.start
    expected += np.diag(_prior_precision(_sizes(est), 2.0)[start:])
    assert _relative(est.posterior_.hessian.to_dense(), expected) < 1e-10
    assert est.diagnostics_["hessian"] == "kron"


@pytest.mark.parametrize("problem", ["gaussian", "bernoulli", "categorical"])
def test_kron_evidence_and_predictive_are_laplace_formulas_at_its_precision(problem):
    # the evidence, the posterior variances and J Sigma J^T from the dense matrix that the
    # factors stand for, by numpy
    est, X, Y, lik, w = _fit_problem(problem, "all", "kron")
    sizes = _sizes(est)
    precision = est.posterior_.hessian.to_dense()
    loglik, logprior, grad = _log_posterior_terms(
        est, X, Y, lik, w, _prior_precision(sizes, 2.0), tau=4.0, start=0
    )
    cov = np.linalg.inv(precision)
    symmetric = log_symmetric_modes(
        est.predictive_.layout, est.posterior_.theta, np.diag(cov), "tanh"
    )
    expected = _laplace_evidence(loglik, logprior, precision) + symmetric
    assert abs(est.posterior_.log_evidence - expected) < 1e-8
    _assert_stationary(est, grad, precision)
    np.testing.assert_allclose(est.posterior_.covariance(), cov, rtol=1e-9, atol=1e-13)
    X_test = np.vstack([X[:5], 3.0 * X[:3]])
    _, fcov = est.posterior_.function_moments(est.predictive_.network(), X_test)
    _, J = _jacobian(est.posterior_.theta, X_test, sizes, est.activation)
    expected_f = np.einsum("nkp,pq,nlq->nkl", J, cov, J)
    np.testing.assert_allclose(fcov, expected_f, rtol=1e-8, atol=1e-12 * np.abs(expected_f).max())


@pytest.mark.parametrize("subset", ["all", "last_layer"])
@pytest.mark.parametrize("problem", ["gaussian", "bernoulli", "categorical"])
def test_kron_linearization_without_the_jacobian_is_the_jacobians(problem, subset):
    # the K-FAC predictive reads the layers' inputs and output derivatives only; the same
    # covariance, variances and shifts J delta as from the Jacobian kernel and the
    # factors' square root
    from skbnn.posterior import _JacobianChunk, _KronChunk

    est, X, *_ = _fit_problem(problem, subset, "kron")
    post, net = est.posterior_, est.predictive_.network()
    X_test = np.vstack([X[:6], 2.5 * X[:4]])
    delta = post.deviations(7, np.random.default_rng(0))
    got = net.map_derivatives(
        X_test, post.theta, post.first_layer,
        lambda rows, f, a, d: (f, _KronChunk(post._kron, a, d)),
    )  # fmt: skip
    want = net.map_jacobians(
        X_test, post.theta, post.first_layer,
        lambda rows, f, J: (f, _JacobianChunk(post._times_factor, J)),
    )  # fmt: skip
    for (f1, a), (f2, b) in zip(got, want, strict=True):
        np.testing.assert_allclose(f1, f2, rtol=1e-12, atol=1e-12)
        for x, y in [(a.covariance(), b.covariance()), (a.variances(), b.variances()),
                     (a.shifts(delta), b.shifts(delta))]:  # fmt: skip
            np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12 * np.abs(y).max())


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_kron_is_the_closed_form_on_centred_features(n_outputs):
    # A linear model's GGN is Phi^T Phi tau; its weight-bias block is tau sum_i x_i, zero
    # for centred features, and its weight block (sum x x^T) (x) diag(tau) is exactly
    # K-FAC's mean(x x^T) (x) n diag(tau): the Kronecker approximation is exact here
    X, y, _ = _linear_data()
    X = X - X.mean(axis=0)
    Y = y if n_outputs == 1 else np.column_stack([y, 2.0 * X[:, 2] - y])
    est = _blr_estimator("kron").fit(X, Y)
    theta, cov = est.posterior_.theta, est.posterior_.covariance()
    evidence = 0.0
    k, d = n_outputs, N_FEATURES
    for o in range(k):
        exact = _blr(X, Y if k == 1 else Y[:, o], 0.6)
        index = np.r_[np.arange(o, k * d, k), k * d + o]
        assert _relative(theta[index], exact["mean"]) < 1e-8
        assert _relative(cov[np.ix_(index, index)], exact["cov"]) < 1e-8
        evidence += exact["log_evidence"]
    assert abs(est.log_evidence_ - evidence) < 1e-6


def test_kron_algebra_is_the_dense_matrix_algebra():
    from skbnn._kron import KronPrecision

    rng = np.random.default_rng(0)
    layout = NetworkLayout((3, 4, 2))

    def spd(m, rank):
        r = rng.standard_normal((m, rank))
        return r @ r.T  # rank-deficient where rank < m: the deltas cover it

    A, G = [spd(3, 3), spd(4, 2)], [spd(4, 4), spd(2, 1)]
    deltas = np.array([0.5, 2.0, 1.5, 0.25])
    P = KronPrecision(layout, 0, A, G, deltas)
    dense = np.zeros((layout.n_weights,) * 2)
    for layer in range(2):
        w, b = layout.slices(layer)
        dense[w, w] = np.kron(A[layer], G[layer]) + deltas[2 * layer] * np.eye(w.stop - w.start)
        dense[b, b] = G[layer] + deltas[2 * layer + 1] * np.eye(b.stop - b.start)
    np.testing.assert_allclose(P.to_dense(), dense, rtol=1e-12, atol=1e-12)
    inv = np.linalg.inv(dense)
    v = rng.standard_normal(layout.n_weights)
    np.testing.assert_allclose(P.solve(v), inv @ v, rtol=1e-10)
    np.testing.assert_allclose(P.diag_inverse(), np.diag(inv), rtol=1e-10)
    assert P.logdet() == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-12)
    J = rng.standard_normal((2, layout.n_weights, 5))
    F = P.inverse_sqrt_times(J)
    np.testing.assert_allclose(
        np.einsum("kqm,lqm->mkl", F, F), np.einsum("kpm,pq,lqm->mkl", J, inv, J), rtol=1e-10
    )
    root = P.sample_deviations(np.eye(layout.n_weights))
    np.testing.assert_allclose(root.T @ root, inv, rtol=1e-10, atol=1e-14)
    C_A, C_G = [spd(3, 3), spd(4, 4)], [spd(4, 4), spd(2, 2)]
    C = np.zeros_like(dense)
    for layer in range(2):
        w, b = layout.slices(layer)
        C[w, w], C[b, b] = np.kron(C_A[layer], C_G[layer]), C_G[layer]
    assert P.trace_inverse_times(C_A, C_G) == pytest.approx(np.trace(inv @ C), rel=1e-10)


def test_kron_fits_a_network_whose_dense_precision_would_not_fit_in_memory():
    # 5-200-200-1 has 41,601 parameters: a q x q matrix would take 14 GB; the factors take
    # 3 x 200^2 numbers. The fit, its evidence and its GLM predictive are finite.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 5))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(60)
    method = Laplace(hessian="kron", optimize_prior=False, max_iter=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 20 epochs reach no mode
        est = BayesianMLPRegressor((200, 200), method=method, random_state=0).fit(X, y)
    assert est.posterior_.stop - est.posterior_.start == 41_601
    mean, std = est.predict(X[:4], return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0) and math.isfinite(est.log_evidence_)
    assert est.sample_y(X[:2], n_samples=3).shape == (2, 3)


def test_kron_needs_one_prior_precision_per_group():
    X, y = _smooth_data()
    method = Laplace(hessian="kron", optimize_prior=False)
    est = BayesianMLPRegressor((3,), method=method, prior=LogisticPrior(), random_state=0)
    with pytest.raises(ValueError, match="one prior precision per weight matrix"):
        est.fit(X, y)


# --------------------------------------------------------------------------------------
# Empirical Bayes
# --------------------------------------------------------------------------------------

#: the Gamma(a, b) prior of the noise precision (skbnn.priors)
NOISE_A, NOISE_B = 1.0, 1e-3


def _blr_objective(X, y, log_hyper):
    """What empirical Bayes maximizes for Bayesian linear regression with inferred noise:
    the closed-form evidence of ``z`` at ``(lam_w, lam_b, tau_1, ...) = exp(log_hyper)``
    (one noise precision per column of ``y``, the prior precisions shared) plus the log
    Gamma(1, b) density of each ``tau`` (MacKay's noise update is its fixed point)."""
    lam_w, lam_b, *taus = np.exp(log_hyper)
    Y = y.reshape(len(y), -1)
    total = 0.0
    for o, tau in enumerate(taus):
        e = _blr(X, Y[:, o], 1.0 / math.sqrt(tau), lam_w=lam_w, lam_b=lam_b)
        total += e["log_evidence_z"] + (NOISE_A - 1) * math.log(tau) - NOISE_B * tau
    return total


def _curvature(fun, u, g, step=1e-3):
    """``-d^2 fun / du_g^2`` at ``u``, by central differences."""
    e = np.zeros(len(u))
    e[g] = step
    return -(fun(u + e) - 2 * fun(u) + fun(u - e)) / step**2


def _mackay_residuals(X, y, lam_w, lam_b, tau):
    """``2 d objective / d log(hyper)``: ``gamma_g - lam_g |m_g|^2`` per prior group and
    ``n - gamma - tau ssr - 2 b tau + 2 (a - 1)`` for the noise; zero at MacKay's fixed
    point."""
    e = _blr(X, y, 1.0 / math.sqrt(tau), lam_w=lam_w, lam_b=lam_b)
    d = X.shape[1]
    m, cov = e["mean"], e["cov"]
    gamma_w = d - lam_w * np.trace(cov[:d, :d])
    gamma_b = 1 - lam_b * cov[d, d]
    ssr = np.sum((e["z"] - e["phi"] @ m) ** 2)
    return np.array([
        gamma_w - lam_w * np.sum(m[:d] ** 2),
        gamma_b - lam_b * m[d] ** 2,
        len(y) - gamma_w - gamma_b - tau * ssr - 2 * NOISE_B * tau + 2 * (NOISE_A - 1),
    ])  # fmt: skip


def test_empirical_bayes_of_linear_regression_is_mackays_fixed_point():
    # Inputs off-centre, so the bias is well determined and the fixed point converges fast
    # (the ratio of successive evidence gains is ~1e-3): the updates stop within
    # evidence_tol of the closed-form optimum of the precisions and the noise.
    tol = 1e-6
    X, y, _ = _linear_data(shift=(1.5, -1.0, 0.5))
    est = BayesianMLPRegressor(
        (),
        method=Laplace(evidence_tol=tol),
        random_state=0,  # noise inferred
    ).fit(X, y)
    diag = est.diagnostics_
    assert diag["prior_groups"] == ["W1", "b1"]
    lam_w, lam_b = diag["prior_precision"]
    (tau,) = diag["noise_precision"]
    hyper = np.log([lam_w, lam_b, tau])
    e = _blr(X, y, 1.0 / math.sqrt(tau), lam_w=lam_w, lam_b=lam_b)

    # the reported MAP, covariance and evidence are those of the reported hyperparameters
    assert _relative(est.posterior_.theta, e["mean"]) < 1e-8
    assert _relative(est.posterior_.covariance(), e["cov"]) < 1e-8
    assert abs(est.posterior_.log_evidence - e["log_evidence_z"]) < 1e-6
    assert abs(est.log_evidence_ - e["log_evidence"]) < 1e-6
    np.testing.assert_allclose(est.noise_std_, e["y_std"] / math.sqrt(tau), rtol=1e-12)

    # the trace starts at the initial hyperparameters (GaussianPrior(): lam_w = d, lam_b =
    # 1; noise precision 1) and the reported evidence is its best
    trace = diag["evidence_trace"]
    first = _blr(X, y, 1.0, lam_w=float(N_FEATURES), lam_b=1.0)["log_evidence"]
    assert abs(trace[0] - first) < 1e-6
    assert len(trace) == diag["n_prior_updates"] + 1
    assert est.log_evidence_ == trace.max()

    # it is the optimum of the objective to evidence_tol, found independently
    best = minimize(
        lambda u: -_blr_objective(X, y, u), hyper, method="Nelder-Mead",
        options={"xatol": 1e-9, "fatol": 1e-12},
    )  # fmt: skip
    gap = -best.fun - _blr_objective(X, y, hyper)
    assert -1e-9 < gap < tol

    # MacKay's equations: the objective's slope in each log hyperparameter (half the
    # residual) is at most sqrt(2 c tol), with c its curvature there: a larger slope would
    # leave more than tol to gain along that hyperparameter alone
    residuals = _mackay_residuals(X, y, lam_w, lam_b, tau)
    for g in range(3):
        c = _curvature(lambda u: _blr_objective(X, y, u), hyper, g)
        assert c > 0
        assert abs(residuals[g]) / 2 < math.sqrt(2 * c * tol), (g, residuals[g], c)


def test_empirical_bayes_tunes_one_noise_precision_per_output():
    # two outputs share the prior precisions and each has its noise precision, whose
    # update counts the effective parameters of its own output: the reported values are
    # the closed-form optimum to evidence_tol, and the objective's slope in each log
    # hyperparameter is at most sqrt(2 c tol) (see the previous test)
    tol = 1e-6
    X, y, _ = _linear_data(shift=(1.5, -1.0, 0.5))
    rng = np.random.default_rng(3)
    Y = np.column_stack([y, -3.0 * y + 5.0 * X[:, 1] + rng.standard_normal(len(y))])
    est = BayesianMLPRegressor((), method=Laplace(evidence_tol=tol), random_state=0).fit(X, Y)
    diag = est.diagnostics_
    hyper = np.log([*diag["prior_precision"], *diag["noise_precision"]])
    assert len(hyper) == 4

    def objective(u):
        return _blr_objective(X, Y, u)

    # the evidence is the objective without the noise precisions' hyperprior
    hyperprior = np.sum((NOISE_A - 1) * hyper[2:] - NOISE_B * np.exp(hyper[2:]))
    assert abs(est.posterior_.log_evidence - (objective(hyper) - hyperprior)) < 1e-6
    best = minimize(
        lambda u: -objective(u), hyper, method="Nelder-Mead",
        options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000},
    )  # fmt: skip
    assert -1e-9 < -best.fun - objective(hyper) < tol
    h = 1e-6
    for g in range(4):
        e = np.zeros(4)
        e[g] = h
        slope = (objective(hyper + e) - objective(hyper - e)) / (2 * h)
        assert abs(slope) < math.sqrt(2 * _curvature(objective, hyper, g) * tol), g


def _expanded(est, per_group):
    """Per-parameter values from one value per group ``[W1, b1, W2, b2, ...]``."""
    out = []
    for (w, b), (vw, vb) in zip(_slices(_sizes(est)), np.reshape(per_group, (-1, 2)), strict=True):
        out += [np.full(w.stop - w.start, vw), np.full(b.stop - b.start, vb)]
    return np.concatenate(out)


@pytest.mark.parametrize(
    "problem, subset", [("gaussian", "all"), ("bernoulli", "last_layer"), ("categorical", "all")]
)
def test_empirical_bayes_map_hessian_and_evidence_use_the_final_hyperparameters(problem, subset):
    # laplace-torch users' complaint: post-hoc tuning leaves the MAP and the Hessian at
    # the old prior. Here the reported precisions (and noise) must reproduce the Hessian
    # as J^T Lambda J + diag(lambda), the evidence by Laplace's formula, and a stationary
    # MAP of the log posterior under them.
    if problem == "gaussian":
        X, y = _smooth_data()
        est = BayesianMLPRegressor((3,), method=Laplace(subset=subset), random_state=0).fit(X, y)
        Y = ((y - est.predictive_.y_mean[0]) / est.predictive_.y_std[0])[:, None]
        (tau,) = est.diagnostics_["noise_precision"]
    else:
        X, y = _binary_data() if problem == "bernoulli" else _iris()
        Y = y[:, None].astype(float) if problem == "bernoulli" else np.eye(3)[y]
        est = BayesianMLPClassifier((3,), method=Laplace(subset=subset), random_state=0).fit(X, y)
        tau = None
    diag = est.diagnostics_
    sizes = _sizes(est)
    assert diag["prior_groups"] == ["W1", "b1", "W2", "b2"]
    lam = _expanded(est, diag["prior_precision"])
    start = est.posterior_.start
    w = np.ones(len(X))
    f, J = _jacobian(est.posterior_.theta, X, sizes, "tanh")
    ggn = _ggn(J, _output_hessian(f, problem, tau=np.array([tau or 1.0])), w)
    expected = (ggn + np.diag(lam))[start:, start:]
    assert _relative(est.posterior_.hessian, expected) < 1e-10
    loglik, logprior, grad = _log_posterior_terms(est, X, Y, problem, w, lam, tau, start)
    symmetric = est.diagnostics_["log_symmetric_modes"]
    assert (subset == "last_layer") == (symmetric == 0.0)
    evidence = _laplace_evidence(loglik, logprior, expected) + symmetric
    assert abs(est.posterior_.log_evidence - evidence) < 1e-8
    _assert_stationary(est, grad)
    # the updates are ranked after a short polish, and the best one polished in full: on
    # these small problems that moved its evidence by under 1e-5 nats
    assert abs(est.log_evidence_ - diag["evidence_trace"].max()) < 1e-3
    assert diag["n_prior_updates"] >= 1
    # the tuning moved the precisions from GaussianPrior(std=3)'s (classifier; std=1 for
    # the regressor), and left those of the layers a last-layer Laplace does not cover
    initial = _prior_precision(sizes, 1.0 if problem == "gaussian" else 3.0)
    moved = ~np.isclose(lam, initial, rtol=1e-6)
    assert np.all(moved[start:]) and not np.any(moved[:start])


# --------------------------------------------------------------------------------------
# Safeguards and knobs
# --------------------------------------------------------------------------------------


def _assert_finite_fit(est, X):
    assert np.isfinite(est.log_evidence_)
    assert np.all(np.isfinite(est.posterior_.hessian))
    assert np.all(np.isfinite(est.posterior_.covariance()))
    if isinstance(est, BayesianMLPRegressor):
        outputs = [est.predict(X), *est.predict_interval(X), est.sample_y(X, 3, random_state=0)]
        outputs += [est.predict_std(X, kind=k) for k in ("total", "epistemic", "aleatoric")]
    else:
        outputs = [est.predict_proba(X), est.predict_std(X)]
    for out in outputs:
        assert np.all(np.isfinite(out))


@pytest.mark.parametrize("hidden", [(), (3,)])
def test_duplicated_feature_gives_a_finite_evidence_and_predictions(hidden):
    # the likelihood cannot tell the two copies' weights apart: its GGN is singular along
    # their difference, where only the prior (tuned by empirical Bayes) is curved
    X, y = _smooth_data()
    X = np.column_stack([X[:, 0], X])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning of a NaN or a division by zero
        est = BayesianMLPRegressor(hidden, method=Laplace(), random_state=0).fit(X, y)
        _assert_finite_fit(est, X)
    f, J = _jacobian(est.posterior_.theta, X, _sizes(est), est.activation)
    direction = np.zeros(J.shape[2])
    direction[: _sizes(est)[1]] = 1.0  # the first copy's weights ...
    direction[_sizes(est)[1] : 2 * _sizes(est)[1]] = -1.0  # ... against the second's
    assert np.max(np.abs(J @ direction)) < 1e-12  # singular GGN (precondition)


@pytest.mark.parametrize("hessian", ["ggn", "full", "diag"])
def test_dead_relu_units_give_a_finite_evidence_and_predictions(hessian, monkeypatch):
    # Three of six ReLU units start with zero incoming weights and bias: their
    # pre-activation is 0 on every row, where the ReLU's slope is 0, so no gradient ever
    # reaches them, the prior keeps them at zero, and their outgoing weights decay to 0:
    # the likelihood's GGN is zero on their 15 parameters, positive definite there only
    # through the prior. ("full" may fall back to the GGN at that kink, with a warning.)
    glorot = laplace_module.glorot_init

    def init(target, rng):
        theta = glorot(target, rng)
        w, b = _slices([int(s) for s in target.layout.sizes])[0]
        W = theta[w].reshape(target.n_features, -1)
        W[:, :3] = 0.0
        theta[w] = W.ravel()
        theta[b.start : b.start + 3] = 0.0
        return theta

    monkeypatch.setattr(laplace_module, "glorot_init", init)
    X, y = _smooth_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("error", RuntimeWarning)
        est = BayesianMLPRegressor(
            (6,), activation="relu", method=Laplace(hessian=hessian), random_state=0
        ).fit(X, y)
        _assert_finite_fit(est, X)
    _, J = _jacobian(est.posterior_.theta, X, _sizes(est), "relu")
    # Dead to rounding: the polish's exact-Newton step, taken or not as the last bits of the
    # CPU decide, moves them by ~1e-13 (its finite-difference Hessian sees the kink), which
    # can leave a pre-activation a rounding error above 0
    dead = np.all(np.abs(J) <= 1e-9 * np.abs(J).max(), axis=(0, 1))
    assert dead.sum() == 15  # W1[:, :3], b1[:3], W2[:3]: the precondition
    if est.diagnostics_["hessian"] != "full":
        # there the posterior precision is the (tuned) prior's, and nothing else
        lam = _expanded(est, est.diagnostics_["prior_precision"])
        H = est.posterior_.hessian
        block = H[np.ix_(dead, dead)] if H.ndim == 2 else np.diag(H[dead])
        # (the likelihood adds J^T J of those rounding-level entries: 1e-17 at most)
        np.testing.assert_allclose(block, np.diag(lam[dead]), rtol=1e-12,
                                   atol=1e-12 * lam[dead].max())  # fmt: skip


def test_full_hessian_at_a_saddle_falls_back_to_the_ggn(monkeypatch):
    # Every parameter 0 is a stationary point of any tanh network on a centred target (no
    # hidden unit moves the output, and the output bias fits the mean), and a saddle when
    # the target correlates with an input: the Hessian couples the first layer's weights
    # with the second's by sum(tau x z). Started there, the training stays there.
    monkeypatch.setattr(
        laplace_module, "glorot_init", lambda target, rng: np.zeros(target.layout.n_params)
    )
    X, y = _smooth_data()

    def fit(hessian):
        method = Laplace(hessian=hessian, optimize_prior=False)
        return BayesianMLPRegressor((2,), method=method, noise_std=0.5, random_state=0).fit(X, y)

    with pytest.warns(ConvergenceWarning, match="saddle"):
        full = fit("full")
    assert np.max(np.abs(full.posterior_.theta)) < 1e-12
    # the exact Hessian there is indefinite (numpy central differences of the gradient)
    sizes, z = _sizes(full), ((y - y.mean()) / y.std())[:, None]
    lam = _prior_precision(sizes, 1.0)

    def grad(theta):
        f, J = _jacobian(theta, X, sizes, "tanh")
        return np.einsum("nk,nkp->p", 4.0 * (z - f), J) - lam * theta

    p, h = len(lam), 1e-5
    H = -np.array([(grad(h * e) - grad(-h * e)) / (2 * h) for e in np.eye(p)])
    assert np.linalg.eigvalsh(0.5 * (H + H.T)).min() < -1.0
    # what stood in is the GGN, as a fit asking for it gets, and the diagnostics say so
    assert full.diagnostics_["hessian"] == "ggn"
    # the fix the warning prints asks for it: a fit that does is silent
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        ggn = fit("ggn")
    np.testing.assert_allclose(full.posterior_.hessian, ggn.posterior_.hessian, rtol=1e-12)
    assert full.log_evidence_ == pytest.approx(ggn.log_evidence_, abs=1e-9)


def test_logistic_prior_needs_optimize_prior_false():
    X, y, _ = _linear_data()
    est = BayesianMLPRegressor((), method=Laplace(), prior=LogisticPrior(), noise_std=0.6)
    with pytest.raises(ValueError, match="optimize_prior=True"):
        est.fit(X, y)


def test_logistic_prior_curvature_enters_the_hessian_and_evidence():
    # with optimize_prior=False the logistic prior's own Hessian at the MAP is used:
    # -d^2 log p / dw^2 = (1 - tanh(w / 2s)^2) / (2 s^2), and its log density in the
    # evidence
    X, y, _ = _linear_data()
    s = 0.5
    est = BayesianMLPRegressor(
        (), method=Laplace(optimize_prior=False), prior=LogisticPrior(scale=s), noise_std=0.6
    ).fit(X, y)
    theta = est.posterior_.theta
    e = _blr(X, y, 0.6)
    prior_curv = (1.0 - np.tanh(theta / (2 * s)) ** 2) / (2 * s * s)
    H = e["tau"] * e["phi"].T @ e["phi"] + np.diag(prior_curv)
    assert _relative(est.posterior_.hessian, H) < 1e-10
    r = e["z"] - e["phi"] @ theta
    loglik = np.sum(0.5 * np.log(e["tau"]) - 0.5 * _LOG_2PI - 0.5 * e["tau"] * r**2)
    logprior = np.sum(stats.logistic(scale=s).logpdf(theta))
    assert abs(est.posterior_.log_evidence - _laplace_evidence(loglik, logprior, H)) < 1e-8
    # stationary under that prior: tau phi^T r = d(-log p)/dw = tanh(w / 2s) / s
    grad = e["tau"] * e["phi"].T @ r - np.tanh(theta / (2 * s)) / s
    _assert_stationary(est, grad)


@pytest.mark.parametrize(
    "knob, value",
    [
        ("hessian", "bogus"),
        ("subset", "x"),
        ("predictive", "x"),
        ("link_approx", "x"),
        ("max_prior_updates", 0),
        ("n_init", 0),
        ("n_init", 1.5),
        ("evidence_tol", -1),
        ("optimize_prior", "yes"),
    ],
)
def test_bad_knobs_raise_a_value_error_naming_them(knob, value):
    X, y, _ = _linear_data()
    est = BayesianMLPRegressor((), method=Laplace(**{knob: value}), noise_std=0.6)
    with pytest.raises(ValueError, match=f"'{knob}' parameter of Laplace"):
        est.fit(X, y)


# --------------------------------------------------------------------------------------
# Determinism across n_jobs, and the MC predictive
# --------------------------------------------------------------------------------------


def _predictions(est, X):
    if isinstance(est, BayesianMLPRegressor):
        out = [est.predict(X), *est.predict_interval(X), est.sample_y(X, 4, random_state=1)]
        out += [est.predict_std(X, kind=k) for k in ("total", "epistemic", "aleatoric")]
        return np.column_stack(out)
    return np.column_stack([est.predict_proba(X), est.predict_std(X)])


@pytest.mark.parametrize(
    "cls, subset, hessian",
    [
        (BayesianMLPRegressor, "all", "ggn"),
        (BayesianMLPRegressor, "last_layer", "full"),
        (BayesianMLPClassifier, "all", "full"),
        (BayesianMLPClassifier, "last_layer", "ggn"),
        (BayesianMLPRegressor, "all", "kron"),
        (BayesianMLPClassifier, "all", "kron"),
    ],
)
def test_same_bits_whatever_n_jobs(cls, subset, hessian, monkeypatch):
    # small chunks of Jacobian rows (2-5 rows) and of outputs, so the GGN, the predictive
    # and the draws are summed over many chunks that two threads share out
    monkeypatch.setattr(posterior_module, "_JACOBIAN_BYTES", 500)
    monkeypatch.setattr(posterior_module, "_CHUNK_BYTES", 4000)
    X, y = _smooth_data() if cls is BayesianMLPRegressor else _iris()

    def fit(n_jobs):
        # two initializations, trained on the threads at once
        method = Laplace(hessian=hessian, subset=subset, max_prior_updates=3, n_init=2)
        return cls((3,), method=method, n_samples=20, random_state=0, n_jobs=n_jobs).fit(X, y)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 3 updates may not converge
        one, two = fit(1), fit(2)
    for a, b in [(one.posterior_.theta, two.posterior_.theta),
                 (_dense(one.posterior_.hessian), _dense(two.posterior_.hessian)),
                 (one.posterior_.thetas, two.posterior_.thetas),
                 (one.diagnostics_["evidence_trace"], two.diagnostics_["evidence_trace"]),
                 (one.diagnostics_["prior_precision"], two.diagnostics_["prior_precision"]),
                 (_predictions(one, X), _predictions(two, X))]:  # fmt: skip
        np.testing.assert_array_equal(a, b)
    assert one.log_evidence_ == two.log_evidence_


def _dense(hessian):
    return hessian.to_dense() if hasattr(hessian, "to_dense") else hessian


def test_same_bits_whatever_blas_threads():
    # A threaded BLAS sums in an order that depends on its thread count; empirical Bayes
    # compares evidences, so the fit must not depend on it. 161 parameters: OpenBLAS's
    # threaded Cholesky factors (from about 150 rows) differ in their last bits here.
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 8))
    y = np.tanh(X @ rng.standard_normal(8)) + 0.3 * rng.standard_normal(200)

    def fit(threads):
        with threadpool_limits(limits=threads, user_api="blas"), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est = BayesianMLPRegressor((16,), method=Laplace(max_prior_updates=6),
                                       random_state=0)  # fmt: skip
            return est.fit(X, y)

    one, two = fit(1), fit(2)
    np.testing.assert_array_equal(one.posterior_.hessian, two.posterior_.hessian)
    np.testing.assert_array_equal(one.diagnostics_["evidence_trace"],
                                  two.diagnostics_["evidence_trace"])  # fmt: skip
    np.testing.assert_array_equal(_predictions(one, X), _predictions(two, X))


def _single_draw_predictions(est, X, predict):
    """``predict(copy, X)`` for a copy of ``est`` whose posterior is one draw, per draw (as
    in test_sklearn_api.py)."""
    out = []
    for s in range(est.posterior_.n_draws):
        one = copy.deepcopy(est)
        tau = est.posterior_.noise_precision
        one.posterior_ = WeightedDraws(
            est.posterior_.thetas[s : s + 1],
            noise_precision=None if tau is None else np.atleast_2d(tau)[:1],
        )
        out.append(predict(one, X))
    return np.stack(out)


@pytest.mark.parametrize("cls", [BayesianMLPRegressor, BayesianMLPClassifier])
def test_mc_predictive_averages_the_stored_draws(cls):
    # predictive="mc": the prediction is the average over posterior_.thetas pushed through
    # the network, the epistemic sd (classifier: predict_std) the spread across them
    X, y = _smooth_data() if cls is BayesianMLPRegressor else _iris()
    est = cls((3,), method=Laplace(predictive="mc"), n_samples=15, random_state=0).fit(X, y)
    Xt = X[::7]
    if cls is BayesianMLPRegressor:
        per_draw = _single_draw_predictions(est, Xt, lambda e, x: e.predict(x))
        np.testing.assert_allclose(est.predict(Xt), per_draw.mean(axis=0), rtol=1e-10)
        spread = est.predict_std(Xt, kind="epistemic")
        np.testing.assert_allclose(spread, per_draw.std(axis=0), rtol=1e-8)
        # and not the linearized network's moments
        glm = copy.deepcopy(est)
        glm.posterior_.predictive_kind = "glm"
        assert not np.allclose(glm.predict_std(Xt, kind="epistemic"), spread, rtol=1e-3)
    else:
        per_draw = _single_draw_predictions(est, Xt, lambda e, x: e.predict_proba(x))
        np.testing.assert_allclose(est.predict_proba(Xt), per_draw.mean(axis=0), rtol=1e-10)
        np.testing.assert_allclose(est.predict_std(Xt), per_draw.std(axis=0), rtol=1e-8, atol=1e-12)


@pytest.mark.statistical
@pytest.mark.parametrize(
    "subset, hessian", [("all", "ggn"), ("last_layer", "ggn"), ("all", "kron")]
)
def test_stored_draws_are_the_laplace_gaussian(subset, hessian, seed):
    # posterior_.thetas ~ N(theta*, H^-1) over the covered parameters, the others at the
    # MAP. Per covered parameter the draws' mean and variance as z-scores (the variance of
    # a normal sample variance is 2 s^4 / (n - 1)): 2 q <= 44 comparisons, false alarm
    # below 44 * 6.8e-6 = 3e-4.
    X, y = _smooth_data(seed=seed)
    n = 4000
    est = BayesianMLPRegressor(
        (3,), method=Laplace(subset=subset, hessian=hessian), n_samples=n, random_state=seed
    ).fit(X, y)
    post = est.posterior_
    thetas, start = post.thetas, post.start
    np.testing.assert_array_equal(
        thetas[:, :start], np.broadcast_to(post.theta[:start], (n, start))
    )
    var = np.diag(np.linalg.inv(_dense(post.hessian)))
    d = thetas[:, start:]
    z_mean = (d.mean(axis=0) - post.theta[start:]) / np.sqrt(var / n)
    z_var = (d.var(axis=0, ddof=1) - var) / (var * math.sqrt(2 / (n - 1)))
    assert np.all(np.abs(z_mean) < Z), z_mean
    assert np.all(np.abs(z_var) < Z), z_var


def test_empirical_bayes_at_a_held_map_on_many_rows(monkeypatch):
    # above RETRAIN_MAX_ROWS the updates run at the first MAP's curvature and the MAP is
    # polished once, under the best hyperparameters: what is reported is still the
    # closed form at the reported hyperparameters, and those are near the optimum
    monkeypatch.setattr(laplace_module, "RETRAIN_MAX_ROWS", 0)
    # on 60 rows the prior moves the MAP enough that the held one costs 0.08 nats of
    # evidence; on 600 rows 5e-4, falling as the rows' inverse square
    monkeypatch.setattr(sys.modules[__name__], "N_ROWS", 600)
    X, y, _ = _linear_data(shift=(1.5, -1.0, 0.5))
    est = BayesianMLPRegressor((), method=Laplace(evidence_tol=1e-6), random_state=0).fit(X, y)
    diag = est.diagnostics_
    lam_w, lam_b = diag["prior_precision"]
    (tau,) = diag["noise_precision"]
    e = _blr(X, y, 1.0 / math.sqrt(tau), lam_w=lam_w, lam_b=lam_b)
    assert _relative(est.posterior_.theta, e["mean"]) < 1e-8
    assert _relative(est.posterior_.covariance(), e["cov"]) < 1e-8
    assert abs(est.log_evidence_ - e["log_evidence"]) < 1e-6
    assert diag["n_prior_updates"] > 1
    # the updates with the MAP retrained reach the optimum (the test above)
    monkeypatch.setattr(laplace_module, "RETRAIN_MAX_ROWS", 10**9)
    optimum = BayesianMLPRegressor((), method=Laplace(evidence_tol=1e-6), random_state=0)
    gap = optimum.fit(X, y).log_evidence_ - est.log_evidence_
    assert -1e-6 < gap < 1e-2


def test_a_diagonal_laplace_at_a_held_map_reports_its_best_update(monkeypatch):
    # at a held MAP the updates assemble states that no polish has judged, and the
    # diagonal curvature, never polished, reports such a state when a later update wins
    monkeypatch.setattr(laplace_module, "RETRAIN_MAX_ROWS", 0)
    X, y, _ = _linear_data()
    est = BayesianMLPRegressor((4,), method=Laplace(hessian="diag"), random_state=1).fit(X, y)
    diag = est.diagnostics_
    assert diag["n_prior_updates"] > 0 and np.argmax(diag["evidence_trace"]) > 0
    assert diag["newton_decrement"] == 0.0 and np.isfinite(est.log_evidence_)


@pytest.mark.parametrize("max_work, trainings", [(0, 1), (10**12, None)])
def test_a_wide_network_holds_its_map_as_many_rows_do(monkeypatch, max_work, trainings):
    # rows x parameters above RETRAIN_MAX_WORK hold the MAP during empirical Bayes, as
    # rows above RETRAIN_MAX_ROWS do: one training, then updates at its curvature; below
    # it every update retrains from the MAP before it
    monkeypatch.setattr(laplace_module, "RETRAIN_MAX_ROWS", 10**9)
    monkeypatch.setattr(laplace_module, "RETRAIN_MAX_WORK", max_work)
    calls = []
    train = laplace_module.Laplace._train_members

    def counted(self, *args, **kwargs):
        calls.append(1)
        return train(self, *args, **kwargs)

    monkeypatch.setattr(laplace_module.Laplace, "_train_members", counted)
    X, y, _ = _linear_data()
    est = BayesianMLPRegressor((4,), method=Laplace(), random_state=0).fit(X, y)
    n_updates = est.diagnostics_["n_prior_updates"]
    assert n_updates > 0
    assert len(calls) == (trainings or n_updates + 1)
