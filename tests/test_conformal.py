"""MAPIE as skbnn's conformal layer.

skbnn has no conformal code of its own. MAPIE's conformal predictors take a fitted
``BayesianMLPRegressor`` or ``BayesianMLPClassifier`` (or a Pipeline ending in one) as they
take any scikit-learn estimator; ``StdConformityScore`` reads skbnn's predictive standard
deviation through ``predict(X, return_std=True)``, which a Pipeline passes on to its last
step, and the classification scores read ``predict_proba``. These tests check that the
composition works for every method and keeps the guarantee conformal prediction makes.
That guarantee holds whatever the quality of the fit, so the tiny fits of
``tests/test_sklearn_api.py`` serve.

The coverage assertions test distributions that hold exactly, not bands read off one run.
Split conformal prediction with ``n`` calibration rows at confidence ``1 - alpha`` cuts at
the ``k = ceil((n + 1)(1 - alpha))``-th smallest calibration score. The test scores are
exchangeable with the calibration scores, so, for continuous scores, the coverage given
the calibration rows is ``Beta(k, n + 1 - k)`` distributed, and the number of covered
test rows out of ``m`` follows ``BetaBinomial(m, k, n + 1 - k)``. Each test asserts that
count between that distribution's 0.0005 and 0.9995 quantiles (or above its 0.001
quantile, where only a lower bound holds): a false-alarm probability of 0.001 per test.
The tests are marked ``statistical`` and shift their seeds with
``SKBNN_TEST_SEED_OFFSET``.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted
from test_sklearn_api import _fast

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor

pytest.importorskip("mapie")
from mapie.classification import SplitConformalClassifier  # noqa: E402
from mapie.conformity_scores import StdConformityScore  # noqa: E402
from mapie.regression import CrossConformalRegressor, SplitConformalRegressor  # noqa: E402

# Tiny runs cannot converge and say so with a ConvergenceWarning on nearly every fit; the
# conformal guarantee does not depend on convergence.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: Every name of ``method=`` but ``"auto"``, which picks one of these.
METHODS = ["nuts", "hmc", "mala", "amcmc", "smc", "ensemble", "rms", "swag", "laplace", "vi",
           "lbbnn", "sghmc"]  # fmt: skip
ALPHA = 0.1
#: Training, calibration and test rows. 300 calibration rows put (n + 1)(1 - alpha) at
#: 270.9, away from an integer, so the rounding of 0.9 cannot move the cut.
N_TRAIN, N_CAL, N_TEST = 200, 300, 1000
#: The probability that a test fails although skbnn and MAPIE are right.
FALSE_ALARM = 0.001


def _cut(n_cal: int, alpha: float = ALPHA) -> int:
    """Which order statistic of the calibration scores split conformal prediction takes."""
    return math.ceil((n_cal + 1) * (1 - alpha))


def _covered_range(k_low: int, k_high: int, n_cal: int = N_CAL, n_test: int = N_TEST):
    """The range of the number of covered test rows, false alarm ``FALSE_ALARM``.

    With an interval (or set) that contains every test point scoring at most the
    ``k_low``-th smallest calibration score and none scoring above the ``k_high``-th, the
    count of covered rows lies between ``BetaBinomial(n_test, k_low, n_cal + 1 - k_low)``
    and ``BetaBinomial(n_test, k_high, n_cal + 1 - k_high)`` (stochastically). The lower
    end is the first's ``FALSE_ALARM / 2`` quantile, the upper the second's
    ``1 - FALSE_ALARM / 2`` quantile.
    """
    low = stats.betabinom(n_test, k_low, n_cal + 1 - k_low).ppf(FALSE_ALARM / 2)
    high = stats.betabinom(n_test, k_high, n_cal + 1 - k_high).ppf(1 - FALSE_ALARM / 2)
    return int(low), int(high)


def _regression_rows(seed: int):
    """A heteroscedastic problem, split at random into training, calibration and test rows.

    The inputs are off-centre and of unequal scales so that the Pipeline's scaler matters;
    the noise sd grows with the third input so that a score scaled by the predictive sd
    differs from the absolute residual.
    """
    rng = np.random.default_rng(seed)
    n = N_TRAIN + N_CAL + N_TEST
    X = rng.standard_normal((n, 3)) * [1.0, 2.0, 0.5] + [5.0, -3.0, 0.0]
    noise = (0.2 + 0.6 * np.abs(X[:, 2])) * rng.standard_normal(n)
    y = 10.0 + 3.0 * np.tanh(X[:, 0] - 5.0) + 0.3 * (X[:, 1] + 3.0) ** 2 + noise
    rows = np.split(rng.permutation(n), [N_TRAIN, N_TRAIN + N_CAL])
    return [a for r in rows for a in (X[r], y[r])]


def _regressor(method: str, seed: int):
    return make_pipeline(
        StandardScaler(), _fast(BayesianMLPRegressor, method, random_state=0 + seed)
    )


@pytest.mark.statistical
@pytest.mark.parametrize("method", METHODS)
def test_split_conformal_with_the_predictive_sd_covers(method, seed):
    """``SplitConformalRegressor(prefit=True)`` with ``StdConformityScore``: the interval is
    the predictive mean plus and minus a calibrated multiple of skbnn's predictive sd, and
    its coverage of the test rows has the split-conformal distribution.

    MAPIE 1.6 cuts the lower side at the ``(k - 1)``-th smallest score and the upper at
    the ``k``-th when ``(n + 1) alpha`` is not an integer (its lower quantile rounds up
    where it would round down), so the count is bracketed by the two beta-binomials of
    ``k - 1`` and ``k``; either way the false alarm is at most ``FALSE_ALARM``.
    """
    X_train, y_train, X_cal, y_cal, X_test, y_test = _regression_rows(0 + seed)
    model = _regressor(method, seed).fit(X_train, y_train)
    conformal = SplitConformalRegressor(
        model, confidence_level=1 - ALPHA, conformity_score=StdConformityScore(), prefit=True
    ).conformalize(X_cal, y_cal)
    point, intervals = conformal.predict_interval(X_test)
    lower, upper = intervals[:, 0, 0], intervals[:, 1, 0]

    # MAPIE used skbnn's sd, through the Pipeline: each side is one multiple of it, and
    # that multiple is the calibration rows' order statistic the cut names.
    mean, std = model.predict(X_test, return_std=True)
    np.testing.assert_array_equal(point, mean)
    mean_cal, std_cal = model.predict(X_cal, return_std=True)
    scores = np.sort(np.abs(y_cal - mean_cal) / std_cal)
    k = _cut(N_CAL)
    np.testing.assert_allclose((upper - mean) / std, scores[k - 1], rtol=1e-9)
    below = (mean - lower) / std
    np.testing.assert_allclose(below, below[0], rtol=1e-9)
    assert scores[k - 2] * (1 - 1e-9) <= below[0] <= scores[k - 1] * (1 + 1e-9)

    covered = int(np.sum((y_test >= lower) & (y_test <= upper)))
    low, high = _covered_range(k - 1, k)
    assert low <= covered <= high, (
        f"{covered} of {N_TEST} test rows covered, outside [{low}, {high}] (false alarm "
        f"{FALSE_ALARM}) for {N_CAL} calibration rows at {1 - ALPHA:.0%}"
    )


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["ensemble", "laplace", "vi"])
def test_cv_plus_covers_at_least_its_guarantee(method, seed):
    """``CrossConformalRegressor(method="plus")`` (CV+) with ``StdConformityScore`` fits a
    clone of the skbnn Pipeline per fold and covers at least its guarantee.

    Barber et al. (2021, Theorem 4) bound K-fold CV+'s coverage below by
    ``1 - 2 alpha - min(2 (1 - 1/K) / (n/K + 1), (1 - K/n) / (K + 1))``; their argument
    compares each row's score under the model fitted without its fold with the test
    point's, so it holds for residuals scaled by the predictive sd as for absolute ones.
    The bound is on the coverage averaged over training sets; given the training rows, the
    count of covered test rows is binomial in that set's coverage, and the test asserts
    the count above the binomial's ``FALSE_ALARM`` quantile at the bound (a false alarm of
    at most ``FALSE_ALARM`` for a training set whose coverage reaches the bound; CV+ of a
    stable fit covers near ``1 - alpha``, far above it).
    """
    X_train, y_train, X_cal, y_cal, X_test, y_test = _regression_rows(0 + seed)
    X, y = np.concatenate([X_train, X_cal]), np.concatenate([y_train, y_cal])
    n, n_folds = len(y), 5
    estimator = _regressor(method, seed)
    cv_plus = CrossConformalRegressor(
        estimator,
        confidence_level=1 - ALPHA,
        conformity_score=StdConformityScore(),
        method="plus",
        cv=n_folds,
        random_state=0 + seed,
    ).fit_conformalize(X, y)
    _, intervals = cv_plus.predict_interval(X_test)
    lower, upper = intervals[:, 0, 0], intervals[:, 1, 0]

    # MAPIE fitted clones: the estimator it was given is as it was, unfitted
    with pytest.raises(NotFittedError):
        check_is_fitted(estimator[-1])
    assert np.all(np.isfinite(lower)) and np.all(lower < upper)

    slack = min(2 * (1 - 1 / n_folds) / (n / n_folds + 1), (1 - n_folds / n) / (n_folds + 1))
    guarantee = 1 - 2 * ALPHA - slack
    covered = int(np.sum((y_test >= lower) & (y_test <= upper)))
    low = int(stats.binom(N_TEST, guarantee).ppf(FALSE_ALARM))
    assert covered >= low, (
        f"{covered} of {N_TEST} test rows covered, below {low}: the {FALSE_ALARM} quantile "
        f"of a binomial at CV+'s guarantee {guarantee:.3f}"
    )


def _classification_rows(seed: int):
    """Three classes with 15 % of the labels drawn at random, so that no classifier is
    certain and the scores near the cut do not tie; split at random like the regression."""
    n = N_TRAIN + N_CAL + N_TEST
    X, y = make_classification(n_samples=n, n_features=4, n_informative=3, n_redundant=0,
                               n_classes=3, n_clusters_per_class=1, flip_y=0.15,
                               random_state=0 + seed)  # fmt: skip
    X = X * [1.0, 3.0, 0.5, 1.0] + [2.0, 0.0, -1.0, 4.0]
    rows = np.split(np.random.default_rng(seed).permutation(n), [N_TRAIN, N_TRAIN + N_CAL])
    return [a for r in rows for a in (X[r], y[r])]


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["ensemble", "laplace"])
@pytest.mark.parametrize("score", ["lac", "aps"])
def test_split_conformal_sets_from_predict_proba_cover(score, method, seed):
    """``SplitConformalClassifier(prefit=True)`` on skbnn's model-averaged probabilities.

    LAC (score ``1 - p(true class)``, the set every class within the cut) has the
    split-conformal distribution exactly. APS's calibration scores are randomized (the
    cumulated probability up to the true class, less a uniform share of its own), and at
    prediction MAPIE by default keeps the class that crosses the cut, so the set contains
    every class whose randomized score would fall within the cut, and more: only the lower
    bound holds, asserted one-sided at ``FALSE_ALARM``.
    """
    X_train, y_train, X_cal, y_cal, X_test, y_test = _classification_rows(0 + seed)
    model = make_pipeline(
        StandardScaler(), _fast(BayesianMLPClassifier, method, random_state=0 + seed)
    ).fit(X_train, y_train)
    conformal = SplitConformalClassifier(
        model, confidence_level=1 - ALPHA, conformity_score=score, prefit=True,
        random_state=0 + seed,
    ).conformalize(X_cal, y_cal)  # fmt: skip
    _, sets = conformal.predict_set(X_test)
    sets = sets[:, :, 0]
    assert list(model.classes_) == [0, 1, 2]  # so a label is its column in the sets
    covered = int(np.sum(sets[np.arange(N_TEST), y_test]))
    k = _cut(N_CAL)

    if score == "lac":
        # the sets are skbnn's probabilities cut at the k-th calibration score (MAPIE adds
        # a tolerance of 1e-8 against rounding)
        proba_cal = model.predict_proba(X_cal)
        cut = np.sort(1 - proba_cal[np.arange(N_CAL), y_cal])[k - 1]
        np.testing.assert_array_equal(sets, 1 - model.predict_proba(X_test) <= cut + 1e-8)
        low, high = _covered_range(k, k)
        assert low <= covered <= high, (
            f"LAC: {covered} of {N_TEST} test rows covered, outside [{low}, {high}] "
            f"(false alarm {FALSE_ALARM})"
        )
    else:
        low = int(stats.betabinom(N_TEST, k, N_CAL + 1 - k).ppf(FALSE_ALARM))
        assert covered >= low, (
            f"APS: {covered} of {N_TEST} test rows covered, below {low} (false alarm {FALSE_ALARM})"
        )


def test_skbnn_does_not_import_mapie():
    """MAPIE is an optional extra (``skbnn[conformal]``): importing skbnn must not need it."""
    code = (
        "import sys, skbnn, skbnn.methods, skbnn.model_selection, skbnn.metrics; "
        "assert 'mapie' not in sys.modules, 'skbnn imported mapie'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
