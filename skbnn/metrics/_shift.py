"""Out-of-distribution detection from a posterior's uncertainty: per-row scores, how well
they separate shifted inputs from familiar ones, and a Display of the two distributions."""

from __future__ import annotations

from numbers import Real

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import is_classifier
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.utils import column_or_1d
from sklearn.utils._param_validation import Interval, validate_params
from sklearn.utils.validation import check_is_fitted

from ..utils import last_step
from ._plot import axes_or_new
from ._scores import checked_finite

#: The scores :func:`uncertainty_score` computes, by the kind of estimator.
REGRESSION_SCORES = ("epistemic_std", "total_std")
CLASSIFICATION_SCORES = ("entropy", "mutual_information", "max_probability")


def uncertainty_score(estimator, X: ArrayLike, score: str = "auto") -> np.ndarray:
    """Per-row uncertainty of a fitted estimator, higher where it knows less.

    Parameters
    ----------
    estimator : fitted BayesianMLPRegressor or BayesianMLPClassifier
        Or a :class:`~skbnn.model_selection.BayesianModelAverage`, or a Pipeline ending
        in one of them.
    X : array-like of shape (n_samples, n_features)
    score : str, default="auto"
        Regressor:

        - ``"epistemic_std"`` (``"auto"``): the spread of the network output across
          the posterior, :meth:`~skbnn.BayesianMLPRegressor.predict_std` with
          ``kind="epistemic"``; it grows away from the training data, while the noise
          does not;
        - ``"total_std"``: the predictive sd, noise included.

        Several targets are combined by the root mean square of their sds.

        Classifier:

        - ``"entropy"`` (``"auto"``): the entropy of the predictive class distribution;
        - ``"mutual_information"``: its epistemic part, the networks' disagreement
          (:meth:`~skbnn.BayesianMLPClassifier.predict_entropy` with
          ``kind="epistemic"``);
        - ``"max_probability"``: one minus the largest class probability, the baseline
          of Hendrycks and Gimpel (2017).

    Returns
    -------
    ndarray of shape (n_samples,)

    Examples
    --------
    >>> from skbnn.metrics import uncertainty_score
    >>> uncertainty_score(reg, X_new)  # doctest: +SKIP
    """
    check_is_fitted(estimator)
    final, Xt = last_step(estimator, X)
    classifier = is_classifier(final)
    choices = CLASSIFICATION_SCORES if classifier else REGRESSION_SCORES
    if score == "auto":
        score = choices[0]
    if score not in choices:
        kind = "classifier" if classifier else "regressor"
        raise ValueError(f"a {kind}'s score is one of {('auto', *choices)}; got {score!r}")
    if score == "max_probability":
        return 1.0 - final.predict_proba(Xt).max(axis=1)
    if classifier:
        kind = "total" if score == "entropy" else "epistemic"
        return final.predict_entropy(Xt, kind=kind)
    sd = final.predict_std(Xt, kind="epistemic" if score == "epistemic_std" else "total")
    return sd if sd.ndim == 1 else np.sqrt(np.mean(sd**2, axis=1))


def _two_samples(scores_in, scores_out) -> tuple[np.ndarray, np.ndarray]:
    a = checked_finite("scores_in", column_or_1d(scores_in))
    b = checked_finite("scores_out", column_or_1d(scores_out))
    if a.size == 0 or b.size == 0:
        raise ValueError("scores_in and scores_out each need at least one value")
    return a, b


@validate_params(
    {"scores_in": ["array-like"], "scores_out": ["array-like"]},
    prefer_skip_nested_validation=True,
)
def ood_auroc(scores_in: ArrayLike, scores_out: ArrayLike) -> float:
    """Area under the ROC curve of telling shifted inputs from familiar ones by a score.

    The probability that a random shifted input scores higher than a random familiar one
    (ties count one half): 1 separates them perfectly, 0.5 is chance.

    Parameters
    ----------
    scores_in : array-like of shape (n_in,)
        Scores of in-distribution inputs (held-out rows like the training data).
    scores_out : array-like of shape (n_out,)
        Scores of shifted inputs; higher means less familiar, as
        :func:`uncertainty_score` returns them.

    Returns
    -------
    float

    Examples
    --------
    >>> from skbnn.metrics import ood_auroc
    >>> ood_auroc([0.1, 0.2, 0.3], [0.25, 0.4])
    0.8333333333333334
    """
    a, b = _two_samples(scores_in, scores_out)
    labels = np.r_[np.zeros(a.size), np.ones(b.size)]
    return float(roc_auc_score(labels, np.r_[a, b]))


@validate_params(
    {
        "scores_in": ["array-like"],
        "scores_out": ["array-like"],
        "tpr": [Interval(Real, 0, 1, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
def ood_fpr_at_tpr(scores_in: ArrayLike, scores_out: ArrayLike, *, tpr: float = 0.95) -> float:
    """Share of shifted inputs taken for familiar ones when ``tpr`` of the familiar ones
    are accepted (FPR at 95 % TPR, lower is better).

    The convention of the out-of-distribution literature (Hendrycks and Gimpel 2017;
    Liang et al. 2018): in-distribution inputs are the positives, accepted below a
    threshold of the score; the threshold is the lowest that accepts at least ``tpr`` of
    them, and the result is the share of shifted inputs below it as well.

    Parameters
    ----------
    scores_in : array-like of shape (n_in,)
    scores_out : array-like of shape (n_out,)
        As in :func:`ood_auroc`.
    tpr : float, default=0.95
        The share of in-distribution inputs accepted.

    Returns
    -------
    float

    Examples
    --------
    >>> from skbnn.metrics import ood_fpr_at_tpr
    >>> ood_fpr_at_tpr([0.1, 0.2, 0.3, 0.4], [0.35, 0.5], tpr=0.75)
    0.0
    """
    a, b = _two_samples(scores_in, scores_out)
    labels = np.r_[np.ones(a.size), np.zeros(b.size)]
    # familiar inputs are positive: accept where minus the score is high
    fpr, true_pos, _ = roc_curve(labels, -np.r_[a, b], drop_intermediate=False)
    return float(fpr[np.searchsorted(true_pos, tpr - 1e-12)])


class OutOfDistributionDisplay:
    """The distributions of an uncertainty score on familiar and on shifted inputs.

    Two histograms on one axis, the threshold that accepts 95 % of the familiar inputs,
    and in the legend the AUROC and the FPR at 95 % TPR (:func:`ood_auroc`,
    :func:`ood_fpr_at_tpr`). A posterior that knows what it does not know puts the
    shifted inputs to the right.

    Parameters
    ----------
    scores_in, scores_out : ndarrays of shape (n_in,) and (n_out,)
    score_name : str, default=None
        The x axis label.
    estimator_name : str, default=None

    Attributes
    ----------
    auroc_ : float
    fpr_at_95_tpr_ : float
    threshold_ : float
        The score below which 95 % of the familiar inputs lie.
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    Examples
    --------
    >>> from skbnn.metrics import OutOfDistributionDisplay
    >>> OutOfDistributionDisplay.from_estimator(clf, X_test, X_shifted)  # doctest: +SKIP
    """

    def __init__(self, *, scores_in, scores_out, score_name=None, estimator_name=None):
        self.scores_in = scores_in
        self.scores_out = scores_out
        self.score_name = score_name
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, n_bins: int = 30, name=None) -> OutOfDistributionDisplay:
        """Draw it.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
        n_bins : int, default=30
            Bins shared by both histograms.
        name : str, default=None
            The title; the estimator's class by default.

        Returns
        -------
        OutOfDistributionDisplay
        """
        a, b = _two_samples(self.scores_in, self.scores_out)
        self.auroc_ = ood_auroc(a, b)
        self.fpr_at_95_tpr_ = ood_fpr_at_tpr(a, b)
        self.threshold_ = float(np.quantile(a, 0.95, method="inverted_cdf"))
        ax = axes_or_new(ax)
        edges = np.histogram_bin_edges(np.r_[a, b], bins=n_bins)
        ax.hist(a, bins=edges, density=True, alpha=0.6, label=f"familiar ({a.size})")
        ax.hist(b, bins=edges, density=True, alpha=0.6, label=f"shifted ({b.size})")
        ax.axvline(self.threshold_, color="0.3", linestyle="--", linewidth=1,
                   label="accepts 95 % of familiar")  # fmt: skip
        ax.set_xlabel(self.score_name or "uncertainty score")
        ax.set_ylabel("density")
        title = name if name is not None else self.estimator_name
        stats = f"AUROC {self.auroc_:.3f}, FPR at 95 % TPR {self.fpr_at_95_tpr_:.3f}"
        ax.set_title(f"{title}: {stats}" if title else stats, fontsize="medium")
        ax.legend(loc="best", fontsize="small")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X_in: ArrayLike, X_out: ArrayLike, *,
                       score: str = "auto", ax=None, n_bins: int = 30,
                       name=None) -> OutOfDistributionDisplay:  # fmt: skip
        """Score familiar and shifted inputs with :func:`uncertainty_score`, and plot.

        Parameters
        ----------
        estimator : fitted skbnn estimator, or a Pipeline ending in one
        X_in : array-like of shape (n_in, n_features)
            Rows like the training data, held out from it.
        X_out : array-like of shape (n_out, n_features)
            Shifted rows.
        score : str, default="auto"
            See :func:`uncertainty_score`.
        ax : matplotlib Axes, default=None
        n_bins : int, default=30
        name : str, default=None

        Returns
        -------
        OutOfDistributionDisplay
        """
        final = estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator
        label = score if score != "auto" else (
            CLASSIFICATION_SCORES[0] if is_classifier(final) else REGRESSION_SCORES[0]
        )  # fmt: skip
        disp = cls(
            scores_in=uncertainty_score(estimator, X_in, score),
            scores_out=uncertainty_score(estimator, X_out, score),
            score_name=label.replace("_", " "),
            estimator_name=type(final).__name__,
        )
        return disp.plot(ax=ax, n_bins=n_bins, name=name)

    @classmethod
    def from_predictions(cls, scores_in: ArrayLike, scores_out: ArrayLike, *,
                         score_name=None, ax=None, n_bins: int = 30,
                         name=None) -> OutOfDistributionDisplay:  # fmt: skip
        """Plot given scores of familiar and shifted inputs.

        Parameters
        ----------
        scores_in, scores_out : array-like
            As in :func:`ood_auroc`.
        score_name : str, default=None
        ax : matplotlib Axes, default=None
        n_bins : int, default=30
        name : str, default=None

        Returns
        -------
        OutOfDistributionDisplay
        """
        disp = cls(scores_in=scores_in, scores_out=scores_out, score_name=score_name)
        return disp.plot(ax=ax, n_bins=n_bins, name=name)


__all__ = [
    "OutOfDistributionDisplay",
    "ood_auroc",
    "ood_fpr_at_tpr",
    "uncertainty_score",
]
