"""Numba kernels of the training engine: one epoch of minibatch optimization.

An epoch visits the member's training rows in the order of a permutation drawn by the
Python driver, gathers each minibatch into small feature-major buffers (``O(batch x
features)``, never a copy of X), evaluates the log density of the batch with the
likelihood scaled by ``n / batch`` (:func:`skbnn.kernels.density.logp_grad` with ``beta``
set to that ratio) and takes one optimizer step on the per-row loss
``-(n / B * loglik_batch + logprior) / n_w``, with ``n_w`` the sum of the training rows'
weights (``n`` without weights), so a row of weight 2 counts as two rows. SWAG's moments
are collected in the same loop.

The state is held in named tuples so the kernels read fields by name:

``Batches(XT, YT, W, rows, xb, yb, wb)``
    The full feature-major data and row weights, the permuted training rows of this epoch,
    and the three minibatch buffers.
``Optimizer(cfg, m1, m2)``
    ``cfg`` is a one-element record of dtype :data:`OPTIMIZER` (``kind`` 0 Adam, 1 SGD
    with momentum, 2 preconditioned SGHMC; ``beta1``, ``beta2``, ``epsilon``,
    ``momentum``, ``nesterov``, and the step count ``t``); ``m1`` and ``m2`` are Adam's
    moment estimates (``m1`` is SGD's and SGHMC's velocity, ``m2[0]`` SGHMC's mean
    square gradient).
``Moments(cfg, mean, sq_mean, dev)``
    SWAG's running first and second moments and its ring buffer of the last ``rank``
    deviations, fed at the steps an epoch's ``keep`` flags; ``cfg`` of dtype
    :data:`MOMENTS` holds ``n`` (snapshots taken) and ``raw``: when 1, the ring buffer
    keeps the parameters themselves and no moments (the sampler's draws; ``mean`` and
    ``sq_mean`` may then be empty).
"""

import math
from collections import namedtuple

import numpy as np

from ._compile import njit, record
from .density import KernelTarget, n_rows

Batches = namedtuple("Batches", ["XT", "YT", "W", "rows", "xb", "yb", "wb"])
Optimizer = namedtuple("Optimizer", ["cfg", "m1", "m2"])
Moments = namedtuple("Moments", ["cfg", "mean", "sq_mean", "dev"])

OPTIMIZER = record(
    [
        ("kind", np.int64),
        ("t", np.int64),
        ("nesterov", np.int64),
        ("beta1", np.float64),
        ("beta2", np.float64),
        ("epsilon", np.float64),
        ("momentum", np.float64),
    ],
    align=True,
)

MOMENTS = record(
    [("raw", np.int64), ("n", np.int64)],
    align=True,
)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def rows_weight(data):
    """The summed row weights of ``data.rows``: an epoch's loss is per unit of it."""
    n_w = 0.0
    for i in range(data.rows.shape[0]):
        n_w += data.W[data.rows[i]]
    return n_w


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def batch_target(tgt, data, i0, nb):
    """Rows ``data.rows[i0:i0 + nb]`` gathered into ``data``'s batch buffers, and the
    :data:`~skbnn.kernels.density.KernelTarget` over them with ``tgt``'s network, prior,
    noise and ``cfg``."""
    n_all = n_rows(tgt)
    d = tgt.sizes[0]
    ky = tgt.YT.shape[0] // n_all
    _gather(data, i0, nb, d, ky, n_all)
    return KernelTarget(
        data.xb[: d * nb], data.yb[: ky * nb], data.wb[:nb], tgt.sizes, tgt.offsets,
        tgt.prior_mean, tgt.prior_scale, tgt.tau, tgt.cfg,
    )  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _gather(data, i0, nb, d, ky, n_all):
    # rows[i0:i0 + nb] of the feature-major data into the batch buffers
    XT, YT, W, rows, xb, yb, wb = data
    for j in range(d):
        src = XT[j * n_all : (j + 1) * n_all]
        dst = xb[j * nb : (j + 1) * nb]
        for t in range(nb):
            dst[t] = src[rows[i0 + t]]
    for o in range(ky):
        src = YT[o * n_all : (o + 1) * n_all]
        dst = yb[o * nb : (o + 1) * nb]
        for t in range(nb):
            dst[t] = src[rows[i0 + t]]
    for t in range(nb):
        wb[t] = W[rows[i0 + t]]


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _step(theta, g, scale, lr, sd, opt, rng):
    # one step on the loss whose gradient is scale * g (g the log density's gradient);
    # kind 2 is SGHMC (Chen et al. 2014), whose velocity is the momentum times the step
    # size: SGD with momentum plus N(0, sd^2 P) noise when sd > 0
    cfg = opt.cfg[0]
    cfg.t += 1
    m1 = opt.m1
    if cfg.kind == 0:
        m2 = opt.m2
        b1 = cfg.beta1
        b2 = cfg.beta2
        c1 = 1.0 - b1**cfg.t
        c2 = 1.0 - b2**cfg.t
        for i in range(theta.shape[0]):
            gi = scale * g[i]
            m1[i] = b1 * m1[i] + (1.0 - b1) * gi
            m2[i] = b2 * m2[i] + (1.0 - b2) * gi * gi
            theta[i] -= lr * (m1[i] / c1) / (math.sqrt(m2[i] / c2) + cfg.epsilon)
    elif cfg.kind == 2:
        # preconditioned by the scalar P = 1 / (sqrt(v) + epsilon), v the running mean of
        # the gradient's mean square (RMSprop's, over all parameters at once: one
        # parameter's own would let a dead unit's zero gradient blow up its steps), frozen
        # while noise is injected: a constant P is SGHMC in the coordinates theta / sqrt(P),
        # exact as the step size shrinks, and the step is invariant to the loss's scale
        b2 = cfg.beta2
        if sd == 0.0:
            gsq = 0.0
            for i in range(theta.shape[0]):
                gsq += (scale * g[i]) ** 2
            opt.m2[0] = b2 * opt.m2[0] + (1.0 - b2) * gsq / theta.shape[0]
        pc = 1.0 / (math.sqrt(opt.m2[0] / (1.0 - b2**cfg.t)) + cfg.epsilon)
        mu = cfg.momentum
        sdp = sd * math.sqrt(pc)
        for i in range(theta.shape[0]):
            m1[i] = mu * m1[i] - lr * pc * scale * g[i]
            if sd > 0.0:
                m1[i] += sdp * rng.standard_normal()
            theta[i] += m1[i]
    else:
        mu = cfg.momentum
        nesterov = cfg.nesterov != 0
        for i in range(theta.shape[0]):
            gi = scale * g[i]
            m1[i] = mu * m1[i] - lr * gi
            # Nesterov's look-ahead in the form scikit-learn's SGD uses
            theta[i] += mu * m1[i] - lr * gi if nesterov else m1[i]


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _collect(theta, mom):
    # SWAG: running moments, and the deviation from the updated mean into the ring buffer;
    # raw: the parameters themselves into it
    cfg = mom.cfg[0]
    cfg.n += 1
    rank = mom.dev.shape[0]
    if cfg.raw != 0:
        if rank > 0:
            mom.dev[(cfg.n - 1) % rank, :] = theta
        return
    w = 1.0 / cfg.n
    mean = mom.mean
    sq = mom.sq_mean
    for i in range(theta.shape[0]):
        mean[i] += w * (theta[i] - mean[i])
        sq[i] += w * (theta[i] * theta[i] - sq[i])
    if rank > 0:
        row = mom.dev[(cfg.n - 1) % rank]
        for i in range(theta.shape[0]):
            row[i] = theta[i] - mean[i]


@njit(cache=True, nogil=True, error_model="numpy")
def run_epoch(theta, tgt, data, batch_size, lrs, noise, keep, opt, mom, ws, grad, stats, rng):
    """One pass over ``data.rows`` in minibatches; returns the mean per-row loss.

    Parameters
    ----------
    theta : ndarray of shape (n_params,)
        Updated in place.
    tgt : DensityTarget
        The member's own target over all rows (its ``cfg`` is written: ``beta``).
    data : Batches
    batch_size : int
    lrs : ndarray of shape (n_batches,)
        The learning rate of each step of the epoch (the schedule).
    noise : ndarray of shape (n_batches,) or (0,)
        The standard deviation ``sd`` of the Gaussian noise SGHMC (``kind`` 2) adds to its
        velocity at each step, times the square root of its preconditioner; empty or 0 for
        none, and then SGHMC updates its preconditioner.
    keep : ndarray of shape (n_batches,) or (0,)
        Nonzero at the steps after which ``mom`` collects the parameters; empty for none.
    opt : Optimizer
    mom : Moments
        SWAG's moments or the sampler's draws.
    ws, grad, stats : ndarray
        Workspace for ``batch_size`` rows, gradient and stats buffers.
    rng : numpy.random.Generator
        Draws the noise (nothing else reads it).

    Returns
    -------
    float
        ``-(sum over batches of (n / B) loglik_B + logprior) / n_w`` averaged over the
        epoch's batches (weighted by their rows); NaN as soon as a step meets a non-finite
        loss, which leaves ``theta`` at the last finite point.
    """
    n = data.rows.shape[0]
    n_w = rows_weight(data)
    cfg = tgt.cfg[0]
    total = 0.0
    b = 0
    for i0 in range(0, n, batch_size):
        nb = min(batch_size, n - i0)
        bt = batch_target(tgt, data, i0, nb)
        cfg.beta = n / nb
        # through the pointer the target carries, so this kernel links no copy of logp_grad
        lp = tgt.density(theta, bt, ws, grad, stats, True)
        if not math.isfinite(lp):
            return np.nan
        finite = True
        for i in range(grad.shape[0]):
            if not math.isfinite(grad[i]):
                finite = False
        if not finite:
            return np.nan
        total += -lp * nb / n
        sd = noise[b] if noise.shape[0] > 0 else 0.0
        _step(theta, grad, -1.0 / n_w, lrs[b], sd, opt, rng)
        if keep.shape[0] > 0 and keep[b] != 0:
            _collect(theta, mom)
        b += 1
    cfg.beta = 1.0
    return total / n_w
