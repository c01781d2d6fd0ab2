"""Latent binary Bayesian neural networks (LBBNN): which weights the network needs.

Hubin and Storvik (2019) put an inclusion indicator on every weight; Skaaret-Lund, Hubin
and Storvik (2024) train it by the local reparameterization trick. Variational inference
on the training engine, as :class:`~skbnn.methods.VariationalInference`, with the
spike-and-slab family of :mod:`skbnn.kernels.lbbnn`.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from scipy.special import expit, logit
from sklearn.utils._param_validation import Interval, StrOptions

from ..kernels import flows as kflows
from ..kernels import lbbnn as klbbnn
from ..kernels import lbbnn_lowrank as klowrank
from ..kernels import vi as kvi
from ..kernels._compile import DISABLED
from ..posterior import (
    FlowSpikeSlabPosterior,
    LowRankSpikeSlabPosterior,
    SpikeSlabPosterior,
    spike_slab_draws,
)
from ..utils import seed_sequence
from ._base import FitResult, store_params
from ._engine_params import ENGINE_DEFAULTS, engine_parameters
from ._optim import Trainer, glorot_init
from ._records import LBBNNDiagnostics
from .vi import VARIATIONAL_ENGINE_DOCS, VariationalInference, inverse_softplus

_ENGINE = ENGINE_DEFAULTS["variational"]

#: The flows' gate bias at the start, ``sigmoid(3) = 0.95``: each step starts close to the
#: identity, so training starts from the mean-field family's fit with ``z`` near 1.
FLOW_GATE_BIAS = 3.0

#: Draws of the hidden units' reach behind ``feature_inclusion_`` of a network with two or
#: more hidden layers (with fewer it is exact): a standard error of at most 0.005.
PATH_DRAWS = 10_000


def path_probabilities(alphas: list, rng: np.random.Generator | None = None) -> np.ndarray:
    """The probability under independent indicators that each input has a path of included
    weights to some output.

    Parameters
    ----------
    alphas : list of ndarray
        Inclusion probabilities per layer, shaped ``(fan_in, fan_out)``.
    rng : numpy.random.Generator, default=None
        Draws which hidden units reach an output, for networks with two or more hidden
        layers.

    Returns
    -------
    ndarray of shape (n_inputs,)

    Notes
    -----
    Given which units of a layer reach an output, the units of the layer before do so
    independently of each other (their indicators into it are disjoint): unit ``i`` with
    probability ``1 - prod_j (1 - alpha_ij r_j)`` for the reaching units ``r``. With at most
    one hidden layer that makes the answer exact. Deeper networks' paths share units, so
    the reach of every hidden layer is drawn, from the last back to the first (one
    Bernoulli per unit, not per weight), and the inputs' probability given the first
    hidden layer's reach is averaged over :data:`PATH_DRAWS` draws: an estimate whose
    variance is below that of counting paths in as many draws of the indicators.
    """
    last = np.asarray(alphas[-1], dtype=np.float64)
    reach = 1.0 - np.prod(1.0 - last, axis=1)
    if len(alphas) == 1:
        return reach
    if len(alphas) == 2:
        return 1.0 - np.prod(1.0 - np.asarray(alphas[0]) * reach, axis=1)
    rng = np.random.default_rng(0) if rng is None else rng
    # log P(an indicator is off); floored so that a unit that reaches nothing (a 0 in the
    # product below) multiplies a certain indicator's log by 0, not -inf by 0
    with np.errstate(divide="ignore"):
        logs = [np.maximum(np.log1p(-np.asarray(a, dtype=np.float64)), -1e3) for a in alphas]
    total = np.zeros(logs[0].shape[0])
    for start in range(0, PATH_DRAWS, _PATH_BATCH):
        draws = min(_PATH_BATCH, PATH_DRAWS - start)
        r = (rng.random((draws, reach.size)) < reach).astype(np.float64)
        for log_off in logs[-2:0:-1]:
            r = (rng.random((draws, log_off.shape[0])) < -np.expm1(r @ log_off.T)).astype(float)
        total += (-np.expm1(r @ logs[0].T)).sum(axis=0)
    return total / PATH_DRAWS


#: Draws of :func:`path_probabilities` taken at once.
_PATH_BATCH = 1000


@engine_parameters(**VARIATIONAL_ENGINE_DOCS)
class LBBNN(VariationalInference):
    """Latent binary Bayesian neural network: variational inference over which weights are
    in the network and what they are.

    Every weight of layer ``l`` is ``gamma * beta``: an inclusion indicator ``gamma ~
    Bernoulli(psi_l)`` (``inclusion_prior``) and a slab ``beta ~ N(0, s^2)``, so the prior
    is ``psi_l N(0, s^2) + (1 - psi_l) delta_0``. Biases (and, with ``noise_std=None``, the
    log noise precision) are always in, under the estimator's prior. ``q`` is mean-field:
    ``q(beta | gamma = 1) = N(kappa, sigma^2)`` with ``sigma = softplus(rho)`` and ``q(gamma)
    = Bernoulli(alpha)``; the biases and the noise get VI's Gaussian factors. The
    hyperparameters ``psi_l`` and ``s`` are fixed (no Beta or Gamma hyperpriors): set them,
    or choose them by ``elbo_scorer`` or cross-validation.

    Training maximizes the ELBO on the training engine (its Adam or SGD, minibatches,
    restarts and seeding), with the KL of the spike-and-slab pair in closed form. The
    expected log-likelihood's gradient comes from the local reparameterization trick
    (``local_reparameterization=True``, Skaaret-Lund et al. 2024): every pre-activation is
    drawn per row from the Gaussian with the mean ``sum_k x_k alpha_k kappa_k`` and the
    variance ``sum_k x_k^2 alpha_k (sigma_k^2 + (1 - alpha_k) kappa_k^2)`` of its weights'
    moments, a central-limit approximation that is exact in expectation of the mean and
    variance. With ``False``, the weights are drawn and each indicator relaxed to the
    concrete distribution of ``temperature`` (Hubin and Storvik 2019; Maddison et al.
    2017): biased for any positive temperature, less so as it falls.

    After training, ``elbo_`` is the ELBO of the spike-and-slab ``q`` (the exact
    KL plus ``elbo_samples`` Monte Carlo draws of the log-likelihood with the indicators
    drawn, not relaxed; for the flow family the KL given each draw of ``z``, and ``log r
    - log q`` of ``z`` at the drawn weights), a lower bound on the evidence, with its
    standard error in ``diagnostics_["elbo_se"]``. The estimator's ``n_samples`` draws
    predict: draws of the indicators and the weights (``model="average"``: Bayesian model
    averaging over sparse networks) or of the weights of the median probability model
    (``"median"``: the weights with ``alpha > 0.5``, a sparse network).

    The fit adds ``inclusion_probabilities_`` (``alpha`` per layer, shaped as MLP's
    ``coefs_``), ``density_`` (the share of weights with ``alpha > 0.5``) and
    ``feature_inclusion_`` to the estimator. ``feature_inclusion_`` is, per input, the
    probability under ``q`` that the input has a path to an output through weights of the
    median probability model, each present with its ``alpha``: 0 for an input with no
    such path, ``alpha`` itself in a linear model. (Through every weight instead, a wide
    network's uninformative weights, which keep ``alpha`` near ``psi``, open so many paths
    that every input has one almost surely, a priori as much as a posteriori.) It serves
    ``SelectFromModel(importance_getter="feature_inclusion_", threshold=0.5)``.

    The spike-and-slab prior prunes most weights of a wide network, which on a few hundred
    rows leaves it underfitting: its test log-likelihood trails VI's there and its 90 %
    intervals are wide (they covered 96-98 % of test points on two of the benchmark's
    small regression sets; doc/defaults.md). On 10^4 rows it matched the other methods.

    Parameters
    ----------
    inclusion_prior : float or sequence of float, default=0.1
        ``psi``: the prior probability that a weight is in, in (0, 1], for every layer or
        one per layer. 1 keeps every weight of that layer in: with ``psi = 1`` everywhere
        and the slab equal to the prior, LBBNN is mean-field VI.
    slab_std : float or None, default=None
        The slab's sd ``s`` for every weight; None takes the estimator's (Gaussian or
        hierarchical) prior's sds, fan-in scaling included.
    temperature : float, default=0.5
        The concrete relaxation's temperature ``delta`` (``local_reparameterization=False``
        only).
    local_reparameterization : bool, default=True
        How the expected log-likelihood's gradient is estimated. True: the local
        reparameterization trick, each pre-activation drawn per row from the Gaussian with
        its weights' moments (a central-limit approximation). False: the weights drawn with
        each indicator relaxed to the concrete distribution of ``temperature`` (biased for
        any positive temperature). Training only: either way, ``elbo_`` and the posterior's
        draws draw the indicators themselves, neither relaxed nor moment-matched.
    init_inclusion : float, default=0.9
        The initial ``alpha`` of every weight: starting nearly dense lets the network fit
        before it prunes.
    model : {"average", "median"}, default="average"
        How the posterior predicts (see above).
    posterior : {"meanfield", "flow", "lowrank"}, default="meanfield"
        The variational family. ``"meanfield"``: independent slabs, as above (LBBNN-GP-MF).
        ``"flow"``: multiplicative normalizing flows (LBBNN-GP-FLOW; Louizos and Welling
        2017, Skaaret-Lund et al. 2024): every input ``i`` of a weight layer has a latent
        ``z_i`` that scales the slab means of its weights, ``q(beta_ij | z) = N(z_i
        kappa_ij, sigma_ij^2)``, and ``z`` comes from a Gaussian pushed through
        ``flow_steps`` gated inverse autoregressive steps, so the weights of an input are
        dependent, and through the flow those of different inputs. The bound needs an
        auxiliary ``r(z | W)``: ``r``'s own flow, then a Gaussian with mean ``d0 + d1 nu``
        and log variance ``v0 + d2 nu``, ``nu`` the mean over the layer's outputs of
        ``tanh(sum_i e_i W_ij)`` (the talk's ``d1``, ``d2``, ``e``; the offsets ``d0`` and
        ``v0``, which the talk fixes at 0, let ``r`` match ``q`` at the start).
        ``"lowrank"`` (the talk's LBBNN-GP-MVN): per weight layer, the slabs are one
        Gaussian ``N(kappa, diag(sigma^2) + V'V)`` with ``rank`` rows ``V``, independent
        of the indicators, so the KL is the indicators' plus the slabs' (each slab pays
        its KL whether its weight is in or not, where the mean-field family's pays it
        with probability ``alpha``); training draws ``u ~ N(0, I)`` per layer and step,
        then the pre-activations given ``kappa + V'u``. Both need
        ``local_reparameterization=True``.
    flow_steps : int, default=2
        Steps of each flow (``posterior="flow"``); 0 leaves ``z`` Gaussian.
    flow_hidden : int, default=8
        Hidden units of each step's masked autoencoder (``posterior="flow"``).
    rank : int, default=5
        Rows of each layer's ``V`` (``posterior="lowrank"``).
    n_mc, init_std, elbo_samples
        As in :class:`VariationalInference`.
    <engine parameters>

    Examples
    --------
    >>> import numpy as np
    >>> from skbnn import BayesianMLPRegressor
    >>> from skbnn.methods import LBBNN
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 5))
    >>> y = 2.0 * X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=300)
    >>> model = BayesianMLPRegressor((), method=LBBNN(learning_rate_init=0.01, max_iter=300),
    ...                              random_state=0).fit(X, y)
    >>> model.feature_inclusion_.round(1)
    array([1., 1., 0., 0., 0.])
    """

    name = "lbbnn"
    _more_kernels = (klbbnn.spike_slab_terms,)
    #: the variational family, :func:`skbnn.kernels.vi.run_vi_epoch_for`'s ``fam``
    _family = kvi.SPIKE_SLAB

    _parameter_constraints: dict = {
        **Trainer._parameter_constraints,
        "inclusion_prior": [Interval(Real, 0, 1, closed="right"), "array-like"],
        "slab_std": [Interval(Real, 0, None, closed="neither"), None],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "local_reparameterization": ["boolean"],
        "init_inclusion": [Interval(Real, 0, 1, closed="neither")],
        "model": [StrOptions({"average", "median"})],
        "posterior": [StrOptions({"meanfield", "flow", "lowrank"})],
        "rank": [Interval(Integral, 1, None, closed="left")],
        "flow_steps": [Interval(Integral, 0, None, closed="left")],
        "flow_hidden": [Interval(Integral, 1, None, closed="left")],
        "n_mc": [Interval(Integral, 1, None, closed="left")],
        "init_std": [Interval(Real, 0, None, closed="neither")],
        "elbo_samples": [Interval(Integral, 2, None, closed="left")],
        "solver": [StrOptions({"auto", "adam", "sgd"})],
    }

    def __init__(
        self,
        inclusion_prior=0.1,
        slab_std=None,
        temperature=0.5,
        local_reparameterization=True,
        init_inclusion=0.9,
        model="average",
        posterior="meanfield",
        flow_steps=2,
        flow_hidden=8,
        rank=5,
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

    def _psi(self, target) -> np.ndarray:
        """The prior inclusion probability of every parameter (1: always in)."""
        layout = target.layout
        psi = np.asarray(self.inclusion_prior, dtype=np.float64)
        if psi.ndim == 0:
            psi = np.full(layout.n_layers, float(psi))
        if psi.ndim != 1 or psi.size != layout.n_layers or not np.all((psi > 0) & (psi <= 1)):
            raise ValueError(
                "inclusion_prior must be a probability in (0, 1] or one per weight layer "
                f"({layout.n_layers} here), got {self.inclusion_prior!r}"
            )
        out = np.ones(layout.n_params)
        for layer in range(layout.n_layers):
            out[layout.slices(layer)[0]] = psi[layer]
        return out

    def _slab(self, target) -> np.ndarray:
        """The slab's sd of every network parameter (the prior's for biases), 1 beyond."""
        out = np.ones(target.n_params)
        out[: target.layout.n_weights] = target.prior_scale
        if self.slab_std is not None:
            for layer in range(target.layout.n_layers):
                out[target.layout.slices(layer)[0]] = float(self.slab_std)
        return out

    def _vcfg(self, target) -> np.ndarray:
        if not target.prior_density.gaussian:
            raise ValueError(
                "LBBNN's slab is Gaussian: use prior='gaussian' or 'hierarchical' (its "
                "precisions held at their prior mean), and slab_std for its scale"
            )
        local = bool(self.local_reparameterization)
        if self.posterior != "meanfield" and not local:
            raise ValueError(
                f"posterior={self.posterior!r} draws the pre-activations by the local "
                "reparameterization trick: use local_reparameterization=True"
            )
        vcfg = np.zeros(1, dtype=kvi.VI_CONFIG)
        code = {"flow": klbbnn.LBBNN_FLOW, "lowrank": klbbnn.LBBNN_LOWRANK}.get(
            self.posterior, klbbnn.LBBNN_LRT if local else klbbnn.LBBNN_CONCRETE
        )
        rank = int(self.rank) if self._lowrank() else 0
        vcfg[0] = (int(self.n_mc), int(local), 0, rank, 0, code, float(self.temperature),
                   int(self.flow_steps), int(self.flow_hidden))  # fmt: skip
        return vcfg

    def _flow(self) -> bool:
        return self.posterior == "flow"

    def _lowrank(self) -> bool:
        return self.posterior == "lowrank"

    def _kernels(self, target) -> tuple:
        more = ()
        if self._flow():
            more = (kflows.latent_draws, kflows.flow_forward, klbbnn.spike_slab_kl)
        elif self._lowrank():
            more = (klowrank.lowrank_slab_terms,)
        return (*super()._kernels(target), *more)

    def _aside(self, target, vparams, vcfg) -> tuple:
        # the default estimator's epoch kernel compiles neither its backward pass, nor its
        # passes over the weights (the tasks, whose halves the team's helper takes too:
        # _task_kernels), nor the ELBO's closed-form term: the helper process compiles them
        # meanwhile, those the epoch runs first
        tasks = self._task_kernels(vcfg)
        if int(vcfg[0]["lbbnn"]) != klbbnn.LBBNN_LRT:
            return tasks
        return (*super()._aside(target, vparams, vcfg), *tasks,
                klbbnn.spike_slab_terms_kernel(vparams, self._work(target, vcfg)))  # fmt: skip

    def _by_address(self, target, vcfg):
        # the local reparameterization estimator's epoch kernel calls its passes over the
        # weights by address too (klbbnn.spike_slab_prepare); numba's pure Python mode
        # (NUMBA_DISABLE_JIT) has no addresses: they run as linked there
        args = super()._by_address(target, vcfg)
        if int(vcfg[0]["lbbnn"]) != klbbnn.LBBNN_LRT or DISABLED:
            return args
        return (*args, *klbbnn.task_kernels())

    def _compile(self, target) -> float:
        seconds = super()._compile(target)
        # after the warm-up, whose helper process compiled them beside the epoch kernel
        estimator = int(self._vcfg(target)[0]["lbbnn"])
        if estimator in (klbbnn.LBBNN_LRT, klbbnn.LBBNN_FLOW):
            klbbnn.register_tasks()
        elif estimator == klbbnn.LBBNN_LOWRANK:
            klowrank.register_tasks()
        return seconds

    @staticmethod
    def _task_kernels(vcfg) -> tuple:
        # the passes over the weights that the epoch kernel posts to the team's helper
        # (register_tasks): the local reparameterization's and the flow's, or the low-rank
        # family's
        estimator = int(vcfg[0]["lbbnn"])
        if estimator in (klbbnn.LBBNN_LRT, klbbnn.LBBNN_FLOW):
            return klbbnn.task_kernels()
        if estimator == klbbnn.LBBNN_LOWRANK:
            return klowrank.task_kernels()
        return ()

    def _backward_by_address(self, vcfg) -> bool:
        # the local reparameterization estimator; the others' passes are their own
        return int(vcfg[0]["lbbnn"]) == klbbnn.LBBNN_LRT

    def _start(self, target, rng, vcfg) -> np.ndarray:
        """The initial variational parameters: slab means, raw slab sds and inclusion
        logits, flat; for the flow family, the flows' parameters after them."""
        p = target.n_params
        vparams = np.empty(3 * p)
        vparams[:p] = glorot_init(target, rng)
        vparams[p : 2 * p] = inverse_softplus(float(self.init_std))
        vparams[2 * p :] = logit(float(self.init_inclusion))
        if self._lowrank():
            # the factors as VI's low-rank family starts them
            sizes = target.layout.sizes
            n_factors = int(self.rank) * int(np.sum(sizes[:-1] * sizes[1:]))
            scale = float(self.init_std) / math.sqrt(int(self.rank))
            return np.concatenate([vparams, scale * rng.standard_normal(n_factors)])
        if not self._flow():
            return vparams
        return np.concatenate([vparams, self._flow_start(target, rng)])

    def _flow_start(self, target, rng) -> np.ndarray:
        """The flows' initial parameters: ``z0 ~ N(1, init_std^2)``, each step near the
        identity (small weights, the gate at :data:`FLOW_GATE_BIAS`, the shift at 1), and
        ``r`` matching ``q``'s base (``d0 = 1``, ``v0 = 2 log(init_std)``), with small
        ``d1``, ``d2`` and unit-scale ``e``."""
        sizes = target.layout.sizes
        h, k = int(self.flow_hidden), int(self.flow_steps)
        lay = kflows.flow_layout(sizes, h, k)
        out = np.empty(int(lay[-1, 0]))
        std = float(self.init_std)
        for layer in range(target.layout.n_layers):
            d = int(sizes[layer])
            block = out[lay[layer, 0] : lay[layer + 1, 0]]
            base = block[: kflows.BASE_VECTORS * d].reshape(kflows.BASE_VECTORS, d)
            base[0] = 1.0
            base[1] = inverse_softplus(std)
            base[2] = rng.standard_normal(d)
            base[3:5] = 0.01 * rng.standard_normal((2, d))
            base[5] = 1.0
            base[6] = 2.0 * math.log(std)
            steps = block[kflows.BASE_VECTORS * d :].reshape(2 * k, kflows.step_size(d, h))
            for step in steps:
                w1, rest = step[: h * d], step[h * d :]
                w1[:] = rng.standard_normal(h * d) / math.sqrt(d)
                rest[:h] = 0.0  # b1
                wm = rest[h : h + d * h]
                wm[:] = 0.01 * rng.standard_normal(d * h)
                rest[h + d * h : h + d * h + d] = 1.0  # bm
                ws = rest[h + d * h + d : h + 2 * d * h + d]
                ws[:] = 0.01 * rng.standard_normal(d * h)
                rest[h + 2 * d * h + d :] = FLOW_GATE_BIAS  # bs
        return out

    def _work(self, target, vcfg):
        psi, slab = self._psi(target), self._slab(target)
        if self._lowrank():
            return kvi.new_work(target.n_params, 0, psi=psi, slab=slab, sizes=target.layout.sizes,
                                slab_rank=int(self.rank))  # fmt: skip
        if not self._flow():
            return kvi.new_work(target.n_params, 0, psi=psi, slab=slab)
        return kvi.new_work(target.n_params, 0, psi=psi, slab=slab, sizes=target.layout.sizes,
                            flow_hidden=int(self.flow_hidden),
                            flow_steps=int(self.flow_steps))  # fmt: skip

    def _alpha(self, vparams: np.ndarray, p: int, psi: np.ndarray) -> np.ndarray:
        return np.where(psi < 1.0, expit(vparams[2 * p : 3 * p]), 1.0)

    def _mean_params(self, vparams: np.ndarray, p: int, work, target) -> np.ndarray:
        kappa = vparams[:p]
        if self._flow():
            # the slab means at z's base mean pushed through q's flow
            flow = self._posterior(target, vparams, np.ones(p), np.ones(p), 0, None)
            d = int(target.layout.sizes[:-1].sum())
            z, _ = kflows.latent_draws(flow.flow, flow.sizes, flow.flow_hidden,
                                       flow.flow_steps, np.zeros((1, d)))  # fmt: skip
            kappa = flow.scaled_means(z)[0]
        return self._alpha(vparams, p, work.psi) * kappa

    def _posterior(self, target, vparams, var, alpha, n_draws, random_state):
        """The posterior of ``q`` with ``n_draws`` stored draws."""
        p = target.n_params
        layout = target.layout
        common = dict(
            n_draws=n_draws, random_state=random_state, n_noise=layout.n_noise,
            model=self.model,
            noise_precision=target.tau.copy() if target.noise_at_tau else None,
        )  # fmt: skip
        if self._lowrank():
            return LowRankSpikeSlabPosterior(vparams[:p], var, alpha, vparams[3 * p :], layout,
                                             self.rank, **common)  # fmt: skip
        if not self._flow():
            return SpikeSlabPosterior(vparams[:p], var, alpha, **common)
        return FlowSpikeSlabPosterior(vparams[:p], var, alpha, vparams[3 * p :], layout,
                                      self.flow_hidden, self.flow_steps, **common)  # fmt: skip

    def _elbo(self, target, vparams, vcfg, rng, n_draws: int, n_jobs: int = 1):
        """``n_draws`` independent estimates of the ELBO over all rows: the closed-form
        ``-KL`` of the network parameters and entropy of the log noise precisions, plus
        the log-likelihood and the noise's log prior at draws of ``q`` with the indicators
        drawn; for the flow family, the KL given each draw of ``z`` and ``log r(z | W) -
        log q(z)`` at it. Returns the draws, the inclusion probabilities and the slab sds."""
        p = target.n_params
        n_w = target.layout.n_weights
        work = self._work(target, vcfg)
        if int(vcfg[0]["lbbnn"]) == klbbnn.LBBNN_LRT:
            # the same sigmas and alphas, bit for bit, from the kernel that the epoch
            # kernel of this estimator compiled, rather than two that it did not, and
            # with the same pass by address (_by_address: the backward pass, then it)
            klbbnn.spike_slab_prepare(vparams, p, n_w, work,
                                      *self._by_address(target, vcfg)[1:2])  # fmt: skip
        else:
            kvi.set_sigmas(vparams, p, work)
            klbbnn.set_alphas(vparams, p, work)
        alpha = work.alpha.copy()
        var = work.sigma**2
        if self._flow():
            flow = self._posterior(target, vparams, var, alpha, 0, None)
            z, log_q = flow.latent(n_draws, rng)
            means = flow.scaled_means(z)
            theta = spike_slab_draws(means, var, alpha, n_draws, rng)
            exact = np.array([
                klbbnn.spike_slab_kl(means[s], vparams, p, n_w, work) for s in range(n_draws)
            ])  # fmt: skip
            exact += self._log_r(target, vparams[3 * p :], z, theta) - log_q
        elif self._lowrank():
            layout = target.layout
            exact = klowrank.lowrank_slab_terms(vparams, p, n_w, layout.sizes, layout.offsets,
                                           int(self.rank), work, False)  # fmt: skip
            theta = self._posterior(target, vparams, var, alpha, 0, None).sample(n_draws, rng)
        else:
            exact = klbbnn.spike_slab_terms(vparams, p, n_w, work, False)
            theta = spike_slab_draws(vparams[:p], var, alpha, n_draws, rng)
        loglik, _ = target.loglik_batch(theta, n_jobs)
        eta = theta[:, n_w:]
        shape, rate = target.noise_prior
        log_p_eta = np.sum(shape * eta - rate * np.exp(eta), axis=1)
        log_p_eta += eta.shape[1] * (shape * math.log(rate) - math.lgamma(shape))
        return loglik + log_p_eta + exact, alpha, work.sigma.copy()

    def _log_r(self, target, flow, z, theta) -> np.ndarray:
        """``log r(z | W)`` of the flow family at draws ``z`` and the weights ``theta`` drawn
        given them: per layer, ``r``'s flow and its Gaussian whose moments depend on ``nu``,
        the mean over the outputs of ``tanh(sum_i e_i W_ij)``."""
        layout = target.layout
        h, k = int(self.flow_hidden), int(self.flow_steps)
        lay = kflows.flow_layout(layout.sizes, h, k)
        out = np.zeros(len(z))
        col = 0
        for layer in range(layout.n_layers):
            d, n_out = int(layout.sizes[layer]), int(layout.sizes[layer + 1])
            block = flow[lay[layer, 0] : lay[layer + 1, 0]]
            _, _, e, d1, d2, d0, v0 = block[: kflows.BASE_VECTORS * d].reshape(-1, d)
            r_steps = kflows.BASE_VECTORS * d + k * kflows.step_size(d, h)
            w = theta[:, layout.slices(layer)[0]].reshape(len(z), d, n_out)
            nu = np.tanh(np.einsum("i,sij->sj", e, w)).mean(axis=1)
            cache = np.empty(max(k * kflows.step_cache_size(d, h), 1))
            for s in range(len(z)):
                zb = z[s, col : col + d].copy()
                out[s] += kflows.flow_forward(block, r_steps, d, h, k, zb, cache, 0)
                mu, lv = d0 + d1 * nu[s], v0 + d2 * nu[s]
                out[s] -= 0.5 * np.sum(math.log(2 * math.pi) + lv + (zb - mu) ** 2 * np.exp(-lv))
            col += d
        return out

    def run(self, target, n_samples: int, random_state, n_jobs, verbose: int) -> FitResult:
        """Fit ``q``, estimate the ELBO and draw from ``q``; see :meth:`BaseMethod.run`."""
        self._validate_params()
        vcfg = self._vcfg(target)
        self._psi(target)  # refuse a bad inclusion_prior before training
        ss = seed_sequence(random_state)
        fit_seed, elbo_seed, draw_seed, path_seed = ss.spawn(4)

        def start(target, rng):
            return self._start(target, rng, vcfg), None, None

        members, train = self._train_members(target, 1, fit_seed, n_jobs, verbose, start)
        vparams = members[0].theta
        rng = np.random.default_rng(elbo_seed)
        n_draws, threads = int(self.elbo_samples), effective_n_jobs(n_jobs)
        draws, alpha, sigma = self._elbo(target, vparams, vcfg, rng, n_draws, threads)
        layout = target.layout
        alphas = [c.copy() for c in layout.unpack(alpha)[0]]
        n_weights = sum(a.size for a in alphas)
        density = sum(int((a > 0.5).sum()) for a in alphas) / n_weights
        diagnostics = LBBNNDiagnostics.extending(
            train,
            elbo_se=float(draws.std(ddof=1) / math.sqrt(draws.size)),
            local_reparameterization=bool(self.local_reparameterization),
            expected_density=sum(float(a.sum()) for a in alphas) / n_weights,
        )
        posterior = self._posterior(target, vparams, sigma**2, alpha, n_samples, draw_seed)
        attributes = {
            "inclusion_probabilities_": alphas,
            "density_": float(density),
            # paths through the median probability model's weights only: a wide network's
            # uninformative weights keep alpha near psi, and through that many of them every
            # input has some path almost surely (a priori as much as a posteriori)
            "feature_inclusion_": path_probabilities(
                [a * (a > 0.5) for a in alphas], np.random.default_rng(path_seed)
            ),
        }
        return FitResult(posterior, diagnostics=diagnostics, elbo=float(draws.mean()),
                         attributes=attributes)  # fmt: skip
