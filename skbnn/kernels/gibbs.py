"""Exact Gibbs moves between a chain's transitions: the noise precisions, a hierarchical
prior's layer precisions, the output layer of a Gaussian-likelihood network, and the scale
of ReLU units along their exact symmetry (with its slice sampler of a generalized inverse
Gaussian).

Each move draws from a full conditional (or leaves the posterior invariant by a generalized
Gibbs step), so it needs no accept/reject step; the moves that change the log density
return its change, or update the chain's gradient exactly, so the next transition starts
from a consistent state. ``st0`` is a point's vector of log-density terms ``[loglik,
logprior, ssr_0, ...]`` (see :func:`skbnn.kernels.density.logp_grad`).
"""

import math

import numpy as np

from ._compile import njit
from .density import n_rows, weight_sum
from .layers import forward
from .linalg import cholesky_inplace


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def gibbs_noise(rng, tgt, st0):
    """Draw each output's noise precision into ``tgt.tau`` from its conjugate conditional.

    ``Gamma(a + beta n / 2, b + beta SSR / 2)`` with the residual sums of squares in
    ``st0`` (Neal 1996), so the noise never enters the leapfrog integrator; ``n`` and the
    SSR count rows by their weights.
    """
    tau = tgt.tau
    n = weight_sum(tgt)
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


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
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
def gibbs_output_layer(rng, q0, tgt, ws):
    """Draw the output layer's weights and biases from their exact conditional.

    Given the hidden layers, a Gaussian likelihood is linear in the output layer, whose
    Gaussian prior makes the conditional of each output's weights and bias Gaussian:
    precision ``A = beta tau Phi^T Phi + diag(1 / s^2)`` and mean ``A^-1 beta tau Phi^T y``
    with ``Phi = [H, 1]`` the last hidden layer's activations, each row's terms multiplied
    by its weight. Drawing it exactly between
    trajectories removes the directions along which small noise makes the posterior
    narrowest (collinear hidden units), which the leapfrog integrator handles worst.
    """
    # by name: the samplers pass a DensityTarget, which has one field more
    XT, YT, W, sizes, offsets = tgt.XT, tgt.YT, tgt.W, tgt.sizes, tgt.offsets
    prior_std, tau, cfgs = tgt.prior_scale, tgt.tau, tgt.cfg
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
                acc += W[t] * fi * fj
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
                acc += W[t] * fi * YT[o * n + t]
            rhs[i] = prec * acc
            for j in range(m):
                chol[i, j] = prec * gram[i, j]
            s = prior_std[w_start + i * k + o] if i < h else prior_std[b_start + o]
            chol[i, i] += 1.0 / (s * s)
        cholesky_inplace(chol)
        usable = True
        for i in range(m):
            if not (chol[i, i] > 0.0 and chol[i, i] < math.inf):
                usable = False
        if not usable:
            # A is too ill-conditioned to factor (a tiny fixed noise with fewer rows than
            # output weights): this output keeps its weights. Whether it moves depends on
            # the hidden layers only, which the move leaves unchanged, so the target stays
            # invariant.
            continue
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


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _log_gig_t(t, lam, a, b):
    # log-density of t = log u when u ~ GIG(lam, a, b) (density u^(lam-1) e^(-(a u + b/u)/2)),
    # the Jacobian du = u dt included
    return lam * t - 0.5 * (a * math.exp(t) + b * math.exp(-t))


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _slice_width(lam, a, b):
    # sd of t at its mode log u*, u* the positive root of a u^2 - 2 lam u - b (written to
    # avoid cancellation whichever the sign of lam); 0 or inf when a, b are degenerate
    root = math.sqrt(lam * lam + a * b)
    u = (lam + root) / a if lam >= 0.0 else b / (root - lam)
    return math.sqrt(2.0 / (a * u + b / u))


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
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
