"""Chains from several optima (``n_modes``): where they start, how the modes are weighed,
and convergence judged within each mode."""

import numpy as np
import pytest

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.layout import NetworkLayout
from skbnn.log_posterior import LogPosterior
from skbnn.methods import HMC, MALA, MAMS, MCLMC, NUTS
from skbnn.methods._modes import loo_pointwise, stacking_objective, weigh_modes
from skbnn.methods._records import ChainDiagnostics, ModeFigures


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


def _fit(method, n_samples=80, random_state=0, n_jobs=1, **kw):
    X, y = _data()
    return BayesianMLPRegressor(
        hidden_layer_sizes=(4,), method=method, n_samples=n_samples,
        random_state=random_state, n_jobs=n_jobs, **kw,
    ).fit(X, y)  # fmt: skip


def _mode_diag(mcse=0.02, across=1.6, chains=4, n_modes=2, draws=250):
    """Diagnostics of a run whose modes disagree by R-hat ``across``, each of whose
    modes estimates its predictive mean (sd 1) with Monte Carlo error ``mcse`` (a number,
    or one per mode)."""
    mode = {
        "rhat_loglik": 1.01,
        "rhat_outputs": np.full((5, 1), 1.01),
        "ess_bulk_loglik": 300.0,
        "ess_bulk_outputs": np.full((5, 1), 300.0),
    }
    shape = (n_modes, 5, 1)
    return ChainDiagnostics.from_dict(
        {
            "n_chains": chains,
            "n_draws_per_chain": draws,
            "rhat_loglik": across,
            "rhat_outputs": np.full((5, 1), across),
            "ess_bulk_loglik": 20.0,
            "divergences": 0,
            "mean_tree_depth": np.full(chains, 3.0),
            "max_tree_depth_hits": np.zeros(chains),
            "modes": [dict(mode) for _ in range(n_modes)],
            # a predictive density of 1 at one point, its draws' of variance 1 in every
            # mode, as many effective ones as give ``mcse``
            "predictive_modes": {
                "mean": np.zeros(shape),
                "mean_var": np.ones(shape),
                "mean_ess": np.ones(shape),
                "density": np.ones((*shape, 1)),
                "density_var": np.ones((*shape, 1)),
                "density_ess": np.broadcast_to(np.reshape(mcse, (-1, 1, 1)) ** -2.0, shape).copy(),
                "proposal": np.ones((5, 1, 1)),
            },
        }
    )


def test_modes_that_differ_do_not_warn():
    # the modes' disagreement is what a network posterior is, not a failure
    assert NUTS(n_modes=2)._convergence_message(_mode_diag(across=1.6)) is None


def test_a_coarse_mode_warns_with_a_fix_that_runs():
    # equal weights: the mixture's error is sqrt(0.5**2 * 0.3**2 + 0.5**2 * 0.02**2)
    msg = NUTS(n_modes=2)._convergence_message(_mode_diag(mcse=[0.3, 0.02]))
    assert "Monte Carlo error of the predictive up to 0.150 of its sd" in msg
    assert "R-hat of the log-likelihood within modes 1.010" in msg
    assert "n_samples=" in msg
    # tempering joins modes: no advice for chains in separate modes
    assert "n_temperatures" not in msg


def test_a_mode_without_weight_adds_no_error():
    # a mode that stacking all but drops hardly moves the predictive: its coarse draws
    # are no reason to warn, while the same draws in a mode that carries weight are
    diag = _mode_diag(mcse=[0.02, 1.0])
    diag.mode_weights = np.array([0.99, 0.01])
    assert NUTS(n_modes=2)._convergence_message(diag) is None
    diag.mode_weights = np.array([0.8, 0.2])
    assert "up to 0.201 of its sd" in NUTS(n_modes=2)._convergence_message(diag)
    # a mode of weight 0 whose chains were too short to judge adds nothing either
    diag = _mode_diag(mcse=[0.02, np.nan])
    diag.mode_weights = np.array([1.0, 0.0])
    assert NUTS(n_modes=2)._convergence_message(diag) is None


def test_the_errors_of_many_modes_average_out():
    # 25 equal modes, each as coarse: the mixture's error is each one's over sqrt(25)
    kw = {"n_modes": 25, "chains": 25}
    assert NUTS(n_modes=25, n_chains=25)._convergence_message(_mode_diag(0.45, **kw)) is None
    msg = NUTS(n_modes=25, n_chains=25)._convergence_message(_mode_diag(0.55, **kw))
    assert "up to 0.110 of its sd" in msg


def test_more_modes_than_chains_is_an_error_whose_fix_runs():
    with pytest.raises(
        ValueError, match=r"method=NUTS\(n_chains=6, n_modes=6, n_warmup=20\)"
    ) as info:
        _fit(NUTS(n_modes=6, n_warmup=20))
    assert "one chain per mode" in str(info.value)
    fix = NUTS(n_modes=6, n_warmup=20, n_chains=6)
    assert len(_fit(fix, n_samples=60).diagnostics_["modes"]) == 6


@pytest.mark.parametrize("how", ["equal", "stacking"])
def test_diagnostics_list_the_modes_and_their_weights(how):
    reg = _fit(NUTS(n_modes=2, n_chains=4, n_warmup=60, mode_weights=how))
    diag = reg.diagnostics_
    assert diag["n_modes"] == 2 and diag["mode_weighting"] == how
    np.testing.assert_array_equal(diag["mode_of_chain"], [0, 1, 0, 1])
    modes = diag["modes"]
    assert [list(m["chains"]) for m in modes] == [[0, 2], [1, 3]]
    for key in ("weight", "rhat_loglik", "ess_bulk_loglik", "divergences", "elpd_loo",
                "khat_max"):  # fmt: skip
        assert all(key in m for m in modes), key
    w = diag["mode_weights"]
    assert w.shape == (2,) and np.isclose(w.sum(), 1.0) and np.all(w >= 0)
    if how == "equal":
        np.testing.assert_allclose(w, 0.5)
    # each mode's weight spread evenly over its draws, in chain order
    pw = reg.posterior_.normalized_weights().reshape(4, -1)
    for c, m in enumerate(diag["mode_of_chain"]):
        np.testing.assert_allclose(pw[c], w[m] / pw[c].size / 2)
    # the warning reads the modes: the judged R-hat is the worst within any mode
    assert diag["rhat_loglik_within_modes"] == max(m["rhat_loglik"] for m in modes)


def test_chains_of_a_mode_start_at_its_optimum():
    # HMC too: the whole family shares the driver
    reg = _fit(HMC(n_modes=2, n_chains=4, n_warmup=0), n_samples=4)
    first = reg.posterior_.thetas.reshape(4, 1, -1)[:, 0]
    # one iteration from the same start stays near it; the two modes' starts differ
    assert np.linalg.norm(first[0] - first[2]) < np.linalg.norm(first[0] - first[1])
    assert reg.diagnostics_["init_grad_evals"] > 0


@pytest.mark.parametrize(
    "method",
    [MALA(n_modes=2, n_warmup=40, thin=1), MCLMC(n_modes=2, n_warmup=100, thin=1),
     MAMS(n_modes=2, n_warmup=40)],
    ids=["mala", "mclmc", "mams"],
)  # fmt: skip
def test_every_sampler_of_the_family_samples_modes(method):
    diag = _fit(method, n_samples=40).diagnostics_
    assert len(diag["modes"]) == 2 and np.isclose(diag["mode_weights"].sum(), 1.0)
    assert diag["init_grad_evals"] > 0


def test_modes_do_not_depend_on_n_jobs():
    method = NUTS(n_modes=2, n_chains=2, n_warmup=40)
    a = _fit(method, n_samples=40, n_jobs=1)
    b = _fit(method, n_samples=40, n_jobs=2)
    np.testing.assert_array_equal(a.posterior_.thetas, b.posterior_.thetas)
    np.testing.assert_array_equal(a.posterior_.weights, b.posterior_.weights)


def test_classifier_modes():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    clf = BayesianMLPClassifier(
        hidden_layer_sizes=(3,), method=NUTS(n_modes=2, n_warmup=40), n_samples=40,
        random_state=0,
    ).fit(X, y)  # fmt: skip
    assert np.isclose(clf.diagnostics_["mode_weights"].sum(), 1.0)
    p = clf.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


def test_stacking_drops_a_mode_that_predicts_badly():
    # Two sets of draws of a linear model: one around the least-squares fit, one around
    # a fit with the wrong signs. Nearly every row is predicted far better by the first,
    # so stacking gives the second a small weight (the few rows it predicts better keep
    # it off the vertex), the maximizer of the leave-one-out score; equal weights keep
    # half on it.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 2))
    y = X @ np.array([1.0, -1.0]) + 0.3 * rng.standard_normal(80)
    target = LogPosterior(X, y, (), "identity", "gaussian", noise_precision=1 / 0.09)
    good = np.linalg.lstsq(np.c_[X, np.ones(80)], y, rcond=None)[0]
    bad = good * np.array([-1.0, -1.0, 1.0])
    draws = np.vstack([good + 0.01 * rng.standard_normal((50, 3)),
                       bad + 0.01 * rng.standard_normal((50, 3))])  # fmt: skip
    mode_of_draw = np.repeat([0, 1], 50)
    diag = ChainDiagnostics(modes=[ModeFigures() for _ in range(2)])
    w = weigh_modes(target, draws, None, mode_of_draw, "equal", diag)
    np.testing.assert_allclose(diag.mode_weights, [0.5, 0.5])
    np.testing.assert_allclose(w.sum(), 1.0)
    w = weigh_modes(target, draws, None, mode_of_draw, "stacking", diag)
    np.testing.assert_allclose(w.sum(), 1.0)
    stacked = diag.mode_weights
    assert stacked[1] < 0.1
    lpd = np.column_stack([loo_pointwise(target.pointwise_loglik(draws[mode_of_draw == m]))[0]
                           for m in range(2)])  # fmt: skip
    grid = np.linspace(0, 1, 2001)
    best = max(stacking_objective(lpd, [1 - g, g]) for g in grid)
    assert stacking_objective(lpd, stacked) >= best - 1e-6
    assert diag.modes[0].elpd_loo > diag.modes[1].elpd_loo


def test_pointwise_loglik_sums_to_the_kernels():
    # what PSIS and stacking read is the likelihood the samplers explore, row by row
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    for likelihood, Y in (
        ("gaussian", rng.standard_normal(30)),
        ("bernoulli", rng.integers(0, 2, 30).astype(float)),
        ("categorical", np.eye(3)[rng.integers(0, 3, 30)]),
    ):
        target = LogPosterior(X, Y, (4,), "tanh", likelihood, noise_precision=2.0)
        thetas = target.sample_prior(rng, 5)
        loglik, _ = target.loglik_batch(thetas)
        np.testing.assert_allclose(target.pointwise_loglik(thetas).sum(axis=1), loglik)


def test_modes_start_at_optima_not_on_their_slopes():
    # a mode's start is trained as an ensemble member is, to its stopping rule: from the
    # same initialization it reaches a log density at least the short init="map" start's
    from skbnn.methods._starts import map_starts

    X, y = _data()
    target = LogPosterior(X, y, (8,), "tanh", "gaussian", noise_precision=100.0)
    seeds = np.random.SeedSequence(0).spawn(3)
    short, n_short = map_starts(target, seeds, 1)
    optima, n_optima = map_starts(target, seeds, 1, converged=True)
    assert n_optima > n_short
    for a, b in zip(short, optima, strict=True):
        assert target.logp(b) >= target.logp(a) - 1e-6 * abs(target.logp(a))


# the network of _fit on _data: 2 inputs, 4 hidden units, 1 output
_N_PARAMS = NetworkLayout((2, 4, 1)).n_params


def test_array_init_starts_each_chain_at_its_row():
    # one transition from a start stays near it: chains 0 and 2 share row a, 1 and 3 row b
    p = _N_PARAMS
    a = np.random.default_rng(1).normal(0.0, 0.3, p)
    starts = np.stack([a, a + 2.0, a, a + 2.0])
    reg = _fit(HMC(n_chains=4, n_warmup=0, init=starts), n_samples=4)
    first = reg.posterior_.thetas.reshape(4, 1, -1)[:, 0]
    step = np.linalg.norm(first - starts, axis=1)
    assert np.all(step < 0.25 * np.linalg.norm(starts[1] - starts[0]))
    assert reg.diagnostics_["init"] == "array" and reg.diagnostics_["init_grad_evals"] == 0


def test_array_init_replaces_the_optima_of_modes():
    p = _N_PARAMS
    a = np.random.default_rng(2).normal(0.0, 0.3, p)
    reg = _fit(NUTS(n_modes=2, n_chains=4, n_warmup=20, init=[a, a + 2.0]), n_samples=40)
    diag = reg.diagnostics_
    # one row per mode: no optimum trained, chains 0 and 2 in the first row's mode
    assert diag["init_grad_evals"] == 0 and len(diag["modes"]) == 2
    assert list(diag["mode_of_chain"]) == [0, 1, 0, 1]


@pytest.mark.parametrize(
    "init, message",
    [("shape", "n_params="), ("rows", "3 starts for n_chains=4 and n_modes=1"), ("nan", "finite")],
)
def test_array_init_is_checked_against_the_network(init, message):
    p = _N_PARAMS
    bad = {"shape": np.zeros((4, p + 1)), "rows": np.zeros((3, p)),
           "nan": np.full(p, np.nan)}[init]  # fmt: skip
    with pytest.raises(ValueError, match=message):
        _fit(NUTS(n_chains=4, n_warmup=10, init=bad), n_samples=8)


def test_array_init_clones_and_names_itself_in_a_fix():
    from sklearn.base import clone

    starts = np.zeros((2, 5))
    est = clone(BayesianMLPRegressor(method=NUTS(n_chains=2, init=starts)))
    np.testing.assert_array_equal(est.method.init, starts)
    fix = NUTS(n_chains=2, init=starts)._fix(target_accept=0.9)
    assert fix == "method=NUTS(init=..., n_chains=2, target_accept=0.9)"


def test_a_numpy_scalar_knob_is_written_as_plain_code_in_a_fix():
    # NumPy 2 prints np.float64(0.5), which runs only where NumPy is imported as np
    fix = NUTS(target_accept=np.float64(0.7), n_chains=np.int64(2))._fix(max_tree_depth=12)
    assert fix == "method=NUTS(max_tree_depth=12, n_chains=2, target_accept=0.7)"


def _stage_target():
    X, y = _data(40)
    return LogPosterior(X, y, (4,), "tanh", "gaussian", noise_precision=100.0)


@pytest.mark.filterwarnings("ignore::skbnn.exceptions.ConvergenceWarning")
def test_sampler_init_starts_each_chain_where_its_chain_ended():
    # NUTS(init=MCLMC(...)) is MCLMC run on a seed of its own (spawned after the chains',
    # as init="map"'s), then NUTS from each MCLMC chain's last position: bit for bit
    target = _stage_target()
    explore = MCLMC(n_modes=2, n_chains=2, n_warmup=60, thin=2)
    nuts = {"n_modes": 2, "n_chains": 2, "n_warmup": 20}
    both = NUTS(**nuts, init=explore).run(target, 20, 0, 1, 0)

    root = np.random.SeedSequence(0)
    root.spawn(2)  # the NUTS chains' seeds
    first = MCLMC(**explore.get_params()).run(target, 20, root.spawn(1)[0], 1, 0)
    ends = first.posterior.thetas.reshape(2, -1, target.n_params)[:, -1]
    by_hand = NUTS(**nuts, init=ends).run(target, 20, 0, 1, 0)
    np.testing.assert_array_equal(both.posterior.thetas, by_hand.posterior.thetas)

    diag = both.diagnostics
    assert diag.init == "mclmc" and by_hand.diagnostics.init == "array"
    # the first stage's cost, its own optima included, is the second's init cost
    assert (
        diag.init_grad_evals == first.diagnostics.n_grad_evals + first.diagnostics.init_grad_evals
    )
    assert diag.init_time > 0


@pytest.mark.parametrize(
    "outer, stage, message",
    [
        ({"heteroscedastic": True}, {}, "heteroscedastic=False differs"),
        ({"n_chains": 4}, {"n_chains": 3}, "give init n_chains=4"),
        ({"n_chains": 4, "n_modes": 2}, {"n_chains": 4, "n_modes": 4}, "the same n_modes"),
        ({}, {"n_warmup": -1}, "n_warmup"),
    ],
)
def test_sampler_init_is_checked_before_either_runs(outer, stage, message):
    target = _stage_target()
    with pytest.raises(ValueError, match=message):
        NUTS(**{"n_chains": 2, **outer}, init=MCLMC(**{"n_chains": 2, **stage})).run(
            target, 8, 0, 1, 0
        )


def test_sampler_init_is_a_nested_parameter():
    from sklearn.base import clone

    est = BayesianMLPRegressor(method=NUTS(n_chains=2, init=MCLMC(n_chains=2, n_warmup=100)))
    assert est.get_params()["method__init__n_warmup"] == 100
    copy = clone(est).set_params(method__init__n_warmup=300)
    assert copy.method.init.n_warmup == 300 and est.method.init.n_warmup == 100
    fix = est.method._fix(target_accept=0.9)
    assert fix == "method=NUTS(init=MCLMC(n_chains=2, n_warmup=100), n_chains=2, target_accept=0.9)"
