"""The training engine and the optimization methods (DeepEnsemble, RandomizedMAP, SWAG).

What is checked: the engine reaches the known MAP of convex problems (Bayesian linear and
logistic regression) with L-BFGS and with Adam; early stopping stops and keeps the best
validation parameters; results do not depend on ``n_jobs``; a diverging optimizer gives an
error or finite predictions, never NaN; ``ConvergenceWarning`` at ``max_iter``; the three
methods on both classifiers with the three priors; the heteroscedastic ensemble;
``data_fraction``; the inferred noise and the default number of draws; SWAG's Gaussian.
RMS exactness and SWAG's moments are in ``tests/test_optim_exact.py``.

Nearly every test here is deterministic: a convex problem whose optimum is known to solver
precision, an identity of the engine, or an easy problem solved with a wide margin for any
seed (checked over several seeds while writing them). The statistical tests say so, and
state the spread their tolerance was set against.
"""

from __future__ import annotations

import math
import platform
import re
import warnings

import numpy as np
import pytest
from scipy.special import expit
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.log_posterior import LogPosterior
from skbnn.methods import METHODS, SWAG, DeepEnsemble, Laplace, RandomizedMAP
from skbnn.methods._optim import MAX_RESTARTS, Settings, glorot_init, minibatch_epochs
from skbnn.model_selection import log_predictive_scorer
from skbnn.posterior import GaussianPosterior
from skbnn.priors import GaussianPrior

#: scipy's L-BFGS-B stops when the last step lowered the loss by less than ``ftol`` relative
#: to ``max(|f|, 1)`` (its default ``factr * eps``); the engine sets ``gtol = tol`` only, so
#: ``ftol`` is what ends a run with ``tol=1e-10``.
LBFGS_FTOL = 1e7 * np.finfo(float).eps


def _linear_data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = X @ np.array([1.0, -0.5, 0.25]) + 2.0 + 0.4 * rng.standard_normal(n)
    return X, y


def _logistic_data(n=60, seed=1):
    # overlapping classes, so the MAP is set by the data as much as by the prior
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    y = (rng.random(n) < expit(X @ np.array([1.5, -1.0]) + 0.3)).astype(int)
    return X, y


def _design(X):
    # theta of a network without hidden layer is [W (d x 1) row-major, b]
    return np.hstack([X, np.ones((len(X), 1))])


def _prior_var(d):
    # GaussianPrior(std=1, fan_in_scaling=True): weights N(0, 1/d), bias N(0, 1)
    return np.r_[np.full(d, 1.0 / d), 1.0]


def _linear_map(X, y, noise_std):
    """Closed-form MAP of Bayesian linear regression on the standardized target, with the
    per-row loss there and its Hessian (for the L-BFGS tolerance)."""
    z = (y - y.mean()) / y.std()
    phi, pv, tau, n = _design(X), _prior_var(X.shape[1]), 1.0 / noise_std**2, len(X)
    hess = (tau * phi.T @ phi + np.diag(1.0 / pv)) / n
    theta = np.linalg.solve(hess * n, tau * phi.T @ z)
    r = z - phi @ theta
    loglik = -0.5 * n * np.log(2 * np.pi / tau) - 0.5 * tau * r @ r
    logprior = -0.5 * np.sum(np.log(2 * np.pi * pv) + theta**2 / pv)
    return theta, -(loglik + logprior) / n, hess


def _logistic_map(X, y):
    """MAP of Bayesian logistic regression by Newton's method (quadratic convergence: 30
    iterations from 0 reach machine precision on this well-conditioned problem)."""
    phi, pv, n = _design(X), _prior_var(X.shape[1]), len(X)
    theta = np.zeros(phi.shape[1])
    for _ in range(30):
        p = expit(phi @ theta)
        grad = phi.T @ (y - p) - theta / pv
        hess = phi.T @ (phi * (p * (1 - p))[:, None]) + np.diag(1.0 / pv)
        theta = theta + np.linalg.solve(hess, grad)
    a = phi @ theta
    loglik = np.sum(y * a - np.logaddexp(0.0, a))
    logprior = -0.5 * np.sum(np.log(2 * np.pi * pv) + theta**2 / pv)
    assert np.max(np.abs(grad)) < 1e-12
    return theta, -(loglik + logprior) / n, hess / n


def _fit(est, X, y):
    """Fit, returning the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y)
    return [w for w in caught if issubclass(w.category, ConvergenceWarning)]


# --------------------------------------------------------------------------------------
# 1. The engine reaches the known MAP of convex problems
# --------------------------------------------------------------------------------------

SOLVERS = {
    "lbfgs": {"solver": "lbfgs", "tol": 1e-10},
    # full batch, and a cosine decay to 0 so the last steps are tiny; n_iter_no_change at
    # max_iter so the stopping rule cannot end a run early (it then warns at max_iter)
    "adam": {
        "solver": "adam",
        "early_stopping": False,
        "learning_rate": "cosine",
        "learning_rate_init": 0.05,
        "batch_size": 1000,
        "max_iter": 1000,
        "tol": 0.0,
        "n_iter_no_change": 1000,
    },
}


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("problem", ["linear", "logistic"])
def test_engine_reaches_the_known_map(problem, solver):
    # ~0.05 s each (0.5 s for the first, numba's cache load)
    method = DeepEnsemble(**SOLVERS[solver])
    if problem == "linear":
        X, y = _linear_data()
        est = BayesianMLPRegressor(
            hidden_layer_sizes=(), method=method, noise_std=0.5, n_samples=3, random_state=0
        )
        theta, loss, hess = _linear_map(X, y, 0.5)
    else:
        X, y = _logistic_data()
        # GaussianPrior(): the N(0, 1) of _logistic_map (the classifier's default is std 3)
        est = BayesianMLPClassifier(
            hidden_layer_sizes=(), method=method, prior=GaussianPrior(), n_samples=3,
            random_state=0,
        )  # fmt: skip
        theta, loss, hess = _logistic_map(X, y)
    _fit(est, X, y)  # Adam warns at max_iter by construction (see SOLVERS)
    thetas = est.posterior_.thetas
    assert thetas.shape == (3, theta.size)
    if solver == "lbfgs":
        # Solver precision, not statistics: L-BFGS-B stops once the last step lowered the
        # loss by less than ftol * max(|f|, 1); near the optimum f - f* = d' H d / 2, so
        # the distance d left is about sqrt(2 ftol max(|f*|, 1) / lambda_min(H)) (here
        # 5e-5 linear, 2e-4 logistic; observed 3e-6 and 4e-5).
        atol = math.sqrt(2 * LBFGS_FTOL * max(abs(loss), 1.0) / np.linalg.eigvalsh(hess)[0])
        assert est.diagnostics_["converged"].all()
    else:
        # Adam with the rate decayed to 0 ends within 1e-9 of the optimum (observed 3e-16
        # linear, 3e-9 logistic).
        atol = 1e-6
    # Either bound is well below what an error in the objective moves the MAP: a prior
    # variance or a noise precision off by 10 % moves it by 1e-3 (linear) and 3e-2
    # (logistic), so the test can fail.
    np.testing.assert_allclose(thetas, np.broadcast_to(theta, thetas.shape), rtol=0, atol=atol)
    # the reported loss is the per-row negative log posterior, normalizing constants
    # included; 1e-7 is 45 times L-BFGS's relative stopping change ftol
    np.testing.assert_allclose(est.diagnostics_["final_loss"], loss, rtol=1e-7)


# --------------------------------------------------------------------------------------
# 2. Early stopping
# --------------------------------------------------------------------------------------


def _overfit_data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (40, 1))
    return X, np.sin(2 * X[:, 0]) + 0.5 * rng.standard_normal(40)


@pytest.mark.statistical
def test_early_stopping_stops_and_reports_the_validation_curve(seed):
    # ~0.03 s. 20 tanh units on 30 training rows with noise_std 0.05 against a true 0.5
    # interpolate the noise, so the validation loss turns up within tens of epochs. When it
    # does is chance: over 200 seed offsets the last member stopped after 13-837 epochs
    # (median 69, 5 offsets above 400), none at the cap of 5000, which is six times
    # the latest stop seen. The rest is an identity of the rule, whatever the seed.
    X, y = _overfit_data(seed)
    n_change = 10
    method = DeepEnsemble(
        solver="adam",
        learning_rate_init=0.02,
        learning_rate="constant",
        max_iter=5000,
        tol=0.0,
        early_stopping=True,
        validation_fraction=0.25,
        n_iter_no_change=n_change,
    )
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(20,), method=method, noise_std=0.05, n_samples=3, random_state=seed
    )
    assert _fit(est, X, y) == []
    d = est.diagnostics_
    assert np.all(d["n_iter"] < 5000) and d["converged"].all()
    assert len(d["validation_loss_curve"]) == len(d["loss_curve"]) == 3
    for n_iter, val, train in zip(
        d["n_iter"], d["validation_loss_curve"], d["loss_curve"], strict=True
    ):
        assert len(val) == len(train) == n_iter
        assert np.all(np.isfinite(val))
        # with tol=0 a run stops n_iter_no_change + 1 epochs after its best validation loss
        assert int(np.argmin(val)) == n_iter - n_change - 2


@pytest.mark.statistical
def test_a_long_plateau_is_checked_after_each_call_of_several_epochs(seed):
    # the run above with a plateau of 200 epochs, as n_iter_no_change="auto" gives on a few
    # rows: an epoch of 30 rows is one step, a call of the epoch kernel takes 200 // 20 =
    # 10 of them (4096 // 30 would fit), and the rule is checked after each call. The stop
    # comes at the first check more than 200 epochs after the best, 21 checks after it,
    # and the latest best seen above (837 epochs) leaves the cap far off
    X, y = _overfit_data(seed)
    method = DeepEnsemble(solver="adam", learning_rate_init=0.02, learning_rate="constant",
                          max_iter=5000, tol=0.0, early_stopping=True,
                          validation_fraction=0.25, n_iter_no_change=200)  # fmt: skip
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(20,), method=method, noise_std=0.05, n_samples=3, random_state=seed
    )
    assert _fit(est, X, y) == []
    d = est.diagnostics_
    assert d["validation_every"] == 10 and d["n_iter_no_change"] == 200
    assert np.all(d["n_iter"] < 5000) and d["converged"].all()
    for n_iter, val, train in zip(
        d["n_iter"], d["validation_loss_curve"], d["loss_curve"], strict=True
    ):
        assert len(train) == n_iter == 10 * len(val)
        assert int(np.argmin(val)) == len(val) - 22


@pytest.mark.parametrize(
    "method, n_rows, plateau",
    [
        # 36 training rows (10 % held out) are 2 steps of 32 rows: 1000 epochs of them
        (DeepEnsemble(), 40, 1000),
        # 3,600 are 113 steps: 18 epochs, raised to 20
        (DeepEnsemble(), 4000, 20),
        # without held-out rows (a fixed noise): 250 rows, 8 steps
        (RandomizedMAP(), 250, 250),
        (DeepEnsemble(n_iter_no_change=7), 40, 7),
        (Laplace(), 40, 20),
    ],
    ids=["ensemble-40", "ensemble-4000", "rms-fixed-noise-250", "explicit", "laplace"],
)
def test_auto_plateau_is_the_epochs_of_2000_steps(method, n_rows, plateau):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_rows, 2))
    y = X[:, 0] + 0.1 * rng.standard_normal(n_rows)
    method.set_params(max_iter=1, solver="adam")
    noise = 0.1 if isinstance(method, RandomizedMAP) else None
    est = BayesianMLPRegressor(hidden_layer_sizes=(3,), method=method, noise_std=noise,
                               n_samples=2, random_state=0)  # fmt: skip
    _fit(est, X, y)
    assert est.diagnostics_["n_iter_no_change"] == plateau


def test_early_stopping_keeps_the_best_validation_parameters():
    # ~0.01 s; the engine itself, with validation rows we choose, so the parameters kept
    # can be scored on them independently
    X, y = _overfit_data()
    z = (y - y.mean()) / y.std()
    tau = 1.0 / 0.05**2
    target = LogPosterior(X, z, (20,), "tanh", "gaussian", noise="fixed", noise_precision=tau)
    train, val = np.arange(30), np.arange(30, 40)
    theta = glorot_init(target, np.random.default_rng(0))
    settings = Settings(
        solver="adam",
        learning_rate_init=0.02,
        batch_size=10,
        max_iter=1000,
        tol=0.0,
        early_stopping=True,
        n_iter_no_change=10,
    )
    member = minibatch_epochs(
        target, theta, train, val, settings, None, None, 1000, rng=np.random.default_rng(1)
    )
    assert member.converged and member.n_iter < 1000
    curve = np.asarray(member.validation_curve)
    # the last epoch is worse than the best, so restoring the best is observable
    assert curve[-1] > curve.min()
    held_out = LogPosterior(
        X[val], z[val], (20,), "tanh", "gaussian", noise="fixed", noise_precision=tau
    )
    loglik, _, _ = held_out.loglik_logprior(member.theta)
    np.testing.assert_allclose(-loglik / val.size, curve.min(), rtol=1e-12)


# --------------------------------------------------------------------------------------
# 3. Results do not depend on n_jobs
# --------------------------------------------------------------------------------------

DETERMINISM = {
    "ensemble-lbfgs": lambda: DeepEnsemble(solver="lbfgs", max_iter=50),
    "ensemble-adam": lambda: DeepEnsemble(
        solver="adam", max_iter=20, batch_size=10, data_fraction=0.8
    ),
    "rms": lambda: RandomizedMAP(max_iter=50),
    "swag": lambda: SWAG(
        n_members=3, max_iter=20, swa_epochs=5, rank=3, solver="adam", batch_size=10
    ),
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("name", DETERMINISM)
def test_results_do_not_depend_on_n_jobs(name):
    # ~0.05 s each; bit-identical, not close: each member's arithmetic is its own
    X, y = _linear_data()
    fits = [
        BayesianMLPRegressor(
            hidden_layer_sizes=(4,),
            method=DETERMINISM[name](),
            n_samples=4,
            random_state=3,
            n_jobs=n_jobs,
        ).fit(X, y)
        for n_jobs in (1, 2)
    ]
    a, b = (f.posterior_ for f in fits)
    assert np.array_equal(a.thetas, b.thetas)
    assert np.array_equal(fits[0].predict(X), fits[1].predict(X))
    if isinstance(a, GaussianPosterior):
        assert np.array_equal(a.mean, b.mean) and np.array_equal(a.var, b.var)
        assert np.array_equal(a.factor, b.factor)


# --------------------------------------------------------------------------------------
# 4. Divergence
# --------------------------------------------------------------------------------------


def test_sgd_that_must_diverge_raises_a_clear_error():
    # ~0.03 s. Full-batch SGD with Nesterov momentum on a quadratic loss is a linear
    # recursion, which diverges for certain when its iteration matrix has an eigenvalue
    # outside the unit circle: checked below for the smallest rate the engine tries
    # (1e3 / 10**MAX_RESTARTS = 10): its error grows more than tenfold per epoch, so it
    # overflows within ~310 of the 1000 epochs. Every attempt of every member overflows,
    # and the stopping rule cannot end a run first (n_iter_no_change = max_iter).
    X, y = _linear_data()
    _, _, hess = _linear_map(X, y, 0.5)
    mu, lam = 0.9, np.linalg.eigvalsh(hess)[-1]
    for lr in (1e3, 1e2, 1e1):
        # theta' = theta + mu v' - lr g, v' = mu v - lr g, g = lam theta (in the top
        # eigendirection, centred at the optimum)
        a = lr * lam
        step = np.array([[1 - a * (1 + mu), mu * mu], [-a, mu]])
        assert np.max(np.abs(np.linalg.eigvals(step))) > 10
    method = DeepEnsemble(
        solver="sgd", learning_rate_init=1e3, batch_size=40, max_iter=1000, n_iter_no_change=1000
    )
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(), method=method, noise_std=0.5, n_samples=3, random_state=0
    )
    fix = r"lower the learning rate, method=\w+\(.*learning_rate_init="
    with pytest.raises(ValueError, match="diverged.*" + fix):
        est.fit(X, y)
    assert not hasattr(est, "posterior_")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_adam_with_a_huge_rate_gives_finite_predictions(kind):
    # ~0.02 s each. Adam moves each coordinate by at most about learning_rate_init per step
    # (|m_hat| / sqrt(v_hat) is bounded), so 50 epochs of 4 steps at 1e3 leave the weights
    # below ~1e6 and the fixed-noise and Bernoulli losses finite: the fit must succeed,
    # whatever it is worth, and predict finite numbers.
    X, y = _linear_data()
    method = DeepEnsemble(solver="adam", learning_rate_init=1e3, batch_size=10, max_iter=50,
                          early_stopping=False, learning_rate="constant",
                          heteroscedastic=False, n_iter_no_change=20)  # fmt: skip
    if kind == "regressor":
        est = BayesianMLPRegressor(
            hidden_layer_sizes=(5,), method=method, noise_std=0.5, n_samples=3, random_state=0
        ).fit(X, y)
        mean, std = est.predict(X, return_std=True)
        assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std))
        assert np.all(np.isfinite(est.predict_interval(X)))
    else:
        est = BayesianMLPClassifier(
            hidden_layer_sizes=(5,), method=method, n_samples=3, random_state=0
        ).fit(X, y > 2)
        proba = est.predict_proba(X)
        assert np.all(np.isfinite(proba))
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # members whose loss climbed far above its best even at rate 10 are dropped, with a
    # warning; the survivors predict
    assert 1 <= est.diagnostics_["n_members"] <= 3


def test_a_member_whose_loss_overflows_is_restarted():
    # ~0.02 s. Adam's first step moves every coordinate by exactly +-learning_rate_init
    # (m_hat = g, v_hat = g^2), so the log noise precision jumps to +-1000: its exp
    # overflows to inf or underflows to 0, and the Gaussian log-likelihood's log(tau) is
    # non-finite at the next step. Every member restarts at 100, where exp(+-100) is
    # finite: the fit succeeds with finite predictions and says how many restarts it took.
    # A plateau of 20 epochs ends the run at that rate, as the scenario needs; a longer
    # one (the default's on 40 rows) runs it into overflow again
    X, y = _linear_data()
    method = DeepEnsemble(solver="adam", learning_rate_init=1e3, batch_size=10, max_iter=50,
                          early_stopping=False, learning_rate="constant",
                          heteroscedastic=False, n_iter_no_change=20)  # fmt: skip
    est = BayesianMLPRegressor(hidden_layer_sizes=(), method=method, n_samples=3, random_state=0)
    _fit(est, X, y)
    assert np.all(est.diagnostics_["n_restarts"] >= 1)
    assert np.all(np.isfinite(est.predict(X))) and np.isfinite(est.noise_std_)


def test_a_restarted_member_that_converges_does_not_warn():
    # deterministic (every member's first step overflows, above): the restart at a 10x
    # smaller rate recovers, so the fit is what was asked for and says so only in its
    # diagnostics; a warning is for results that are materially affected
    X, y = _linear_data()
    method = DeepEnsemble(solver="adam", learning_rate_init=1e3, batch_size=10, max_iter=50,
                          early_stopping=False, learning_rate="constant",
                          heteroscedastic=False, n_iter_no_change=20)  # fmt: skip
    est = BayesianMLPRegressor(hidden_layer_sizes=(), method=method, n_samples=3, random_state=0)
    caught = [str(w.message) for w in _fit(est, X, y)]
    assert np.all(est.diagnostics_["n_restarts"] >= 1)
    # here one member diverges at every rate and is dropped, which must be said
    dropped = est.diagnostics_["n_dropped"]
    assert len([m for m in caught if "diverged" in m]) == (dropped > 0)
    assert all("were dropped" in m for m in caught if "diverged" in m)
    # the rate it prints is below every rate the restarts tried; followed, no member is lost
    (message,) = [m for m in caught if "were dropped" in m]
    rate = float(re.search(r"learning_rate_init=([0-9.e+-]+)[,)]", message).group(1))
    assert rate < 1e3 / 10**MAX_RESTARTS
    est.set_params(method__learning_rate_init=rate)
    assert not [str(w) for w in _fit(est, X, y) if "diverged" in str(w)]
    assert est.diagnostics_["n_dropped"] == 0


def test_sgd_whose_loss_explodes_warns_or_raises():
    # Minibatch SGD at rate 1 on this linear model multiplies the error by ~10 per step
    # (see the eigenvalue check above), but 12 epochs of 4 steps stay below overflow.
    X, y = _linear_data()
    method = DeepEnsemble(solver="sgd", learning_rate_init=1.0, batch_size=10, max_iter=200)
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(), method=method, noise_std=0.5, n_samples=3, random_state=0
    )
    try:
        caught = _fit(est, X, y)
    except ValueError as exc:
        assert "learning_rate_init" in str(exc)
        return
    # never NaN, and either a warning or a sane fit: members restarted at a lower rate
    # whose loss then settled near the least-squares fit's (about 0.45 per row here)
    assert np.all(np.isfinite(est.predict(X)))
    if not caught:
        assert np.all(est.diagnostics_["n_restarts"] >= 1)
        assert np.all(est.diagnostics_["final_loss"] < 1.0), est.diagnostics_["final_loss"]


# --------------------------------------------------------------------------------------
# 5. ConvergenceWarning at max_iter
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["adam", "sgd", "lbfgs"])
def test_convergence_warning_at_max_iter(solver):
    # ~0.01 s each. Adam and SGD: the stopping rule needs more than n_iter_no_change (10)
    # epochs, so 2 epochs cannot meet it. L-BFGS: 2 iterations from a random start of a
    # 5-unit network are far from a gradient of 1e-10 or a relative change of 2e-9.
    X, y = _linear_data()
    method = DeepEnsemble(solver=solver, max_iter=2, tol=1e-10)
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(5,), method=method, noise_std=0.5, n_samples=2, random_state=0
    )
    with pytest.warns(ConvergenceWarning, match="2 of 2 members did not converge.*max_iter=2"):
        est.fit(X, y)
    assert not est.diagnostics_["converged"].any()
    assert np.all(est.diagnostics_["n_iter"] <= 2)


# --------------------------------------------------------------------------------------
# 6. Classifiers, with every prior
# --------------------------------------------------------------------------------------


def _classification(kind, seed=0):
    if kind == "binary":
        X, y = load_breast_cancer(return_X_y=True)
        X, y = X[:200], y[:200]
    else:
        X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    idx = np.random.default_rng(seed).permutation(len(X))
    half = len(X) // 2
    return X[idx[:half]], y[idx[:half]], X[idx[half:]], y[idx[half:]]


CLASSIFIER_METHODS = {
    "ensemble": lambda: DeepEnsemble(max_iter=200),
    "rms": lambda: RandomizedMAP(max_iter=200),
    "swag": lambda: SWAG(max_iter=200, swa_epochs=10, rank=5),
}


@pytest.mark.parametrize("prior", ["gaussian", "logistic", "hierarchical"])
@pytest.mark.parametrize("kind", ["binary", "multiclass"])
@pytest.mark.parametrize("name", CLASSIFIER_METHODS)
@pytest.mark.statistical
def test_classifier(name, kind, prior, seed):
    # ~0.02 s each. Held-out accuracy depends on the split and the initialization: over
    # 200 seed offsets of these 18 cases (3600 fits) it was 0.954 +- 0.021, lowest 0.787
    # (one unlucky iris split). 0.7 is 12 sd below the mean and 0.09 below the lowest seen,
    # so a false alarm is rarer than 1 in 3600 fits, while a classifier that learned
    # nothing scores at most the majority class's share of the held-out half (0.44 iris,
    # 0.60 breast-cancer, the largest over those 200 splits).
    X, y, X_test, y_test = _classification(kind, seed)
    n_classes = len(np.unique(y))
    est = BayesianMLPClassifier(
        hidden_layer_sizes=(5,),
        method=CLASSIFIER_METHODS[name](),
        prior=prior,
        n_samples=3 if name != "swag" else 20,
        random_state=seed,
    )
    est.fit(X, y)
    proba = est.predict_proba(X_test)
    assert proba.shape == (len(X_test), n_classes)
    assert np.all(proba >= 0) and np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert est.score(X_test, y_test) > 0.7
    # a softmax over 3 classes, one logit for 2
    assert int(est.predictive_.layout.sizes[-1]) == (1 if n_classes == 2 else n_classes)


# --------------------------------------------------------------------------------------
# 7. Heteroscedastic deep ensembles
# --------------------------------------------------------------------------------------


@pytest.mark.statistical
def test_heteroscedastic_aleatoric_std_follows_the_noise(seed):
    # ~0.05 s. The noise sd is 0.1 + x on [0, 1]: 0.15 at x = 0.05, 1.05 at x = 0.95, a
    # ratio of 7. The variance head is a MAP fit to the squared residuals, so each end's sd
    # comes from the ~tens of rows near it (relative sd ~0.1 - 0.15 each) and is shrunk
    # toward the middle by the network's smoothness: over 40 seeds the ratio came out 3.5 to
    # 5.8, its log with mean 1.51 and sd 0.12. Asking for > 2 (log 0.69) is 6.6 sd below
    # that mean: false alarm ~1e-10 for a normal tail, < 1e-6 even for a heavier one.
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (200, 1))
    y = 2 * X[:, 0] + (0.1 + X[:, 0]) * rng.standard_normal(200)
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(5,),
        method=DeepEnsemble(heteroscedastic=True),
        n_samples=3,
        random_state=seed,
    ).fit(X, y)
    ends = np.array([[0.05], [0.95]])
    aleatoric = est.predict_std(ends, kind="aleatoric")
    assert aleatoric[1] > 2 * aleatoric[0] > 0
    assert est.posterior_.heteroscedastic
    # total >= aleatoric and >= epistemic, all finite
    total, epistemic = est.predict_std(ends), est.predict_std(ends, kind="epistemic")
    assert np.all(total >= aleatoric) and np.all(total >= epistemic)
    assert np.all(np.isfinite(total))
    lower, upper = est.predict_interval(ends, coverage=0.9)
    assert np.all(np.isfinite(lower)) and np.all(lower < upper)
    # the wider noise at x = 0.95 gives the wider interval
    assert upper[1] - lower[1] > upper[0] - lower[0]
    draws = est.sample_y(ends, n_samples=7, random_state=seed)
    assert draws.shape == (2, 7) and np.all(np.isfinite(draws))
    assert np.isfinite(log_predictive_scorer(est, X, y))
    assert np.isfinite(est.noise_std_) and est.noise_std_ > 0


def test_heteroscedastic_needs_noise_std_none():
    X, y = _linear_data()
    est = BayesianMLPRegressor(
        hidden_layer_sizes=(2,),
        method=DeepEnsemble(heteroscedastic=True),
        noise_std=1.0,
        n_samples=2,
        random_state=0,
    )
    with pytest.raises(ValueError, match="noise_std must be None"):
        est.fit(X, y)


def test_heteroscedastic_classifier_is_an_error():
    X, y = _linear_data()
    est = BayesianMLPClassifier(
        hidden_layer_sizes=(2,),
        method=DeepEnsemble(heteroscedastic=True),
        n_samples=2,
        random_state=0,
    )
    with pytest.raises(ValueError, match="heteroscedastic=True applies to regression only"):
        est.fit(X, y > 2)


# --------------------------------------------------------------------------------------
# 8. data_fraction
# --------------------------------------------------------------------------------------


def test_data_fraction_gives_each_member_its_own_rows():
    # ~0.03 s. On a convex problem L-BFGS takes every member to the one MAP whatever its
    # start (within solver precision, ~1e-4: see test_engine_reaches_the_known_map); with
    # half the rows each member reaches the MAP of its own half, which differs from the
    # others' by about a posterior sd (~0.1 here), a thousand times more.
    X, y = _linear_data()

    def spread(fraction):
        method = DeepEnsemble(solver="lbfgs", tol=1e-10, data_fraction=fraction)
        est = BayesianMLPRegressor(
            hidden_layer_sizes=(), method=method, noise_std=0.5, n_samples=4, random_state=0
        ).fit(X, y)
        t = est.posterior_.thetas
        gaps = [np.max(np.abs(t[i] - t[j])) for i in range(4) for j in range(i)]
        return min(gaps), max(gaps)

    assert spread(1.0)[1] < 1e-3
    assert spread(0.5)[0] > 1e-2


@pytest.mark.parametrize("fraction, expected", [(0.5, 20), (0.01, 2), (1.0, 40)])
def test_member_rows(fraction, expected):
    # the rows a member trains on: ceil(fraction * n), at least 2, distinct, without and
    # with a validation split
    X, y = _linear_data()
    target = LogPosterior(X, y, (), "tanh", "gaussian")
    method = DeepEnsemble(validation_fraction=0.25)
    train, val = method._rows(target, np.random.default_rng(0), fraction, False)
    assert val is None and train.size == expected and np.unique(train).size == expected
    assert train.min() >= 0 and train.max() < 40
    if expected >= 4:
        train, val = method._rows(target, np.random.default_rng(0), fraction, True)
        assert val.size == round(0.25 * expected) and train.size + val.size == expected
        assert np.intersect1d(train, val).size == 0


# --------------------------------------------------------------------------------------
# 9. Inferred noise and default numbers of draws
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ensemble", "rms", "swag"])
def test_inferred_noise_is_the_map_in_original_units(name):
    # ~0.02 s each. With noise_std=None the noise precision is optimized with the weights
    # under its Gamma(1, 1e-3) prior, parametrized by its log (Jacobian +log tau), so at
    # the joint MAP sigma^2 = (SSR + 2e-3) / (n + 2) on the standardized scale: with a
    # linear model and n = 200 rows, SSR is the least-squares one up to the prior's small
    # shrinkage, and sigma is sqrt(n / (n + 2)) times the residual sd (0.995). A 1 % band
    # holds that and SWAG's spread of log tau around it (~sqrt(2 / n) = 0.1, which moves
    # the average sd by ~0.1 %); a report on the standardized scale would be off by the
    # target's sd (~400 here).
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 2))
    y = 100 * (X @ np.array([1.0, -2.0]) + 3 + 2 * rng.standard_normal(200))
    phi = _design(X)
    residual = y - phi @ np.linalg.lstsq(phi, y, rcond=None)[0]
    residual_sd = np.sqrt(np.mean(residual**2))
    # at the MAP: L-BFGS on all rows, and one noise for every row
    method = METHODS[name](solver="lbfgs")
    if name == "ensemble":
        method.set_params(heteroscedastic=False)
    est = BayesianMLPRegressor(hidden_layer_sizes=(), method=method, random_state=0).fit(X, y)
    assert isinstance(est.noise_std_, float) and est.noise_std_ > 0
    ratio = est.noise_std_ / residual_sd / math.sqrt(200 / 202)
    assert abs(ratio - 1) < 0.01


@pytest.mark.parametrize("name, expected", [("ensemble", 5), ("rms", 10), ("swag", 100)])
def test_default_number_of_draws(name, expected):
    X, y = _linear_data()
    est = BayesianMLPRegressor(hidden_layer_sizes=(2,), method=name, random_state=0)
    est.fit(X, y)
    assert est.posterior_.thetas.shape[0] == expected
    assert est.posterior_.n_draws == expected


# --------------------------------------------------------------------------------------
# 10. SWAG's Gaussian
# --------------------------------------------------------------------------------------


def _swag(**params):
    X, y = _linear_data()
    method = SWAG(**{"max_iter": 50, "swa_epochs": 6, "rank": 4, **params})
    return BayesianMLPRegressor(
        hidden_layer_sizes=(3,), method=method, n_samples=30, random_state=0
    ).fit(X, y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_swag_posterior_is_a_gaussian():
    est = _swag()
    post = est.posterior_
    assert isinstance(post, GaussianPosterior)
    p = post.thetas.shape[1]
    assert post.n_components == 1 and post.mean.shape == (1, p) and post.var.shape == (1, p)
    # 6 epochs with one snapshot each, the last 4 kept
    assert post.factor.shape == (1, 4, p)
    assert est.diagnostics_["n_snapshots"].tolist() == [6]
    assert post.n_draws == 30 and np.all(np.isfinite(post.thetas))
    assert np.all(post.var >= 0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_swag_diag_has_no_factor():
    post = _swag(covariance="diag").posterior_
    assert post.factor is None
    assert np.all(post.var >= 0) and np.all(np.isfinite(post.thetas))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_multiswag_has_one_component_per_member():
    post = _swag(n_members=2).posterior_
    assert post.n_components == 2 and post.factor.shape[0] == 2
    # independent runs from independent starts end at different places
    assert not np.allclose(post.mean[0], post.mean[1])
    # draw i comes from component i % 2
    draws = post.sample(4, np.random.default_rng(0))
    assert draws.shape == (4, post.mean.shape[1])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("covariance", ["lowrank", "diag"])
def test_swag_drawing_never_changes_the_moments(covariance):
    post = _swag(covariance=covariance, n_members=2).posterior_
    before = (
        post.mean.copy(),
        post.var.copy(),
        None if post.factor is None else post.factor.copy(),
    )
    thetas = post.thetas.copy()
    rng = np.random.default_rng(0)
    first = post.sample(50, rng)
    second = post.sample(50, rng)
    assert not np.array_equal(first, second)
    assert np.array_equal(post.mean, before[0]) and np.array_equal(post.var, before[1])
    if before[2] is None:
        assert post.factor is None
    else:
        assert np.array_equal(post.factor, before[2])
    # the stored draws (what predictions use) stay as they were
    assert np.array_equal(post.thetas, thetas)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_swag_progress_bar(capsys):
    X, y = _linear_data()
    method = SWAG(solver="adam", max_iter=5, swa_epochs=3, rank=2, batch_size=10)
    BayesianMLPRegressor(
        hidden_layer_sizes=(2,), method=method, n_samples=10, random_state=0, verbose=1
    ).fit(X, y)
    err = capsys.readouterr().err
    # one member: 5 pre-training epochs (fewer than n_iter_no_change, so all run) and 3
    # collection epochs
    assert re.search(r"SWAG\b.*\b1 member", err) and "8/8" in err


def test_adam_sends_weights_without_a_data_gradient_to_zero_not_to_subnormals():
    # a weight whose only gradient is a weak prior's (an input that is zero on every row,
    # many rows): Adam's step, lr m1 / (sqrt(m2) + eps), decays it geometrically once
    # sqrt(m2) is below eps. Without the flush, it and its first moment reach the
    # subnormal range at about step 13,100 (where products run a hundred times slower);
    # with it the first moment turns zero below FLUSH, and the weight stops, tiny but
    # normal
    from numba import njit

    from skbnn.kernels import optim as kopt

    @njit
    def decay(steps, c):
        theta, g, m1, m2 = np.full(1, 0.05), np.zeros(1), np.zeros(1), np.zeros(1)
        tiny = 2.2250738585072014e-308
        subnormal = 0
        for t in range(1, steps + 1):
            g[0] = c * theta[0]
            step = 1e-3 / (1.0 - 0.9**t)
            kopt._adam_range(theta, g, m1, m2, 0, 1, 1.0, 0.9, 0.999, step,
                             1.0 / math.sqrt(1.0 - 0.999**t), 1e-8)  # fmt: skip
            for v in (theta[0], m1[0], m2[0]):
                if v != 0.0 and abs(v) < tiny:
                    subnormal += 1
        return subnormal, theta[0], m1[0]

    for c in (1e-5, 1e-6):
        subnormal, theta, m1 = decay(20_000, c)
        assert subnormal == 0
        assert abs(theta) < 1e-100 and m1 == 0.0


def test_adam_flush_keeps_nan_and_inf():
    from skbnn.kernels import optim as kopt
    from skbnn.kernels._compile import call

    theta = np.array([1e-130, 1.0, 1.0, 0.5])
    g = np.array([0.0, np.nan, np.inf, 1.0])
    m1, m2 = np.zeros(4), np.zeros(4)
    call(kopt._adam_range, theta, g, m1, m2, 0, 4, 1.0, 0.9, 0.999, 1e-3, 1.0, 1e-8)
    assert theta[0] == 0.0 and m1[0] == 0.0 and m2[0] == 0.0
    assert np.isnan(theta[1]) and np.isnan(m1[1])
    assert not np.isfinite(theta[2])
    assert 0.49 < theta[3] < 0.5


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 assembly")
def test_adam_loop_is_vectorized():
    # Adam's loop runs over every parameter at every step (1.7 million for LBBNN's MNIST
    # network): written over theta[i] for i in range(lo, hi), numba's wrap of negative
    # indices kept it scalar, one division at a time. Compiled afresh (the cached kernel
    # has no assembly to inspect), its loop must divide packed doubles
    from numba import njit, types

    from skbnn.kernels import optim as kopt

    arr = types.float64[::1]
    sig = (arr, arr, arr, arr, types.int64, types.int64) + (types.float64,) * 6
    kernel = njit(sig, error_model="numpy")(kopt._adam_range.py_func)
    assert re.search(r"\bv?divpd\b", kernel.inspect_asm(sig))
