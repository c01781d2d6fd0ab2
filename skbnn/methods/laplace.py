"""The Laplace approximation, its model evidence, and empirical Bayes of the prior and noise."""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from functools import partial
from numbers import Integral, Real

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.optimize import minimize
from sklearn.utils._param_validation import Interval, StrOptions

from ..exceptions import ConvergenceWarning, collected_warnings, warn
from ..kernels import backprop as kbackprop
from ..kernels import density as knet
from ..kernels.helper import serve_kernel
from ..log_posterior import NoiseMode
from ..posterior import ForwardPass, LaplacePosterior, single_threaded_blas
from ..utils import seed_sequence
from ._base import FitResult, store_params
from ._curvature import CURVATURES, Curvature, full_hessian
from ._engine_params import ENGINE_DEFAULTS, ENGINE_DOCS, engine_parameters
from ._optim import NOT_CONVERGED, Trainer, glorot_init, row_budget
from ._records import LaplaceDiagnostics, TrainingDiagnostics
from ._symmetry import log_symmetric_modes

_ENGINE = ENGINE_DEFAULTS["laplace"]

_LOG_2PI = math.log(2.0 * math.pi)
#: Gauss-Newton steps that polish the trained MAP into a stationary point of the log
#: posterior (one suffices for a quadratic log posterior; a few for a network near its mode).
MAX_NEWTON_STEPS = 8
#: Gauss-Newton steps of each empirical Bayes update's polish: the updates are ranked by
#: their evidence after it, and the best one is then polished with ``MAX_NEWTON_STEPS``. On
#: many rows a Gauss-Newton step costs a pass of the network's Jacobian over every row.
UPDATE_NEWTON_STEPS = 3
#: Newton steps with the exact Hessian after them, where they are affordable (``q^2 n`` up to
#: the budget, about a second of gradient passes per step).
EXACT_NEWTON_STEPS = 4
EXACT_NEWTON_BUDGET = 5e8
#: Iterations of the L-BFGS run that precedes them (bounded: at a ReLU kink no gradient
#: tolerance is ever met).
POLISH_LBFGS_ITER = 300
#: On many rows every L-BFGS iteration is a pass over all of them: the polish then runs at
#: most the iterations that add up to this many row visits (at least ``MIN_POLISH_ITER``),
#: and the Gauss-Newton steps, each a pass too but quadratically convergent, finish it.
POLISH_ROWS = 5_000_000
MIN_POLISH_ITER = 5
#: Rows above which empirical Bayes holds the MAP (the prior barely moves it, and a
#: retraining costs many passes) and polishes it once, under the best hyperparameters.
RETRAIN_MAX_ROWS = 100_000
#: Rows times parameters above which it holds the MAP too: what one pass of a retraining
#: costs, so a wide network on fewer rows (784-400-600-10 on 60,000 images: 3.4e10, and a
#: retraining is hundreds of such passes) is held where a small one is retrained. A
#: (100, 100) network on 20 inputs reaches it at about 81,000 rows.
RETRAIN_MAX_WORK = 10**9
#: Iterations of the short polish that ranks the n_init initializations by their evidence
#: (modes worth telling apart differ by nats; the full polish then changes the winner's
#: evidence by tenths at most)
RANK_LBFGS_ITER = 50
#: Empirical Bayes updates without a new best evidence before it stops (the trace is not
#: monotone: each update retrains the MAP).
PATIENCE = 3
#: Nats a Newton step would still gain at the reported MAP above which Laplace warns that
#: the MAP is not a mode (its evidence is then off by about that much).
MAX_DECREMENT = 0.1
#: A MAP that is not a mode warns when one more Newton step from it would change the
#: evidence by more than this many nats per training row, and ``MIN_EVIDENCE_CHANGE`` in all. The
#: linearized (GLM) predictive is that of the network linearized where training stopped,
#: defined there whether or not it is a mode, so it is not what decides.
MAX_EVIDENCE_CHANGE = 0.01
MIN_EVIDENCE_CHANGE = 1.0
#: Bounds of the prior and noise precisions empirical Bayes may choose.
PRECISION_RANGE = (1e-8, 1e8)


class _State:
    """The approximation at one MAP under one set of hyperparameters."""

    def __init__(self, theta, precision, loglik, logprior, log_evidence, curvature, ssr):
        self.theta = theta
        self.precision = precision
        self.loglik = loglik
        self.logprior = logprior
        self.log_evidence = log_evidence
        self.curvature = curvature
        self.ssr = ssr
        #: H^-1 once computed (see Laplace._covariance)
        self.covariance = None
        #: the gain a further Gauss-Newton step predicts (Laplace._newton); 0 until one
        #: judges the state, as for the diagonal curvature, which is never polished
        self.decrement = 0.0


@dataclass
class _Fit:
    """What every phase of a run uses: the run's private copy of the target, the covered
    parameters (from ``first_layer`` on; ``sl`` of theta) and their prior groups."""

    target: object
    first_layer: int
    sl: slice
    groups: list
    jobs: int
    net: ForwardPass
    #: whether the noise precision is chosen by its fixed point, and whether any
    #: hyperparameter is updated
    infer_noise: bool
    updating: bool


@dataclass
class _Search:
    """Empirical Bayes in progress: the last update's MAP and state, the best update so
    far ``(state, (prior_scale, tau), caught warnings, training diagnostics, Newton
    steps)``, and the evidence of each update."""

    theta: np.ndarray | None = None
    state: _State | None = None
    best: tuple | None = None
    stall: int = 0
    n_updates: int = 0
    trace: list = field(default_factory=list)
    init_log_evidence: np.ndarray | None = None
    #: the warnings and diagnostics of the last training
    caught: list = field(default_factory=list)
    train_diag: TrainingDiagnostics = field(default_factory=TrainingDiagnostics)


@engine_parameters(
    solver=(
        ENGINE_DOCS["solver"][0],
        """The optimizer of the MAP. Adam (with the adaptive schedule) on any number of
    rows: in the benchmarks it predicted as well as a tuned training, where L-BFGS's MAP
    predicted worse on some. Each empirical Bayes update retrains the MAP from the one
    before.""",
    ),
    early_stopping=(
        ENGINE_DOCS["early_stopping"][0],
        """False: the first MAP is trained on all rows, since the approximation needs a
    mode of the log posterior, and empirical Bayes is what keeps it from overfitting.
    See :class:`DeepEnsemble` for True and ``"auto"``.""",
    ),
)
class Laplace(Trainer):
    """The Laplace approximation: a Gaussian at the MAP with the log posterior's curvature.

    The MAP is trained by the shared training engine (``solver`` and its knobs, as for
    :class:`DeepEnsemble`), then polished by Gauss-Newton steps into a stationary point of
    the log posterior. The posterior is ``N(theta*, H^-1)`` with ``H`` the negative Hessian
    of the log posterior at ``theta*``, and the model evidence is Laplace's::

        log p(y) ~ log p(y | theta*) + log p(theta*) + (q/2) log 2 pi - (1/2) log det H
                   + log(number of symmetric copies of theta*)

    over the ``q`` parameters the Gaussian covers (MacKay 1992). The last term counts the
    modes that permuting hidden units (and flipping tanh units' signs) maps the MAP to:
    each carries the same mass, and the marginal likelihood, as SMC estimates it, sums them
    (:func:`log_symmetric_modes`; ``diagnostics_["log_symmetric_modes"]``, which
    laplace-torch's ``log_marginal_likelihood`` leaves out). The estimators report it as
    ``log_evidence_`` (original units), so :func:`~skbnn.model_selection.evidence_scorer`
    and :class:`~skbnn.model_selection.BayesianModelAverage` rank architectures with it.

    Parameters
    ----------
    hessian : {"ggn", "full", "diag", "kron"}, default="ggn"
        ``"ggn"``: the generalized Gauss-Newton matrix, ``sum_rows J^T Lambda J`` with ``J``
        the Jacobian of the network output in the parameters and ``Lambda`` the
        likelihood's Hessian in the output (the noise precision; ``p (1 - p)``;
        ``diag(p) - p p^T``), plus the prior's precision: positive definite by
        construction, and exact for a linear model. ``"full"``: the exact Hessian of the
        negative log posterior, by central differences of the analytic gradient (``2 q``
        gradient passes; about 8 significant digits, exact for a quadratic); where it is
        not positive definite (a saddle or ridge, where no Laplace approximation exists)
        the GGN stands in, with a warning. ``"diag"``:
        the diagonal of the GGN (not of the empirical Fisher), for many parameters.
        ``"kron"``: the GGN's Kronecker-factored approximation (K-FAC, Martens & Grosse
        2015), one block per weight matrix ``A (x) G`` (``A`` the mean outer product of
        the layer's inputs, ``G`` the summed ``g^T Lambda g`` of the output's derivatives
        ``g`` in the layer's pre-activations) and one per bias vector (``G``, exact), as
        laplace-torch's ``KronLaplace``: memory and time grow with the squares of the
        layers' widths, not of the parameter count, so it fits networks far too large for
        ``"ggn"``. It drops the correlations between layers and between a layer's weights
        and its bias, which costs evidence (doc/optimization.md measures how much). Needs one
        prior precision per weight matrix and bias vector (the Gaussian prior).
    subset : {"all", "last_layer"}, default="all"
        The parameters the Gaussian covers; with ``"last_layer"`` the others stay at the
        MAP (as laplace-torch's last-layer Laplace), which keeps ``q`` small for wide
        networks, and the evidence is that of the last layer given the features below it.
    optimize_prior : bool, default=True
        Empirical Bayes: alternate training the MAP with MacKay's fixed-point updates of one
        prior precision per weight matrix and per bias vector (of the covered layers) and,
        when the regressor infers the noise (``noise_std=None``), of the noise precision,
        until the evidence changes by less than ``evidence_tol`` or has not improved for 3
        updates (Immer et al. 2021's online marginal likelihood, with a full MAP fit per
        update). An update after which the evidence fell is halved, in log precision,
        from the best one's hyperparameters. The reported MAP, Hessian and
        evidence are those of the best update, all computed under its hyperparameters. With
        ``False`` the prior stays as given, and an inferred noise is still chosen this way.
    predictive : {"glm", "mc"}, default="glm"
        ``"glm"``: the linearized network, ``f(x) ~ N(f(x; theta*), J(x) Sigma J(x)^T)``:
        closed-form regression moments and intervals, and for the classifier the probit
        approximation (see ``link_approx``). ``"mc"``: ``n_samples`` draws of ``theta``
        pushed through the network. ``predict_std(kind=...)``, ``predict_interval`` and
        ``sample_y`` follow it. The Gaussian is fitted to the linearized network, which is
        what ``"glm"`` predicts with; pushed through a wide non-linear network its draws
        leave the region where that holds and can predict far worse than the MAP
        (Immer et al. 2021), so prefer ``"glm"`` there.
    link_approx : {"probit", "mc"}, default="probit"
        Classifier under the GLM predictive: the averaged probabilities by the probit
        approximation ``softmax(f / sqrt(1 + pi/8 var(f)))``, or by averaging over 100
        draws of the Gaussian logits. ``predict_std`` is over those draws either way.
    n_init : int, default=1
        Initializations of the first MAP, trained on ``n_jobs`` threads; the one with the
        highest evidence after a short polish (50 L-BFGS iterations) is polished on and
        kept (as scikit-learn's ``GaussianMixture(n_init=...)`` keeps its best), and
        empirical Bayes goes on from it. A network's log posterior has many modes, and one
        training can end in a poor one: on iris, one hidden layer of 2 ReLU units, single
        initializations' evidences were 5-6 nats apart. For choosing an architecture by
        the evidence, 5 or more; ``diagnostics_["init_log_evidence"]`` shows the spread.
    max_prior_updates : int, default=30
        Most empirical Bayes updates, each of which retrains the MAP from the one before
        it under the new hyperparameters (on more than 100,000 rows, or when rows times
        parameters exceed 10^9, the MAP is held and polished once at the end); a warning
        says when the evidence still rose materially at the last one.
    evidence_tol : float, default=1e-3
        Stop the updates when one moves the best evidence by less than this many nats.
    <engine parameters>

    Notes
    -----
    The noise precision of the regressor is a hyperparameter here (fixed by ``noise_std``,
    or chosen by the fixed point ``tau = (n - gamma + 2 (a - 1)) / (ssr + 2 b)`` under its
    ``Gamma(a, b)`` prior, ``gamma`` the effective number of parameters), not a covered
    parameter. The evidence is ``p(y | prior, noise)`` at the chosen values: it does not
    integrate over them. A hierarchical prior's layer precisions are held at their prior
    mean, and empirical Bayes then replaces them like the Gaussian prior's. The logistic
    prior works with ``optimize_prior=False`` (its Hessian at the MAP is used).

    The estimators' ``diagnostics_`` gain ``prior_precision`` (one per parameter group,
    named by ``prior_groups``: ``"W1"``, ``"b1"``, ...), ``noise_precision``,
    ``evidence_trace`` (the evidence after each update's short polish, by which the
    updates are ranked, in the estimator's units; the reported evidence is the best
    update's after a full polish),
    ``init_log_evidence`` (each of the ``n_init`` initializations' evidence after the short
    polish that ranks them, in the estimator's units; with ``n_init=1`` the first update's
    evidence), ``log_symmetric_modes``,
    ``effective_parameters`` (``gamma``), ``newton_steps``, ``gradient_norm`` (the
    largest absolute gradient of the log posterior at the reported MAP) and
    ``newton_decrement`` (the nats a further Newton step would gain; above 0.1 a warning
    says the MAP is not a mode: see doc/benchmarks.md for when that happens).

    References
    ----------
    MacKay, D. J. C. (1992). A practical Bayesian framework for backpropagation networks.
    Immer, A., Bauer, M., Fortuin, V., Raetsch, G., Khan, M. E. (2021). Scalable marginal
    likelihood estimation for model selection in deep learning. Daxberger, E. et al.
    (2021). Laplace redux: effortless Bayesian deep learning.
    """

    name = "laplace"
    noise_handling = NoiseMode.GIBBS.value
    provides_evidence = True
    default_n_samples = 100

    _parameter_constraints: dict = {
        **Trainer._parameter_constraints,
        "hessian": [StrOptions({"ggn", "full", "diag", "kron"})],
        "subset": [StrOptions({"all", "last_layer"})],
        "optimize_prior": ["boolean"],
        "predictive": [StrOptions({"glm", "mc"})],
        "link_approx": [StrOptions({"probit", "mc"})],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "max_prior_updates": [Interval(Integral, 1, None, closed="left")],
        "evidence_tol": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        hessian="ggn",
        subset="all",
        optimize_prior=True,
        predictive="glm",
        link_approx="probit",
        n_init=1,
        max_prior_updates=30,
        evidence_tol=1e-3,
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

    def _kernels(self, target) -> tuple:
        """The training engine's kernels, the Jacobian kernel and the batch evaluation."""
        return (kbackprop.jacobian, *super()._kernels(target), knet.logp_grad_batch)

    def _warm_up(self, tiny, target) -> None:
        """The Jacobian, the training engine's epoch and the evaluations that the polish
        and the exact Hessian make from Python. A helper process, where one can run,
        compiles the network kernel meanwhile: the Jacobian does not call it, and the
        training kernels call it through its address."""
        knet.density_target(tiny.kernel_target(), aside=True, aside_with=(serve_kernel(),),
                            codes=tiny.kernel_codes)  # fmt: skip
        theta = np.ones(tiny.n_params)
        x = tiny.XT.reshape(tiny.n_features, tiny.n_rows).T
        ForwardPass(tiny.layout, tiny.activation_code).map_jacobians(x, theta, 0, lambda *a: None)
        super()._warm_up(tiny, target)
        tiny.evaluator()(theta)
        tiny.logp_grad_batch(theta[None])

    # -- the pieces of one approximation ------------------------------------------------

    @property
    def _hessian(self) -> Curvature:
        """The strategy of ``hessian`` (:mod:`skbnn.methods._curvature`)."""
        return CURVATURES[self.hessian]

    def _advice(self, target, cause: str) -> str:
        """The runnable fix a curvature's warning or error names for ``cause``: toward the
        GGN (``"ggn"``), or from a prior too wide for float64 to resolve beside the
        likelihood's curvature (``"rounding"``), which empirical Bayes narrows."""
        if cause == "ggn":
            return self._fix(hessian="ggn")
        if not self.optimize_prior and target.prior_density.gaussian:
            return f"let empirical Bayes choose the prior's scale: {self._fix(optimize_prior=True)}"
        return "give the weights a narrower prior: a smaller std of skbnn.priors.GaussianPrior"

    def _assemble(self, target, net, theta, first_layer, sl, n_jobs, evaluator, curvature=None):
        """The approximation at ``theta`` under the target's current hyperparameters; the
        likelihood's ``curvature`` there (:meth:`Curvature.likelihood`) is computed unless
        given."""
        if curvature is None:
            curvature = self._hessian.likelihood(target, net, theta, first_layer)
        value = evaluator.value(theta)
        loglik = float(evaluator.stats[0])
        ssr = np.array(evaluator.stats[2 : 2 + target.n_outputs], dtype=np.float64)
        logprior, prior_prec = target.prior_density.log_density_curvature(
            theta[sl], target.prior_mean[sl], target.prior_scale[sl], target.mixture
        )
        if not math.isfinite(value):
            raise ValueError(
                "the log posterior at the trained MAP is not finite; lower learning_rate_init "
                "or check the data"
            )
        built = self._hessian.precision(target, theta, sl, n_jobs, curvature, prior_prec,
                                        first_layer, partial(self._advice, target))  # fmt: skip
        q = sl.stop - sl.start
        evidence = loglik + logprior + 0.5 * q * _LOG_2PI - 0.5 * built.logdet
        state = _State(theta, built.precision, loglik, logprior, evidence, curvature, ssr)
        state.fallback = built.fallback
        # the precision's Cholesky factor, for the covariance and the posterior
        state.factor = built.factor
        # Gauss-Newton's matrix, positive definite, solved by the polishing steps
        state.ggn_solve = built.ggn_solve
        return state

    def _polish(self, target, net, theta, first_layer, sl, n_jobs, evaluator,
                lbfgs_iter=POLISH_LBFGS_ITER, newton=True,
                newton_steps=MAX_NEWTON_STEPS):  # fmt: skip
        """The approximation at the MAP polished from the trained one, and the number of
        Gauss-Newton steps taken.

        The training engine stops where the loss per row improves by less than ``tol``; the
        evidence and covariance need the mode itself. L-BFGS first runs on (at most
        ``POLISH_LBFGS_ITER`` iterations, toward a gradient of 1e-9 per row); then
        Gauss-Newton steps ``G^-1 grad`` on the covered parameters
        (``G`` the GGN plus the prior's precision, positive definite) make the gradient
        vanish to rounding where the log posterior is quadratic (linear models), and
        converge fast near a smooth network's mode; exact-Newton steps follow where
        Gauss-Newton stalls and they are affordable. A step is kept only if the log
        posterior does not decrease."""
        n = target.weight_sum

        def fun(th):
            lp, grad = evaluator(th)
            if not (math.isfinite(lp) and np.all(np.isfinite(grad))):
                return np.inf, np.zeros_like(th)
            return -lp / n, grad * (-1.0 / n)

        # (run holds BLAS to one thread: a threaded BLAS makes L-BFGS-B's vector
        # operations on q entries slower than the gradients they serve)
        res = minimize(
            fun, theta, jac=True, method="L-BFGS-B",
            options={"maxiter": row_budget(target.n_rows, lbfgs_iter, POLISH_ROWS,
                                           MIN_POLISH_ITER), "gtol": 1e-9, "ftol": 0.0},
        )  # fmt: skip
        if np.isfinite(res.fun) and res.fun <= fun(theta)[0]:
            theta = res.x
        state = self._assemble(target, net, theta, first_layer, sl, n_jobs, evaluator)
        if not self._hessian.polishes or not newton:
            return state, 0

        def ggn(state):
            return state.ggn_solve

        def exact(state):
            try:
                H = cho_factor(full_hessian(target, state.theta, sl, n_jobs), lower=True)
            except LinAlgError:
                return None
            return lambda g: cho_solve(H, g)

        state, steps = self._newton(state, ggn, newton_steps, evaluator, target, net,
                                    first_layer, sl, n_jobs)  # fmt: skip
        q = sl.stop - sl.start
        if state.decrement > 1e-12 and q * q * target.n_rows <= EXACT_NEWTON_BUDGET:
            # Gauss-Newton converges slowly (linearly) where the GGN misses some of the
            # curvature (residuals that do not vanish, tanh units near saturation); Newton
            # steps with the exact Hessian (2 q gradient passes each) finish the job where
            # they are affordable
            state, more = self._newton(state, exact, EXACT_NEWTON_STEPS, evaluator, target,
                                       net, first_layer, sl, n_jobs)  # fmt: skip
            steps += more
            state, _ = self._newton(state, ggn, 0, evaluator, target, net, first_layer, sl,
                                    n_jobs)  # fmt: skip
        return state, steps

    def _newton(self, state, factorize, max_steps, evaluator, target, net, first_layer, sl,
                n_jobs):  # fmt: skip
        """Up to ``max_steps`` damped Newton steps on the covered parameters with the
        solver ``factorize(state)`` gives (None stops); each keeps the log posterior from
        decreasing. Sets ``state.decrement``, the gain a further step of the GGN predicts."""
        steps = 0
        while True:
            current, grad = evaluator(state.theta)
            g = grad[sl].copy()
            if not np.all(np.isfinite(g)):
                break
            # the gain a Gauss-Newton step predicts: how far the MAP is from a mode
            state.decrement = 0.5 * float(g @ state.ggn_solve(g))
            if steps == max_steps:
                break
            solve = factorize(state)
            if solve is None:
                break
            step = solve(g)
            accepted = False
            for _ in range(20):
                trial = state.theta.copy()
                trial[sl] += step
                if evaluator.value(trial) >= current:
                    accepted = True
                    break
                step = 0.5 * step
            if not accepted:
                break
            small = np.max(np.abs(step)) <= 1e-12 * (1.0 + np.max(np.abs(state.theta[sl])))
            state = self._assemble(target, net, trial, first_layer, sl, n_jobs, evaluator)
            steps += 1
            if small:
                break
        return state, steps

    def _step_change(self, target, net, state, first_layer, sl, n_jobs, evaluator):
        """What one more Gauss-Newton step from ``state`` would change: the evidence (nats)
        and the predictive distribution, as the mean over the training rows of the KL
        divergence its mean shift makes (``0.5 d' G d / n``, ``G`` the likelihood's GGN)."""
        current, grad = evaluator(state.theta)
        step = state.ggn_solve(grad[sl].copy())
        quad = self._hessian.ggn_quadratic(target, state, step)
        predictive = 0.5 * quad / target.weight_sum
        for _ in range(20):
            trial = state.theta.copy()
            trial[sl] += step
            if evaluator.value(trial) >= current:
                moved = self._assemble(target, net, trial, first_layer, sl, n_jobs, evaluator)
                symmetry = self._log_symmetric_modes(target, moved, first_layer)
                return moved.log_evidence + symmetry - state.log_evidence, predictive
            step = 0.5 * step
        return 0.0, predictive

    def _covariance(self, state):
        """The posterior covariance ``H^-1`` of ``state`` (its diagonal for a diagonal or
        Kronecker-factored ``H``), computed once: empirical Bayes and the symmetry count
        both read it."""
        if state.covariance is None:
            state.covariance = self._hessian.covariance(state)
        return state.covariance

    def _log_symmetric_modes(self, target, state, first_layer):
        """:func:`log_symmetric_modes` of ``state``'s mode; 0 for the last layer alone,
        whose evidence is conditional on the features below it."""
        if first_layer > 0 or target.layout.n_layers == 1:
            return 0.0
        var = self._hessian.variances(self._covariance(state))
        return log_symmetric_modes(target.layout, state.theta, var, target.activation)

    # -- empirical Bayes --------------------------------------------------------------

    @staticmethod
    def _groups(layout, first_layer):
        """``[(name, slice)]`` of the weight matrices and bias vectors of every layer."""
        groups = []
        for layer in range(layout.n_layers):
            w, b = layout.slices(layer)
            groups += [(f"W{layer + 1}", w), (f"b{layer + 1}", b)]
        return groups

    def _update(self, target, state, sl, groups, first_layer, prior, noise):
        """MacKay's fixed-point updates of the covered groups' prior precisions (``prior``)
        and of the noise precisions (``noise``), written into ``target``; returns the
        effective number of parameters ``gamma`` at ``state``."""
        cov = self._covariance(state)
        cov_diag = self._hessian.variances(cov)
        theta = state.theta
        prior_prec = 1.0 / target.prior_scale**2
        gamma_total = 0.0
        for layer in range(first_layer, target.layout.n_layers):
            for _, g in groups[2 * layer : 2 * layer + 2]:
                local = slice(g.start - sl.start, g.stop - sl.start)
                group_prec = float(np.mean(prior_prec[g]))
                gamma = (g.stop - g.start) - group_prec * float(np.sum(cov_diag[local]))
                gamma_total += gamma
                if not prior:
                    continue
                ss = float(np.sum((theta[g] - target.prior_mean[g]) ** 2))
                if ss <= 0.0 or gamma <= 0.0:
                    # no parameter of the group moved from the prior: keep its precision
                    continue
                new = min(max(gamma / ss, PRECISION_RANGE[0]), PRECISION_RANGE[1])
                target.prior_scale[g] = 1.0 / math.sqrt(new)
        if noise:
            a, b = target.noise_prior
            n = target.weight_sum
            k = target.n_outputs
            for o in range(k):
                # effective parameters the output o's likelihood determines
                if k == 1:
                    gamma_o = gamma_total
                else:
                    gamma_o = self._hessian.output_effective_parameters(target, state, o, cov)
                tau = (n - gamma_o + 2.0 * (a - 1.0)) / (state.ssr[o] + 2.0 * b)
                target.tau[o] = min(max(tau, PRECISION_RANGE[0]), PRECISION_RANGE[1])
        return gamma_total

    # -- the run --------------------------------------------------------------------

    def run(self, target, n_samples: int, random_state, n_jobs, verbose: int) -> FitResult:
        """Train the MAP, fit the Gaussian and its evidence, tuning the hyperparameters
        when asked; see :meth:`BaseMethod.run`.

        BLAS runs on one thread throughout; the parallelism is ``n_jobs`` threads over
        chunks of rows. A threaded BLAS sums in an order that depends on its thread count,
        and empirical Bayes compares evidences, so its path (and the reported fit) would
        change with the BLAS threads of the machine. Waking BLAS threads for matrices of a
        few hundred rows also costs more than the work they share.
        """
        self._validate_params()
        with single_threaded_blas():
            return self._run(target, n_samples, random_state, n_jobs, verbose)

    def _run(self, target, n_samples, random_state, n_jobs, verbose):
        if self.optimize_prior and not target.prior_density.gaussian:
            raise ValueError(
                "Laplace(optimize_prior=True) needs a Gaussian prior (MacKay's updates are "
                "for Gaussian precisions); use optimize_prior=False with the logistic or "
                "scale-mixture prior"
            )
        t0 = time.perf_counter()
        compile_time = self._compile(target)
        fit = self._setup(target, n_jobs)
        train_seed, posterior_seed = seed_sequence(random_state).spawn(2)
        search = self._empirical_bayes(fit, train_seed, n_jobs, verbose)
        state, steps = self._final_polish(fit, search)
        evidence_change, predictive_change = self._check_mode(fit, state)
        # the best state's effective number of parameters, under its own hyperparameters
        gamma = self._update(fit.target, state, fit.sl, fit.groups, fit.first_layer, False,
                             False)  # fmt: skip
        posterior = self._posterior(fit, state, n_samples, posterior_seed)
        diagnostics = self._diagnostics(fit, search, state, steps, gamma, compile_time,
                                        evidence_change, predictive_change, t0)  # fmt: skip
        if fit.target.likelihood == "gaussian":
            diagnostics.noise_precision = fit.target.tau.copy()
        return FitResult(posterior, log_evidence=state.log_evidence, diagnostics=diagnostics)

    # -- the phases of a run ------------------------------------------------------------

    def _setup(self, target, n_jobs) -> _Fit:
        """What every phase uses: a private copy of ``target`` (the updates write its
        prior scales and noise precisions), the covered parameters and their groups."""
        from joblib import effective_n_jobs

        target = copy.copy(target)
        target.prior_scale = target.prior_scale.copy()
        target.tau = target.tau.copy()
        layout = target.layout
        first_layer = layout.n_layers - 1 if self.subset == "last_layer" else 0
        jobs = effective_n_jobs(n_jobs)
        infer_noise = target.noise == NoiseMode.GIBBS
        return _Fit(
            target=target,
            first_layer=first_layer,
            sl=slice(int(layout.offsets[first_layer]), layout.n_weights),
            groups=self._groups(layout, first_layer),
            jobs=jobs,
            net=ForwardPass(layout, target.activation_code, jobs),
            infer_noise=infer_noise,
            updating=self.optimize_prior or infer_noise,
        )

    def _empirical_bayes(self, fit: _Fit, train_seed, n_jobs, verbose) -> _Search:
        """MAPs under MacKay's updates of the hyperparameters until the evidence settles
        (one MAP when nothing is updated); the best update is ``search.best``."""
        search = _Search()

        def start(target, rng):
            theta = search.theta
            return (glorot_init(target, rng) if theta is None else theta.copy()), None, None

        for update in range(int(self.max_prior_updates) + 1):
            hyper = (fit.target.prior_scale.copy(), fit.target.tau.copy())
            state, steps = self._update_map(fit, search, update, start, train_seed, n_jobs,
                                            verbose)  # fmt: skip
            search.state = state
            search.theta = state.theta.copy()
            search.trace.append(state.log_evidence)
            # By the evidence alone. Ranking smooth modes first (Newton decrement below
            # 0.1 nats) made a ReLU network's fit hostage to chance: its polished MAPs sit
            # against kinks, and the rare one that does not won whatever its evidence (UCI
            # concrete split 4 kept its initial prior: test log-likelihood -3.85, -3.25
            # by the evidence)
            best = search.best
            gain = state.log_evidence - (best[0].log_evidence if best else -np.inf)
            if gain > 0:
                search.best = (state, hyper, search.caught, search.train_diag, steps)
            search.stall = 0 if gain >= self.evidence_tol else search.stall + 1
            if (not fit.updating or search.stall >= PATIENCE
                    or (update > 0 and abs(gain) < self.evidence_tol)):  # fmt: skip
                break
            if update == int(self.max_prior_updates):
                self._warn_if_still_rising(fit, gain)
                break
            self._next_hyperparameters(fit, search, state, gain)
            search.n_updates += 1
        return search

    def _update_map(self, fit: _Fit, search: _Search, update: int, start, train_seed,
                    n_jobs, verbose) -> tuple:  # fmt: skip
        """One update's MAP and its approximation, and the Newton steps of its polish: the
        first from ``n_init`` initializations; each later one retrained from the MAP
        before it under the new hyperparameters, or held on many rows or a wide network
        (:meth:`_holds_map`; its approximation reassembled at its curvature, a pass of the
        likelihood each)."""
        target = fit.target
        evaluator = target.evaluator()
        # the warnings of the update's training and approximation are the best update's
        # to raise (:meth:`_final_polish`), not every update's
        with collected_warnings() as caught:
            if update > 0 and self._holds_map(target):
                state = self._assemble(target, fit.net, search.theta, fit.first_layer, fit.sl,
                                       fit.jobs, evaluator,
                                       curvature=search.state.curvature)  # fmt: skip
                steps = 0
            else:
                n_members = int(self.n_init) if update == 0 else 1
                members, search.train_diag = self._train_members(
                    target, n_members, train_seed, n_jobs, verbose, start
                )
                theta = members[0].theta.copy()
                if len(members) > 1:
                    theta = self._best_initialization(fit, members, evaluator, search)
                # a short polish per update ranks them; the best is polished in full after
                short = UPDATE_NEWTON_STEPS if fit.updating else MAX_NEWTON_STEPS
                state, steps = self._polish(target, fit.net, theta, fit.first_layer, fit.sl,
                                            fit.jobs, evaluator, newton_steps=short)  # fmt: skip
        search.caught = caught
        state.log_symmetry = self._log_symmetric_modes(target, state, fit.first_layer)
        state.log_evidence += state.log_symmetry
        if update == 0 and search.init_log_evidence is None:
            search.init_log_evidence = np.array([state.log_evidence])
        return state, steps

    @staticmethod
    def _holds_map(target) -> bool:
        """Whether empirical Bayes's later updates hold the MAP rather than retrain it:
        on many rows, or on rows times parameters that make a retraining costly."""
        n_rows = target.n_rows
        return n_rows > RETRAIN_MAX_ROWS or n_rows * target.n_params > RETRAIN_MAX_WORK

    def _best_initialization(self, fit: _Fit, members, evaluator, search: _Search):
        """The MAP of the initialization with the highest evidence after a short polish;
        their evidences into ``search.init_log_evidence``."""
        ranked = []
        for member in members:
            quick, _ = self._polish(
                fit.target, fit.net, member.theta.copy(), fit.first_layer, fit.sl, fit.jobs,
                evaluator, RANK_LBFGS_ITER, newton=False,
            )  # fmt: skip
            quick.log_evidence += self._log_symmetric_modes(fit.target, quick,
                                                            fit.first_layer)  # fmt: skip
            ranked.append(quick)
        init_evidence = [quick.log_evidence for quick in ranked]
        search.init_log_evidence = np.array(init_evidence)
        return ranked[int(np.argmax(init_evidence))].theta.copy()

    def _warn_if_still_rising(self, fit: _Fit, gain: float) -> None:
        """A ConvergenceWarning when the updates ran out with the evidence still rising."""
        if gain > max(MIN_EVIDENCE_CHANGE, MAX_EVIDENCE_CHANGE * fit.target.weight_sum):
            warn(
                f"empirical Bayes stopped at max_prior_updates="
                f"{self.max_prior_updates} with the evidence still rising by "
                f"{gain:.3g} nats per update; allow more: "
                f"{self._fix(max_prior_updates=2 * self.max_prior_updates)}.",
                ConvergenceWarning,
            )

    def _next_hyperparameters(self, fit: _Fit, search: _Search, state, gain: float) -> None:
        """MacKay's fixed-point update after a gain; after a loss, halfway back to the
        best update's hyperparameters and its MAP."""
        target = fit.target
        if gain > 0:
            self._update(target, state, fit.sl, fit.groups, fit.first_layer,
                         self.optimize_prior, fit.infer_noise)  # fmt: skip
        else:
            # The fixed point assumes the MAP stays put; retrained, it moved and the
            # evidence fell (MacKay's updates can run off toward overfitting). Step back
            # halfway, in log precision, to the best update's hyperparameters, and
            # retrain from its MAP
            best_scale, best_tau = search.best[1]
            target.prior_scale[:] = np.sqrt(best_scale * target.prior_scale)
            target.tau[:] = np.sqrt(best_tau * target.tau)
            search.theta = search.best[0].theta.copy()

    def _final_polish(self, fit: _Fit, search: _Search) -> tuple:
        """The best update under its own hyperparameters, polished in full (the updates'
        polish is short), and the Newton steps it took; the warnings of its training
        are raised again."""
        state, (scales, tau), caught, search.train_diag, steps = search.best
        target = fit.target
        target.prior_scale[:] = scales
        target.tau[:] = tau
        with collected_warnings() as polished:
            if fit.updating and self._hessian.polishes:
                evaluator = target.evaluator()
                state, more = self._polish(target, fit.net, state.theta, fit.first_layer,
                                           fit.sl, fit.jobs, evaluator)  # fmt: skip
                state.log_symmetry = self._log_symmetric_modes(target, state, fit.first_layer)
                state.log_evidence += state.log_symmetry
                steps += more
        # each polishing step factorizes again: one warning of a kind, its first figures
        seen = set()
        # the polish goes on where the training stopped, and the mode check judges the
        # point it reaches: where training stopped matters only through it
        polished_all = self._hessian.polishes and fit.first_layer == 0
        for message, category in [*caught, *polished]:
            kind = (category, str(message).split("(", 1)[0])
            if polished_all and NOT_CONVERGED in kind[1]:
                continue
            if kind not in seen:
                seen.add(kind)
                warn(message, category)
        return state, steps

    def _check_mode(self, fit: _Fit, state) -> tuple:
        """Warnings when the MAP is not a mode, materially for the evidence, or the exact
        Hessian fell back to the GGN; the evidence's and the predictive's change under a
        further Newton step (0 at a mode)."""
        target = fit.target
        evidence_change, predictive_change = 0.0, 0.0
        if state.decrement > MAX_DECREMENT:
            # the step's point is hypothetical: its factorization repeats what the MAP's
            # already told the user, so its warnings are dropped
            with collected_warnings():
                evidence_change, predictive_change = self._step_change(
                    target, fit.net, state, fit.first_layer, fit.sl, fit.jobs, target.evaluator()
                )
        evidence_bound = max(MIN_EVIDENCE_CHANGE, MAX_EVIDENCE_CHANGE * target.weight_sum)
        if abs(evidence_change) > evidence_bound:
            # half the units in every hidden layer: on a smooth 300-row function that
            # (50,) ReLU units left short of a mode, (25,) reached one
            fewer = tuple(max(1, int(h) // 2) for h in target.layout.sizes[1:-1])
            warn(
                "the MAP is not a mode of the log posterior, and log_evidence_ depends on "
                f"where training stopped: a Newton step from it would gain "
                f"{state.decrement:.3g} nats of log posterior and change the evidence by "
                f"{evidence_change:+.3g} nats ({evidence_change / target.weight_sum:+.2g} "
                "per row). The predictions are those of the network linearized where it "
                "stopped, which need no mode. Where the log posterior keeps rising toward "
                "sharper fits (many parameters for the rows), no training reaches a mode: "
                f"use fewer hidden units, the estimator's hidden_layer_sizes={fewer}, or "
                "compare architectures by skbnn.model_selection.log_predictive_scorer on "
                "held-out rows.",
                ConvergenceWarning,
            )
        if state.fallback:
            warn(
                "the exact Hessian is not positive definite at the MAP: it is a saddle or a "
                "ridge of the log posterior (hidden units that collapsed into one make "
                "both), where the Laplace approximation does not exist. The GGN, positive "
                "definite by construction, was used instead (diagnostics_['hessian'] says "
                f"which was used), as {self._fix(hessian='ggn')} does.",
                ConvergenceWarning,
            )
        return evidence_change, predictive_change

    def _posterior(self, fit: _Fit, state, n_samples, posterior_seed) -> LaplacePosterior:
        """The Gaussian at the MAP, predicting as ``predictive`` says."""
        target = fit.target
        return LaplacePosterior(
            state.theta,
            state.precision,
            fit.first_layer,
            target.layout,
            precision_factor=None if state.factor is None else state.factor[0],
            predictive=self.predictive,
            link_approx=self.link_approx,
            n_draws=n_samples,
            random_state=posterior_seed,
            noise_precision=target.tau.copy() if target.likelihood == "gaussian" else None,
            log_evidence=state.log_evidence,
        )

    def _diagnostics(self, fit: _Fit, search: _Search, state, steps, gamma, compile_time,
                     evidence_change, predictive_change, t0) -> LaplaceDiagnostics:  # fmt: skip
        """The run's figures beside the training engine's (see the class's Notes)."""
        target = fit.target
        grad = target.evaluator()(state.theta)[1]
        scales = target.prior_scale
        train = search.train_diag
        return LaplaceDiagnostics.extending(
            train,
            compile_time=train.compile_time + compile_time,
            init_log_evidence=search.init_log_evidence,
            hessian="ggn" if state.fallback else self.hessian,
            prior_groups=[name for name, _ in fit.groups],
            prior_precision=np.array([1.0 / np.mean(scales[g]) ** 2 for _, g in fit.groups]),
            evidence_trace=np.array(search.trace),
            n_prior_updates=search.n_updates,
            log_symmetric_modes=state.log_symmetry,
            effective_parameters=gamma,
            newton_steps=steps,
            newton_decrement=state.decrement,
            newton_evidence_change=evidence_change,
            newton_predictive_change=predictive_change,
            gradient_norm=float(np.max(np.abs(grad[fit.sl]))),
            laplace_time=time.perf_counter() - t0,
        )
