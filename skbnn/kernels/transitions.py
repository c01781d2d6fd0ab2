"""One transition of each chain kernel: NUTS, static-path HMC, MALA and random-walk
Metropolis.

Every transition has the form ``transition(rng, chain, tgt, settings, work) -> info``: it
moves the chain's point (``chain.q``, its gradient ``chain.grad`` and log-density terms
``chain.stats``) to the next state of the Markov chain, reading the log density and step
size from ``chain.state`` and its tuning from ``settings`` (both described in
:mod:`skbnn.kernels.chain`), and returns a :data:`TransitionInfo`. Adaptation and the
bookkeeping that follows a transition live in :mod:`skbnn.kernels.adaptation` and
:mod:`skbnn.kernels.chain`; scratch memory comes from a :data:`Workspace`.
"""

import math
from collections import namedtuple

import numpy as np

from ._compile import njit
from .density import density, n_rows, workspace_size
from .integrators import draw_momentum, energy, leapfrog, logp_and_grad, metric_normal
from .linalg import DENSE, LOW_RANK, add, copy, dot, low_rank_update, velocity

_FM = {"reassoc", "contract"}

#: What a transition reports. ``trajectory_size``: the trajectory's size in the sampler's
#: own measure, NUTS's tree depth (doublings) or static HMC's planned number of leapfrog
#: steps, 0 for the one-step moves; ``n_leapfrog``: gradient (log-density for the random
#: walk) evaluations made; ``accept_stat``: the mean acceptance probability; ``energy``: the
#: Hamiltonian of the chosen state, NaN for MALA and the random walk, which resample no
#: momentum.
TransitionInfo = namedtuple(
    "TransitionInfo",
    ["logp", "trajectory_size", "n_leapfrog", "accept_stat", "divergent", "energy"],
)

#: Scratch memory of a chain's transitions: ``net`` the network's workspace, ``vecs`` 22
#: vectors of length d, ``ckpt`` NUTS's per-level checkpoints (5, max_depth + 1, d), and
#: ``stats`` / ``stats_sub`` the log-density terms of a proposal and of NUTS's subtree pick.
Workspace = namedtuple("Workspace", ["net", "vecs", "ckpt", "stats", "stats_sub"])


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def workspace(tgt, d, max_depth):
    """A :data:`Workspace` for ``d`` parameters and trees up to ``max_depth``."""
    k = tgt.tau.shape[0]
    return Workspace(
        np.empty(workspace_size(tgt.sizes, n_rows(tgt))),
        np.zeros((22, d)),
        np.empty((5, max_depth + 1, d)),
        np.empty(2 + k),
        np.empty(2 + k),
    )


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _no_turn_diff(ps_a, ps_b, r1, r0, extra):
    # Generalized no-U-turn criterion (Betancourt 2017) with rho = r1 - r0 + extra: both
    # ends' velocities must point along the summed momentum (extra carries Stan's checks
    # across neighbouring subtrees).
    sa = 0.0
    sb = 0.0
    for i in range(ps_a.shape[0]):
        r = r1[i] - r0[i] + extra[i]
        sa += ps_a[i] * r
        sb += ps_b[i] * r
    return sa > 0.0 and sb > 0.0


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _logaddexp(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def nuts(rng, chain, tgt, settings, work):
    """One NUTS transition with multinomial sampling (Betancourt 2017, as in Stan).

    The trajectory doubles until a U-turn, a divergence or ``settings.max_tree_depth``. The
    new subtree is built leaf by leaf; U-turns of its internal subtrees are checked from
    checkpoints of the momentum, its velocity and the running momentum sum kept per level
    (a level-k block starts at leaves that are multiples of 2^k), with Stan's extra checks
    across neighbouring subtrees, so exactly the checks of Stan's recursive build_tree are
    made.
    """
    q0, g0, st0, metric = chain.q, chain.grad, chain.stats, chain.metric
    lp0 = chain.state[0].logp
    eps = chain.state[0].step_size
    conf = settings[0]
    kind = conf.metric
    max_depth = conf.max_tree_depth
    max_dh = conf.max_delta_energy
    st, st_sub, buf, ckpt = work.stats, work.stats_sub, work.vecs, work.ckpt
    q, p, g, ps = buf[0], buf[1], buf[2], buf[3]
    q_l, p_l, g_l, ps_l = buf[4], buf[5], buf[6], buf[7]
    q_r, p_r, g_r, ps_r = buf[8], buf[9], buf[10], buf[11]
    rho, sub_rho = buf[12], buf[13]
    q_sub, g_sub = buf[14], buf[15]
    first_p, first_ps, adj_p, adj_ps = buf[16], buf[17], buf[18], buf[19]
    zero, tmp = buf[20], buf[21]
    beg_p, beg_ps, beg_rho, end_p, end_ps = ckpt[0], ckpt[1], ckpt[2], ckpt[3], ckpt[4]

    draw_momentum(rng, p_l, metric, kind)
    velocity(p_l, metric, kind, ps_l)
    h0 = energy(lp0, p_l, ps_l)
    copy(q_l, q0)
    copy(q_r, q0)
    copy(p_r, p_l)
    copy(ps_r, ps_l)
    copy(g_l, g0)
    copy(g_r, g0)
    copy(rho, p_l)
    log_sum_w = 0.0
    lp_prop = lp0
    h_prop = h0
    depth = 0
    n_leap = 0
    sum_acc = 0.0
    divergent = False

    while depth < max_depth:
        right = rng.random() < 0.5
        if right:
            copy(q, q_r)
            copy(p, p_r)
            copy(g, g_r)
            far_ps = ps_l
            copy(adj_p, p_r)
            copy(adj_ps, ps_r)
            step = eps
        else:
            copy(q, q_l)
            copy(p, p_l)
            copy(g, g_l)
            far_ps = ps_r
            copy(adj_p, p_l)
            copy(adj_ps, ps_l)
            step = -eps
        n_leaves = 1 << depth
        sub_log_w = -np.inf
        for i in range(sub_rho.shape[0]):
            sub_rho[i] = 0.0
        lp_sub = 0.0
        h_sub = 0.0
        valid = True
        for leaf in range(n_leaves):
            lp = leapfrog(q, p, g, step, metric, kind, tmp, tgt, work.net, st)
            n_leap += 1
            velocity(p, metric, kind, ps)
            h = energy(lp, p, ps)
            dh = h - h0
            sum_acc += 1.0 if dh <= 0.0 else math.exp(-dh)
            if dh > max_dh:
                divergent = True
                valid = False
                break
            if leaf == 0:
                copy(first_p, p)
                copy(first_ps, ps)
            for k in range(1, depth + 1):
                if leaf % (1 << k) == 0:
                    copy(beg_p[k], p)
                    copy(beg_ps[k], ps)
                    copy(beg_rho[k], sub_rho)
            add(sub_rho, p)
            sub_log_w = _logaddexp(sub_log_w, -dh)
            # progressive uniform sampling within the subtree: leaf wins w.p. w / W_so_far
            if rng.random() < math.exp(-dh - sub_log_w):
                copy(q_sub, q)
                copy(g_sub, g)
                copy(st_sub, st)
                lp_sub = lp
                h_sub = h
            for k in range(1, depth + 1):
                if (leaf + 1) % (1 << k) == 0:
                    ok = _no_turn_diff(beg_ps[k], ps, sub_rho, beg_rho[k], zero)
                    if ok and k >= 2:
                        # halves A (built first) and B: A + first leaf of B, B + last of A
                        ok = _no_turn_diff(
                            beg_ps[k], beg_ps[k - 1], beg_rho[k - 1], beg_rho[k], beg_p[k - 1]
                        ) and _no_turn_diff(
                            end_ps[k - 1], ps, sub_rho, beg_rho[k - 1], end_p[k - 1]
                        )
                    if not ok:
                        valid = False
                        break
            if not valid:
                break
            for k in range(1, depth):
                if (leaf + 1) % (1 << k) == 0:
                    copy(end_p[k], p)
                    copy(end_ps[k], ps)
        if not valid:
            # a subtree that turned or diverged is discarded whole (Stan, Betancourt 2017)
            break
        if right:
            copy(q_r, q)
            copy(p_r, p)
            copy(g_r, g)
            copy(ps_r, ps)
        else:
            copy(q_l, q)
            copy(p_l, p)
            copy(g_l, g)
            copy(ps_l, ps)
        # biased progressive sampling favours the new subtree (Betancourt 2017, A.3.2)
        if rng.random() < math.exp(sub_log_w - log_sum_w):
            copy(q0, q_sub)
            copy(g0, g_sub)
            copy(st0, st_sub)
            lp_prop = lp_sub
            h_prop = h_sub
        log_sum_w = _logaddexp(log_sum_w, sub_log_w)
        ok = _no_turn_diff(ps_l, ps_r, rho, zero, sub_rho)
        if ok:
            ok = _no_turn_diff(far_ps, first_ps, rho, zero, first_p) and _no_turn_diff(
                adj_ps, ps, sub_rho, zero, adj_p
            )
        add(rho, sub_rho)
        depth += 1
        if not ok:
            break
    return TransitionInfo(lp_prop, depth, n_leap, sum_acc / max(n_leap, 1), divergent, h_prop)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def static_path(q0, g0, lp0, p, step, n_steps, metric, kind, q, g, ps, tmp, tgt, ws, st):
    """Integrate ``n_steps`` leapfrog steps of size ``step`` from ``q0`` (gradient ``g0``,
    log density ``lp0``) with momentum ``p``: static HMC's trajectory, for :func:`hmc` and
    SMC's particle moves (:func:`skbnn.kernels.smc.hmc_moves`).

    The end point goes to ``q``, ``g`` and ``p``, its log-density terms to ``st``. A
    trajectory whose log density stops being finite ends there: integrating on would only
    burn gradients. Returns the end's log density, the Hamiltonian at the start and at the
    end, and the steps integrated (the gradients evaluated).
    """
    velocity(p, metric, kind, ps)
    h0 = energy(lp0, p, ps)
    copy(q, q0)
    copy(g, g0)
    lp = lp0
    n_done = 0
    for _ in range(n_steps):
        lp = leapfrog(q, p, g, step, metric, kind, tmp, tgt, ws, st)
        n_done += 1
        if not math.isfinite(lp):
            break
    velocity(p, metric, kind, ps)
    return lp, h0, energy(lp, p, ps), n_done


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def hmc(rng, chain, tgt, settings, work):
    """One static-path HMC transition: ``ceil(path_length / eps)`` leapfrog steps (at most
    ``max_steps``) with the step size jittered by ``+-step_jitter`` of itself."""
    q0, g0, st0, metric = chain.q, chain.grad, chain.stats, chain.metric
    lp0 = chain.state[0].logp
    eps = chain.state[0].step_size
    conf = settings[0]
    kind = conf.metric
    st, buf = work.stats, work.vecs
    q, p, g, ps, tmp = buf[0], buf[1], buf[2], buf[3], buf[21]
    draw_momentum(rng, p, metric, kind)
    # a fixed number of steps with a jittered step size: the path length varies by
    # +-jitter, which breaks the periodicity a fixed integration time can lock into
    n_steps = int(min(conf.max_steps, max(1.0, math.ceil(conf.path_length / eps))))
    step = eps * (1.0 + conf.step_jitter * (2.0 * rng.random() - 1.0))
    # n_done: the steps actually integrated (a blown-up trajectory stops early), so only
    # the gradients it evaluated are counted
    lp, h0, h, n_done = static_path(
        q0, g0, lp0, p, step, n_steps, metric, kind, q, g, ps, tmp, tgt, work.net, st
    )
    dh = h - h0
    divergent = dh > conf.max_delta_energy
    acc = 1.0 if dh <= 0.0 else math.exp(-dh)
    if rng.random() < acc:
        copy(q0, q)
        copy(g0, g)
        copy(st0, st)
        return TransitionInfo(lp, n_steps, n_done, acc, divergent, h)
    return TransitionInfo(lp0, n_steps, n_done, acc, divergent, h0)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _mala_log_q(q_to, q_from, g_from, eps, metric, kind, tmp, tmp2):
    # log N(q_to | q_from + eps^2/2 M^-1 g_from, eps^2 M^-1) up to a constant shared by
    # both directions: -|v|^2_M / (2 eps^2) with v the displacement from the drift mean
    d = q_to.shape[0]
    half = 0.5 * eps * eps
    velocity(g_from, metric, kind, tmp)
    for i in range(d):
        tmp[i] = q_to[i] - q_from[i] - half * tmp[i]
    if kind == LOW_RANK:
        # |v|^2_M = |(I + U diag(lam^-1/2 - 1) U^T) S^-1 v|^2
        inv_m = metric.inv_m
        for i in range(d):
            tmp2[i] = tmp[i] / math.sqrt(inv_m[i])
        low_rank_update(metric.sigma, metric.chol[1], tmp2)
        return -0.5 * dot(tmp2, tmp2) / (eps * eps)
    if kind == DENSE:
        # |v|^2_M = v^T sigma^-1 v = |L^-1 v|^2 with sigma = L L^T (forward substitution)
        chol = metric.chol
        for i in range(d):
            acc = tmp[i]
            for j in range(i):
                acc -= chol[i, j] * tmp2[j]
            tmp2[i] = acc / chol[i, i]
        return -0.5 * dot(tmp2, tmp2) / (eps * eps)
    inv_m = metric.inv_m
    acc = 0.0
    for i in range(d):
        acc += tmp[i] * tmp[i] / inv_m[i]
    return -0.5 * acc / (eps * eps)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def mala(rng, chain, tgt, settings, work):
    """One Metropolis-adjusted Langevin transition with preconditioner ``M^-1``.

    Proposal ``q' = q + (eps^2 / 2) M^-1 grad log p(q) + eps M^-1/2 xi``, accepted with
    probability ``min(1, p(q') q(q | q') / (p(q) q(q' | q)))``: the proposal is not symmetric,
    so both transition densities enter. A proposal whose log-density ratio is below
    ``-max_delta_energy`` counts as divergent.
    """
    q0, g0, st0, metric = chain.q, chain.grad, chain.stats, chain.metric
    lp0 = chain.state[0].logp
    eps = chain.state[0].step_size
    conf = settings[0]
    kind = conf.metric
    st, buf = work.stats, work.vecs
    q, g, tmp, tmp2, xi = buf[0], buf[2], buf[21], buf[3], buf[1]
    d = q0.shape[0]
    half = 0.5 * eps * eps
    velocity(g0, metric, kind, tmp)
    metric_normal(rng, metric, kind, xi, q)
    for i in range(d):
        q[i] = q0[i] + half * tmp[i] + eps * q[i]
    lp = logp_and_grad(q, tgt, work.net, g, st)
    log_ratio = -np.inf
    if math.isfinite(lp):
        # the forward displacement from the drift mean is eps M^-1/2 xi by construction, so
        # its density needs no solve: -|xi|^2 / 2 (the same constant as _mala_log_q's)
        forward = -0.5 * dot(xi, xi)
        backward = _mala_log_q(q0, q, g, eps, metric, kind, tmp, tmp2)
        log_ratio = lp - lp0 + backward - forward
        if log_ratio != log_ratio:
            log_ratio = -np.inf
    divergent = log_ratio < -conf.max_delta_energy
    acc = 1.0 if log_ratio >= 0.0 else math.exp(log_ratio)
    # no Hamiltonian is resampled between transitions, so there is no energy to report
    if rng.random() < acc:
        copy(q0, q)
        copy(g0, g)
        copy(st0, st)
        return TransitionInfo(lp, 0, 1, acc, divergent, np.nan)
    return TransitionInfo(lp0, 0, 1, acc, divergent, np.nan)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def random_walk(rng, chain, tgt, settings, work):
    """One random-walk Metropolis step with proposal ``N(q, Sigma)``.

    ``Sigma`` is the chain's metric (see :mod:`skbnn.kernels.linalg`). The log density is
    evaluated without its gradient; ``chain.grad`` is left as it is (nothing downstream of
    a random walk reads it).
    """
    q0, st0, metric = chain.q, chain.stats, chain.metric
    lp0 = chain.state[0].logp
    kind = settings[0].metric
    st, buf = work.stats, work.vecs
    q = buf[0]
    metric_normal(rng, metric, kind, buf[1], q)
    for i in range(q0.shape[0]):
        q[i] += q0[i]
    lp = density(q, tgt, work.net, buf[2][:0], st, False)
    log_ratio = lp - lp0 if lp == lp else -np.inf
    acc = 1.0 if log_ratio >= 0.0 else math.exp(log_ratio)
    if rng.random() < acc:
        copy(q0, q)
        copy(st0, st)
        return TransitionInfo(lp, 0, 1, acc, False, np.nan)
    return TransitionInfo(lp0, 0, 1, acc, False, np.nan)
