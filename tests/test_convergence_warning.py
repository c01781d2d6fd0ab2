"""The ConvergenceWarning says what went wrong, for the method that ran, and names the knob
by its full path. Built from constructed diagnostics: which figures trigger which advice is
a property of the message, not of any one run."""

import warnings
from dataclasses import replace

import numpy as np
import pytest

from skbnn import BayesianMLPRegressor
from skbnn.exceptions import ConvergenceWarning
from skbnn.methods import HMC, MALA, MCLMC, NUTS, AdaptiveMetropolis
from skbnn.methods._convergence import ERROR_WARN, predictive_error
from skbnn.methods._records import ChainDiagnostics, ModeFigures, PredictiveModes


def _modes(error, n_modes=4, rows=5):
    """Predictive figures of ``n_modes`` equally weighted modes whose mixture has a Monte
    Carlo error ``error`` at every row: a predictive density of 1 at one point, its
    draws' of variance 1 in each mode, with ``1 / (n_modes * error**2)`` effective
    draws."""
    shape = (n_modes, rows, 1)
    with np.errstate(divide="ignore"):
        ess = np.divide(1.0, n_modes * np.float64(error) ** 2)
    return PredictiveModes(
        mean=np.zeros(shape),
        mean_var=np.ones(shape),
        mean_ess=np.ones(shape),
        density=np.ones((*shape, 1)),
        density_var=np.ones((*shape, 1)),
        density_ess=np.full(shape, ess),
        proposal=np.ones((rows, 1, 1)),
    )


def _diag(rhat=1.0, outputs=1.0, divergences=0, draws=250, chains=4, depth_hits=0, depth=3.0,
          error=0.02):  # fmt: skip
    return ChainDiagnostics(
        n_chains=chains,
        n_draws_per_chain=draws,
        rhat_loglik=rhat,
        rhat_outputs=np.full((5, 1), outputs),
        ess_bulk_loglik=321.0,
        divergences=divergences,
        mean_tree_depth=np.full(chains, depth),
        max_tree_depth_hits=np.full(chains, depth_hits),
        predictive_modes=_modes(error, n_modes=chains),
    )


def test_the_constructed_error_is_the_one_judged():
    assert np.allclose(predictive_error(_diag(error=0.3)), 0.3)


def test_no_message_when_nothing_is_wrong():
    assert NUTS()._convergence_message(_diag()) is None
    # a depth cap alone, with no divergences and a precise predictive, is a cost
    assert NUTS()._convergence_message(_diag(depth_hits=250, depth=10.0)) is None


def test_chains_in_separate_modes_do_not_warn_when_the_predictive_is_precise():
    # R-hat across the chains far above 1.05: each chain sits in its own mode, and the
    # predictive is their mixture, estimated to within ERROR_WARN
    assert NUTS()._convergence_message(_diag(rhat=1.6, outputs=1.7, error=0.09)) is None


def test_a_coarse_predictive_asks_for_the_draws_that_make_it_precise():
    msg = NUTS(n_warmup=1000)._convergence_message(_diag(rhat=1.2, outputs=1.4, error=0.2))
    assert msg.startswith(
        "NUTS may not have converged: Monte Carlo error of the predictive up to 0.200 of "
        "its sd, R-hat of the log-likelihood 1.200"
    )
    assert "max R-hat of training predictions 1.400" in msg
    assert f"warn above {ERROR_WARN}" in msg
    # (0.2 / 0.1)**2 = 4 times the draws, and twice that: 2000 per chain
    assert "the estimator's n_samples=8000 (now 1000)" in msg
    # nothing about figures that are fine or absent
    assert "nan" not in msg and "too few draws" not in msg
    assert "target_accept" not in msg and "max_tree_depth=" in msg  # the depth figure only
    assert "depth cap" not in msg


def _in_modes(diag, within, n_modes=None):
    """``diag`` as a run whose chain ``c`` samples mode ``c % n_modes`` (by default one
    chain per mode), with ``within`` the R-hat of each mode's chains alone."""
    n_modes = n_modes or diag.n_chains
    modes = [ModeFigures(chains=np.arange(m, diag.n_chains, n_modes), rhat_loglik=within,
                         rhat_outputs=np.ones((5, 1)), ess_bulk_loglik=20.0,
                         ess_bulk_outputs=np.full((5, 1), 20.0))
             for m in range(n_modes)]  # fmt: skip
    # no trees: the figures of MCLMC's run
    return replace(diag, n_modes=n_modes, modes=modes, mean_tree_depth=None,
                   max_tree_depth_hits=None)  # fmt: skip


def test_chains_that_drift_within_their_modes_are_told_to_sample_more_modes():
    # Halves of a chain that disagree within its mode: its error falls more slowly than
    # the square root of its draws, so the fix is more modes of as many draws each,
    # (0.2 / 0.1)**2 = 4 times the modes, and twice that: 32 modes of 250 draws
    diag = _in_modes(_diag(rhat=3.0, draws=250, error=0.2), within=1.6)
    msg = MCLMC(n_modes=4, n_chains=4)._convergence_message(diag)
    assert "R-hat of the log-likelihood within modes 1.600" in msg
    assert "the halves of a chain disagree within its mode" in msg
    assert "method=MCLMC(n_chains=32, n_modes=32) and the estimator's n_samples=8000 (now " \
        "1000)" in msg  # fmt: skip
    assert "draw more" not in msg
    # two chains per mode stay two; a sampler that starts where another's chains ended
    # (the routes of doc/samplers.md) needs the same modes in both
    route = NUTS(n_modes=2, n_chains=4, init=MCLMC(n_modes=2, n_chains=2))
    msg = route._convergence_message(_in_modes(_diag(draws=250, error=0.2), within=1.6, n_modes=2))
    assert ("method=NUTS(init=MCLMC(n_chains=16, n_modes=16), n_chains=32, n_modes=16) "
            "and the estimator's n_samples=8000") in msg  # fmt: skip
    # chains whose halves agree: the error falls with the square root of the draws
    msg = MCLMC(n_modes=4, n_chains=4)._convergence_message(
        _in_modes(_diag(rhat=3.0, error=0.2), within=1.05)
    )
    assert "draw more" in msg and "n_modes=" not in msg


@pytest.mark.parametrize("error", [0.101, 0.5, 3.0, np.inf])
def test_the_advised_draws_reach_the_bound_by_the_square_root_law(error):
    msg = NUTS()._convergence_message(_diag(error=error))
    wanted = int(msg.split("n_samples=")[1].split(" ")[0])
    assert wanted % 4 == 0 and wanted > 1000
    if np.isfinite(error):
        assert error * np.sqrt(1000 / wanted) < ERROR_WARN
    else:  # no finite number reaches it: ten times the draws
        assert wanted == 10000


def test_depth_cap_is_named_with_the_next_setting():
    msg = NUTS(max_tree_depth=10)._convergence_message(
        _diag(rhat=1.3, depth_hits=240, depth=9.7, error=0.3)
    )
    assert "mean tree depth 9.7 of max_tree_depth=10" in msg
    assert "96% of the trajectories stopped at the depth cap" in msg
    assert "method=NUTS(max_tree_depth=12)" in msg


def test_divergences_point_at_target_accept_of_that_method():
    diag = _diag(divergences=7)
    diag.mean_tree_depth = diag.max_tree_depth_hits = None  # NUTS's alone
    msg = HMC(target_accept=0.8)._convergence_message(diag)
    assert msg.startswith("HMC may not have converged")
    assert "7 divergent transitions after warm-up" in msg
    assert "method=HMC(target_accept=0.9)" in msg
    assert "too coarsely" not in msg


def test_too_few_draws_says_so_and_only_then_mentions_nan():
    diag = _diag(rhat=np.nan, outputs=np.nan, draws=2, chains=3, error=np.nan)
    msg = NUTS(n_chains=3)._convergence_message(diag)
    assert "Too few draws to judge: 2 per chain" in msg and "nan" in msg
    assert "n_samples=12 or more (now 6 over 3 chains)" in msg


def test_chains_too_short_to_judge_report_no_predictive_error():
    # one draw per chain: every mode's draws are constant, yet their error is unknown, not 0
    diag = _diag(rhat=np.nan, outputs=np.nan, draws=1, chains=2, error=0.0)
    diag.predictive_modes.density_var[:] = 0.0
    diag.predictive_modes.density_ess[:] = np.nan
    assert np.all(np.isnan(predictive_error(diag)))
    msg = NUTS(n_chains=2)._convergence_message(diag)
    assert "Too few draws to judge: 1 per chain" in msg
    assert "Monte Carlo error" not in msg


def test_a_stop_rule_on_a_run_too_short_to_judge_warns_only_by_its_own_warning():
    # the stop rule reads R-hat and ESS while they are NaN: the user sees the
    # ConvergenceWarning that says so, and no numpy RuntimeWarning from inside skbnn
    X = np.linspace(-1, 1, 10)[:, None]
    y = X[:, 0] + 0.1 * np.cos(7 * X[:, 0])
    reg = BayesianMLPRegressor(hidden_layer_sizes=(), n_samples=1, random_state=0,
                               method=NUTS(n_chains=1, n_warmup=5, target_rhat=1.1))  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg.fit(X, y)
    kinds = {w.category for w in caught}
    assert kinds == {ConvergenceWarning}, [str(w.message) for w in caught]
    (msg,) = [str(w.message) for w in caught]
    assert "Too few draws to judge: 1 per chain" in msg
    assert "Monte Carlo error" not in msg
    assert np.all(np.isfinite(reg.predict(X)))


@pytest.mark.parametrize("method", [MALA(), AdaptiveMetropolis()])
def test_slow_samplers_suggest_nuts(method):
    diag = _diag(rhat=2.4, divergences=3, error=0.4)
    diag.mean_tree_depth = diag.max_tree_depth_hits = None
    msg = method._convergence_message(diag)
    assert "method='nuts'" in msg
    assert "n_samples=32000 (now 1000)" in msg
    if isinstance(method, AdaptiveMetropolis):
        assert "reference sampler" in msg and "n_warmup" not in msg
    assert "n_temperatures" not in msg and "tree depth" not in msg
    if isinstance(method, AdaptiveMetropolis):
        # a random walk has no step size, no divergences and no target_accept
        assert msg.startswith("ADAPTIVE METROPOLIS may not have converged")
        assert "divergent" not in msg and "target_accept" not in msg
    else:
        assert "method=MALA(target_accept=0.787)" in msg


def _extended(stopped, sampled=4321, **kw):
    return replace(
        _diag(**kw), stopped_because=stopped, n_draws_sampled_per_chain=sampled, budget_time=600.4
    )


def test_out_of_time_says_so_and_what_to_do_instead():
    # the chains ran until max_time, keeping every draw they made, and the predictive is
    # still coarse: no advice about n_samples (it only caps the kept draws then), but
    # max_time
    method = NUTS(target_rhat=1.01, target_ess=400, max_time=600)
    diag = _extended("max_time", sampled=250, rhat=1.6, outputs=1.7, error=0.3)
    msg = method._convergence_message(diag)
    assert "after 250 draws per chain in 600 s (stopped_because='max_time')" in msg
    assert (
        "give the chains more time: method=NUTS(max_time=1200, target_ess=400, "
        "target_rhat=1.01)" in msg
    )
    assert "n_samples" not in msg and "n_temperatures" not in msg
    # too few draws because the time ran out points at max_time, not n_samples
    diag = _extended("max_time", sampled=2, rhat=np.nan, outputs=np.nan, draws=2, chains=3,
                     error=np.nan)  # fmt: skip
    msg = method._convergence_message(diag)
    assert (
        "the time ran out first: method=NUTS(max_time=1200, target_ess=400, target_rhat=1.01)"
        in msg
    )
    assert "n_samples" not in msg


def test_out_of_time_after_thinning_asks_for_more_kept_draws():
    # the chains drew more than n_samples keeps before the time ran out: the kept draws
    # are thinned, and a longer run thins them more; more of them lower the error
    method = NUTS(target_rhat=1.01, max_time=600)
    msg = method._convergence_message(_extended("max_time", rhat=1.2, error=0.2))
    assert "n_samples=8000 (now 1000)" in msg and "max_time=1200" not in msg
    diag = _extended("max_time", rhat=np.nan, outputs=np.nan, draws=2, chains=3, error=np.nan)
    msg = method._convergence_message(diag)
    assert "n_samples=12 or more" in msg and "max_time=1200" not in msg


def test_draw_cap_asks_for_more_kept_draws():
    # at the cap the kept draws are thinned from the longest run allowed: more of them,
    # not a longer run, lowers the error
    msg = NUTS(target_rhat=1.01)._convergence_message(_extended("max_draws", rhat=1.2, error=0.2))
    assert "n_samples=" in msg and "max_time" not in msg


def test_a_chain_that_never_moved_is_named_with_a_longer_warm_up():
    # every proposal rejected: the chain's draws are one point, whose variance (and so
    # whose Monte Carlo error) looks like 0 and whose R-hat is NaN
    diag = _diag(rhat=np.nan, outputs=np.nan)
    diag.loglik = np.vstack([np.full(250, -3.0), np.random.default_rng(0).normal(size=(3, 250))])
    msg = NUTS(n_warmup=100)._convergence_message(diag)
    assert "1 of 4 chains never moved after warm-up" in msg
    assert "method=NUTS(n_warmup=200)" in msg and "too few draws" not in msg.lower()
    diag.loglik[0, 7] = -2.9
    assert "never moved" not in (NUTS()._convergence_message(diag) or "")


def test_a_chain_that_never_moved_is_the_advice_even_when_the_predictive_is_coarse():
    # a stuck chain also leaves the predictive's Monte Carlo error high (seen with HMC
    # and no warm-up on diabetes); more draws of the same chains would not move it: the
    # advice is the warm-up alone, the error stays among the figures
    diag = _diag(rhat=1.5, error=0.123)
    diag.loglik = np.vstack([np.full(250, -3.0), np.random.default_rng(0).normal(size=(3, 250))])
    msg = NUTS(n_warmup=100)._convergence_message(diag)
    assert "1 of 4 chains never moved after warm-up" in msg and "n_warmup=200" in msg
    assert "0.123" in msg and "n_samples" not in msg and "too coarsely" not in msg


def test_every_advised_setting_changes_the_run_and_is_valid():
    # a fix must never print the setting the fit already had, nor one the sampler refuses:
    # the depth cap at its largest, an acceptance target of 0.99 or above, no warm-up
    diag = _diag(rhat=1.3, depth_hits=240, depth=19.7, error=0.3)
    msg = NUTS(max_tree_depth=19)._convergence_message(diag)
    assert "method=NUTS(max_tree_depth=20)" in msg
    msg = NUTS(max_tree_depth=20)._convergence_message(diag)
    assert "max_tree_depth=2" not in msg.split("of max_tree_depth=20")[1]
    assert "The cap is at its largest (20)" in msg
    diag = _diag(divergences=7)
    for accept, advised in [(0.99, "0.995"), (0.995, "0.9975"), (0.999, "0.9995")]:
        msg = NUTS(target_accept=accept)._convergence_message(diag)
        fix = NUTS(target_accept=float(advised))
        assert f"method=NUTS(target_accept={advised})" in msg
        fix._validate_params()
    diag = _diag(rhat=np.nan, outputs=np.nan)
    diag.loglik = np.vstack([np.full(250, -3.0), np.random.default_rng(0).normal(size=(3, 250))])
    # the default warm-up, which a fix writes as the default: no knob
    assert "give them a warm-up: method=NUTS()." in NUTS(n_warmup=0)._convergence_message(diag)
