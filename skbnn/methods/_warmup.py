"""Warm-up of the HMC family: Stan's windows, the step-size heuristic and the metric
estimated at each window's end."""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from ..kernels import density as knet
from ..kernels.linalg import DENSE, LOW_RANK, Metric
from ..log_posterior import aligned_empty


def stan_windows(n_warmup: int) -> np.ndarray:
    """Stan's warm-up schedule: ``sched[i] = (in_window, end_window)`` per iteration.

    A fast initial buffer (step size only), then doubling slow windows that estimate the
    diagonal mass matrix, then a terminal buffer; buffers shrink for short warm-ups (15 % /
    75 % / 10 %). Fewer than 20 warm-up iterations adapt the step size only.
    """
    sched = np.zeros((max(n_warmup, 0), 2), dtype=np.uint8)
    if n_warmup < 20:
        return sched
    init_buffer, term_buffer, window = 75, 50, 25
    if init_buffer + window + term_buffer > n_warmup:
        init_buffer = int(0.15 * n_warmup)
        term_buffer = int(0.1 * n_warmup)
        window = n_warmup - init_buffer - term_buffer
    last = n_warmup - term_buffer - 1
    start = init_buffer
    while start <= last:
        end = min(start + window - 1, last)
        # a later window that would leave less than twice its size before the end absorbs
        # the rest (Stan applies this from the second window on)
        if start > init_buffer and end + 2 * window > last:
            end = last
        sched[start : end + 1, 0] = 1
        sched[end, 1] = 1
        start = end + 1
        window *= 2
    return sched


def _low_rank_update(metric, row: int, y: np.ndarray) -> np.ndarray:
    # y + U diag(chol[row]) U^T y (see skbnn.kernels.linalg)
    basis = metric.sigma
    return y + basis.T @ (metric.chol[row] * (basis @ y))


def _momentum(rng, metric, kind: int) -> np.ndarray:
    """p ~ N(0, M) for the inverse mass matrix ``metric`` (as the numba kernel draws it)."""
    inv_m, _, chol = metric
    z = rng.standard_normal(inv_m.size)
    if kind == DENSE:
        return solve_triangular(chol, z, trans="T", lower=True)
    if kind == LOW_RANK:
        z = _low_rank_update(metric, 1, z)
    return z / np.sqrt(inv_m)


def _velocity(metric, kind: int, p: np.ndarray) -> np.ndarray:
    """``M^-1 p`` (as the numba kernel computes it)."""
    if kind == DENSE:
        return metric.sigma @ p
    if kind == LOW_RANK:
        scale = np.sqrt(metric.inv_m)
        return scale * _low_rank_update(metric, 0, scale * p)
    return metric.inv_m * p


# a step far past the stability limit overflows to inf or NaN, which the search counts as
# a rejection; numpy's warnings about it would say nothing the caller can act on
@np.errstate(over="ignore", invalid="ignore")
def init_step_size(chain, eps: float, kind: int) -> float:
    """Stan's heuristic: double or halve until one leapfrog's acceptance crosses 0.8.

    Runs a handful of leapfrog steps, so it lives in Python around the compiled log density
    rather than in the chain kernel, which keeps the kernel's compile time down.
    """
    arrays, tgt = chain.arrays, chain.tgt
    metric, state = arrays.metric, arrays.state[0]
    ws = aligned_empty(chain.ws_size)
    st = np.empty_like(arrays.stats)

    def kinetic(p):
        return 0.5 * p @ _velocity(metric, kind, p)

    direction = 0
    for _ in range(100):
        p = _momentum(chain.rng, metric, kind)
        h0 = -state["logp"] + kinetic(p)
        q, g = arrays.q.copy(), arrays.grad.copy()
        # one leapfrog step, in numpy around the compiled log density
        p += 0.5 * eps * g
        q += eps * _velocity(metric, kind, p)
        lp = knet.log_density(q, tgt, ws, g, st, True)
        p += 0.5 * eps * g
        state["n_grad_evals"] += 1
        h = -lp + kinetic(p)
        delta = h0 - (np.inf if np.isnan(h) else h)
        up = delta > np.log(0.8)
        if direction == 0:
            direction = 1 if up else -1
        elif (direction == 1) != up:
            break
        eps = eps * 2.0 if direction == 1 else eps * 0.5
        if eps > 1e7 or eps < 1e-12:
            break
    return eps


def restart_step_size(chain, kind: int) -> None:
    # new step size by the heuristic, then dual averaging restarted around 10x it (Stan)
    state = chain.arrays.state[0]
    state["step_size"] = init_step_size(chain, state["step_size"], kind)
    state["mu"] = np.log(10.0 * state["step_size"])
    state["log_step_size_bar"] = state["accept_gap_bar"] = 0.0
    state["n_adapt"] = 0


def longest_window(sched: np.ndarray) -> int:
    """The most draws one of ``sched``'s slow windows adapts from (0 without windows)."""
    ends = np.flatnonzero(sched[:, 1])
    counts = np.add.reduceat(sched[:, 0].astype(np.int64), np.r_[0, ends[:-1] + 1])
    return int(counts.max()) if ends.size else 0


#: Eigenvalues of the low-rank correction within ``[1 / LOW_RANK_CUTOFF, LOW_RANK_CUTOFF]``
#: are left at 1, and ``LOW_RANK_GAMMA`` weighs the identity into the projected covariances
#: (nutpie's defaults)
LOW_RANK_CUTOFF, LOW_RANK_GAMMA = 2.0, 1e-5


def _spd_mean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The geometric mean ``b^-1/2 (b^1/2 a b^1/2)^1/2 b^-1/2`` of two SPD matrices: the
    ``m`` with ``m b m = a``."""
    vals, vecs = np.linalg.eigh(b)
    b_half = (vecs * np.sqrt(vals)) @ vecs.T
    b_inv_half = (vecs / np.sqrt(vals)) @ vecs.T
    m_vals, m_vecs = np.linalg.eigh(b_half @ a @ b_half)
    middle = (m_vecs * np.sqrt(np.maximum(m_vals, 0.0))) @ m_vecs.T
    return b_inv_half @ middle @ b_inv_half


def low_rank_covariance(
    draws: np.ndarray, grads: np.ndarray, cutoff: float = LOW_RANK_CUTOFF,
    gamma: float = LOW_RANK_GAMMA,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The low-rank-plus-diagonal inverse mass matrix of draws and their log-density
    gradients (rows), estimated as nutpie's ``low_rank`` adaptation does, in the span of
    the draws.

    Returns ``(scale, basis, eigvals)`` for ``Sigma = S (I + U diag(eigvals - 1) U^T) S``
    with ``S = diag(scale)`` and orthonormal ``U = basis``. ``scale**2`` is the diagonal
    estimate ``sqrt(Var[theta] / Var[grad])``. In the span of the rescaled, centred draws
    the correction is the SPD matrix ``A`` that balances the draws' covariance against the
    gradients', ``A Cov[g] A = Cov[theta]`` (the minimizer of the Fisher divergence for a
    Gaussian; Seyboldt, Carlson & Carpenter 2026), with ``gamma`` times the identity added
    to both; only its eigenvalues outside ``[1 / cutoff, cutoff]`` are kept. For a
    Gaussian and more draws than parameters it is the covariance itself. Nutpie also spans
    the gradients; a window shorter than the parameter count then has directions that the
    gradients see and the draws do not, where the estimate falls to about
    ``sqrt(gamma)`` and the step size with it; here those directions keep the diagonal.
    Costs O(d n^2) for ``n`` draws of ``d`` parameters.
    """
    var = np.clip(draws.var(axis=0) / np.maximum(grads.var(axis=0), 1e-300), 1e-20, 1e20)
    scale = var**0.25
    x = (draws - draws.mean(axis=0)) / scale
    g = (grads - grads.mean(axis=0)) * scale
    # centred draws span at most n - 1 directions; outside them the correction is I
    u, sv, _ = np.linalg.svd(x.T, full_matrices=False)
    basis = u[:, sv > sv[0] * 1e-10]
    xp, gp = x @ basis, g @ basis
    eye = np.eye(basis.shape[1])
    a, b = xp.T @ xp / gamma + eye, gp.T @ gp / gamma + eye
    eigvals, vecs = np.linalg.eigh(_spd_mean(a, b))
    # rounding can leave the smallest a hair below zero
    eigvals = np.maximum(eigvals, 1e-10)
    keep = (eigvals > cutoff) | (eigvals < 1.0 / cutoff)
    return scale, basis @ vecs[:, keep], eigvals[keep]


def update_metric(arrays, metric: str):
    """End of a slow window: the window's estimate becomes the metric; returns ``arrays``
    (a new tuple for a low-rank metric, whose rank changes from window to window).

    ``arrays`` is a chain's :data:`skbnn.kernels.chain.Chain`; ``metric`` the sampler's
    (``"diagonal"``, ``"diagonal_grad"``, ``"dense"``, ``"low_rank"``). The Welford estimates
    are regularized as Stan's: shrunk towards 1e-3 I with the weight of five draws, which
    keeps them positive definite after short windows. The low-rank estimate is positive
    definite by construction (:func:`low_rank_covariance`).
    """
    inv_m, sigma, chol = arrays.metric
    state, w_m2 = arrays.state[0], arrays.w_m2
    c = float(state["welford_count"])
    shrink, ridge = c / (c + 5.0), 1e-3 * 5.0 / (c + 5.0)
    if c < 2 or (metric == "low_rank" and c < 3):
        # no variance from fewer than two draws: Stan's schedule gives a 1-draw last window
        # for 151 warm-up iterations, and the metric adapted so far is kept rather than
        # shrunk towards 1e-3 I with the weight of five draws
        pass
    elif metric == "low_rank":
        half = w_m2.shape[0] // 2
        n = min(int(c), half)
        scale, basis, eigvals = low_rank_covariance(w_m2[:n], w_m2[half : half + n])
        inv_m[:] = scale**2
        factors = np.stack([eigvals - 1.0, eigvals**-0.5 - 1.0, eigvals**0.5 - 1.0])
        arrays = arrays._replace(
            metric=Metric(inv_m, np.ascontiguousarray(basis.T), np.ascontiguousarray(factors))
        )
    elif metric == "dense":
        sigma[:] = shrink * (w_m2 / (c - 1.0)) + ridge * np.eye(inv_m.size)
        chol[:] = np.linalg.cholesky(sigma)
        inv_m[:] = np.diag(sigma)
    else:
        var = w_m2[0] / (c - 1.0)
        if metric == "diagonal_grad":
            # Nutpie's estimate: the geometric mean of the draws' variance and the inverse
            # of the gradients' variance (equal for a Gaussian with diagonal covariance)
            var_g = w_m2[2] / (c - 1.0)
            var = np.sqrt(var / np.maximum(var_g, 1e-300))
        inv_m[:] = shrink * var + ridge
    w_m2[:] = 0.0
    arrays.w_mean[:] = 0.0
    state["welford_count"] = 0
    return arrays
