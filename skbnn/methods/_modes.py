"""Weighting the modes of a multimodal posterior by stacking their PSIS-LOO predictives.

Chains that settle in different modes do not mix, so pooling their draws with equal
weight gives each mode the share of chains that happened to find it. Yao, Vehtari and
Gelman (2022) instead treat each mode (or chain) as a model of its own: they estimate its
leave-one-out predictive density of every training row by Pareto smoothed importance
sampling (PSIS-LOO) from that mode's draws alone, and choose the mode weights by stacking
(Yao, Vehtari, Simpson and Gelman, 2018), i.e. they maximize the leave-one-out log score of
the weighted mixture of the modes' predictives.

Everything here is plain numpy and scipy. Log-likelihood matrices have one row per
posterior draw and one column per training row, shape ``(S, n)``, as the predictive code
produces them; ArviZ uses the transposed layout.

References
----------
Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
importance sampling. *Journal of Machine Learning Research* 25(72), 1-58.

Zhang, J. and Stephens, M. A. (2009). A new and efficient estimation method for the
generalized Pareto distribution. *Technometrics* 51(3), 316-325.

Yao, Y., Vehtari, A., Simpson, D. and Gelman, A. (2018). Using stacking to average
Bayesian predictive distributions. *Bayesian Analysis* 13(3), 917-1007.

Yao, Y., Vehtari, A. and Gelman, A. (2022). Stacking for non-mixing Bayesian
computations: the curse and blessing of multimodal posteriors. *Journal of Machine
Learning Research* 23(79), 1-45.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.optimize
import scipy.special
from numpy.typing import ArrayLike, NDArray

from ._records import ChainDiagnostics

__all__ = [
    "draw_weights",
    "loo_pointwise",
    "mode_stacking",
    "psis",
    "stacking_objective",
    "stacking_weights",
]

#: Pareto k above which PSIS estimates are unreliable for any number of draws
#: (Vehtari et al. 2024, Section 3; their sample-size dependent threshold
#: ``1 - 1/log10(S)`` is lower only for fewer than 2,200 draws).
KHAT_THRESHOLD = 0.7

# A GPD fit needs at least this many tail draws (loo's and ArviZ's minimum); with fewer,
# the raw importance weights are used and k-hat is reported as inf.
_MIN_TAIL = 5
# Zhang and Stephens' grid has _GRID_MIN + floor(sqrt(M)) points for M tail draws.
_GRID_MIN = 30
# Weakly informative prior of loo's gpdfit(wip=TRUE): the scale grid is centred using
# prior_bs = 3, and k is shrunk towards 0.5 as if by 10 extra observations.
_PRIOR_BS = 3.0
_PRIOR_K_N = 10.0
_PRIOR_K = 0.5
# exp() of a shifted log weight below this underflows, so a tail cutoff below it is
# raised to it (as ArviZ does) and the tail then holds fewer than M draws.
_LOG_TINY = float(np.log(np.finfo(np.float64).tiny))
# Bound on the size of the (columns, grid, tail) array of the vectorized GPD fit.
_FIT_CHUNK_ELEMENTS = 1 << 22


def _tail_length(n_draws: int, r_eff: float) -> int:
    """M = ceil(min(0.2 S, 3 sqrt(S / r_eff))), computed as loo and ArviZ do."""
    return int(np.ceil(min(n_draws / 5.0, 3.0 * (n_draws / r_eff) ** 0.5)))


def _gpdfit(x: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Zhang-Stephens fit of a generalized Pareto distribution to each row of ``x``.

    Parameters
    ----------
    x : ndarray of shape (c, M)
        Exceedances over the threshold, each row sorted in ascending order, ``M >= 5``.

    Returns
    -------
    k : ndarray of shape (c,)
        Shape estimates after loo's weakly informative prior; NaN where the fit failed.
    sigma : ndarray of shape (c,)
        Scale estimates (computed before the prior adjustment of ``k``, as in loo).
    """
    n_tail = x.shape[1]
    n_grid = _GRID_MIN + int(np.sqrt(n_tail))
    grid = 1.0 - np.sqrt(n_grid / (np.arange(1, n_grid + 1, dtype=np.float64) - 0.5))
    quartile = x[:, int(n_tail / 4.0 + 0.5) - 1]
    # theta = -k / sigma on a grid centred on the quartile; every point is below
    # 1 / max(x), so 1 - theta x stays positive.
    theta = 1.0 / x[:, -1:] + grid / (_PRIOR_BS * quartile[:, np.newaxis])  # (c, n_grid)
    with np.errstate(divide="ignore", invalid="ignore"):
        k_grid = np.log1p(-theta[:, :, np.newaxis] * x[:, np.newaxis, :]).mean(axis=2)
        profile = n_tail * (np.log(-theta / k_grid) - k_grid - 1.0)
        # Posterior weights of the grid points (the profile log-likelihood under a flat
        # prior on theta), normalized in log space because the profile spans thousands.
        weights = np.exp(profile - scipy.special.logsumexp(profile, axis=1, keepdims=True))
        theta_hat = np.sum(theta * weights, axis=1)
        k = np.log1p(-theta_hat[:, np.newaxis] * x).mean(axis=1)
        sigma = -k / theta_hat
    k = (n_tail * k + _PRIOR_K_N * _PRIOR_K) / (n_tail + _PRIOR_K_N)
    return k, sigma


def _smooth_tails(
    tail: NDArray[np.float64], cutoff: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Replace sorted tail log weights by the fitted GPD's expected order statistics.

    Parameters
    ----------
    tail : ndarray of shape (c, M)
        Log weights of the tail draws (shifted so that each row's maximum is 0),
        sorted ascending within each row; every value exceeds its row's cutoff.
    cutoff : ndarray of shape (c,)
        The log weight that the tail exceeds, at least ``log(tiny)``.

    Returns
    -------
    smoothed : ndarray of shape (c, M)
        Smoothed tail log weights in the same order, truncated at 0 (the largest raw
        weight); rows whose fit failed are returned unchanged.
    k : ndarray of shape (c,)
        Pareto k-hat of each row, inf where the fit failed.
    """
    smoothed = tail.copy()
    k = np.full(tail.shape[0], np.inf)
    n_tail = tail.shape[1]
    exp_cutoff = np.exp(cutoff)
    probs = (np.arange(n_tail, dtype=np.float64) + 0.5) / n_tail
    chunk = max(1, _FIT_CHUNK_ELEMENTS // (n_tail * (_GRID_MIN + int(np.sqrt(n_tail)))))
    for start in range(0, tail.shape[0], chunk):
        rows = slice(start, start + chunk)
        k_fit, sigma = _gpdfit(np.exp(tail[rows]) - exp_cutoff[rows, np.newaxis])
        ok = np.isfinite(k_fit) & np.isfinite(sigma) & (sigma > 0.0)
        if not np.any(ok):
            continue
        k_ok, sigma_ok = k_fit[ok, np.newaxis], sigma[ok, np.newaxis]
        # Quantiles of the fitted GPD at (j - 1/2) / M; its k -> 0 limit is exponential.
        tiny_k = np.abs(k_ok) < np.finfo(np.float64).eps
        safe_k = np.where(tiny_k, 1.0, k_ok)
        quantiles = np.where(
            tiny_k,
            -np.log1p(-probs),
            np.expm1(-safe_k * np.log1p(-probs)) / safe_k,
        )
        block = np.log(sigma_ok * quantiles + exp_cutoff[rows][ok, np.newaxis])
        index = np.arange(tail.shape[0])[rows][ok]
        smoothed[index] = np.minimum(block, 0.0)
        k[index] = k_fit[ok]
    return smoothed, k


def _logsumexp_rows(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log(sum(exp(x), axis=1))`` as a column, -inf for rows of -inf, NaN for NaN rows.

    scipy.special.logsumexp gives the same numbers several times slower on large arrays.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        shift = x.max(axis=1, keepdims=True)
        shift = np.where(np.isfinite(shift), shift, 0.0)
        return np.log(np.exp(x - shift).sum(axis=1, keepdims=True)) + shift


def _smooth_columns(
    x: NDArray[np.float64], cols: NDArray[np.intp], n_tail: int, khat: NDArray[np.float64]
) -> None:
    """Smooth the tails of rows ``cols`` of ``x`` (n, S) in place and set their k-hat.

    Rows whose tail is the top ``n_tail`` draws, all strictly above the next one (the
    cutoff) and with a cutoff above ``log(tiny)``, are fitted together. In the others
    (ties at the cutoff, e.g. repeated MCMC draws, or a tail beyond the float range) the
    tail is every draw strictly above ``max(cutoff, log(tiny))``, which is ArviZ's rule,
    and they are fitted one at a time.
    """
    n_draws = x.shape[1]
    sub = x[cols]
    # Only the top n_tail + 1 draws need sorting; the cutoff is the smallest of them.
    top = np.argpartition(sub, n_draws - n_tail - 1, axis=1)[:, n_draws - n_tail - 1 :]
    top_values = np.take_along_axis(sub, top, axis=1)
    order = np.argsort(top_values, axis=1, kind="stable")
    top = np.take_along_axis(top, order, axis=1)
    top_values = np.take_along_axis(top_values, order, axis=1)
    cutoff = top_values[:, 0]
    fast = (cutoff > _LOG_TINY) & (top_values[:, 1] > cutoff)

    if np.any(fast):
        smoothed, k = _smooth_tails(top_values[fast, 1:], cutoff[fast])
        rows = cols[fast]
        x[rows[:, np.newaxis], top[fast, 1:]] = smoothed
        khat[rows] = k

    for row, row_cutoff in zip(cols[~fast], cutoff[~fast], strict=True):
        values = x[row]
        threshold = max(float(row_cutoff), _LOG_TINY)
        (tail_index,) = np.nonzero(values > threshold)
        if tail_index.size < _MIN_TAIL:
            continue
        tail_index = tail_index[np.argsort(values[tail_index], kind="stable")]
        smoothed, k = _smooth_tails(values[tail_index][np.newaxis, :], np.array([threshold]))
        x[row, tail_index] = smoothed[0]
        khat[row] = k[0]


def psis(
    log_ratios: ArrayLike, r_eff: float = 1.0
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Pareto smoothed importance sampling, column by column.

    In each column, the largest ``M = ceil(min(0.2 S, 3 sqrt(S / r_eff)))`` importance
    ratios are replaced by the expected order statistics of a generalized Pareto
    distribution fitted to them (Zhang and Stephens' estimator with the weakly
    informative prior of the R package loo), truncated at the largest raw ratio, and the
    weights are normalized. The results agree with ``arviz.psislw`` applied to the
    transposed array.

    Parameters
    ----------
    log_ratios : array-like of shape (S, n)
        Log importance ratios, one row per draw and one column per target, e.g.
        ``-loglik`` for leave-one-out cross-validation.
    r_eff : float, default=1.0
        Relative efficiency ``ESS / S`` of the draws. Values below 1 (autocorrelated
        MCMC draws) lengthen the tail when ``S`` exceeds ``225 / r_eff``.

    Returns
    -------
    log_weights : ndarray of shape (S, n)
        Smoothed log weights; ``exp`` of each column sums to 1.
    khat : ndarray of shape (n,)
        Estimated Pareto shape of each column's ratio distribution; above 0.7 the
        importance sampling estimate is unreliable (Vehtari et al. 2024). inf when the
        tail is too short to fit (fewer than 5 tail draws, so for ``S < 25``) or the fit
        failed, and also when a ratio is ``+inf`` (the weight is then spread equally over
        the infinite ratios); NaN, with NaN log weights, for a column with a NaN or
        with every ratio 0 (``-inf``).

    Raises
    ------
    ValueError
        If ``log_ratios`` is not 2-D or has no draws, or ``r_eff`` is not positive.

    References
    ----------
    Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
    importance sampling. *Journal of Machine Learning Research* 25(72), 1-58.
    """
    lr = np.asarray(log_ratios, dtype=np.float64)
    if lr.ndim != 2 or lr.shape[0] < 1:
        raise ValueError(
            f"log_ratios must have shape (n_draws, n_targets) with n_draws >= 1, got {lr.shape}"
        )
    if not r_eff > 0.0:
        raise ValueError(f"r_eff must be positive, got {r_eff}")
    n_draws, n_cols = lr.shape
    # Work on a copy in (n, S) layout, each column's draws contiguous for the partition
    # and the sort (ascontiguousarray would return the caller's array for n = 1).
    x = np.array(lr.T, order="C")
    khat = np.full(n_cols, np.inf)

    has_nan = np.isnan(x).any(axis=1)
    has_pos_inf = np.isposinf(x).any(axis=1) & ~has_nan
    all_neg_inf = np.isneginf(x).all(axis=1)
    regular = ~(has_nan | has_pos_inf | all_neg_inf)
    khat[has_nan | all_neg_inf] = np.nan
    x[has_nan | all_neg_inf] = np.nan
    # An infinite ratio outweighs every finite one: keep only the infinite ratios.
    x[has_pos_inf] = np.where(np.isposinf(x[has_pos_inf]), 0.0, -np.inf)

    # Shift so that each column's largest log weight is 0: exp() then neither overflows
    # nor loses the largest weights, and 0 is where the smoothed tail is truncated.
    if np.all(regular):
        x -= x.max(axis=1, keepdims=True)
    else:
        x[regular] -= x[regular].max(axis=1, keepdims=True)

    n_tail = _tail_length(n_draws, r_eff)
    if n_tail >= _MIN_TAIL and n_tail < n_draws and np.any(regular):
        _smooth_columns(x, np.flatnonzero(regular), n_tail, khat)

    x -= _logsumexp_rows(x)
    # The transposed view: a copy back to C order would double the cost for large n.
    return x.T, khat


def loo_pointwise(
    loglik: ArrayLike, r_eff: float = 1.0
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """PSIS-LOO estimate of each row's leave-one-out log predictive density.

    With the ratios ``1 / p(y_i | theta_s)`` smoothed by :func:`psis` into normalized
    weights ``w_is``, ``elpd_i = log sum_s w_is p(y_i | theta_s)``, which estimates
    ``log p(y_i | y_-i)``.

    Parameters
    ----------
    loglik : array-like of shape (S, n)
        ``log p(y_i | theta_s)`` of training row ``i`` under posterior draw ``s``;
        ``-inf`` is allowed, NaN and ``+inf`` are not.
    r_eff : float, default=1.0
        Relative efficiency of the draws, passed to :func:`psis`.

    Returns
    -------
    elpd_i : ndarray of shape (n,)
        Pointwise leave-one-out log predictive densities; their sum is ``elpd_loo``.
        ``-inf`` for a row with a draw of zero likelihood: that draw's weight in the
        leave-one-out posterior is infinite.
    khat : ndarray of shape (n,)
        Pareto k-hat of each row's importance ratios (see :func:`psis`).

    Raises
    ------
    ValueError
        If ``loglik`` is not 2-D or contains NaN or ``+inf``.

    References
    ----------
    Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
    using leave-one-out cross-validation and WAIC. *Statistics and Computing* 27(5),
    1413-1432.
    """
    ll = np.asarray(loglik, dtype=np.float64)
    if ll.ndim != 2:
        raise ValueError(f"loglik must have shape (n_draws, n_rows), got {ll.shape}")
    if np.isnan(ll).any() or np.isposinf(ll).any():
        raise ValueError("loglik contains NaN or +inf; only finite values and -inf are allowed")
    log_weights, khat = psis(-ll, r_eff=r_eff)
    with np.errstate(invalid="ignore"):
        elpd_i = _logsumexp_rows(log_weights.T + ll.T)[:, 0]
    return elpd_i, khat


def stacking_objective(lpd: ArrayLike, weights: ArrayLike) -> float:
    """The log score ``sum_i log sum_k w_k exp(lpd_ik)`` that stacking maximizes.

    Parameters
    ----------
    lpd : array-like of shape (n, K)
        Log predictive density of row ``i`` under model (mode) ``k``, e.g. its PSIS-LOO
        ``elpd_i``.
    weights : array-like of shape (K,)
        A point of the simplex.

    Returns
    -------
    float
        The leave-one-out log score of the mixture; ``-inf`` if some row has zero
        density under every model with positive weight.
    """
    lpd = np.asarray(lpd, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_w = np.log(np.asarray(weights, dtype=np.float64))
    return float(np.sum(_logsumexp_rows(lpd + log_w)))


def stacking_weights(lpd: ArrayLike, sample_weight: ArrayLike | None = None) -> NDArray[np.float64]:
    """Stacking weights of predictive distributions (Yao et al. 2018).

    Maximizes :func:`stacking_objective` over the simplex, as ``loo::stacking_weights``
    and ArviZ's ``compare(method="stacking")`` do. The weights are a softmax of ``K - 1``
    free logits and the fixed logit 0 of the model with the highest total ``lpd`` (the one
    least likely to end at weight 0), optimized by L-BFGS-B with the analytic gradient,
    entirely in log space. The objective is concave in the weights and the softmax maps
    the logits one-to-one onto the interior of the simplex, so a stationary point is the
    maximum; a weight that belongs on the boundary ends close to 0 instead.

    Parameters
    ----------
    lpd : array-like of shape (n, K)
        Log predictive density of each row under each model; with the PSIS-LOO ``elpd_i``
        of every mode's draws alone this is the stacking of non-mixing chains of Yao,
        Vehtari and Gelman (2022). ``-inf`` is allowed: a model that is ``-inf`` at every
        row gets weight exactly 0, and rows that are ``-inf`` under every model, which
        score ``-inf`` whatever the weights, are left out of the optimization.
    sample_weight : array-like of shape (n,), default=None
        How many times each row counts (frequency weights, as a fit's ``sample_weight``);
        ``None``: once each.

    Returns
    -------
    ndarray of shape (K,)
        Non-negative weights summing to 1; ``[1.0]`` for ``K = 1``. When the optimum is
        not unique (e.g. identical models), one maximizer.

    Raises
    ------
    ValueError
        If ``lpd`` is not 2-D with at least one column, contains NaN or ``+inf``, or every
        model is ``-inf`` at every row.

    References
    ----------
    Yao, Y., Vehtari, A., Simpson, D. and Gelman, A. (2018). Using stacking to average
    Bayesian predictive distributions. *Bayesian Analysis* 13(3), 917-1007.
    """
    lpd = np.asarray(lpd, dtype=np.float64)
    if lpd.ndim != 2 or lpd.shape[1] < 1:
        raise ValueError(
            f"lpd must have shape (n_rows, n_models) with n_models >= 1, got {lpd.shape}"
        )
    if np.isnan(lpd).any() or np.isposinf(lpd).any():
        raise ValueError("lpd contains NaN or +inf; only finite values and -inf are allowed")
    n_models = lpd.shape[1]
    weights = np.zeros(n_models)
    if n_models == 1:
        weights[0] = 1.0
        return weights
    finite = np.isfinite(lpd)
    models = np.flatnonzero(finite.any(axis=0))
    if models.size == 0:
        raise ValueError("every model has log predictive density -inf at every row")
    rows = finite[:, models].any(axis=1)
    sub = lpd[np.ix_(rows, models)]
    row_w = np.ones(lpd.shape[0]) if sample_weight is None else np.asarray(sample_weight)
    row_w = row_w[rows] / max(row_w[rows].sum(), np.finfo(np.float64).tiny)
    if models.size == 1 or sub.shape[0] == 0:
        weights[models] = 1.0 / models.size
        return weights

    n_rows, k = sub.shape
    reference = int(np.argmax(sub.sum(axis=0)))
    free = np.delete(np.arange(k), reference)

    def negative_mean_score(z: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        logits = np.zeros(k)
        logits[free] = z
        log_w = logits - scipy.special.logsumexp(logits)
        joint = sub + log_w
        lse = _logsumexp_rows(joint)
        # r_ik: the share of row i's mixture density that model k contributes; the
        # derivative of the mean score in logit j is mean_i r_ij - w_j.
        resp = np.exp(joint - lse)
        grad = np.exp(log_w) - row_w @ resp
        return -float(row_w @ lse[:, 0]), grad[free]

    # The (weighted) mean rather than the sum keeps the gradient O(1) whatever n, so the
    # tolerances below mean the same for every data size.
    result = scipy.optimize.minimize(
        negative_mean_score,
        np.zeros(k - 1),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 1000, "ftol": 1e-14, "gtol": 1e-10},
    )
    logits = np.zeros(k)
    logits[free] = result.x
    weights[models] = scipy.special.softmax(logits)
    return weights


def mode_stacking(
    loglik: ArrayLike, mode_of_draw: ArrayLike, n_modes: int | None = None
) -> dict[str, Any]:
    """Stack the modes (or chains) of a non-mixing posterior by their PSIS-LOO predictives.

    Each mode's draws alone give, by :func:`loo_pointwise`, the leave-one-out log
    predictive density of every training row under that mode; :func:`stacking_weights`
    of these columns are the mode weights (Yao, Vehtari and Gelman 2022).

    Parameters
    ----------
    loglik : array-like of shape (S, n)
        ``log p(y_i | theta_s)`` of every training row under every draw.
    mode_of_draw : array-like of int of shape (S,)
        The mode (``0 .. K-1``) that each draw belongs to.
    n_modes : int, optional
        ``K``; defaults to ``max(mode_of_draw) + 1``. Larger values add modes without
        draws.

    Returns
    -------
    dict
        ``"weights"``
            ndarray of shape (K,), the stacking weights; 0 for excluded modes.
        ``"elpd_loo"``
            ndarray of shape (K,), each mode's PSIS-LOO ``elpd_loo`` (sum over rows);
            NaN for modes with fewer than 2 draws or a NaN or ``+inf`` log-likelihood.
        ``"elpd_loo_i"``
            ndarray of shape (n, K), the pointwise values that were stacked.
        ``"khat_max"``
            ndarray of shape (K,), each mode's largest Pareto k-hat over rows.
        ``"khat_share_high"``
            ndarray of shape (K,), the share of rows whose k-hat exceeds
            ``KHAT_THRESHOLD`` (0.7), where the mode's ``elpd_i`` is unreliable.
        ``"n_draws"``
            ndarray of int of shape (K,).
        ``"excluded"``
            dict from mode to the reason it was given weight 0 without stacking.
        ``"elpd_stacked"``
            float, :func:`stacking_objective` at the weights: the leave-one-out log
            score of the weighted mixture of the modes.

    Raises
    ------
    ValueError
        If the shapes disagree, a mode index is negative or not below ``n_modes``, or
        no mode can be stacked (the message gives each mode's reason).
    """
    ll = np.asarray(loglik, dtype=np.float64)
    labels = np.asarray(mode_of_draw)
    if ll.ndim != 2 or labels.shape != (ll.shape[0],):
        raise ValueError(
            f"loglik must have shape (n_draws, n_rows) and mode_of_draw shape (n_draws,), "
            f"got {ll.shape} and {labels.shape}"
        )
    if labels.size and (not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0):
        raise ValueError("mode_of_draw must hold non-negative integers")
    n_found = int(labels.max()) + 1 if labels.size else 0
    k = n_found if n_modes is None else int(n_modes)
    if k < max(n_found, 1):
        raise ValueError(f"n_modes={n_modes} but mode_of_draw holds mode {n_found - 1}")

    n_rows = ll.shape[1]
    n_draws = np.bincount(labels, minlength=k)
    elpd_i = np.full((n_rows, k), np.nan)
    khat = np.full((n_rows, k), np.nan)
    excluded: dict[int, str] = {}
    for m in range(k):
        draws = ll[labels == m]
        if n_draws[m] == 0:
            excluded[m] = "no draws"
            continue
        if n_draws[m] == 1:
            excluded[m] = (
                "a single draw: leaving a row out cannot reweight it, so its leave-one-out "
                "density cannot be estimated"
            )
            continue
        if np.isnan(draws).any() or np.isposinf(draws).any():
            excluded[m] = "its log-likelihood has NaN or +inf values"
            continue
        elpd_i[:, m], khat[:, m] = loo_pointwise(draws)
        if np.all(np.isneginf(elpd_i[:, m])):
            excluded[m] = "its leave-one-out density is 0 at every row (log-likelihood -inf)"

    usable = np.array([m not in excluded for m in range(k)], dtype=bool)
    if not usable.any():
        reasons = "; ".join(f"mode {m}: {why}" for m, why in excluded.items())
        raise ValueError(f"no mode can be stacked: {reasons}")
    weights = np.zeros(k)
    weights[usable] = stacking_weights(elpd_i[:, usable])
    with np.errstate(invalid="ignore"):
        khat_max = np.max(khat, axis=0) if n_rows else np.full(k, np.nan)
        share_high = np.mean(khat > KHAT_THRESHOLD, axis=0) if n_rows else np.full(k, np.nan)
    share_high[np.isnan(khat).all(axis=0)] = np.nan
    return {
        "weights": weights,
        "elpd_loo": elpd_i.sum(axis=0),
        "elpd_loo_i": elpd_i,
        "khat_max": khat_max,
        "khat_share_high": share_high,
        "n_draws": n_draws,
        "excluded": excluded,
        "elpd_stacked": stacking_objective(elpd_i[:, usable], weights[usable]),
    }


def draw_weights(mode_of_draw: ArrayLike, mode_w: ArrayLike) -> NDArray[np.float64]:
    """Spread each mode's weight equally over its draws.

    Parameters
    ----------
    mode_of_draw : array-like of int of shape (S,)
        The mode of each draw, ``0 .. K-1``.
    mode_w : array-like of shape (K,)
        Non-negative mode weights, e.g. ``mode_stacking(...)["weights"]``.

    Returns
    -------
    ndarray of shape (S,)
        Draw weights summing to 1: draw ``s`` of mode ``m`` gets ``mode_w[m] / S_m``,
        renormalized, so a weighted average over draws is the ``mode_w``-mixture of the
        modes' averages. Weight given to a mode without draws is renormalized away.

    Raises
    ------
    ValueError
        If a mode index is outside ``0 .. K-1``, a weight is negative or not finite, or
        the draws' modes have no weight in total.
    """
    labels = np.asarray(mode_of_draw)
    w = np.asarray(mode_w, dtype=np.float64)
    if labels.ndim != 1 or w.ndim != 1:
        raise ValueError("mode_of_draw and mode_w must be 1-D")
    if labels.size and (labels.min() < 0 or labels.max() >= w.size):
        raise ValueError(f"mode_of_draw must hold integers in 0..{w.size - 1}")
    if not np.all(np.isfinite(w)) or np.any(w < 0.0):
        raise ValueError("mode_w must be finite and non-negative")
    counts = np.bincount(labels, minlength=w.size)
    per_draw = w[labels] / counts[labels]
    total = per_draw.sum()
    if not total > 0.0:
        raise ValueError("the modes that have draws have total weight 0")
    return per_draw / total


def weigh_modes(target, draws, noise, mode_of_draw, how: str,
                diagnostics: ChainDiagnostics) -> np.ndarray:  # fmt: skip
    """Weights of a multi-mode run's draws: each mode's weight, equal or by stacking,
    spread evenly over its draws.

    Stacking (Yao, Vehtari & Gelman 2022) weighs the modes by how well their mixture
    predicts each training row left out, the modes' leave-one-out densities estimated by
    PSIS from each mode's own draws; a row's ``sample_weight`` counts it that many times.
    The modes' weights and leave-one-out figures go into ``diagnostics`` (its
    ``mode_weights``, and ``weight``, ``elpd_loo``, ``khat_max`` of each of its
    ``modes``).

    Parameters
    ----------
    target : skbnn.log_posterior.LogPosterior
    draws : ndarray of shape (n_draws, n_params)
    noise : ndarray of shape (n_draws, n_outputs) or None
        Each draw's noise precision (regression).
    mode_of_draw : ndarray of int, shape (n_draws,)
    how : {"equal", "stacking"}
    diagnostics : ChainDiagnostics
        The run's figures, with its ``modes``; updated in place.

    Returns
    -------
    ndarray of shape (n_draws,)
        Weights summing to one.
    """
    modes = diagnostics.modes
    n_modes = len(modes)
    lpd = np.empty((target.n_rows, n_modes))
    for m, mode in enumerate(modes):
        rows = mode_of_draw == m
        # a mode at a time: the pointwise matrix of every draw may not fit in memory
        loglik = target.pointwise_loglik(draws[rows], None if noise is None else noise[rows])
        lpd[:, m], khat = loo_pointwise(loglik)
        mode.elpd_loo = float(target.W @ lpd[:, m])
        mode.khat_max = float(np.max(khat))
    if how == "stacking":
        weights = stacking_weights(lpd, sample_weight=target.W)
    else:
        weights = np.full(n_modes, 1.0 / n_modes)
    for mode, w in zip(modes, weights, strict=True):
        mode.weight = float(w)
    diagnostics.mode_weights = weights
    diagnostics.mode_weighting = how
    return draw_weights(mode_of_draw, weights)
