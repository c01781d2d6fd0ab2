"""Tests for skbnn.methods._modes: PSIS, PSIS-LOO and the stacking of modes.

PSIS and PSIS-LOO are checked against ArviZ's implementation (``arviz.psislw`` and
``arviz.loo``, which follow the R package loo) on fixed draws, to rounding error; stacking
against ``arviz.compare(method="stacking")`` and a brute-force grid. Those are identities
and keep fixed seeds. The tests marked ``statistical`` check estimates against known
values (a Pareto shape, a mixture weight); their tolerances come from the estimators'
spread, quoted next to each, with the false-alarm probability it implies, and their seeds
move with ``SKBNN_TEST_SEED_OFFSET``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats

from skbnn.methods._modes import (
    KHAT_THRESHOLD,
    draw_weights,
    loo_pointwise,
    mode_stacking,
    psis,
    stacking_objective,
    stacking_weights,
)

# ArviZ is only the reference here (skbnn does not need it); imported quietly, since it
# announces its coming refactor with a warning, and at collection, so that its import
# time is not charged to the first test.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    az = pytest.importorskip("arviz")


def _arviz_psis(log_ratios: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``arviz.psislw`` in our (S, n) layout (ArviZ puts the draws last)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log_weights, khat = az.psislw(np.ascontiguousarray(log_ratios.T))
    return np.asarray(log_weights).T, np.asarray(khat)


def _random_log_ratios(rng: np.random.Generator, n_draws: int, n_cols: int) -> np.ndarray:
    """Log-ratios whose k-hat spans light to very heavy tails: normal columns of varied
    scale and Student t columns (whose exponentiated right tail has no moments)."""
    lr = rng.standard_normal((n_draws, n_cols)) * rng.uniform(0.1, 3.0, n_cols)
    lr[:, ::4] = rng.standard_t(2.0, (n_draws, lr[:, ::4].shape[1]))
    return lr


# --------------------------------------------------------------------------- PSIS


def test_psis_matches_arviz_psislw():
    lr = _random_log_ratios(np.random.default_rng(0), 1000, 60)
    log_weights, khat = psis(lr)
    ref_weights, ref_khat = _arviz_psis(lr)
    assert khat.min() < 0.3 and khat.max() > 1.0  # both regimes are exercised
    np.testing.assert_allclose(khat, ref_khat, rtol=0, atol=1e-10)
    np.testing.assert_allclose(log_weights, ref_weights, rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.exp(log_weights).sum(axis=0), 1.0, atol=1e-12)


def test_psis_matches_arviz_on_ties_underflow_and_zero_ratios():
    rng = np.random.default_rng(1)
    lr = rng.standard_normal((2000, 6))
    lr[:, 0] = np.round(lr[:, 0] * 0.5, 1)  # repeated values, also at the cutoff
    lr[:, 1] *= 1000.0  # ratios beyond float range: the cutoff is raised to log(tiny)
    lr[:30, 2] = -np.inf  # zero ratios
    lr[:, 3] = np.round(lr[:, 3], 2)  # ties inside the tail only
    log_weights, khat = psis(lr)
    ref_weights, ref_khat = _arviz_psis(lr)
    np.testing.assert_allclose(khat, ref_khat, rtol=0, atol=1e-10)
    # Which of several equal ratios gets which smoothed weight is arbitrary (ArviZ's
    # argsort is not stable), so the columns with ties are compared as sorted sets;
    # a function of the draw that gave the ratio (the LOO density) is the same for all.
    np.testing.assert_allclose(
        np.sort(log_weights, axis=0), np.sort(ref_weights, axis=0), rtol=0, atol=1e-10
    )
    np.testing.assert_allclose(
        log_weights[:, [1, 2, 4, 5]], ref_weights[:, [1, 2, 4, 5]], atol=1e-10
    )


def test_psis_short_tail_is_raw_importance_sampling():
    # S = 20: M = ceil(min(4, 13.4)) = 4 tail draws, too few to fit.
    lr = np.random.default_rng(2).standard_normal((20, 3))
    log_weights, khat = psis(lr)
    assert np.all(np.isinf(khat))
    np.testing.assert_allclose(log_weights, lr - scipy.special.logsumexp(lr, axis=0), atol=1e-12)
    np.testing.assert_allclose(khat, _arviz_psis(lr)[1])


def test_psis_columns_are_independent_and_shift_invariant():
    lr = _random_log_ratios(np.random.default_rng(3), 500, 8)
    before = lr.copy()
    log_weights, khat = psis(lr)
    np.testing.assert_array_equal(lr, before)
    for j in range(lr.shape[1]):
        # a single column also takes the vectorized path, and must not be written to
        column = lr[:, [j]]
        lw_j, k_j = psis(column)
        np.testing.assert_array_equal(column, before[:, [j]])
        np.testing.assert_allclose(lw_j[:, 0], log_weights[:, j], atol=1e-12)
        assert k_j[0] == pytest.approx(khat[j], abs=1e-12)
    shifted_lw, shifted_k = psis(lr + np.linspace(-300.0, 300.0, lr.shape[1]))
    np.testing.assert_allclose(shifted_k, khat, atol=1e-8)
    np.testing.assert_allclose(shifted_lw, log_weights, atol=1e-8)


def test_psis_non_finite_columns():
    lr = np.random.default_rng(4).standard_normal((100, 4))
    lr[5, 1] = np.nan
    lr[[7, 9], 2] = np.inf
    lr[:, 3] = -np.inf
    log_weights, khat = psis(lr)
    assert np.isfinite(khat[0])
    assert np.isnan(khat[1]) and np.all(np.isnan(log_weights[:, 1]))
    # infinite ratios take all the weight, equally
    assert khat[2] == np.inf
    expected = np.full(100, -np.inf)
    expected[[7, 9]] = np.log(0.5)
    np.testing.assert_allclose(log_weights[:, 2], expected)
    assert np.isnan(khat[3]) and np.all(np.isnan(log_weights[:, 3]))
    np.testing.assert_allclose(log_weights[:, 0], psis(lr[:, :1])[0][:, 0])


def test_psis_rejects_bad_input():
    with pytest.raises(ValueError, match="shape"):
        psis(np.zeros(10))
    with pytest.raises(ValueError, match="r_eff"):
        psis(np.zeros((10, 2)), r_eff=0.0)


@pytest.mark.statistical
def test_psis_khat_of_generalized_pareto_ratios(seed):
    """Ratios drawn from a GPD with k = 0.5: every tail of a GPD is a GPD of the same k,
    so k-hat estimates 0.5 with no pre-asymptotic bias, and loo's prior (10 pseudo
    observations at 0.5) does not move it. Over 20 repetitions (S = 2000, M = 135 tail
    draws), the mean over 200 columns was 0.4987 with sd 0.0092 (per column: sd 0.124,
    close to the asymptotic (1 + k) / sqrt(M) = 0.129). The tolerance 0.05 is 5.4 sd
    of that mean: false alarm ~7e-8."""
    rng = np.random.default_rng(10 + seed)
    ratios = scipy.stats.genpareto.rvs(0.5, size=(2000, 200), random_state=rng)
    khat = psis(np.log(ratios))[1]
    assert khat.mean() == pytest.approx(0.5, abs=0.05)


@pytest.mark.statistical
def test_psis_khat_of_normal_and_student_t_ratios(seed):
    """Known tails: proposal N(0, 1) and target N(0, s^2) give ratios with Pareto tail
    k = 1 - 1/s^2 (Vehtari et al. 2024, Section 3.3), times a slowly varying factor (a
    power of log r) that biases k-hat down at finite S. Target N(0, 1) and proposal t_3
    give bounded ratios (k < 0). The checks are loose on purpose: k-hat is consistent only
    up to that bias, measured over 3 x 200 columns of S = 2000 as -0.025 (s^2 = 2) and
    -0.075 (s^2 = 4), with per-column sd 0.12-0.15, so sd 0.01 for a mean over 200
    columns. The bounds k - 0.175 and k + 0.1 are at least 10 sd from the measured means,
    the ordering of the two means (0.2 apart) 15 sd, the sign of the bounded case (mean
    -1.63) far more: false alarm < 1e-12."""
    rng = np.random.default_rng(20 + seed)
    x = rng.standard_normal((2000, 200))
    means = {}
    for s2 in (2.0, 4.0):
        lr = scipy.stats.norm.logpdf(x, scale=np.sqrt(s2)) - scipy.stats.norm.logpdf(x)
        means[s2] = psis(lr)[1].mean()
        assert 1.0 - 1.0 / s2 - 0.1 - 0.075 < means[s2] < 1.0 - 1.0 / s2 + 0.1
    assert means[4.0] > means[2.0]
    t_draws = rng.standard_t(3.0, (2000, 200))
    bounded = scipy.stats.norm.logpdf(t_draws) - scipy.stats.t.logpdf(t_draws, 3.0)
    assert psis(bounded)[1].mean() < 0.0


# ----------------------------------------------------------------------- PSIS-LOO


def _normal_model_loglik(
    rng: np.random.Generator, y: np.ndarray, center: float, spread: float, n_draws: int
) -> tuple[np.ndarray, np.ndarray]:
    """Draws of a location and the unit-variance normal log-likelihood of each y."""
    theta = center + spread * rng.standard_normal(n_draws)
    return theta, scipy.stats.norm.logpdf(y[np.newaxis, :], loc=theta[:, np.newaxis])


def test_loo_pointwise_matches_arviz_loo():
    rng = np.random.default_rng(5)
    y = np.append(rng.standard_normal(80), [4.0, -5.0])  # two outliers: high k-hat rows
    theta, loglik = _normal_model_loglik(rng, y, 0.0, 0.3, 800)
    elpd_i, khat = loo_pointwise(loglik)
    data = az.from_dict(
        posterior={"mu": theta[np.newaxis]}, log_likelihood={"y": loglik[np.newaxis]}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = az.loo(data, pointwise=True, reff=1.0)
    np.testing.assert_allclose(elpd_i, ref.loo_i.values, rtol=0, atol=1e-10)
    np.testing.assert_allclose(khat, ref.pareto_k.values, rtol=0, atol=1e-10)
    assert khat[-1] > khat[:80].max()


def test_loo_pointwise_zero_likelihood_and_bad_values():
    loglik = np.random.default_rng(6).standard_normal((50, 3))
    loglik[4, 1] = -np.inf
    elpd_i, khat = loo_pointwise(loglik)
    assert np.all(np.isfinite(elpd_i[[0, 2]]))
    assert elpd_i[1] == -np.inf and khat[1] == np.inf
    for bad in (np.nan, np.inf):
        loglik[0, 0] = bad
        with pytest.raises(ValueError, match="NaN or \\+inf"):
            loo_pointwise(loglik)


# ----------------------------------------------------------------------- stacking


def _simplex_grid(k: int, step: float) -> np.ndarray:
    """Every point of the K-simplex whose coordinates are multiples of ``step``."""
    n = round(1.0 / step)
    if k == 2:
        a = np.arange(n + 1) / n
        return np.column_stack([a, 1.0 - a])
    i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = i + j <= n
    return np.column_stack([i[keep], j[keep], n - i[keep] - j[keep]]) / n


def _grid_objective(lpd: np.ndarray, grid: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        log_w = np.log(grid)
    return scipy.special.logsumexp(lpd[np.newaxis] + log_w[:, np.newaxis, :], axis=2).sum(axis=1)


@pytest.mark.parametrize("k", [2, 3])
def test_stacking_beats_a_brute_force_grid(k):
    rng = np.random.default_rng(7 + k)
    y = rng.standard_normal(60)
    centers = [0.5, -0.4, 0.1][:k]
    lpd = np.column_stack([scipy.stats.norm.logpdf(y, loc=c, scale=0.9) for c in centers])
    weights = stacking_weights(lpd)
    grid = _simplex_grid(k, 0.005 if k == 2 else 0.01)
    scores = _grid_objective(lpd, grid)
    assert weights.sum() == pytest.approx(1.0, abs=1e-12) and np.all(weights >= 0.0)
    # A grid point cannot beat the optimum; rounding of the sums over 60 rows is ~1e-13.
    assert stacking_objective(lpd, weights) >= scores.max() - 1e-12
    # This objective is well curved: the grid's best point is next to the optimum.
    np.testing.assert_allclose(weights, grid[np.argmax(scores)], atol=0.02)


def test_stacking_matches_arviz_compare():
    rng = np.random.default_rng(8)
    y = rng.standard_normal(100)
    models, lpd = {}, []
    for name, (center, scale) in {"a": (0.3, 1.0), "b": (-0.2, 1.3), "c": (0.0, 0.8)}.items():
        theta = center + 0.1 * rng.standard_normal(400)
        loglik = scipy.stats.norm.logpdf(y[np.newaxis], loc=theta[:, np.newaxis], scale=scale)
        models[name] = az.from_dict(
            posterior={"mu": theta[np.newaxis]}, log_likelihood={"y": loglik[np.newaxis]}
        )
        lpd.append(loo_pointwise(loglik)[0])
    lpd = np.column_stack(lpd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = az.compare(models, ic="loo", method="stacking", scale="log")
    ref = table.loc[list(models), "weight"].to_numpy(dtype=float)
    weights = stacking_weights(lpd)
    # ArviZ stops SLSQP at its default tolerance (objective changes of 1e-6), which
    # leaves its weights about 1e-4 from the optimum on this problem; ours is at least as
    # good a maximum.
    np.testing.assert_allclose(weights, ref, atol=1e-3)
    assert stacking_objective(lpd, weights) >= stacking_objective(lpd, ref) - 1e-10


def _mixture_weight_sd(alpha: float, mu: float, n: int) -> float:
    """Asymptotic sd of the maximum-likelihood weight of N(-mu, 1) in the mixture
    alpha N(-mu, 1) + (1 - alpha) N(mu, 1) with known components: 1 / sqrt(n I), with
    the Fisher information I = int (f1 - f2)^2 / f by quadrature (f negligible beyond
    12 sd from the components)."""

    def integrand(y):
        f1, f2 = scipy.stats.norm.pdf(y, -mu), scipy.stats.norm.pdf(y, mu)
        return (f1 - f2) ** 2 / (alpha * f1 + (1.0 - alpha) * f2)

    info = scipy.integrate.quad(integrand, -mu - 12.0, mu + 12.0, points=[-mu, mu])[0]
    return 1.0 / np.sqrt(n * info)


@pytest.mark.statistical
def test_stacking_recovers_a_mixture_weight(seed):
    """With the two components' exact densities as the models, stacking is the maximum
    likelihood estimate of the mixture weight, asymptotically normal around the true
    0.3 with sd 1 / sqrt(n I) = 0.0157 here (300 simulated repetitions: bias -0.0008,
    sd 0.0158). Tolerance 5 sd: two-sided false alarm 6e-7."""
    alpha, mu, n = 0.3, 2.0, 1000
    rng = np.random.default_rng(30 + seed)
    y = np.where(rng.random(n) < alpha, -mu, mu) + rng.standard_normal(n)
    lpd = np.column_stack([scipy.stats.norm.logpdf(y, -mu), scipy.stats.norm.logpdf(y, mu)])
    weights = stacking_weights(lpd)
    sd = _mixture_weight_sd(alpha, mu, n)
    assert weights[0] == pytest.approx(alpha, abs=5.0 * sd)


def test_stacking_degenerate_inputs():
    rng = np.random.default_rng(9)
    column = rng.standard_normal((40, 1))
    np.testing.assert_array_equal(stacking_weights(column), [1.0])
    # Identical models: every point of the simplex is optimal; test the objective only.
    same = np.repeat(column, 3, axis=1)
    best = stacking_objective(same, stacking_weights(same))
    for point in ([1.0, 0.0, 0.0], [0.0, 0.2, 0.8], [1 / 3, 1 / 3, 1 / 3]):
        assert stacking_objective(same, point) == pytest.approx(best, rel=1e-12)
    # A model with zero density everywhere gets weight exactly 0, and rows where every
    # model is -inf (which score -inf for any weights) do not disturb the others.
    lpd = np.column_stack([column[:, 0], rng.standard_normal(40), np.full(40, -np.inf)])
    weights = stacking_weights(lpd)
    assert weights[2] == 0.0
    padded = np.vstack([lpd, np.full((3, 3), -np.inf)])
    np.testing.assert_allclose(stacking_weights(padded), weights, atol=1e-9)
    with pytest.raises(ValueError, match="every model"):
        stacking_weights(np.full((5, 2), -np.inf))
    with pytest.raises(ValueError, match="NaN"):
        stacking_weights(np.array([[0.0, np.nan]]))


def test_stacking_gives_a_dominated_model_no_weight():
    # Model 1 is model 0 shifted down by log 2 at every row: any weight on it lowers
    # the score, so the optimum is the vertex (1, 0), approached by the softmax.
    lpd0 = np.random.default_rng(11).standard_normal(50)
    weights = stacking_weights(np.column_stack([lpd0, lpd0 - np.log(2.0)]))
    assert weights[1] < 1e-6


# -------------------------------------------------------------- stacking of modes


@pytest.mark.statistical
def test_mode_stacking_weights_two_modes_like_their_mixture(seed):
    """Two tight modes at -2 and +2 of a unit-variance location model; the data are the
    mixture 0.3 N(-2, 1) + 0.7 N(2, 1). Each mode's leave-one-out predictive is its
    component up to the modes' spread (sd 0.05, i.e. variance 1.0025 instead of 1), so
    the weight of mode 0 is the mixture weight's estimate of the test above (sd 0.0157
    at n = 1000), shifted by far less than one sd. Tolerance 5 sd: false alarm ~6e-7.
    A mode with one draw and a mode of -inf log-likelihood get weight 0 and a reason,
    and do not change the others' weights."""
    alpha, mu, n = 0.3, 2.0, 1000
    rng = np.random.default_rng(40 + seed)
    y = np.where(rng.random(n) < alpha, -mu, mu) + rng.standard_normal(n)
    draws = []
    for center in (-mu, mu):
        draws.append(_normal_model_loglik(rng, y, center, 0.05, 150)[1])
    loglik = np.vstack(draws)
    mode_of_draw = np.repeat([0, 1], 150)
    result = mode_stacking(loglik, mode_of_draw)
    sd = _mixture_weight_sd(alpha, mu, n)
    assert result["weights"][0] == pytest.approx(alpha, abs=5.0 * sd)
    assert result["excluded"] == {}
    np.testing.assert_array_equal(result["n_draws"], [150, 150])
    assert np.all(result["khat_max"] < KHAT_THRESHOLD)
    np.testing.assert_array_equal(result["khat_share_high"], [0.0, 0.0])
    np.testing.assert_allclose(result["elpd_loo"], result["elpd_loo_i"].sum(axis=0))
    assert result["elpd_stacked"] > result["elpd_loo"].max()

    single = _normal_model_loglik(rng, y, 0.0, 0.05, 1)[1]
    broken = np.full((20, n), -np.inf)
    more = mode_stacking(
        np.vstack([loglik, single, broken]), np.concatenate([mode_of_draw, [2], np.full(20, 3)])
    )
    np.testing.assert_allclose(more["weights"], np.append(result["weights"], [0.0, 0.0]))
    assert set(more["excluded"]) == {2, 3}
    assert "single draw" in more["excluded"][2] and "-inf" in more["excluded"][3]
    assert np.isnan(more["elpd_loo"][2]) and more["elpd_loo"][3] == -np.inf


def test_mode_stacking_edge_cases():
    loglik = np.random.default_rng(12).standard_normal((60, 5))
    one = mode_stacking(loglik, np.zeros(60, dtype=int))
    np.testing.assert_array_equal(one["weights"], [1.0])
    # a mode without draws (n_modes beyond the labels) is reported, not stacked
    empty = mode_stacking(loglik, np.zeros(60, dtype=int), n_modes=2)
    np.testing.assert_array_equal(empty["weights"], [1.0, 0.0])
    assert empty["excluded"] == {1: "no draws"}
    bad = loglik.copy()
    bad[:30] = np.nan
    nan_mode = mode_stacking(bad, np.repeat([0, 1], 30))
    np.testing.assert_array_equal(nan_mode["weights"], [0.0, 1.0])
    assert "NaN" in nan_mode["excluded"][0]
    with pytest.raises(ValueError, match="no mode can be stacked: mode 0: a single draw"):
        mode_stacking(loglik[:1], [0])
    with pytest.raises(ValueError, match="shape"):
        mode_stacking(loglik, np.zeros(59, dtype=int))
    with pytest.raises(ValueError, match="non-negative integers"):
        mode_stacking(loglik, np.full(60, -1))
    with pytest.raises(ValueError, match="n_modes"):
        mode_stacking(loglik, np.repeat([0, 1], 30), n_modes=1)


def test_draw_weights_spread_each_modes_weight_over_its_draws():
    mode_of_draw = np.array([0, 0, 1, 1, 1, 1, 2])
    weights = draw_weights(mode_of_draw, [0.5, 0.5, 0.0])
    np.testing.assert_allclose(weights, [0.25, 0.25, 0.125, 0.125, 0.125, 0.125, 0.0])
    # weight on a mode without draws is renormalized away
    np.testing.assert_allclose(draw_weights([0, 0, 1], [0.2, 0.2, 0.6]), [0.25, 0.25, 0.5])
    with pytest.raises(ValueError, match="0..1"):
        draw_weights([0, 2], [0.5, 0.5])
    with pytest.raises(ValueError, match="non-negative"):
        draw_weights([0, 1], [1.5, -0.5])
    with pytest.raises(ValueError, match="total weight 0"):
        draw_weights([0, 0], [0.0, 1.0])
