"""Adaptive Metropolis (Haario, Saksman & Tamminen 2001)."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from ..exceptions import SlowFitWarning, warn
from ..kernels import chain as kchain
from ._base import store_params
from ._mcmc import HMCFamily
from ._sampler_params import SAMPLER_DEFAULTS, sampler_parameters

#: Above this many parameters a dense proposal covariance costs more than it is worth:
#: O(K^2) memory and work per step against a likelihood of a few K per row.
DENSE_WARN_PARAMS = 1000

_SHARED = SAMPLER_DEFAULTS


@sampler_parameters
class AdaptiveMetropolis(HMCFamily):
    """Adaptive random-walk Metropolis (``method="amcmc"``).

    The proposal is ``N(theta, Sigma_t)`` with ``Sigma_t = (gamma * 2.4^2 / K)(C_t + 1e-8 I)``,
    ``C_t`` the running covariance of the chain (from step ``t0 / 2`` on, so that the climb
    from the starting point does not inflate it) and ``K`` the number of parameters (Haario,
    Saksman & Tamminen 2001; 2.4^2 / K is the optimal scaling for Gaussian targets, Gelman,
    Roberts & Gilks 1996). ``C_t`` is updated online at every step, O(K^2) dense and O(K)
    diagonal, never recomputed from the history. ``Sigma_t`` is refreshed from it every
    ``t_adapt`` steps once ``t0`` steps have passed; before that the proposal is the same
    scaling of the prior variances. The adaptation continues through sampling, as in Haario
    et al., whose chain is ergodic for the target nonetheless. No gradients are used:
    ``diagnostics_["n_grad_evals"]`` counts log-density evaluations for this method.

    **A reference sampler, not one to fit networks with.** A random walk needs about K
    times more steps than a gradient method for the same progress: with 121 parameters (a
    10-unit network on the diabetes data) its chains still disagreed (R-hat 1.15-1.17)
    after 350,000 steps each, where NUTS converges in seconds. Use it to check the gradient
    methods on small models, or for likelihoods without gradients; for a network, use
    ``method="nuts"`` (or the default ``"auto"``). Its ConvergenceWarning says so. The
    noise precision, output layer and ReLU scale moves are those of :class:`NUTS`.

    Parameters
    ----------
    n_warmup : int, default=5000
        Iterations per chain discarded before draws are kept.
    gamma : float, default=1.0
        Multiplier of the optimal scaling 2.4^2 / K: below 1 for higher acceptance, above
        for bolder moves.
    t0 : int, default=500
        Iteration from which the proposal uses the chain's covariance.
    t_adapt : int, default=100
        Iterations between refreshes of the proposal (and of its Cholesky factor, O(K^3)).
    variant : {"dense", "diagonal"}, default="dense"
        ``"dense"`` uses the full covariance (it captures correlated weights, at O(K^2)
        memory and work per step; a warning is raised above 1000 parameters);
        ``"diagonal"`` only the variances.
    thin : int, default=1
        Keep every ``thin``-th state after warm-up: ``n_samples`` draws then cost
        ``n_samples * thin`` steps, in the memory of ``n_samples``.

    Examples
    --------
    >>> from skbnn.methods import AdaptiveMetropolis
    >>> AdaptiveMetropolis(variant="diagonal").get_params()["variant"]
    'diagonal'
    """

    name = "amcmc"
    _kind = kchain.RANDOM_WALK
    _uses_step_size = False
    _parameter_constraints: dict = {
        **HMCFamily._parameter_constraints,
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "t0": [Interval(Integral, 2, None, closed="left")],
        "t_adapt": [Interval(Integral, 1, None, closed="left")],
        "variant": [StrOptions({"dense", "diagonal"})],
    }

    def __init__(
        self,
        n_chains: int = _SHARED["n_chains"],
        n_warmup: int = 5000,
        gamma: float = 1.0,
        t0: int = 500,
        t_adapt: int = 100,
        variant: str = "dense",
        noise_update: str = _SHARED["noise_update"],
        gibbs_output_layer: bool = _SHARED["gibbs_output_layer"],
        rescale_units: bool = _SHARED["rescale_units"],
        thin: int = 1,
        init: str = _SHARED["init"],
    ):
        store_params(self, locals())

    @property
    def metric(self) -> str:
        """The chain driver's name for the proposal's shape."""
        return self.variant

    def _title(self) -> str:
        return "ADAPTIVE METROPOLIS"

    def _check_target(self, target) -> None:
        if self.variant == "dense" and target.n_params > DENSE_WARN_PARAMS:
            warn(
                f"AdaptiveMetropolis(variant='dense') keeps a {target.n_params} x "
                f"{target.n_params} covariance per chain and updates it at every step "
                f"(O(K^2)); above {DENSE_WARN_PARAMS} parameters use the diagonal one, "
                f"{self._fix(variant='diagonal')}, or a gradient method (NUTS, MALA).",
                SlowFitWarning,
            )

    def _coarse_advice(self, n_kept: int, wanted: int) -> str:
        # the draws the error asks for, first: a switch to NUTS at the same n_samples
        # can stay as coarse
        return (
            f"; draw more, the estimator's n_samples={wanted} (now {n_kept}); a random "
            "walk over a network's parameters mixes far too slowly to fit it "
            "(AdaptiveMetropolis is a reference sampler): use method='nuts', or the "
            "default method='auto'"
        )

    def _settings(self):
        return {
            "gamma": self.gamma,
            "t0": self.t0,
            "t_adapt": self.t_adapt,
        }
