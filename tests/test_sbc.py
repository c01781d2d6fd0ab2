"""Simulation-based calibration of NUTS, HMC, MALA and SMC on a nonlinear network
(``benchmarks/sbc.py`` holds the model, the checked quantities and the broken sampler).

Bayesian linear regression's closed forms (``test_exact_posterior.py``) check the samplers
on a Gaussian posterior. SBC checks them where the posterior is not Gaussian: 2 inputs,
3 tanh units, 20 rows of binary labels. Over replications that draw the weights from the
prior and the labels from the model, the fraction ``u`` of posterior draws below the true
value of a quantity is uniform when the sampler is right.

The test: a Kolmogorov-Smirnov test of ``u`` against the uniform for each of three
quantities (the logit at three inputs), at level 1e-3 / 3 each, so a correct sampler fails
a test with probability below 1e-3 (a union bound over the three, which are correlated).
The finite number of draws per fit blurs ``u`` by about 0.03 (its Monte Carlo error at an
effective sample size in the hundreds), far below the KS test's reach at these
replications (its critical distance is 0.16 at 150). This short version runs in every CI
run; ``python benchmarks/sbc.py --reps 1000`` is the full one (doc/testing.md).

The same test must fail a broken sampler: a Langevin sampler without the Metropolis
correction, whose finite step widens its draws. It must pass that sampler's corrected
twin, so what it catches is the missing correction.
"""

import runpy
from pathlib import Path

import numpy as np
import pytest

SBC = runpy.run_path(str(Path(__file__).resolve().parents[1] / "benchmarks" / "sbc.py"))
#: level of each KS test: a correct sampler fails one of its three below 1e-3
LEVEL = 1e-3 / 3
#: replications per sampler: SMC's fits take four times NUTS's
REPS = {"nuts": 150, "hmc": 150, "mala": 150, "smc": 60}

pytestmark = pytest.mark.statistical


@pytest.mark.parametrize("sampler", list(REPS))
def test_ranks_of_the_true_logits_are_uniform(sampler, seed):
    u = SBC["run"](sampler, REPS[sampler], seed=1 + seed)
    assert u.shape == (REPS[sampler], 3) and np.all((u >= 0) & (u <= 1 + 1e-12))
    pvalues = SBC["uniformity_pvalues"](u)
    assert pvalues.min() > LEVEL, (pvalues, [np.histogram(c, 5, (0, 1))[0] for c in u.T])


def test_sbc_fails_the_langevin_fixture_without_the_metropolis_correction(seed):
    # Unadjusted Langevin at step 0.9 in prior-scaled units, where the corrected sampler
    # accepts 26 % of its proposals. Over 100 replications (two seeds) its p-values were
    # 1e-7 to 1e-9, with three quarters of its u in the middle fifth: draws too wide. A
    # smaller bias is harder to see: at step 0.7 (51 % accepted) they were 1e-4 to 0.04.
    u = SBC["run"]("langevin", 100, seed=2 + seed, adjust=False)
    pvalues = SBC["uniformity_pvalues"](u)
    assert pvalues.max() < LEVEL, pvalues
    middle = np.mean((u > 0.25) & (u < 0.75))
    assert middle > 0.5  # too wide: more than half the true values in the middle half


def test_sbc_passes_the_langevin_fixture_with_the_correction(seed):
    u = SBC["run"]("langevin", 100, seed=2 + seed, adjust=True)
    assert SBC["uniformity_pvalues"](u).min() > LEVEL
