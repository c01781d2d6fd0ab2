"""Tests for skbnn.diagnostics.

Statistical tolerances are derived from the Monte Carlo spread of the estimators
(R-hat: its approximate F sampling distribution; ESS: repeated simulation of the
same experiment, quoted next to each test, with the false-alarm probability it
implies), never tuned until the tests pass. The tests whose assertions depend on the
random draws are marked ``statistical`` and shift their seeds by
``SKBNN_TEST_SEED_OFFSET``; the others (identities with reference implementations,
invariances, degenerate input) hold for any draws and keep fixed seeds.
"""

from __future__ import annotations

import sys
import types
import warnings

import arviz as az
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.signal import lfilter

from skbnn import diagnostics as diag
from skbnn.posterior import WeightedDraws

SCALAR_DIAGNOSTICS = [diag.rhat, diag.ess_bulk, diag.ess_tail, diag.ess_mean]


def _ar1(rng: np.random.Generator, phi: float, n_chains: int, n_draws: int) -> np.ndarray:
    """Gaussian AR(1) chains with unit innovations, started in the stationary law."""
    noise = rng.standard_normal((n_chains, n_draws))
    # x_0 = e_0 / sqrt(1 - phi^2) has the stationary variance, so no burn-in is needed.
    noise[:, 0] /= np.sqrt(1.0 - phi**2)
    return lfilter([1.0], [1.0, -phi], noise, axis=1)


def _rhat_null_bounds(n_split_chains: int, n_half: int, tail: float = 1e-6) -> tuple[float, float]:
    """Range of split R-hat for well-mixed chains, from its sampling distribution.

    R-hat^2 = (n - 1)/n + (B/W)/n with B/W approximately F(m - 1, m (n - 1)) ~
    chi2_{m-1}/(m-1) under iid draws (m half-chains of n draws). B >= 0 gives the
    hard lower bound; the upper bound is the 1 - ``tail`` quantile, so a correct
    implementation fails with probability ~1e-6 per call (x2 for the bulk/folded max).
    The sd of R-hat is about sqrt(2/(m-1))/(2n), i.e. 5e-4 for 4 chains x 1000 draws,
    which matches the simulated 5.2e-4.
    """
    lower = np.sqrt((n_half - 1.0) / n_half)
    f_hi = scipy.stats.chi2.ppf(1.0 - tail, n_split_chains - 1) / (n_split_chains - 1)
    upper = np.sqrt((n_half - 1.0 + f_hi) / n_half)
    return float(lower), float(upper)


def _ar1_indicator_ess(n_total: int, phi: float, prob: float, n_terms: int = 2000) -> float:
    """Exact asymptotic ESS of the indicator ``x <= q_prob`` for a Gaussian AR(1).

    With h = Phi^-1(prob) and corr(x_t, x_t+k) = phi^k, Mehler's expansion gives
    cov(I_t, I_t+k) = pdf(h)^2 sum_j phi^(jk) He_{j-1}(h)^2 / j!, and summing the
    geometric series over k >= 1 gives tau = 1 + 2 sum_k rho_k in closed form per j.
    ``e`` below is the normalized Hermite polynomial He_{j-1}(h) / sqrt((j-1)!).
    """
    h = scipy.stats.norm.ppf(prob)
    e_prev, e = 0.0, 1.0
    total = 0.0
    for j in range(1, n_terms):
        total += e * e / j * phi**j / (1.0 - phi**j)
        e_prev, e = e, (h * e - np.sqrt(j - 1.0) * e_prev) / np.sqrt(j)
    tau = 1.0 + 2.0 * scipy.stats.norm.pdf(h) ** 2 * total / (prob * (1.0 - prob))
    return n_total / tau


# --- naive reference implementations, written independently of the module -------------


def _naive_split(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    first = [chain[: n // 2] for chain in x]
    second = [chain[(n + 1) // 2 :] for chain in x]
    return np.array(first + second)


def _naive_rhat(chains: np.ndarray) -> float:
    """Textbook potential scale reduction (BDA3 eq. 11.3-11.4) with explicit loops."""
    m, n = chains.shape
    means = [sum(chain) / n for chain in chains]
    grand = sum(means) / m
    b = n / (m - 1) * sum((mu - grand) ** 2 for mu in means)
    w = (
        sum(
            sum((v - mu) ** 2 for v in chain) / (n - 1)
            for chain, mu in zip(chains, means, strict=True)
        )
        / m
    )
    var_plus = (n - 1) / n * w + b / n
    return float(np.sqrt(var_plus / w))


def _naive_z_scale(x: np.ndarray) -> np.ndarray:
    """Normal scores of ranks; valid for data without ties only."""
    ranks = np.empty(x.size)
    ranks[np.argsort(x, axis=None)] = np.arange(1, x.size + 1)
    return scipy.stats.norm.ppf((ranks.reshape(x.shape) - 0.375) / (x.size + 0.25))


def _naive_ess(chains: np.ndarray) -> float:
    """Stan's ESS with O(n^2) autocovariances, in Stan's own (odd) loop indexing."""
    m, n = chains.shape
    acov = np.zeros((m, n))
    for c in range(m):
        y = chains[c] - chains[c].mean()
        for lag in range(n):
            acov[c, lag] = np.dot(y[: n - lag], y[lag:]) / n
    mean_var = np.mean(acov[:, 0] * n / (n - 1))
    var_plus = mean_var * (n - 1) / n + np.var(chains.mean(axis=1), ddof=1)
    rho = np.zeros(n)
    even = rho[0] = 1.0
    odd = rho[1] = 1.0 - (mean_var - acov[:, 1].mean()) / var_plus
    s = 1
    while s < n - 4 and even + odd > 0:
        even = 1.0 - (mean_var - acov[:, s + 1].mean()) / var_plus
        odd = 1.0 - (mean_var - acov[:, s + 2].mean()) / var_plus
        if even + odd >= 0:
            rho[s + 1], rho[s + 2] = even, odd
        s += 2
    max_s = s
    # Stan's C++ puts this term at max_s + 1 and sums rho[:max_s]; that differs from
    # the R package posterior (the paper's reference code) and ArviZ only when the
    # loop stops at the length limit with the last pair kept. Follow posterior/ArviZ:
    # the last examined pair (max_s - 1, max_s) is left out except for its even term.
    if even > 0:
        rho[max_s - 1] = even
    for s in range(1, max_s - 2, 2):
        if rho[s + 1] + rho[s + 2] > rho[s - 1] + rho[s]:
            rho[s + 1] = rho[s + 2] = (rho[s - 1] + rho[s]) / 2
    tau = -1.0 + 2.0 * rho[: max_s - 1].sum() + rho[max_s - 1]
    total = m * n
    return total / max(tau, 1.0 / np.log10(total))


# --- R-hat -------------------------------------------------------------------------------


@pytest.mark.statistical
def test_rhat_iid_normal_within_sampling_bounds(seed):
    x = np.random.default_rng(0 + seed).standard_normal((4, 1000))
    lower, upper = _rhat_null_bounds(n_split_chains=8, n_half=500)
    # lower ~ 0.9990, upper ~ 1.0040; false alarm ~2e-6 (bulk and folded at 1e-6 each)
    assert lower <= diag.rhat(x) <= upper


@pytest.mark.statistical
def test_rhat_detects_shifted_chain(seed):
    rng = np.random.default_rng(1 + seed)
    x = rng.standard_normal((4, 1000))
    x[0] += 1.0
    # Population value: the 8 half-chain means are (1, 1, 0, ..., 0), whose sample
    # variance is 2 * 6 / (8 * 7) = 3/14, against a within-chain variance of 1, so
    # R-hat ~ sqrt(1 + 3/14) = 1.102. Over 2000 simulated replications its mean was
    # 1.101 and its sd 0.0072, range 1.078 to 1.126: the tolerance 0.027 is 3.6 sd below
    # the mean and 3.9 above, 2e-4 in all; 1.05 is 7 sd below. (A bare "R-hat > 1.1"
    # would fail for about half of the seeds, since 1.1 is the expected value.)
    value = diag.rhat(x)
    assert value == pytest.approx(np.sqrt(1.0 + 3.0 / 14.0), abs=0.027)
    assert value > 1.05
    # The location shift is seen by the bulk part.
    assert diag._rhat_bulk(x) == value


@pytest.mark.statistical
def test_rhat_detects_scale_difference_only_through_folding(seed):
    rng = np.random.default_rng(2 + seed)
    x = rng.standard_normal((4, 1000))
    x[0] *= 3.0
    # Simulated (2000 replications): rhat mean 1.145, sd 0.0094, min 1.115: 1.05 is 10 sd
    # below. The bulk R-hat had sd 5.9e-4 (the null's 5e-4) and at most 1.0032, inside the
    # null bounds (1e-6 tails).
    assert diag.rhat(x) > 1.05
    assert diag._rhat_folded(x) == diag.rhat(x)
    # The chains share their median, so the bulk R-hat alone stays within the null
    # range of well-mixed chains and would miss the problem.
    lower, upper = _rhat_null_bounds(n_split_chains=8, n_half=500)
    assert lower <= diag._rhat_bulk(x) <= upper


@pytest.mark.statistical
def test_rhat_single_chain_is_split_and_catches_a_trend(seed):
    rng = np.random.default_rng(3 + seed)
    y = rng.standard_normal(1000) + np.linspace(0.0, 2.0, 1000)
    # The two halves differ in mean by ~1 with within-half variance ~1 + 1/12, so
    # R-hat ~ sqrt(1 + 0.5/1.08) = 1.21, with sd ~0.025 from the noise in the means
    # (2000 simulations: 1.209 +- 0.0255, min 1.138): 1.1 is 4.3 sd below, 1e-5 one-sided;
    # the stationary chain's null bounds have 1e-6 tails.
    assert diag.rhat(y) > 1.1
    assert diag.rhat(y) == diag.rhat(y[np.newaxis, :])
    stationary = rng.standard_normal(1000)
    lower, upper = _rhat_null_bounds(n_split_chains=2, n_half=500)
    assert lower <= diag.rhat(stationary) <= upper


def test_split_rhat_matches_textbook_formula():
    # Odd length, so the middle draw must be dropped for the two to agree.
    x = np.random.default_rng(4).standard_normal((3, 41)) + np.array([[0.0], [0.3], [-0.2]])
    assert diag._split_rhat(x) == pytest.approx(_naive_rhat(_naive_split(x)), rel=1e-12)


def test_rank_rhat_matches_textbook_formula_on_naive_ranks():
    x = np.random.default_rng(5).standard_normal((3, 41)) ** 3
    split = _naive_split(x)
    assert diag._rhat_bulk(x) == pytest.approx(_naive_rhat(_naive_z_scale(split)), rel=1e-12)
    folded = np.abs(split - np.median(split))
    assert diag._rhat_folded(x) == pytest.approx(_naive_rhat(_naive_z_scale(folded)), rel=1e-12)


def test_split_chains_drops_middle_draw():
    x = np.arange(10.0).reshape(2, 5)
    np.testing.assert_array_equal(
        diag._split_chains(x), [[0.0, 1.0], [5.0, 6.0], [3.0, 4.0], [8.0, 9.0]]
    )


def test_z_scale_averages_ties():
    z = diag._z_scale(np.array([[1.0, 2.0, 2.0, 3.0]]))
    expected = scipy.stats.norm.ppf((np.array([1.0, 2.5, 2.5, 4.0]) - 0.375) / 4.25)
    np.testing.assert_allclose(z, [expected], rtol=1e-12)


# --- ESS ---------------------------------------------------------------------------------


@pytest.mark.parametrize("phi", [0.5, 0.9, -0.5])
@pytest.mark.parametrize("base", range(8))
def test_ess_matches_naive_stan_estimator(phi, base):
    # Short, strongly autocorrelated chains exercise the monotone correction and the
    # final even term; odd length exercises the split. An identity for any draws.
    x = _ar1(np.random.default_rng(base), phi, 3, 61)
    split = _naive_split(x)
    assert diag.ess_mean(x) == pytest.approx(_naive_ess(split), rel=1e-10)
    assert diag.ess_bulk(x) == pytest.approx(_naive_ess(_naive_z_scale(split)), rel=1e-10)
    q05, q95 = np.quantile(x, [0.05, 0.95])
    tail = min(_naive_ess(_naive_split((x <= q).astype(float))) for q in (q05, q95))
    assert diag.ess_tail(x) == pytest.approx(tail, rel=1e-10)


@pytest.mark.parametrize("base", range(4))
def test_the_ess_of_a_vector_sums_its_coordinates_autocovariances(base):
    # identities for any draws: one coordinate is the scalar's ESS, copies of it or a
    # rescaled copy change nothing, and two coordinates weigh by their variances
    x = _ar1(np.random.default_rng(base), 0.7, 3, 61)
    y = np.random.default_rng(base + 100).standard_normal((3, 61))
    one = diag.ess_mean(x)
    assert diag.ess_mean(x[..., None]) == pytest.approx(one, rel=1e-12)
    assert diag.ess_mean(np.stack([x, 3.0 * x], axis=-1)) == pytest.approx(one, rel=1e-12)
    both = diag.ess_mean(np.stack([x, y], axis=-1))
    assert min(one, diag.ess_mean(y)) <= both <= max(one, diag.ess_mean(y))
    # a coordinate scaled far up rules the vector's ESS
    ruled = diag.ess_mean(np.stack([x, 1e6 * y], axis=-1))
    assert ruled == pytest.approx(diag.ess_mean(y), rel=1e-6)
    with pytest.raises(ValueError, match="of a vector"):
        diag.ess_mean(np.zeros((2, 8, 2, 2)))


@pytest.mark.statistical
def test_ess_iid_normal_close_to_number_of_draws(seed):
    # 1000 simulated replications of 4 x 1000 iid draws gave ess_bulk / S with mean
    # 0.985 and sd 0.043, and ess_tail / S with mean 0.960 and sd 0.042 (the Geyer
    # truncation keeps positive noise in the autocorrelations, biasing tau upwards).
    # Averaging 16 replications: tolerance = |bias| + 4 * sd / sqrt(16), so each average
    # is 4 of its sd from the near edge: 3e-5 each, 6e-5 for the two.
    rng = np.random.default_rng(7 + seed)
    n_rep, n_total = 16, 4000
    bulk, tail = [], []
    for _ in range(n_rep):
        x = rng.standard_normal((4, 1000))
        bulk.append(diag.ess_bulk(x) / n_total)
        tail.append(diag.ess_tail(x) / n_total)
    assert np.mean(bulk) == pytest.approx(1.0, abs=0.015 + 4 * 0.043 / np.sqrt(n_rep))
    assert np.mean(tail) == pytest.approx(1.0, abs=0.040 + 4 * 0.042 / np.sqrt(n_rep))


@pytest.mark.statistical
def test_ess_ar1_matches_theory(seed):
    # three comparisons at 4 sd of their average (the tail's from its simulated mean):
    # two-sided 6.3e-5 each, under 2e-4 in all
    phi, n_chains, n_draws, n_rep = 0.9, 4, 5000, 25
    n_total = n_chains * n_draws
    rng = np.random.default_rng(8 + seed)
    bulk, mean, tail = [], [], []
    for _ in range(n_rep):
        x = _ar1(rng, phi, n_chains, n_draws)
        bulk.append(diag.ess_bulk(x))
        mean.append(diag.ess_mean(x))
        tail.append(diag.ess_tail(x))
    # For the mean: S (1 - phi) / (1 + phi) = 1052.6. 600 simulated replications:
    # ess_bulk mean 1054.7, sd 86.6 (ess_mean alike), so no visible bias and a
    # tolerance of 4 sd of the average of n_rep replications.
    theory_mean = n_total * (1 - phi) / (1 + phi)
    tol = 4 * 86.6 / np.sqrt(n_rep)
    assert np.mean(bulk) == pytest.approx(theory_mean, abs=tol)
    assert np.mean(mean) == pytest.approx(theory_mean, abs=tol)
    # For the 5%/95% indicators the exact value is 2334 (symmetric, so both equal);
    # simulation: mean 2235 (the same -4% truncation bias as for iid), sd 226.
    theory_tail = _ar1_indicator_ess(n_total, phi, 0.05)
    assert theory_tail == pytest.approx(2334.0, abs=1.0)
    assert np.mean(tail) == pytest.approx(theory_tail, abs=100.0 + 4 * 226.0 / np.sqrt(n_rep))


@pytest.mark.statistical
def test_ess_antithetic_chain_is_capped(seed):
    # phi = -0.9 has tau = 0.1 / 1.9 ~ 0.05, far below the floor 1 / log10(S) ~ 0.28,
    # so the estimate must sit exactly on the cap S log10(S) (in 2000 simulations it
    # always did).
    x = _ar1(np.random.default_rng(9 + seed), -0.9, 4, 1000)
    assert diag.ess_mean(x) == pytest.approx(4000 * np.log10(4000), rel=1e-12)


@pytest.mark.statistical
def test_ess_uses_between_chain_variance(seed):
    # Each chain is iid, so per-chain autocorrelations are ~0; only the between-chain
    # term in var_plus can make the ESS collapse (2000 simulations: 26 +- 2, at most 37,
    # instead of ~4000).
    rng = np.random.default_rng(10 + seed)
    x = rng.standard_normal((4, 1000))
    x[0] += 1.0
    assert diag.ess_bulk(x) < 400
    assert diag.ess_mean(x) < 400


def test_ess_tail_ignores_undefined_quantile_indicator():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 200))
    # 10% of the draws tie at the maximum: x <= q95 is always true, so only the 5%
    # indicator is informative.
    x[:, :20] = x.max() + 1.0
    assert np.isfinite(diag.ess_tail(x))


# --- invariances ---------------------------------------------------------------------------


@pytest.mark.statistical
def test_rank_diagnostics_invariant_to_monotone_transform(seed):
    # antithetic AR(1) chains with unit stationary variance
    phi = -0.5
    x = _ar1(np.random.default_rng(12 + seed), phi, 4, 1000) * np.sqrt(1.0 - phi**2)
    y = np.exp(x)
    assert diag._rhat_bulk(y) == pytest.approx(diag._rhat_bulk(x), rel=1e-12)
    assert diag.ess_bulk(y) == pytest.approx(diag.ess_bulk(x), rel=1e-12)
    assert diag.ess_tail(y) == pytest.approx(diag.ess_tail(x), rel=1e-12)
    # The raw-scale ESS has no such invariance. exp(x) has lag-k autocorrelation
    # (e^(phi^k) - 1) / (e - 1), which damps the alternating signs of x's phi^k: tau rises
    # from (1 + phi) / (1 - phi) = 1/3 to 0.787 and the ESS falls to 0.42 of x's. Over 2000
    # simulations the ratio was 0.415 +- 0.051, at most 0.61 (99.9 % quantile 0.59): a
    # ratio of 1, what an invariant estimator gives, fails, and 0.8 is 7.5 sd above.
    ratio = diag.ess_mean(y) / diag.ess_mean(x)
    assert ratio < 0.8, ratio


def _same(a: float, b: float) -> bool:
    return bool(np.isclose(a, b, rtol=1e-9, atol=0.0) or (np.isnan(a) and np.isnan(b)))


@settings(max_examples=40, deadline=None)
@given(
    n_chains=st.integers(1, 4),
    n_draws=st.integers(4, 40),
    data_seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([-3.0, 0.5, 2.0]),
    perm_seed=st.integers(0, 100),
)
def test_invariance_to_chain_order_and_affine_maps(n_chains, n_draws, data_seed, scale, perm_seed):
    # Small integers give many ties and keep the affine map exact in floating point.
    x = np.random.default_rng(data_seed).integers(-3, 4, size=(n_chains, n_draws)).astype(float)
    y = scale * x[np.random.default_rng(perm_seed).permutation(n_chains)] + 1.0
    assert _same(diag.rhat(y), diag.rhat(x))
    assert _same(diag.ess_bulk(y), diag.ess_bulk(x))
    if scale > 0:
        assert _same(diag.ess_tail(y), diag.ess_tail(x))
        assert _same(diag.ess_mean(y), diag.ess_mean(x))


# --- degenerate input ----------------------------------------------------------------------


@pytest.mark.parametrize("func", SCALAR_DIAGNOSTICS)
@pytest.mark.parametrize(
    "x",
    [np.full((4, 100), 2.5), np.ones(50), np.zeros((2, 3)), np.array([[0.0, 1.0, np.nan, 2.0]])],
    ids=["constant", "constant-1d", "three-draws", "nan"],
)
def test_undefined_diagnostics_are_nan(func, x):
    assert np.isnan(func(x))


@pytest.mark.parametrize("func", SCALAR_DIAGNOSTICS)
def test_one_dimensional_input_is_one_chain(func):
    y = _ar1(np.random.default_rng(13), 0.5, 1, 501)[0]
    value = func(y)
    assert np.isfinite(value)
    assert value == func(y[np.newaxis, :])


@pytest.mark.parametrize("func", SCALAR_DIAGNOSTICS)
@pytest.mark.parametrize("shape", [(), (2, 10, 3)])
def test_wrong_ndim_raises(func, shape):
    if func is diag.ess_mean and len(shape) == 3:
        shape = (*shape, 2)  # its 3-D input is a vector's draws
    with pytest.raises(ValueError, match=r"\(n_chains, n_draws\)"):
        func(np.zeros(shape))


# --- summary -------------------------------------------------------------------------------


def test_summary_structure_and_values():
    rng = np.random.default_rng(14)
    draws = rng.standard_normal((2, 200, 3)) * np.array([1.0, 2.0, 0.5])
    out = diag.summary(draws, names=["a", "b", "c"])
    assert list(out) == ["a", "b", "c"]
    keys = ["mean", "sd", "q5", "q95", "ess_bulk", "ess_tail", "rhat"]
    for j, name in enumerate(out):
        stats = out[name]
        assert list(stats) == keys
        assert all(type(v) is float for v in stats.values())
        pooled = draws[:, :, j].ravel()
        assert stats["mean"] == pytest.approx(pooled.mean())
        assert stats["sd"] == pytest.approx(pooled.std(ddof=1))
        assert [stats["q5"], stats["q95"]] == pytest.approx(np.quantile(pooled, [0.05, 0.95]))
        assert stats["rhat"] == diag.rhat(draws[:, :, j])
        assert stats["ess_bulk"] == diag.ess_bulk(draws[:, :, j])
        assert stats["ess_tail"] == diag.ess_tail(draws[:, :, j])


def test_summary_default_names_and_validation():
    draws = np.random.default_rng(15).standard_normal((2, 50, 2))
    assert list(diag.summary(draws)) == ["theta[0]", "theta[1]"]
    with pytest.raises(ValueError, match="n_vars"):
        diag.summary(draws[:, :, 0])
    with pytest.raises(ValueError, match="3 names for 2 variables"):
        diag.summary(draws, names=["a", "b", "c"])
    with pytest.raises(ValueError, match="distinct"):
        diag.summary(draws, names=["a", "a"])


# --- ArviZ export --------------------------------------------------------------------------


def _fitted(diagnostics=None, **posterior_attrs):
    return types.SimpleNamespace(
        posterior_=types.SimpleNamespace(**posterior_attrs), diagnostics_=diagnostics
    )


@pytest.fixture
def fake_arviz(monkeypatch):
    """Stand-in arviz module recording the arguments of from_dict."""
    calls = []
    fake = types.ModuleType("arviz")
    fake.from_dict = lambda **kwargs: calls.append(kwargs) or "idata"
    monkeypatch.setitem(sys.modules, "arviz", fake)
    return calls


def test_to_inference_data_without_arviz_names_the_extra(monkeypatch):
    # A None entry in sys.modules makes "import arviz" fail even where it is installed.
    monkeypatch.setitem(sys.modules, "arviz", None)
    with pytest.raises(ImportError, match=r'pip install "skbnn\[diagnostics\]"'):
        diag.to_inference_data(_fitted(chain_draws=np.zeros((2, 5, 3))))


def test_to_inference_data_from_weighted_draws_layout(fake_arviz):
    # WeightedDraws layout: chains concatenated, chain_shape=(n_chains, n_per_chain).
    chain_draws = np.arange(30.0).reshape(2, 5, 3)
    loglik = np.arange(10.0).reshape(2, 5)
    stats = {
        "loglik": loglik,
        "step_size": np.array([0.1, 0.2]),
        "n_chains": 2,
        "ragged": [[1.0], [1.0, 2.0]],
        "method": "nuts",
    }
    posterior = WeightedDraws(chain_draws.reshape(10, 3), chain_shape=(2, 5))
    fitted = types.SimpleNamespace(posterior_=posterior, diagnostics_=stats)
    assert diag.to_inference_data(fitted) == "idata"
    np.testing.assert_array_equal(fake_arviz[0]["posterior"]["theta"], chain_draws)
    assert list(fake_arviz[0]["sample_stats"]) == ["loglik"]
    np.testing.assert_array_equal(fake_arviz[0]["sample_stats"]["loglik"], loglik)


def test_to_inference_data_cuts_chains_to_a_common_length(fake_arviz):
    # 9 of 2 x 5 draws kept: the second chain has 4 draws, so both are cut to 4.
    chain_draws = np.arange(30.0).reshape(2, 5, 3)
    loglik = np.arange(10.0).reshape(2, 5)
    fitted = _fitted({"loglik": loglik}, thetas=chain_draws.reshape(10, 3)[:9], chain_shape=(2, 5))
    diag.to_inference_data(fitted)
    np.testing.assert_array_equal(fake_arviz[0]["posterior"]["theta"], chain_draws[:, :4])
    np.testing.assert_array_equal(fake_arviz[0]["sample_stats"]["loglik"], loglik[:, :4])


def test_to_inference_data_other_layouts_and_errors(fake_arviz):
    chain_draws = np.arange(30.0).reshape(2, 5, 3)
    diag.to_inference_data(_fitted(chain_draws=chain_draws))
    np.testing.assert_array_equal(fake_arviz[0]["posterior"]["theta"], chain_draws)
    assert fake_arviz[0]["sample_stats"] is None

    with pytest.raises(ValueError, match="per-chain draws"):
        diag.to_inference_data(_fitted(thetas=np.zeros((10, 3)), chain_shape=None))
    with pytest.raises(ValueError, match=r"shape \(n_chains, n_draws, n_params\)"):
        diag.to_inference_data(_fitted(chain_draws=np.zeros((10, 3))))
    with pytest.raises(ValueError, match="fit it first"):
        diag.to_inference_data(types.SimpleNamespace())


def _arviz_cases():
    rng = np.random.default_rng(11)
    shift = rng.standard_normal((4, 300))
    shift[3] += 0.5
    walk = np.cumsum(rng.standard_normal((4, 500)), axis=1) * 0.05 + rng.standard_normal((4, 500))
    walk[2] += 0.3
    return {
        "iid": rng.standard_normal((4, 500)),
        "ar1-odd-length": _ar1(rng, 0.9, 4, 501),
        "antithetic": _ar1(rng, -0.6, 3, 400),
        "capped": _ar1(rng, -0.9, 2, 300),
        "cauchy": rng.standard_cauchy((4, 300)),
        "shifted-chain": shift,
        "random-walk": walk,
        "trend": rng.standard_normal((2, 400)) + np.linspace(0.0, 2.0, 400),
        "ties": rng.integers(0, 5, (4, 200)).astype(float),
        "one-chain": _ar1(rng, 0.5, 1, 301),
    }


@pytest.mark.parametrize("name", list(_arviz_cases()))
def test_matches_arviz(name):
    # An independent implementation of the same estimators (arviz is in the "test" extra),
    # on several kinds of chains; an identity for any draws, so not a statistical test.
    # ArviZ leaves R-hat of a single chain undefined where skbnn splits it (tested above),
    # and counts a constant quantile indicator as fully efficient where skbnn ignores it
    # (test_ess_tail_ignores_undefined_quantile_indicator); neither case is compared here.
    x = _arviz_cases()[name]
    if x.shape[0] > 1:
        assert diag.rhat(x) == pytest.approx(float(az.rhat(x, method="rank")), rel=1e-10)
    assert diag.ess_bulk(x) == pytest.approx(float(az.ess(x, method="bulk")), rel=1e-10)
    assert diag.ess_tail(x) == pytest.approx(float(az.ess(x, method="tail")), rel=1e-10)
    assert diag.ess_mean(x) == pytest.approx(float(az.ess(x, method="mean")), rel=1e-10)


def test_nested_rhat_against_its_definition_and_its_limits():
    from skbnn.diagnostics import nested_rhat

    rng = np.random.default_rng(0)
    # 4 superchains x 8 chains x 5 draws, all from one distribution: near 1
    x = rng.standard_normal((32, 5))
    got = nested_rhat(x, 4)
    g = x.reshape(4, 8, 5)
    cm = g.mean(2)
    b = cm.mean(1).var(ddof=1)
    w = np.mean(cm.var(1, ddof=1) + g.var(2, ddof=1).mean(1))
    assert got == pytest.approx(np.sqrt(1 + b / w), rel=1e-12)
    assert got < 1.05
    # one draw per chain: the within-chain term is 0, the definition still holds
    one = rng.standard_normal((32, 1))
    assert np.isfinite(nested_rhat(one, 4))
    # superchains stuck in different places: far above 1
    shifted = x + np.repeat(np.arange(4.0) * 3, 8)[:, None]
    assert nested_rhat(shifted, 4) > 2
    with pytest.raises(ValueError, match="divide"):
        nested_rhat(x, 5)
    with pytest.raises(ValueError, match="at least 2"):
        nested_rhat(x, 1)


def test_inference_data_of_a_pipeline_feeds_loo_and_compare():
    # a fitted Pipeline exports with the layers named, and with X and y the pointwise
    # log-likelihood, which is the predictive mixture's own component densities, so that
    # az.loo and az.compare work on two fitted models
    az = pytest.importorskip("arviz")
    from scipy.stats import norm
    from sklearn.datasets import load_diabetes
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import NUTS

    X, y = load_diabetes(return_X_y=True, as_frame=True)
    X, y = X.iloc[:120], y.iloc[:120]
    models = {}
    for hidden in [(2,), (4,)]:
        pipe = make_pipeline(
            StandardScaler(),
            BayesianMLPRegressor(hidden_layer_sizes=hidden, method=NUTS(n_chains=2, n_warmup=40),
                                 n_samples=60, random_state=0),
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pipe.fit(X, y)
        models[str(hidden)] = idata = diag.to_inference_data(pipe, X, y)
        n_features = X.shape[1]
        assert idata.posterior["W0"].shape == (2, 30, n_features, hidden[0])
        assert idata.posterior["W1"].dims[2:] == ("hidden1", "output")
        assert list(idata.posterior["input"].values) == list(X.columns)
        assert idata.posterior["noise_std"].shape == (2, 30, 1)
        means, stds, _ = pipe[-1].predict_mixture(pipe[:-1].transform(X))
        expected = norm.logpdf(y.to_numpy()[:, None], means, stds).T.reshape(2, 30, -1)
        np.testing.assert_allclose(idata.log_likelihood["y"].values, expected, rtol=1e-10)
        assert idata.posterior_predictive["y"].shape == (2, 30, 120)
        np.testing.assert_array_equal(idata.observed_data["y"].values, y.to_numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = az.loo(models["(2,)"])
        table = az.compare(models)
    assert np.isfinite(loo.elpd_loo) and set(table.index) == set(models)
    with pytest.raises(ValueError, match="give both X and y"):
        diag.to_inference_data(pipe, X)


def test_inference_data_of_a_classifier_scores_its_labels():
    pytest.importorskip("arviz")
    from sklearn.datasets import load_iris

    from skbnn import BayesianMLPClassifier
    from skbnn.methods import NUTS

    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = BayesianMLPClassifier(hidden_layer_sizes=(3,), method=NUTS(n_chains=2, n_warmup=40),
                                n_samples=40, random_state=0)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, names)
    idata = diag.to_inference_data(clf, X, names)
    loglik = idata.log_likelihood["y"].values
    assert loglik.shape == (2, 20, 150) and np.all(loglik <= 0)
    # the mean over draws of each row's probability is predict_proba's at its label
    p = np.exp(loglik).reshape(40, 150).mean(axis=0)
    proba = clf.predict_proba(X)[np.arange(150), np.searchsorted(clf.classes_, names)]
    np.testing.assert_allclose(p, proba, rtol=1e-10)
    assert set(np.unique(idata.posterior_predictive["y"].values)) <= set(names)
    with pytest.raises(ValueError, match="labels the classifier was not fitted on"):
        diag.to_inference_data(clf, X, np.where(names == "setosa", "rose", names))
