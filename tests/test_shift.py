"""Uncertainty scores and out-of-distribution detection: the classifier's entropy split
against its definition over the posterior draws, the detection scores against theirs, and
the Display."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import entropy, mannwhitneyu
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import NUTS, DeepEnsemble, Laplace
from skbnn.metrics import (
    OutOfDistributionDisplay,
    ood_auroc,
    ood_fpr_at_tpr,
    uncertainty_score,
)
from skbnn.model_selection import BayesianModelAverage
from skbnn.pipeline import make_pipeline
from skbnn.posterior import WeightedDraws

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def nuts_classifier(iris):
    X, y = iris
    method = NUTS(n_warmup=60, n_chains=2)
    return BayesianMLPClassifier((3,), method=method, n_samples=30, random_state=0).fit(X, y)


def _per_draw_probabilities(clf, X) -> np.ndarray:
    """``(S, n, n_classes)``: each stored draw's class probabilities, one draw at a time."""
    full = clf.posterior_
    out = []
    try:
        for theta in full.thetas:
            clf.posterior_ = WeightedDraws(theta[None])
            out.append(clf.predict_proba(X))
    finally:
        clf.posterior_ = full
    return np.array(out)


def test_entropy_parts_are_their_definitions_over_the_draws(nuts_classifier, iris):
    X = np.r_[iris[0], 3.0 * iris[0][:20]]  # familiar rows and some far out
    clf = nuts_classifier
    p = _per_draw_probabilities(clf, X)
    w = clf.posterior_.normalized_weights()
    mean = np.einsum("s,snk->nk", w, p)
    total = entropy(mean, axis=1)
    aleatoric = w @ entropy(p, axis=2)
    np.testing.assert_allclose(clf.predict_entropy(X), total, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(clf.predict_entropy(X, kind="aleatoric"), aleatoric, rtol=1e-10)
    np.testing.assert_allclose(clf.predict_entropy(X, kind="epistemic"), total - aleatoric,
                               rtol=1e-8, atol=1e-12)  # fmt: skip
    # the total is the entropy of what predict_proba shows
    np.testing.assert_allclose(clf.predict_entropy(X), entropy(clf.predict_proba(X), axis=1),
                               rtol=1e-12)  # fmt: skip
    assert np.all(clf.predict_entropy(X, kind="epistemic") >= 0)
    assert np.all(clf.predict_entropy(X) <= np.log(3) + 1e-12)


def test_one_network_has_no_epistemic_entropy(nuts_classifier, iris):
    clf = nuts_classifier
    full = clf.posterior_
    try:
        clf.posterior_ = WeightedDraws(np.repeat(full.thetas[:1], 5, axis=0))
        np.testing.assert_allclose(clf.predict_entropy(iris[0], kind="epistemic"), 0.0,
                                   atol=1e-12)  # fmt: skip
    finally:
        clf.posterior_ = full


@pytest.mark.parametrize("link_approx", ["probit", "mc"])
def test_laplace_entropy_total_is_its_probabilities_and_the_parts_add_up(iris, link_approx):
    X, y = iris
    clf = BayesianMLPClassifier((3,), method=Laplace(link_approx=link_approx), random_state=0)
    clf.fit(X, y == 0)  # binary: one logit
    total = clf.predict_entropy(X)
    np.testing.assert_allclose(total, entropy(clf.predict_proba(X), axis=1), rtol=1e-12)
    parts = clf.predict_entropy(X, kind="epistemic") + clf.predict_entropy(X, kind="aleatoric")
    np.testing.assert_allclose(parts, total, rtol=1e-12)
    assert np.all(clf.predict_entropy(X, kind="epistemic") >= 0)
    with pytest.raises(ValueError, match="kind must be"):
        clf.predict_entropy(X, kind="mutual")


def test_model_average_entropy_is_over_every_candidates_draws(iris):
    X, y = iris
    bma = BayesianModelAverage(
        BayesianMLPClassifier(method=Laplace(), random_state=0),
        {"hidden_layer_sizes": [(2,), (4,)]},
    ).fit(X, y)
    total = bma.predict_entropy(X)
    np.testing.assert_allclose(total, entropy(bma.predict_proba(X), axis=1), rtol=1e-10)
    fitted, weights = bma._weighted()
    aleatoric = sum(w * e.predict_entropy(X, kind="aleatoric")
                    for e, w in zip(fitted, weights, strict=True))  # fmt: skip
    np.testing.assert_allclose(bma.predict_entropy(X, kind="aleatoric"),
                               np.minimum(aleatoric, total), rtol=1e-10)  # fmt: skip


def test_uncertainty_score_picks_the_estimators_own_quantities(nuts_classifier, iris):
    X, y = iris
    clf = nuts_classifier
    np.testing.assert_array_equal(uncertainty_score(clf, X), clf.predict_entropy(X))
    np.testing.assert_array_equal(uncertainty_score(clf, X, "mutual_information"),
                                  clf.predict_entropy(X, kind="epistemic"))  # fmt: skip
    np.testing.assert_array_equal(uncertainty_score(clf, X, "max_probability"),
                                  1 - clf.predict_proba(X).max(axis=1))  # fmt: skip
    with pytest.raises(ValueError, match="classifier's score is one of"):
        uncertainty_score(clf, X, "epistemic_std")

    rng = np.random.default_rng(0)
    Y = np.c_[X[:, 0] + 0.1 * rng.standard_normal(len(X)), X[:, 1]]
    reg = make_pipeline(
        StandardScaler(),
        BayesianMLPRegressor((3,), method=DeepEnsemble(max_iter=50), n_samples=4, random_state=0),
    ).fit(X, Y)
    sd = reg.predict_std(X, kind="epistemic")
    np.testing.assert_allclose(uncertainty_score(reg, X), np.sqrt(np.mean(sd**2, axis=1)))
    total = reg.predict_std(X)
    np.testing.assert_allclose(uncertainty_score(reg, X, "total_std"),
                               np.sqrt(np.mean(total**2, axis=1)))  # fmt: skip
    with pytest.raises(ValueError, match="regressor's score is one of"):
        uncertainty_score(reg, X, "entropy")


def test_ood_auroc_is_the_mann_whitney_statistic():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 8, 50).astype(float)  # ties within and across the two samples
    b = rng.integers(2, 10, 30).astype(float)
    u = mannwhitneyu(b, a).statistic
    assert ood_auroc(a, b) == pytest.approx(u / (a.size * b.size), rel=1e-12)
    assert ood_auroc(a, b) + ood_auroc(b, a) == pytest.approx(1.0)
    assert ood_auroc([0.0, 1.0], [2.0, 3.0]) == 1.0


def _fpr_by_brute_force(a, b, tpr):
    """The lowest threshold accepting at least ``tpr`` of ``a``; the share of ``b`` it
    accepts too (accepted: score at most the threshold)."""
    for t in np.sort(np.unique(np.r_[a, b])):
        if np.mean(a <= t) >= tpr:
            return np.mean(b <= t)
    raise AssertionError


@pytest.mark.parametrize("tpr", [0.5, 0.9, 0.95, 0.99])
def test_fpr_at_tpr_is_its_definition(tpr):
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = rng.integers(0, 12, rng.integers(5, 60)).astype(float)
        b = rng.integers(3, 15, rng.integers(5, 60)).astype(float)
        assert ood_fpr_at_tpr(a, b, tpr=tpr) == pytest.approx(_fpr_by_brute_force(a, b, tpr))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ood_auroc([0.1, np.nan], [0.3]), "scores_in contains NaN"),
        (lambda: ood_auroc([0.1], []), "at least one value"),
        (lambda: ood_fpr_at_tpr([0.1], [0.2], tpr=1.0), "tpr"),
        (lambda: ood_auroc([[0.1, 0.2]], [0.2]), "1d|1-D|shape"),
    ],
)
def test_bad_scores_name_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_out_of_distribution_display(nuts_classifier, iris):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    X = iris[0]
    far = 4.0 * X[:40] + 3.0
    disp = OutOfDistributionDisplay.from_estimator(nuts_classifier, X, far,
                                                   score="mutual_information")  # fmt: skip
    a = nuts_classifier.predict_entropy(X, kind="epistemic")
    b = nuts_classifier.predict_entropy(far, kind="epistemic")
    assert disp.auroc_ == ood_auroc(a, b) and disp.fpr_at_95_tpr_ == ood_fpr_at_tpr(a, b)
    assert np.mean(a <= disp.threshold_) >= 0.95
    assert disp.ax_.get_xlabel() == "mutual information" and len(disp.ax_.patches) > 0
    assert "AUROC" in disp.ax_.get_title()
    again = OutOfDistributionDisplay.from_predictions(a, b, score_name="MI")
    assert again.auroc_ == disp.auroc_ and again.ax_.get_xlabel() == "MI"
    matplotlib.pyplot.close("all")
