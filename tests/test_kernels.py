"""The numba kernels against finite differences and against each other."""

import os
import platform
import subprocess
import sys

import numpy as np
import pytest
from numba import njit

from skbnn.kernels import _libm, backprop, gemm, layers, likelihoods
from skbnn.kernels import density as knet
from skbnn.kernels._compile import KernelOnlyDispatcher, call
from skbnn.layout import NetworkLayout
from skbnn.log_posterior import ROW_ALIGN, LogPosterior
from skbnn.priors import GaussianPrior, LogisticPrior, ScaleMixturePrior

ACTIVATIONS = ["identity", "relu", "tanh", "logistic"]
CASES = [
    ("gaussian", 2, "fixed"),
    ("gaussian", 2, "theta"),
    ("gaussian", 1, "theta"),
    ("gaussian", 2, "marginal"),
    ("bernoulli", 1, "fixed"),
    ("categorical", 3, "fixed"),
]
PRIORS = [
    GaussianPrior(),
    GaussianPrior(std=0.7, fan_in_scaling=False),
    LogisticPrior(scale=0.6),
    LogisticPrior(scale=1.3, fan_in_scaling=True),
]


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
    target = LogPosterior(
        X, Y, hidden, activation, likelihood, prior=prior, noise=noise, noise_precision=2.5
    )
    assert target.layout.n_params == layout.n_params + (k if noise == "theta" else 0)
    return target


@pytest.mark.parametrize("likelihood, k, noise", CASES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("hidden", [(), (5,), (4, 3), (6, 7)])
@pytest.mark.parametrize("prior", PRIORS, ids=["fan_in", "plain", "logistic", "logistic-fan_in"])
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


def test_four_by_four_weight_gradient_follows_the_compile_target():
    # the blocking is chosen from the CPU numba compiles for, not the host's: a generic
    # x86-64 build (SSE2) or an AVX2 one must not get sixteen sums it has no registers for
    def four_by_four(cpu_name, features=None):
        env = dict(os.environ, NUMBA_CPU_NAME=cpu_name)
        env.pop("NUMBA_CPU_FEATURES", None)
        if features is not None:
            env["NUMBA_CPU_FEATURES"] = features
        code = "from skbnn.kernels import cpu; print(cpu._FOUR_BY_FOUR)"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        return out.stdout.split(), out.stderr

    out, err = four_by_four("generic")
    assert out == ["False"], err
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return  # an x86 CPU name means nothing to another target's LLVM
    avx2 = "+avx,+avx2,+fma,+sse4.2"
    out, err = four_by_four("haswell", avx2)
    assert out == ["False"], err
    out, err = four_by_four("skylake-avx512", avx2 + ",+avx512f,+avx512dq,+avx512bw,+avx512vl")
    assert out == ["True"], err


def test_weight_gradient_and_dense_layer_are_the_matrix_products():
    # every blocking of the two products: outputs by four, two and one (a last odd one
    # paired with itself), inputs by four and the ones left over, biases with the first
    rng = np.random.default_rng(3)
    n = 13
    for n_in in (1, 2, 3, 4, 5, 13):
        for n_out in (1, 2, 3, 4, 5, 6, 7, 10):
            X = rng.standard_normal((n_in, n))
            D = rng.standard_normal((n_out, n))
            W = rng.standard_normal((n_in, n_out))
            b = rng.standard_normal(n_out)
            grad = rng.standard_normal(n_in * n_out + n_out)
            expected = grad + 0.7 * np.concatenate([(X @ D.T).ravel(), D.sum(axis=1)])
            call(backprop._wgrad, X.ravel(), n_in, D.ravel(), n_out, n, grad, 0, n_in * n_out, 0.7)
            np.testing.assert_allclose(grad, expected, rtol=1e-12, atol=1e-12)
            theta = np.concatenate([W.ravel(), b])
            out = np.full(n_out * n, np.nan)
            call(layers._dense, X.ravel(), 0, n_in, theta, 0, n_in * n_out, out, 0, n_out, n)
            np.testing.assert_allclose(out.reshape(n_out, n), W.T @ X + b[:, None], rtol=1e-12)


@pytest.mark.parametrize("likelihood, k, noise", CASES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_gradient_through_wide_layers_matches_finite_differences(likelihood, k, noise,
                                                                 activation):  # fmt: skip
    # every layer but the head reaches BLAS_MIN_WIDTH in both widths: the first layer's
    # weight gradient on the data, the second's forward product, weight gradient and delta
    # below by dgemm
    width = gemm.BLAS_MIN_WIDTH
    target = _make_target(likelihood, k, noise, activation, (width, width + 1), PRIORS[0],
                          d=width + 2)  # fmt: skip
    rng = np.random.default_rng(1)
    theta = target.sample_prior(rng, 1)[0]
    value, grad = target.logp_and_grad(theta, beta=0.7)
    assert np.isfinite(value)
    eps = 1e-6
    fd = np.array(
        [(target.logp(theta + eps * e, 0.7) - target.logp(theta - eps * e, 0.7)) / (2 * eps)
         for e in np.eye(theta.size)]
    )  # fmt: skip
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5 * (1 + np.abs(fd).max()))


def test_wide_layers_are_the_matrix_products():
    # the BLAS path of the dense layer, the weight gradient and the delta below, at an
    # offset in their buffers as the kernels call them, against numpy
    rng = np.random.default_rng(4)
    n = 21
    lo = gemm.BLAS_MIN_WIDTH
    for n_in, n_out in ((lo, lo), (lo + 3, lo), (lo, 2 * lo + 1)):
        assert call(gemm.wide, n_in, n_out) and not call(gemm.wide, lo - 1, n_out)
        X = rng.standard_normal((n_in, n))
        D = rng.standard_normal((n_out, n))
        W = rng.standard_normal((n_in, n_out))
        b = rng.standard_normal(n_out)
        theta = np.concatenate([rng.standard_normal(5), W.ravel(), b])
        src = np.concatenate([rng.standard_normal(7), X.ravel()])
        out = np.full(3 + n_out * n, np.nan)
        call(layers._dense, src, 7, n_in, theta, 5, 5 + n_in * n_out, out, 3, n_out, n)
        np.testing.assert_allclose(out[3:].reshape(n_out, n), W.T @ X + b[:, None], rtol=1e-12)
        assert np.isnan(out[:3]).all()
        grad = rng.standard_normal(theta.size)
        expected = grad.copy()
        expected[5:] += 0.7 * np.concatenate([(X @ D.T).ravel(), D.sum(axis=1)])
        call(backprop._wgrad, X.ravel(), n_in, D.ravel(), n_out, n, grad, 5,
             5 + n_in * n_out, 0.7)  # fmt: skip
        np.testing.assert_allclose(grad, expected, rtol=1e-12, atol=1e-12)
        for act, derivative in ((1, lambda a: (a > 0) * 1.0), (2, lambda a: 1 - a * a)):
            A = np.abs(X) * (act == 2) + X * (act == 1)
            ws = np.concatenate([A.ravel(), np.full(n_in * n, np.nan)])
            call(backprop._delta_below, theta, ws, D.ravel(), n_in * n, 0, n_in, n_out, 5, n,
                 act)  # fmt: skip
            np.testing.assert_allclose(ws[n_in * n :].reshape(n_in, n),
                                       (W @ D) * derivative(A), rtol=1e-12, atol=1e-12)  # fmt: skip


@pytest.mark.parametrize(
    "likelihood, k, noise",
    [*CASES, ("heteroscedastic", 2, "fixed")],
)
@pytest.mark.parametrize("activation", ["relu", "tanh"])
@pytest.mark.parametrize("n", [1, 8, 23])
def test_padded_rows_change_nothing(likelihood, k, noise, activation, n):
    # The full-batch kernels get the rows padded to a multiple of ROW_ALIGN with zero-weight
    # rows and cache-line aligned: the log density, its terms and its gradient must be those
    # of the rows as they are, with row weights too.
    if likelihood == "heteroscedastic":
        # one target column, a mean and a raw variance output
        rng = np.random.default_rng(0)
        X, Y = rng.standard_normal((n, 4)), rng.standard_normal(n)
        target = LogPosterior(X, Y, (5,), activation, likelihood)
    else:
        target = _make_target(likelihood, k, noise, activation, (5,), GaussianPrior(), n=n)
    target.W = np.random.default_rng(3).uniform(0.2, 2.0, n)
    thetas = target.sample_prior(np.random.default_rng(1), 4)
    plain = target.kernel_target(own=True)
    padded = target.kernel_target(own=True, padded=True)
    m = call(knet.n_rows, padded)
    assert m % ROW_ALIGN == 0 and n <= m < n + ROW_ALIGN
    assert call(knet.weight_sum, padded) == pytest.approx(target.W.sum(), rel=1e-14)
    for a in (padded.XT, padded.YT, padded.W, target.workspace(n, padded=True)):
        assert a.ctypes.data % 64 == 0
    ws0, ws1 = target.workspace(), target.workspace(padded=True)
    for theta in thetas:
        g0, g1 = np.empty(theta.size), np.empty(theta.size)
        s0, s1 = np.zeros(2 + k), np.zeros(2 + k)  # classifiers leave the SSR slots
        v0 = knet.logp_grad(theta, plain, ws0, g0, s0, True)
        v1 = knet.logp_grad(theta, padded, ws1, g1, s1, True)
        assert v1 == pytest.approx(v0, rel=1e-12)
        np.testing.assert_allclose(s1, s0, rtol=1e-12, atol=1e-12 * np.abs(s0).max())
        np.testing.assert_allclose(g1, g0, rtol=1e-10, atol=1e-12 * np.abs(g0).max())


def test_padded_copy_follows_replaced_data():
    # the full data's padded copy is shared, but not kept past a replaced array
    target = _make_target("gaussian", 2, "fixed", "relu", (5,), GaussianPrior())
    first = target.kernel_target(padded=True)
    assert target.kernel_target(padded=True).XT is first.XT
    target.W = np.full(target.n_rows, 2.0)
    assert call(knet.weight_sum, target.kernel_target(padded=True)) == 2.0 * target.n_rows


def test_padded_rows_give_the_same_gibbs_output_layer_draw():
    from skbnn.kernels.gibbs import gibbs_output_layer

    target = _make_target("gaussian", 2, "fixed", "relu", (5,), GaussianPrior())
    target.W = np.random.default_rng(3).uniform(0.2, 2.0, target.n_rows)
    theta = target.sample_prior(np.random.default_rng(1), 1)[0]
    draws = []
    for padded in (False, True):
        q = theta.copy()
        tgt = target.kernel_target(own=True, padded=padded)
        gibbs_output_layer(np.random.default_rng(7), q, tgt, target.workspace(padded=padded))
        draws.append(q)
    assert not np.array_equal(draws[0], theta)
    np.testing.assert_allclose(draws[1], draws[0], rtol=1e-10, atol=1e-12)


@njit
def _density_twice(q, tgt, ws, g, st):
    # a kernel calling the log density as the samplers do: through the target's pointer,
    # once with the gradient and once without (which must leave g alone)
    v = knet.density(q, tgt, ws, g, st, True)
    knet.density(q, tgt, ws, g[:0], st, False)
    return v


@pytest.mark.parametrize("likelihood,k,noise", CASES)
def test_density_through_the_pointer_is_logp_grad(likelihood, k, noise):
    # the samplers' DensityTarget calls the very kernel Python calls (logp_grad_for its
    # codes), on the same arrays (so the noise precisions it writes are the target's), and
    # survives pickling (a chain's state travels to other processes under the dask backend)
    import pickle

    target = _make_target(likelihood, k, noise, "tanh", (5, 3), GaussianPrior())
    plain = target.kernel_target(own=True)
    dt = knet.density_target(plain)
    assert knet.plain_target(dt) is plain and dt.tau is plain.tau
    ws = target.workspace()
    for theta in target.sample_prior(np.random.default_rng(2), 3):
        g0, g1 = np.empty(theta.size), np.full(theta.size, np.nan)
        s0, s1 = np.zeros(2 + k), np.zeros(2 + k)
        v0 = dt.density.dispatcher()(theta, plain, ws, g0, s0, True)
        tau0 = plain.tau.copy()
        for tgt in (dt, pickle.loads(pickle.dumps(dt))):
            if noise == "theta":
                tgt.tau[:] = -1.0  # overwritten with the precisions in theta
            v1 = _density_twice(theta, tgt, ws, g1, s1)
            assert v1 == v0  # the same compiled function: the same bits
            np.testing.assert_array_equal(g1, g0)
            np.testing.assert_array_equal(s1, s0)
            np.testing.assert_array_equal(tgt.tau, tau0)


def test_a_density_target_is_typed_as_its_fields_once_per_tuple():
    # numba types a DensityTarget on each call of a kernel from Python; its type is kept by
    # the tuple's id on its density, which every tuple for one signature shares. A tuple at
    # a freed one's id, or beside others of the same signature, gets its own fields' type
    from numba.core import types
    from numba.core.typing.typeof import Purpose, typeof

    def fields_type(dt):
        return types.BaseTuple.from_types([typeof(v, Purpose.argument) for v in dt], type(dt))

    kinds = [("gaussian", 1, "fixed"), ("categorical", 3, "fixed"), ("gaussian", 2, "theta")]
    for likelihood, k, noise in kinds * 2:
        target = _make_target(likelihood, k, noise, "tanh", (5, 3), GaussianPrior())
        plain = target.kernel_target(own=True)
        first, second = knet.density_target(plain), knet.density_target(plain)
        assert first.density is second.density  # one per signature and source
        for dt in (first, second, first):
            assert typeof(dt, Purpose.argument) == fields_type(dt)
        # a tuple of read-only arrays beside them (built by hand: density_target would
        # compile a density for them) has a type of its own
        readonly = plain._replace(XT=plain.XT.copy())
        readonly.XT.flags.writeable = False
        other = knet.DensityTarget(*readonly, readonly, first.density)
        assert typeof(other, Purpose.argument) == fields_type(other) != fields_type(first)
        assert typeof(first, Purpose.argument) == fields_type(first)
        del first, second, other  # the next kind's tuples may take their ids


@pytest.mark.parametrize(
    "likelihood,k,activation,prior",
    [
        ("gaussian", 2, "relu", GaussianPrior()),
        ("gaussian", 1, "logistic", LogisticPrior(scale=0.6)),
        ("gaussian", 1, "identity", ScaleMixturePrior()),
        ("heteroscedastic", 2, "tanh", GaussianPrior()),
        ("bernoulli", 1, "relu", ScaleMixturePrior()),
        ("categorical", 3, "logistic", LogisticPrior(scale=1.3)),
        ("categorical", 1, "identity", GaussianPrior()),
    ],
)
def test_the_kernel_compiled_for_the_codes_is_logp_grad(likelihood, k, activation, prior):
    # logp_grad_for compiles the branch of each code only; it computes what the kernel that
    # reads the codes at run time does, for every activation, likelihood and prior (the
    # density of a DensityTarget is that kernel: see the test above). To rounding, not to
    # the bit: the kernels may reassociate sums (fastmath), and LLVM can vectorize a sum
    # in the two kernels differently (on an AVX-512 Zen 4 it did for the scale mixture's
    # log density, 7e-15 apart in 16.1); a wrong branch is off by far more.
    if likelihood == "heteroscedastic":
        # one target column: a mean and a raw variance output
        rng = np.random.default_rng(0)
        X, Y = rng.standard_normal((23, 4)), rng.standard_normal(23)
        target = LogPosterior(X, Y, (5, 3), activation, likelihood, prior=prior)
    else:
        target = _make_target(likelihood, k, "fixed", activation, (5, 3), prior)
    plain = target.kernel_target(own=True)
    kernel = knet.logp_grad_for(*knet.target_codes(plain))
    assert kernel is knet.density_target(plain).density.dispatcher()
    ws = target.workspace()
    for theta in target.sample_prior(np.random.default_rng(3), 3):
        g0, g1 = np.empty(theta.size), np.full(theta.size, np.nan)
        s0, s1 = np.zeros(2 + k), np.zeros(2 + k)
        v0 = knet.logp_grad(theta, plain, ws, g0, s0, True)
        assert np.isfinite(v0)
        assert kernel(theta, plain, ws, g1, s1, True) == pytest.approx(v0, rel=1e-12)
        np.testing.assert_allclose(g1, g0, rtol=1e-11, atol=1e-12 * np.abs(g0).max())
        np.testing.assert_allclose(s1, s0, rtol=1e-12, atol=1e-12 * np.abs(s0).max())


def test_kernels_keep_the_codes_they_are_called_with_as_constants():
    # a constant activation, likelihood or prior code reaches the kernel below as a literal
    # type, which its overloads compile one branch for; any other constant argument is
    # compiled for its plain type (one specialization, not one per value)
    @njit
    def caller(z):
        layers._activate(z, 0, z.shape[0], 2)

    z = np.linspace(-2.0, 2.0, 9)
    caller(z)
    np.testing.assert_allclose(z, np.tanh(np.linspace(-2.0, 2.0, 9)), rtol=1e-15, atol=1e-16)
    kinds = {str(sig[1]) + " " + str(sig[3]) for sig in layers._activate.signatures}
    assert "int64 Literal[int](2)" in kinds


def test_every_kernel_sets_its_own_fastmath_flags():
    # numba compiles a kernel that leaves fastmath unset with the flags of whichever caller
    # compiles it first, and caches that code for all: its speed (and, for a reduction, its
    # last bits) would then depend on what ran first in a cache's life
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    import skbnn.kernels

    found = []
    for info in pkgutil.iter_modules(skbnn.kernels.__path__):
        module = importlib.import_module(f"skbnn.kernels.{info.name}")
        for name, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == module.__name__:
                found.append(name)
                assert "fastmath" in obj.targetoptions, f"{info.name}.{name}"
    assert {"weight_sum", "logp_grad", "nuts", "run_epochs"} <= set(found)
    assert "fastmath" in knet.logp_grad_for(1, 0, 0).targetoptions


_PURE_PYTHON_FIT = """
import inspect, json, numpy as np
from skbnn import BayesianMLPRegressor
from skbnn.kernels import density, layers
from skbnn.methods import NUTS
X = np.linspace(-1, 1, 8)[:, None]
model = BayesianMLPRegressor((2,), method=NUTS(n_chains=1, n_warmup=10, max_tree_depth=3),
                             n_samples=5, random_state=0).fit(X, X[:, 0])
print(json.dumps({"finite": bool(np.isfinite(model.predict(X)).all()),
                  "python": [inspect.isfunction(k) for k in (density.logp_grad, layers._dense)]}))
"""


def test_a_small_fit_runs_in_pure_python_with_numba_disabled():
    # NUMBA_DISABLE_JIT=1, for stepping through the kernels in a debugger: the kernels are
    # the Python functions themselves, the overloaded ones branch at run time, and a tiny
    # fit runs (no compiling: seconds)
    import json

    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _PURE_PYTHON_FIT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == {"finite": True, "python": [True, True]}


def test_kernels_without_an_entry_from_python_refuse_python_calls():
    # compiled without numba's wrappers: a call from Python must raise, not jump to a null
    # address (a segmentation fault), and _compile.call must still reach the kernel
    assert isinstance(layers._dense, KernelOnlyDispatcher)
    assert layers._dense.targetoptions["no_cpython_wrapper"]
    with pytest.raises(TypeError, match="_libm._log is compiled without an entry point"):
        _libm._log(2.0)
    assert call(_libm._log, 2.0) == np.log(2.0)
    # the kernels a sampler or a fit calls from Python keep theirs
    for kernel in (knet.logp_grad, knet.logp_grad_for(1, 0, 0), knet.forward_batch):
        assert not isinstance(kernel, KernelOnlyDispatcher)


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
    a, b = target.noise_prior
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
    a, b = target.noise_prior
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
    sd = target.prior_scale
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


@pytest.mark.parametrize("likelihood, k, noise", [*CASES, ("heteroscedastic", 2, "fixed")])
@pytest.mark.parametrize(
    "prior", [*PRIORS[::2], ScaleMixturePrior()], ids=["gaussian", "logistic", "mixture"]
)
@pytest.mark.parametrize("weighted", [False, True])
def test_batched_loglik_equals_single(likelihood, k, noise, prior, weighted):
    # loglik_batch is the forward pass and the prior in numpy (the variational methods'
    # ELBO, which needs no gradient kernel): the network kernel's figures, row weights and
    # all, to rounding
    rng = np.random.default_rng(4)
    X = rng.standard_normal((23, 4))
    if likelihood in ("gaussian", "heteroscedastic"):
        Y = rng.standard_normal((23, k))
    elif likelihood == "bernoulli":
        Y = (rng.random((23, 1)) < 0.5).astype(float)
    else:
        Y = np.eye(k)[rng.integers(0, k, 23)]
    w = rng.uniform(0.2, 3.0, 23) if weighted else None
    target = LogPosterior(X, Y, (5,), "tanh", likelihood, prior=prior, noise=noise,
                          noise_precision=2.5, sample_weight=w)  # fmt: skip
    thetas = target.sample_prior(np.random.default_rng(5), 9)
    ll, lp = target.loglik_batch(thetas, n_jobs=2)
    for s in range(9):
        single = target.loglik_logprior(thetas[s])
        assert ll[s] == pytest.approx(single[0], rel=1e-12)
        assert lp[s] == pytest.approx(single[1], rel=1e-12)


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


# The vectorizable exp and log of the classification likelihoods, against numpy evaluated in
# extended precision where the platform has it (x86 long double: 64-bit mantissa).
_EXTENDED = np.finfo(np.longdouble).nmant >= 63


@njit(error_model="numpy")
def _map_elementary(fn, x):
    out = np.empty_like(x)
    for i in range(x.size):
        if fn == 0:
            out[i] = _libm._exp_neg(x[i])
        elif fn == 1:
            out[i] = _libm._log(x[i])
        else:
            out[i] = _libm._log1p_unit(x[i])
    return out


def _ulp_error(got, exact):
    # |error| in units of the spacing of float64 at the exact value; in the subnormal range
    # that spacing is the smallest subnormal, so this is an absolute bound there
    exact64 = exact.astype(np.float64)
    return np.abs(got.astype(np.longdouble) - exact) / np.spacing(np.abs(exact64))


def _check_elementary(fn, x, reference):
    got = _map_elementary(fn, x)
    exact = reference(x.astype(np.longdouble))
    # measured max 0.97 ulp (exp), 0.91 (log), 0.91 (log1p) against the long double result;
    # against float64 numpy, itself off by up to about an ulp, allow one more
    bound = 1.5 if _EXTENDED else 2.5
    nonzero = exact != 0
    err = _ulp_error(got[nonzero], exact[nonzero])
    assert err.max() < bound, x[nonzero][np.argmax(err)]
    normal = np.abs(exact) >= np.finfo(np.float64).tiny
    rel = np.abs(got[normal] - exact[normal].astype(np.float64)) / np.abs(exact[normal])
    assert rel.max() < (2.5e-16 if _EXTENDED else 4.5e-16)
    assert np.all(got[~nonzero] == 0.0)


def test_exp_neg_is_within_an_ulp():
    rng = np.random.default_rng(0)
    x = -np.concatenate([
        rng.uniform(0, 1, 200_000),
        rng.uniform(0, 745.2, 200_000),
        10.0 ** rng.uniform(-320, 0, 100_000),  # tiny arguments, down to subnormal
        rng.uniform(700, 746, 100_000),  # results in the subnormal range or rounding to 0
        np.arange(1075) * np.log(2.0),  # near powers of two, the reduction's boundaries
        np.arange(1075) * np.log(2.0) + 0.5 * np.log(2.0),
        [0.0, 5e-324, 1e-17, 708.4, 745.13, 745.14, 744.44, 746.0, 1000.0, 1e300],
    ])  # fmt: skip
    _check_elementary(0, x, np.exp)
    assert call(_libm._exp_neg, 0.0) == 1.0
    assert call(_libm._exp_neg, -np.inf) == 0.0
    assert np.isnan(call(_libm._exp_neg, np.nan))


def test_log_is_within_an_ulp():
    rng = np.random.default_rng(1)
    x = np.concatenate([
        10.0 ** rng.uniform(-323.5, 308.2, 200_000),
        rng.uniform(0.5, 3.0, 200_000),
        1.0 + rng.uniform(-1e-6, 1e-6, 100_000),
        2.0 ** np.arange(-1074.0, 1024.0),  # exact powers of two, subnormals included
        np.sqrt(0.5) * 2.0 ** np.arange(-1000.0, 1000.0),  # the mantissa split
        np.nextafter(np.sqrt(0.5) * 2.0 ** np.arange(-1000.0, 1000.0), 0),
        [1.0, np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0), 5e-324, 2.2250738585072014e-308,
         2.225073858507201e-308, np.finfo(np.float64).max],
    ])  # fmt: skip
    _check_elementary(1, x, np.log)
    assert call(_libm._log, 1.0) == 0.0
    assert call(_libm._log, 0.0) == -np.inf
    assert call(_libm._log, np.inf) == np.inf
    assert np.isnan(call(_libm._log, np.nan))
    assert np.isnan(call(_libm._log, -1.0))


def test_log1p_on_the_unit_interval_is_within_an_ulp():
    rng = np.random.default_rng(2)
    x = np.concatenate([
        rng.uniform(0, 1, 200_000),
        10.0 ** rng.uniform(-323.5, 0, 200_000),  # tiny, where log(1 + e) would give 0
        [0.0, 5e-324, 1e-300, 0.5, np.nextafter(0.5, 0.0), 1.0, np.nextafter(1.0, 0.0)],
    ])  # fmt: skip
    _check_elementary(2, x, np.log1p)
    assert np.isnan(call(_libm._log1p_unit, np.nan))


@njit
def _activation_in_place(z, act):
    # the network's own activation loop (the one the gradient and prediction run)
    layers._activate(z, 0, z.shape[0], act)


@pytest.mark.parametrize("act", [2, 3])
def test_tanh_and_logistic_are_within_four_ulp(act):
    rng = np.random.default_rng(3)
    x = np.concatenate([
        rng.uniform(-1.0, 1.0, 200_000),
        rng.uniform(-40.0, 40.0, 200_000),
        rng.uniform(-746.0, 0.0, 100_000),  # the logistic's results down to subnormal
        10.0 ** rng.uniform(-320.0, 2.9, 100_000) * rng.choice([-1.0, 1.0], 100_000),
        np.arange(-128, 128) * np.log(2.0) / 4,  # the reductions' boundaries (k ln2 / 2)
        [0.0, 5e-324, 0.5, -0.5, 19.0, 19.1, 22.0, 36.0, 37.0, -708.0, -745.0, -800.0, 1e300],
    ])  # fmt: skip
    z = x.copy()
    _activation_in_place(z, act)
    xl = x.astype(np.longdouble)
    exact = np.tanh(xl) if act == 2 else 1.0 / (1.0 + np.exp(-xl))
    normal = np.abs(exact) >= np.finfo(np.float64).tiny
    # against the long double result, over 10^7 arguments: tanh at most 3.3 ulp with FMA
    # and 4.0 without (NUMBA_CPU_NAME=generic), the logistic 2.4 on both; against float64
    # numpy, itself off by up to about an ulp, allow one more
    bound = 4.5 if _EXTENDED else 5.5
    err = _ulp_error(z[normal], exact[normal])
    assert err.max() < bound, x[normal][np.argmax(err)]
    # subnormal logistic results (x below -708): within 2 of the smallest subnormal
    assert np.all(np.abs(z[~normal] - exact[~normal].astype(np.float64)) <= 2 * 5e-324)
    # bounded: tanh in [-1, 1], the logistic in [0, 1]
    assert np.all(np.abs(z) <= 1.0) and (act == 2 or np.all(z >= 0.0))
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
    _activation_in_place(special, act)
    expected = [np.nan, 1.0, -1.0, 0.0, -0.0] if act == 2 else [np.nan, 1.0, 0.0, 0.5, 0.5]
    np.testing.assert_array_equal(special, expected)
    if act == 2:
        assert np.signbit(special[4])


def _loglik_delta(likelihood, F, Y):
    # The kernel on outputs F and targets Y, both (k, n); returns (ll, delta).
    k, n = F.shape
    lik = {"bernoulli": 1, "categorical": 2}[likelihood]
    ws = np.ascontiguousarray(F, dtype=np.float64).ravel()
    YT = np.ascontiguousarray(Y, dtype=np.float64).ravel()
    delta = np.full(k * n, -99.0)
    stats = np.empty(2 + k)
    cfg = np.ones(1, dtype=knet.CONFIG)[0]
    W = np.ones(n)
    ll = call(
        likelihoods._loglik_delta,
        ws,
        0,
        YT,
        W,
        float(n),
        np.ones(k),
        lik,
        k,
        n,
        delta,
        0,
        stats,
        cfg,
        0,
    )
    return ll, delta.reshape(k, n)


def _large_outputs(rng, k, n):
    # standard normal outputs scaled up to |f| = 700, with ties for the row maximum
    F = rng.standard_normal((k, n)) * rng.choice([0.01, 1.0, 30.0, 300.0], n)
    F = np.clip(F, -700.0, 700.0)
    F[:, : n // 8] = 700.0 * rng.choice([-1, 1], (k, 1)) * rng.random((k, n // 8))
    if k > 1:
        F[1, n // 8 : n // 4] = F[0, n // 8 : n // 4]  # two-way ties
    F[:, n // 4 : n // 4 + 5] = F[0, n // 4 : n // 4 + 5]  # all classes tied
    return F


@pytest.mark.parametrize("k", [1, 2, 3, 7])
@pytest.mark.parametrize("soft", [False, True], ids=["one_hot", "soft_labels"])
def test_softmax_loglik_and_delta_match_scipy(k, soft):
    from scipy.special import log_softmax, softmax

    rng = np.random.default_rng(k)
    n = 401
    F = _large_outputs(rng, k, n)
    Y = rng.dirichlet(np.ones(k), n).T if soft else np.eye(k)[rng.integers(0, k, n)].T
    ll, delta = _loglik_delta("categorical", F, Y)
    expected_ll = np.sum(Y * log_softmax(F, axis=0))
    assert ll == pytest.approx(expected_ll, rel=1e-14, abs=0)
    # The error is measured against the probability p = softmax, plus an ulp of y - p for
    # its own rounding, since y - p can cancel (in scipy too). exp(f - lse) inherits the
    # rounding of f - lse, about (|f| + |lse|) eps relative: measured up to 1.1e-13 at
    # |f| <= 700 against long double (scipy's softmax: 6e-14), 4.4e-16 here where all |f| < 1.
    P = softmax(F, axis=0)
    err = np.abs(delta - (Y - P)) - np.spacing(np.abs(Y - P))
    assert np.all(err <= 2.5e-13 * P + 1e-320)
    small = np.abs(F).max(axis=0) < 1.0
    assert np.all(err[:, small] <= 1e-15 * P[:, small])


@pytest.mark.parametrize("soft", [False, True], ids=["labels", "soft_labels"])
def test_bernoulli_loglik_and_delta_match_scipy(soft):
    from scipy.special import expit

    rng = np.random.default_rng(11)
    n = 1001
    F = _large_outputs(rng, 1, n)
    F[0, :40] = np.linspace(-40.0, 40.0, 40)  # where 1 - sigmoid would cancel
    Y = rng.random((1, n)) if soft else (rng.random((1, n)) < 0.5).astype(float)
    ll, delta = _loglik_delta("bernoulli", F, Y)
    assert ll == pytest.approx(np.sum(Y * F - np.logaddexp(0.0, F)), rel=1e-14, abs=0)
    # y - p is computed as y q - (1 - y) p with q = 1 - p; both terms carry full relative
    # accuracy, so the error is small against their sum: for 0/1 labels that is |delta|
    # itself, even where p rounds to 1 (measured 3.4e-16; soft labels cancel as in y - p).
    P, Q = expit(F), expit(-F)
    err = np.abs(delta - (Y * Q - (1 - Y) * P))
    assert np.all(err <= 1e-15 * (Y * Q + (1 - Y) * P))
    np.testing.assert_allclose(delta, Y - P, rtol=0, atol=1e-15)
    # a confidently right row: its log-likelihood -log1p(e^-40) keeps relative accuracy
    ll1, _ = _loglik_delta("bernoulli", np.array([[40.0]]), np.array([[1.0]]))
    assert ll1 == pytest.approx(-np.log1p(np.exp(-40.0)), rel=1e-15, abs=0)


@pytest.mark.parametrize("likelihood, k", [("bernoulli", 1), ("categorical", 3)])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("label", [0.0, 1.0])
def test_nonfinite_output_gives_nonfinite_loglik(likelihood, k, bad, label):
    # a divergent trajectory must show up, whatever the label of the row that diverged
    rng = np.random.default_rng(3)
    n = 37
    F = rng.standard_normal((k, n))
    Y = np.eye(k)[rng.integers(0, k, n)].T if k > 1 else (rng.random((1, n)) < 0.5) * 1.0
    for t in (0, 17, n - 1):  # first, a middle and the last row (vector remainders)
        Fb, Yb = F.copy(), Y.copy()
        Fb[k - 1, t] = bad
        Yb[:, t] = 0.0
        Yb[k - 1, t] = label
        if k > 1 and label == 0.0:
            Yb[0, t] = 1.0
        ll, _ = _loglik_delta(likelihood, Fb, Yb)
        assert not np.isfinite(ll), (t, ll)


@pytest.mark.parametrize("likelihood, k", [("bernoulli", 1), ("categorical", 3)])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_output_bias_gives_nonfinite_logp(likelihood, k, bad):
    target = _make_target(likelihood, k, "fixed", "relu", (4,), GaussianPrior())
    theta = target.sample_prior(np.random.default_rng(0), 1)[0]
    theta[target.layout.n_weights - 1] = bad  # the last output's bias
    value, _ = target.logp_and_grad(theta)
    assert not np.isfinite(value)


@pytest.mark.statistical
@pytest.mark.parametrize("scale, fan_in", [(0.6, False), (1.3, True)])
def test_logistic_prior_log_density_and_draws(scale, fan_in, seed):
    from scipy import stats

    prior = LogisticPrior(scale=scale, fan_in_scaling=fan_in)
    target = _make_target("gaussian", 1, "fixed", "tanh", (5,), prior)
    scales = prior.stds(target.layout)
    rng = np.random.default_rng(3 + seed)
    # far into the tails too, where a naive log(1 + e^-z) would overflow
    theta = (
        rng.standard_normal(target.n_params) * np.r_[np.ones(5), np.full(target.n_params - 5, 50.0)]
    )
    _, lp, _ = target.loglik_logprior(theta)
    expected = stats.logistic(scale=scales).logpdf(theta).sum()
    assert lp == pytest.approx(expected, rel=1e-13)
    # prior draws follow the logistic law, scaled per parameter: independent draws, so the
    # KS p-value is uniform under a correct sampler and 1e-4 is the false-alarm rate per case
    # (with these 17,700 draws a 10 % error in the scale gives p ~ 4e-8, 8 % about 1e-4)
    draws = target.sample_prior(rng, 4000) / scales
    assert stats.kstest(draws.ravel()[::7], stats.logistic.cdf).pvalue > 1e-4
