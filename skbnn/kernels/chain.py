"""Chain kernels: a block of iterations of one chain (transition, Gibbs moves, warm-up
adaptation, recording of the kept draws), for NUTS, static HMC, MALA, adaptive
Metropolis, MCLMC and MAMS.

A chain's whole state lives in arrays so the Python driver can run it in blocks (for a
progress bar, and to update the metric at the ends of Stan's windows) and threads can run
chains side by side without the GIL. The arrays travel together as one :data:`Chain` named
tuple:

=============  ==========================================================================
``q``          the current point (network parameters, then any log noise precisions)
``grad``       the gradient of the log density at ``q`` (not kept by a random walk)
``stats``      the log density's terms at ``q``: ``[loglik, logprior, ssr_0, ...]``
``state``      one-element record of dtype :data:`CHAIN_STATE`: log density, step size,
               adaptation and counters
``metric``     :data:`skbnn.kernels.linalg.Metric` ``(inv_m, sigma, chol)``
``w_mean``     Welford mean of the warm-up draws (adaptive Metropolis: of all iterations
               from ``t0 / 2`` on)
``w_m2``       Welford sums: (d, d) cross products for a dense metric, else three rows:
               the draws' sums of squares, the gradients' mean, their sums of squares;
               for a low-rank metric, the window's draws (first half of the rows) and
               their gradients (second half)
``draws``      kept draws, one row each
``trace``      per kept draw, the fields :data:`TRACE_FIELDS`
``taus``       per kept draw, the noise precisions, then a hierarchical prior's layer
               precisions
=============  ==========================================================================

:data:`CHAIN_STATE` fields: ``logp`` (log density at ``q``), ``step_size``, the dual
averaging's ``log_step_size_bar``, ``accept_gap_bar``, ``mu`` and ``n_adapt`` (see
:func:`skbnn.kernels.adaptation.dual_averaging`), ``welford_count``, ``n_grad_evals``
(log-density evaluations for adaptive Metropolis) and ``warmup_divergences``; for MCLMC
and MAMS also ``path_length`` (the trajectory length or decoherence length ``L``, 0 until
set) and MCLMC's step-size tuning by the energy error: ``energy_weight``,
``energy_average`` and ``step_size_max`` (see :func:`run_mclmc_block`).

The sampler's configuration, shared by all chains, is a one-element record of dtype
:data:`SETTINGS`:

======================  =================================================================
``kind``                :data:`NUTS`, :data:`HMC`, :data:`MALA`, :data:`RANDOM_WALK`,
                        :data:`MCLMC` or :data:`MAMS`
``max_tree_depth``      NUTS: at most ``2**max_tree_depth - 1`` leapfrog steps
``max_steps``           static HMC and MAMS: cap on the steps of a transition
``noise_update``        :data:`NOISE_FIXED`, :data:`NOISE_GIBBS` or :data:`NOISE_MARGINAL`
``metric``              the metric's kind (:data:`~skbnn.kernels.linalg.DIAGONAL`,
                        ``DENSE``, ``LOW_RANK``); with ``LOW_RANK`` warm-up keeps each
                        window's draws and gradients in ``w_m2`` instead of Welford sums
``gibbs_output_layer``  1: exact Gibbs draw of the output layer after every transition
``rescale_units``       1: ReLU units' scale moves after every transition
``thin``                keep every ``thin``-th state after warm-up
``t0``                  adaptive Metropolis: first iteration with the chain's covariance
``t_adapt``             adaptive Metropolis: iterations between proposal refreshes
``target_accept``       dual averaging's target acceptance statistic
``max_delta_energy``    energy error (MALA: minus log acceptance ratio) marking divergence
``path_length``         static HMC: integration time; MAMS: ``L / sqrt(d)``
``step_jitter``         static HMC: relative half-width of the step-size jitter
``gamma``               adaptive Metropolis: multiplier of the optimal scaling 2.4^2 / d
``integrator``          MCLMC and MAMS: :data:`~skbnn.kernels.microcanonical.LEAPFROG` or
                        ``MCLACHLAN``
``n_tune_l``            MCLMC: the last warm-up iterations, whose draws set ``L``
``energy_var``          MCLMC: target energy error variance per parameter
``l_factor``            MCLMC: ``L`` over the distance travelled per effective draw
======================  =================================================================

MALA and adaptive Metropolis resample no momentum, so they have no Hamiltonian and record
NaN as the energy; MCLMC and MAMS record the energy error of the step or trajectory, and
MCLMC its square per parameter as the acceptance statistic (it accepts every step).
"""

import math
from collections import namedtuple

import numba
import numpy as np
from numba.core import types

from ._compile import CompiledKernel, _named, compiled_kernel, njit, record
from ._libm import _LOG_2PI
from .adaptation import (
    am_refresh,
    dual_averaging,
    finish_dual_averaging,
    keep_draw,
    scale_metric,
    welford,
)
from .density import weight_sum
from .gibbs import (
    gibbs_noise,
    gibbs_output_layer,
    gibbs_prior_precision,
    rescale_units,
)
from .integrators import logp_and_grad
from .linalg import DENSE, LOW_RANK, Metric, copy, dot
from .microcanonical import mams, mclmc, mean_autocorrelation_time, random_direction
from .transitions import TransitionInfo, hmc, mala, nuts, random_walk, workspace

TRACE_FIELDS = (
    "loglik",
    "accept_stat",
    "n_leapfrog",
    "tree_depth",
    "divergent",
    "step_size",
    "energy",
)

# kinds of transition
NUTS, HMC, MALA, RANDOM_WALK, MCLMC, MAMS = 0, 1, 2, 3, 4, 5
# how an unknown Gaussian noise precision is sampled (fixed: none, or part of q)
NOISE_FIXED, NOISE_GIBBS, NOISE_MARGINAL = 0, 1, 2

Chain = namedtuple(
    "Chain",
    ["q", "grad", "stats", "state", "metric", "w_mean", "w_m2", "draws", "trace", "taus"],
)

CHAIN_STATE = record(
    [
        ("logp", np.float64),
        ("step_size", np.float64),
        ("log_step_size_bar", np.float64),
        ("accept_gap_bar", np.float64),
        ("mu", np.float64),
        ("n_adapt", np.int64),
        ("welford_count", np.int64),
        ("n_grad_evals", np.int64),
        ("warmup_divergences", np.int64),
        ("path_length", np.float64),
        ("energy_weight", np.float64),
        ("energy_average", np.float64),
        ("step_size_max", np.float64),
    ],
    align=True,
)

SETTINGS = record(
    [
        ("kind", np.int64),
        ("max_tree_depth", np.int64),
        ("max_steps", np.int64),
        ("noise_update", np.int64),
        ("metric", np.int64),
        ("gibbs_output_layer", np.int64),
        ("rescale_units", np.int64),
        ("thin", np.int64),
        # set by the driver's thread on Ctrl-C: every chain stops before its next iteration
        ("interrupt", np.int64),
        ("t0", np.int64),
        ("t_adapt", np.int64),
        ("target_accept", np.float64),
        ("max_delta_energy", np.float64),
        ("path_length", np.float64),
        ("step_jitter", np.float64),
        ("gamma", np.float64),
        ("integrator", np.int64),
        ("n_tune_l", np.int64),
        ("energy_var", np.float64),
        ("l_factor", np.float64),
    ],
    align=True,
)


def make_settings(**fields) -> np.ndarray:
    """A one-element :data:`SETTINGS` record; fields not given are 0 (``thin``: 1)."""
    settings = np.zeros(1, dtype=SETTINGS)
    settings[0]["thin"] = 1
    for name, value in fields.items():
        settings[0][name] = value
    return settings


def make_state(step_size: float = 0.1) -> np.ndarray:
    """A fresh one-element :data:`CHAIN_STATE` record (the step-size search starts from
    ``step_size``)."""
    state = np.zeros(1, dtype=CHAIN_STATE)
    state[0]["step_size"] = step_size
    return state


def make_chain(q, n_stats, metric=None, dense=False, n_draws=1, n_taus=0, window=0) -> Chain:
    """A :data:`Chain` at ``q`` with room for ``n_draws`` kept draws.

    ``n_stats`` is ``2 + n_outputs``; ``metric`` defaults to the unit diagonal one. With
    ``window`` > 0 warm-up keeps up to that many draws (and gradients) of a window, for a
    low-rank metric. The log density, gradient and terms at ``q`` are left for the driver
    to evaluate.
    """
    d = q.shape[0]
    if metric is None:
        metric = Metric(np.ones(d), np.zeros((1, 1)), np.zeros((1, 1)))
    return Chain(
        q=q,
        grad=np.zeros(d),
        stats=np.zeros(n_stats),
        state=make_state(),
        metric=metric,
        w_mean=np.zeros(d),
        w_m2=np.zeros((2 * window, d) if window else (d, d) if dense else (3, d)),
        draws=np.zeros((n_draws, d)),
        trace=np.zeros((n_draws, len(TRACE_FIELDS))),
        taus=np.zeros((n_draws, n_taus)),
    )


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _gaussian_loglik(tgt, st0):
    # the Gaussian log-likelihood at the noise precisions tgt.tau, from the residual sums
    # of squares in st0
    tau = tgt.tau
    n = weight_sum(tgt)
    ll = 0.0
    for o in range(tau.shape[0]):
        ll += 0.5 * n * (math.log(tau[o]) - _LOG_2PI) - 0.5 * tau[o] * st0[2 + o]
    return ll


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _begin_moves(chain, info):
    # the transition's end point, before the moves change it
    s = chain.state[0]
    s.logp = info.logp
    s.n_grad_evals += info.n_leapfrog


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def gibbs_moves(rng, chain, tgt, settings, ws):
    """The exact moves after a transition that ``settings`` (and a hierarchical prior) turn
    on: ReLU scale moves, the prior precisions' draw, the noise precision's draw (marginal
    or Gibbs) and the output layer's Gibbs draw, in that order.

    The block kernels call it when their ``moves`` argument is not None; with ``moves=None``
    they call :func:`draw_marginal_noise` instead, and numba prunes this branch before
    typing, so a sampler that needs none of the moves does not compile them.
    """
    q0, g0, st0 = chain.q, chain.grad, chain.stats
    s = chain.state[0]
    conf = settings[0]
    # a random walk (adaptive Metropolis) has no step size and never reads the gradient, so
    # the log density after a Gibbs step is evaluated without it (an empty gradient array)
    walk = conf.kind == RANDOM_WALK
    g_new = g0[:0] if walk else g0
    if conf.rescale_units != 0:
        dlp = rescale_units(rng, q0, g0, tgt)
        s.logp += dlp
        st0[1] += dlp
    if tgt.cfg[0].hierarchical != 0:
        dlp = gibbs_prior_precision(rng, q0, g0, tgt)
        s.logp += dlp
        st0[1] += dlp
    if conf.noise_update == NOISE_MARGINAL:
        # marginalized noise: the density does not depend on tau, so drawing it from its
        # conditional needs no new gradient; it completes the joint draw (and the output
        # layer's conditional below needs it)
        gibbs_noise(rng, tgt, st0)
    if conf.gibbs_output_layer != 0:
        gibbs_output_layer(rng, q0, tgt, ws)
        s.logp = logp_and_grad(q0, tgt, ws, g_new, st0)
        s.n_grad_evals += 1
    if conf.noise_update == NOISE_GIBBS:
        gibbs_noise(rng, tgt, st0)
        s.logp = logp_and_grad(q0, tgt, ws, g_new, st0)
        s.n_grad_evals += 1
    elif conf.noise_update == NOISE_MARGINAL and conf.gibbs_output_layer != 0:
        # the output layer moved, so the drawn tau is stale relative to the new residuals
        gibbs_noise(rng, tgt, st0)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def draw_marginal_noise(rng, chain, tgt, settings):
    """:func:`gibbs_moves` when none is on: only a marginalized noise precision's draw."""
    if settings[0].noise_update == NOISE_MARGINAL:
        gibbs_noise(rng, tgt, chain.stats)


def needs_moves(settings: np.ndarray, hierarchical: bool) -> bool:
    """Whether the block kernels must run :func:`gibbs_moves` (pass ``moves=True``) rather
    than only :func:`draw_marginal_noise` (``moves=None``) under ``settings``."""
    conf = settings[0]
    return bool(
        conf["rescale_units"]
        or conf["gibbs_output_layer"]
        or conf["noise_update"] == NOISE_GIBBS
        or hierarchical
    )


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def after_transition(it, sched, chain, tgt, settings, info, eps):
    """What follows the transition and the moves: warm-up adaptation (dual averaging,
    Welford sums) or recording of the kept draw made with step size ``eps``."""
    q0, g0, st0 = chain.q, chain.grad, chain.stats
    s = chain.state[0]
    conf = settings[0]
    n_warmup = sched.shape[0]
    walk = conf.kind == RANDOM_WALK
    if it < n_warmup:
        if info.divergent:
            s.warmup_divergences += 1
        if not walk:
            dual_averaging(chain.state, conf.target_accept, info.accept_stat)
        if sched[it, 0] and conf.metric == LOW_RANK:
            s.welford_count = keep_draw(q0, g0, chain.w_m2, s.welford_count)
        elif sched[it, 0]:
            s.welford_count = welford(
                q0, g0, chain.w_mean, chain.w_m2, s.welford_count, conf.metric == DENSE
            )
        if it == n_warmup - 1:
            finish_dual_averaging(chain.state)
    else:
        # every thin-th state is kept; acceptance, steps and divergences of the thin
        # transitions that lead to it are summed into its row, so none goes uncounted
        trace, taus = chain.trace, chain.taus
        thin = conf.thin
        k = it - n_warmup
        j = k // thin
        if k % thin == 0:
            trace[j, 1] = 0.0
            trace[j, 2] = 0.0
            trace[j, 4] = 0.0
        trace[j, 1] += info.accept_stat / thin
        trace[j, 2] += info.n_leapfrog
        trace[j, 4] += 1.0 if info.divergent else 0.0
        if k % thin == thin - 1:
            copy(chain.draws[j], q0)
            trace[j, 0] = st0[0]
            if conf.noise_update == NOISE_MARGINAL:
                # the log-likelihood at the drawn noise, not at its conditional mean
                trace[j, 0] = _gaussian_loglik(tgt, st0)
            trace[j, 3] = info.trajectory_size
            trace[j, 5] = eps
            trace[j, 6] = info.energy
            k = tgt.tau.shape[0]
            for o in range(k):
                taus[j, o] = tgt.tau[o]
            # a hierarchical prior's precisions follow the noise's, one per layer
            sizes, offsets, prior_std = tgt.sizes, tgt.offsets, tgt.prior_scale
            for layer in range(taus.shape[1] - k):
                c = 1.0 / math.sqrt(sizes[layer]) if tgt.cfg[0].fan_in != 0.0 else 1.0
                s_layer = prior_std[offsets[layer]]
                taus[j, k + layer] = (c / s_layer) ** 2


@njit(cache=True, nogil=True, error_model="numpy", from_python=False, by_address=True)
def after_transition_kernel(it, sched, chain, tgt, settings, info, eps):
    """:func:`after_transition` as a kernel of its own, for the block kernels to call
    through its address (:func:`compiled_after`); ``tgt`` is a
    :data:`~skbnn.kernels.density.KernelTarget`."""
    after_transition(it, sched, chain, tgt, settings, info, eps)


def compiled_after(tgt) -> CompiledKernel:
    """:func:`after_transition_kernel` compiled for the chains of a target of ``tgt``'s
    types (a :data:`~skbnn.kernels.density.KernelTarget`), as the block kernels' ``after``.

    The block kernels call it through its address, so they compile without it, and a cold
    NUTS fit compiles it in the helper process beside the network kernel, which balances
    the two processes; the other samplers compile it in their own, as the block kernel's
    part it was.
    """
    chain = make_chain(np.zeros(1), 3, n_taus=1)
    sig = types.none(
        types.int64,
        numba.typeof(np.zeros((1, 2), dtype=np.uint8)),
        numba.typeof(chain),
        numba.typeof(tgt),
        numba.typeof(make_settings()),
        numba.typeof(TransitionInfo(0.0, 0, 0, 0.0, False, 0.0)),
        types.float64,
    )
    return compiled_kernel(sig, (__name__, "after_transition_kernel", None))


_BLOCK_DOC = """Run {what} iterations ``[it_start, it_stop)`` of one chain.

    ``chain.state[0].logp``, ``chain.grad`` and ``chain.stats`` must hold the log density,
    gradient and terms at ``chain.q``. ``sched[it] = (in_window, end_window)`` for the
    warm-up iterations (there are ``sched.shape[0]``); the driver updates the metric at
    window ends between blocks. Kept draws go to row ``(it - n_warmup) // thin`` of
    ``chain.draws``, ``chain.trace`` and ``chain.taus``.

    ``moves``: None when :func:`needs_moves` is False (the kernel is then compiled without
    :func:`gibbs_moves`), else True. ``after``: :func:`compiled_after`, the bookkeeping
    after each transition (:func:`after_transition`), called through its address: the
    block kernel compiles without it, and a cold fit compiles it in the helper process
    beside the network kernel.

    Returns the iteration it stopped before: ``it_stop``, or an earlier one when
    ``settings[0].interrupt`` was set (Ctrl-C; the chain is then left mid-block).
    """


def _transition_block(kind: int, name: str, what: str):
    # NUTS, static HMC and MALA run the same block around their transition: one body,
    # compiled once per transition. ``kind`` is a constant of the closure, so numba prunes
    # the other transitions' branches before typing them: each kernel compiles its own only.
    def block(rng, chain, tgt, settings, sched, it_start, it_stop, moves, after):
        work = workspace(tgt, chain.q.shape[0], settings[0].max_tree_depth if kind == NUTS else 0)
        for it in range(it_start, it_stop):
            if settings[0].interrupt != 0:
                return it
            eps = chain.state[0].step_size
            if kind == NUTS:
                info = nuts(rng, chain, tgt, settings, work)
            elif kind == HMC:
                info = hmc(rng, chain, tgt, settings, work)
            else:
                info = mala(rng, chain, tgt, settings, work)
            _begin_moves(chain, info)
            if moves is None:  # pruned before typing when moves is None (see gibbs_moves)
                draw_marginal_noise(rng, chain, tgt, settings)
            else:
                gibbs_moves(rng, chain, tgt, settings, work.net)
            after(it, sched, chain, tgt.target, settings, info, eps)
        return it_stop

    block.__doc__ = _BLOCK_DOC.format(what=what)
    return njit(cache=True, nogil=True, error_model="numpy")(_named(block, name))


run_nuts_block = _transition_block(NUTS, "run_nuts_block", "NUTS")
run_hmc_block = _transition_block(HMC, "run_hmc_block", "static-HMC")
run_mala_block = _transition_block(MALA, "run_mala_block", "MALA")


@njit(cache=True, nogil=True, error_model="numpy")
def run_am_block(rng, chain, tgt, settings, sched, it_start, it_stop, moves, after):
    """Run adaptive-Metropolis iterations ``[it_start, it_stop)`` of one chain (Haario et al.
    2001; see run_nuts_block).

    ``chain.w_mean`` / ``chain.w_m2`` hold the chain's running mean and covariance sums over
    every iteration from ``t0 / 2`` on (Welford, O(d^2) per step when dense). From iteration
    ``t0`` on, every ``t_adapt`` iterations the proposal becomes
    ``(gamma 2.4^2 / d) (C_t + 1e-8 I)``. Before that it is the same scaling of the initial
    ``chain.metric`` (the prior variances).
    """
    conf = settings[0]
    dense = conf.metric == DENSE
    d = chain.q.shape[0]
    t0 = conf.t0
    t_adapt = conf.t_adapt
    scale = conf.gamma * 2.4 * 2.4 / d
    work = workspace(tgt, d, 0)
    s = chain.state[0]
    if it_start == 0:
        scale_metric(chain.metric, dense, scale)
    for it in range(it_start, it_stop):
        if settings[0].interrupt != 0:
            return it
        info = random_walk(rng, chain, tgt, settings, work)
        _begin_moves(chain, info)
        if moves is None:  # pruned before typing when moves is None (see gibbs_moves)
            draw_marginal_noise(rng, chain, tgt, settings)
        else:
            gibbs_moves(rng, chain, tgt, settings, work.net)
        after(it, sched, chain, tgt.target, settings, info, 0.0)
        if it >= t0 // 2:
            # the first t0 / 2 steps climb from the prior start; a covariance that kept them
            # would be inflated by that transient for thousands of steps
            s.welford_count = welford(
                chain.q, chain.grad, chain.w_mean, chain.w_m2, s.welford_count, dense
            )
        done = it + 1
        if done >= t0 and (done - t0) % t_adapt == 0 and s.welford_count > 1:
            am_refresh(chain.metric, dense, chain.w_m2, s.welford_count, scale, 1e-8)
    return it_stop


#: MCLMC's step-size tuning (BlackJAX's ``make_L_step_size_adaptation``): the running
#: averages forget with the weight of about this many draws, and an energy error whose
#: squared size is far from the target counts less (``trust_in_estimate``)
MCLMC_N_EFFECTIVE, MCLMC_TRUST = 150.0, 1.5
#: the largest step size after a divergence, relative to the step that diverged
MCLMC_DIVERGENCE_SHRINK = 0.8


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _preconditioner(metric, d):
    # the diagonal metric's square root: the scale of each coordinate
    scale = np.empty(d)
    for i in range(d):
        scale[i] = math.sqrt(metric.inv_m[i])
    return scale


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _isokinetic_start(s, d):
    # The driver's step size is Stan's heuristic for HMC, whose momentum has norm about
    # sqrt(d): an isokinetic step of sqrt(d) times it covers the same distance. Called at
    # each (re)start of the step size (the chain's start and each metric update, where the
    # driver resets n_adapt) and once without warm-up.
    root = math.sqrt(d)
    s.step_size *= root
    s.mu += math.log(root)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _mclmc_step_size(s, energy_error, eps, d, energy_var, divergent):
    # BlackJAX's predictor: Var[E] grows as eps^6, so each step's squared energy error per
    # parameter over the target, xi, predicts the step size eps xi^(-1/6); the prediction
    # is a weighted running average of xi / eps^6, which trusts xi near 1 most. A
    # divergent step caps the step size at 0.8 of the one that diverged.
    if energy_var <= 0.0:
        return
    if divergent:
        s.step_size_max = MCLMC_DIVERGENCE_SHRINK * eps
        energy_error = 0.0
    decay = (MCLMC_N_EFFECTIVE - 1.0) / (MCLMC_N_EFFECTIVE + 1.0)
    xi = energy_error * energy_error / (d * energy_var) + 1e-8
    weight = math.exp(-0.5 * (math.log(xi) / (6.0 * MCLMC_TRUST)) ** 2)
    s.energy_average = decay * s.energy_average + weight * xi / eps**6
    s.energy_weight = decay * s.energy_weight + weight
    s.step_size = min((s.energy_average / s.energy_weight) ** (-1.0 / 6.0), s.step_size_max)


@njit(cache=True, nogil=True, error_model="numpy")
def run_mclmc_block(rng, chain, tgt, settings, sched, it_start, it_stop, moves, after):
    """Run MCLMC iterations ``[it_start, it_stop)`` of one chain (see run_nuts_block): one
    isokinetic step with partial velocity refresh each
    (:func:`~skbnn.kernels.microcanonical.mclmc`).

    The unit velocity persists across iterations and blocks in ``chain.metric.sigma[0]``
    (a diagonal metric's otherwise unused ``(1, d)`` row; the driver gives MCLMC's chains
    one). Warm-up, BlackJAX's ``mclmc_find_L_and_step_size`` on the driver's schedule:
    until the last ``settings.n_tune_l`` iterations the step size is tuned to an energy
    error variance per parameter of ``settings.energy_var`` (restarted with ``L =
    sqrt(d)`` at each metric update, which the driver makes at the schedule's window ends
    from the Welford moments of the ``sched[:, 0]`` iterations); the last ``n_tune_l``
    iterations run at fixed step size and are kept in ``chain.w_m2[3:]``, and at the end
    of warm-up ``L`` becomes ``l_factor * eps`` times their mean integrated
    autocorrelation time (the distance travelled per effective draw).
    """
    conf = settings[0]
    d = chain.q.shape[0]
    work = workspace(tgt, d, 0)
    s = chain.state[0]
    n_warmup = sched.shape[0]
    scale = _preconditioner(chain.metric, d)
    sigma = chain.metric.sigma
    # the compile run's chain has the (1, 1) placeholder: a velocity of its own
    u = sigma[0] if sigma.shape[1] == d else np.zeros(d)
    w_m2 = chain.w_m2
    tuned = w_m2[3:]
    n_buf = w_m2.shape[0] - 3 if w_m2.shape[1] == d else 0
    first_l = n_warmup - conf.n_tune_l
    for it in range(it_start, it_stop):
        if settings[0].interrupt != 0:
            return it
        warm = it < n_warmup
        if (warm and s.n_adapt == 0) or s.path_length <= 0.0:
            _isokinetic_start(s, d)
            s.path_length = math.sqrt(d)
            s.energy_average = s.energy_weight = 0.0
            s.step_size_max = np.inf
            s.n_adapt = 1
        if dot(u, u) == 0.0:
            random_direction(rng, u)
        eps = s.step_size
        info = mclmc(rng, chain, tgt, settings, work, u, scale, s.path_length)
        _begin_moves(chain, info)
        if moves is None:  # pruned before typing when moves is None (see gibbs_moves)
            draw_marginal_noise(rng, chain, tgt, settings)
        else:
            gibbs_moves(rng, chain, tgt, settings, work.net)
        if not warm:
            after(it, sched, chain, tgt.target, settings, info, eps)
            continue
        if info.divergent:
            s.warmup_divergences += 1
        if it < first_l:
            _mclmc_step_size(s, info.energy, eps, d, conf.energy_var, info.divergent)
        if sched[it, 0]:
            s.welford_count = welford(
                chain.q, chain.grad, chain.w_mean, w_m2, s.welford_count, False
            )
        elif it >= first_l and it - first_l < n_buf:
            copy(tuned[it - first_l], chain.q)
        if it == n_warmup - 1 and conf.n_tune_l > 0:
            n = min(conf.n_tune_l, n_buf)
            tau = mean_autocorrelation_time(tuned, n) if n >= 4 else np.nan
            if math.isfinite(tau):
                s.path_length = conf.l_factor * eps * tau
    return it_stop


@njit(cache=True, nogil=True, error_model="numpy")
def run_mams_block(rng, chain, tgt, settings, sched, it_start, it_stop, moves, after):
    """Run MAMS iterations ``[it_start, it_stop)`` of one chain (see run_nuts_block): one
    Metropolis-adjusted isokinetic trajectory each
    (:func:`~skbnn.kernels.microcanonical.mams`). Warm-up is the driver's: dual averaging
    of the step size to ``target_accept`` and the diagonal metric over Stan's windows;
    ``chain.state[0].path_length`` records ``L``."""
    conf = settings[0]
    d = chain.q.shape[0]
    work = workspace(tgt, d, 0)
    s = chain.state[0]
    n_warmup = sched.shape[0]
    scale = _preconditioner(chain.metric, d)
    for it in range(it_start, it_stop):
        if settings[0].interrupt != 0:
            return it
        if (it < n_warmup and s.n_adapt == 0) or s.path_length <= 0.0:
            _isokinetic_start(s, d)
            s.path_length = conf.path_length * math.sqrt(d)
        # the step mams() integrates with (at most L / 1.1)
        eps = min(s.step_size, s.path_length / 1.1)
        info = mams(rng, chain, tgt, settings, work, scale)
        _begin_moves(chain, info)
        if moves is None:  # pruned before typing when moves is None (see gibbs_moves)
            draw_marginal_noise(rng, chain, tgt, settings)
        else:
            gibbs_moves(rng, chain, tgt, settings, work.net)
        after(it, sched, chain, tgt.target, settings, info, eps)
        if s.step_size > s.path_length / 1.1:
            # dual averaging's iterate, and its average at the end of warm-up, held to the
            # step mams() takes (it would grow without bound where even one step of L is
            # accepted, as on small Gaussian targets)
            s.step_size = s.path_length / 1.1
    return it_stop
