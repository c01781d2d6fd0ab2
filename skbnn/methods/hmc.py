"""Hamiltonian Monte Carlo with a static path length."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ..kernels import chain as kchain
from ._base import store_params
from ._convergence import e_bfmi
from ._mcmc import HMCFamily
from ._records import ChainDiagnostics
from ._sampler_params import SAMPLER_DEFAULTS, sampler_parameters

_SHARED = SAMPLER_DEFAULTS


@sampler_parameters
class HMC(HMCFamily):
    """Hamiltonian Monte Carlo with a fixed integration time (``method="hmc"``).

    Each transition takes ``ceil(path_length / step_size)`` leapfrog steps with the step
    size jittered uniformly by ``+-step_jitter`` of itself, so the integration time varies
    around ``path_length`` and periodic orbits cannot trap the chain (Neal 2011). Warm-up and the
    handling of an unknown noise are those of :class:`NUTS`.

    Parameters
    ----------
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
    path_length : float, default=1.6
        Integration time. After mass-matrix adaptation the posterior has roughly unit
        marginal scales, and a quarter period of a unit Gaussian (pi/2) takes a draw to an
        independent one; a half period (pi) would map it to its mirror image, which leaves
        the log-likelihood unchanged. Longer paths help elongated posteriors.
    step_jitter : float, default=0.2
        Relative half-width of the uniform step-size jitter.
    max_steps : int, default=1024
        Cap on the leapfrog steps of one transition.

    Examples
    --------
    >>> from skbnn.methods import HMC
    >>> HMC(path_length=2.0).path_length
    2.0
    """

    name = "hmc"
    _kind = kchain.HMC
    _parameter_constraints: dict = {
        **HMCFamily._parameter_constraints,
        "path_length": [Interval(Real, 0, None, closed="neither")],
        "step_jitter": [Interval(Real, 0, 1, closed="left")],
        "max_steps": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        n_chains: int = _SHARED["n_chains"],
        n_warmup: int = 500,
        target_accept: float = 0.8,
        metric: str = "diagonal",
        noise_update: str = _SHARED["noise_update"],
        gibbs_output_layer: bool = _SHARED["gibbs_output_layer"],
        rescale_units: bool = _SHARED["rescale_units"],
        path_length: float = 1.6,
        step_jitter: float = 0.2,
        max_steps: int = 1024,
        max_delta_energy: float = _SHARED["max_delta_energy"],
        n_temperatures: int = _SHARED["n_temperatures"],
        max_temperature: float = _SHARED["max_temperature"],
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
        return int(self.max_steps)

    def _kernel_diagnostics(self, trace: np.ndarray, field: dict, out: ChainDiagnostics) -> None:
        # E-BFMI needs the Hamiltonian at each resampled momentum
        out.e_bfmi = e_bfmi(trace[:, :, field["energy"]])

    def _settings(self):
        return {
            "target_accept": self.target_accept,
            "path_length": self.path_length,
            "step_jitter": self.step_jitter,
            "max_steps": self.max_steps,
            "max_delta_energy": self.max_delta_energy,
        }
