"""What ``diagnostics_`` reports must be true of the run: no figure of an algorithm the method
does not run, no work counted that was not done, every output watched."""

import warnings

import numpy as np
import pytest

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn._data import weighted_rows as _weighted_rows
from skbnn.diagnostics import ess_bulk, rhat
from skbnn.kernels import chain as kchain
from skbnn.kernels import density as knet
from skbnn.kernels import transitions
from skbnn.kernels._compile import call
from skbnn.log_posterior import LogPosterior
from skbnn.methods import HMC, MALA, NUTS, AdaptiveMetropolis
from skbnn.posterior import class_probabilities
from skbnn.priors import GaussianPrior


def _data(n_outputs=1):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 2))
    y = np.c_[X[:, 0] - X[:, 1], np.sin(X[:, 0])][:, :n_outputs]
    return X, (y + 0.2 * rng.standard_normal(y.shape)).squeeze()


def _quiet_fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short runs warn; their warnings are not the subject
        return est.fit(X, y)


def _fit(method, **kw):
    reg = BayesianMLPRegressor((3,), activation="tanh", method=method, n_samples=40,
                               random_state=0, **kw)  # fmt: skip
    return _quiet_fit(reg, *_data())


def _linear_classifier():
    return BayesianMLPClassifier((), activation="identity", method=NUTS(n_chains=2, n_warmup=20),
                                 n_samples=20, random_state=0)  # fmt: skip


def test_adaptive_metropolis_reports_no_step_size_and_no_energy():
    # a random walk has no step size to adapt and resamples no momentum: no step size,
    # and no E-BFMI, whose energy would be -logp
    diag = _fit(AdaptiveMetropolis(n_chains=2, n_warmup=40)).diagnostics_
    assert "step_size" not in diag and "e_bfmi" not in diag
    assert diag["accept_rate"].shape == (2,)


def test_e_bfmi_only_for_hamiltonian_methods():
    mala = _fit(MALA(n_chains=2, n_warmup=40)).diagnostics_
    assert "e_bfmi" not in mala and mala["step_size"].shape == (2,)
    for method in (NUTS(n_chains=2, n_warmup=40), HMC(n_chains=2, n_warmup=40)):
        diag = _fit(method).diagnostics_
        assert diag["e_bfmi"].shape == (2,) and np.all(np.isfinite(diag["e_bfmi"]))
        assert np.all(diag["e_bfmi"] > 0)


@pytest.mark.parametrize("noise_update", ["marginal", "gibbs"])
def test_adaptive_metropolis_never_computes_a_gradient(noise_update, monkeypatch):
    # The gradient array a chain carries starts at zero; any gradient evaluation (after the
    # Gibbs step of the noise, or at the start) would fill it.
    real = kchain.run_am_block
    seen = []

    def spy(rng, chain, *args):
        out = real(rng, chain, *args)
        seen.append(chain.grad.copy())
        return out

    spy.signatures = real.signatures
    monkeypatch.setattr(AdaptiveMetropolis, "_block_kernel", staticmethod(spy))
    method = AdaptiveMetropolis(n_chains=2, n_warmup=30, noise_update=noise_update)
    reg = _fit(method)
    d = reg.posterior_.thetas.shape[1]
    fit_calls = [g for g in seen if g.size == d]
    assert fit_calls and all(not g.any() for g in fit_calls)
    # the noise is still sampled: its Gibbs step moves the precision
    assert np.unique(reg.posterior_.noise_precision).size > 1


def test_hmc_counts_only_the_leapfrog_steps_it_took():
    # A step size far past the stability limit blows the trajectory up within a few steps:
    # the transition must report those steps, not the 1000 it had planned.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 2))
    target = LogPosterior(
        X, X[:, 0], (3,), "tanh", "gaussian", prior=GaussianPrior(fan_in_scaling=False)
    )
    tgt = knet.density_target(target.kernel_target())
    d = target.n_params
    q0 = target.sample_prior(rng, 1)[0]
    lp0, g0 = target.logp_and_grad(q0)
    chain = kchain.make_chain(q0, n_stats=3)
    chain.grad[:] = g0
    eps, n_planned = 1e6, 1000
    chain.state[0]["logp"], chain.state[0]["step_size"] = lp0, eps
    settings = kchain.make_settings(
        kind=kchain.HMC, path_length=n_planned * eps, max_steps=n_planned, max_delta_energy=1000.0
    )
    work = call(transitions.workspace, tgt, d, 0)
    info = call(transitions.hmc, np.random.default_rng(1), chain, tgt, settings, work)
    assert info.trajectory_size == n_planned  # static HMC reports its planned steps there
    assert 1 <= info.n_leapfrog < 20 and info.accept_stat == 0.0


def _per_draw(est, X, rows):
    """What the diagnostics should watch at ``rows``: (draws, rows, outputs)."""
    (_, f), *_ = est.predictive_.network().outputs(X[rows], est.posterior_.thetas)
    if isinstance(est, BayesianMLPRegressor):
        return np.transpose(f, (0, 2, 1))
    p = class_probabilities(f, len(est.classes_) == 2)
    return p[:, :, 1:] if len(est.classes_) == 2 else p


@pytest.mark.parametrize("kind", ["regression-2", "binary", "multiclass"])
def test_rhat_and_ess_watch_every_output_and_class(kind):
    X, y = _data(n_outputs=2 if kind == "regression-2" else 1)
    if kind == "regression-2":
        est = BayesianMLPRegressor((3,), method=NUTS(n_chains=2, n_warmup=30), n_samples=40)
    else:
        y = (y > 0).astype(int) if kind == "binary" else np.digitize(y, [-0.5, 0.5])
        est = BayesianMLPClassifier((3,), method=NUTS(n_chains=2, n_warmup=30), n_samples=40)
    _quiet_fit(est.set_params(random_state=0), X, y)
    # the fit watches five of its rows, which are in the canonical order the estimator puts
    # them in (distinct rows: sorted by X alone)
    X = _weighted_rows(X, np.zeros((len(X), 1)), None)[0]
    rows = np.unique(np.linspace(0, len(X) - 1, 5).astype(int))
    watched = _per_draw(est, X, rows).reshape(2, 20, len(rows), -1)
    n_watched = {"regression-2": 2, "binary": 1, "multiclass": 3}[kind]
    assert watched.shape[-1] == n_watched
    diag = est.diagnostics_
    assert diag["rhat_outputs"].shape == diag["ess_bulk_outputs"].shape == (5, n_watched)
    for j in range(5):
        for o in range(n_watched):
            chains = watched[:, :, j, o]
            np.testing.assert_allclose(diag["rhat_outputs"][j, o], rhat(chains), rtol=1e-6)
            np.testing.assert_allclose(diag["ess_bulk_outputs"][j, o], ess_bulk(chains), rtol=1e-6)


def test_binary_probabilities_are_stable_for_huge_logits():
    # logits of several hundred overflow exp(-f) in float64; the probabilities must come out
    # exact (0 and 1 to the last bit) without a warning
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 2))
    y = (X[:, 0] > 0).astype(int)
    clf = _quiet_fit(_linear_classifier(), X, y)
    clf.posterior_.thetas = clf.posterior_.thetas * 1e4
    (_, f), *_ = clf.predictive_.network().outputs(X, clf.posterior_.thetas)
    assert f.min() < -800 and f.max() > 800  # exp(800) overflows float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proba = clf.predict_proba(X)
        clf.predict_log_proba(X)
    assert np.all(np.isfinite(proba)) and np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-14)
    p1 = (1.0 / (1.0 + np.exp(-np.clip(f[:, 0, :], -700, 700)))).mean(axis=0)
    np.testing.assert_allclose(proba[:, 1], p1, rtol=1e-12, atol=1e-300)


def test_predictive_sd_is_accurate_far_below_the_mean():
    # E[f^2] - E[f]^2 loses every digit when the spread across draws is 1e-9 of the mean;
    # the sd must match a two-pass computation from the draws' own predictions
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 2))
    reg = BayesianMLPRegressor((), activation="identity", method=NUTS(n_chains=2, n_warmup=20),
                               n_samples=20, noise_std=0.1, random_state=0)  # fmt: skip
    _quiet_fit(reg, X, X[:, 0])
    thetas = np.zeros_like(reg.posterior_.thetas)
    thetas[:, :2] = 1e-3 * rng.standard_normal((20, 2))
    thetas[:, 2] = 1e6
    reg.posterior_.thetas = thetas
    f = (X @ thetas[:, :2].T + thetas[:, 2]) * reg.predictive_.y_std[0] + reg.predictive_.y_mean[
        0
    ]  # (n, draws)
    np.testing.assert_allclose(reg.predict_std(X, kind="epistemic"), f.std(axis=1), rtol=1e-6)

    y = (X[:, 0] > 0).astype(int)
    clf = _quiet_fit(_linear_classifier(), X, y)
    # logits near 12 spread by about 0.1: p(class 1) = 1 - 6e-6 with an sd near 6e-7
    clf.posterior_.thetas = thetas[:, :3] * np.r_[100.0, 100.0, 1.2e-5]
    p1 = 1.0 / (1.0 + np.exp(-(X @ (100 * thetas[:, :2].T) + 12.0)))
    np.testing.assert_allclose(clf.predict_std(X)[:, 1], p1.std(axis=1), rtol=1e-6)
