"""MCMC convergence diagnostics: rank-normalized R-hat, bulk and tail ESS, summaries.

The estimators follow Vehtari, Gelman, Simpson, Carpenter and Bürkner (2021),
"Rank-normalization, folding, and localization: an improved R-hat for assessing
convergence of MCMC", *Bayesian Analysis* 16(2), 667-718, and the multi-chain
effective-sample-size estimator of the Stan reference manual (Geyer's initial
monotone sequence on autocorrelations that borrow the between-chain variance).
Only numpy and scipy are needed; :func:`to_inference_data` optionally hands the
draws to ArviZ.

Every scalar diagnostic takes the draws of one quantity as an array of shape
``(n_chains, n_draws)``; a 1-D array is read as a single chain. All of them split
each chain into a first and a second half (dropping the middle draw when
``n_draws`` is odd), so a single chain is compared with itself and
non-stationarity within a chain is detected as well as disagreement between chains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.fft
import scipy.special
import scipy.stats
from numpy.typing import ArrayLike, NDArray

from ._data import validate_X
from ._draws import noise_draws, noise_logpdf

__all__ = [
    "ess_bulk",
    "ess_mean",
    "ess_tail",
    "nested_rhat",
    "rhat",
    "summary",
    "to_inference_data",
]

# Below this many draws per chain, each split half has fewer than two draws and
# the within-chain variance is undefined.
_MIN_DRAWS = 4
# Blom's offset for the normal scores of ranks, as recommended by Vehtari et al. (2021).
_BLOM = 3.0 / 8.0
_TAIL_PROBS = (0.05, 0.95)


def _as_chains(x: ArrayLike) -> NDArray[np.float64]:
    """Return the draws as a float64 array of shape (n_chains, n_draws)."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 1:
        return arr[np.newaxis, :]
    if arr.ndim != 2:
        raise ValueError(
            "expected the draws of one quantity as an array of shape (n_chains, n_draws) "
            f"or (n_draws,), got an array with ndim={arr.ndim} and shape {arr.shape}"
        )
    return arr


def _is_degenerate(x: NDArray[np.float64]) -> bool:
    """Whether no diagnostic is defined for these (n_chains, n_draws, ...) draws."""
    n_chains, n_draws = x.shape[:2]
    if n_chains < 1 or n_draws < _MIN_DRAWS:
        return True
    if not np.all(np.isfinite(x)):
        return True
    # A constant quantity has zero variance in every term of every ratio below.
    return bool(np.all(x == x.flat[0]))


def _split_chains(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Split each chain in two halves, dropping the middle draw if n_draws is odd."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half :]], axis=0)


def _z_scale(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rank-normalize: normal scores of the ranks pooled over all chains.

    Average ranks keep ties tied, so a discrete quantity keeps its number of
    distinct values instead of gaining spurious variance.
    """
    ranks = scipy.stats.rankdata(x, method="average", axis=None).reshape(x.shape)
    return scipy.special.ndtri((ranks - _BLOM) / (x.size + 1.0 - 2.0 * _BLOM))


def _rhat_core(x: NDArray[np.float64]) -> float:
    """Classic (non-split) potential scale reduction of already prepared chains."""
    n_draws = x.shape[1]
    within = float(np.mean(np.var(x, axis=1, ddof=1)))
    between = n_draws * float(np.var(np.mean(x, axis=1), ddof=1))
    if within == 0.0:
        # Every chain is internally constant: chains that disagree cannot be
        # reconciled (infinite R-hat); chains that agree carry no information.
        return np.inf if between > 0.0 else np.nan
    return float(np.sqrt((between / within + n_draws - 1.0) / n_draws))


def _split_rhat(x: ArrayLike) -> float:
    """Split R-hat on the raw scale (Gelman et al., BDA3), without rank normalization."""
    chains = _as_chains(x)
    if _is_degenerate(chains):
        return np.nan
    return _rhat_core(_split_chains(chains))


def _rhat_bulk(x: ArrayLike) -> float:
    """Rank-normalized split R-hat of the draws themselves (location only)."""
    chains = _as_chains(x)
    if _is_degenerate(chains):
        return np.nan
    return _rhat_core(_z_scale(_split_chains(chains)))


def _rhat_folded(x: ArrayLike) -> float:
    """Rank-normalized split R-hat of the folded draws ``|x - median|`` (scale only)."""
    chains = _as_chains(x)
    if _is_degenerate(chains):
        return np.nan
    split = _split_chains(chains)
    folded = np.abs(split - np.median(split))
    if np.all(folded == folded.flat[0]):
        # e.g. two values placed symmetrically about the median: the folded
        # draws carry no information about scale.
        return np.nan
    return _rhat_core(_z_scale(folded))


def rhat(x: ArrayLike) -> float:
    """Rank-normalized split R-hat (Vehtari et al., 2021).

    The maximum of the split R-hat of the rank-normalized draws ("bulk", sensitive
    to chains that disagree in location) and of the rank-normalized folded draws
    ``|x - median(x)|`` ("tail", sensitive to chains that disagree in scale).
    Rank normalization makes the diagnostic invariant to monotone transformations
    of the quantity and well defined for heavy-tailed draws without finite moments.

    Parameters
    ----------
    x : array-like of shape (n_chains, n_draws) or (n_draws,)
        Draws of one scalar quantity. A 1-D array is one chain; since chains are
        split in halves, R-hat of a single chain still compares its two halves.

    Returns
    -------
    float
        R-hat; values close to 1 (below about 1.01) indicate that the chains mix.
        NaN when the draws are constant, contain non-finite values, or there are
        fewer than 4 draws per chain. ``inf`` when every half-chain is constant but
        they differ. If only the folded draws are constant, the bulk value is returned.

    Raises
    ------
    ValueError
        If ``x`` is neither 1-D nor 2-D.

    References
    ----------
    Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
    Rank-normalization, folding, and localization: an improved R-hat for assessing
    convergence of MCMC. *Bayesian Analysis* 16(2), 667-718.
    """
    chains = _as_chains(x)
    if _is_degenerate(chains):
        return np.nan
    # fmax so that an uninformative folded R-hat (NaN) does not hide the bulk one.
    return float(np.fmax(_rhat_bulk(chains), _rhat_folded(chains)))


def nested_rhat(x: ArrayLike, n_superchains: int) -> float:
    """Nested R-hat of many short chains grouped into superchains (Margossian et al. 2022).

    The chains of a superchain start from the same point, so that they agree says nothing
    about convergence; superchains start apart. Nested R-hat compares the variance between
    the superchains' means with the variance within superchains (between their chains'
    means plus within the chains), so it stays meaningful for chains of a few draws, or of
    one, where split R-hat has no within-chain variance to work with.

    Parameters
    ----------
    x : array-like of shape (n_chains, n_draws)
        Draws of one scalar quantity; consecutive rows form a superchain (chains ``0..M-1``
        the first of ``n_superchains``, and so on).
    n_superchains : int
        ``K``, at least 2, dividing ``n_chains``.

    Returns
    -------
    float
        ``sqrt(1 + B / W)``: close to 1 when the superchains agree. NaN when the
        within-superchain variance is 0 or a draw is not finite.

    References
    ----------
    Margossian, C. C., Hoffman, M. D., Sountsov, P., Riou-Durand, L., Vehtari, A. and
    Gelman, A. (2022). Nested R-hat: assessing the convergence of Markov chain Monte
    Carlo when running many short chains. arXiv:2110.13017.
    """
    chains = _as_chains(x)
    n_chains, n_draws = chains.shape
    k = int(n_superchains)
    if k < 2 or n_chains % k:
        raise ValueError(
            f"n_superchains={n_superchains} must be at least 2 and divide the {n_chains} chains"
        )
    if not np.all(np.isfinite(chains)):
        return np.nan
    m = n_chains // k
    groups = chains.reshape(k, m, n_draws)
    chain_means = groups.mean(axis=2)  # (K, M)
    super_means = chain_means.mean(axis=1)  # (K,)
    between = super_means.var(ddof=1)
    among_chains = chain_means.var(axis=1, ddof=1) if m > 1 else np.zeros(k)
    within_chains = groups.var(axis=2, ddof=1).mean(axis=1) if n_draws > 1 else np.zeros(k)
    within = float(np.mean(among_chains + within_chains))
    if within <= 0.0:
        return np.nan
    return float(np.sqrt(1.0 + between / within))


def _autocovariance(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Biased autocovariance of each row at every lag, by FFT.

    Dividing by ``n`` rather than ``n - lag`` gives the positive semi-definite
    estimate that Geyer (1992) recommends; zero padding to at least ``2 n`` keeps
    the circular correlation of the FFT from wrapping around.
    """
    n = x.shape[1]
    centered = x - x.mean(axis=1, keepdims=True)
    n_fft = scipy.fft.next_fast_len(2 * n, real=True)
    spectrum = scipy.fft.rfft(centered, n=n_fft, axis=1)
    acov = scipy.fft.irfft(spectrum * np.conj(spectrum), n=n_fft, axis=1)[:, :n]
    return acov / n


def _ess_core(x: NDArray[np.float64]) -> float:
    """Multi-chain ESS of already split and transformed chains (Stan's estimator).

    ``x`` of shape (n_chains, n_draws), or (n_chains, n_draws, k) for a vector of ``k``
    coordinates: then the ESS of its mean under the sum of the coordinates' squared
    errors, from their summed autocovariances (one ESS, not the noisier one of each).
    Returns NaN when the draws are constant, for which the autocorrelations are
    undefined.
    """
    n_chains, n_draws = x.shape[:2]
    if np.all(x == x.flat[0]):
        return np.nan
    mean_acov = _autocovariance(x).mean(axis=0)
    chain_means = x.mean(axis=1)
    if x.ndim == 3:
        mean_acov = mean_acov.sum(axis=-1)
    within = mean_acov[0] * n_draws / (n_draws - 1.0)
    var_plus = within * (n_draws - 1.0) / n_draws
    if n_chains > 1:
        var_plus += float(np.sum(np.var(chain_means, axis=0, ddof=1)))
    # Autocorrelations measured against var_plus, not the within-chain variance,
    # so that chains which have not mixed (between-chain variance) lower the ESS.
    rho = 1.0 - (within - mean_acov) / var_plus

    rho_t = np.zeros(n_draws)
    rho_even = 1.0
    rho_odd = rho[1]
    rho_t[0] = rho_even
    rho_t[1] = rho_odd
    # Geyer's initial positive sequence: keep pairs (rho_2k, rho_2k+1) while their
    # sum stays positive; the sum of a pair is positive for any reversible chain, so
    # the first non-positive pair marks where noise dominates.
    t = 0
    while t < n_draws - 5 and rho_even + rho_odd > 0.0:
        t += 2
        rho_even = rho[t]
        rho_odd = rho[t + 1]
        if rho_even + rho_odd >= 0.0:
            rho_t[t] = rho_even
            rho_t[t + 1] = rho_odd
    max_t = t
    # The last even term is kept as a correction that reduces the variance of the
    # estimate for antithetic chains (Stan's "improved" estimate).
    if rho_even > 0.0:
        rho_t[max_t] = rho_even
    # Geyer's initial monotone sequence: pair sums may not increase with the lag.
    for t in range(2, max_t - 1, 2):
        previous = rho_t[t - 2] + rho_t[t - 1]
        if rho_t[t] + rho_t[t + 1] > previous:
            rho_t[t] = previous / 2.0
            rho_t[t + 1] = previous / 2.0

    n_total = n_chains * n_draws
    # The last examined pair enters only through its even term. This is the form of
    # the R package posterior (the paper's reference code) and ArviZ; Stan's C++
    # differs only when the loop stops at the length limit with that pair kept.
    tau_hat = -1.0 + 2.0 * float(np.sum(rho_t[:max_t])) + float(rho_t[max_t])
    # Antithetic chains can give tiny or negative tau_hat; the cap
    # ESS <= S log10(S) keeps the estimate finite and its noise bounded.
    tau_hat = max(tau_hat, 1.0 / np.log10(n_total))
    return float(n_total / tau_hat)


def ess_mean(x: ArrayLike) -> float:
    """Effective sample size for the mean, on the raw scale with split chains.

    Parameters
    ----------
    x : array-like of shape (n_chains, n_draws), (n_draws,) or (n_chains, n_draws, k)
        Draws of one scalar quantity; a 1-D array is one chain. A 3-D array holds the
        draws of a vector of ``k`` coordinates: its ESS is the one that gives the mean's
        summed squared error over the coordinates, from their summed autocovariances
        (weigh the coordinates by scaling them).

    Returns
    -------
    float
        Number of independent draws that would estimate the posterior mean with
        the same Monte Carlo error, at most ``S log10(S)`` for ``S`` draws after
        splitting. Meaningful only when the quantity has a finite variance (use
        :func:`ess_bulk` otherwise). NaN for constant or non-finite draws or fewer
        than 4 draws per chain.

    Raises
    ------
    ValueError
        If ``x`` is not 1-D, 2-D or 3-D.
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim > 3:
        raise ValueError(
            "expected the draws of one quantity, shape (n_chains, n_draws) or (n_draws,), "
            f"or of a vector, (n_chains, n_draws, k); got an array of shape {arr.shape}"
        )
    chains = arr if arr.ndim == 3 else _as_chains(arr)
    if _is_degenerate(chains):
        return np.nan
    return _ess_core(_split_chains(chains))


def ess_bulk(x: ArrayLike) -> float:
    """Bulk effective sample size: ESS of the rank-normalized split chains.

    Parameters
    ----------
    x : array-like of shape (n_chains, n_draws) or (n_draws,)
        Draws of one scalar quantity; a 1-D array is one chain.

    Returns
    -------
    float
        Bulk ESS (Vehtari et al., 2021), a measure of sampling efficiency for
        location summaries (mean, median) that is invariant to monotone
        transformations; at most ``S log10(S)`` for ``S`` draws after splitting.
        NaN for constant or non-finite draws or fewer than 4 draws per chain.

    Raises
    ------
    ValueError
        If ``x`` is neither 1-D nor 2-D.
    """
    chains = _as_chains(x)
    if _is_degenerate(chains):
        return np.nan
    return _ess_core(_z_scale(_split_chains(chains)))


def ess_tail(x: ArrayLike) -> float:
    """Tail effective sample size: the smaller ESS of the 5% and 95% quantiles.

    The ESS of a quantile ``q`` is the ESS of the indicator ``x <= q`` (with ``q``
    estimated from all draws), computed on split chains.

    Parameters
    ----------
    x : array-like of shape (n_chains, n_draws) or (n_draws,)
        Draws of one scalar quantity; a 1-D array is one chain.

    Returns
    -------
    float
        Tail ESS (Vehtari et al., 2021), relevant for the central 90% interval.
        If one indicator is constant (at least about 5% of the draws tie at the
        minimum or maximum) its ESS is undefined and the other one is returned.
        NaN for constant or non-finite draws or fewer than 4 draws per chain.

    Raises
    ------
    ValueError
        If ``x`` is neither 1-D nor 2-D.
    """
    chains = _as_chains(x)
    if _is_degenerate(chains):
        return np.nan
    quantiles = np.quantile(chains, _TAIL_PROBS)
    values = [_ess_core(_split_chains((chains <= q).astype(np.float64))) for q in quantiles]
    return float(np.fmin(*values))


def summary(draws: ArrayLike, names: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """Posterior summaries and convergence diagnostics of every variable.

    Parameters
    ----------
    draws : array-like of shape (n_chains, n_draws, n_vars)
        Posterior draws.
    names : sequence of str, optional
        One distinct name per variable; defaults to ``"theta[0]"``, ``"theta[1]"``, ...

    Returns
    -------
    dict of str to dict of str to float
        For each variable name, a dict with keys ``"mean"``, ``"sd"`` (ddof=1),
        ``"q5"``, ``"q95"`` (pooled over chains), ``"ess_bulk"``, ``"ess_tail"`` and
        ``"rhat"`` (see :func:`ess_bulk`, :func:`ess_tail`, :func:`rhat`), in the
        order of the variables.

    Raises
    ------
    ValueError
        If ``draws`` is not 3-D, or ``names`` has the wrong length or repeats a name.
    """
    arr = np.asarray(draws, dtype=np.float64)
    if arr.ndim != 3:
        raise ValueError(
            "expected draws of shape (n_chains, n_draws, n_vars), got an array with "
            f"ndim={arr.ndim} and shape {arr.shape}"
        )
    n_vars = arr.shape[2]
    if names is None:
        names = [f"theta[{j}]" for j in range(n_vars)]
    else:
        names = [str(name) for name in names]
        if len(names) != n_vars:
            raise ValueError(f"got {len(names)} names for {n_vars} variables")
        if len(set(names)) != n_vars:
            raise ValueError("variable names must be distinct")

    result: dict[str, dict[str, float]] = {}
    for j, name in enumerate(names):
        x = arr[:, :, j]
        pooled = x.ravel()
        has_draws = pooled.size > 0
        q5, q95 = np.quantile(pooled, _TAIL_PROBS) if has_draws else (np.nan, np.nan)
        result[name] = {
            "mean": float(np.mean(pooled)) if has_draws else np.nan,
            "sd": float(np.std(pooled, ddof=1)) if pooled.size > 1 else np.nan,
            "q5": float(q5),
            "q95": float(q95),
            "ess_bulk": ess_bulk(x),
            "ess_tail": ess_tail(x),
            "rhat": rhat(x),
        }
    return result


def _chain_draws(posterior: Any) -> tuple[NDArray[np.float64], tuple[int, int] | None]:
    """Per-chain draws ``(n_chains, n_draws, n_params)`` of a posterior object.

    Also returns the ``(n_chains, n_draws_per_chain)`` layout the draws were cut
    from, when known, so that per-draw statistics can be cut the same way.
    """
    chain_draws = getattr(posterior, "chain_draws", None)
    if chain_draws is not None:
        chain_draws = np.asarray(chain_draws, dtype=np.float64)
        if chain_draws.ndim != 3:
            raise ValueError(
                "posterior_.chain_draws must have shape (n_chains, n_draws, n_params), "
                f"got shape {chain_draws.shape}"
            )
        return chain_draws, None

    thetas = getattr(posterior, "thetas", None)
    chain_shape = getattr(posterior, "chain_shape", None)
    if thetas is not None and chain_shape is not None:
        # skbnn.posterior.WeightedDraws: chains concatenated in order, the total
        # possibly truncated, which shortens only the last chain.
        thetas = np.asarray(thetas, dtype=np.float64)
        n_chains, n_per_chain = (int(v) for v in chain_shape)
        n_total = min(thetas.shape[0], n_chains * n_per_chain)
        if n_total < 1 or n_per_chain < 1:
            raise ValueError("the posterior holds no draws")
        n_present = -(-n_total // n_per_chain)
        # ArviZ needs equal chain lengths: keep the first draws of every chain, as
        # many as the shortest one has, rather than dropping a whole chain.
        length = n_total - (n_present - 1) * n_per_chain
        starts = np.arange(n_present) * n_per_chain
        return np.stack([thetas[s : s + length] for s in starts]), (n_chains, n_per_chain)

    draws = getattr(posterior, "draws", None)
    if draws is not None and np.ndim(draws) == 3:
        return np.asarray(draws, dtype=np.float64), None
    raise ValueError(
        "the posterior has no per-chain draws (posterior_.chain_shape is None: the "
        "method does not run Markov chains); ArviZ export needs MCMC chains"
    )


def to_inference_data(
    estimator: Any, X: ArrayLike | None = None, y: ArrayLike | None = None
) -> Any:
    """Export the per-chain posterior draws of a fitted estimator to ArviZ.

    Parameters
    ----------
    estimator : fitted skbnn estimator, or a fitted Pipeline ending in one
        Its ``posterior_`` must hold Markov chains: either ``chain_draws`` of shape
        ``(n_chains, n_draws, n_params)``, or ``thetas`` of shape
        ``(n_total, n_params)`` with ``chain_shape = (n_chains, n_draws_per_chain)``
        (chains concatenated in order, as :class:`skbnn.posterior.WeightedDraws`).
        If ``n_total`` falls short of ``n_chains * n_draws_per_chain``, every chain
        is cut to the length of the shortest. Entries of ``estimator.diagnostics_``
        (if it is a mapping) that are 2-D arrays of shape
        ``(n_chains, n_draws_per_chain)``, such as the per-draw ``"loglik"``, become
        sample statistics, cut the same way. A Pipeline's earlier steps transform ``X``.
    X : array-like of shape (n_samples, n_features), default=None
        Rows to add the pointwise log-likelihood and the posterior predictive at,
        usually the training rows (as the Pipeline receives them): with ``y``, the
        ``log_likelihood`` group that :func:`arviz.loo` and :func:`arviz.compare` read.
    y : array-like of shape (n_samples,) or (n_samples, n_outputs), default=None
        The targets of ``X``: the ``observed_data`` group.

    Returns
    -------
    arviz.InferenceData
        The posterior group holds the network layer by layer: ``W0`` (dimensions chain,
        draw, ``input``, ``hidden1``), ``b0``, ..., the last layer's ending in
        ``output``, and a regressor's ``noise_std`` per target where each draw has one
        (in y's units); an estimator whose layout is unknown gives ``theta`` (chain,
        draw, parameter index). A single weight is not identified (units can be
        permuted, and ReLU units rescaled), so its R-hat says little: judge convergence
        by the log-likelihood and the predictions. With ``X`` and ``y``: the
        ``log_likelihood`` group (``y``, per draw and row, in y's units, summed over a
        multi-output regressor's targets), ``observed_data`` and ``posterior_predictive``
        (one draw of ``y`` per posterior draw). A posterior whose modes are weighted
        unequally (``mode_weights="stacking"``) is exported with its draws unweighted.

    Raises
    ------
    ImportError
        If ArviZ is not installed (``pip install "skbnn[diagnostics]"``).
    ValueError
        If the estimator is not fitted or its posterior has no chains (e.g. a
        variational or SMC fit), or only one of ``X`` and ``y`` is given.
    """
    try:
        import arviz
    except ImportError as exc:
        raise ImportError(
            'to_inference_data requires arviz; install it with pip install "skbnn[diagnostics]"'
        ) from exc
    from sklearn.pipeline import Pipeline

    if (X is None) != (y is None):
        raise ValueError("give both X and y (the rows of the log_likelihood group), or neither")
    features = None
    if isinstance(estimator, Pipeline):
        if X is not None:
            X = estimator[:-1].transform(X)
        try:
            # the network's inputs are the earlier steps' outputs
            features = estimator[:-1].get_feature_names_out()
        except (AttributeError, ValueError):
            features = None
        estimator = estimator[-1]
    posterior = getattr(estimator, "posterior_", None)
    if posterior is None:
        raise ValueError("the estimator has no posterior_; fit it first")
    chain_draws, declared_shape = _chain_draws(posterior)
    n_chains, n_draws = chain_draws.shape[:2]

    sample_stats: dict[str, NDArray[Any]] = {}
    stats = getattr(estimator, "diagnostics_", None)
    if isinstance(stats, Mapping):
        for key, value in stats.items():
            try:
                value = np.asarray(value)
            except (TypeError, ValueError):
                # Ragged or otherwise non-array statistics cannot be exported.
                continue
            # Only per-draw statistics fit ArviZ's (chain, draw) layout; per-chain
            # summaries and scalars (step sizes, run times) are left out.
            if value.ndim != 2 or not np.issubdtype(value.dtype, np.number):
                continue
            if declared_shape is not None and value.shape == declared_shape:
                value = value[:n_chains, :n_draws]
            if value.shape == (n_chains, n_draws):
                sample_stats[str(key)] = value

    predictive = getattr(estimator, "predictive_", None)
    if predictive is None:
        return arviz.from_dict(
            posterior={"theta": chain_draws},
            sample_stats=sample_stats or None,
        )
    index = _draw_index(posterior, chain_draws.shape[:2], declared_shape)
    variables, dims, coords = _layers(estimator, predictive, chain_draws, index, features)
    groups: dict[str, Any] = {}
    if X is not None:
        groups = _pointwise(estimator, predictive, chain_draws.shape[:2], index, X, y)
        dims.update({"y": ["row"] + (["target"] if np.ndim(y) == 2 else [])})
    return arviz.from_dict(
        posterior=variables,
        sample_stats=sample_stats or None,
        dims=dims,
        coords=coords,
        **groups,
    )


def _draw_index(posterior, shape, declared_shape) -> NDArray[np.int64] | None:
    """Which of ``posterior.thetas`` each exported draw is, shape (chains, draws)."""
    if declared_shape is None:
        return None
    starts = np.arange(shape[0]) * declared_shape[1]
    return starts[:, None] + np.arange(shape[1])[None, :]


def _layers(estimator, predictive, chain_draws, index, features=None) -> tuple[dict, dict, dict]:
    """The posterior's variables layer by layer, with named dimensions."""
    layout = predictive.layout
    sizes = [int(v) for v in layout.sizes]
    names = ["input", *(f"hidden{i}" for i in range(1, len(sizes) - 1)), "output"]
    variables, dims = {}, {}
    for layer, start in enumerate(int(v) for v in layout.offsets):
        n_in, n_out = sizes[layer], sizes[layer + 1]
        w_end = start + n_in * n_out
        variables[f"W{layer}"] = chain_draws[..., start:w_end].reshape(
            *chain_draws.shape[:2], n_in, n_out
        )
        variables[f"b{layer}"] = chain_draws[..., w_end : w_end + n_out]
        dims[f"W{layer}"] = [names[layer], names[layer + 1]]
        dims[f"b{layer}"] = [names[layer + 1]]
    coords = {}
    if features is None:
        features = getattr(estimator, "feature_names_in_", None)
    if features is not None and len(features) == sizes[0]:
        coords["input"] = [str(f) for f in features]
    tau = getattr(estimator.posterior_, "noise_precision", None)
    scale = predictive.y_std
    if tau is not None and index is not None and scale is not None and np.ndim(tau) == 2:
        variables["noise_std"] = np.asarray(scale) / np.sqrt(np.asarray(tau)[index])
        dims["noise_std"] = ["target"]
    return variables, dims, coords


def _pointwise(estimator, predictive, shape, index, X, y) -> dict:
    """The log_likelihood, observed_data and posterior_predictive groups at ``X``, from
    the draws of ``predictive.posterior`` that ``index`` picks (all of them when None),
    exported as ``shape`` (chains, draws)."""
    X = validate_X(estimator, X)
    flat = None if index is None else index.ravel()
    n_draws = int(np.prod(shape))
    rng = np.random.default_rng(0)
    draws = predictive.per_draw(X, flat, n_jobs=getattr(estimator, "n_jobs", None))
    classes = predictive.classes
    loglik = np.empty((n_draws, X.shape[0]))
    if classes is not None:
        y = np.asarray(y)
        code = np.searchsorted(classes, y)
        if np.any(code >= len(classes)) or np.any(classes[np.minimum(code, len(classes) - 1)] != y):
            raise ValueError("y holds labels the classifier was not fitted on")
        predicted = np.empty((n_draws, X.shape[0]), dtype=classes.dtype)
        for rows, p in draws:
            with np.errstate(divide="ignore"):
                loglik[:, rows] = np.log(
                    np.take_along_axis(p, code[rows][None, :, None], 2)[..., 0]
                )
            u = rng.random(p.shape[:2])[..., None]
            predicted[:, rows] = classes[
                np.minimum((np.cumsum(p, -1) < u).sum(-1), len(classes) - 1)
            ]
        observed = y
    else:
        Y = np.asarray(y, dtype=np.float64).reshape(X.shape[0], -1)
        k = Y.shape[1]
        predicted = np.empty((n_draws, X.shape[0], k))
        df = predictive.noise_df
        for rows, mean, sd in draws:
            loglik[:, rows] = noise_logpdf(Y[rows].T[None] - mean, sd, df).sum(axis=1)
            draw = mean + sd * noise_draws(rng, mean.shape, df)
            predicted[:, rows] = np.transpose(draw, (0, 2, 1))
        if np.ndim(y) == 1:
            predicted = predicted[..., 0]
        observed = np.asarray(y, dtype=np.float64)
    return {
        "log_likelihood": {"y": loglik.reshape(*shape, -1)},
        "observed_data": {"y": observed},
        "posterior_predictive": {"y": predicted.reshape(*shape, *predicted.shape[1:])},
    }
