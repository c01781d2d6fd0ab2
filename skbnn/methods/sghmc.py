"""Cyclical stochastic-gradient Hamiltonian Monte Carlo (Chen et al. 2014; Zhang et al.
2020) on the training engine."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..exceptions import ConvergenceWarning, warn
from ..kernels import optim as kopt
from ..posterior import WeightedDraws
from ._base import FitResult, store_params
from ._engine_params import ENGINE_CONSTRAINTS
from ._optim import (
    AUTO_BATCH,
    AUTO_BATCH_STEPS,
    Settings,
    Trainer,
    batches,
    glorot_init,
    minibatch_epochs,
    noise_of,
    row_budget,
)
from ._records import SGHMCDiagnostics
from .ensemble import DeepEnsemble

#: ``max_iter=None``: epochs enough for this many steps per cycle. A cycle's exploration
#: stage is SGD from the previous cycle's draws at a decaying rate: it must reach a mode
#: again, which takes a number of steps rather than of epochs on few rows.
CYCLE_STEPS = 10_000
#: ``max_iter=None``: and at least this many epochs per cycle, so that a chain may cost
#: what a member of the ensemble may (its 200 epochs). On tens of thousands of rows,
#: cycles of ``CYCLE_STEPS`` steps alone ended before the network fitted the data: the
#: draws underfit, and some cycles ended away from any mode (doc/samplers.md).
CYCLE_EPOCHS = 50
#: A chain diverged when the loss of an epoch in which it kept a draw exceeds its lowest
#: epoch loss by more than this many nats per weight, over all rows. Posterior draws sit
#: about half a nat per weight below the best fit's log-likelihood; a cycle that blew up
#: (unbounded minibatch gradients, as a regression's on outlying rows) is orders of
#: magnitude beyond. The engine then restarts the chain at a tenth of the step size.
DIVERGED_NATS_PER_WEIGHT = 10.0
#: The chains were still fitting when sampling ended when the training loss fell from one
#: cycle's end to the next (the median over every chain's cycles) by more than this many
#: times the posterior's own spread of that loss, ``sqrt(n_params / 2) / n`` per row (the
#: sd of a Gaussian posterior's log density, over the rows' weight ``n``), and in more
#: cycles than chance gives (``UNDERFIT_ALPHA``): a chain that samples its posterior
#: moves its loss about that much from draw to draw, not steadily down.
UNDERFIT_SPREADS = 2.0
#: And by more than this many nats per row: a smaller fall changes the predictive's log
#: density by less than a held-out test of 10,000 rows resolves (its standard error is
#: about 0.01), however far beyond the posterior's spread it is on many rows, where that
#: spread is tiny.
UNDERFIT_NATS = 0.01
#: The sign test's level: the chains' cycles land in different modes, whose fits differ
#: either way on few rows, so the gains must also be positive more often than chance
#: gives at this probability.
UNDERFIT_ALPHA = 0.01


def cycle_end_losses(loss_curve, n_cycles: int, steps_per_epoch: int, max_iter: int):
    """The loss (per row) of the epoch in which each cycle ends; None when a cycle is
    shorter than an epoch, so that the epochs' losses mix cycles."""
    n_steps = max_iter * steps_per_epoch
    if max_iter < n_cycles or len(loss_curve) < max_iter:
        return None
    ends = [((c + 1) * n_steps // n_cycles - 1) // steps_per_epoch for c in range(n_cycles)]
    return np.asarray(loss_curve)[ends]


def cycle_gains(curves, n_cycles: int, steps_per_epoch: int, max_iter: int):
    """How much lower each chain's training loss was at the end of each cycle than at the
    end of the cycle before, in nats per row: shape (chains, n_cycles - 1). None with one
    cycle, or cycles shorter than an epoch."""
    if n_cycles < 2:
        return None
    ends = [cycle_end_losses(c, n_cycles, steps_per_epoch, max_iter) for c in curves]
    if any(e is None for e in ends):
        return None
    return np.array([-np.diff(e) for e in ends])


def still_fitting(gains, spread: float) -> bool:
    """Whether the cycles' gains (:func:`cycle_gains`) say the chains were still fitting
    the data: their median exceeds ``UNDERFIT_SPREADS`` times the posterior's spread of
    the loss and ``UNDERFIT_NATS``, and more of them are positive than a fair coin gives
    with probability ``UNDERFIT_ALPHA`` (a chain that samples its posterior moves its loss
    either way; a sign test, so that one cycle that landed in a much worse or better mode
    does not decide it, as it would a mean)."""
    from scipy.stats import binomtest

    gains = np.ravel(gains)
    if float(np.median(gains)) <= max(UNDERFIT_SPREADS * spread, UNDERFIT_NATS):
        return False
    positive = int(np.sum(gains > 0))
    return binomtest(positive, gains.size, 0.5, alternative="greater").pvalue < UNDERFIT_ALPHA


def cycle_diverged(loss_curve, keep, steps_per_epoch: int, n_weights: int,
                   n_train: float) -> bool:  # fmt: skip
    """Whether a chain kept a draw in an epoch whose loss (per row) exceeds its lowest
    epoch loss by more than ``DIVERGED_NATS_PER_WEIGHT`` nats per weight over all rows."""
    curve = np.asarray(loss_curve)
    excess = curve[np.flatnonzero(keep) // steps_per_epoch] - curve.min()
    return bool(np.any(excess > DIVERGED_NATS_PER_WEIGHT * n_weights / n_train))


@dataclass
class _ChainSettings(Settings):
    #: draws each chain keeps
    n_keep: int = 1


class SGHMC(Trainer):
    """Stochastic-gradient Hamiltonian Monte Carlo with a cyclical step size (cSGHMC).

    Each of ``n_chains`` chains (members of the training engine, run in parallel) starts
    from an optimum of its own (``init="map"``: trained as a member of the deep ensemble
    is, from its own initialization) and runs ``n_cycles`` cycles of minibatch steps. The
    step size of every cycle falls from ``learning_rate_init`` to zero along a half cosine
    (Zhang et al. 2020). In the first ``1 - sampling_fraction`` of a cycle the chain
    explores with Adam's steps: it leaves the last cycle's draws and descends to a mode. In
    the rest it is SGHMC (Chen et al. 2014), from rest::

        v <- momentum v - lr P grad L_B(theta) + N(0, 2 (1 - momentum) lr P / n)
        theta <- theta + v

    with ``L_B`` the minibatch estimate of the negative log posterior per row, ``n`` the
    rows' total weight and ``P`` one scalar preconditioner (see ``learning_rate_init``),
    frozen while sampling, so the sampling stage is SGHMC in rescaled coordinates, whose
    stationary distribution approaches the posterior as the step size shrinks. The draws
    are kept at the end of each cycle, where it is smallest: ``n_samples`` in all, spread
    evenly over chains and cycles, those of one cycle spaced over the last half of its
    sampling stage.

    The minibatch gradient's own noise is not corrected for, so the draws are not exact:
    their spread is off by a share that shrinks with the step size and grows with the
    gradient noise (see the user guide's measurement on Bayesian linear regression), and a
    direction whose posterior is much wider than the data make it (the prior's scale) is
    explored only as far as a cycle's steps carry the chain. Use it where the exact
    samplers cannot run: on many rows, where each full-data gradient is costly and the
    posterior is narrow. With ``noise_std=None`` the log noise precision is a parameter
    like the weights; a hierarchical prior's layer precisions are held at their prior mean.

    Parameters
    ----------
    n_chains : int, default=4
        Independent chains, each from its own initialization; they run in parallel threads.
    n_cycles : int, default=4
        Cycles per chain; the draws of different cycles come from different modes, or from
        different visits to one.
    sampling_fraction : float, default=0.2
        The share of each cycle, at its end, in which the noise is injected.
    learning_rate_init : float, default=0.001
        The step size at the start of every cycle. The sampling steps are preconditioned
        by one scalar, the inverse root mean square of the gradient over the exploration
        stages (as RMSprop's, frozen while sampling), so this is about how far a step
        moves each parameter whatever the loss's scale (a small noise makes it steep);
        with ``momentum`` 0.9 the velocity carries about ten steps' worth, and an
        exploration step (Adam's) is as long: ``learning_rate_init / (1 - momentum)``.
    momentum : float, default=0.9
        One minus the friction. The velocity keeps this share of itself per step.
    batch_size : int or "auto", default="auto"
        Rows per minibatch; ``"auto"`` is 32, raised on more than 32,000 rows so that an
        epoch takes at most 1,000 steps.
    max_iter : int, default=None
        Epochs per chain, divided evenly into the cycles. ``None`` is epochs enough for
        10,000 steps per cycle, and at least 50 per cycle, but no more than 2 x 10^7 row
        visits per chain (20 epochs of 10^6 rows) and at least 10. When the chains were
        still fitting the data as sampling ended (the training loss at a cycle's end
        falling from one cycle to the next, ``diagnostics_["cycle_gains"]``, by more
        than twice the posterior's own spread of it, ``diagnostics_["loss_spread"]``), a
        ConvergenceWarning asks for more.
    init : {"map", "random"}, default="map"
        Where each chain starts: ``"map"``, an optimum trained as a
        :class:`~skbnn.methods.DeepEnsemble` member is (on many rows the cycles' budget
        is too short to fit the network from scratch, so the first cycles' draws
        underfit); ``"random"``, scikit-learn's random initialization, as an ensemble
        member starts.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skbnn import BayesianMLPRegressor
    >>> from skbnn.methods import SGHMC
    >>> X, y = make_regression(n_samples=300, n_features=3, noise=5.0, random_state=0)
    >>> reg = BayesianMLPRegressor(method=SGHMC(max_iter=200), random_state=0)
    >>> mean, std = reg.fit(X, y).predict(X[:2], return_std=True)
    """

    name = "sghmc"
    default_n_samples = 48

    _parameter_constraints: dict = {
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "n_cycles": [Interval(Integral, 1, None, closed="left")],
        "sampling_fraction": [Interval(Real, 0, 1, closed="right")],
        "learning_rate_init": ENGINE_CONSTRAINTS["learning_rate_init"],
        "momentum": ENGINE_CONSTRAINTS["momentum"],
        "batch_size": ENGINE_CONSTRAINTS["batch_size"],
        "max_iter": ENGINE_CONSTRAINTS["max_iter"],
        "init": [StrOptions({"map", "random"})],
    }

    def __init__(
        self,
        n_chains=4,
        n_cycles=4,
        sampling_fraction=0.2,
        learning_rate_init=0.001,
        momentum=0.9,
        batch_size="auto",
        max_iter=None,
        init="map",
    ):
        store_params(self, locals())

    def _settings(self, target) -> Settings:
        n_rows = target.n_rows
        if self.batch_size == "auto":
            batch = min(n_rows, max(AUTO_BATCH, -(-n_rows // AUTO_BATCH_STEPS)))
        else:
            batch = int(self.batch_size)
        max_iter = self.max_iter
        if max_iter is None:
            _, steps = batches(n_rows, batch)
            per_cycle = max(-(-CYCLE_STEPS // steps), CYCLE_EPOCHS)
            max_iter = row_budget(n_rows, int(self.n_cycles) * per_cycle)
        return _ChainSettings(
            solver="sghmc",
            learning_rate_init=float(self.learning_rate_init),
            learning_rate="constant",
            momentum=float(self.momentum),
            nesterovs_momentum=False,
            batch_size=batch,
            max_iter=int(max_iter),
            tol=0.0,
            early_stopping=False,
        )

    def _schedule(self, n_steps: int, n_keep: int, n_train: float, s: Settings):
        """Every step's learning rate, injected noise sd and keep flag, over a chain of
        ``n_steps`` steps that keeps ``n_keep`` draws."""
        m = int(self.n_cycles)
        t = np.arange(n_steps)
        # the position within the cycle, in [0, 1): exact in integers
        cycle = (t * m) // n_steps
        r = ((t * m) % n_steps) / n_steps
        lrs = 0.5 * s.learning_rate_init * (np.cos(np.pi * r) + 1.0)
        sampling = r >= 1.0 - float(self.sampling_fraction)
        noise = np.where(sampling, np.sqrt(2.0 * (1.0 - s.momentum) * lrs / n_train), 0.0)
        keep = np.zeros(n_steps, dtype=np.int8)
        per_cycle = np.full(m, n_keep // m) + (np.arange(m) >= m - n_keep % m)
        for c in range(m):
            k = int(per_cycle[c])
            if k == 0:
                continue
            steps = np.flatnonzero((cycle == c) & sampling)
            if steps.size < k:
                # a sampling stage shorter than its draws: the cycle's last steps
                steps = np.flatnonzero(cycle == c)[-k:]
            half = steps[steps.size // 2 :]
            spacing = max(1, half.size // k) if half.size >= k else 1
            keep[steps[-1] - spacing * np.arange(k)] = 1
        return lrs, noise, keep

    def _optimize(self, target, theta, train, val, s, prior_mean, YT, rng, bar, member):
        # a chain: the cycles' schedule over all its epochs, the draws into a buffer
        _, steps_per_epoch = batches(train.size, s.batch_size)
        n_steps = s.max_iter * steps_per_epoch
        lrs, noise, keep = self._schedule(n_steps, s.n_keep, target.weight_of(train), s)
        n_keep = int(keep.sum())
        cfg = np.zeros(1, dtype=kopt.MOMENTS)
        cfg[0]["raw"] = 1
        draws = kopt.Moments(cfg, np.empty(0), np.empty(0), np.zeros((n_keep, theta.size)))

        def plan(epoch, n):
            part = slice(epoch * n, (epoch + 1) * n)
            return lrs[part], noise[part], keep[part]

        minibatch_epochs(target, theta, train, None, s, prior_mean, YT, s.max_iter,
                          rng=rng, plan=plan, moments=draws, bar=bar,
                          member=member)  # fmt: skip
        member.converged = True
        member.draws = draws.dev[: int(cfg[0]["n"])]
        if member.draws.shape[0] < n_keep or not np.all(np.isfinite(member.draws)):
            member.diverged = True
        elif not member.diverged:
            member.diverged = cycle_diverged(member.loss_curve, keep, steps_per_epoch,
                                             theta.size, target.weight_of(train))  # fmt: skip

    def _warn_still_fitting(self, gains, spread: float, n_chains: int, max_iter: int):
        median = float(np.median(gains))
        if self.init == "random":
            fix = (
                f"start each chain at an optimum of its own: {self._fix(init='map')}, "
                f"or give the cycles more steps: {self._fix(max_iter=4 * max_iter)}"
            )
        else:
            fix = f"give the cycles more steps: {self._fix(max_iter=4 * max_iter)}"
        warn(
            "SGHMC's chains were still fitting the data when sampling ended: from one "
            f"cycle's end to the next the training loss fell by {median:.3g} nats per row "
            f"(the median over {gains.size} cycles of {n_chains} chains, "
            f"{int(np.sum(gains > 0))} of them falling), {median / spread:.0f} times the "
            f"posterior's own spread of it ({spread:.2g}), so the draws of the earlier "
            f"cycles underfit. To fix it, {fix}; or use method='ensemble', which trains "
            "each member to its optimum.",
            ConvergenceWarning,
        )

    def run(self, target, n_samples: int, random_state, n_jobs, verbose: int) -> FitResult:
        """Run ``n_chains`` chains; keep ``n_samples`` draws in all. See
        :meth:`BaseMethod.run`."""
        self._validate_params()
        n_chains, n_cycles = int(self.n_chains), int(self.n_cycles)
        n_keep = math.ceil(n_samples / n_chains)
        s = replace(self._settings(target), n_keep=n_keep)
        _, steps_per_epoch = batches(target.n_rows, s.batch_size)
        steps_per_cycle = s.max_iter * steps_per_epoch // n_cycles
        if steps_per_cycle < math.ceil(n_keep / n_cycles):
            raise ValueError(
                f"max_iter={s.max_iter} epochs of {steps_per_epoch} steps give "
                f"{steps_per_cycle} steps per cycle, fewer than the "
                f"{math.ceil(n_keep / n_cycles)} draws each keeps; raise max_iter: "
                f"{self._fix(max_iter=n_cycles * math.ceil(n_keep / n_cycles))}"
            )

        def random_start(target, rng):
            return glorot_init(target, rng), None, None

        start = random_start
        if self.init == "map":
            train_map = DeepEnsemble(heteroscedastic=False).member_trainer(target, random_start)

            def start(target, rng):
                # the chain's own optimum, from a child of its seed: each chain's start
                # depends on its seed alone, whatever the threads
                member = train_map(rng.bit_generator.seed_seq.spawn(1)[0])
                if member is None:
                    return random_start(target, rng)
                return member.theta, None, None

        members, train = self._train_members(
            target, n_chains, random_state, n_jobs, verbose, start, settings=s
        )
        gains = cycle_gains([m.loss_curve for m in members], n_cycles, steps_per_epoch, s.max_iter)
        diagnostics = SGHMCDiagnostics.extending(
            train, cycle_gains=gains, init=self.init, n_chains=len(members),
            n_cycles=int(self.n_cycles),
        )  # fmt: skip
        if gains is not None and gains.size > 1 and np.all(np.isfinite(gains)):
            spread = math.sqrt(target.n_params / 2) / float(target.W.sum())
            diagnostics.loss_spread = spread
            if still_fitting(gains, spread):
                self._warn_still_fitting(gains, spread, len(members), s.max_iter)
        thetas = np.concatenate([m.draws for m in members])[:n_samples]
        whole = len(members) * n_keep == thetas.shape[0]
        posterior = WeightedDraws(
            thetas,
            noise_precision=noise_of(target, thetas),
            chain_shape=(len(members), n_keep) if whole else None,
        )
        return FitResult(posterior, diagnostics=diagnostics)
