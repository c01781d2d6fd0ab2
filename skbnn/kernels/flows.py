"""Normalizing flows over the multiplicative latent variables of LBBNN's flow family.

Every weight layer with ``d`` inputs has a latent vector ``z`` of length ``d`` that scales
the slab means of each input's weights (Louizos and Welling 2017; Skaaret-Lund et al.
2024). ``z`` is a Gaussian ``z0 = m0 + softplus(r0) eps`` pushed through ``K`` gated
inverse autoregressive steps (Kingma et al. 2016)::

    h = tanh(W1 z + b1),  m = Wm h + bm,  s = sigmoid(Ws h + bs),  z' = s z + (1 - s) m

with ``W1``, ``Wm`` and ``Ws`` masked as in MADE (Germain et al. 2015) so that ``m_i`` and
``s_i`` depend on the inputs before ``i`` in the step's order: the Jacobian is triangular
and ``log |det| = sum_i log s_i``. The order alternates between steps (natural, then
reversed), so every coordinate can depend on every other after two steps.

The bound needs an auxiliary density ``r(z | W)``: the same flow architecture with its own
parameters, applied to ``z``, and a Gaussian base whose moments depend on the weights
(:func:`log_r`). :func:`skbnn.kernels.lbbnn.lbbnn_flow_term` assembles the family's ELBO.

Layout of one layer's block of the flow parameters, of ``flow_block_size(d, h, K)``
entries: ``m0, r0, e, d1, d2, d0, v0`` (``d`` each), then the ``K`` steps of ``q`` and the
``K`` steps of ``r``, each ``W1 (h x d), b1 (h), Wm (d x h), bm (d), Ws (d x h), bs (d)``.
"""

import math

import numpy as np

from ._compile import _FM, njit
from ._libm import _LOG_2PI

#: Entries of one layer's base block (``m0, r0, e, d1, d2, d0, v0``), in units of ``d``.
BASE_VECTORS = 7


@njit(cache=True, nogil=True, error_model="numpy")
def step_size(d, h):
    """Parameters of one flow step on ``d`` coordinates with ``h`` hidden units."""
    return 3 * h * d + h + 2 * d


@njit(cache=True, nogil=True, error_model="numpy")
def flow_block_size(d, h, n_steps):
    """Parameters of one layer's block: the base vectors and ``2 n_steps`` steps."""
    return BASE_VECTORS * d + 2 * n_steps * step_size(d, h)


@njit(cache=True, nogil=True, error_model="numpy")
def step_cache_size(d, h):
    """Scratch entries one step keeps for the backward pass: its input, ``h``, ``m``, ``s``."""
    return 3 * d + h


@njit(cache=True, nogil=True, error_model="numpy")
def flow_layout(sizes, h, n_steps):
    """Per weight layer, the start of its block in the flow parameters and of its scratch in
    the flow cache; the last row holds the totals.

    The cache starts with ``h + d`` entries of the widest layer, the backward passes'
    scratch. A layer's own scratch: ``eps`` and ``z_K`` (``d`` each), the ``q`` steps'
    caches, ``z_B`` (``r``'s flow output), the ``r`` steps' caches, ``3 n_out + 1`` entries
    for ``r``'s summary of the weights (padded to ``4 n_out``), and two gradient buffers
    of ``d``."""
    n_layers = sizes.shape[0] - 1
    out = np.zeros((n_layers + 1, 2), np.int64)
    widest = 0
    for layer in range(n_layers):
        widest = max(widest, sizes[layer])
    out[0, 1] = h + widest
    for layer in range(n_layers):
        d = sizes[layer]
        out[layer + 1, 0] = out[layer, 0] + flow_block_size(d, h, n_steps)
        scratch = 5 * d + 2 * n_steps * step_cache_size(d, h) + 4 * sizes[layer + 1]
        out[layer + 1, 1] = out[layer, 1] + scratch
    return out


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _deg_in(i, d, k):
    # MADE degree of coordinate i in step k: natural order in even steps, reversed in odd
    return i + 1 if k % 2 == 0 else d - i


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _deg_hidden(u, d):
    return u % max(d - 1, 1) + 1


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _log_sigmoid(x):
    if x >= 0.0:
        return -math.log1p(math.exp(-x))
    return x - math.log1p(math.exp(x))


@njit(cache=True, nogil=True, error_model="numpy")
def flow_forward(params, base, d, h, n_steps, z, cache, cbase):
    """Apply ``n_steps`` steps (parameters from ``params[base]``) to ``z`` in place, keeping
    what :func:`flow_backward` needs in ``cache[cbase:]``; returns ``sum log |det|``."""
    ssize = step_size(d, h)
    csize = step_cache_size(d, h)
    logdet = 0.0
    for k in range(n_steps):
        w1 = base + k * ssize
        b1 = w1 + h * d
        wm = b1 + h
        bm = wm + d * h
        ws = bm + d
        bs = ws + d * h
        c = cbase + k * csize
        for i in range(d):
            cache[c + i] = z[i]
        hid = c + d
        for u in range(h):
            hu = _deg_hidden(u, d)
            acc = params[b1 + u]
            for i in range(d):
                if hu >= _deg_in(i, d, k):
                    acc += params[w1 + u * d + i] * z[i]
            cache[hid + u] = math.tanh(acc)
        mo = hid + h
        so = mo + d
        for i in range(d):
            di = _deg_in(i, d, k)
            am = params[bm + i]
            a_s = params[bs + i]
            for u in range(h):
                if di > _deg_hidden(u, d):
                    hv = cache[hid + u]
                    am += params[wm + i * h + u] * hv
                    a_s += params[ws + i * h + u] * hv
            cache[mo + i] = am
            s = 1.0 / (1.0 + math.exp(-a_s))
            cache[so + i] = s
            logdet += _log_sigmoid(a_s)
        for i in range(d):
            s = cache[so + i]
            z[i] = s * z[i] + (1.0 - s) * cache[mo + i]
    return logdet


@njit(cache=True, nogil=True, error_model="numpy")
def flow_backward(params, base, d, h, n_steps, gz, c_logdet, cache, cbase, gparams, scratch):
    """Backpropagate through :func:`flow_forward`: ``gz`` holds the objective's gradient in
    the output and is replaced by that in the input; ``c_logdet`` is the objective's
    derivative in ``log |det|``. Adds the gradient in the steps' parameters to
    ``gparams[base:]``. ``scratch`` has at least ``h + d`` entries."""
    ssize = step_size(d, h)
    csize = step_cache_size(d, h)
    gh = scratch[:h]
    gnew = scratch[h : h + d]
    for k in range(n_steps - 1, -1, -1):
        w1 = base + k * ssize
        b1 = w1 + h * d
        wm = b1 + h
        bm = wm + d * h
        ws = bm + d
        bs = ws + d * h
        c = cbase + k * csize
        hid = c + d
        mo = hid + h
        so = mo + d
        for u in range(h):
            gh[u] = 0.0
        for i in range(d):
            g = gz[i]
            s = cache[so + i]
            gm = g * (1.0 - s)
            # d z' / d a_s = (z - m) s (1 - s); d log s / d a_s = 1 - s
            gas = (g * (cache[c + i] - cache[mo + i]) * s + c_logdet) * (1.0 - s)
            gparams[bm + i] += gm
            gparams[bs + i] += gas
            di = _deg_in(i, d, k)
            for u in range(h):
                if di > _deg_hidden(u, d):
                    hv = cache[hid + u]
                    gparams[wm + i * h + u] += gm * hv
                    gparams[ws + i * h + u] += gas * hv
                    gh[u] += params[wm + i * h + u] * gm + params[ws + i * h + u] * gas
            gnew[i] = g * s
        for u in range(h):
            hv = cache[hid + u]
            ga = gh[u] * (1.0 - hv * hv)
            gparams[b1 + u] += ga
            hu = _deg_hidden(u, d)
            for i in range(d):
                if hu >= _deg_in(i, d, k):
                    gparams[w1 + u * d + i] += ga * cache[c + i]
                    gnew[i] += params[w1 + u * d + i] * ga
        for i in range(d):
            gz[i] = gnew[i]


@njit(cache=True, nogil=True, error_model="numpy")
def latent_draws(flow, sizes, h, n_steps, eps):
    """Draws of every layer's ``z_K`` from standard normals ``eps`` of shape ``(n,
    sum(sizes[:-1]))``: the flow of ``q`` applied to ``m0 + softplus(r0) eps``, per draw.
    Returns the draws, shaped as ``eps``, and ``log q(z_K)`` of each, shape ``(n,)``."""
    n = eps.shape[0]
    lay = flow_layout(sizes, h, n_steps)
    n_layers = sizes.shape[0] - 1
    out = np.empty_like(eps)
    logq = np.zeros(n)
    widest = 0
    for layer in range(n_layers):
        widest = max(widest, sizes[layer])
    cache = np.empty(n_steps * step_cache_size(widest, h))
    z = np.empty(widest)
    for s in range(n):
        col = 0
        for layer in range(n_layers):
            d = sizes[layer]
            pb = lay[layer, 0]
            for i in range(d):
                e = eps[s, col + i]
                sd = _softplus(flow[pb + d + i])
                z[i] = flow[pb + i] + sd * e
                logq[s] -= 0.5 * e * e + math.log(sd) + 0.5 * _LOG_2PI
            zd = z[:d]
            logq[s] -= flow_forward(flow, pb + BASE_VECTORS * d, d, h, n_steps, zd, cache, 0)
            for i in range(d):
                out[s, col + i] = z[i]
            col += d
    return out, logq


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _softplus(x):
    if x > 0.0:
        return x + math.log1p(math.exp(-x))
    return math.log1p(math.exp(x))


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _r_offsets(p, sizes, layer, hid, n_steps, lay):
    # where layer's r parameters and scratch start: e, d1, d2, d0, v0, r's steps; r's flow
    # cache, its summary of the weights and the two gradient buffers
    d = sizes[layer]
    pb = 3 * p + lay[layer, 0]
    rsteps = pb + BASE_VECTORS * d + n_steps * step_size(d, hid)
    qe = lay[layer, 1] + 2 * d + n_steps * step_cache_size(d, hid)
    re = qe + d + n_steps * step_cache_size(d, hid)
    return pb, rsteps, qe, re


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def log_r(vparams, p, sizes, offsets, layer, hid, n_steps, meff, var, work, rng):
    """``log r(z_K | W)`` of one layer, the flow family's auxiliary density: ``r``'s flow
    applied to the layer's ``z_K`` (in ``work.fcache``), then the Gaussian with mean ``d0 +
    d1 nu`` and log variance ``v0 + d2 nu``, ``nu`` the mean over the layer's outputs of
    ``tanh(sum_i e_i W_ij)``, the sum drawn from the Gaussian of its moments ``meff``,
    ``var`` under ``q(W | z)``. The flow parameters start at ``vparams[3 p]``; keeps what
    :func:`log_r_grad` needs."""
    d = sizes[layer]
    n_out = sizes[layer + 1]
    fc = work.fcache
    pb, rsteps, qe, re = _r_offsets(p, sizes, layer, hid, n_steps, work.flay)
    cb = work.flay[layer, 1]
    zb = fc[qe : qe + d]
    for i in range(d):
        zb[i] = fc[cb + d + i]
    value = flow_forward(vparams, rsteps, d, hid, n_steps, zb, fc, qe + d)
    w_start = offsets[layer]
    # the sums over i of e_i W_ij's moments, a row of the weights at a time (the weights
    # are row-major, so a column at a time would miss cache at every weight), in nu's and
    # sd's slots; each sum adds its terms in the order of i, as a column at a time would
    ms = fc[re + 2 * n_out : re + 3 * n_out]
    vs = fc[re : re + n_out]
    for j in range(n_out):
        ms[j] = 0.0
        vs[j] = 0.0
    for i in range(d):
        ei = vparams[pb + 2 * d + i]
        e2 = ei * ei
        row = w_start + i * n_out
        mr = meff[row : row + n_out]
        vr = var[row : row + n_out]
        for j in range(n_out):
            ms[j] += ei * mr[j]
            vs[j] += e2 * vr[j]
    nubar = 0.0
    for j in range(n_out):
        sdv = math.sqrt(vs[j])
        xi = rng.standard_normal()
        nu = math.tanh(ms[j] + sdv * xi)
        fc[re + j] = sdv
        fc[re + n_out + j] = xi
        fc[re + 2 * n_out + j] = nu
        nubar += nu
    nubar /= n_out
    fc[re + 3 * n_out] = nubar
    for i in range(d):
        mu = vparams[pb + 5 * d + i] + vparams[pb + 3 * d + i] * nubar
        lv = vparams[pb + 6 * d + i] + vparams[pb + 4 * d + i] * nubar
        diff = zb[i] - mu
        value -= 0.5 * (_LOG_2PI + lv + diff * diff * math.exp(-lv))
    return value


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def log_r_grad(vparams, p, sizes, offsets, layer, hid, n_steps, meff, var, gm, gv, work,
               scale, shared):  # fmt: skip
    """The gradient of :func:`log_r`: in ``r``'s parameters (times ``scale``) to
    ``work.glam``, in the weights' moments (unscaled) to ``gm`` and ``gv``, in ``z_K``
    (times ``scale``) to the layer's first gradient buffer, which it sets."""
    d = sizes[layer]
    n_out = sizes[layer + 1]
    fc = work.fcache
    glam = work.glam
    pb, rsteps, qe, re = _r_offsets(p, sizes, layer, hid, n_steps, work.flay)
    end = work.flay[layer + 1, 1]
    gz = fc[end - 2 * d : end - d]
    zb = fc[qe : qe + d]
    nubar = fc[re + 3 * n_out]
    gnu = 0.0
    for i in range(d):
        mu = vparams[pb + 5 * d + i] + vparams[pb + 3 * d + i] * nubar
        lv = vparams[pb + 6 * d + i] + vparams[pb + 4 * d + i] * nubar
        prec = math.exp(-lv)
        diff = zb[i] - mu
        g_mu = diff * prec
        g_lv = 0.5 * (diff * diff * prec - 1.0)
        glam[pb + 5 * d + i] += scale * g_mu
        glam[pb + 3 * d + i] += scale * g_mu * nubar
        glam[pb + 6 * d + i] += scale * g_lv
        glam[pb + 4 * d + i] += scale * g_lv * nubar
        gnu += g_mu * vparams[pb + 3 * d + i] + g_lv * vparams[pb + 4 * d + i]
        gz[i] = -scale * g_mu
    flow_backward(vparams, rsteps, d, hid, n_steps, gz, scale, fc, qe + d, glam, shared)
    w_start = offsets[layer]
    # per output j, the gradient in its sum's mean and variance, over nu's and sd's slots
    # (log_r's summary is spent here); then the weights a row at a time, as in log_r
    ga = fc[re + 2 * n_out : re + 3 * n_out]
    gvs = fc[re : re + n_out]
    for j in range(n_out):
        sdv = gvs[j]
        xi = fc[re + n_out + j]
        nu = ga[j]
        g = gnu / n_out * (1.0 - nu * nu)
        ga[j] = g
        # d (m + sd xi) / d v = xi / (2 sd)
        gvs[j] = 0.5 * g * xi / sdv if sdv > 0.0 else 0.0
    for i in range(d):
        # one loop over the row, its sum reassociated (_FM): without, the sum kept the loop
        # scalar, and two loops read the row twice
        ei = vparams[pb + 2 * d + i]
        e2 = ei * ei
        row = w_start + i * n_out
        gmr = gm[row : row + n_out]
        gvr = gv[row : row + n_out]
        mr = meff[row : row + n_out]
        vr = var[row : row + n_out]
        acc = 0.0
        for j in range(n_out):
            a = ga[j]
            b = gvs[j]
            gmr[j] += a * ei
            gvr[j] += b * e2
            acc += a * mr[j] + 2.0 * b * ei * vr[j]
        glam[pb + 2 * d + i] += scale * acc
