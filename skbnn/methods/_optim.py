"""The training engine that every optimization method shares.

A member is one optimization of the negative log posterior of a
:class:`~skbnn.log_posterior.LogPosterior` (per row: ``-(loglik + logprior) / n``), with its
own initialization, prior centre (randomized MAP's anchor), targets (randomized MAP's
perturbations), rows
(``data_fraction``) and validation rows (``early_stopping``). Minibatch epochs run in the
numba kernel :func:`skbnn.kernels.optim.run_epochs`; full-batch L-BFGS is scipy's with the
analytic gradient. Members run on the shared thread pool (the kernels release the GIL),
each seeded from ``random_state`` through ``SeedSequence``, so results never depend on
``n_jobs``.

The methods (:class:`~skbnn.methods.DeepEnsemble`, :class:`~skbnn.methods.RandomizedMAP`,
:class:`~skbnn.methods.SWAG`, and later Laplace and VI) subclass :class:`Trainer`, which
holds the knobs with scikit-learn's MLP names, and say only how a member starts and what is
kept from it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
from joblib import effective_n_jobs
from scipy.optimize import minimize
from sklearn.base import clone

from ..exceptions import ConvergenceWarning, warn
from ..kernels import density as knet
from ..kernels import optim as kopt
from ..kernels.helper import TailTeam, serve_kernel
from ..log_posterior import NoiseMode
from ..posterior import single_threaded_blas
from ..utils import backend_elsewhere, check_interrupt, thread_map
from ._base import BaseMethod
from ._engine_params import ENGINE_CONSTRAINTS
from ._progress import ProgressBar
from ._records import TrainingDiagnostics

#: Rows up to which ``solver="auto"`` picks full-batch L-BFGS: there one pass over the data
#: is cheap and L-BFGS needs no learning rate; above it, minibatch Adam.
LBFGS_MAX_ROWS = 5000
#: Restarts of a member whose loss became non-finite, each from a fresh initialization with
#: a learning rate ten times smaller, before it is dropped.
MAX_RESTARTS = 2
#: ``max_iter=None`` for Adam and SGD: epochs enough for this many optimizer steps, and at
#: least ``MIN_EPOCHS``. A cap, not a length: the stopping rule ends a run long before it on
#: most data.
DEFAULT_STEPS = 300_000
MIN_EPOCHS = 200
#: ``max_iter=None`` on many rows, for every method on the engine: at most the epochs in
#: which a member visits this many rows, and at least ``MIN_BUDGET_EPOCHS``. An epoch of
#: 10^6 rows holds a thousand steps; the step count, not the epoch count, is what an
#: optimizer needs, so the cap holds the cost of a fit in check as the rows grow.
ROW_BUDGET = 20_000_000
MIN_BUDGET_EPOCHS = 10
#: ``max_iter=None`` for L-BFGS: iterations, each one pass over the data; networks of tens
#: of units need a few hundred to reach ``tol``.
DEFAULT_LBFGS_ITER = 1000
#: ``batch_size="auto"``: rows per minibatch, raised on many rows so that an epoch takes at
#: most ``AUTO_BATCH_STEPS`` steps.
AUTO_BATCH = 32
AUTO_BATCH_STEPS = 1000
#: ``learning_rate="adaptive"``: the rate is divided by this factor at each plateau of the
#: monitored loss (scikit-learn's "adaptive" divides by 5), at most this many times; the
#: member stops at the plateau after the last division.
ADAPTIVE_FACTOR = 5.0
ADAPTIVE_REDUCTIONS = 3
#: ``n_iter_no_change="auto"``: a plateau is the epochs in which the optimizer takes this
#: many steps, and at least ``MIN_PATIENCE`` epochs. What moves the parameters is the
#: steps: on a few hundred rows an epoch is a few steps, and 20 of them ended members
#: whose held-out loss was still falling, slowly, while their mean fitted.
PATIENCE_STEPS = 2000
MIN_PATIENCE = 20
#: Short epochs under a stopping rule go to the epoch kernel together (see
#: ``ROWS_PER_CALL``), and the rule is checked after each call: at least this many times in
#: a plateau of ``n_iter_no_change`` epochs. So an epoch-by-epoch check stays where a
#: plateau is short (20 epochs), and a long plateau over a few rows costs few calls.
CHECKS_PER_PLATEAU = 20
#: A fixed schedule's epochs (SWAG's, SGHMC's) go to the epoch kernel together, up to this
#: many rows a call: on a few rows, an epoch is one step, and the call from Python that
#: types its arguments costs several times the step. A bound in rows, not steps, keeps a
#: call short on large batches, for Ctrl-C and the progress bar.
ROWS_PER_CALL = 4096
#: What the warning of members stopped short of convergence says, which a method that
#: polishes the members' optimum afterwards (Laplace) recognizes
NOT_CONVERGED = "members did not converge"


@dataclass
class Member:
    """What one optimization run produced."""

    theta: np.ndarray
    loss_curve: list = field(default_factory=list)
    validation_curve: list = field(default_factory=list)
    n_iter: int = 0
    converged: bool = True
    n_grad_evals: int = 0
    restarts: int = 0
    #: SWAG moments: (mean, sq_mean, deviations (rank, p), number of snapshots)
    moments: tuple | None = None
    #: whether the loss became non-finite or climbed far above its best
    diverged: bool = False
    #: SWAG's collection learning rate after any restarts, and whether it stayed stable
    swa_learning_rate: float = float("nan")
    swag_stable: bool = True
    #: the loss's largest curvature at the pre-trained optimum (SWAG's automatic rate)
    curvature: float = float("nan")
    #: a sampler's kept draws, shape (n_draws, n_params)
    draws: np.ndarray | None = None
    #: the rows held out for early stopping: the member's gradient steps never used them,
    #: though its stopping point was chosen on them
    val_rows: np.ndarray | None = None
    #: the spawn key of the member's seed, the same for the member of that seed in a
    #: second run from the same root seed
    seed_key: tuple = ()
    #: epochs between the entries of ``validation_curve``
    validation_every: int = 1


def glorot_init(target, rng: np.random.Generator) -> np.ndarray:
    """scikit-learn MLP's initialization: every weight and bias ~ U(-a, a) with
    ``a = sqrt(6 / (fan_in + fan_out))`` (``sqrt(2)`` times that for logistic units),
    log noise precisions at 0 (unit noise on the standardized target)."""
    layout = target.layout
    theta = np.zeros(layout.n_params)
    factor = 2.0 if target.activation == "logistic" else 6.0
    for layer in range(layout.n_layers):
        fan_in, fan_out = layout.sizes[layer], layout.sizes[layer + 1]
        a = math.sqrt(factor / (fan_in + fan_out))
        w, b = layout.slices(layer)
        theta[w] = rng.uniform(-a, a, w.stop - w.start)
        theta[b] = rng.uniform(-a, a, b.stop - b.start)
    return theta


@dataclass
class Settings:
    solver: str = "adam"
    learning_rate_init: float = 1e-3
    learning_rate: str = "constant"
    momentum: float = 0.9
    nesterovs_momentum: bool = True
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-8
    batch_size: int = 200
    max_iter: int = 1
    tol: float = 1e-4
    early_stopping: bool = False
    n_iter_no_change: int = 10


def schedule(kind: str, lr0: float, epoch: int, n_epochs: int, n_steps: int,
              cycle: int = 1) -> np.ndarray:  # fmt: skip
    """The learning rate of each step of ``epoch``: constant, cosine decay to 0 over all
    steps, a step decay (x0.1 at half and at three quarters of the epochs), or SWAG's
    cyclic schedule (linear from ``lr0`` down to ``lr0 / 100`` within every ``cycle``
    steps, so each snapshot is taken at the cycle's smallest rate)."""
    if kind == "cyclic":
        t = (epoch * n_steps + np.arange(n_steps)) % cycle
        frac = (t + 1) / cycle
        return lr0 * ((1.0 - frac) + frac * 0.01)
    if kind == "cosine":
        total = n_epochs * n_steps
        t = epoch * n_steps + np.arange(n_steps)
        return lr0 * 0.5 * (1.0 + np.cos(np.pi * t / total))
    if kind == "adaptive":
        # lowered by the epoch loop at each plateau
        return np.full(n_steps, float(lr0))
    if kind == "step":
        factor = 0.1 ** (int(epoch >= n_epochs / 2) + int(epoch >= 3 * n_epochs / 4))
        return np.full(n_steps, lr0 * factor)
    return np.full(n_steps, float(lr0))


def _no_improvement(loss, best, count, tol, epochs=1):
    # scikit-learn MLP's rule: an epoch counts when it does not beat the best by tol (a
    # check after several epochs counts them all)
    return count + epochs if loss > best - tol else 0


def record_epoch(member, loss: float, n_evals: int, bar) -> bool:
    """Count an epoch and its loss into ``member``; False (and ``diverged``) when the loss
    is not finite."""
    member.n_grad_evals += n_evals
    member.n_iter += 1
    if bar is not None:
        bar.update(1)
    if not math.isfinite(loss):
        member.loss_curve.append(float("nan"))
        member.diverged = True
        return False
    member.loss_curve.append(loss)
    return True


def validation_epoch(validation, val_weight, params, member, best, count, tol, epochs=1):
    """Record the validation loss at ``params``, ``epochs`` epochs after the last check;
    returns whether it is the best so far, the best, and the count of epochs without
    improvement (scikit-learn's rule)."""
    validation.value(params)
    member.validation_curve.append(-validation.stats[0] / val_weight)
    member.n_grad_evals += 1
    count = _no_improvement(member.validation_curve[-1], best, count, tol, epochs)
    improved = member.validation_curve[-1] < best
    return improved, min(best, member.validation_curve[-1]), count


def ended_far_above_best(curve, sampled: bool = False) -> bool:
    """Whether a run ended with its loss over a nat per row (or 100 %) above its best: an
    optimizer diverging without overflowing yet, not a plateau (Adam's passing spikes
    recover before the end and do not count).

    A ``sampled`` loss (VI's and LBBNN's Monte Carlo estimates) is judged by the median of
    the curve's last half rather than its last epoch: on a short run with unscaled inputs
    one noisy epoch can land far above the best by chance.
    """
    lowest = min(curve)
    end = float(np.median(curve[len(curve) // 2 :])) if sampled else curve[-1]
    return end > lowest + max(1.0, abs(lowest))


def row_budget(n_rows: int, passes: int, budget: int = ROW_BUDGET,
               least: int = MIN_BUDGET_EPOCHS) -> int:  # fmt: skip
    """``passes`` over ``n_rows`` rows, capped at those that add up to ``budget`` row
    visits (but at least ``least``): by default, the length of a minibatch run."""
    return int(min(passes, max(least, -(-budget // max(1, n_rows)))))


def loss_trend(curve, window: int) -> tuple[float, float]:
    """How much the per-row loss fell from the mean of the ``window`` epochs before the
    last ``window`` to the mean of the last ``window``, and that difference's standard
    error (from the spread of the epochs within each window)."""
    a = np.asarray(curve[-2 * window : -window])
    b = np.asarray(curve[-window:])
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size) if window > 1 else 0.0
    return float(a.mean() - b.mean()), se


def still_improving(member, s) -> bool:
    """Whether a member that ran all its epochs without meeting the stopping rule was still
    improving: its monitored loss fell over its last ``window`` epochs (half of
    ``n_iter_no_change``) by more than ``tol`` per epoch and by more than twice the
    fall's standard error. A loss that only fluctuates sets a new best by chance now and
    then, which keeps the stopping rule from firing but is no reason to train longer."""
    curve, every = member.validation_curve, member.validation_every
    if not curve:
        curve, every = member.loss_curve, 1
    window = max(2, s.n_iter_no_change // 2 // every)
    if s.solver == "lbfgs" or len(curve) < 2 * window:
        return True
    gain, se = loss_trend(curve, window)
    return gain > max(s.tol * window, 2.0 * se)


def batches(n_train: int, batch_size: int) -> tuple[int, int]:
    """The batch size an epoch over ``n_train`` rows uses, and its number of steps."""
    batch = max(1, min(int(batch_size), n_train))
    return batch, -(-n_train // batch)


def _planned(plan, epoch: int, k: int, n_steps: int, none: np.ndarray):
    """``plan``'s learning rates, noise and keep flags of epochs ``epoch`` to ``epoch + k
    - 1``, one after the other (``none`` for no noise)."""
    lrs, noise, keep = zip(*[plan(e, n_steps) for e in range(epoch, epoch + k)], strict=True)
    noise = none if noise[0] is None else np.concatenate(noise)
    return np.concatenate(lrs), noise, np.concatenate(keep)


def minibatch_epochs(target, theta, train, val, s, prior_mean, YT, n_epochs, rng=None,
                      plan=None, moments=None, sgd=False, bar=None, member=None,
                      aside=False, codes=None):  # fmt: skip
    """Run up to ``n_epochs`` minibatch epochs on the rows ``train``; returns a Member.

    ``val`` rows (or None) drive early stopping, which restores the best parameters. A
    ``plan(epoch, n_steps) -> (lrs, noise, keep)`` (SWAG's collection, the sampler's
    cycles) sets each step's learning rate, injected noise (None for none) and whether
    ``moments`` collects after it; then no stopping rule applies.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    member = Member(theta) if member is None else member
    member.theta = theta
    YT = target.YT if YT is None else YT
    # aside: the first compile's network kernel, and the team's loop, may compile in
    # another process meanwhile
    tgt = knet.density_target(
        target.kernel_target(own=True, YT=YT, prior_mean=prior_mean),
        aside=aside,
        aside_with=(serve_kernel(),) if aside else (),
        codes=codes,
    )
    n_train = train.size
    batch, n_steps = batches(n_train, s.batch_size)
    d, ky = target.n_features, YT.size // target.n_rows
    data = kopt.Batches(
        target.XT, YT, target.W, train, np.empty(d * batch), np.empty(ky * batch),
        np.empty(batch),
    )  # fmt: skip
    ws = np.empty(knet.workspace_size(target.layout.sizes, batch))
    grad = np.empty(theta.size)
    stats = np.empty(2 + int(target.layout.sizes[-1]))
    kind = 1 if sgd or s.solver == "sgd" else 2 if s.solver == "sghmc" else 0
    opt = kopt.optimizer(kind, theta.size, s.beta_1, s.beta_2, s.epsilon, s.momentum,
                         s.nesterovs_momentum)  # fmt: skip
    if moments is None:
        mcfg = np.zeros(1, dtype=kopt.MOMENTS)
        moments = kopt.Moments(mcfg, np.empty(0), np.empty(0), np.empty((0, 0)))
    collecting = plan is not None
    validation = None if val is None else target.evaluator(prior_mean, val, YT)
    val_weight = None if val is None else target.weight_of(val)
    lr_kind, lr0 = s.learning_rate, s.learning_rate_init
    best, best_theta, count = np.inf, None, 0
    reductions = 0
    none = np.empty(0)
    if not collecting:
        member.converged = False
    # short epochs go to the kernel together: a fixed schedule's (no stopping rule) up to
    # ROWS_PER_CALL rows a call; a stopping rule's too, but checked after each call, so
    # with at least CHECKS_PER_PLATEAU checks in a plateau
    span = max(1, ROWS_PER_CALL // n_train)
    if not collecting:
        span = max(1, min(span, s.n_iter_no_change // CHECKS_PER_PLATEAU))
    member.validation_every = span
    losses = np.empty(min(span, max(n_epochs, 1)))
    epoch = 0
    while epoch < n_epochs:
        # a member on the pool stops here when Ctrl-C reaches the main thread
        check_interrupt()
        k = min(span, n_epochs - epoch)
        rows = (rng.permutation(train) if k == 1
                else rng.permuted(np.tile(train, (k, 1)), axis=1).ravel())  # fmt: skip
        data = data._replace(rows=rows)
        if collecting:
            lrs, noise, keep = _planned(plan, epoch, k, n_steps, none)
        else:
            lrs = (schedule(lr_kind, lr0, epoch, n_epochs, n_steps) if k == 1
                   else np.concatenate([schedule(lr_kind, lr0, e, n_epochs, n_steps)
                                        for e in range(epoch, epoch + k)]))  # fmt: skip
            noise, keep = none, none
        ran = kopt.run_epochs(theta, tgt, data, batch, lrs, noise, keep, opt, moments, ws,
                              grad, stats, rng, losses[:k])  # fmt: skip
        epoch += k
        for loss in losses[:ran]:
            if not record_epoch(member, float(loss), n_steps, bar):
                return member
        if collecting:
            continue
        if validation is not None:
            improved, best, count = validation_epoch(validation, val_weight, theta, member,
                                                      best, count, s.tol, epochs=k)  # fmt: skip
            if improved:
                best_theta = theta.copy()
        else:
            for loss in losses[:ran]:
                count = _no_improvement(loss, best, count, s.tol)
                best = min(best, loss)
        if count > s.n_iter_no_change:
            if lr_kind == "adaptive" and reductions < ADAPTIVE_REDUCTIONS:
                # a plateau at this rate: go on at a fifth of it, from the best point
                reductions += 1
                lr0 /= ADAPTIVE_FACTOR
                count = 0
                if best_theta is not None:
                    theta[:] = best_theta
                continue
            member.converged = True
            break
    if not collecting and member.loss_curve and ended_far_above_best(member.loss_curve):
        member.diverged = True
        return member
    if best_theta is not None:
        theta[:] = best_theta
    return member


def lbfgs_max_evaluations(max_iter: int) -> int:
    """L-BFGS's cap on loss evaluations: scikit-learn's 15,000, raised with ``max_iter`` so
    that a longer run asked for is one (a line search takes one evaluation or a few; at a
    fixed cap, raising ``max_iter`` past it would change nothing)."""
    return max(15000, 2 * int(max_iter))


def _lbfgs(target, theta, train, s, prior_mean, YT, member):
    """Full-batch L-BFGS on the rows ``train`` (scipy, analytic gradient), as scikit-learn's
    MLP: ``maxiter=max_iter``, ``gtol=tol``."""
    evaluate = target.evaluator(prior_mean, train, YT)
    n = target.weight_of(train)

    def fun(th):
        check_interrupt()
        lp, grad = evaluate(th)
        if not (math.isfinite(lp) and np.all(np.isfinite(grad))):
            # the line search backs off from a non-finite point
            return np.inf, np.zeros_like(th)
        return -lp / n, grad * (-1.0 / n)

    def record(intermediate_result):
        # the iterate's loss as L-BFGS-B computed it: evaluating it again would cost a
        # gradient pass per iteration
        member.loss_curve.append(float(intermediate_result.fun))

    res = minimize(
        fun, theta, jac=True, method="L-BFGS-B", callback=record,
        options={"maxiter": int(s.max_iter), "maxfun": lbfgs_max_evaluations(s.max_iter),
                 "gtol": float(s.tol)},
    )  # fmt: skip
    member.n_grad_evals += int(res.nfev)
    member.n_iter += int(res.nit)
    # status 1 is the iteration or evaluation limit; 2, a line search that cannot improve
    # the loss any more, happens at the optimum's floating-point resolution
    member.converged = bool(res.status != 1)
    final = float(res.fun)
    if not (math.isfinite(final) and np.all(np.isfinite(res.x))):
        member.loss_curve.append(float("nan"))
    elif not member.loss_curve or member.loss_curve[-1] != final:
        member.loss_curve.append(final)
    theta[:] = res.x
    member.theta = theta
    return member


class Trainer(BaseMethod):
    """Knobs of the training engine, with scikit-learn MLP's names and meanings.

    Subclasses implement ``_member_start(target, rng) -> (theta0, prior_mean, YT)`` and
    turn the members into a posterior in ``run``.
    """

    noise_handling = NoiseMode.THETA.value

    def _runs_epochs(self, target) -> bool:
        """Whether a fit of ``target`` runs minibatch epochs: not where its members train by
        full-batch L-BFGS, which calls the network kernel from Python."""
        return self._settings(target).solver != "lbfgs"

    def _kernels(self, target) -> tuple:
        """The network kernel for ``target``'s codes, and the epoch kernel where the fit
        runs epochs."""
        net = knet.logp_grad_for(*target.kernel_codes)
        return (kopt.run_epochs, net) if self._runs_epochs(target) else (net,)

    def _warm_up(self, tiny, target) -> None:
        """One epoch on ``tiny``, or one evaluation where the fit runs L-BFGS only (the
        network kernel compiles in a helper process meanwhile, where it can)."""
        theta = glorot_init(tiny, np.random.default_rng(0))
        if self._runs_epochs(target):
            minibatch_epochs(tiny, theta, np.arange(tiny.n_rows), None, Settings(), None,
                              None, 1, aside=True, codes=tiny.kernel_codes)  # fmt: skip
            return
        # what this process compiles meanwhile is a subclass's own; the team's loop
        # compiles after the network kernel, for the helper thread that wide layers call
        tgt = knet.density_target(
            tiny.kernel_target(), aside=True, aside_with=(serve_kernel(),), codes=tiny.kernel_codes
        )
        tgt.density.resolve()
        tiny.evaluator()(theta)

    _parameter_constraints: dict = ENGINE_CONSTRAINTS

    def _settings(self, target) -> Settings:
        n_rows = target.n_rows
        early = self.early_stopping
        if early == "auto":
            # where the noise is learned with the weights: fitted to the optimum, the
            # training residuals (and so the noise) shrink with the overfit
            early = target.likelihood == "heteroscedastic" or target.noise_in_theta
        solver = self.solver
        if solver == "auto":
            solver = "lbfgs" if n_rows <= LBFGS_MAX_ROWS and not early else "adam"
        if self.batch_size == "auto":
            batch = min(n_rows, max(AUTO_BATCH, -(-n_rows // AUTO_BATCH_STEPS)))
        else:
            batch = int(self.batch_size)
        max_iter = self.max_iter
        if max_iter is None and solver == "lbfgs":
            max_iter = DEFAULT_LBFGS_ITER
        elif max_iter is None:
            _, steps = batches(n_rows, batch)
            max_iter = row_budget(n_rows, max(MIN_EPOCHS, -(-DEFAULT_STEPS // steps)))
        return Settings(
            solver=solver,
            learning_rate_init=float(self.learning_rate_init),
            learning_rate=self.learning_rate,
            momentum=float(self.momentum),
            nesterovs_momentum=bool(self.nesterovs_momentum),
            beta_1=float(self.beta_1),
            beta_2=float(self.beta_2),
            epsilon=float(self.epsilon),
            batch_size=batch,
            max_iter=int(max_iter),
            tol=float(self.tol),
            early_stopping=bool(early),
            n_iter_no_change=self._patience(target, batch, early),
        )

    def _patience(self, target, batch: int, early: bool) -> int:
        """``n_iter_no_change``, with ``"auto"`` resolved to the epochs of
        ``PATIENCE_STEPS`` steps over a member's training rows (at least ``MIN_PATIENCE``)."""
        if self.n_iter_no_change != "auto":
            return int(self.n_iter_no_change)
        n_train = target.n_rows * float(getattr(self, "data_fraction", 1.0))
        if early:
            n_train *= 1.0 - float(self.validation_fraction)
        _, steps = batches(max(1, int(n_train)), batch)
        return max(MIN_PATIENCE, -(-PATIENCE_STEPS // steps))

    def _rows(self, target, rng, data_fraction: float, holdout: bool):
        """A member's training rows and validation rows (None without ``holdout``)."""
        n = target.n_rows
        rows = np.arange(n)
        if data_fraction < 1.0:
            size = max(2, int(math.ceil(data_fraction * n)))
            rows = np.sort(rng.choice(n, size=min(size, n), replace=False))
        if not holdout:
            return rows, None
        n_val = int(round(self.validation_fraction * rows.size))
        if n_val < 1:
            # too few rows to hold one out: the member trains on all of them
            return rows, None
        if n_val >= rows.size:
            raise ValueError(
                f"validation_fraction={self.validation_fraction} leaves no training rows "
                f"out of {rows.size}; lower it, or turn early stopping off: "
                f"{self._fix(early_stopping=False)}"
            )
        perm = rng.permutation(rows)
        return np.sort(perm[n_val:]), np.sort(perm[:n_val])

    def _optimize(self, target, theta, train, val, s, prior_mean, YT, rng, bar, member):
        """Optimize ``theta`` in place on the rows ``train`` with the solver of ``s``,
        recording into ``member``; variational inference optimizes its own objective."""
        if s.solver == "lbfgs":
            _lbfgs(target, theta, train, s, prior_mean, YT, member)
            if bar is not None:
                bar.update(s.max_iter)
        else:
            minibatch_epochs(target, theta, train, val, s, prior_mean, YT, s.max_iter,
                              rng=rng, bar=bar, member=member)  # fmt: skip

    def _lower_rate(self, settings) -> str:
        """The fix, as code, for members whose loss diverged at every restart: a rate
        below the lowest the restarts tried."""
        return self._fix(learning_rate_init=settings.learning_rate_init / 10 ** (MAX_RESTARTS + 1))

    def _longer(self, target, settings) -> str:
        """The fix, as code, for members stopped at ``max_iter``: the default budget where
        it allows more than twice the epochs (its stopping rule ends each member when the
        loss stops improving), else twice the epochs."""
        twice = 2 * settings.max_iter
        if self.max_iter is not None and type(self)().max_iter is None:
            default = clone(self).set_params(max_iter=None)._settings(target).max_iter
            if default > twice:
                return f"the default budget, {self._fix(max_iter=None)}"
        return self._fix(max_iter=twice)

    def _not_converged(self, settings, slow: int, kept: list, longer: str) -> str:
        """The warning for ``slow`` of the ``kept`` members that did not converge;
        ``longer`` is the fix (:meth:`_longer`)."""
        if settings.solver == "lbfgs":
            what = (
                "L-BFGS stopped at its limit of iterations (max_iter) or of loss evaluations "
                f"({lbfgs_max_evaluations(settings.max_iter)}, which max_iter raises) before "
                "the gradient fell below tol"
            )
        else:
            what = (
                "the optimizer ran all its epochs while the "
                + ("validation" if settings.early_stopping else "training")
                + f" loss still improved by more than tol={settings.tol:g} per row"
            )
        return (
            f"{slow} of {len(kept)} {NOT_CONVERGED}: {what} "
            f"(max_iter={settings.max_iter}). Train longer: {longer}."
        )

    def _train(self, target, settings, start, ss, data_fraction=1.0, bar=None, after=None):
        """One member: optimize from ``start(rng)``, restarting on divergence.

        ``after(target, theta, rng, member)`` runs a further phase (SWAG's collection)
        from the optimum. Returns a Member, or None when every attempt diverged.
        """
        rng = np.random.default_rng(ss)
        s = settings
        # as in scikit-learn, early stopping applies to the minibatch solvers only
        holdout = s.early_stopping and s.solver != "lbfgs"
        train, val = self._rows(target, rng, data_fraction, holdout)
        restarts = 0
        while True:
            theta, prior_mean, YT = start(target, rng)
            member = Member(theta, val_rows=val, seed_key=tuple(ss.spawn_key))
            member.restarts = restarts
            self._optimize(target, theta, train, val, s, prior_mean, YT, rng, bar, member)
            if not math.isfinite(member.loss_curve[-1]) or not np.all(np.isfinite(theta)):
                member.diverged = True
            if after is not None and not member.diverged:
                after(target, theta, train, prior_mean, YT, rng, member, bar)
            if not member.diverged:
                return member
            if restarts >= MAX_RESTARTS:
                return None
            restarts += 1
            s = replace(s, learning_rate_init=s.learning_rate_init / 10)

    def member_trainer(self, target, start):
        """One member's training on ``target``, for a method that needs optima of its own
        (the samplers' MAP starts).

        Compiles the kernels and fixes the settings once; returns ``train(seed_sequence)``,
        which optimizes from ``start(target, rng)`` and returns a :class:`Member`, or None
        when every attempt diverged.
        """
        self._compile(target)
        settings = self._settings(target)

        def train(ss):
            return self._train(target, settings, start, ss)

        return train

    def _train_members(self, target, n_members, random_state, n_jobs, verbose, start,
                       data_fraction=1.0, after=None, epochs_per_member=None,
                       settings=None):  # fmt: skip
        """Train ``n_members`` members on the shared pool (with ``settings``, by default
        :meth:`_settings`), and warn about the unconverged and the dropped. Returns the
        surviving members and the diagnostics of the run."""
        from ..utils import seed_sequence

        self._validate_params()
        t0 = time.perf_counter()
        compile_time = self._compile(target)
        settings = self._settings(target) if settings is None else settings
        per_member = settings.max_iter if epochs_per_member is None else epochs_per_member
        desc = f"{type(self).__name__}: {n_members} members x {per_member} epochs"
        bar = ProgressBar(n_members * per_member, verbose, desc)
        seeds = seed_sequence(random_state).spawn(n_members)
        try:
            # L-BFGS-B's vector operations are BLAS calls on tiny vectors: a threaded BLAS
            # spends longer waking its threads than the whole iteration takes, and members
            # already run in parallel
            if backend_elsewhere():
                # joblib's backend runs tasks in other processes (a cluster's workers under
                # parallel_config(backend="dask")): one member per task, the same bits
                from joblib import Parallel, delayed

                members = Parallel(n_jobs=n_jobs)(
                    delayed(self._train)(target, settings, start, ss, data_fraction, None, after)
                    for ss in seeds
                )
                bar.update(n_members * per_member)
            else:
                # a core the members leave idle takes half of each wide layer's products
                # (skbnn.kernels.team): from the start where the members are fewer than
                # the cores, else once the last ones run; the same bits as without it
                jobs = effective_n_jobs(n_jobs)
                idle = TailTeam(n_members, jobs)

                def train(ss):
                    with idle.task():
                        return self._train(target, settings, start, ss, data_fraction, bar, after)

                with single_threaded_blas(), idle:
                    members = thread_map(train, seeds, jobs)
        finally:
            bar.close()
        kept = [m for m in members if m is not None]
        dropped = len(members) - len(kept)
        if not kept:
            raise ValueError(
                f"the loss of every one of the {n_members} members diverged, also "
                f"after {MAX_RESTARTS} restarts with a 10x smaller learning rate each; lower "
                f"the learning rate, {self._lower_rate(settings)}, or check the data"
            )
        if dropped:
            # a member that diverged and then converged at a lower rate is a result as good
            # as any (diagnostics_["n_restarts"] counts them); one that never did is missing
            lower = self._lower_rate(settings)
            warn(
                f"{dropped} of {n_members} members diverged (their loss became non-finite, "
                f"or ended far above its best) even after {MAX_RESTARTS} restarts at a 10x "
                f"smaller learning rate each, and were dropped; {len(kept)} remain. Lower "
                f"the learning rate: {lower}.",
                ConvergenceWarning,
            )
        slow = sum(not m.converged and still_improving(m, settings) for m in kept)
        if slow:
            longer = self._longer(target, settings)
            warn(self._not_converged(settings, slow, kept, longer), ConvergenceWarning)
        diagnostics = TrainingDiagnostics(
            solver=settings.solver,
            max_iter=settings.max_iter,
            n_iter_no_change=settings.n_iter_no_change,
            n_members=len(kept),
            n_dropped=dropped,
            n_restarts=np.array([m.restarts for m in kept]),
            n_iter=np.array([m.n_iter for m in kept]),
            converged=np.array([m.converged for m in kept]),
            loss_curve=[np.asarray(m.loss_curve) for m in kept],
            final_loss=np.array([m.loss_curve[-1] for m in kept]),
            n_grad_evals=int(sum(m.n_grad_evals for m in members if m is not None)),
            compile_time=compile_time,
            train_time=time.perf_counter() - t0 - compile_time,
        )
        if settings.early_stopping and settings.solver != "lbfgs":
            diagnostics.validation_loss_curve = [np.asarray(m.validation_curve) for m in kept]
            diagnostics.validation_every = kept[0].validation_every
        return kept, diagnostics


class NoiseHead:
    """``heteroscedastic``: the members of a regressor with the noise inferred predict the
    noise of every row (a variance head per target) instead of learning one noise;
    ``noise_df``: that noise is a Student-t of so many degrees of freedom."""

    def likelihood(self, likelihood: str, infer_noise: bool = True) -> str:
        """The heteroscedastic Gaussian in place of the Gaussian when asked for, and with
        ``"auto"`` where the noise is inferred."""
        # the knobs' own errors first: an invalid noise_df is named as such
        self._validate_params()
        hetero = self.heteroscedastic
        if hetero == "auto":
            hetero = likelihood == "gaussian" and infer_noise
        df = getattr(self, "noise_df", None)
        if not hetero:
            # "auto" chooses among the noises the fit has: here the one
            if df is not None and df != "auto":
                raise ValueError(
                    f"noise_df={df!r} makes each row's noise a Student-t whose scale the "
                    "network predicts, which needs heteroscedastic=True (a regressor with "
                    f"noise_std=None); here heteroscedastic={self.heteroscedastic!r} "
                    "resolves to False. Set heteroscedastic=True, or noise_df=None"
                )
            return likelihood
        if likelihood != "gaussian":
            raise ValueError(
                "heteroscedastic=True applies to regression only (a classifier has no noise)"
            )
        if not infer_noise:
            raise ValueError(
                "a heteroscedastic method predicts the noise of every row; noise_std must be None"
            )
        return "heteroscedastic"


def noise_of(target, thetas) -> np.ndarray | None:
    """Each draw's noise precisions: from its trailing log precisions, or the target's fixed
    ones; None for a classifier or a heteroscedastic likelihood."""
    if target.likelihood != "gaussian":
        return None
    if target.noise_in_theta:
        return np.exp(thetas[:, target.layout.n_weights :])
    return np.broadcast_to(target.tau, (thetas.shape[0], target.n_outputs)).copy()
