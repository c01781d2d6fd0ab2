"""Adaptive annealed sequential Monte Carlo with HMC moves: posterior and model evidence."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from scipy.optimize import brentq
from scipy.stats import truncnorm
from sklearn.utils._param_validation import Interval, StrOptions

from ..exceptions import ConvergenceWarning, SlowFitWarning, warn
from ..kernels import density as knet
from ..kernels import smc as ksmc
from ..kernels._compile import compile_for
from ..log_posterior import NoiseMode
from ..posterior import WeightedDraws
from ..utils import seed_sequence, thread_map
from ._base import BaseMethod, FitResult
from ._progress import SLOW_FIT, ProgressBar, duration
from ._records import SMCDiagnostics

#: Stages fewer than which a run rarely takes: the first stage's time times this is the
#: least a run may last, for the SlowFitWarning.
MIN_STAGES = 10
#: The talk's initial tuning: step sizes U(0, 0.1) (in units of the particles' marginal
#: posterior sd, through the mass matrix) and path lengths uniform on 1..50 steps.
INIT_STEP_SIZE_MAX = 0.1
INIT_MAX_LEAPFROG = 50
#: Standard deviation of the truncated-normal perturbation of a selected step size.
STEP_SIZE_JITTER = 0.015
#: Mean acceptance of the last stage's moves below which the particles barely moved.
MIN_FINAL_ACCEPT = 0.1
#: A stage whose weights' effective sample size fell below this many particles rests on
#: about one of them from there on.
MIN_STAGE_ESS = 2.0
#: The share of ``max_time`` kept for the moves at ``lambda = 1`` after the tempering ran
#: out of time and jumped there.
FINAL_MOVES_SHARE = 0.1
#: Particle ranges per thread under ``max_time``: a move stops at the deadline after the
#: ranges already running, so ranges are short enough for a stage to end near it.
TIMED_RANGES_PER_WORKER = 64


class SMC(BaseMethod):
    """Adaptive annealed sequential Monte Carlo with HMC moves (``method="smc"``).

    ``n_samples`` particles start as draws from the prior and follow the tempered targets
    ``pi_t(theta) ~ prior(theta) p(y | theta)^lambda_t`` from ``lambda_0 = 0`` to
    ``lambda_T = 1``. Each stage:

    1. chooses the next exponent by bisection so that the conditional effective sample
       size of the incremental weights (Zhou, Johansen & Aston 2016; the plain ESS of the
       incremental weights when the particles are equally weighted) is ``target_ess * N``,
       or ``lambda = 1`` if that is already above it;
    2. reweights the particles and adds the log mean incremental weight to the log
       evidence;
    3. resamples when the ESS of the weights falls below ``resample_threshold * N``;
    4. moves every particle by ``n_mcmc_steps`` HMC transitions that leave ``pi_t``
       invariant, with the diagonal mass matrix ``M_t = diag(Var_pi_t[theta])^-1`` from
       the weighted particles.

    Each particle has its own step size ``eps`` and number of leapfrog steps ``L``. They
    start as ``eps ~ U(0, 0.1)`` and ``L ~ U{1..50}``; at every later stage each particle
    draws a pair from the previous stage's pairs, chosen with probability proportional to
    the (weighted) Rao-Blackwellized expected squared jumping distance they achieved,
    ``alpha * ||theta' - theta||^2_M / L``, and perturbs it: ``eps`` by a normal with sd
    0.015 truncated to positive values, ``L`` by -1, 0 or +1 with equal probability
    (Buchholz, Chopin & Jacob 2021). Pairs that move the particles far per gradient spread;
    pairs that are rejected or dawdle die out, with no target acceptance rate to choose.

    A Gaussian likelihood's unknown noise precision ``tau ~ Gamma(a, b)`` is integrated out
    analytically, exactly as NUTS's default ``noise_update="marginal"``: the tempered
    likelihood is ``int p(y | theta, tau)^lambda p(tau) dtau``, which keeps the weights and
    the evidence Rao-Blackwellized, and each final particle's ``tau`` is drawn from its
    Gamma conditional. The final weighted particles are the posterior; the product of the
    stages' mean incremental weights estimates the evidence ``p(y | architecture)``, without
    bias for a fixed schedule and fixed kernels (Del Moral, Doucet & Jasra 2006) and nearly
    so with the adapted ones.

    The particles move on threads over the estimator's ``n_jobs``; the momenta and
    acceptance draws come from ``random_state`` alone, so the result does not depend on
    ``n_jobs``.

    Beyond the talk's scheme, for robustness: the exponent keeps the *conditional* ESS, so
    it stays right when the particles are still weighted (no resampling at the last
    stage); particles whose likelihood is NaN get zero weight; if every move of a stage was
    rejected, the next stage draws its pairs uniformly and halves their step sizes; and
    ``max_stages`` bounds the schedule.

    ``diagnostics["smc"]["log_evidence"]`` (the running estimate per stage) is on the
    standardized scale the method sees; the estimators' ``log_evidence_`` adds the
    standardization's Jacobian. ``diagnostics["ess"]`` is the ESS of the final weights,
    which counts duplicated particles as distinct after a resampling; ``n_unique`` counts
    the distinct ones.

    Parameters
    ----------
    target_ess : float, default=0.5
        Conditional ESS, as a fraction of the particles, that each new exponent keeps. Higher
        means more, smaller stages: less variance in the evidence, more time. Below two
        particles (``target_ess * n_samples < 2``) the first stage jumps to ``lambda = 1``
        and its weights fall on one particle, which a ConvergenceWarning reports.
    resample_threshold : float, default=0.5
        Resample when the ESS of the weights falls below this fraction of the particles
        (0 never resamples, 1 resamples every stage).
    resampling : {"systematic", "residual", "multinomial"}, default="systematic"
        Resampling scheme. Systematic has the lowest variance of the three in practice and
        costs one uniform; multinomial is the textbook scheme.
    n_mcmc_steps : int, default=5
        HMC transitions per particle per stage. More steps decorrelate the particles from
        their resampled ancestors (fewer duplicates in the final posterior) at a
        proportional cost. Small stages need less mixing each: ``target_ess=0.9`` with
        one step per stage can give a small network's evidence as precisely as the
        defaults for fewer gradients (doc/performance.md measures it on iris), though
        its final particles predicted worse on the UCI splits (doc/choosing.md). Where a
        stage's modes take many moves to cross, too few moves bias the evidence low.
    max_leapfrog : int, default=1000
        Upper bound on a particle's number of leapfrog steps ``L``.
    max_stages : int, default=1000
        Upper bound on the number of tempering stages. If ``lambda`` has not reached 1 by
        then, the last stage jumps to 1 and a ``ConvergenceWarning`` reports the ESS.
    max_time : float or None, default=None
        Seconds of tempering (compilation not counted), moves included: a stage's moves
        stop at the deadline, also in the first stage, so a run ends near it however
        long one stage would take. When the time runs out before ``lambda`` reaches 1
        (at the latest after 90 % of ``max_time``), the next stage jumps to 1, as at
        ``max_stages``, and moves the particles for the time left: they are then an
        importance sample of the posterior with few distinct weights, the evidence is
        unreliable, and a ``ConvergenceWarning`` says how far the tempering got.
        ``diagnostics_["stopped_because"]`` is ``"max_time"``, ``"max_stages"`` or
        ``"lambda_reached_1"``, and ``diagnostics_["smc"]["moved"]`` is the share of
        each stage's planned transitions that ran.

    Notes
    -----
    The cost grows as rows x particles x stages x ``n_mcmc_steps`` x leapfrog steps: every
    move of every particle evaluates the gradient on all rows, and the number of stages
    grows with the information in the data (roughly with the log-likelihood's range over
    the prior, so with the rows): seconds for a few hundred rows, and past a few thousand
    rows, minutes to hours (doc/samplers.md). A ``SlowFitWarning`` says so after the first
    stage when the run will be long. There, use ``max_time``, fewer particles, or Laplace
    (``method="laplace"``, which also gives the evidence) or variational inference. With
    ``verbose=1`` a progress bar follows lambda from 0 to 1.

    Examples
    --------
    >>> from skbnn.methods import SMC
    >>> SMC(n_mcmc_steps=10).get_params()["n_mcmc_steps"]
    10
    """

    name = "smc"
    noise_handling = NoiseMode.MARGINAL.value
    provides_evidence = True

    _parameter_constraints: dict = {
        "target_ess": [Interval(Real, 0, 1, closed="neither")],
        "resample_threshold": [Interval(Real, 0, 1, closed="both")],
        "resampling": [StrOptions({"systematic", "residual", "multinomial"})],
        "n_mcmc_steps": [Interval(Integral, 1, None, closed="left")],
        "max_leapfrog": [Interval(Integral, 1, None, closed="left")],
        "max_stages": [Interval(Integral, 1, None, closed="left")],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
    }

    def __init__(
        self,
        target_ess: float = 0.5,
        resample_threshold: float = 0.5,
        resampling: str = "systematic",
        n_mcmc_steps: int = 5,
        max_leapfrog: int = 1000,
        max_stages: int = 1000,
        max_time: float | None = None,
    ):
        self.target_ess = target_ess
        self.resample_threshold = resample_threshold
        self.resampling = resampling
        self.n_mcmc_steps = n_mcmc_steps
        self.max_leapfrog = max_leapfrog
        self.max_stages = max_stages
        self.max_time = max_time

    def _kernels(self, target) -> tuple:
        """The particles' kernels and the network kernel for ``target``'s codes."""
        density = knet.logp_grad_for(*target.kernel_codes)
        return (ksmc.hmc_moves, ksmc.evaluate, ksmc.log_marginal_rows, density)

    def _warm_up(self, tiny, target) -> None:
        """One evaluation and one move of two particles on ``tiny`` (the network kernel
        compiles in a helper process meanwhile, where it can)."""
        codes = tiny.kernel_codes
        tgt = knet.density_target(tiny.kernel_target(), aside=True, codes=codes)
        d, k = tiny.n_params, tiny.n_outputs
        thetas = np.zeros((2, d))
        stats = np.zeros((2, 2 + k))
        # every kernel compiles before the first call, which waits for the network kernel
        compile_for(ksmc.evaluate, thetas, tgt, stats, 0, 2)
        ksmc.log_marginal_rows(stats, 3.0, 1.0, 1.0, 0.5, np.zeros(2))
        particles = ksmc.Particles(thetas, np.zeros((2, d)), np.zeros(2), stats, np.ones((1, d)))
        proposals = ksmc.Proposals(
            np.full(2, 0.1), np.ones(2, dtype=np.int64), np.zeros((2, d)), np.zeros(2),
            np.zeros((2, 0)),
        )  # fmt: skip
        out = ksmc.MoveStats(np.zeros(2), np.zeros(2), np.zeros(2, dtype=np.int64))
        moves = (particles, proposals, np.ones(d), tgt, 0, 2, True, out)
        compile_for(ksmc.hmc_moves, *moves)
        ksmc.evaluate(thetas, tgt, stats, 0, 2)
        ksmc.hmc_moves(*moves)
        if not tgt.density.compiled_aside:
            # the helper process, when there is one, compiles it while the particles move
            knet.forward_batch_for(codes[0]).compile(knet.FORWARD_BATCH_ARGS)

    def run(self, target, n_samples, random_state, n_jobs, verbose) -> FitResult:
        """Temper ``n_samples`` prior draws to the posterior of ``target``.

        Parameters
        ----------
        target : skbnn.log_posterior.LogPosterior
        n_samples : int
            Number of particles.
        random_state : None, int, RandomState or SeedSequence
        n_jobs : int or None
            Threads that move the particles; results never depend on it.
        verbose : int
            Progress bar over the exponent when > 0.

        Returns
        -------
        FitResult
            The weighted particles, the log evidence of the standardized data, and
            ``diagnostics["smc"]`` with the per-stage figures.
        """
        self._validate_params()
        if target.noise not in (NoiseMode.FIXED, NoiseMode.MARGINAL):
            # the noise would live in the shared target tuple, which threads would race on
            raise ValueError(
                f"SMC needs the noise fixed or marginalized, not {target.noise!r}; build the "
                "LogPosterior with noise='marginal' (as the estimators do)"
            )
        t_start = time.perf_counter()
        compile_time = self._compile(target)
        rng = np.random.default_rng(seed_sequence(random_state))
        run = self._start(target, int(n_samples), rng, n_jobs)
        bar = ProgressBar(1000, verbose, f"SMC {run.n} particles")
        try:
            self._check_start(run)
            self._anneal(run, target, rng, bar)
        finally:
            bar.close()
        posterior = self._posterior(run, target, rng)
        diagnostics = self._diagnostics(run, compile_time, time.perf_counter() - t_start)
        self._warn_if_unconverged(run, diagnostics)
        return FitResult(
            posterior=posterior, log_evidence=float(run.log_z), diagnostics=diagnostics
        )

    # -- the phases of a run ------------------------------------------------------------

    def _start(self, target, n: int, rng, n_jobs) -> _Run:
        """The prior draws, their first step sizes and path lengths, at ``lambda = 0``."""
        thetas, prior_stds, gamma_shapes = _prior_draws(target, rng, n)
        d = target.n_params
        return _Run(
            n=n,
            tempered=_TemperedLoglik(target),
            tgt=knet.density_target(target.kernel_target(own=True, padded=True)),
            ranges=_ParticleRanges(n, effective_n_jobs(n_jobs)),
            thetas=thetas,
            prior_stds=prior_stds,
            gamma_shapes=gamma_shapes,
            stats=np.empty((n, 2 + target.n_outputs)),
            grads=np.empty((n, d)),
            logps=np.empty(n),
            logw=np.full(n, -math.log(n)),
            eps=rng.uniform(0.0, INIT_STEP_SIZE_MAX, n),
            n_leap=rng.integers(1, min(INIT_MAX_LEAPFROG, self.max_leapfrog) + 1, n),
            rec={key: [] for key in _STAGE_KEYS},
        )

    def _check_start(self, run: _Run) -> None:
        """Evaluate the prior draws; a ``ValueError`` if none has a finite likelihood."""
        run.tgt.cfg[0]["beta"] = 1.0
        run.ranges.map(lambda a, b: ksmc.evaluate(run.thetas, run.tgt, run.stats, a, b))
        if not np.any(np.isfinite(run.tempered(run.stats, 1.0))):
            # every weight would be 0 / 0: NaN predictions, not a posterior
            raise ValueError(
                f"no finite log-likelihood among the {run.n} prior draws: it overflows; "
                "check X and y for extreme values (standardize X) and the prior's "
                "parameters"
            )

    def _anneal(self, run: _Run, target, rng, bar: ProgressBar) -> None:
        """Stages until ``lambda`` reaches 1, or jumps there at ``max_stages`` or
        ``max_time`` (``run.stopped`` says which)."""
        end = time.perf_counter() + (math.inf if self.max_time is None else self.max_time)
        # the tempering stops early enough to leave the jump to lambda = 1 time to move
        tempering_end = end - FINAL_MOVES_SHARE * (self.max_time or 0.0)
        shown = 0
        while run.lam < 1.0:
            t_stage = time.perf_counter()
            ll_prev = run.tempered(run.stats, run.lam)
            new = self._next_lambda(run.tempered, run.stats, run.lam, ll_prev, run.logw)
            if new < 1.0 and len(run.rec["lambda"]) + 1 >= self.max_stages:
                new, run.forced_from, run.stopped = 1.0, run.lam, "max_stages"
            elif new < 1.0 and run.rec["lambda"] and t_stage >= tempering_end:
                # the first stage always reweights; its moves stop at the deadline
                new, run.forced_from, run.stopped = 1.0, run.lam, "max_time"
            ess, resampled = self._reweight(run, new, ll_prev, rng)
            acc = self._stage_moves(run, new, rng, end if new == 1.0 else tempering_end)
            self._record(run, t_stage, ess, resampled, acc, target)
            shown, before = int(round(1000 * run.lam)), shown
            bar.update(shown - before, f"lambda {run.lam:.3g}")

    def _reweight(self, run: _Run, new: float, ll_prev: np.ndarray, rng) -> tuple:
        """Weigh the particles by the likelihood's increment to ``lambda = new``, add its
        log mean to the evidence, and resample below the ESS threshold; the mass matrix
        of the moves is from the reweighted particles, before resampling. The ESS and
        whether it resampled."""
        n = run.n
        inc = _finite(run.tempered(run.stats, new) - ll_prev)
        run.log_z += _logsumexp(run.logw + inc)
        run.logw = _normalize(run.logw + inc)
        w = np.exp(run.logw)
        ess = 1.0 / np.sum(w**2)
        mean = w @ run.thetas
        # a floor keeps the metric positive when the particles collapse in a direction
        run.inv_m = w @ (run.thetas - mean) ** 2 + 1e-10 * (1.0 + mean**2)
        resampled = ess < self.resample_threshold * n
        if resampled:
            idx = _RESAMPLERS[self.resampling](w, rng)
            run.thetas, run.stats = run.thetas[idx], run.stats[idx]
            if run.prior_stds.shape[0] > 1:
                run.prior_stds = run.prior_stds[idx]
            run.logw = np.full(n, -math.log(n))
        return ess, resampled

    def _stage_moves(self, run: _Run, new: float, rng, deadline: float) -> np.ndarray:
        """Retune the step sizes and path lengths from the last stage's jumps, then move
        the particles at ``lambda = new`` until ``deadline``; each particle's acceptance
        (NaN for a particle that did not move)."""
        if run.esjd is not None and np.isfinite(run.esjd).any():
            # the pairs are drawn afresh for every particle, so they need not follow
            # their particles through resampling
            run.eps, run.n_leap = self._retune(run.eps, run.n_leap, run.esjd, run.move_w, rng)
        run.lam = new
        run.tgt.cfg[0]["beta"] = run.lam
        particles = ksmc.Particles(run.thetas, run.grads, run.logps, run.stats, run.prior_stds)
        run.esjd, acc, spent, run.moved = self._move(
            run.ranges, particles, run.gamma_shapes, run.eps, run.n_leap, run.inv_m, run.tgt,
            rng, deadline,
        )  # fmt: skip
        run.n_grad += spent
        run.move_w = np.exp(run.logw)
        return acc

    def _record(self, run: _Run, t_stage: float, ess, resampled, acc, target) -> None:
        """The stage's figures, and the SlowFitWarning after the first stage."""
        rec = run.rec
        rec["lambda"].append(run.lam)
        rec["ess"].append(ess)
        rec["resampled"].append(resampled)
        moved = np.isfinite(acc)
        if moved.all():
            rec["accept_rate"].append(float(run.move_w @ acc))
        else:
            # over the particles that moved before the deadline
            w = run.move_w[moved]
            rec["accept_rate"].append(float(w @ acc[moved] / w.sum()) if w.sum() > 0 else math.nan)
        rec["moved"].append(run.moved)
        rec["step_size"].append(run.eps.copy())
        rec["n_leapfrog"].append(run.n_leap.copy())
        rec["log_evidence"].append(run.log_z)
        rec["stage_time"].append(time.perf_counter() - t_stage)
        if len(rec["stage_time"]) == 1 and run.lam < 1.0:
            self._warn_if_slow(rec["stage_time"][0], target)

    def _posterior(self, run: _Run, target, rng) -> WeightedDraws:
        """The weighted particles, with a noise precision drawn for each."""
        taus = run.tempered.draw_noise(run.stats, rng)
        posterior = WeightedDraws(run.thetas, weights=np.exp(run.logw), noise_precision=taus)
        if target.hierarchical:
            posterior.prior_precision = _layer_precisions(target, run.prior_stds)
        return posterior

    def _diagnostics(self, run: _Run, compile_time: float, wall_time: float) -> SMCDiagnostics:
        """``diagnostics_``: the run's figures, and per stage under ``"smc"``."""
        rec = run.rec
        smc = {key: np.array(rec[key]) for key in _STAGE_KEYS}
        smc.update(n_stages=len(rec["lambda"]), n_grad_evals=run.n_grad, wall_time=wall_time)
        w = np.exp(run.logw)
        return SMCDiagnostics(
            method=self.name,
            smc=smc,
            n_stages=smc["n_stages"],
            n_particles=run.n,
            ess=1.0 / np.sum(w**2),
            n_unique=int(np.unique(run.thetas, axis=0).shape[0]),
            accept_rate=smc["accept_rate"][-1],
            n_grad_evals=run.n_grad,
            compile_time=compile_time,
            wall_time=wall_time,
            stopped_because=run.stopped,
        )

    def _warn_if_unconverged(self, run: _Run, diagnostics: SMCDiagnostics) -> None:
        """A ConvergenceWarning when the exponent jumped to 1, a stage's weights fell on
        about one particle, or the last moves barely moved the particles."""
        rec, n = run.rec, run.n
        if run.stopped != "lambda_reached_1":
            stopped = run.stopped
            what = (f"max_stages={self.max_stages}" if stopped == "max_stages"
                    else f"max_time={self.max_time:g} s")  # fmt: skip
            per_stage = float(np.mean(rec["stage_time"]))
            more = (
                # a cap below the default is the cause: tempering takes tens of stages
                self._fix(max_stages=max(2 * self.max_stages, SMC().max_stages))
                if stopped == "max_stages"
                else self._fix(max_time=2 * self.max_time)
            )
            cut = (
                f" The moves at lambda=1 ran {rec['moved'][-1]:.0%} of their transitions "
                f"before the deadline; {diagnostics.n_unique} of {n} particles are distinct."
                if rec["moved"][-1] < 1.0
                else ""
            )
            warn(
                f"SMC reached {what} at lambda={run.forced_from:.3g} after "
                f"{len(rec['lambda']) - 1} stages and jumped to lambda=1; the final ESS is "
                f"{rec['ess'][-1]:.0f} of {n} particles and the evidence is unreliable.{cut} A "
                f"stage took {per_stage:.2g} s on average. Allow more: {more}; or use fewer "
                "particles (n_samples), or method='laplace' for an evidence on many rows.",
                ConvergenceWarning,
            )
        elif np.min(rec["ess"]) < MIN_STAGE_ESS:
            stage = int(np.argmin(rec["ess"]))
            fix = self._collapse_advice(rec, n, stage)
            warn(
                f"SMC's weights fell on about one particle at stage {stage + 1} of "
                f"{len(rec['ess'])} (an ESS of {rec['ess'][stage]:.2g} of {n} particles, "
                f"lambda {rec['lambda'][stage]:.3g}): from there on the posterior is about "
                f"one particle's neighbourhood and the evidence rests on one weight. "
                f"{fix[0].upper()}{fix[1:]}.",
                ConvergenceWarning,
            )
        elif diagnostics.accept_rate < MIN_FINAL_ACCEPT:
            if self._unresampled(rec, n, len(rec["ess"])):
                # the moves' metric is the weighted particles' variance: degenerate weights
                # make it one particle's
                fix = self._resample_advice()
            else:
                more = self._fix(n_mcmc_steps=2 * self.n_mcmc_steps)
                fix = (
                    f"move the particles more, {more}, or raise n_samples, or simplify the network"
                )
            warn(
                f"SMC's moves at the posterior accepted only {diagnostics.accept_rate:.2f} "
                f"of proposals; {diagnostics.n_unique} of {n} particles are distinct. "
                f"{fix[0].upper()}{fix[1:]}.",
                ConvergenceWarning,
            )

    @staticmethod
    def _unresampled(rec: dict, n: int, stop: int) -> bool:
        """Whether a stage before ``stop`` kept weights that the default threshold would
        have resampled."""
        threshold = SMC().resample_threshold * n
        return any(
            ess < threshold and not resampled
            for ess, resampled in zip(rec["ess"][:stop], rec["resampled"][:stop], strict=True)
        )

    def _collapse_advice(self, rec: dict, n: int, stage: int) -> str:
        """The cause and the fix when ``stage``'s weights fell on about one particle."""
        default = SMC().target_ess
        if self.target_ess < default:
            return (
                "the tempering stepped further than the particles can follow; temper in "
                f"smaller steps, {self._fix(target_ess=default)}"
            )
        if self._unresampled(rec, n, stage):
            return self._resample_advice()
        # a stage's plain ESS can fall to a fifth of the conditional ESS the tempering
        # keeps: a tenth leaves room
        wanted = math.ceil(10 * MIN_STAGE_ESS / self.target_ess)
        return (
            "the particles are too few for the tempering; use more, the estimator's "
            f"n_samples={max(wanted, 2 * n)}"
        )

    def _resample_advice(self) -> str:
        """The cause and the fix when unresampled stages degenerated the weights."""
        threshold = SMC().resample_threshold
        return (
            "without resampling the weights degenerate stage after stage; resample more "
            f"often, {self._fix(resample_threshold=threshold)}"
        )

    def _warn_if_slow(self, stage_time: float, target) -> None:
        """A SlowFitWarning after the first stage when the fewest stages a run takes would
        last over ``SLOW_FIT`` seconds (the first stage's time informs the message only)."""
        projected = MIN_STAGES * stage_time
        if not self._slow_warning or self.max_time is not None or projected <= SLOW_FIT:
            return
        warn(
            f"SMC's first tempering stage took {stage_time:.3g} s on {target.n_rows} rows, "
            f"and a run takes tens of stages, more on more rows (later ones cost more), so "
            f"at least {duration(projected)} here. For an answer in seconds to minutes: "
            "method='laplace' (which also gives the evidence), method='auto' or "
            f"method='ensemble'; or bound the tempering time: {self._fix(max_time=600)}.",
            SlowFitWarning,
        )

    def _move(self, ranges, particles, gamma_shapes, eps, n_leap, inv_m, tgt, rng, deadline):
        """``n_mcmc_steps`` HMC transitions of every particle, in place, until
        ``deadline``.

        ``gamma_shapes`` are the shapes of the layers' Gamma draws (none without a
        hierarchical prior). Returns each particle's mean jumping distance and acceptance
        over its transitions (NaN for a particle that made none), the gradient evaluations
        spent, and the share of the planned transitions that ran.
        """
        n, d = particles.thetas.shape
        esjd, acc, done = np.zeros(n), np.zeros(n), np.zeros(n)
        spent = 0
        for step in range(self.n_mcmc_steps):
            if time.perf_counter() >= deadline:
                break
            z = rng.standard_normal((n, d))
            u = rng.random(n)
            # Gamma(a + m_l / 2, 1) draws for the layers' precisions (none without a
            # hierarchical prior), drawn here so that threads do not change them
            gammas = rng.standard_gamma(gamma_shapes, size=(n, gamma_shapes.size))
            proposals = ksmc.Proposals(eps, n_leap, z, u, gammas)
            out = ksmc.MoveStats(np.empty(n), np.empty(n), np.empty(n, dtype=np.int64))

            def kernel(a, b, proposals=proposals, refresh=step == 0, out=out):
                ksmc.hmc_moves(particles, proposals, inv_m, tgt, a, b, refresh, out)

            ran = ranges.map(kernel, weights=n_leap, deadline=deadline)
            # a particle whose range did not start kept its state; its out entries are junk
            esjd += np.where(ran, out.esjd, 0.0)
            acc += np.where(ran, out.accept, 0.0)
            spent += int(out.n_grad[ran].sum())
            done += ran
        with np.errstate(invalid="ignore"):
            # a particle that never moved has no jump and no acceptance: NaN, not 0
            esjd, acc = esjd / done, acc / done
        return esjd, acc, spent, float(done.sum() / (n * self.n_mcmc_steps))

    def _next_lambda(self, tempered, stats, lam, ll_prev, logw) -> float:
        """The exponent whose conditional ESS of the incremental weights is the target."""
        n = len(logw)
        goal = self.target_ess

        def excess(new):
            inc = _finite(tempered(stats, new) - ll_prev)
            # CESS / N = (sum W w)^2 / sum W w^2, in log space
            a = _logsumexp(logw + inc)
            b = _logsumexp(logw + 2.0 * inc)
            return math.exp(2.0 * a - b) - goal if np.isfinite(b) else -goal

        if excess(1.0) >= 0.0:
            return 1.0
        lo = excess(lam)
        if lo <= 0.0:
            # not even an infinitesimal step keeps the target (degenerate weights); creep
            return min(1.0, lam + 1e-8 * max(1.0, n))
        return brentq(excess, lam, 1.0, xtol=1e-12, rtol=1e-10)

    def _retune(self, eps, n_leap, esjd, w, rng):
        """Draw each particle's (eps, L) from the ESJD-weighted mixture of the last ones."""
        n = len(eps)
        score = w * np.where(np.isfinite(esjd), esjd, 0.0)
        total = score.sum()
        if total > 0.0:
            pick = rng.choice(n, size=n, p=score / total)
            base = eps[pick]
        else:
            # every proposal was rejected: start again from smaller steps
            pick = rng.integers(0, n, n)
            base = 0.5 * eps[pick]
        lower = -base / STEP_SIZE_JITTER
        new_eps = base + STEP_SIZE_JITTER * truncnorm.rvs(lower, np.inf, size=n, random_state=rng)
        new_eps = np.maximum(new_eps, 1e-12)
        new_leap = np.clip(n_leap[pick] + rng.integers(-1, 2, n), 1, self.max_leapfrog)
        return new_eps, new_leap


_STAGE_KEYS = (
    "lambda",
    "ess",
    "resampled",
    "accept_rate",
    "step_size",
    "n_leapfrog",
    "log_evidence",
    "stage_time",
    "moved",
)


@dataclass
class _Run:
    """The state of one SMC run between its phases: the particles, their weights and
    tuning, the exponent reached, and the per-stage record."""

    n: int
    tempered: _TemperedLoglik
    #: the kernels' target tuple, whose ``beta`` is the current exponent
    tgt: object
    ranges: _ParticleRanges
    thetas: np.ndarray
    prior_stds: np.ndarray
    gamma_shapes: object
    #: per particle: the log-likelihood's sufficient statistics
    stats: np.ndarray
    grads: np.ndarray
    logps: np.ndarray
    #: normalized log weights
    logw: np.ndarray
    #: per particle: step size and leapfrog steps of its moves
    eps: np.ndarray
    n_leap: np.ndarray
    rec: dict
    #: the moves' inverse mass matrix (diagonal)
    inv_m: np.ndarray | None = None
    #: the last stage's expected squared jump distances and the weights of its moves
    esjd: np.ndarray | None = None
    move_w: np.ndarray | None = None
    lam: float = 0.0
    #: the share of the last stage's planned transitions that ran before the deadline
    moved: float = 1.0
    log_z: float = 0.0
    n_grad: int = 0
    stopped: str = "lambda_reached_1"
    #: the exponent from which it jumped to 1 (``max_stages`` or ``max_time``)
    forced_from: float = 0.0


def _prior_draws(target, rng, n):
    """Particles from the prior, their prior scales and the layers' Gamma shapes.

    Under a hierarchical prior each particle first draws its layer precisions
    ``lambda_l ~ Gamma(a, b)`` and then its weights given them, so each has its own row of
    scales; otherwise all share the target's.
    """
    if not target.hierarchical:
        return target.sample_prior(rng, n), target.prior_scale[None, :].copy(), np.empty(0)
    layout = target.layout
    a, b, fan_in = target.hyperprior
    prior_stds = np.repeat(target.prior_scale[None, :], n, axis=0)
    shapes = np.empty(layout.n_layers)
    for layer in range(layout.n_layers):
        w, _ = layout.slices(layer)
        n_in = layout.sizes[layer]
        c = 1.0 / np.sqrt(n_in) if fan_in else 1.0
        # a tiny shape draws precisions that underflow to 0: infinite sds
        lam = np.maximum(rng.gamma(a, 1.0 / b, n), np.finfo(float).tiny)
        prior_stds[:, w] = (c / np.sqrt(lam))[:, None]
        shapes[layer] = a + 0.5 * n_in * layout.sizes[layer + 1]
    thetas = rng.standard_normal((n, target.n_params))
    thetas[:, : layout.n_weights] *= prior_stds
    return thetas, prior_stds, shapes


def _layer_precisions(target, prior_stds):
    """Each particle's layer precisions ``(c_l / s_l)^2`` from its prior scales."""
    layout = target.layout
    fan_in = target.hyperprior[2]
    out = np.empty((prior_stds.shape[0], layout.n_layers))
    for layer in range(layout.n_layers):
        w, _ = layout.slices(layer)
        c = 1.0 / np.sqrt(layout.sizes[layer]) if fan_in else 1.0
        out[:, layer] = (c / prior_stds[:, w][:, 0]) ** 2
    return out


class _TemperedLoglik:
    """``log int p(y | theta, tau)^lambda p(tau) dtau`` (or ``lambda * loglik``) per particle.

    Computed from the stored statistics of each particle, so trying exponents costs no pass
    over the data.
    """

    def __init__(self, target):
        self.marginal = target.likelihood == "gaussian" and target.noise == NoiseMode.MARGINAL
        self.n = target.weight_sum
        self.a, self.b = target.noise_prior
        self.likelihood = target.likelihood
        self.tau = target.tau.copy()

    def __call__(self, stats, lam: float) -> np.ndarray:
        if not self.marginal:
            return lam * stats[:, 0]
        if lam == 0.0:
            return np.zeros(stats.shape[0])
        out = np.empty(stats.shape[0])
        ksmc.log_marginal_rows(stats, self.n, self.a, self.b, lam, out)
        return out

    def draw_noise(self, stats, rng) -> np.ndarray | None:
        """Each particle's noise precisions: its Gamma conditional, or the fixed value."""
        if self.likelihood != "gaussian":
            return None
        if not self.marginal:
            return np.broadcast_to(self.tau, (stats.shape[0], self.tau.size)).copy()
        shape = self.a + 0.5 * self.n
        return rng.gamma(shape, 1.0 / (self.b + 0.5 * stats[:, 2:]))


class _ParticleRanges:
    """Runs a kernel over ranges of particles on the shared thread pool.

    More ranges than threads, balanced by each particle's cost, so that particles with
    long trajectories do not leave a thread idle. Also with one thread the ranges run on
    the pool, so that the main thread hears Ctrl-C and a move stops after the ranges
    already running (a particle's move does not depend on its range).
    """

    def __init__(self, n: int, n_jobs: int):
        self.n = n
        self.n_workers = max(1, min(int(n_jobs), n))
        self.n_ranges = min(n, 4 * self.n_workers)

    def map(self, fn, weights=None, deadline: float = math.inf) -> np.ndarray:
        """``fn(start, stop)`` for every range, up to ``n_workers`` at a time; a range not
        started by ``deadline`` (a ``time.perf_counter()`` value) is skipped. Whether each
        particle's range ran."""
        timed = math.isfinite(deadline)
        n_ranges = min(self.n, TIMED_RANGES_PER_WORKER * self.n_workers) if timed else self.n_ranges
        if weights is None:
            bounds = np.linspace(0, self.n, n_ranges + 1).astype(int)
        else:
            cost = np.concatenate([[0], np.cumsum(np.asarray(weights, dtype=float) + 1.0)])
            bounds = np.searchsorted(cost, np.linspace(0, cost[-1], n_ranges + 1))
            bounds[0], bounds[-1] = 0, self.n
            bounds = np.unique(bounds)
        pairs = zip(bounds[:-1], bounds[1:], strict=True)
        ranges = [(a, b) for a, b in pairs if b > a]
        ran = np.zeros(self.n, dtype=bool)

        def run(ab):
            if time.perf_counter() < deadline:
                fn(*ab)
                ran[ab[0] : ab[1]] = True

        thread_map(run, ranges, self.n_workers, interruptible=True)
        return ran


def _finite(x: np.ndarray) -> np.ndarray:
    # a particle whose likelihood is NaN or -inf gets zero weight, never a NaN weight
    return np.where(np.isnan(x), -np.inf, x)


def _logsumexp(a: np.ndarray) -> float:
    """``log(sum(exp(a)))``: -inf if every entry is, inf if one is, NaN if one is NaN."""
    # scipy.special.logsumexp's array-API dispatch costs more than the sum over a few
    # hundred particles, and the exponent's root search calls this dozens of times a stage
    top = np.max(a)
    if not math.isfinite(top):
        return float(top)
    return float(top + math.log(np.sum(np.exp(a - top))))


def _normalize(logw: np.ndarray) -> np.ndarray:
    return logw - _logsumexp(logw)


def _pick(w: np.ndarray, u: np.ndarray) -> np.ndarray:
    # index i with cdf[i-1] <= u < cdf[i]: a zero-weight particle is never picked, and
    # normalizing by the last entry keeps rounding from leaving u beyond the end
    cdf = np.cumsum(w)
    return np.minimum(np.searchsorted(cdf / cdf[-1], u, side="right"), len(w) - 1)


def _systematic(w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = len(w)
    return _pick(w, (rng.random() + np.arange(n)) / n)


def _multinomial(w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return _pick(w, np.sort(rng.random(len(w))))


def _residual(w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = len(w)
    copies = np.floor(n * w).astype(int)
    idx = np.repeat(np.arange(n), copies)
    rest = n - idx.size
    if rest:
        # the remaining rest draws are multinomial on the fractional parts
        extra = _pick(n * w - copies, np.sort(rng.random(rest)))
        idx = np.concatenate([idx, extra])
    return np.sort(idx)


_RESAMPLERS = {"systematic": _systematic, "multinomial": _multinomial, "residual": _residual}
