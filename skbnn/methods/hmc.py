"""Hamiltonian Monte Carlo with a static path length."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ..kernels import chain as kchain
from ._convergence import StopRule, e_bfmi
from ._mcmc import _HMCFamily
from ._tempering import TEMPERING_CONSTRAINTS, ladder_betas


class HMC(_HMCFamily):
    """Hamiltonian Monte Carlo with a fixed integration time (``method="hmc"``).

    Each transition takes ``ceil(path_length / step_size)`` leapfrog steps with the step
    size jittered uniformly by ``+-step_jitter`` of itself, so the integration time varies
    around ``path_length`` and periodic orbits cannot trap the chain (Neal 2011). Warm-up and the
    handling of an unknown noise are those of :class:`NUTS`.

    Parameters
    ----------
    n_chains : int, default=4
        Independent chains, run in parallel threads.
    n_warmup : int, default=500
        Warm-up iterations per chain.
    target_accept : float, default=0.8
        Target acceptance probability of the step-size adaptation. For static HMC the
        optimum in high dimension is about 0.65 (Beskos et al. 2013); 0.8 buys robustness
        on the curved posteriors of neural networks.
    metric : {"diagonal", "diagonal_grad", "dense", "low_rank"}, default="diagonal"
        Shape and estimate of the adapted inverse mass matrix, as for :class:`NUTS`. The
        default here is the draws' variance, because ``path_length`` is calibrated for a
        metric that gives the posterior unit marginal scales.
    noise_update : {"marginal", "gibbs"}, default="marginal"
        How an unknown Gaussian noise precision is sampled, as for :class:`NUTS`.
    gibbs_output_layer : bool, default=False
        Exact Gibbs draws of the output layer after every transition, as for :class:`NUTS`.
    rescale_units : bool, default=True
        Exact moves along the ReLU units' scale symmetry after every transition, as for
        :class:`NUTS`.
    path_length : float, default=1.6
        Integration time. After mass-matrix adaptation the posterior has roughly unit
        marginal scales, and a quarter period of a unit Gaussian (pi/2) takes a draw to an
        independent one; a half period (pi) would map it to its mirror image, which leaves
        the log-likelihood unchanged. Longer paths help elongated posteriors.
    step_jitter : float, default=0.2
        Relative half-width of the uniform step-size jitter.
    max_steps : int, default=1024
        Cap on the leapfrog steps of one transition.
    max_delta_energy : float, default=1000.0
        Energy error that marks a divergent transition (at least 100).
    n_temperatures : int, default=1
        Replicas per chain for parallel tempering (1: none), as for :class:`NUTS`.
    max_temperature : float, default=10.0
        Temperature of the hottest replica, as for :class:`NUTS`.
    init : {"prior", "map"}, default="prior"
        Where each chain starts, as for :class:`NUTS`.
    n_modes : int, default=1
        Optima the chains sample around, one or more chains each, as for :class:`NUTS`.
    mode_weights : {"equal", "stacking"}, default="equal"
        How the modes are weighted in the predictive, as for :class:`NUTS`.
    heteroscedastic : bool or "auto", default=False
        Whether the network also predicts the noise of every row, as for :class:`NUTS`.
    target_rhat, target_ess, max_time : float or None, default=None
        Sample until converged, as for :class:`NUTS`.

    Examples
    --------
    >>> from skbnn.methods import HMC
    >>> HMC(path_length=2.0).path_length
    2.0
    """

    name = "hmc"
    _kind = kchain.HMC
    _parameter_constraints: dict = {
        **_HMCFamily._parameter_constraints,
        **TEMPERING_CONSTRAINTS,
        "path_length": [Interval(Real, 0, None, closed="neither")],
        "step_jitter": [Interval(Real, 0, 1, closed="left")],
        "max_steps": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        n_chains: int = 4,
        n_warmup: int = 500,
        target_accept: float = 0.8,
        metric: str = "diagonal",
        noise_update: str = "marginal",
        gibbs_output_layer: bool = False,
        rescale_units: bool = True,
        path_length: float = 1.6,
        step_jitter: float = 0.2,
        max_steps: int = 1024,
        max_delta_energy: float = 1000.0,
        n_temperatures: int = 1,
        max_temperature: float = 10.0,
        init: str = "prior",
        n_modes: int = 1,
        mode_weights: str = "equal",
        heteroscedastic: bool | str = False,
        target_rhat: float | None = None,
        target_ess: float | None = None,
        max_time: float | None = None,
    ):
        self.n_chains = n_chains
        self.n_warmup = n_warmup
        self.target_accept = target_accept
        self.metric = metric
        self.noise_update = noise_update
        self.gibbs_output_layer = gibbs_output_layer
        self.rescale_units = rescale_units
        self.path_length = path_length
        self.step_jitter = step_jitter
        self.max_steps = max_steps
        self.max_delta_energy = max_delta_energy
        self.n_temperatures = n_temperatures
        self.max_temperature = max_temperature
        self.init = init
        self.n_modes = n_modes
        self.mode_weights = mode_weights
        self.heteroscedastic = heteroscedastic
        self.target_rhat = target_rhat
        self.target_ess = target_ess
        self.max_time = max_time

    def _max_gradients(self) -> int:
        return int(self.max_steps)

    def _betas(self) -> np.ndarray:
        return ladder_betas(self.n_temperatures, self.max_temperature)

    def _stop_rule(self) -> StopRule:
        return StopRule(self.target_rhat, self.target_ess, self.max_time)

    def _kernel_diagnostics(self, trace: np.ndarray, field: dict) -> dict:
        # E-BFMI needs the Hamiltonian at each resampled momentum
        return {"e_bfmi": e_bfmi(trace[:, :, field["energy"]])}

    def _settings(self):
        return {
            "target_accept": self.target_accept,
            "path_length": self.path_length,
            "step_jitter": self.step_jitter,
            "max_steps": self.max_steps,
            "max_delta_energy": self.max_delta_energy,
        }
