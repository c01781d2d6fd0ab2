"""The No-U-Turn Sampler."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import Interval

from ..kernels import chain as kchain
from ._convergence import StopRule, e_bfmi
from ._mcmc import _HMCFamily
from ._tempering import TEMPERING_CONSTRAINTS, ladder_betas


class NUTS(_HMCFamily):
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
    n_chains : int, default=4
        Independent chains, run in parallel threads over the estimator's ``n_jobs``. Four is
        the minimum for a trustworthy R-hat (Vehtari et al. 2021).
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
    noise_update : {"marginal", "gibbs"}, default="marginal"
        How an unknown Gaussian noise precision ``tau ~ Gamma(a, b)`` is sampled (ignored
        when ``noise_std`` is fixed and for classifiers). ``"marginal"``: NUTS explores the
        weights' marginal posterior, with ``tau`` integrated out analytically (a Student-t
        shaped likelihood in the residual sum of squares), and ``tau`` is drawn exactly from
        ``Gamma(a + n/2, b + SSR/2)`` after each trajectory. The joint draws are exact and
        the sampler never has to wait for alternating updates to move the weights and the
        noise together. ``"gibbs"``: NUTS explores the weights given the current ``tau``,
        then ``tau`` is drawn from the same conditional (Neal 1996): cheaper to reason
        about, but the two blocks are strongly coupled in a network that can fit its noise,
        so the chain mixes more slowly.
    gibbs_output_layer : bool, default=False
        For regression, also draw the output layer's weights and biases from their exact
        Gaussian conditional (given the hidden layers and the noise) after every trajectory.
        The exact draw leaves the posterior unchanged and costs about one gradient. It raised
        the bulk ESS per draw on diabetes (437 -> 620) and Boston (3086 -> 4149), but on
        Boston NUTS then needed longer trajectories (621 vs 350 steps per draw), so ESS per
        second fell by a fifth; off by default until that trade-off is understood. Ignored
        for classifiers.
    rescale_units : bool, default=True
        After every trajectory, move each ReLU (or identity) hidden unit along its exact
        scale symmetry: incoming weights and bias times ``c``, outgoing weights divided by
        ``c``, with ``c`` drawn from its conditional (a generalized inverse Gaussian in
        ``c**2``, by a slice-sampling step; Liu & Sabatti 2000). The network's function does
        not change, so the move needs no pass over the data (the gradient just rescales);
        it carries the chain along the curved ridges that only the prior constrains and
        that the leapfrog integrator crosses slowly. Skipped for tanh and logistic units,
        which have no such symmetry.
    max_tree_depth : int, default=10
        At most ``2**max_tree_depth - 1`` leapfrog steps per draw.
    max_delta_energy : float, default=1000.0
        Energy error that marks a divergent trajectory (Stan's threshold); at least 100,
        because a small one would cut ordinary trajectories and bias the draws.
    n_temperatures : int, default=1
        Replicas per chain for parallel tempering (1: none). Replica ``k`` samples
        ``prior * likelihood**beta_k`` with its own step size and mass matrix, the betas
        running from 1 down to ``1 / max_temperature``; after every iteration neighbouring
        replicas propose to swap states (alternately the even and the odd pairs, Syed et al.
        2021), and only the ``beta = 1`` replica's draws are kept. At the end of every slow
        warm-up window but the last the inner betas are respaced so every pair swaps about
        equally often (a warm-up too short for two windows keeps the geometric ladder). The
        hot replicas carry the chain between modes that local moves leave rarely (sign and
        permutation symmetries of small networks, separated fits of small data sets), at
        ``n_temperatures`` times the cost. The number of replicas a ladder needs grows with
        the square root of the number of well-determined parameters, so it pays on small
        models and data; ``diagnostics_["tempering"]`` reports the swap rates and round trips.
    max_temperature : float, default=10.0
        Temperature ``1 / beta`` of the hottest replica (at least 1).
    init : {"prior", "map"}, default="prior"
        Where each chain starts: ``"prior"``, a draw from the prior (dispersed, as R-hat
        assumes); ``"map"``, its own MAP estimate from its own random initialization
        (scikit-learn's), by the training engine with a short budget (200 L-BFGS
        iterations up to 5,000 rows, else 20 Adam epochs at 0.01), which skips the
        warm-up's long approach from the prior's scale. Each chain's MAP is of a different
        initialization, so chains in different modes still show in R-hat. The gradient
        evaluations it took are ``diagnostics_["init_grad_evals"]``.
    n_modes : int, default=1
        Optima the chains sample around. A network's posterior has many separated modes
        (symmetries and distinct fits), and no chain crosses between them in a run's time,
        so chains started apart disagree however long they run. With ``n_modes > 1`` the
        run first trains ``n_modes`` MAP estimates, each from its own scikit-learn
        initialization (as ``init="map"``, whatever ``init`` says), and starts chain ``c``
        at optimum ``c % n_modes``; ``n_chains`` must be at least ``n_modes``. The
        predictive is the mixture over the modes, weighted by ``mode_weights``, and
        its Monte Carlo error is judged within each mode (from the ESS of its own
        chains), each mode's error counted by its weight: a ConvergenceWarning means
        that the draws estimate the predictive too coarsely, not that the modes differ.
        With ``n_modes=1`` each chain is judged as a mode of its own.
        ``diagnostics_["modes"]`` gives, per mode, its chains, weight, R-hat, ESS,
        divergences and leave-one-out fit. 1 keeps the dispersed starts of ``init``.
    mode_weights : {"equal", "stacking"}, default="equal"
        How the modes are weighted in the predictive (with ``n_modes > 1``).
        ``"equal"``: every mode the same, as an ensemble (and MILE) does; the default,
        because on held-out data it predicted at least as well as stacking, whose weights
        from a few hundred draws per mode overfit their leave-one-out estimates.
        ``"stacking"``: the weights that maximize the leave-one-out log predictive
        density of the modes' mixture, each mode's density at a left-out row estimated by
        Pareto-smoothed importance sampling from its own draws (Yao, Vehtari & Gelman
        2022, stacking for non-mixing Bayesian computations): a mode that predicts worse
        than the others where they differ loses weight, and a chain stuck where it fits
        badly drops out.
    heteroscedastic : bool or "auto", default=False
        Whether the network also predicts the noise of every row (a variance head per
        target, as the members of :class:`DeepEnsemble`), sampled with the weights,
        instead of one noise for all rows; ``"auto"``: where the noise is inferred.
        Regression only. It lets the predictive widen where the data are noisier, which
        one noise precision cannot. On integer targets (counts, ratings) a draw's
        variance can collapse onto the integers it predicts exactly, a density spike the
        Gaussian likelihood rewards without bound: keep one noise there.
    target_rhat, target_ess, max_time : float or None, default=None
        Sample until converged: with any of them set, after the first ``n_samples`` draws
        the chains are extended in blocks, keeping their adapted step size and metric,
        until the split R-hat of the log-likelihood and of the monitored training-row
        outputs is at most ``target_rhat`` and their bulk ESS at least ``target_ess``
        (e.g. 1.01 and 400), or until ``max_time`` seconds of sampling (warm-up included;
        compilation and the MAP starts of ``init="map"`` not) are spent, or the chains
        hold as many draws as they may (20 times theirs without ``max_time``; 512 MB of
        draws with it). ``n_samples`` then caps the kept draws: each chain is thinned
        evenly to its share. No block starts after ``max_time``, and each takes at most
        about half the time left, so a run ends near it. ``max_time`` also bounds the
        first ``n_samples`` draws: when
        it runs out before they are complete, every chain stops at the end of the same
        block (a fortieth of the run), keeping fewer draws. Warm-up is never cut short (an
        unadapted chain samples badly), and a chain keeps at least 20 draws, so a budget
        shorter than warm-up is overrun by the rest of warm-up and those draws.
        ``diagnostics_["stopped_because"]`` is ``"targets_met"``, ``"max_time"``,
        ``"max_draws"``, or with ``max_time`` alone ``"n_samples"`` (the draws were
        complete in time); the progress bar shows the current R-hat and ESS. Not with
        ``n_temperatures > 1``.

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
        **_HMCFamily._parameter_constraints,
        **TEMPERING_CONSTRAINTS,
        "max_tree_depth": [Interval(Integral, 1, 20, closed="both")],
    }

    def __init__(
        self,
        n_chains: int = 4,
        n_warmup: int = 500,
        target_accept: float = 0.8,
        metric: str = "diagonal_grad",
        noise_update: str = "marginal",
        gibbs_output_layer: bool = False,
        rescale_units: bool = True,
        max_tree_depth: int = 10,
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
        self.max_tree_depth = max_tree_depth
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
        return 2**self.max_tree_depth - 1

    def _betas(self) -> np.ndarray:
        return ladder_betas(self.n_temperatures, self.max_temperature)

    def _stop_rule(self) -> StopRule:
        return StopRule(self.target_rhat, self.target_ess, self.max_time)

    def _kernel_diagnostics(self, trace: np.ndarray, field: dict) -> dict:
        # E-BFMI needs the Hamiltonian at each resampled momentum
        depth = trace[:, :, field["tree_depth"]]
        return {
            "e_bfmi": e_bfmi(trace[:, :, field["energy"]]),
            "mean_tree_depth": depth.mean(axis=1),
            "max_tree_depth_hits": (depth >= self.max_tree_depth).sum(axis=1),
        }

    def _settings(self):
        return {
            "target_accept": self.target_accept,
            "max_tree_depth": self.max_tree_depth,
            "max_delta_energy": self.max_delta_energy,
        }
