"""SWAG, the stochastic weight averaging Gaussian (Maddox et al. 2019), and MultiSWAG."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..exceptions import ConvergenceWarning, warn
from ..kernels import optim as kopt
from ..posterior import GaussianPosterior
from ..utils import seed_sequence
from ._base import FitResult, store_params
from ._engine_params import ENGINE_DEFAULTS, engine_parameters
from ._optim import MAX_RESTARTS, Trainer, batches, glorot_init, minibatch_epochs, schedule
from ._records import SWAGDiagnostics

_ENGINE = ENGINE_DEFAULTS["members"]

#: Nats per row by which the collection phase's loss may exceed the pre-trained optimum's
#: before the phase counts as unstable (its iterates left the optimum's basin)
UNSTABLE = 1.0
#: ``swa_learning_rate="auto"``: the collection rate is this over the loss's largest
#: curvature at the pre-trained optimum, and at most ``SWA_RATE``. SGD with momentum ``m``
#: diverges along a direction of curvature ``lambda`` once ``rate * lambda > 2 (1 + m)``
#: (3.8 at 0.9); a quarter of that leaves room for the minibatches' own, larger curvature.
SWA_STABILITY = 1.0
SWA_RATE = 0.01
#: Power iterations for that curvature.
POWER_ITERATIONS = 20


def largest_curvature(evaluate, theta, n, rng, iterations=POWER_ITERATIONS) -> float:
    """The largest eigenvalue of the Hessian of the per-row loss ``-evaluate(theta) / n``,
    by power iteration on Hessian-vector products (central differences of the gradient).

    Parameters
    ----------
    evaluate : callable
        ``theta -> (log density, gradient)``, such as
        :meth:`skbnn.log_posterior.LogPosterior.evaluator`.
    theta : ndarray
        Where to measure.
    n : float
        The rows' total weight (the loss is per row).
    rng : numpy.random.Generator
        Draws the starting direction.
    iterations : int, default=20

    Returns
    -------
    float
        The largest eigenvalue in magnitude (0 where the loss is flat or not finite).
    """
    v = rng.standard_normal(theta.size)
    v /= np.linalg.norm(v)
    h = 1e-5 * (1.0 + float(np.linalg.norm(theta)) / math.sqrt(theta.size))
    largest = 0.0
    for _ in range(iterations):
        g_plus = evaluate(theta + h * v)[1].copy()
        g_minus = evaluate(theta - h * v)[1]
        hv = -(g_plus - g_minus) / (2.0 * h * n)
        norm = float(np.linalg.norm(hv))
        if not math.isfinite(norm) or norm == 0.0:
            return largest
        largest = norm
        v = hv / norm
    return largest


@engine_parameters()
class SWAG(Trainer):
    """A Gaussian fitted to the iterates of SGD around an optimum.

    After a pre-training phase (the training engine's ``solver`` for ``max_iter``), SGD
    with momentum runs ``swa_epochs`` more epochs at the constant or cyclic learning rate
    ``swa_learning_rate`` and takes a snapshot of the weights every ``collect_every``
    steps. Their running mean and mean square give the SWA mean ``m`` and the diagonal
    variance ``diag``; the deviations ``D`` of the last ``rank`` snapshots from the running
    mean give a low-rank part. A draw is ``m + sqrt(diag) z1 / sqrt(2) + D^T z2 /
    sqrt(2 (K - 1))`` for ``K`` kept deviations (``covariance="lowrank"``) or ``m +
    sqrt(diag) z1`` (``"diag"``). With ``n_members > 1`` it is MultiSWAG (Wilson and
    Izmailov 2020): independent runs from independent initializations, their draws
    pooled. The estimator's ``n_samples`` draws (100 by default: predictions need many
    fewer than a sampler's draws, and each costs a pass of the network) are made once from
    ``random_state``; the moments stay in ``posterior_`` and drawing never changes them.

    Every prior with a gradient works; a hierarchical prior's layer precisions are held at
    their prior mean. With ``noise_std=None`` the log noise precision is a parameter like
    the weights, so its draws come from the same Gaussian.

    The training engine's parameters (``solver`` to ``n_iter_no_change``) set the
    pre-training phase; ``momentum``, ``nesterovs_momentum`` and ``batch_size`` also the
    collection phase.

    Parameters
    ----------
    swa_epochs : int, default=20
        Epochs of the collection phase.
    swa_learning_rate : float or "auto", default="auto"
        SGD's learning rate while collecting (the top of each cycle when cyclic); it sets
        the spread of the iterates and so of the fitted Gaussian. ``"auto"`` is 0.01 (Maddox
        et al.'s order of magnitude), lowered to ``1 / lambda`` where the loss's largest
        curvature ``lambda`` at the pre-trained optimum (``diagnostics_["swa_curvature"]``,
        by power iteration) makes that unstable: where the noise is small the likelihood is
        steep, and SGD at a fixed rate leaves the optimum instead of sampling around it. A
        phase that still leaves it (its loss more than a nat per row above the optimum's)
        restarts at a tenth of the rate, twice at most.
    swa_schedule : {"constant", "cyclic"}, default="constant"
        ``"cyclic"`` decreases the rate linearly to 1/100 of it within every
        ``collect_every`` steps and takes each snapshot at the bottom.
    collect_every : int or "epoch", default="epoch"
        Steps between snapshots.
    rank : int, default=20
        Deviations kept for the low-rank part (Maddox et al. use 20); at least 2.
    covariance : {"lowrank", "diag"}, default="lowrank"
    n_members : int, default=1
        Independent SWAG runs (MultiSWAG when > 1).
    <engine parameters>
    """

    name = "swag"
    default_n_samples = 100

    _parameter_constraints: dict = {
        **Trainer._parameter_constraints,
        "swa_epochs": [Interval(Integral, 1, None, closed="left")],
        "swa_learning_rate": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "swa_schedule": [StrOptions({"constant", "cyclic"})],
        "collect_every": [StrOptions({"epoch"}), Interval(Integral, 1, None, closed="left")],
        "rank": [Interval(Integral, 2, None, closed="left")],
        "covariance": [StrOptions({"lowrank", "diag"})],
        "n_members": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        swa_epochs=20,
        swa_learning_rate="auto",
        swa_schedule="constant",
        collect_every="epoch",
        rank=20,
        covariance="lowrank",
        n_members=1,
        solver=_ENGINE["solver"],
        learning_rate_init=_ENGINE["learning_rate_init"],
        learning_rate=_ENGINE["learning_rate"],
        momentum=_ENGINE["momentum"],
        nesterovs_momentum=_ENGINE["nesterovs_momentum"],
        beta_1=_ENGINE["beta_1"],
        beta_2=_ENGINE["beta_2"],
        epsilon=_ENGINE["epsilon"],
        batch_size=_ENGINE["batch_size"],
        max_iter=_ENGINE["max_iter"],
        tol=_ENGINE["tol"],
        early_stopping=_ENGINE["early_stopping"],
        validation_fraction=_ENGINE["validation_fraction"],
        n_iter_no_change=_ENGINE["n_iter_no_change"],
    ):
        store_params(self, locals())

    #: whether a member's collection diverged at every restart in the last run
    _collection_diverged: bool = False

    def _runs_epochs(self, target) -> bool:
        """True: the collection runs SGD epochs whatever the pre-training's solver."""
        return True

    def _lower_rate(self, settings) -> str:
        # a member diverges in pre-training, or in a collection whose iterates overflowed
        lower = super()._lower_rate(settings)
        if self.swa_learning_rate == "auto":
            return lower
        collection = self._fix(swa_learning_rate=self.swa_learning_rate / 100)
        if self._collection_diverged:
            # a member's restarts lower the pre-training's rate, not the collection's
            return collection
        return f"{collection} or {lower}"

    def run(self, target, n_samples: int, random_state, n_jobs, verbose: int) -> FitResult:
        """Pre-train, collect and fit the Gaussian(s); see :meth:`BaseMethod.run`."""
        self._validate_params()
        self._collection_diverged = False
        ss = seed_sequence(random_state)
        members, train = self._train_members(
            target, int(self.n_members), ss, n_jobs, verbose, _glorot_start,
            after=self._collect,
            epochs_per_member=self._settings(target).max_iter + int(self.swa_epochs),
        )  # fmt: skip
        posterior = self._gaussian(target, members, n_samples, ss)
        diagnostics = SWAGDiagnostics.extending(
            train,
            n_snapshots=np.array([m.moments[3] for m in members]),
            swa_learning_rate=np.array([m.swa_learning_rate for m in members]),
        )
        if self.swa_learning_rate == "auto":
            diagnostics.swa_curvature = np.array([m.curvature for m in members])
        self._warn_if_unstable(members)
        return FitResult(posterior, diagnostics=diagnostics)

    # -- the phases of a run ------------------------------------------------------------

    def _collect(self, target, theta, train, prior_mean, YT, rng, member, bar) -> None:
        """The collection phase of a pre-trained member (the training engine's ``after``):
        SGD from its optimum at the collection rate, restarted at a ten times smaller rate
        while it leaves the optimum's basin; its moments into ``member.moments``."""
        s = self._settings(target)
        _, steps = batches(train.size, s.batch_size)
        every = steps if self.collect_every == "epoch" else int(self.collect_every)
        start_theta = theta.copy()
        start_loss = member.loss_curve[-1]
        lr = self._collection_rate(target, theta, train, prior_mean, YT, rng, member)
        for attempt in range(MAX_RESTARTS + 1):
            # SGD is unstable where the curvature exceeds 2 / lr, as a small noise makes
            # the likelihood steep: its iterates then wander far from the optimum (or
            # overflow) instead of sampling around it. Restart the phase from the
            # optimum with a ten times smaller rate when it left the optimum's basin
            theta[:] = start_theta
            member.diverged = False
            first = len(member.loss_curve)
            cfg, mom = self._sgd_moments(target, theta, train, prior_mean, YT, rng, member,
                                         bar, s, lr, every)  # fmt: skip
            losses = np.asarray(member.loss_curve[first:])
            stable = np.all(np.isfinite(losses)) and losses.max() <= start_loss + UNSTABLE
            if stable or attempt == MAX_RESTARTS:
                break
            lr /= 10.0
        member.swag_stable = bool(stable)
        member.swa_learning_rate = lr
        if member.diverged:
            self._collection_diverged = True
        self._store_moments(member, cfg, mom)

    def _collection_rate(self, target, theta, train, prior_mean, YT, rng, member) -> float:
        """``swa_learning_rate``; with ``"auto"``, the stable rate under the loss's largest
        curvature at the optimum (kept as ``member.curvature``), at most ``SWA_RATE``."""
        if self.swa_learning_rate != "auto":
            return float(self.swa_learning_rate)
        evaluate = target.evaluator(prior_mean, train, YT)
        curvature = largest_curvature(evaluate, theta, target.weight_of(train), rng)
        member.curvature = curvature
        return SWA_RATE if curvature <= 0 else min(SWA_RATE, SWA_STABILITY / curvature)

    def _sgd_moments(self, target, theta, train, prior_mean, YT, rng, member, bar, s, lr,
                     every) -> tuple:  # fmt: skip
        """``swa_epochs`` of SGD at ``lr`` by ``swa_schedule``, a snapshot every ``every``
        steps into the running moments: the kernel's counter record and the moments."""
        p = target.n_params
        rank = int(self.rank) if self.covariance == "lowrank" else 0
        cfg = np.zeros(1, dtype=kopt.MOMENTS)
        mom = kopt.Moments(cfg, np.zeros(p), np.zeros(p), np.zeros((rank, p)))
        n_epochs = int(self.swa_epochs)

        def plan(epoch, n_steps, lr=lr, n_epochs=n_epochs):
            # a snapshot after every ``every``-th step since the phase began
            step = epoch * n_steps + np.arange(1, n_steps + 1)
            lrs = schedule(self.swa_schedule, lr, epoch, n_epochs, n_steps, every)
            return lrs, None, (step % every == 0).astype(np.int8)

        minibatch_epochs(
            target, theta, train, None, s, prior_mean, YT, n_epochs, rng=rng,
            plan=plan, moments=mom, sgd=True, member=member, bar=bar,
        )  # fmt: skip
        return cfg, mom

    def _store_moments(self, member, cfg, mom) -> None:
        """The collected mean, mean square, deviations (oldest first) and snapshot count
        into ``member.moments``; a member whose moments overflowed is marked diverged."""
        rank = mom.dev.shape[0]
        n = int(cfg[0]["n"])
        # the ring buffer's rows in the order they were written, oldest first
        kept = min(n, rank)
        order = [(n - kept + i) % rank for i in range(kept)] if rank else []
        member.moments = (mom.mean.copy(), mom.sq_mean.copy(), mom.dev[order].copy(), n)
        finite = all(np.all(np.isfinite(a)) for a in member.moments[:3])
        if not (finite and np.all(np.isfinite(mom.sq_mean - mom.mean**2))):
            # moments that overflowed describe no distribution: a diverged member,
            # restarted or dropped as the engine does with any other
            member.diverged = True

    def _gaussian(self, target, members, n_samples: int, ss) -> GaussianPosterior:
        """The members' Gaussians: diagonal, or half diagonal and half low-rank (the
        deviations' last ``rank`` snapshots, as many for every member)."""
        lowrank = self.covariance == "lowrank"
        means, variances, factors = [], [], []
        for m in members:
            mean, sq, dev, n = m.moments
            need = 2 if lowrank else 1
            if n < need:
                raise ValueError(
                    f"SWAG collected {n} snapshot(s), fewer than the {need} its covariance "
                    f"needs: raise swa_epochs ({self.swa_epochs}) or lower collect_every "
                    f"({self.collect_every})"
                )
            diag = np.maximum(sq - mean**2, 0.0)
            means.append(mean)
            if lowrank:
                variances.append(0.5 * diag)
                factors.append(dev / math.sqrt(2.0 * (dev.shape[0] - 1)))
            else:
                variances.append(diag)
        k = min(f.shape[0] for f in factors) if lowrank else 0
        factor = np.stack([f[-k:] for f in factors]) if lowrank else None
        return GaussianPosterior(
            np.stack(means),
            np.stack(variances),
            factor,
            n_draws=n_samples,
            random_state=ss.spawn(1)[0],
            n_noise=target.layout.n_noise,
            noise_precision=target.tau.copy() if target.noise_at_tau else None,
        )

    def _warn_if_unstable(self, members) -> None:
        """A ConvergenceWarning when a collection left its optimum at every rate tried."""
        unstable = [m for m in members if not m.swag_stable]
        if unstable:
            lowest = min(m.swa_learning_rate for m in unstable)
            warn(
                f"SWAG's collection phase left the optimum (its loss rose by more than "
                f"{UNSTABLE} nat per row, or overflowed) in {len(unstable)} of {len(members)} "
                f"runs, even at swa_learning_rate={lowest:.3g}, so its Gaussian describes "
                "iterates far from the optimum. Lower the rate: "
                f"method=SWAG(swa_learning_rate={lowest / 10:.3g}).",
                ConvergenceWarning,
            )


def _glorot_start(target, rng):
    """A member's start: scikit-learn's initialization, no anchor and no noise."""
    return glorot_init(target, rng), None, None
