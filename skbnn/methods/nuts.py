"""The No-U-Turn Sampler."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import Interval

from ..kernels import chain as kchain
from ._base import store_params
from ._convergence import MAX_TREE_DEPTH, e_bfmi
from ._mcmc import HMCFamily
from ._records import ChainDiagnostics
from ._sampler_params import SAMPLER_DEFAULTS, sampler_parameters

_SHARED = SAMPLER_DEFAULTS


@sampler_parameters
class NUTS(HMCFamily):
    """No-U-Turn Sampler with multinomial trajectory sampling (``method="nuts"``).

    The trajectory doubles in a random direction until the generalized no-U-turn criterion
    fails on any of its binary subtrees (with Stan's extra checks across neighbouring
    subtrees), a divergence (energy error above ``max_delta_energy``) or ``max_tree_depth``.
    The state is drawn from the trajectory by biased progressive multinomial sampling
    (Betancourt 2017), as in Stan and NumPyro. Warm-up adapts the step size by dual
    averaging to ``target_accept`` and a diagonal mass matrix over Stan's doubling windows.
    A Gaussian likelihood's unknown noise precision is by default integrated out of the
    density NUTS explores (its Gamma prior is conjugate), and drawn exactly from its Gamma
    conditional after every trajectory; see ``noise_update``.

    Parameters
    ----------
    n_warmup : int, default=500
        Warm-up (adaptation) iterations per chain, discarded. 500 lets Stan's windows
        (75 / 25, 50, 100, 200 / 50) estimate the mass matrix of a small network.
    target_accept : float, default=0.8
        Target mean acceptance statistic of the step-size adaptation (Stan's default);
        raise it (0.9, 0.95) when divergences are reported.
    metric : {"diagonal_grad", "diagonal", "dense", "low_rank"}, default="diagonal_grad"
        Shape and estimate of the adapted inverse mass matrix, re-estimated at the end of
        each of Stan's warm-up windows from that window's draws.

        - ``"diagonal_grad"``: per parameter, the geometric mean ``sqrt(Var[theta_i] /
          Var[d log p / d theta_i])`` of the draws' variance and the inverse of the
          gradients' variance (nutpie's estimate, Seyboldt et al. 2024). For a Gaussian
          with diagonal covariance it equals the variance; where parameters are correlated
          the variance alone overstates the scale of the narrow directions, which forces a
          small step size, while the gradients see them. On diabetes with the default tanh
          network it halves the leapfrog steps per draw at nearly the same ESS
          (``benchmarks/sampler_options.py``).
        - ``"diagonal"``: the draws' variances (Stan's ``diag_e``).
        - ``"dense"``: the full posterior covariance; O(n_params^2) per leapfrog step.
        - ``"low_rank"``: the diagonal one, corrected in the directions where the window's
          draws and gradients disagree with it most, as nutpie's low-rank adaptation
          (Seyboldt, Carlson & Carpenter 2026); O(n_params x rank) per step.

        The dense and low-rank metrics pay when weights are strongly and linearly
        correlated: on a linear model with collinear features they cut the steps per draw
        25-fold. A network's posterior is curved instead: its local curvature is far
        sharper than its global spread, and no fixed matrix can reconcile the two
        (doc/samplers.md measures how far). There the low-rank and dense metrics gained
        at most a fifth in ESS per gradient and cost more per step, so the default stays
        diagonal.
    max_tree_depth : int, default=10
        At most ``2**max_tree_depth - 1`` leapfrog steps per draw.

    Examples
    --------
    >>> from skbnn.methods import NUTS
    >>> NUTS(target_accept=0.9).get_params()["target_accept"]
    0.9
    """

    name = "nuts"
    _kind = kchain.NUTS
    _after_aside = True
    _parameter_constraints: dict = {
        **HMCFamily._parameter_constraints,
        "max_tree_depth": [Interval(Integral, 1, MAX_TREE_DEPTH, closed="both")],
    }

    def __init__(
        self,
        n_chains: int = _SHARED["n_chains"],
        n_warmup: int = 500,
        target_accept: float = 0.8,
        metric: str = "diagonal_grad",
        noise_update: str = _SHARED["noise_update"],
        gibbs_output_layer: bool = _SHARED["gibbs_output_layer"],
        rescale_units: bool = _SHARED["rescale_units"],
        max_tree_depth: int = 10,
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
        return 2**self.max_tree_depth - 1

    def _kernel_diagnostics(self, trace: np.ndarray, field: dict, out: ChainDiagnostics) -> None:
        # E-BFMI needs the Hamiltonian at each resampled momentum
        depth = trace[:, :, field["tree_depth"]]
        out.e_bfmi = e_bfmi(trace[:, :, field["energy"]])
        out.mean_tree_depth = depth.mean(axis=1)
        out.max_tree_depth_hits = (depth >= self.max_tree_depth).sum(axis=1)

    def _settings(self):
        return {
            "target_accept": self.target_accept,
            "max_tree_depth": self.max_tree_depth,
            "max_delta_energy": self.max_delta_energy,
        }
