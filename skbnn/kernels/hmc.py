"""Numba kernels for Hamiltonian Monte Carlo: leapfrog, NUTS and static HMC transitions,
Stan's warm-up adaptation, and the Gibbs update of the noise precision.

A chain's whole state lives in arrays so the Python driver can run it in blocks (for a
progress bar) and threads can run chains side by side without the GIL.

``sc`` (scalars of one chain)::

    [0] logp at q   [1] step size   [2] log step size average (x_bar)   [3] s_bar
    [4] mu          [5] dual-averaging count   [6] Welford count
    [7] gradient evaluations (log-density evaluations for adaptive Metropolis)
    [8] divergences during warm-up

``cfg_f = [target_accept, path_length, jitter, max_delta_energy]`` and
``cfg_i = [kind (0 NUTS, 1 HMC, 2 MALA, 3 adaptive Metropolis), max_tree_depth, max_steps,
gibbs_noise, dense, gibbs_output_layer, rescale_units, thin]``; adaptive Metropolis reads its
``gamma`` from ``cfg_f[1]`` and ``t0``, ``t_adapt`` from ``cfg_i[1]``, ``cfg_i[2]``.

The metric (inverse mass matrix) is ``inv_m`` (its diagonal) or, when ``dense``, the
matrix ``sigma`` with lower Cholesky factor ``chol``; velocities ``sigma @ p`` ("sharp"
momenta) cost O(d^2) then, which pays when the posterior is strongly correlated.

Per kept draw ``trace`` holds ``[loglik, accept_stat, n_leapfrog, tree_depth, divergent,
step_size, energy]``; MALA and adaptive Metropolis resample no momentum, so they have no
Hamiltonian and record NaN as the energy.
"""

import math

import numpy as np
from numba import njit

from .network import _LOG_2PI, forward, logp_grad, n_rows, workspace_size

_FM = {"reassoc", "contract"}

# Dual-averaging constants of Hoffman & Gelman (2014), the values Stan and NumPyro use.
_DA_GAMMA = 0.05
_DA_T0 = 10.0
_DA_KAPPA = 0.75

TRACE_FIELDS = (
    "loglik",
    "accept_stat",
    "n_leapfrog",
    "tree_depth",
    "divergent",
    "step_size",
    "energy",
)


@njit(cache=True, nogil=True, error_model="numpy")
def _logp_and_grad(q, tgt, ws, g, st):
    # A runtime flag, not the constant True: a literal argument would make numba compile
    # a second specialization of the whole network kernel beside the one Python calls.
    return logp_grad(q, tgt, ws, g, st, g.shape[0] > 0)


@njit(cache=True, nogil=True, error_model="numpy")
def _copy(dst, src):
    # an explicit loop: slice assignment would compile numpy's shape-mismatch error path,
    # which costs seconds of compilation per kernel and cannot happen here
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@njit(cache=True, nogil=True, error_model="numpy")
def _add(dst, src):
    for i in range(dst.shape[0]):
        dst[i] += src[i]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _sharp(p, inv_m, sigma, dense, out):
    # velocity M^-1 p for the diagonal or dense metric
    d = p.shape[0]
    if dense:
        for i in range(d):
            row = sigma[i]
            acc = 0.0
            for j in range(d):
                acc += row[j] * p[j]
            out[i] = acc
    else:
        for i in range(d):
            out[i] = inv_m[i] * p[i]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _dot(a, b):
    acc = 0.0
    for i in range(a.shape[0]):
        acc += a[i] * b[i]
    return acc


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
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


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _leapfrog(q, p, g, eps, metric, dense, tmp, tgt, ws, st):
    d = q.shape[0]
    half = 0.5 * eps
    for i in range(d):
        p[i] += half * g[i]
    _sharp(p, metric[0], metric[1], dense, tmp)
    for i in range(d):
        q[i] += eps * tmp[i]
    lp = _logp_and_grad(q, tgt, ws, g, st)
    for i in range(d):
        p[i] += half * g[i]
    return lp


@njit(cache=True, nogil=True, error_model="numpy")
def _draw_momentum(rng, p, metric, dense):
    # p ~ N(0, M) with M = sigma^-1: p = L^-T z for sigma = L L^T (back substitution)
    d = p.shape[0]
    if dense:
        chol = metric[2]
        for i in range(d):
            p[i] = rng.standard_normal()
        for i in range(d - 1, -1, -1):
            acc = p[i]
            for j in range(i + 1, d):
                acc -= chol[j, i] * p[j]
            p[i] = acc / chol[i, i]
    else:
        inv_m = metric[0]
        for i in range(d):
            p[i] = rng.standard_normal() / math.sqrt(inv_m[i])


@njit(cache=True, nogil=True, error_model="numpy")
def _logaddexp(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


@njit(cache=True, nogil=True, error_model="numpy")
def _energy(lp, p, ps):
    h = -lp + 0.5 * _dot(p, ps)
    return np.inf if h != h else h


@njit(cache=True, nogil=True, error_model="numpy")
def _nuts(rng, q0, g0, st0, lp0, eps, metric, dense, max_depth, max_dh, tgt, ws, buf, ckpt, st,
          st_sub):  # fmt: skip
    """One NUTS transition with multinomial sampling (Betancourt 2017, as in Stan).

    The trajectory doubles until a U-turn, a divergence or ``max_depth``. The new subtree is
    built leaf by leaf; U-turns of its internal subtrees are checked from checkpoints of the
    momentum, its velocity and the running momentum sum kept per level (a level-k block
    starts at leaves that are multiples of 2^k), with Stan's extra checks across
    neighbouring subtrees, so exactly the checks of Stan's recursive build_tree are made.
    ``q0, g0, st0`` are overwritten with the chosen state.
    Returns ``(logp, depth, n_leapfrog, accept_stat, divergent, energy)``.
    """
    q, p, g, ps = buf[0], buf[1], buf[2], buf[3]
    q_l, p_l, g_l, ps_l = buf[4], buf[5], buf[6], buf[7]
    q_r, p_r, g_r, ps_r = buf[8], buf[9], buf[10], buf[11]
    rho, sub_rho = buf[12], buf[13]
    q_sub, g_sub = buf[14], buf[15]
    first_p, first_ps, adj_p, adj_ps = buf[16], buf[17], buf[18], buf[19]
    zero, tmp = buf[20], buf[21]
    beg_p, beg_ps, beg_rho, end_p, end_ps = ckpt[0], ckpt[1], ckpt[2], ckpt[3], ckpt[4]

    _draw_momentum(rng, p_l, metric, dense)
    _sharp(p_l, metric[0], metric[1], dense, ps_l)
    h0 = _energy(lp0, p_l, ps_l)
    _copy(q_l, q0)
    _copy(q_r, q0)
    _copy(p_r, p_l)
    _copy(ps_r, ps_l)
    _copy(g_l, g0)
    _copy(g_r, g0)
    _copy(rho, p_l)
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
            _copy(q, q_r)
            _copy(p, p_r)
            _copy(g, g_r)
            far_ps = ps_l
            _copy(adj_p, p_r)
            _copy(adj_ps, ps_r)
            step = eps
        else:
            _copy(q, q_l)
            _copy(p, p_l)
            _copy(g, g_l)
            far_ps = ps_r
            _copy(adj_p, p_l)
            _copy(adj_ps, ps_l)
            step = -eps
        n_leaves = 1 << depth
        sub_log_w = -np.inf
        for i in range(sub_rho.shape[0]):
            sub_rho[i] = 0.0
        lp_sub = 0.0
        h_sub = 0.0
        valid = True
        for leaf in range(n_leaves):
            lp = _leapfrog(q, p, g, step, metric, dense, tmp, tgt, ws, st)
            n_leap += 1
            _sharp(p, metric[0], metric[1], dense, ps)
            h = _energy(lp, p, ps)
            dh = h - h0
            sum_acc += 1.0 if dh <= 0.0 else math.exp(-dh)
            if dh > max_dh:
                divergent = True
                valid = False
                break
            if leaf == 0:
                _copy(first_p, p)
                _copy(first_ps, ps)
            for k in range(1, depth + 1):
                if leaf % (1 << k) == 0:
                    _copy(beg_p[k], p)
                    _copy(beg_ps[k], ps)
                    _copy(beg_rho[k], sub_rho)
            _add(sub_rho, p)
            sub_log_w = _logaddexp(sub_log_w, -dh)
            # progressive uniform sampling within the subtree: leaf wins w.p. w / W_so_far
            if rng.random() < math.exp(-dh - sub_log_w):
                _copy(q_sub, q)
                _copy(g_sub, g)
                _copy(st_sub, st)
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
                    _copy(end_p[k], p)
                    _copy(end_ps[k], ps)
        if not valid:
            # a subtree that turned or diverged is discarded whole (Stan, Betancourt 2017)
            break
        if right:
            _copy(q_r, q)
            _copy(p_r, p)
            _copy(g_r, g)
            _copy(ps_r, ps)
        else:
            _copy(q_l, q)
            _copy(p_l, p)
            _copy(g_l, g)
            _copy(ps_l, ps)
        # biased progressive sampling favours the new subtree (Betancourt 2017, A.3.2)
        if rng.random() < math.exp(sub_log_w - log_sum_w):
            _copy(q0, q_sub)
            _copy(g0, g_sub)
            _copy(st0, st_sub)
            lp_prop = lp_sub
            h_prop = h_sub
        log_sum_w = _logaddexp(log_sum_w, sub_log_w)
        ok = _no_turn_diff(ps_l, ps_r, rho, zero, sub_rho)
        if ok:
            ok = _no_turn_diff(far_ps, first_ps, rho, zero, first_p) and _no_turn_diff(
                adj_ps, ps, sub_rho, zero, adj_p
            )
        _add(rho, sub_rho)
        depth += 1
        if not ok:
            break
    return lp_prop, depth, n_leap, sum_acc / max(n_leap, 1), divergent, h_prop


@njit(cache=True, nogil=True, error_model="numpy")
def _hmc(rng, q0, g0, st0, lp0, eps, metric, dense, path_length, jitter, max_steps, max_dh, tgt,
         ws, buf, st):  # fmt: skip
    """One static-path HMC transition with the step size jittered by +-``jitter``."""
    q, p, g, ps, tmp = buf[0], buf[1], buf[2], buf[3], buf[21]
    _draw_momentum(rng, p, metric, dense)
    _sharp(p, metric[0], metric[1], dense, ps)
    h0 = _energy(lp0, p, ps)
    # a fixed number of steps with a jittered step size: the path length varies by
    # +-jitter, which breaks the periodicity a fixed integration time can lock into
    n_steps = int(min(max_steps, max(1.0, math.ceil(path_length / eps))))
    step = eps * (1.0 + jitter * (2.0 * rng.random() - 1.0))
    _copy(q, q0)
    _copy(g, g0)
    lp = lp0
    # the steps actually integrated: a blown-up trajectory stops early, and only the
    # gradients it evaluated are counted
    n_done = 0
    for _ in range(n_steps):
        lp = _leapfrog(q, p, g, step, metric, dense, tmp, tgt, ws, st)
        n_done += 1
        if not math.isfinite(lp):
            # the trajectory has blown up; integrating on only burns gradients
            break
    _sharp(p, metric[0], metric[1], dense, ps)
    h = _energy(lp, p, ps)
    dh = h - h0
    divergent = dh > max_dh
    acc = 1.0 if dh <= 0.0 else math.exp(-dh)
    if rng.random() < acc:
        _copy(q0, q)
        _copy(g0, g)
        _copy(st0, st)
        return lp, n_steps, n_done, acc, divergent, h
    return lp0, n_steps, n_done, acc, divergent, h0


@njit(cache=True, nogil=True, error_model="numpy")
def _metric_normal(rng, metric, dense, z, out):
    # out ~ N(0, sigma): L z with sigma = L L^T (dense), or sqrt(inv_m) z (diagonal)
    d = z.shape[0]
    for i in range(d):
        z[i] = rng.standard_normal()
    if dense:
        chol = metric[2]
        for i in range(d):
            acc = 0.0
            for j in range(i + 1):
                acc += chol[i, j] * z[j]
            out[i] = acc
    else:
        inv_m = metric[0]
        for i in range(d):
            out[i] = math.sqrt(inv_m[i]) * z[i]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _mala_log_q(q_to, q_from, g_from, eps, metric, dense, tmp, tmp2):
    # log N(q_to | q_from + eps^2/2 M^-1 g_from, eps^2 M^-1) up to a constant shared by
    # both directions: -|v|^2_M / (2 eps^2) with v the displacement from the drift mean
    d = q_to.shape[0]
    half = 0.5 * eps * eps
    _sharp(g_from, metric[0], metric[1], dense, tmp)
    for i in range(d):
        tmp[i] = q_to[i] - q_from[i] - half * tmp[i]
    if dense:
        # |v|^2_M = v^T sigma^-1 v = |L^-1 v|^2 with sigma = L L^T (forward substitution)
        chol = metric[2]
        for i in range(d):
            acc = tmp[i]
            for j in range(i):
                acc -= chol[i, j] * tmp2[j]
            tmp2[i] = acc / chol[i, i]
        return -0.5 * _dot(tmp2, tmp2) / (eps * eps)
    inv_m = metric[0]
    acc = 0.0
    for i in range(d):
        acc += tmp[i] * tmp[i] / inv_m[i]
    return -0.5 * acc / (eps * eps)


@njit(cache=True, nogil=True, error_model="numpy")
def _mala(rng, q0, g0, st0, lp0, eps, metric, dense, max_dh, tgt, ws, buf, st):
    """One Metropolis-adjusted Langevin transition with preconditioner ``M^-1``.

    Proposal ``q' = q + (eps^2 / 2) M^-1 grad log p(q) + eps M^-1/2 xi``, accepted with
    probability ``min(1, p(q') q(q | q') / (p(q) q(q' | q)))``: the proposal is not symmetric,
    so both transition densities enter. Returns the tuple of :func:`_hmc`; a proposal whose
    log-density ratio is below ``-max_dh`` counts as divergent.
    """
    q, g, tmp, tmp2, xi = buf[0], buf[2], buf[21], buf[3], buf[1]
    d = q0.shape[0]
    half = 0.5 * eps * eps
    _sharp(g0, metric[0], metric[1], dense, tmp)
    _metric_normal(rng, metric, dense, xi, q)
    for i in range(d):
        q[i] = q0[i] + half * tmp[i] + eps * q[i]
    lp = _logp_and_grad(q, tgt, ws, g, st)
    log_ratio = -np.inf
    if math.isfinite(lp):
        # the forward displacement from the drift mean is eps M^-1/2 xi by construction, so
        # its density needs no solve: -|xi|^2 / 2 (the same constant as _mala_log_q's)
        forward = -0.5 * _dot(xi, xi)
        backward = _mala_log_q(q0, q, g, eps, metric, dense, tmp, tmp2)
        log_ratio = lp - lp0 + backward - forward
        if log_ratio != log_ratio:
            log_ratio = -np.inf
    divergent = log_ratio < -max_dh
    acc = 1.0 if log_ratio >= 0.0 else math.exp(log_ratio)
    # no Hamiltonian is resampled between transitions, so there is no energy to report
    if rng.random() < acc:
        _copy(q0, q)
        _copy(g0, g)
        _copy(st0, st)
        return lp, 0, 1, acc, divergent, np.nan
    return lp0, 0, 1, acc, divergent, np.nan


@njit(cache=True, nogil=True, error_model="numpy")
def _gibbs_noise(rng, tgt, st0):
    # Conjugate update of each output's noise precision: Gamma(a + n/2, b + SSR/2)
    # (Neal 1996), so the noise never enters the leapfrog integrator.
    # with the likelihood tempered by beta the conditional is Gamma(a + beta n/2, ...)
    tau = tgt.tau
    n = n_rows(tgt)
    cfg = tgt.cfg[0]
    a = cfg.noise_shape
    b = cfg.noise_rate
    beta = cfg.beta
    for o in range(tau.shape[0]):
        tau[o] = rng.gamma(a + 0.5 * beta * n, 1.0 / (b + 0.5 * beta * st0[2 + o]))


@njit(cache=True, nogil=True, error_model="numpy")
def gibbs_prior_precision(rng, q0, g0, tgt):
    """Draw each layer's weight precision from its Gamma conditional (hierarchical prior).

    With ``lambda_l ~ Gamma(a, b)`` and weights ``N(0, c_l^2 / lambda_l)``, the conditional
    is ``Gamma(a + m_l / 2, b + sum(w^2 / c_l^2) / 2)``. The new scales go into the chain's
    own ``prior_std``; the log density and ``g0`` change only through the Gaussian prior,
    so they are carried over exactly. Returns the change of the log density.
    """
    sizes = tgt.sizes
    a = tgt.cfg[0].hyper_shape
    dlp = 0.0
    for layer in range(sizes.shape[0] - 1):
        m = sizes[layer] * sizes[layer + 1]
        dlp += set_layer_precision(q0, g0, tgt, layer, rng.gamma(a + 0.5 * m, 1.0))
    return dlp


@njit(cache=True, nogil=True, error_model="numpy")
def set_layer_precision(q0, g0, tgt, layer, std_gamma):
    """Set layer ``layer``'s precision to ``std_gamma / (b + sum(w^2 / c^2) / 2)``.

    ``std_gamma`` is a Gamma(a + m / 2, 1) draw, so the result is a draw from the layer's
    conditional. Updates ``prior_std`` and ``g0``; returns the change of the log density.
    """
    sizes, offsets, prior_std = tgt.sizes, tgt.offsets, tgt.prior_scale
    b, fan_in = tgt.cfg[0].hyper_rate, tgt.cfg[0].fan_in
    n_in = sizes[layer]
    m = n_in * sizes[layer + 1]
    w0 = offsets[layer]
    c = 1.0 / math.sqrt(n_in) if fan_in != 0.0 else 1.0
    sq = 0.0
    for i in range(w0, w0 + m):
        sq += q0[i] * q0[i]
    lam = std_gamma / (b + 0.5 * sq / (c * c))
    s_old = prior_std[w0]
    s_new = c / math.sqrt(lam)
    diff = 1.0 / (s_new * s_new) - 1.0 / (s_old * s_old)
    for i in range(w0, w0 + m):
        g0[i] -= q0[i] * diff
        prior_std[i] = s_new
    return -0.5 * sq * diff - m * math.log(s_new / s_old)


@njit(cache=True, nogil=True, error_model="numpy")
def _gaussian_loglik(tgt, st0):
    tau = tgt.tau
    n = n_rows(tgt)
    ll = 0.0
    for o in range(tau.shape[0]):
        ll += 0.5 * n * (math.log(tau[o]) - _LOG_2PI) - 0.5 * tau[o] * st0[2 + o]
    return ll


@njit(cache=True, nogil=True, error_model="numpy")
def _gibbs_output_layer(rng, q0, tgt, ws):
    """Draw the output layer's weights and biases from their exact conditional.

    Given the hidden layers, a Gaussian likelihood is linear in the output layer, whose
    Gaussian prior makes the conditional of each output's weights and bias Gaussian:
    precision ``A = beta tau Phi^T Phi + diag(1 / s^2)`` and mean ``A^-1 beta tau Phi^T y``
    with ``Phi = [H, 1]`` the last hidden layer's activations. Drawing it exactly between
    trajectories removes the directions along which small noise makes the posterior
    narrowest (collinear hidden units), which the leapfrog integrator handles worst.
    """
    XT, YT, sizes, offsets, prior_mean, prior_std, tau, cfgs = tgt
    n = n_rows(tgt)
    n_layers = sizes.shape[0] - 1
    h = sizes[n_layers - 1]
    k = sizes[n_layers]
    beta = cfgs[0].beta
    out_base = forward(q0, XT, sizes, offsets, cfgs[0].activation, n, ws)
    src = XT if n_layers == 1 else ws
    src_base = 0 if n_layers == 1 else out_base - h * n
    w_start = offsets[n_layers - 1]
    b_start = w_start + h * k
    m = h + 1
    gram = np.empty((m, m))
    for i in range(m):
        for j in range(i + 1):
            acc = 0.0
            for t in range(n):
                fi = src[src_base + i * n + t] if i < h else 1.0
                fj = src[src_base + j * n + t] if j < h else 1.0
                acc += fi * fj
            gram[i, j] = acc
            gram[j, i] = acc
    chol = np.empty((m, m))
    rhs = np.empty(m)
    for o in range(k):
        prec = beta * tau[o]
        for i in range(m):
            acc = 0.0
            for t in range(n):
                fi = src[src_base + i * n + t] if i < h else 1.0
                acc += fi * YT[o * n + t]
            rhs[i] = prec * acc
            for j in range(m):
                chol[i, j] = prec * gram[i, j]
            s = prior_std[w_start + i * k + o] if i < h else prior_std[b_start + o]
            chol[i, i] += 1.0 / (s * s)
        _cholesky_inplace(chol)
        # mean = A^-1 rhs by two triangular solves; draw = mean + L^-T z
        for i in range(m):
            acc = rhs[i]
            for j in range(i):
                acc -= chol[i, j] * rhs[j]
            rhs[i] = acc / chol[i, i]
        for i in range(m):
            rhs[i] += rng.standard_normal()
        for i in range(m - 1, -1, -1):
            acc = rhs[i]
            for j in range(i + 1, m):
                acc -= chol[j, i] * rhs[j]
            rhs[i] = acc / chol[i, i]
        for i in range(h):
            q0[w_start + i * k + o] = rhs[i]
        q0[b_start + o] = rhs[h]


@njit(cache=True, nogil=True, error_model="numpy")
def _log_gig_t(t, lam, a, b):
    # log-density of t = log u when u ~ GIG(lam, a, b) (density u^(lam-1) e^(-(a u + b/u)/2)),
    # the Jacobian du = u dt included
    return lam * t - 0.5 * (a * math.exp(t) + b * math.exp(-t))


@njit(cache=True, nogil=True, error_model="numpy")
def _slice_width(lam, a, b):
    # sd of t at its mode log u*, u* the positive root of a u^2 - 2 lam u - b (written to
    # avoid cancellation whichever the sign of lam); 0 or inf when a, b are degenerate
    root = math.sqrt(lam * lam + a * b)
    u = (lam + root) / a if lam >= 0.0 else b / (root - lam)
    return math.sqrt(2.0 / (a * u + b / u))


@njit(cache=True, nogil=True, error_model="numpy")
def _slice_log_gig(rng, t, lam, a, b, width):
    # One slice-sampling update of t (Neal 2003, stepping out, then shrinkage). The density
    # is log-concave in t, so a width of one sd at the mode brackets the slice in a step or
    # two; a reversible update of the 1-D conditional is all the group move needs. The
    # width depends on a u and b / u only, which the move leaves unchanged along the orbit,
    # so the update is the same from any starting point of it.
    level = _log_gig_t(t, lam, a, b) - rng.exponential()
    lo = t - width * rng.random()
    hi = lo + width
    while _log_gig_t(lo, lam, a, b) > level:
        lo -= width
    while _log_gig_t(hi, lam, a, b) > level:
        hi += width
    while True:
        t_new = lo + (hi - lo) * rng.random()
        if _log_gig_t(t_new, lam, a, b) > level:
            return t_new
        if t_new < t:
            lo = t_new
        else:
            hi = t_new


@njit(cache=True, nogil=True, error_model="numpy")
def rescale_units(rng, q0, g0, tgt):
    """Move every ReLU (or identity) hidden unit along its exact scale symmetry.

    ``relu(c z) = c relu(z)`` for ``c > 0``, so multiplying a unit's incoming weights and
    bias by ``c`` and its outgoing weights by ``1 / c`` leaves the network's function, and
    so the likelihood (fixed, Gibbs, marginalized or tempered noise alike), unchanged: only
    the prior sees ``c``. These one-dimensional curved ridges are where a Gaussian prior
    alone holds the posterior, and a leapfrog integrator with a fixed metric crawls along
    them. By the generalized Gibbs step of Liu & Sabatti (2000), with the Haar measure
    ``dc / c`` of the multiplicative group and the Jacobian ``c^(m - k)`` (``m`` incoming
    parameters, ``k`` outgoing weights), ``u = c^2`` has the conditional
    ``GIG(lam = (m - k) / 2, a = sum(w_in^2 / s^2), b = sum(w_out^2 / s^2))``, and one
    slice-sampling update of ``log u`` from ``u = 1`` leaves the posterior invariant.

    The gradient ``g0`` of the log density at ``q0`` is carried along exactly: the
    likelihood's part of it scales by ``1 / c`` (incoming) and ``c`` (outgoing), the prior's
    is recomputed, so the move needs no pass over the data. Returns the change of the log
    prior, which is the change of the log density. Other activations have no such
    symmetry; the driver does not call the move for them.
    """
    sizes, offsets, prior_std = tgt.sizes, tgt.offsets, tgt.prior_scale
    dlp = 0.0
    for layer in range(sizes.shape[0] - 2):
        fan_in = sizes[layer]
        h = sizes[layer + 1]
        k = sizes[layer + 2]
        w_in = offsets[layer]
        b_in = w_in + fan_in * h
        w_out = offsets[layer + 1]
        lam = 0.5 * (fan_in + 1 - k)
        for j in range(h):
            a = 0.0
            for i in range(fan_in + 1):
                idx = w_in + i * h + j if i < fan_in else b_in + j
                v = q0[idx] / prior_std[idx]
                a += v * v
            b = 0.0
            for o in range(k):
                v = q0[w_out + j * k + o] / prior_std[w_out + j * k + o]
                b += v * v
            width = _slice_width(lam, a, b)
            if not (width > 0.0 and width < np.inf):
                # a or b zero, infinite or NaN, or their product out of range: no move
                continue
            c = math.exp(0.5 * _slice_log_gig(rng, 0.0, lam, a, b, width))
            dlp -= 0.5 * ((c * c - 1.0) * a + (1.0 / (c * c) - 1.0) * b)
            for i in range(fan_in + 1):
                idx = w_in + i * h + j if i < fan_in else b_in + j
                s2 = prior_std[idx] * prior_std[idx]
                g_lik = g0[idx] + q0[idx] / s2
                q0[idx] *= c
                g0[idx] = g_lik / c - q0[idx] / s2
            for o in range(k):
                idx = w_out + j * k + o
                s2 = prior_std[idx] * prior_std[idx]
                g_lik = g0[idx] + q0[idx] / s2
                q0[idx] /= c
                g0[idx] = g_lik * c - q0[idx] / s2
    return dlp


@njit(cache=True, nogil=True, error_model="numpy")
def _cholesky_inplace(a):
    # lower Cholesky factor in the lower triangle of a (upper triangle zeroed); a is a small
    # symmetric positive definite matrix, so plain loops beat a LAPACK call's compile time
    m = a.shape[0]
    for j in range(m):
        acc = a[j, j]
        for p in range(j):
            acc -= a[j, p] * a[j, p]
        a[j, j] = math.sqrt(acc)
        for i in range(j + 1, m):
            acc = a[i, j]
            for p in range(j):
                acc -= a[i, p] * a[j, p]
            a[i, j] = acc / a[j, j]
        for i in range(j):
            a[i, j] = 0.0


@njit(cache=True, nogil=True, error_model="numpy")
def _after_transition(
    rng, it, n_warmup, sched, q0, g0, st0, sc, w_mean, w_m2, cfg_f, cfg_i, tgt, ws, draws,
    trace, taus, lp, depth, n_leap, acc, div, energy, eps,
):  # fmt: skip
    # What follows every transition: the noise's Gibbs step, then warm-up adaptation (dual
    # averaging, Welford sums) or recording of the kept draw.
    sc[0] = lp
    sc[7] += n_leap
    # a random walk (adaptive Metropolis) has no step size and never reads the gradient, so
    # the log density after a Gibbs step is evaluated without it (an empty gradient array)
    walk = cfg_i[0] == 3
    g_new = g0[:0] if walk else g0
    if cfg_i[6] != 0:
        dlp = rescale_units(rng, q0, g0, tgt)
        sc[0] += dlp
        st0[1] += dlp
    if tgt.cfg[0].hierarchical != 0:
        dlp = gibbs_prior_precision(rng, q0, g0, tgt)
        sc[0] += dlp
        st0[1] += dlp
    if cfg_i[3] == 2:
        # marginalized noise: the density does not depend on tau, so drawing it from its
        # conditional needs no new gradient; it completes the joint draw (and the output
        # layer's conditional below needs it)
        _gibbs_noise(rng, tgt, st0)
    if cfg_i[5] != 0:
        _gibbs_output_layer(rng, q0, tgt, ws)
        sc[0] = _logp_and_grad(q0, tgt, ws, g_new, st0)
        sc[7] += 1
    if cfg_i[3] == 1:
        _gibbs_noise(rng, tgt, st0)
        sc[0] = _logp_and_grad(q0, tgt, ws, g_new, st0)
        sc[7] += 1
    elif cfg_i[3] == 2 and cfg_i[5] != 0:
        # the output layer moved, so the drawn tau is stale relative to the new residuals
        _gibbs_noise(rng, tgt, st0)
    if it < n_warmup:
        if div:
            sc[8] += 1
        if not walk:
            # dual averaging of the log step size towards target_accept
            sc[5] += 1.0
            m = sc[5]
            eta = 1.0 / (m + _DA_T0)
            sc[3] = (1.0 - eta) * sc[3] + eta * (cfg_f[0] - min(1.0, acc))
            x = sc[4] - sc[3] * math.sqrt(m) / _DA_GAMMA
            x_eta = m ** (-_DA_KAPPA)
            sc[2] = x_eta * x + (1.0 - x_eta) * sc[2]
            sc[1] = math.exp(x)
        if sched[it, 0]:
            _welford(q0, g0, w_mean, w_m2, sc, cfg_i[4] != 0)
        if it == n_warmup - 1 and sc[5] > 0:
            sc[1] = math.exp(sc[2])
    else:
        # every thin-th state is kept; acceptance, steps and divergences of the thin
        # transitions that lead to it are summed into its row, so none goes uncounted
        thin = cfg_i[7]
        k = it - n_warmup
        j = k // thin
        if k % thin == 0:
            trace[j, 1] = 0.0
            trace[j, 2] = 0.0
            trace[j, 4] = 0.0
        trace[j, 1] += acc / thin
        trace[j, 2] += n_leap
        trace[j, 4] += 1.0 if div else 0.0
        if k % thin == thin - 1:
            _copy(draws[j], q0)
            trace[j, 0] = st0[0]
            if cfg_i[3] == 2:
                # the log-likelihood at the drawn noise, not at its conditional mean
                trace[j, 0] = _gaussian_loglik(tgt, st0)
            trace[j, 3] = depth
            trace[j, 5] = eps
            trace[j, 6] = energy
            k = tgt.tau.shape[0]
            for o in range(k):
                taus[j, o] = tgt.tau[o]
            # a hierarchical prior's precisions follow the noise's, one per layer
            sizes, offsets, prior_std = tgt.sizes, tgt.offsets, tgt.prior_scale
            for layer in range(taus.shape[1] - k):
                c = 1.0 / math.sqrt(sizes[layer]) if tgt.cfg[0].fan_in != 0.0 else 1.0
                s = prior_std[offsets[layer]]
                taus[j, k + layer] = (c / s) ** 2


@njit(cache=True, nogil=True, error_model="numpy")
def _workspace(tgt, d, max_depth):
    k = tgt.tau.shape[0]
    ws = np.empty(workspace_size(tgt.sizes, n_rows(tgt)))
    return ws, np.zeros((22, d)), np.empty((5, max_depth + 1, d)), np.empty(2 + k), np.empty(2 + k)


@njit(cache=True, nogil=True, error_model="numpy")
def run_nuts_block(rng, it_start, it_stop, n_warmup, sched, q0, g0, st0, metric, w_mean, w_m2, sc,
                   cfg_f, cfg_i, tgt, draws, trace, taus):  # fmt: skip
    """Run NUTS iterations ``[it_start, it_stop)`` of one chain.

    ``sc[0]``, ``g0`` and ``st0`` must hold the log density, gradient and stats at ``q0``.
    ``metric = (inv_m, sigma, chol)``; with a diagonal metric ``sigma`` and ``chol`` are
    unused and ``w_m2`` holds the Welford sums of squares of the draws, the gradients' mean
    and their sums of squares in its three rows, with a dense one the (d, d) cross products.
    ``sched[it] = (in_window, end_window)`` for
    warm-up iterations; the driver updates the metric at window ends between blocks. Kept
    draws go to row ``it - n_warmup`` of ``draws``, ``trace`` and ``taus``.
    """
    max_depth = cfg_i[1]
    dense = cfg_i[4] != 0
    ws, buf, ckpt, st, st_sub = _workspace(tgt, q0.shape[0], max_depth)
    for it in range(it_start, it_stop):
        eps = sc[1]
        lp, depth, n_leap, acc, div, energy = _nuts(
            rng, q0, g0, st0, sc[0], eps, metric, dense, max_depth, cfg_f[3], tgt, ws, buf, ckpt,
            st, st_sub,
        )  # fmt: skip
        _after_transition(
            rng, it, n_warmup, sched, q0, g0, st0, sc, w_mean, w_m2, cfg_f, cfg_i, tgt, ws,
            draws, trace, taus, lp, depth, n_leap, acc, div, energy, eps,
        )  # fmt: skip
    return it_stop


@njit(cache=True, nogil=True, error_model="numpy")
def run_hmc_block(rng, it_start, it_stop, n_warmup, sched, q0, g0, st0, metric, w_mean, w_m2, sc,
                  cfg_f, cfg_i, tgt, draws, trace, taus):  # fmt: skip
    """Run static-HMC iterations ``[it_start, it_stop)`` of one chain (see run_nuts_block)."""
    dense = cfg_i[4] != 0
    ws, buf, ckpt, st, st_sub = _workspace(tgt, q0.shape[0], 0)
    for it in range(it_start, it_stop):
        eps = sc[1]
        lp, depth, n_leap, acc, div, energy = _hmc(
            rng, q0, g0, st0, sc[0], eps, metric, dense, cfg_f[1], cfg_f[2], cfg_i[2], cfg_f[3],
            tgt, ws, buf, st,
        )  # fmt: skip
        _after_transition(
            rng, it, n_warmup, sched, q0, g0, st0, sc, w_mean, w_m2, cfg_f, cfg_i, tgt, ws,
            draws, trace, taus, lp, depth, n_leap, acc, div, energy, eps,
        )  # fmt: skip
    return it_stop


@njit(cache=True, nogil=True, error_model="numpy")
def run_mala_block(rng, it_start, it_stop, n_warmup, sched, q0, g0, st0, metric, w_mean, w_m2,
                   sc, cfg_f, cfg_i, tgt, draws, trace, taus):  # fmt: skip
    """Run MALA iterations ``[it_start, it_stop)`` of one chain (see run_nuts_block)."""
    dense = cfg_i[4] != 0
    ws, buf, ckpt, st, st_sub = _workspace(tgt, q0.shape[0], 0)
    for it in range(it_start, it_stop):
        eps = sc[1]
        lp, depth, n_leap, acc, div, energy = _mala(
            rng, q0, g0, st0, sc[0], eps, metric, dense, cfg_f[3], tgt, ws, buf, st
        )
        _after_transition(
            rng, it, n_warmup, sched, q0, g0, st0, sc, w_mean, w_m2, cfg_f, cfg_i, tgt, ws,
            draws, trace, taus, lp, depth, n_leap, acc, div, energy, eps,
        )  # fmt: skip
    return it_stop


@njit(cache=True, nogil=True, error_model="numpy")
def _random_walk(rng, q0, g0, st0, lp0, metric, dense, tgt, ws, buf, st):
    """One random-walk Metropolis step with proposal ``N(q, Sigma)``.

    ``Sigma`` is ``metric[1]`` with Cholesky factor ``metric[2]`` (dense) or the diagonal
    ``metric[0]``. The log density is evaluated without its gradient; ``g0`` is left as it
    is (nothing downstream of a random walk reads it).
    """
    q = buf[0]
    _metric_normal(rng, metric, dense, buf[1], q)
    for i in range(q0.shape[0]):
        q[i] += q0[i]
    lp = logp_grad(q, tgt, ws, buf[2][:0], st, False)
    log_ratio = lp - lp0 if lp == lp else -np.inf
    acc = 1.0 if log_ratio >= 0.0 else math.exp(log_ratio)
    if rng.random() < acc:
        _copy(q0, q)
        _copy(st0, st)
        return lp, 0, 1, acc, False, np.nan
    return lp0, 0, 1, acc, False, np.nan


@njit(cache=True, nogil=True, error_model="numpy")
def _am_refresh(metric, dense, w_m2, count, scale, jitter):
    # Sigma = scale * (C + jitter I) from the running covariance C, and its Cholesky factor
    inv_m, sigma, chol = metric
    d = inv_m.shape[0]
    if dense:
        for i in range(d):
            for j in range(d):
                c = w_m2[i, j] / (count - 1.0)
                sigma[i, j] = scale * (c + (jitter if i == j else 0.0))
                chol[i, j] = sigma[i, j]
            inv_m[i] = sigma[i, i]
        _cholesky_inplace(chol)
    else:
        for i in range(d):
            inv_m[i] = scale * (w_m2[0, i] / (count - 1.0) + jitter)


@njit(cache=True, nogil=True, error_model="numpy")
def run_am_block(rng, it_start, it_stop, n_warmup, sched, q0, g0, st0, metric, w_mean, w_m2, sc,
                 cfg_f, cfg_i, tgt, draws, trace, taus):  # fmt: skip
    """Run adaptive-Metropolis iterations ``[it_start, it_stop)`` of one chain (Haario et al.
    2001; see run_nuts_block for the arguments).

    ``w_mean`` / ``w_m2`` hold the chain's running mean and covariance sums over every
    iteration from ``t0 / 2`` on (Welford, O(d^2) per step when dense). From iteration
    ``t0 = cfg_i[1]`` on, every ``t_adapt = cfg_i[2]`` iterations the proposal becomes
    ``(gamma 2.4^2 / d) (C_t + 1e-8 I)`` with ``gamma = cfg_f[1]``. Before that it is the
    same scaling of the initial ``metric`` (the prior variances).
    """
    dense = cfg_i[4] != 0
    d = q0.shape[0]
    t0 = cfg_i[1]
    t_adapt = cfg_i[2]
    scale = cfg_f[1] * 2.4 * 2.4 / d
    ws, buf, ckpt, st, st_sub = _workspace(tgt, d, 0)
    if it_start == 0:
        inv_m, sigma, chol = metric
        for i in range(d):
            inv_m[i] *= scale
        if dense:
            for i in range(d):
                for j in range(d):
                    sigma[i, j] *= scale
                    chol[i, j] *= math.sqrt(scale)
    for it in range(it_start, it_stop):
        lp, depth, n_leap, acc, div, energy = _random_walk(
            rng, q0, g0, st0, sc[0], metric, dense, tgt, ws, buf, st
        )
        _after_transition(
            rng, it, n_warmup, sched, q0, g0, st0, sc, w_mean, w_m2, cfg_f, cfg_i, tgt, ws,
            draws, trace, taus, lp, depth, n_leap, acc, div, energy, 0.0,
        )  # fmt: skip
        if it >= t0 // 2:
            # the first t0 / 2 steps climb from the prior start; a covariance that kept them
            # would be inflated by that transient for thousands of steps
            _welford(q0, g0, w_mean, w_m2, sc, dense)
        done = it + 1
        if done >= t0 and (done - t0) % t_adapt == 0 and sc[6] > 1.0:
            _am_refresh(metric, dense, w_m2, sc[6], scale, 1e-8)
    return it_stop


@njit(cache=True, nogil=True, error_model="numpy")
def _welford(q, g, w_mean, w_m2, sc, dense):
    # Running means and (co)variances of the draws and, for a diagonal metric, also of the
    # gradients (rows of w_m2: draws' sums of squares, gradients' mean, their sums of squares)
    sc[6] += 1.0
    c = sc[6]
    d = q.shape[0]
    delta = np.empty(d)
    for i in range(d):
        delta[i] = q[i] - w_mean[i]
        w_mean[i] += delta[i] / c
    if dense:
        for i in range(d):
            di = delta[i]
            row = w_m2[i]
            for j in range(d):
                row[j] += di * (q[j] - w_mean[j])
    else:
        m2 = w_m2[0]
        g_mean = w_m2[1]
        g_m2 = w_m2[2]
        for i in range(d):
            m2[i] += delta[i] * (q[i] - w_mean[i])
            dg = g[i] - g_mean[i]
            g_mean[i] += dg / c
            g_m2[i] += dg * (g[i] - g_mean[i])
