"""Variational inference: Bayes by Backprop (Blundell et al. 2015) on the training engine."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import clone
from sklearn.utils._param_validation import Interval, StrOptions

from ..kernels import density as knet
from ..kernels import lrt as klrt
from ..kernels import optim as kopt
from ..kernels import vi as kvi
from ..kernels._compile import compile_aside
from ..kernels.helper import serve_kernel
from ..posterior import GaussianPosterior
from ..utils import check_interrupt, seed_sequence
from ._base import FitResult, store_params
from ._engine_params import ENGINE_DEFAULTS, ENGINE_DOCS, engine_parameters
from ._optim import (
    ADAPTIVE_FACTOR,
    ADAPTIVE_REDUCTIONS,
    Member,
    Settings,
    Trainer,
    batches,
    ended_far_above_best,
    glorot_init,
    loss_trend,
    record_epoch,
    row_budget,
    schedule,
    validation_epoch,
)
from ._records import VIDiagnostics

_ENGINE = ENGINE_DEFAULTS["variational"]

#: Optimizer steps that ``max_iter=None`` aims for on up to ``STEPS_ROWS`` rows, growing
#: as the square root of the rows beyond: the epochs are this many steps' worth (at least
#: 20), since the variances converge in steps, not in epochs, and more rows narrow the
#: posterior they shrink toward.
DEFAULT_STEPS = 10_000
STEPS_ROWS = 1000
#: ``batch_size="auto"``: rows per minibatch (scikit-learn's ``min(200, n_rows)``).
VI_BATCH = 200


def _variant(vcfg) -> int:
    """:func:`~skbnn.kernels.vi.run_vi_epoch_for`'s ``lbbnn``: LBBNN's estimator, which the
    epoch kernel is specialized for, else 0."""
    return int(vcfg[0]["lbbnn"])


def inverse_softplus(s: float) -> float:
    return float(s + np.log(-np.expm1(-s)))


#: What the variational methods' training engine does differently (see
#: :func:`~skbnn.methods._engine_params.engine_parameters`).
VARIATIONAL_ENGINE_DOCS = {
    "solver": (
        '{"auto", "adam", "sgd"}',
        """``"auto"`` is Adam (the objective is stochastic: L-BFGS does not apply).""",
    ),
    "max_iter": (
        "int",
        """Epochs; None is enough epochs for 10,000 steps on up to 1,000 rows, and
    ``10,000 sqrt(n / 1000)`` on ``n`` rows above (the posterior narrows as rows are
    added, and the variances take longer to shrink to it), at least 20; but no more than
    2 x 10^7 row visits (20 epochs of 10^6 rows) and at least 10.""",
    ),
    "tol": (
        ENGINE_DOCS["tol"][0],
        """An epoch counts as an improvement when it lowers the monitored loss (nats per row)
    by more than ``tol``, in the stopping rule above.""",
    ),
    "n_iter_no_change": (
        ENGINE_DOCS["n_iter_no_change"][0],
        "Epochs without improvement that make a plateau, in the stopping rule above.",
    ),
}


@engine_parameters(**VARIATIONAL_ENGINE_DOCS)
class VariationalInference(Trainer):
    """Variational inference by Bayes by Backprop: a Gaussian ``q`` over the weights
    that maximizes the evidence lower bound (ELBO).

    ``q`` is mean-field (``family="meanfield"``: a mean and ``sigma = softplus(rho)`` per
    parameter, as in Blundell et al. 2015) or mean-field plus ``rank`` factors
    (``"lowrank"``: ``N(mu, diag(sigma^2) + V'V)``), over the weights, biases and, with
    ``noise_std=None``, the log noise precision of each output: a Gaussian on ``log tau``,
    a log-normal factor on the precision under its Gamma prior. That is fully Bayesian and
    keeps the ELBO a lower bound on the evidence of the model the other methods sample (a
    point estimate of the noise would bound a different quantity).

    Each step of the training engine's Adam or SGD (same minibatches, learning-rate
    schedules, restarts and seeding) ascends an unbiased estimate of the ELBO from
    ``n_mc`` reparameterized draws: the minibatch's log-likelihood scaled by ``n / B``
    plus, once per step, the prior term and the entropy of ``q``. So the per-epoch
    objective (``diagnostics_["loss_curve"]``, per row) is exactly the ELBO, with no
    ad-hoc KL weights. The entropy is exact, and so is the weights' prior term under a
    Gaussian prior (the closed-form KL); any other prior, and the noise's Gamma prior, are
    Monte Carlo terms. With ``local_reparameterization`` (mean-field only), each layer's
    pre-activations are drawn per row (Kingma et al. 2015): an independent draw of the
    weights for every row, so lower-variance gradients for about twice the arithmetic.

    After training, ``elbo_`` is estimated over all rows with ``elbo_samples``
    independent draws; its Monte Carlo standard error is ``diagnostics_["elbo_se"]``. The
    ELBO is a lower bound on ``log p(y | X)``, below it by ``KL(q || posterior)``: it is
    not the evidence, and it favours models whose posterior ``q`` fits well (often the
    simpler ones). The estimator's ``n_samples`` draws (100 by default) from ``q``
    predict.

    The mean-field family states the predictive spread slightly wide on a few hundred rows:
    its 90 % intervals covered 95 % of test points on one of the benchmark's small
    regression sets, 90-93 % on the others (doc/defaults.md).

    Training stops when the loss has confidently stopped improving: the mean over the
    last ``n_iter_no_change`` epochs is below that over the ``n_iter_no_change`` before
    by less than ``tol`` per row, at two standard errors, and those are below ``tol / 2``
    (on a few hundred rows the epochs' Monte Carlo noise rarely allows that: the run
    takes its ``max_iter`` epochs). A ``ConvergenceWarning`` says
    when it was still improving by more than ``tol`` (at three standard errors) at
    ``max_iter``. With ``early_stopping``, the mean network's validation loss decides
    instead, as in :class:`DeepEnsemble`.

    Parameters
    ----------
    family : {"meanfield", "lowrank"}, default="meanfield"
    rank : int, default=5
        Factors of the low-rank family.
    local_reparameterization : bool or "auto", default="auto"
        Draw the pre-activations per row instead of the weights per minibatch. ``"auto"``
        is True for the mean-field family; the low-rank family correlates weights across
        units, so it cannot (True is refused).
    n_mc : int, default=1
        Draws per step.
    init_std : float, default=0.01
        The initial ``sigma`` of every parameter; the means start as scikit-learn's MLP
        does (and the low-rank factors at ``init_std / sqrt(rank)`` normals).
    elbo_samples : int, default=100
        Draws for the final ELBO estimate.
    <engine parameters>

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skbnn import BayesianMLPRegressor
    >>> from skbnn.methods import VariationalInference
    >>> X, y = load_diabetes(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = BayesianMLPRegressor((10,), method=VariationalInference(), random_state=0)
    >>> model = model.fit(X, y)
    >>> bool(model.elbo_ < 0)
    True
    """

    name = "vi"
    default_n_samples = 100
    #: kernels beside the epoch's and the network's that a fit needs compiled
    _more_kernels: tuple = ()

    def _local(self, target) -> bool:
        """Whether the epoch kernel for ``target`` samples the first layer's
        pre-activations (the local reparameterization)."""
        return bool(self._vcfg(target)[0]["local"]) and self._family == kvi.GAUSSIAN

    def _kernels(self, target) -> tuple:
        """The variational family's epoch kernel for ``target``'s codes, estimator and
        optimizer, the forward pass of the ELBO's estimate and :attr:`_more_kernels`."""
        codes = target.kernel_codes
        vcfg = self._vcfg(target)
        epoch = kvi.run_vi_epoch_for(self._family, *codes, self._local(target), _variant(vcfg),
                                     bool(vcfg[0]["rank"]), self.solver != "sgd")  # fmt: skip
        backward = (klrt.lrt_backward_for(codes[0]),) if self._backward_by_address(vcfg) else ()
        return (epoch, *backward, knet.forward_batch_kernel(codes[0]), *self._more_kernels)

    def _warm_up(self, tiny, target) -> None:
        """One epoch and one ELBO estimate on ``tiny`` with the fit's estimator. Where it
        can, a helper process compiles meanwhile the kernels the epoch kernel calls by
        address and the ELBO's (:meth:`_aside`), then the forward pass of the ELBO and of
        prediction."""
        rng = np.random.default_rng(0)
        fast = clone(self).set_params(max_iter=1, elbo_samples=2)
        tiny_vcfg = fast._vcfg(tiny)
        tiny_vcfg[0]["local"] = int(self._local(target))
        vparams = fast._start(tiny, rng, tiny_vcfg)
        aside = fast._aside(tiny, vparams, tiny_vcfg)
        # and the team's loop, which the fit's thread loads (skbnn.kernels.helper.team)
        compile_aside(*aside, serve_kernel(), activation=int(tiny.kernel_codes[0]))
        fast._epochs(tiny, vparams, np.arange(tiny.n_rows), None, Settings(max_iter=1), None,
                     rng, None, Member(vparams), tiny_vcfg)  # fmt: skip
        for kernel in aside:
            # waits for the helper to cache it, and loads it, rather than compile it again
            kernel.resolve()
        fast._elbo(tiny, vparams, tiny_vcfg, rng, 2)

    def _aside(self, target, vparams, vcfg) -> tuple:
        """Kernels for the helper process to compile while this one compiles the epoch
        kernel, as :class:`~skbnn.kernels._compile.CompiledKernel`: those the epoch kernel
        calls by address (:meth:`_backward`) and the ELBO's estimate from Python."""
        backward = self._backward(target, vcfg)
        return () if backward is None else (backward,)

    def _backward(self, target, vcfg):
        """The local reparameterization's backward pass, which the epoch kernel calls by
        address (:func:`~skbnn.kernels.lrt.lrt_backward_kernel`) where
        :meth:`_backward_by_address`; else None."""
        if not self._backward_by_address(vcfg):
            return None
        return klrt.lrt_backward_kernel(target.kernel_codes[0], target.layout.sizes)

    def _by_address(self, target, vcfg):
        """The epoch kernel's last arguments: what it calls by address
        (:meth:`_backward`)."""
        return (self._backward(target, vcfg),)

    def _backward_by_address(self, vcfg) -> bool:
        """Whether the epoch kernel runs the local reparameterization's backward pass, and
        takes it by address: the mean-field family's local reparameterization."""
        return bool(vcfg[0]["local"]) and not vcfg[0]["rank"]

    #: the variational family, :func:`skbnn.kernels.vi.run_vi_epoch_for`'s ``fam``
    _family = kvi.GAUSSIAN

    _parameter_constraints: dict = {
        **Trainer._parameter_constraints,
        "family": [StrOptions({"meanfield", "lowrank"})],
        "rank": [Interval(Integral, 1, None, closed="left")],
        "local_reparameterization": ["boolean", StrOptions({"auto"})],
        "n_mc": [Interval(Integral, 1, None, closed="left")],
        "init_std": [Interval(Real, 0, None, closed="neither")],
        "elbo_samples": [Interval(Integral, 2, None, closed="left")],
        "solver": [StrOptions({"auto", "adam", "sgd"})],
    }

    def __init__(
        self,
        family="meanfield",
        rank=5,
        local_reparameterization="auto",
        n_mc=1,
        init_std=0.01,
        elbo_samples=100,
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

    def _settings(self, target) -> Settings:
        s = Trainer._settings(self, target)
        n_rows = target.n_rows
        s.solver = "adam" if self.solver == "auto" else self.solver
        if self.batch_size == "auto":
            s.batch_size = min(VI_BATCH, n_rows)
        if self.max_iter is None:
            _, steps = batches(n_rows, s.batch_size)
            total = DEFAULT_STEPS * max(1.0, math.sqrt(n_rows / STEPS_ROWS))
            s.max_iter = row_budget(n_rows, max(20, math.ceil(total / steps)))
        return s

    def _vcfg(self, target) -> np.ndarray:
        lowrank = self.family == "lowrank"
        local = self.local_reparameterization
        if local is True and lowrank:
            raise ValueError(
                "local_reparameterization=True needs family='meanfield': the low-rank "
                "family correlates weights across units, so its pre-activations are not "
                "independent per unit; use local_reparameterization='auto' or False"
            )
        vcfg = np.zeros(1, dtype=kvi.VI_CONFIG)
        vcfg[0] = (
            int(self.n_mc),
            0 if lowrank or local is False else 1,
            1 if target.prior_density.gaussian else 0,
            int(self.rank) if lowrank else 0,
            1,
            0,
            1.0,
            0,
            0,
        )
        return vcfg

    def _start(self, target, rng, vcfg) -> np.ndarray:
        """The initial variational parameters, flat as the kernels take them (the
        ``vparams`` of :mod:`skbnn.kernels.vi`): means, raw sds (``softplus`` gives ``sigma``)
        and the low-rank factors."""
        p = target.n_params
        rank = int(vcfg[0]["rank"])
        vparams = np.empty((2 + rank) * p)
        vparams[:p] = glorot_init(target, rng)
        vparams[p : 2 * p] = inverse_softplus(float(self.init_std))
        vparams[2 * p :] = rng.standard_normal(rank * p) * (self.init_std / math.sqrt(max(rank, 1)))
        return vparams

    def _work(self, target, vcfg):
        """The kernel's scratch arrays (and the family's prior constants) for one run."""
        return kvi.new_work(target.n_params, int(vcfg[0]["rank"]))

    def _mean_params(self, vparams: np.ndarray, p: int, work, target) -> np.ndarray:
        """The mean network of ``q``, whose validation loss early stopping reads."""
        return vparams[:p]

    def _epochs(self, target, vparams, train, val, s, YT, rng, bar, member, vcfg):
        """Up to ``s.max_iter`` epochs of VI on the rows ``train``."""
        p = target.n_params
        tgt = target.kernel_target(own=True, YT=YT)
        n_train = train.size
        batch, n_steps = batches(n_train, s.batch_size)
        d, ky = target.n_features, target.YT.size // target.n_rows
        data = kopt.Batches(
            target.XT, target.YT if YT is None else YT, target.W, train, np.empty(d * batch),
            np.empty(ky * batch), np.empty(batch),
        )  # fmt: skip
        sizes = target.layout.sizes
        ws = np.empty(max(klrt.lrt_workspace_size(sizes, batch), knet.workspace_size(sizes, batch)))
        work = self._work(target, vcfg)
        stats = np.empty(2 + int(sizes[-1]))
        opt = kopt.optimizer(1 if s.solver == "sgd" else 0, vparams.size, s.beta_1,
                             s.beta_2, s.epsilon, s.momentum, s.nesterovs_momentum)  # fmt: skip
        validation = None if val is None else target.evaluator(None, val, YT)
        val_weight = None if val is None else target.weight_of(val)
        window = int(s.n_iter_no_change)
        best, best_vparams, count = np.inf, None, 0
        local = bool(vcfg[0]["local"]) and self._family == kvi.GAUSSIAN
        epoch_kernel = kvi.run_vi_epoch_for(self._family, *target.kernel_codes, local,
                                            _variant(vcfg), bool(vcfg[0]["rank"]),
                                            s.solver != "sgd")  # fmt: skip
        by_address = self._by_address(target, vcfg)
        member.converged = False
        lr0, reductions, since = s.learning_rate_init, 0, 0
        for epoch in range(s.max_iter):
            check_interrupt()  # a member on the pool stops here on Ctrl-C
            data = data._replace(rows=rng.permutation(train))
            lrs = schedule(s.learning_rate, lr0, epoch, s.max_iter, n_steps)
            try:
                loss = epoch_kernel(vparams, tgt, data, batch, lrs, opt, vcfg, work, ws, stats,
                                    rng, *by_address)  # fmt: skip
            except np.linalg.LinAlgError:
                # the low-rank family's Cholesky factor of a matrix a divergent step made
                # non-finite: a diverged loss, restarted like any other
                loss = math.nan
            if not record_epoch(member, loss, n_steps * int(vcfg[0]["n_mc"]), bar):
                return member
            if validation is not None:
                # the mean network's validation loss, as the engine's early stopping
                mean = self._mean_params(vparams, p, work, target)
                improved, best, count = validation_epoch(validation, val_weight, mean, member,
                                                          best, count, s.tol)  # fmt: skip
                if improved:
                    best_vparams = vparams.copy()
                if count > s.n_iter_no_change:
                    member.converged = True
                    break
            elif since >= 2 * window:
                gain, se = loss_trend(member.loss_curve, window)
                # a plateau, once the windows are precise enough to tell: a noisy window's
                # chance low point must not stop a run that is still improving
                if 2.0 * se < s.tol and gain + 2.0 * se < s.tol:
                    if s.learning_rate != "adaptive" or reductions == ADAPTIVE_REDUCTIONS:
                        member.converged = True
                        break
                    # the adaptive schedule goes on at a fifth of the rate
                    reductions += 1
                    lr0 /= ADAPTIVE_FACTOR
                    since = 0
            since += 1
        curve = member.loss_curve
        if validation is None and not member.converged:
            w = min(window, len(curve) // 2)
            if w >= 2:
                gain, se = loss_trend(curve, w)
                member.converged = gain - 3.0 * se <= s.tol
                member.trend = (gain, se, w)
            else:
                member.trend = (float("nan"), float("nan"), w)
        # a run too short for the trend's windows cannot tell a divergence from noise in
        # its sampled losses; a non-finite one was caught above
        if len(curve) >= 2 * window and ended_far_above_best(curve, sampled=True):
            member.diverged = True
            return member
        if best_vparams is not None:
            vparams[:] = best_vparams
        return member

    def _optimize(self, target, theta, train, val, s, prior_mean, YT, rng, bar, member):
        self._epochs(target, theta, train, val, s, YT, rng, bar, member, self._vcfg(target))

    def _not_converged(self, settings, slow, kept, longer) -> str:
        gain, se, w = getattr(kept[0], "trend", (float("nan"), float("nan"), 0))
        if not np.isfinite(gain):
            # fewer than four epochs: no trend to measure, so nothing to say it stabilized
            return (
                f"the ELBO cannot be judged after max_iter={settings.max_iter} epochs: the "
                "stopping rule compares means over windows of at least two epochs each. "
                f"Train longer: {longer}."
            )
        return (
            f"the ELBO had not stabilized at max_iter={settings.max_iter} epochs: over the "
            f"last {w} epochs it still rose by {gain:.3g} +- {se:.2g} nats per row (more "
            f"than tol={settings.tol:g} at three standard errors). Train longer: {longer}."
        )

    def _elbo(self, target, vparams, vcfg, rng, n_draws: int, n_jobs: int = 1) -> np.ndarray:
        """``n_draws`` independent estimates of the ELBO over all rows: ``log p(y, theta)
        - log q(theta)`` at draws of ``theta`` from ``q``. Near the optimum the two terms
        move together, so this has a smaller variance than the expected log-likelihood
        alone (none at all when ``q`` is the posterior)."""
        p = target.n_params
        rank = int(vcfg[0]["rank"])
        mu = vparams[:p]
        sigma = np.logaddexp(0.0, vparams[p : 2 * p])
        eps = rng.standard_normal((n_draws, p))
        theta = mu + sigma * eps
        logdet = 2.0 * np.sum(np.log(sigma))
        if rank:
            v = vparams[2 * p :].reshape(rank, p)
            theta += rng.standard_normal((n_draws, rank)) @ v
            # the Woodbury identity and the determinant lemma, M = I + V D^-1 V'
            m = np.eye(rank) + (v / sigma**2) @ v.T
            dr = (theta - mu) / sigma**2
            vdr = dr @ v.T
            quad = np.sum((theta - mu) * dr, axis=1) - np.sum(vdr * np.linalg.solve(m, vdr.T).T, 1)
            logdet += np.linalg.slogdet(m)[1]
        else:
            quad = np.sum(eps**2, axis=1)
        log_q = -0.5 * (p * np.log(2.0 * np.pi) + logdet + quad)
        loglik, logprior = target.loglik_batch(theta, n_jobs)
        return loglik + logprior - log_q

    def run(self, target, n_samples: int, random_state, n_jobs, verbose: int) -> FitResult:
        """Fit ``q``, estimate the ELBO and draw from ``q``; see :meth:`BaseMethod.run`."""
        self._validate_params()
        vcfg = self._vcfg(target)
        ss = seed_sequence(random_state)
        fit_seed, elbo_seed, draw_seed = ss.spawn(3)

        def start(target, rng):
            return self._start(target, rng, vcfg), None, None

        members, train = self._train_members(target, 1, fit_seed, n_jobs, verbose, start)
        vparams = members[0].theta
        p = target.n_params
        rank = int(vcfg[0]["rank"])
        sigma = np.logaddexp(0.0, vparams[p : 2 * p])
        factor = vparams[2 * p :].reshape(1, rank, p) if rank else None
        draws = self._elbo(target, vparams, vcfg, np.random.default_rng(elbo_seed),
                           int(self.elbo_samples), effective_n_jobs(n_jobs))  # fmt: skip
        elbo = float(draws.mean())
        diagnostics = VIDiagnostics.extending(
            train,
            elbo_se=float(draws.std(ddof=1) / math.sqrt(draws.size)),
            local_reparameterization=bool(vcfg[0]["local"]),
            closed_form_kl=bool(vcfg[0]["closed_kl"]),
        )
        posterior = GaussianPosterior(
            vparams[None, :p],
            sigma[None] ** 2,
            factor,
            n_draws=n_samples,
            random_state=draw_seed,
            n_noise=target.layout.n_noise,
            noise_precision=target.tau.copy() if target.noise_at_tau else None,
        )
        return FitResult(posterior, diagnostics=diagnostics, elbo=elbo)
