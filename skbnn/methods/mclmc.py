"""Microcanonical samplers: unadjusted MCLMC and Metropolis-adjusted MAMS."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..kernels import chain as kchain
from ..kernels import microcanonical as kmicro
from ..kernels.linalg import Metric
from ._base import store_params
from ._convergence import chain_diagnostics
from ._mcmc import HMCFamily
from ._records import ChainDiagnostics
from ._sampler_params import SAMPLER_DEFAULTS, sampler_parameters

_INTEGRATORS = {"mclachlan": kmicro.MCLACHLAN, "leapfrog": kmicro.LEAPFROG}
#: MCLMC's warm-up phases, as fractions of ``n_warmup`` (BlackJAX's 0.1 / 0.1 / 0.1 of the
#: run, and a third of the second for the step size after the metric changes, rescaled to
#: the warm-up): step size; step size and the metric's draws; step size again under the
#: new metric; then draws at fixed step size for ``L``
_MCLMC_PHASES = (0.3, 0.3, 0.1)
#: the most bytes of draws a chain keeps for the estimate of ``L``
_L_BUFFER_BYTES = 32 * 2**20

_SHARED = SAMPLER_DEFAULTS


def mclmc_schedule(n_warmup: int) -> tuple[np.ndarray, int]:
    """MCLMC's warm-up schedule on the driver's ``(in_window, end_window)`` rows, and the
    number of last warm-up iterations whose draws set ``L``.

    One window over the second phase gives the diagonal metric (the driver estimates it
    from the window's draws at the window's end and restarts the step size there). Fewer
    than 20 warm-up iterations tune the step size only, with ``L = sqrt(d)``.
    """
    sched = np.zeros((max(n_warmup, 0), 2), dtype=np.uint8)
    if n_warmup < 20:
        return sched, 0
    first, metric, again = (int(f * n_warmup) for f in _MCLMC_PHASES)
    sched[first : first + metric, 0] = 1
    sched[first + metric - 1, 1] = 1
    return sched, n_warmup - first - metric - again


class _Microcanonical(HMCFamily):
    """What MCLMC and MAMS share: a diagonal metric, the integrator and their advice."""

    _parameter_constraints: dict = {
        **HMCFamily._parameter_constraints,
        # the velocity is unit-norm in the coordinates a diagonal metric scales
        "metric": [StrOptions({"diagonal", "diagonal_grad"})],
        "integrator": [StrOptions(set(_INTEGRATORS))],
    }

    def _check_target(self, target) -> None:
        if target.n_params < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 parameters: its velocity lives on "
                f"the unit sphere of the parameter space (this model has {target.n_params})"
            )

    def _steps_gradients(self) -> int:
        return 2 if self.integrator == "mclachlan" else 1


@sampler_parameters
class MCLMC(_Microcanonical):
    """Microcanonical Langevin Monte Carlo, unadjusted (``method="mclmc"``).

    The chain follows the isokinetic (energy-sampling) dynamics of Robnik, De Luca,
    Silverstein & Seljak (2023): a unit-norm velocity in the coordinates the diagonal
    metric makes isotropic, updated in closed form under the gradient, with a partial
    velocity refresh after every step that decorrelates the velocity over a distance
    ``L`` (Robnik & Seljak 2024). There is no accept/reject step: every step is kept,
    which spares the Metropolis test's need for a step size that shrinks with the
    dimension, at the price of a bias.

    **Bias.** The draws follow the discretized dynamics' stationary distribution, not the
    posterior. The step size is tuned so that the energy error's variance per parameter
    is ``desired_energy_var``, and for Gaussian targets Robnik & Seljak (2024) show that
    this variance bounds the bias: the squared relative error of the variance along each
    principal axis is at most the energy error variance per dimension (a posterior
    variance is off by at most ``sqrt(5e-4)``, about 2 %, at the default), while a mean is
    unbiased when the posterior is symmetric about it. On a 4-parameter linear regression
    the variances came out 1-2 % low with the default integrator, within the bound, and
    up to 4 % high with leapfrog, 1.4 times it (``tests/test_mclmc.py``). Posteriors far
    from Gaussian may stray further; use :class:`MAMS` (the same dynamics,
    Metropolis-adjusted) when exactness matters. ``diagnostics_["energy_var_per_dim"]``
    is the mean squared energy error per parameter after warm-up, per chain; rare large
    errors, which the tuning's weighted average discounts, can lift it above the target.

    Warm-up is BlackJAX's ``mclmc_find_L_and_step_size`` on the shared chain driver: the
    first 30 % of ``n_warmup`` tunes the step size, the next 30 % also estimates the
    diagonal metric from its draws (installed at its end, where ``L`` restarts at
    ``sqrt(n_params)`` and the step size is retuned for 10 %), and the last 30 % runs at
    fixed step size; ``L`` becomes ``l_factor`` times the distance travelled per effective
    draw of those draws. Step sizes are tuned as BlackJAX does: a weighted running
    average of ``energy_error**2 / (n_params * desired_energy_var * eps**6)`` predicts
    the step size (the variance grows as ``eps**6``), and a divergent step (its end not
    finite, or its energy error beyond ``max_delta_energy``) is undone and caps the step
    size at 0.8 of its own. The step size starts from Stan's heuristic, times
    ``sqrt(n_params)`` (an HMC momentum's norm), where BlackJAX starts from ``0.25
    sqrt(n_params)``.

    ``diagnostics_["accept_rate"]`` is NaN (every step is kept): read
    ``energy_var_per_dim`` instead. ``"divergences"`` counts the divergent steps, undone
    after warm-up too.

    Parameters
    ----------
    n_warmup : int, default=2000
        Warm-up steps per chain, discarded. A step costs two gradients, against NUTS's
        tens per iteration, and the three phases above need a few hundred steps each:
        the step-size average forgets over about 150 steps and ``L`` is estimated from
        the last 600.
    desired_energy_var : float, default=5e-4
        Target variance of the energy error per step, per parameter (BlackJAX's default):
        the bias bound above. Smaller is less biased and slower (the step size scales as
        its sixth root).
    l_factor : float, default=0.4
        ``L`` over the distance travelled per effective draw in the last warm-up phase
        (BlackJAX's ``Lfactor``).
    metric : {"diagonal", "diagonal_grad"}, default="diagonal"
        The diagonal metric's estimate, as for :class:`NUTS`; the draws' variances by
        default, as BlackJAX's ``diagonal_preconditioning``.
    integrator : {"mclachlan", "leapfrog"}, default="mclachlan"
        McLachlan's minimal-norm splitting (two gradients a step, about ten times less
        energy error than leapfrog at the same step size; BlackJAX's default) or the
        leapfrog one (one gradient).
    thin : int, default=10
        Keep every ``thin``-th step after warm-up. Successive steps are strongly
        correlated (the tuned ``L`` is 0.4 of the distance per effective draw: about 2
        steps per effective draw on a 4-parameter linear regression, about 100 on a
        16-16 ReLU network of 500 parameters), so keeping every step would fill the
        ``n_samples`` draws with near-copies; ten steps (twenty gradients) per draw cost
        about what one NUTS trajectory does.
    max_delta_energy : float, default=1000.0
        A step whose energy error is beyond this (in absolute value) is divergent and
        undone (at least 100): many standard deviations past a tuned step's error, whose
        variance is ``desired_energy_var * n_params``.

    Examples
    --------
    >>> from skbnn.methods import MCLMC
    >>> MCLMC(desired_energy_var=1e-4).get_params()["desired_energy_var"]
    0.0001
    """

    name = "mclmc"
    _kind = kchain.MCLMC
    _parameter_constraints: dict = {
        **_Microcanonical._parameter_constraints,
        "desired_energy_var": [Interval(Real, 0, None, closed="neither")],
        "l_factor": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        n_chains: int = _SHARED["n_chains"],
        n_warmup: int = 2000,
        desired_energy_var: float = 5e-4,
        l_factor: float = 0.4,
        metric: str = "diagonal",
        integrator: str = "mclachlan",
        thin: int = 10,
        noise_update: str = _SHARED["noise_update"],
        gibbs_output_layer: bool = _SHARED["gibbs_output_layer"],
        rescale_units: bool = _SHARED["rescale_units"],
        max_delta_energy: float = _SHARED["max_delta_energy"],
        init: str | np.ndarray | HMCFamily = _SHARED["init"],
        n_modes: int = _SHARED["n_modes"],
        mode_weights: str = _SHARED["mode_weights"],
        heteroscedastic: bool | str = _SHARED["heteroscedastic"],
        noise_df: float | None = _SHARED["noise_df"],
        target_rhat: float | None = _SHARED["target_rhat"],
        target_ess: float | None = _SHARED["target_ess"],
        max_time: float | None = _SHARED["max_time"],
    ):
        store_params(self, locals())

    def _max_gradients(self) -> int:
        return self._steps_gradients()

    def _settings(self):
        return {
            "max_delta_energy": self.max_delta_energy,
            "integrator": _INTEGRATORS[self.integrator],
            "n_tune_l": mclmc_schedule(self.n_warmup)[1],
            "energy_var": self.desired_energy_var,
            "l_factor": self.l_factor,
        }

    def _plan(self, target, n_samples, resume):
        # MCLMC's phases instead of Stan's windows (the driver's schedule otherwise)
        plan = super()._plan(target, n_samples, resume)
        plan.sched = mclmc_schedule(self.n_warmup)[0]
        return plan

    def _start_chains(self, target, plan, random_state, n_jobs, resume):
        # Each new chain gets a (1, d) row for its persistent velocity where a diagonal
        # metric has a (1, 1) placeholder, and rows after the three of its Welford sums for
        # the draws that set L (a continued chain keeps its own).
        fleet = super()._start_chains(target, plan, random_state, n_jobs, resume)
        if resume is None:
            n_tune_l = mclmc_schedule(self.n_warmup)[1]
            for chain in fleet.replicas:
                a = chain.arrays
                d = a.q.shape[0]
                rows = min(n_tune_l, max(16, _L_BUFFER_BYTES // (8 * d)))
                chain.arrays = a._replace(
                    metric=Metric(a.metric.inv_m, np.zeros((1, d)), a.metric.chol),
                    w_m2=np.zeros((3 + rows, d)),
                )
        return fleet

    def _assemble(self, target, plan, fleet, *args, **kwargs):
        # the draws that set L served warm-up only: a fit (and the state a warm start
        # continues from) keeps the three rows of Welford sums
        for chain in fleet.replicas:
            a = chain.arrays
            chain.arrays = a._replace(w_m2=np.ascontiguousarray(a.w_m2[:3]))
        return super()._assemble(target, plan, fleet, *args, **kwargs)

    def _diagnostics(self, target, chains, n_keep) -> ChainDiagnostics:
        out = chain_diagnostics(self, target, chains, n_keep)
        # the kernel records each step's squared energy error per parameter in place of an
        # acceptance statistic: every step is kept
        out.energy_var_per_dim = out.accept_rate
        out.accept_rate = np.full(len(chains), np.nan)
        out.path_length = np.array([c.arrays.state[0]["path_length"] for c in chains])
        return out

    _divergent_unit = "divergent steps"

    def _divergence_advice(self) -> str:
        # MCLMC has no acceptance target: its step size follows the energy error's target.
        # A target above the default returns to the default: a quarter of a large target
        # still diverges. Below it, a quarter.
        default = MCLMC().desired_energy_var
        if self.desired_energy_var > default:
            fix = self._fix(desired_energy_var=default)
            lower = f"return the energy error target to its default, {fix}"
        else:
            fix = self._fix(desired_energy_var=self.desired_energy_var / 4)
            lower = f"lower the energy error target, {fix}"
        return (
            "divergent steps: the step size is too large for parts of the posterior; "
            f"{lower}, or use method='mams'"
        )


@sampler_parameters
class MAMS(_Microcanonical):
    """Metropolis-adjusted microcanonical sampler (``method="mams"``).

    Robnik, Cohn-Gordon & Seljak (2025): the isokinetic dynamics of :class:`MCLMC`, made
    exact. Each transition draws a fresh velocity uniformly on the unit sphere (in the
    coordinates of the diagonal metric), integrates a random number of steps with mean
    ``L / eps`` (uniform on ``1 .. 2 L / eps - 1``, BlackJAX's jitter, which breaks
    periodic orbits and keeps each trajectory reversible), and accepts the end point with
    probability ``min(1, exp(-energy error))``; the energy error's kinetic part is the
    log-Jacobian of the isokinetic flow, so the draws follow the posterior exactly.
    Trajectories whose log density stops being finite are rejected; those whose energy
    error exceeds ``max_delta_energy`` are counted as divergent.

    Warm-up is the driver's, as for :class:`NUTS`: dual averaging of the step size to
    ``target_accept`` and the diagonal metric over Stan's windows (the step size restarts
    at each window end from Stan's heuristic, times ``sqrt(n_params)``). ``L`` is
    ``path_length * sqrt(n_params)`` in the metric's units: once the metric gives the
    posterior unit marginal scales that is the radius of its typical set, BlackJAX's
    ``adjusted_mclmc_find_L_and_step_size`` value after diagonal preconditioning (its
    ESS-based third stage is off by default there, and is not done here). The step size
    is at most ``L / 1.1``, as there.

    Parameters
    ----------
    n_warmup : int, default=500
        Warm-up iterations per chain: Stan's windows (75 / 25, 50, 100, 200 / 50), as for
        :class:`NUTS`.
    target_accept : float, default=0.9
        Target acceptance rate of the step-size adaptation: BlackJAX's for adjusted MCLMC.
        The isokinetic integrator's energy error grows more slowly with the step size than
        HMC's, so a high acceptance costs little step size (Robnik et al. 2025).
    path_length : float, default=1.0
        ``L / sqrt(n_params)``: the mean trajectory length in units of the typical set's
        radius (1: BlackJAX's ``L = sqrt(d)``). It plays HMC's ``path_length`` role: an
        HMC momentum has norm about ``sqrt(n_params)``.
    metric : {"diagonal", "diagonal_grad"}, default="diagonal"
        The diagonal metric's estimate, as for :class:`NUTS`; the draws' variances by
        default, the estimate ``L`` is calibrated for.
    integrator : {"mclachlan", "leapfrog"}, default="mclachlan"
        The splitting of a step, as for :class:`MCLMC`.
    max_steps : int, default=1024
        Cap on the steps of one trajectory.

    Examples
    --------
    >>> from skbnn.methods import MAMS
    >>> MAMS().target_accept
    0.9
    """

    name = "mams"
    _kind = kchain.MAMS
    _parameter_constraints: dict = {
        **_Microcanonical._parameter_constraints,
        "path_length": [Interval(Real, 0, None, closed="neither")],
        "max_steps": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        n_chains: int = _SHARED["n_chains"],
        n_warmup: int = 500,
        target_accept: float = 0.9,
        path_length: float = 1.0,
        metric: str = "diagonal",
        integrator: str = "mclachlan",
        max_steps: int = 1024,
        noise_update: str = _SHARED["noise_update"],
        gibbs_output_layer: bool = _SHARED["gibbs_output_layer"],
        rescale_units: bool = _SHARED["rescale_units"],
        max_delta_energy: float = _SHARED["max_delta_energy"],
        init: str | np.ndarray | HMCFamily = _SHARED["init"],
        n_modes: int = _SHARED["n_modes"],
        mode_weights: str = _SHARED["mode_weights"],
        heteroscedastic: bool | str = _SHARED["heteroscedastic"],
        noise_df: float | None = _SHARED["noise_df"],
        target_rhat: float | None = _SHARED["target_rhat"],
        target_ess: float | None = _SHARED["target_ess"],
        max_time: float | None = _SHARED["max_time"],
    ):
        store_params(self, locals())

    def _max_gradients(self) -> int:
        return int(self.max_steps) * self._steps_gradients()

    def _settings(self):
        return {
            "target_accept": self.target_accept,
            "path_length": self.path_length,
            "max_steps": self.max_steps,
            "max_delta_energy": self.max_delta_energy,
            "integrator": _INTEGRATORS[self.integrator],
        }

    def _diagnostics(self, target, chains, n_keep) -> ChainDiagnostics:
        out = chain_diagnostics(self, target, chains, n_keep)
        out.path_length = np.array([c.arrays.state[0]["path_length"] for c in chains])
        return out
