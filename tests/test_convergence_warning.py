"""The ConvergenceWarning says what went wrong, for the method that ran, and names the knob
by its full path. Built from constructed diagnostics: which figures trigger which advice is
a property of the message, not of any one run."""

import numpy as np
import pytest

from skbnn.methods import HMC, MALA, NUTS, AdaptiveMetropolis


def _diag(rhat=1.0, outputs=1.0, divergences=0, draws=250, chains=4, depth_hits=0, depth=3.0):
    return {
        "n_chains": chains,
        "n_draws_per_chain": draws,
        "rhat_loglik": rhat,
        "rhat_outputs": np.full((5, 1), outputs),
        "ess_bulk_loglik": 321.0,
        "divergences": divergences,
        "mean_tree_depth": np.full(chains, depth),
        "max_tree_depth_hits": np.full(chains, depth_hits),
    }


def test_no_message_when_nothing_is_wrong():
    assert NUTS()._convergence_message(_diag()) is None
    # a depth cap alone, with agreeing chains and no divergences, is a cost, not a failure
    assert NUTS()._convergence_message(_diag(depth_hits=250, depth=10.0)) is None


def test_disagreeing_chains_name_the_full_knob_paths_and_alternatives():
    msg = NUTS(n_warmup=1000)._convergence_message(_diag(rhat=1.2, outputs=1.4))
    assert msg.startswith("NUTS may not have converged: R-hat of the log-likelihood 1.200")
    assert "max R-hat of training predictions 1.400" in msg
    assert "method=NUTS(n_warmup=2000)" in msg and "n_samples=2000" in msg
    assert "method=NUTS(n_temperatures=4, n_warmup=1000)" in msg and "method='smc'" in msg
    assert "method=NUTS(max_time=600, n_warmup=1000, target_ess=400, target_rhat=1.01)" in msg
    # nothing about figures that are fine or absent
    assert "nan" not in msg and "too few draws" not in msg
    assert "target_accept" not in msg and "max_tree_depth=" in msg  # the depth figure only
    assert "depth cap" not in msg


def test_depth_cap_is_named_with_the_next_setting():
    msg = NUTS(max_tree_depth=10)._convergence_message(_diag(rhat=1.3, depth_hits=240, depth=9.7))
    assert "mean tree depth 9.7 of max_tree_depth=10" in msg
    assert "96% of the trajectories stopped at the depth cap" in msg
    assert "method=NUTS(max_tree_depth=12)" in msg


def test_divergences_point_at_target_accept_of_that_method():
    diag = _diag(divergences=7)
    del diag["mean_tree_depth"], diag["max_tree_depth_hits"]  # NUTS's alone
    msg = HMC(target_accept=0.8)._convergence_message(diag)
    assert msg.startswith("HMC may not have converged")
    assert "7 divergent transitions after warm-up" in msg
    assert "method=HMC(target_accept=0.9)" in msg
    assert "chains disagree" not in msg


def test_too_few_draws_says_so_and_only_then_mentions_nan():
    msg = NUTS(n_chains=3)._convergence_message(
        _diag(rhat=np.nan, outputs=np.nan, draws=2, chains=3)
    )
    assert "Too few draws to judge: 2 per chain" in msg and "nan" in msg
    assert "n_samples (now 6 over 3 chains)" in msg


@pytest.mark.parametrize("method", [MALA(), AdaptiveMetropolis()])
def test_slow_samplers_suggest_nuts(method):
    diag = _diag(rhat=2.4, divergences=3)
    del diag["mean_tree_depth"], diag["max_tree_depth_hits"]
    msg = method._convergence_message(diag)
    assert "method='nuts'" in msg
    if isinstance(method, MALA):
        # longer chains, as code that keeps their length in proportion
        assert "method=MALA(n_warmup=40000, thin=400)" in msg
    else:
        assert "reference sampler" in msg and "n_warmup" not in msg
    assert "n_temperatures" not in msg and "tree depth" not in msg
    if isinstance(method, AdaptiveMetropolis):
        # a random walk has no step size, no divergences and no target_accept
        assert msg.startswith("ADAPTIVE METROPOLIS may not have converged")
        assert "divergent" not in msg and "target_accept" not in msg
    else:
        assert "method=MALA(target_accept=0.787)" in msg


def _extended(stopped, **kw):
    diag = _diag(**kw)
    diag.update(stopped_because=stopped, n_draws_sampled_per_chain=4321, budget_time=600.4)
    return diag


def test_out_of_time_says_so_and_what_to_do_instead():
    # the chains ran until max_time and still disagree: no advice about n_samples (it only
    # caps the kept draws then) or tempering (which cannot be extended), but max_time and
    # what the measurements say of posteriors out of reach
    method = NUTS(target_rhat=1.01, target_ess=400, max_time=600)
    msg = method._convergence_message(_extended("max_time", rhat=1.6, outputs=1.7))
    assert "after 4321 draws per chain in 600 s (stopped_because='max_time')" in msg
    assert (
        "give them more time: method=NUTS(max_time=1200, target_ess=400, target_rhat=1.01)" in msg
    )
    assert "out of reach" in msg and "ensemble of modes" in msg
    assert "n_samples" not in msg and "n_temperatures" not in msg
    # too few draws because the time ran out points at max_time, not n_samples
    msg = method._convergence_message(
        _extended("max_time", rhat=np.nan, outputs=np.nan, draws=2, chains=3)
    )
    assert (
        "the time ran out first: method=NUTS(max_time=1200, target_ess=400, target_rhat=1.01)"
        in msg
    )
    assert "n_samples" not in msg


def test_draw_cap_points_at_max_time():
    msg = NUTS(target_rhat=1.01)._convergence_message(_extended("max_draws", rhat=1.2))
    assert "method=NUTS(max_time=600, target_rhat=1.01)" in msg and "n_samples" not in msg
