"""The numba kernels against finite differences and against each other."""

import numpy as np
import pytest

from skbnn.kernels import network as knet
from skbnn.network import NetworkLayout
from skbnn.priors import GaussianPrior
from skbnn.target import Target

ACTIVATIONS = ["identity", "relu", "tanh", "logistic"]
CASES = [
    ("gaussian", 2, "fixed"),
    ("gaussian", 2, "theta"),
    ("gaussian", 1, "theta"),
    ("gaussian", 2, "marginal"),
    ("bernoulli", 1, "fixed"),
    ("categorical", 3, "fixed"),
]
PRIORS = [GaussianPrior(), GaussianPrior(std=0.7, fan_in_scaling=False)]


def _make_target(likelihood, k, noise, activation, hidden, prior, seed=0, n=23, d=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    if likelihood == "gaussian":
        Y = rng.standard_normal((n, k))
    elif likelihood == "bernoulli":
        Y = (rng.random((n, 1)) < 0.5).astype(float)
    else:
        Y = np.eye(k)[rng.integers(0, k, n)]
    layout = NetworkLayout((d, *hidden, k))
    return Target(
        X, Y, hidden, activation, likelihood, prior.stds(layout), noise=noise, noise_precision=2.5
    )


@pytest.mark.parametrize("likelihood, k, noise", CASES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("hidden", [(), (5,), (4, 3)])
@pytest.mark.parametrize("prior", PRIORS, ids=["fan_in", "plain"])
def test_gradient_matches_finite_differences(likelihood, k, noise, activation, hidden, prior):
    target = _make_target(likelihood, k, noise, activation, hidden, prior)
    rng = np.random.default_rng(1)
    theta = target.sample_prior(rng, 1)[0]
    beta = 0.7
    value, grad = target.logp_and_grad(theta, beta=beta)
    assert np.isfinite(value)
    eps = 1e-6
    basis = np.eye(theta.size)
    fd = np.array(
        [(target.logp(theta + eps * e, beta) - target.logp(theta - eps * e, beta)) / (2 * eps)
         for e in basis]
    )  # fmt: skip
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5 * (1 + np.abs(fd).max()))


def test_noise_parameter_is_last_and_has_gamma_prior():
    target = _make_target("gaussian", 2, "theta", "tanh", (3,), GaussianPrior())
    assert target.n_params == target.layout.n_weights + 2
    theta = target.sample_prior(np.random.default_rng(0), 1)[0]
    ll, lp, value = target.loglik_logprior(theta)
    # moving only eta = log tau changes the log prior by the Gamma(a, b) log density of tau
    # plus the log Jacobian eta
    theta2 = theta.copy()
    theta2[-1] += 0.3
    _, lp2, _ = target.loglik_logprior(theta2)
    a, b = target.floats[0], target.floats[1]
    tau1, tau2 = np.exp(theta[-1]), np.exp(theta2[-1])
    expected = a * 0.3 - b * (tau2 - tau1)
    assert lp2 - lp == pytest.approx(expected, rel=1e-12)
    assert value == pytest.approx(ll + lp)


@pytest.mark.parametrize("beta", [1.0, 0.3])
def test_marginalized_noise_is_the_integral_over_the_precision(beta):
    # log int p(y | theta, tau)^beta Gamma(tau | a, b) dtau, by quadrature over log tau for
    # each output, from residuals computed in numpy
    from scipy import integrate, stats

    target = _make_target("gaussian", 2, "marginal", "tanh", (3,), GaussianPrior())
    theta = target.sample_prior(np.random.default_rng(5), 1)[0]
    coefs, intercepts = target.layout.unpack(theta)
    X = target.XT.reshape(target.n_features, target.n_rows).T
    Y = target.YT.reshape(target.n_outputs, target.n_rows).T
    ssr = np.sum((Y - (np.tanh(X @ coefs[0] + intercepts[0]) @ coefs[1] + intercepts[1])) ** 2, 0)
    a, b = target.floats[0], target.floats[1]
    n = target.n_rows
    expected = 0.0
    for s in ssr:

        def log_integrand(log_tau, s=s):
            tau = np.exp(log_tau)
            ll = 0.5 * n * (log_tau - np.log(2 * np.pi)) - 0.5 * tau * s
            return beta * ll + stats.gamma.logpdf(tau, a, scale=1 / b) + log_tau

        grid = np.linspace(-20, 15, 20001)
        values = log_integrand(grid)
        shift, peak = values.max(), grid[np.argmax(values)]
        value = integrate.quad(
            lambda u, s=s, shift=shift: np.exp(log_integrand(u, s) - shift),
            -20, 15, points=[peak], limit=400, epsabs=0, epsrel=1e-12,
        )[0]  # fmt: skip
        expected += np.log(value) + shift
    _, lp, total = target.loglik_logprior(theta, beta)
    assert total - lp == pytest.approx(expected, rel=1e-10)


def test_gaussian_loglik_matches_numpy():
    target = _make_target("gaussian", 2, "fixed", "relu", (6,), GaussianPrior(), n=17)
    theta = target.sample_prior(np.random.default_rng(3), 1)[0]
    coefs, intercepts = target.layout.unpack(theta)
    X = target.XT.reshape(target.n_features, target.n_rows).T
    Y = target.YT.reshape(target.n_outputs, target.n_rows).T
    h = np.maximum(X @ coefs[0] + intercepts[0], 0)
    f = h @ coefs[1] + intercepts[1]
    tau = 2.5
    expected_ll = np.sum(0.5 * np.log(tau / (2 * np.pi)) - 0.5 * tau * (Y - f) ** 2)
    sd = target.prior_std
    expected_lp = np.sum(-0.5 * (theta / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi))
    ll, lp, _ = target.loglik_logprior(theta)
    assert ll == pytest.approx(expected_ll, rel=1e-12)
    assert lp == pytest.approx(expected_lp, rel=1e-12)


@pytest.mark.parametrize("likelihood, k", [("bernoulli", 1), ("categorical", 3)])
def test_classification_loglik_matches_numpy(likelihood, k):
    target = _make_target(likelihood, k, "fixed", "tanh", (), GaussianPrior(), n=31)
    theta = 3 * target.sample_prior(np.random.default_rng(4), 1)[0]
    coefs, intercepts = target.layout.unpack(theta)
    X = target.XT.reshape(target.n_features, target.n_rows).T
    Y = target.YT.reshape(target.n_outputs, target.n_rows).T
    f = X @ coefs[0] + intercepts[0]
    if likelihood == "bernoulli":
        expected = np.sum(Y * f - np.logaddexp(0, f))
    else:
        expected = np.sum(Y * (f - np.logaddexp.reduce(f, axis=1, keepdims=True)))
    assert target.loglik_logprior(theta)[0] == pytest.approx(expected, rel=1e-12)


def test_batched_loglik_equals_single():
    target = _make_target("gaussian", 2, "theta", "tanh", (5,), GaussianPrior())
    thetas = target.sample_prior(np.random.default_rng(5), 9)
    ll, lp = target.loglik_batch(thetas)
    for s in range(9):
        single = target.loglik_logprior(thetas[s])
        assert ll[s] == pytest.approx(single[0], rel=1e-13)
        assert lp[s] == pytest.approx(single[1], rel=1e-13)


def test_forward_batch_equals_numpy():
    target = _make_target("gaussian", 2, "fixed", "logistic", (5, 4), GaussianPrior())
    thetas = target.sample_prior(np.random.default_rng(6), 4)
    out = np.empty((4, 2, target.n_rows))
    lay = target.layout
    knet.forward_batch(thetas, target.XT, lay.sizes, lay.offsets, 3, target.n_rows, out)
    X = target.XT.reshape(target.n_features, target.n_rows).T
    for s in range(4):
        coefs, intercepts = lay.unpack(thetas[s])
        h = X
        for i, (w, b) in enumerate(zip(coefs, intercepts, strict=True)):
            h = h @ w + b
            if i < len(coefs) - 1:
                h = 1 / (1 + np.exp(-h))
        np.testing.assert_allclose(out[s].T, h, rtol=1e-12, atol=1e-12)


def test_divergent_parameters_give_nonfinite_not_garbage():
    target = _make_target("gaussian", 1, "fixed", "identity", (3,), GaussianPrior())
    theta = np.full(target.n_params, 1e200)
    value, grad = target.logp_and_grad(theta)
    assert not np.isfinite(value)
