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
    ``momentum``, ``nesterov``, the step count ``t``, and SGHMC's state: its exploration
    steps ``n_explore``, the gradient's mean square ``msq``, the preconditioner
    ``precond`` frozen while sampling, and whether the last step was ``sampling``);
    ``m1`` and ``m2`` are Adam's moment estimates (``m1`` is SGD's velocity, and
    SGHMC's while it samples).
``Moments(cfg, mean, sq_mean, dev)``
    SWAG's running first and second moments and its ring buffer of the last ``rank``
    deviations, fed at the steps an epoch's ``keep`` flags; ``cfg`` of dtype
    :data:`MOMENTS` holds ``n`` (snapshots taken) and ``raw``: when 1, the ring buffer
    keeps the parameters themselves and no moments (the sampler's draws; ``mean`` and
    ``sq_mean`` may then be empty).
"""

import math
from collections import namedtuple

import numba
import numpy as np

from ._compile import njit, record
from .density import KernelTarget, n_rows
from .team import (
    ADAM,
    GATHER,
    address,
    as_bits,
    collect,
    doubles_at,
    from_bits,
    integers_at,
    post,
)

#: Adam's parameters and first moments below this magnitude (and second moments below its
#: square) are set to zero: see :func:`_adam_range`.
FLUSH = 2.0**-400
#: The fewest parameters whose Adam step the team's helper shares (:mod:`.team`).
TEAM_MIN_PARAMS = 2**16
#: The fewest values (features x rows) of a minibatch whose gather the helper shares.
TEAM_MIN_GATHER = 2**14

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
        ("n_explore", np.int64),
        ("msq", np.float64),
        ("precond", np.float64),
        ("sampling", np.int64),
    ],
    align=True,
)


def optimizer(kind: int, n: int, beta1=0.9, beta2=0.999, epsilon=1e-8, momentum=0.9,
              nesterov=False) -> Optimizer:  # fmt: skip
    """A fresh :class:`Optimizer` of ``kind`` (0 Adam, 1 SGD with momentum, 2 SGHMC) for
    ``n`` parameters."""
    cfg = np.zeros(1, dtype=OPTIMIZER)
    cfg[0]["kind"] = kind
    cfg[0]["nesterov"] = int(nesterov)
    cfg[0]["beta1"] = beta1
    cfg[0]["beta2"] = beta2
    cfg[0]["epsilon"] = epsilon
    cfg[0]["momentum"] = momentum
    return Optimizer(cfg, np.zeros(n), np.zeros(n))


MOMENTS = record(
    [("raw", np.int64), ("n", np.int64)],
    align=True,
)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def rows_weight(data, lo, hi):
    """The summed row weights of ``data.rows[lo:hi]``, an epoch's rows: its loss is per
    unit of it."""
    n_w = 0.0
    for i in range(lo, hi):
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
    # rows[i0:i0 + nb] of the feature-major data into the batch buffers; on a wide batch
    # the team's helper gathers the second half of the features (a gather is bound by
    # memory latency, which two cores' outstanding loads halve)
    XT, YT, W, rows, xb, yb, wb = data
    h = d // 2
    helped = d * nb >= TEAM_MIN_GATHER and rows.itemsize == 8 and post(
        GATHER, address(XT, 0), address(rows, i0), address(xb, 0), nb, n_all, h, d, 0, 0, 0,
        0, 0, 0,
    )  # fmt: skip
    _gather_features(XT, rows[i0 : i0 + nb], xb, nb, n_all, 0, h if helped else d)
    for o in range(ky):
        src = YT[o * n_all : (o + 1) * n_all]
        dst = yb[o * nb : (o + 1) * nb]
        for t in range(nb):
            dst[t] = src[rows[i0 + t]]
    for t in range(nb):
        wb[t] = W[rows[i0 + t]]
    if helped:
        collect()


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _gather_features(XT, rows, xb, nb, n_all, j0, j1):
    # features j0..j1 - 1 of the rows ``rows`` of XT into the batch buffer xb
    for j in range(j0, j1):
        src = XT[j * n_all : (j + 1) * n_all]
        dst = xb[j * nb : (j + 1) * nb]
        for t in range(nb):
            dst[t] = src[rows[t]]


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def gather_task(xt, rows, xb, nb, n_all, j0, j1):
    """A posted gather (:data:`~skbnn.kernels.team.GATHER`), on addresses."""
    XT = numba.carray(doubles_at(xt), (j1 * n_all,))
    R = numba.carray(integers_at(rows), (nb,))
    XB = numba.carray(doubles_at(xb), (j1 * nb,))
    _gather_features(XT, R, XB, nb, n_all, j0, j1)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _step(theta, g, scale, lr, sd, opt, rng):
    # one step on the loss whose gradient is scale * g (g the log density's gradient);
    # kind 2 is cyclical SGHMC: Adam while it explores (sd == 0), SGHMC with N(0, sd^2 P)
    # noise while it samples
    cfg = opt.cfg[0]
    cfg.t += 1
    if cfg.kind == 0:
        _adam(theta, g, scale, lr, opt, cfg.t)
    elif cfg.kind == 2:
        if sd == 0.0:
            _explore(theta, g, scale, lr, opt)
        else:
            _sghmc(theta, g, scale, lr, sd, opt, rng)
    else:
        _sgd(theta, g, scale, lr, opt)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def descent_step(theta, g, scale, lr, opt, adam):
    """:func:`_step` of an optimizer that never samples: Adam when ``adam``, else SGD
    (``opt``'s ``kind`` 0 or 1). A caller that passes ``adam`` as a constant of its own
    (the variational methods' epoch kernels) compiles that optimizer's step alone."""
    cfg = opt.cfg[0]
    cfg.t += 1
    if adam:
        _adam(theta, g, scale, lr, opt, cfg.t)
    else:
        _sgd(theta, g, scale, lr, opt)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _sgd(theta, g, scale, lr, opt):
    # SGD with momentum: m1 is the velocity
    cfg = opt.cfg[0]
    m1 = opt.m1
    mu = cfg.momentum
    nesterov = cfg.nesterov != 0
    for i in range(theta.shape[0]):
        gi = scale * g[i]
        m1[i] = mu * m1[i] - lr * gi
        # Nesterov's look-ahead in the form scikit-learn's SGD uses
        theta[i] += mu * m1[i] - lr * gi if nesterov else m1[i]


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _explore(theta, g, scale, lr, opt):
    # SGHMC's exploration stage (no noise): an Adam step, as the ensemble's members train,
    # so that each cycle reaches a mode whatever the layers' gradient scales; a step of
    # SGD preconditioned by one scalar fell short of a mode on 10^5-10^6 rows. Meanwhile
    # the gradient's mean square over all parameters (RMSprop's, one scalar: a parameter's
    # own would let a dead unit's zero gradient blow up its noise) sets the preconditioner
    # that the sampling stage freezes.
    cfg = opt.cfg[0]
    cfg.n_explore += 1
    cfg.sampling = 0
    gsq = 0.0
    for i in range(theta.shape[0]):
        gi = scale * g[i]
        gsq += gi * gi
    # a step of the velocity's length, lr / (1 - momentum), as SGHMC's own would take
    _adam(theta, g, scale, lr / (1.0 - cfg.momentum), opt, cfg.n_explore)
    cfg.msq = cfg.beta2 * cfg.msq + (1.0 - cfg.beta2) * gsq / theta.shape[0]


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _adam(theta, g, scale, lr, opt, t):
    # Adam's step t (Kingma and Ba 2015) on the gradient scale * g. The bias corrections
    # are factors taken out of the loop, as PyTorch's Adam takes them: one division per
    # parameter instead of three. On many parameters the team's helper steps the second
    # half: each parameter's update is its own, so the bits are the same
    cfg = opt.cfg[0]
    b1 = cfg.beta1
    b2 = cfg.beta2
    step = lr / (1.0 - b1**t)
    root_c2 = 1.0 / math.sqrt(1.0 - b2**t)
    eps = cfg.epsilon
    n = theta.shape[0]
    h = n // 2
    helped = n >= TEAM_MIN_PARAMS and post(
        ADAM, address(theta, 0), address(g, 0), address(opt.m1, 0), address(opt.m2, 0), h, n,
        as_bits(scale), as_bits(b1), as_bits(b2), as_bits(step), as_bits(root_c2),
        as_bits(eps), 0,
    )  # fmt: skip
    _adam_range(theta, g, opt.m1, opt.m2, 0, h if helped else n, scale, b1, b2, step,
                root_c2, eps)  # fmt: skip
    if helped:
        collect()


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _adam_range(theta, g, m1, m2, lo, hi, scale, b1, b2, step, root_c2, eps):
    # No reduction here: a sum in this loop (without reassociation, to keep its bits) kept
    # it scalar, and the divisions bound the vectorized loop, not its memory traffic.
    # Views that start at lo, never theta[i] for i in range(lo, hi): numba wraps negative
    # indices, and LLVM, unable to prove lo non-negative, kept that loop scalar (see
    # skbnn.kernels._compile); each parameter's update is its own, so the bits are the same
    th = theta[lo:hi]
    gr = g[lo:hi]
    v1 = m1[lo:hi]
    v2 = m2[lo:hi]
    for i in range(hi - lo):
        gi = scale * gr[i]
        # A weight whose only gradient is the prior's (an input that is zero on every
        # row, a dead unit's) decays geometrically under Adam, whose step does not shrink
        # with the gradient, and with it its moments: into the subnormal range, where
        # every product with it (BLAS's too) runs a hundred times slower. Values below
        # FLUSH, far below any rounding of a sum they enter, are zero; NaN stays NaN
        a1 = b1 * v1[i] + (1.0 - b1) * gi
        a2 = b2 * v2[i] + (1.0 - b2) * gi * gi
        a1 = 0.0 if abs(a1) < FLUSH else a1
        a2 = 0.0 if a2 < FLUSH * FLUSH else a2
        t = th[i] - step * a1 / (math.sqrt(a2) * root_c2 + eps)
        v1[i] = a1
        v2[i] = a2
        th[i] = 0.0 if abs(t) < FLUSH else t


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def adam_task(theta, g, m1, m2, lo, hi, scale, b1, b2, step, root_c2, eps):
    """A posted Adam step (:data:`~skbnn.kernels.team.ADAM`): addresses, and the floats
    as bits."""
    _adam_range(numba.carray(doubles_at(theta), (hi,)), numba.carray(doubles_at(g), (hi,)),
                numba.carray(doubles_at(m1), (hi,)), numba.carray(doubles_at(m2), (hi,)),
                lo, hi, from_bits(scale), from_bits(b1), from_bits(b2), from_bits(step),
                from_bits(root_c2), from_bits(eps))  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _sghmc(theta, g, scale, lr, sd, opt, rng):
    # SGHMC (Chen et al. 2014) preconditioned by the scalar P = 1 / (sqrt(v) + epsilon),
    # v the exploration's mean square gradient, frozen at the stage's first step: a
    # constant P is SGHMC in the coordinates theta / sqrt(P), exact as the step size
    # shrinks, and the step is invariant to the loss's scale. The velocity (the momentum
    # times the step size) starts from rest, since m1 held Adam's moment until then.
    cfg = opt.cfg[0]
    m1 = opt.m1
    if cfg.sampling == 0:
        cfg.sampling = 1
        for i in range(theta.shape[0]):
            m1[i] = 0.0
        if cfg.n_explore == 0:
            # no exploration before: the first sampling step's gradient sets v
            gsq = 0.0
            for i in range(theta.shape[0]):
                gsq += (scale * g[i]) ** 2
            v = gsq / theta.shape[0]
        else:
            v = cfg.msq / (1.0 - cfg.beta2**cfg.n_explore)
        cfg.precond = 1.0 / (math.sqrt(v) + cfg.epsilon)
    pc = cfg.precond
    mu = cfg.momentum
    sdp = sd * math.sqrt(pc)
    for i in range(theta.shape[0]):
        m1[i] = mu * m1[i] - lr * pc * scale * g[i] + sdp * rng.standard_normal()
        theta[i] += m1[i]


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _collect(theta, mom):
    # SWAG: running moments, and the deviation from the updated mean into the ring buffer;
    # raw: the parameters themselves into it
    cfg = mom.cfg[0]
    cfg.n += 1
    rank = mom.dev.shape[0]
    if cfg.raw != 0:
        if rank > 0:
            # a loop, not a slice assignment: that compiles numba's shape-mismatch message
            # (its string formatting), seconds of a cold fit for an error that cannot occur
            row = mom.dev[(cfg.n - 1) % rank]
            for i in range(theta.shape[0]):
                row[i] = theta[i]
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
def run_epochs(theta, tgt, data, batch_size, lrs, noise, keep, opt, mom, ws, grad, stats, rng,
               losses):  # fmt: skip
    """Passes over ``data.rows`` in minibatches, one epoch per entry of ``losses``.

    ``data.rows`` holds the epochs' rows one after the other, each epoch the same number
    of rows. Several short epochs in one call spare each its own call from Python, whose
    typing of the arguments costs more than an epoch of a few rows.

    Parameters
    ----------
    theta : ndarray of shape (n_params,)
        Updated in place.
    tgt : DensityTarget
        The member's own target over all rows (its ``cfg`` is written: ``beta``).
    data : Batches
    batch_size : int
    lrs : ndarray of shape (n_steps,)
        The learning rate of each step of the epochs, epoch after epoch (the schedule).
    noise : ndarray of shape (n_steps,) or (0,)
        The standard deviation ``sd`` of the Gaussian noise SGHMC (``kind`` 2) adds to its
        velocity at each step, times the square root of its preconditioner; empty or 0 for
        none, and then SGHMC explores (Adam steps) and updates its preconditioner.
    keep : ndarray of shape (n_steps,) or (0,)
        Nonzero at the steps after which ``mom`` collects the parameters; empty for none.
    opt : Optimizer
    mom : Moments
        SWAG's moments or the sampler's draws.
    ws, grad, stats : ndarray
        Workspace for ``batch_size`` rows, gradient and stats buffers.
    rng : numpy.random.Generator
        Draws the noise (nothing else reads it).
    losses : ndarray of shape (n_epochs,)
        Receives each epoch's loss: ``-(sum over batches of (n / B) loglik_B + logprior) /
        n_w`` averaged over the epoch's batches (weighted by their rows); NaN for an epoch
        in which a step met a non-finite loss, which leaves ``theta`` at the last finite
        point and ends the call.

    Returns
    -------
    int
        The number of epochs run, the last of them the non-finite one if any.
    """
    n_epochs = losses.shape[0]
    n = data.rows.shape[0] // n_epochs
    cfg = tgt.cfg[0]
    b = 0
    for e in range(n_epochs):
        start = e * n
        n_w = rows_weight(data, start, start + n)
        total = 0.0
        for i0 in range(start, start + n, batch_size):
            nb = min(batch_size, start + n - i0)
            bt = batch_target(tgt, data, i0, nb)
            cfg.beta = n / nb
            # through the pointer the target carries, so this kernel links no copy of
            # logp_grad
            lp = tgt.density(theta, bt, ws, grad, stats, True)
            finite = math.isfinite(lp)
            for i in range(grad.shape[0]):
                if not math.isfinite(grad[i]):
                    finite = False
            if not finite:
                cfg.beta = 1.0
                losses[e] = np.nan
                return e + 1
            total += -lp * nb / n
            sd = noise[b] if noise.shape[0] > 0 else 0.0
            _step(theta, grad, -1.0 / n_w, lrs[b], sd, opt, rng)
            if keep.shape[0] > 0 and keep[b] != 0:
                _collect(theta, mom)
            b += 1
        losses[e] = total / n_w
    cfg.beta = 1.0
    return n_epochs
