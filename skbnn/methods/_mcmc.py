"""The chain driver shared by the HMC family: dispersed starts, Stan's warm-up windows,
threads over chains, progress bar, draws and diagnostics.

The driver knows its samplers through their hooks (``_settings``, ``_thin``, ``_betas``,
``_stop_rule``, ``_kernel_diagnostics``, ...) and their block kernel; the roles it runs
live beside it: warm-up in ``_warmup``, the chains' blocks and their scheduling in
``_chains``, replica exchange in ``_tempering``, diagnostics and sampling until converged
in ``_convergence``, the starts in ``_starts``.
"""

from __future__ import annotations

import copy
import inspect
import math
import time
from dataclasses import dataclass, field

import numba
import numpy as np
from joblib import effective_n_jobs
from sklearn.base import clone

from ..exceptions import ConvergenceWarning, SlowFitWarning, warn
from ..kernels import chain as kchain
from ..kernels import density as knet
from ..kernels.linalg import DENSE, DIAGONAL, LOW_RANK
from ..log_posterior import NoiseMode
from ..posterior import WeightedDraws
from ..utils import backend_elsewhere, seed_sequence
from ._base import BaseMethod, FitResult
from ._chains import (
    ChainBlocks,
    ChainState,
    ResumeState,
    Runner,
    grad_evals,
    new_chain,
    restore,
    saved,
)
from ._convergence import (
    MIN_TIMED_DRAWS,
    StopRule,
    chain_diagnostics,
    convergence_message,
    extend_until_converged,
)
from ._modes import weigh_modes
from ._optim import NoiseHead
from ._progress import SLOW_FIT, ProgressBar, duration
from ._records import ChainDiagnostics
from ._sampler_params import SAMPLER_CONSTRAINTS
from ._starts import finite_start, map_starts
from ._tempering import ReplicaExchange, ladder_betas
from ._warmup import longest_window, restart_step_size, stan_windows


def _round_up(seconds: float) -> float:
    """``seconds`` rounded up to two significant digits, as a warning prints a bound."""
    scale = 10.0 ** (math.floor(math.log10(seconds)) - 1)
    value = round(math.ceil(seconds / scale) * scale, 12)
    return int(value) if value >= 10 else value


#: The kernels' kind of each ``metric`` option (:mod:`skbnn.kernels.linalg`)
METRIC_KINDS = {"diagonal": DIAGONAL, "diagonal_grad": DIAGONAL, "dense": DENSE,
                "low_rank": LOW_RANK}  # fmt: skip

#: The kernels' code of each noise mode a sampler updates (any other is held fixed)
NOISE_UPDATES = {NoiseMode.GIBBS: kchain.NOISE_GIBBS, NoiseMode.MARGINAL: kchain.NOISE_MARGINAL}

#: The block kernel of each transition kind of :mod:`skbnn.kernels.chain`.
_BLOCK_KERNELS = {
    kchain.NUTS: kchain.run_nuts_block,
    kchain.HMC: kchain.run_hmc_block,
    kchain.MALA: kchain.run_mala_block,
    kchain.RANDOM_WALK: kchain.run_am_block,
    kchain.MCLMC: kchain.run_mclmc_block,
    kchain.MAMS: kchain.run_mams_block,
}


@dataclass
class _Plan:
    """What a run fixes before its chains start."""

    n_samples: int
    #: kept draws per chain (fewer when ``max_time`` cuts the first draws short)
    n_keep: int
    #: iterations per chain: warm-up, then ``n_keep * thin``
    n_iter: int
    thin: int
    #: the metric's kind (:data:`skbnn.kernels.linalg.DIAGONAL`, ``DENSE``, ``LOW_RANK``)
    kind: int
    #: draws of a slow window that a low-rank metric's estimate keeps (0: Welford sums)
    window: int
    #: the kernels' :data:`skbnn.kernels.chain.SETTINGS`
    settings: np.ndarray
    #: the kernel's ``moves`` and ``after`` arguments
    moves: bool | None
    after: object
    #: Stan's windows, ``(in_window, end_window)`` per warm-up iteration
    sched: np.ndarray
    compile_time: float
    #: the progress bars' verbosity (a sampler ``init``'s run shows its own)
    verbose: int = 0
    #: the sampler this one starts, when it runs as that sampler's ``init``
    outer: object = None


@dataclass
class _Fleet:
    """A run's chains. ``ladders[c]`` holds chain c's replicas, coldest first;
    ``chains[c]`` is its replica at beta = 1, the one whose draws are kept."""

    chains: list[ChainState]
    ladders: list[list[ChainState]]
    #: per chain, the generator of its swaps (tempering only)
    swap_rngs: list
    #: inverse temperatures of each ladder's replicas, 1 first
    betas: np.ndarray
    init_grad_evals: int = 0
    init_time: float = 0.0
    exchange: ReplicaExchange | None = None
    extension: dict | None = field(default=None)

    @property
    def replicas(self) -> list[ChainState]:
        return [r for ladder in self.ladders for r in ladder]


class HMCFamily(BaseMethod):
    """Chain driver and warm-up shared by NUTS, HMC, MALA and AdaptiveMetropolis (not
    public): each sampler gives its transition kind and the hooks below."""

    #: The transition: ``NUTS``, ``HMC``, ``MALA`` or ``RANDOM_WALK`` of
    #: :mod:`skbnn.kernels.chain`. It chooses the block kernel (``_block_kernel``) and the
    #: settings' ``kind``.
    _kind: int

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_kind" in cls.__dict__:
            cls._block_kernel = staticmethod(_BLOCK_KERNELS[cls._kind])
        if "__init__" in cls.__dict__:
            # the shared constraints that name a knob of this sampler only: not every
            # sampler has every shared knob (MCLMC has no acceptance target)
            knobs = inspect.signature(cls.__init__).parameters
            cls._parameter_constraints = {
                k: v for k, v in cls._parameter_constraints.items() if k in knobs
            }

    _parameter_constraints: dict = SAMPLER_CONSTRAINTS

    def likelihood(self, likelihood: str, infer_noise: bool = True) -> str:
        """The heteroscedastic Gaussian in place of the Gaussian with ``heteroscedastic``
        (see :class:`~skbnn.methods._optim.NoiseHead`)."""
        if (
            getattr(self, "heteroscedastic", False) is False
            and getattr(self, "noise_df", None) is None
        ):
            return likelihood
        return NoiseHead.likelihood(self, likelihood, infer_noise)

    @property
    def noise_handling(self) -> str:
        """How the target treats an unknown Gaussian noise: ``noise_update``."""
        return self.noise_update

    #: Whether the kernel integrates with a step size (tuned by Stan's heuristic and dual
    #: averaging) and adapts the metric over Stan's windows; a random walk does neither.
    _uses_step_size = True
    #: Whether a cold fit's helper process compiles the bookkeeping after each transition
    #: (:func:`skbnn.kernels.chain.compiled_after`) beside the network kernel: for NUTS,
    #: whose block kernel is otherwise the longer of the two processes' work; the other
    #: samplers' kernels compile in less than the helper's, so they compile it themselves.
    _after_aside = False

    def _settings(self) -> dict:
        """The kernel's fields of :data:`skbnn.kernels.chain.SETTINGS` (the driver sets the
        kind, noise, metric, Gibbs-move and thinning fields)."""
        raise NotImplementedError

    def _thin(self) -> int:
        """Transitions per kept draw after warm-up: ``thin``, for a sampler that has it."""
        return getattr(self, "thin", 1)

    def _betas(self) -> np.ndarray:
        """Inverse temperatures of each chain's replicas, 1 first (one: no tempering, for
        a sampler without ``n_temperatures``)."""
        if not hasattr(self, "n_temperatures"):
            return np.ones(1)
        return ladder_betas(self.n_temperatures, self.max_temperature)

    def _stop_rule(self) -> StopRule:
        """When the chains are extended past their first draws: by ``target_rhat``,
        ``target_ess`` and ``max_time``, for a sampler that has them (else never)."""
        if not hasattr(self, "target_rhat"):
            return StopRule()
        return StopRule(self.target_rhat, self.target_ess, self.max_time)

    def _kernel_diagnostics(self, trace: np.ndarray, field: dict, out: ChainDiagnostics) -> None:
        """Add to ``out`` the figures only this sampler's kernel records, from the kept
        draws' ``trace`` (chains, draws, fields; ``field`` maps a name of
        :data:`skbnn.kernels.chain.TRACE_FIELDS` to its column)."""

    def _title(self) -> str:
        """The sampler's name at the head of its ConvergenceWarning."""
        return self.name.upper()

    def _check_target(self, target) -> None:
        """Hook for method-specific checks or warnings about the target."""

    def _max_gradients(self) -> int:
        """The most gradient passes one iteration of a chain makes."""
        return 1

    @property
    def _n_modes(self) -> int:
        """The optima the chains start from (1: dispersed starts, no modes)."""
        return getattr(self, "n_modes", 1)

    def _given_starts(self, target, starts=None) -> list[np.ndarray]:
        """The rows of an array ``init`` (or of ``starts``, a sampler ``init``'s chain
        ends), one per chain, checked against the target."""
        given = self.init if starts is None else starts
        starts = np.array(given, dtype=np.float64, ndmin=2)
        if starts.ndim != 2 or starts.shape[1] != target.n_params:
            raise ValueError(
                f"init gives starts of shape {np.shape(given)}, and this network has "
                f"n_params={target.n_params}: pass an array of shape "
                f"(n_chains, {target.n_params}) or ({target.n_params},)"
            )
        rows = starts.shape[0]
        if rows not in (1, self._n_modes, self.n_chains):
            raise ValueError(
                f"init gives {rows} starts for n_chains={self.n_chains} and "
                f"n_modes={self.n_modes}: pass one row per chain, one per mode, or one "
                f"for all"
            )
        for c, start in enumerate(starts):
            if not np.isfinite(target.logp(start)):
                raise ValueError(
                    f"init's start {c} has a log posterior density of "
                    f"{target.logp(start)}: every start must have a finite one"
                )
        # chain c samples mode c % n_modes, so one row per mode lands where an optimum would
        return [starts[c % rows].copy() for c in range(self.n_chains)]

    def _check_knobs(self) -> None:
        """Every knob valid, and valid together (a sampler ``init``'s too)."""
        self._validate_params()
        self._check_modes()
        self._check_init()

    def _check_init(self) -> None:
        """A sampler ``init`` must run on this sampler's target and hand over one chain
        end per chain, per mode or for all, its modes being this sampler's: checked before
        either runs."""
        stage = self.init
        if not isinstance(stage, HMCFamily):
            return
        stage._check_knobs()
        name = type(stage).__name__
        for knob in ("heteroscedastic", "noise_df", "noise_update"):
            # both shape the target (the likelihood, the noise's handling) the two share
            if getattr(stage, knob, None) != getattr(self, knob, None):
                raise ValueError(
                    f"init={name}(...) must sample the same model as this "
                    f"{type(self).__name__}: its {knob}={getattr(stage, knob, None)!r} "
                    f"differs from {knob}={getattr(self, knob, None)!r}; give both the same"
                )
        if stage.n_chains not in (1, self._n_modes, self.n_chains):
            raise ValueError(
                f"init={name}(n_chains={stage.n_chains}) hands over one start per chain, "
                f"and this {type(self).__name__} has n_chains={self.n_chains} and "
                f"n_modes={self.n_modes}: give init n_chains={self.n_chains}"
            )
        if self._n_modes > 1 and stage._n_modes != self._n_modes:
            # chain c of either samples mode c % n_modes: the modes must be the same ones
            raise ValueError(
                f"init={name}(n_modes={stage._n_modes}) explores other modes than this "
                f"{type(self).__name__}'s n_modes={self.n_modes}: give both the same n_modes"
            )

    def _init_name(self) -> str:
        """What ``diagnostics_["init"]`` calls the starts: ``"prior"``, ``"map"``, a sampler
        ``init``'s name, or ``"array"``."""
        if isinstance(self.init, str):
            return self.init
        return self.init.name if isinstance(self.init, HMCFamily) else "array"

    def _sampler_starts(self, target, plan: _Plan, seed, n_jobs) -> tuple[list, int]:
        """The starts a sampler ``init`` hands over, the last positions of its chains,
        and the gradient evaluations its run took (its own starts' included)."""
        _, fleet = self.init._run_chains(
            target, plan.n_samples, seed, n_jobs, plan.verbose, announce=False, outer=self
        )
        ends = np.array([chain.arrays.q for chain in fleet.chains])
        n_grad = fleet.init_grad_evals + sum(grad_evals(c) for c in fleet.replicas)
        return self._given_starts(target, ends), int(n_grad)

    def _mode_of_chain(self) -> np.ndarray:
        """The mode each chain samples: chain ``c`` starts at optimum ``c % n_modes``."""
        return np.arange(self.n_chains) % self._n_modes

    def _check_modes(self) -> None:
        if self._n_modes > self.n_chains:
            raise ValueError(
                f"n_modes={self.n_modes} needs at least one chain per mode, and there are "
                f"n_chains={self.n_chains}: use "
                f"{self._fix(n_chains=self.n_modes)}"
            )

    def _more_modes_fix(self, n_modes: int) -> tuple[str, int]:
        """This sampler with ``n_modes`` modes and as many chains per mode as now (a
        sampler ``init`` exploring the same modes changed alike), as a warning's fix;
        and its ``n_chains``."""

        def scaled(method):
            per_mode = method.n_chains / method._n_modes
            return {"n_modes": n_modes, "n_chains": math.ceil(per_mode * n_modes)}

        changes = scaled(self)
        init = getattr(self, "init", None)
        if isinstance(init, HMCFamily) and init._n_modes == self._n_modes:
            changes["init"] = clone(init).set_params(**scaled(init))
        return self._fix(**changes), changes["n_chains"]

    def _coarse_advice(self, n_kept: int, wanted: int) -> str:
        """What the warning advises when the predictive's Monte Carlo error is material
        (appended to that sentence): ``wanted`` draws in all, where ``n_kept`` were kept."""
        return (
            f"; draw more, as the error falls with the square root of the draws: the "
            f"estimator's n_samples={wanted} (now {n_kept})"
        )

    #: What a divergence is for this kernel, as the warning counts them
    _divergent_unit = "divergent transitions"

    def _divergence_advice(self) -> str:
        """What the warning advises after divergences: half the distance of the acceptance
        target to 1, with the digits that keep it below 1."""
        gap = (1 - self.target_accept) / 2
        accept = round(1 - gap, max(3, math.ceil(-math.log10(gap)) + 1))
        return (
            "divergent transitions: the step size is too large for parts of the "
            f"posterior; raise the acceptance target: {self._fix(target_accept=accept)}"
        )

    def _n_keep(self, n_samples: int) -> int:
        """Kept draws per chain for ``n_samples`` in all."""
        return math.ceil(n_samples / self.n_chains)

    def _n_iter(self, n_samples: int) -> int:
        """Iterations per chain: the warm-up, then the kept draws' thinned iterations."""
        return self.n_warmup + self._n_keep(n_samples) * self._thin()

    def _stages(self) -> list[HMCFamily]:
        """The samplers a run chains, in the order they run: a sampler ``init``'s first."""
        return [*(self.init._stages() if isinstance(self.init, HMCFamily) else ()), self]

    def _projection(self, n_samples: int, n_jobs, pass_time: float) -> tuple[float, str]:
        """The most seconds this sampler's chains may take here at ``pass_time`` seconds a
        gradient pass (``max_time`` when it bounds them), and the sum they come from."""
        if self._stop_rule().max_time is not None:
            return self.max_time, f"at most max_time={self.max_time!r} seconds of sampling"
        n_replicas = self.n_chains * len(self._betas())
        n_iter = self._n_iter(n_samples)
        threads = max(1, min(effective_n_jobs(n_jobs), n_replicas))
        passes = math.ceil(n_replicas / threads) * n_iter * self._max_gradients()
        return passes * pass_time, (
            f"{n_iter} iterations x {n_replicas} chains on {threads} "
            f"thread{'s' if threads > 1 else ''}, each "
            f"iteration up to {self._max_gradients()} gradient passes"
        )

    def _warn_late_warmup(self, share: float, elapsed: float, outer) -> None:
        """A SlowFitWarning when ``max_time`` passed with ``share`` of the warm-up done,
        ``elapsed`` seconds in: warm-up is never cut short, so the run will overrun the
        bound. Its fix is a bound twice the warm-up's time at the pace so far (early
        iterations, before the step size adapts, are the slow ones)."""
        if not self._slow_warning:
            return
        max_time = self._stop_rule().max_time
        ran = f"{elapsed:.2g} s" if elapsed < 10 else duration(elapsed)
        text = (
            f"{type(self).__name__}'s warm-up has run {ran}, past max_time={max_time:g} s, "
            f"with {share:.0%} of it done. max_time does not cut warm-up short (an "
            "unadapted chain samples badly)"
        )
        faster = "For an answer within the bound: method='ensemble' or method='laplace'"
        if share > 0:
            wanted = _round_up(2 * elapsed / share)
            fix = (
                self._fix(max_time=wanted)
                if outer is None
                else outer._fix(init=clone(self).set_params(max_time=wanted))
            )
            text += (
                f", so at this pace warm-up alone takes about {duration(elapsed / share)}. "
                f"{faster}; or a bound the warm-up fits in: {fix}"
            )
        else:
            text += f". {faster}"
        warn(text + ".", SlowFitWarning)

    def _open_stages(self) -> list[HMCFamily]:
        """The stages whose sampling ``max_time`` could bound, and does not."""
        return [
            s
            for s in self._stages()
            if "max_time" in s.get_params(deep=False) and s.max_time is None
        ]

    def _bound_changes(self, share: float) -> dict:
        """The knobs that put ``max_time=share`` on every open stage: the fix that
        bounds the whole run."""
        changes = {}
        if isinstance(self.init, HMCFamily):
            changes["init"] = clone(self.init).set_params(**self.init._bound_changes(share))
        if self in self._open_stages():
            changes["max_time"] = share
        return changes

    def _warn_if_slow(self, target, n_samples: int, n_jobs) -> None:
        """A SlowFitWarning before any chain starts when the run, a sampler ``init``'s
        included, may take over ``SLOW_FIT`` seconds here: a timed gradient pass (never
        part of the result) times the most passes each stage's iterations may make, on
        the threads its chains share. A run whose every stage has ``max_time`` is bounded
        already."""
        stages = self._stages()
        if not self._slow_warning or all(s._stop_rule().max_time is not None for s in stages):
            return
        evaluate = target.evaluator()
        theta = finite_start(target, np.random.default_rng(0))
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            evaluate(theta)
            times.append(time.perf_counter() - t0)
        projections = [(s, *s._projection(n_samples, n_jobs, min(times))) for s in stages]
        projected = sum(seconds for _, seconds, _ in projections)
        # a stage the user bounded takes the time they gave it: only the rest is news
        unbounded = sum(t for s, t, _ in projections if s._stop_rule().max_time is None)
        if unbounded <= SLOW_FIT:
            return
        what = " then ".join(type(s).__name__ for s in stages)
        if len(stages) == 1:
            how = projections[0][2]
        else:
            how = "; ".join(f"{type(s).__name__} {text}" for s, _, text in projections)
        # ten minutes in all, shared by the stages a bound is missing from
        open_stages = self._open_stages()
        bound = (
            f" Or bound the sampling time: "
            f"{self._fix(**self._bound_changes(600 // len(open_stages)))}."
            if open_stages
            else ""
        )
        warn(
            f"{what} may take up to {duration(projected)} here: {how}, over "
            f"{target.n_rows} rows and {target.n_params} parameters "
            f"({min(times) * 1e3:.2g} ms a pass). For an answer in seconds to minutes: "
            "method='auto' (the default; NUTS where it is fast, then MCLMC from eight optima "
            "or the deep ensemble), "
            f"method='ensemble' or method='vi'; method='laplace' also gives the evidence.{bound}",
            SlowFitWarning,
        )

    @property
    def can_resume(self) -> bool:
        """Whether a fit's chains can be continued (``warm_start``): not with parallel
        tempering or sampling until converged."""
        self._validate_params()  # the hooks read the knobs
        return len(self._betas()) == 1 and not self._stop_rule().extends

    def _extends(self) -> bool:
        """Whether sampling goes on until ``target_rhat`` / ``target_ess`` hold or
        ``max_time`` runs out (NUTS, HMC and MALA)."""
        if not self._stop_rule().extends:
            return False
        if len(self._betas()) > 1:
            raise ValueError(
                "target_rhat, target_ess and max_time need n_temperatures=1: parallel "
                "tempering's replicas cannot be extended yet"
            )
        return True

    def run(self, target, n_samples, random_state, n_jobs, verbose, resume=None) -> FitResult:
        """Run ``n_chains`` chains in threads; keep ``n_samples`` draws in total.

        Each chain starts from its own draw from the prior (dispersed relative to the
        posterior, as R-hat assumes) with the prior variances as its initial inverse mass
        matrix, and is seeded by its own child of ``random_state``'s ``SeedSequence``, so the
        draws do not depend on ``n_jobs``. ``resume`` (a previous result's ``state``)
        continues those chains instead, to ``n_samples`` draws.
        """
        t_start = time.perf_counter()
        plan, fleet = self._run_chains(target, n_samples, random_state, n_jobs, verbose, resume)
        return self._assemble(target, plan, fleet, t_start)

    def _run_chains(
        self, target, n_samples, random_state, n_jobs, verbose, resume=None, announce=True,
        outer=None,
    ):  # fmt: skip
        """Plan, start and run the chains: the ``(plan, fleet)`` that :meth:`_assemble`
        turns into a result, or whose chains' last positions start another sampler's,
        ``outer`` (``announce=False``: the sampler it starts announced the whole run's
        time)."""
        self._check_knobs()
        if resume is not None:
            # a private copy: a continuation that fails leaves the stored state as it was
            resume = copy.deepcopy(ResumeState.of(resume))
        plan = self._plan(target, n_samples, resume)
        plan.verbose = verbose
        plan.outer = outer
        if resume is None and announce:
            self._warn_if_slow(target, n_samples, n_jobs)
        fleet = self._start_chains(target, plan, random_state, n_jobs, resume)
        bar = ProgressBar(
            len(fleet.replicas) * plan.n_iter,
            verbose,
            f"{self.name.upper()} {self.n_chains} chains",
        )
        try:
            self._sample(target, plan, fleet, bar, n_jobs, verbose, resume)
        finally:
            bar.close()
            for chain in fleet.replicas:
                chain.ws = None
        return plan, fleet

    def _kernel_settings(self, target) -> np.ndarray:
        """The block kernel's :data:`skbnn.kernels.chain.SETTINGS` for a fit of ``target``."""
        # both exact moves use the conditionals of a Gaussian prior
        gaussian_prior = target.prior_density.gaussian
        gaussian = target.likelihood == "gaussian" and target.noise != NoiseMode.THETA
        # only ReLU and identity units have the scale symmetry; no hidden layer, no units
        symmetric = target.activation in ("identity", "relu") and target.layout.n_layers > 1
        return kchain.make_settings(
            **self._settings(),
            kind=self._kind,
            noise_update=NOISE_UPDATES.get(target.noise, kchain.NOISE_FIXED),
            metric=METRIC_KINDS[self.metric],
            gibbs_output_layer=self.gibbs_output_layer and gaussian and gaussian_prior,
            rescale_units=self.rescale_units and symmetric and gaussian_prior,
            thin=self._thin(),
        )

    def _block_arguments(self, target, settings: np.ndarray | None = None) -> tuple:
        """The block kernel's ``moves`` and ``after`` arguments (see
        :func:`skbnn.kernels.chain.run_nuts_block`) for a fit of ``target`` under
        ``settings`` (by default :meth:`_kernel_settings`)."""
        if settings is None:
            settings = self._kernel_settings(target)
        # None compiles the kernel without the moves this fit never makes
        moves = True if kchain.needs_moves(settings, target.hierarchical) else None
        return moves, kchain.compiled_after(target.kernel_target())

    def _kernels(self, target) -> tuple:
        """The block kernel and the network kernel for ``target``'s codes."""
        return (self._block_kernel, knet.logp_grad_for(*target.kernel_codes))

    def _compiled(self, target, kernels: tuple) -> bool:
        """Whether the block kernel is compiled for this fit's ``moves`` and ``after``
        (a specialization of each), and the network kernel for its codes."""
        kernel, density = kernels
        last_types = tuple(numba.typeof(a) for a in self._block_arguments(target))
        return any(tuple(sig[-2:]) == last_types for sig in kernel.signatures) and bool(
            density.signatures
        )

    def _warm_up(self, tiny, target) -> None:
        """A two-iteration run of the block kernel on ``tiny`` for the fit's ``moves`` and
        ``after``, and the prediction kernel for its activation. With :attr:`_after_aside`,
        the helper process that compiles the network kernel compiles ``after`` too."""
        codes = tiny.kernel_codes
        moves, after = self._block_arguments(target)
        rng = np.random.default_rng(0)
        # the fit's network kernel compiles in another process meanwhile, if it can
        also = (after,) if self._after_aside else ()
        tgt = knet.density_target(tiny.kernel_target(), aside=True, codes=codes, aside_with=also)
        # any valid two-iteration run: numba compiles every branch whatever the values
        settings = kchain.make_settings(
            max_tree_depth=2, max_steps=4, noise_update=kchain.NOISE_GIBBS,
            gibbs_output_layer=1, rescale_units=1, t0=2, t_adapt=4, target_accept=0.8,
            max_delta_energy=1000.0, path_length=1.0, step_jitter=0.1, gamma=1.0,
        )  # fmt: skip
        chain = kchain.make_chain(np.zeros(tiny.n_params), n_stats=3, n_taus=1)
        sched = np.zeros((1, 2), dtype=np.uint8)
        if not self._after_aside:
            # compiled here before the call, which may wait for the helper's network kernel
            after.resolve()
        self._block_kernel(rng, chain, tgt, settings, sched, 0, 2, moves, after)
        if not tgt.density.compiled_aside:
            # the helper process, when there is one, compiles it while the chains run
            knet.forward_batch_for(codes[0]).compile(knet.FORWARD_BATCH_ARGS)

    def _plan(self, target, n_samples: int, resume) -> _Plan:
        """Check a continuation, then fix the run's lengths, the kernel's settings and its
        warm-up schedule, and compile the kernels."""
        n_warmup = self.n_warmup
        n_keep = self._n_keep(n_samples)
        thin = self._thin()
        if resume is not None and n_keep < resume.n_keep:
            raise ValueError(
                f"warm_start=True continues the chains: n_samples={n_samples} must be at "
                f"least the previous fit's {resume.n_samples}"
            )
        settings = self._kernel_settings(target)
        self._check_target(target)
        moves, after = self._block_arguments(target, settings)
        compile_time = self._compile(target)
        if self._uses_step_size:
            sched = stan_windows(n_warmup)
        else:
            sched = np.zeros((n_warmup, 2), dtype=np.uint8)
        window = longest_window(sched) if self.metric == "low_rank" else 0
        return _Plan(
            n_samples=n_samples, n_keep=n_keep, n_iter=self._n_iter(n_samples), thin=thin,
            kind=METRIC_KINDS[self.metric], window=window, settings=settings, moves=moves,
            after=after, sched=sched, compile_time=compile_time,
        )  # fmt: skip

    def _start_chains(self, target, plan: _Plan, random_state, n_jobs, resume) -> _Fleet:
        """Every chain's replicas at their starts (or as ``resume`` left them)."""
        betas = self._betas()
        root = seed_sequence(random_state)
        chain_seeds = root.spawn(self.n_chains)
        init_grad_evals, init_time = 0, 0.0
        starts = None
        if resume is not None:
            init_grad_evals, init_time = resume.init_grad_evals, resume.init_time
        elif isinstance(self.init, HMCFamily):
            # another sampler explores first, from its own starts; this one samples from
            # where its chains ended (seeds spawned after the chains', as for init="map")
            t0 = time.perf_counter()
            starts, init_grad_evals = self._sampler_starts(target, plan, root.spawn(1)[0], n_jobs)
            init_time = time.perf_counter() - t0
        elif not isinstance(self.init, str):
            starts = self._given_starts(target)
        elif self._n_modes > 1:
            # one optimum per mode, each trained from its own initialization as an
            # ensemble member is: a start short of the optimum sits on the slope, and
            # its chains then sample a worse fit than the mode's; a mode's chains share
            # its start (seeds spawned after the chains', as for init="map")
            t0 = time.perf_counter()
            optima, init_grad_evals = map_starts(
                target, root.spawn(self._n_modes), n_jobs, converged=True
            )
            starts = [optima[m] for m in self._mode_of_chain()]
            init_time = time.perf_counter() - t0
        elif self.init == "map":
            # seeds of their own, spawned after the chains', so init="prior" is unchanged
            t0 = time.perf_counter()
            starts, init_grad_evals = map_starts(target, root.spawn(self.n_chains), n_jobs)
            init_time = time.perf_counter() - t0
        # The cold replica keeps chain c's seed, so n_temperatures=1 draws exactly what it
        # did before tempering existed; the hot ones and the swaps get children of it. A
        # hot replica's draws are never kept: it records each one over the last.
        chains, ladders, swap_rngs = [], [], []
        for c, child in enumerate(chain_seeds):
            start = None if starts is None else starts[c]
            rng = np.random.default_rng(child)
            ladder = [new_chain(target, rng, 1.0, plan.n_keep, plan.kind, start, plan.window)]
            if len(betas) > 1:
                kids = child.spawn(len(betas))
                swap_rngs.append(np.random.default_rng(kids[0]))
                ladder += [
                    new_chain(target, np.random.default_rng(s), b, 1, plan.kind, window=plan.window)
                    for s, b in zip(kids[1:], betas[1:], strict=True)
                ]
            chains.append(ladder[0])
            ladders.append(ladder)
        if resume is not None:
            for chain, state in zip(chains, resume.chains, strict=True):
                restore(chain, state, plan.n_keep, target.hierarchical)
        return _Fleet(chains, ladders, swap_rngs, betas, init_grad_evals, init_time)

    def _block_length(self, n_iter: int, verbose: int, n_workers: int, timed: bool,
                      tempered: bool) -> int:  # fmt: skip
        """Iterations a chain runs between two hand-overs of its thread."""
        block = max(1, n_iter // 50) if verbose > 0 else n_iter
        if tempered:
            # replicas exchange states after every iteration
            block = 1
        elif n_workers < self.n_chains or timed:
            # more chains than threads: run short blocks so every thread can switch to the
            # least advanced chain; otherwise 3 chains on 2 threads take two chain-lengths.
            # With max_time, the first n_samples draws also end at the deadline, at the end
            # of a block, so a block is the most the run can overrun it by after warm-up.
            block = min(block, max(1, n_iter // 40))
        return block

    def _stops(self, plan: _Plan, block: int, resume) -> list:
        """The iterations at which the chains' blocks end."""
        n_warmup, n_iter = self.n_warmup, plan.n_iter
        # blocks end at every window end, where the metric is updated between kernel calls
        # (and at the end of warm-up, to count its cost; blocks never change the draws)
        stops = sorted(
            {*range(block, n_iter, block), *(np.flatnonzero(plan.sched[:, 1]) + 1), n_iter}
            | ({n_warmup} if 0 < n_warmup < n_iter else set())
        )
        if resume is not None:
            # the previous fit ran its iterations; the chains go on from there
            stops = [resume.n_iter, *(x for x in stops if x > resume.n_iter)]
        return stops

    def _exchange(self, target, plan: _Plan, fleet: _Fleet) -> ReplicaExchange:
        """Parallel tempering of every chain's ladder."""
        adapts = self._uses_step_size
        return ReplicaExchange(
            fleet.ladders,
            fleet.swap_rngs,
            fleet.betas * target.beta,
            target,
            # rounds are single iterations. The ladder adapts at the metric's window
            # ends but the last, so the last (longest) window estimates every
            # replica's metric at its final beta; a new beta restarts the step size.
            adapt_rounds=np.flatnonzero(plan.sched[:, 1])[:-1] if adapts else [],
            on_new_beta=(lambda c: restart_step_size(c, plan.kind)) if adapts else None,
        )

    def _sample(self, target, plan: _Plan, fleet: _Fleet, bar, n_jobs, verbose, resume) -> None:
        """Warm up and sample every chain, then extend them when the stop rule asks."""
        n_warmup, thin, chains = self.n_warmup, plan.thin, fleet.chains
        n_workers = max(1, min(effective_n_jobs(n_jobs), len(fleet.replicas)))
        extends = self._extends()
        max_time = self._stop_rule().max_time
        timed = extends and max_time is not None
        tempered = len(fleet.betas) > 1
        block = self._block_length(plan.n_iter, verbose, n_workers, timed, tempered)
        stops = self._stops(plan, block, resume)
        blocks = ChainBlocks(
            self, plan.settings, plan.moves, plan.after, plan.sched, stops, n_warmup,
            plan.n_keep, plan.kind, self.metric,
        )  # fmt: skip
        blocks.bar = bar
        for chain in fleet.replicas:
            chain.pos, chain.time = (0 if resume is None else 1), 0.0
        if tempered:
            fleet.exchange = self._exchange(target, plan, fleet)
        # Warm-up always runs to its end (an unadapted chain samples badly), and a chain
        # keeps at least MIN_TIMED_DRAWS draws, so a deadline that passes before then ends
        # sampling at the first block past that point.
        min_stop = n_warmup + thin * min(plan.n_keep, MIN_TIMED_DRAWS)
        runner = Runner(
            blocks, chains, n_workers, n_jobs, exchange=fleet.exchange,
            # chains go where joblib's backend sends its tasks when that is another
            # process (parallel_config(backend="dask"), "loky"); threads otherwise.
            # Tempering's replicas swap states every iteration and max_time needs one
            # clock: both stay local.
            elsewhere=not tempered and not timed and backend_elsewhere(),
            min_blocks=next(i + 1 for i, s in enumerate(stops) if s >= min_stop),
        )  # fmt: skip
        t_budget = time.perf_counter()
        if timed:
            runner.deadline = t_budget + max_time
            runner.on_late_warmup = lambda share: self._warn_late_warmup(
                share, time.perf_counter() - t_budget, plan.outer
            )
        runner.run(first=True)
        cut = timed and chains[0].pos < len(stops)
        if cut:
            # the deadline passed before the first n_samples draws were complete: keep
            # the complete draws of the blocks every chain ran
            del stops[chains[0].pos :]
            plan.n_keep = (stops[-1] - n_warmup) // thin
            blocks.n_keep = plan.n_keep
            for chain in chains:
                chain.keep(slice(None, plan.n_keep))
        if extends:
            fleet.extension = extend_until_converged(
                self, target, chains, stops, plan.n_keep, thin, block, bar, runner.run,
                t_budget, cut,
            )  # fmt: skip

    def _assemble(self, target, plan: _Plan, fleet: _Fleet, t_start: float) -> FitResult:
        """The kept draws, the diagnostics and what a continuation needs."""
        chains, n_keep, k = fleet.chains, plan.n_keep, target.n_outputs
        n_hyper = target.layout.n_layers if target.hierarchical else 0
        draws = np.concatenate([c.arrays.draws for c in chains])[: plan.n_samples]
        taus = np.concatenate([c.arrays.taus for c in chains])[: plan.n_samples]
        noise = taus[:, :k] if target.likelihood == "gaussian" else None
        diagnostics = self._diagnostics(target, chains, n_keep)
        weights = None
        if self._n_modes > 1:
            mode_of_draw = np.repeat(self._mode_of_chain(), n_keep)[: plan.n_samples]
            weights = weigh_modes(
                target, draws, noise, mode_of_draw, self.mode_weights, diagnostics
            )
        posterior = WeightedDraws(
            draws,
            weights=weights,
            noise_precision=noise,
            chain_shape=(self.n_chains, n_keep),
            heteroscedastic=target.likelihood == "heteroscedastic",
            min_var=target.min_var,
            noise_df=target.noise_df,
        )
        if n_hyper:
            posterior.prior_precision = taus[:, k:].copy()
        if fleet.exchange is not None:
            # the hot replicas' work is part of the cost of every kept draw
            ladders = fleet.ladders
            diagnostics.n_grad_evals = int(sum(grad_evals(c) for c in fleet.replicas))
            diagnostics.n_grad_evals_per_chain = np.array(
                [int(sum(grad_evals(c) for c in ladder)) for ladder in ladders]
            )
            diagnostics.chain_time = np.array([sum(c.time for c in ld) for ld in ladders])
            diagnostics.tempering = fleet.exchange.summary()
        if fleet.extension is not None:
            diagnostics.update(fleet.extension)
        state = None
        if self.can_resume:
            state = ResumeState(
                n_keep=n_keep, n_iter=plan.n_iter, n_samples=plan.n_samples,
                init_grad_evals=fleet.init_grad_evals, init_time=fleet.init_time,
                chains=[saved(c) for c in chains],
            )  # fmt: skip
        diagnostics.compile_time = plan.compile_time
        diagnostics.init = self._init_name()
        diagnostics.init_grad_evals = fleet.init_grad_evals
        diagnostics.init_time = fleet.init_time
        # what the chains spent on warm-up (their MAP starts: init_grad_evals)
        diagnostics.warmup_grad_evals = int(sum(c.warmup_grad_evals or 0 for c in chains))
        diagnostics.wall_time = time.perf_counter() - t_start
        self._warn(diagnostics)
        return FitResult(posterior=posterior, diagnostics=diagnostics, state=state)

    def _diagnostics(self, target, chains: list[ChainState], n_keep: int) -> ChainDiagnostics:
        return chain_diagnostics(self, target, chains, n_keep)

    def _warn(self, diag: ChainDiagnostics) -> None:
        message = self._convergence_message(diag)
        if message is not None:
            warn(message, ConvergenceWarning)

    def _convergence_message(self, diag: ChainDiagnostics) -> str | None:
        """The ConvergenceWarning's text for a run's diagnostics, or None when nothing is
        wrong (see :func:`~skbnn.methods._convergence.convergence_message`)."""
        return convergence_message(self, diag)


# a sampler of the family may start the chains where its own ended (``init=MCLMC(...)``)
HMCFamily._parameter_constraints = {
    **SAMPLER_CONSTRAINTS,
    "init": [*SAMPLER_CONSTRAINTS["init"], HMCFamily],
}
