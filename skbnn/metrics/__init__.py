"""Scores of a predictive distribution, in scikit-learn's style (``y_true`` first).

A Bayesian network predicts a distribution, not a number, and these functions judge it:

* intervals: :func:`interval_coverage` and :func:`mean_interval_width`, for the bounds of
  ``predict_interval``;
* the continuous ranked probability score, lower is better: :func:`crps_gaussian` (closed
  form, for ``predict(X, return_std=True)``), :func:`crps_ensemble` (the energy form, for
  the draws of ``sample_y``) and :func:`crps_mixture` (closed form, for the exact mixture
  of ``predict_mixture``);
* probability integral transform values, uniform on [0, 1] for a calibrated predictive:
  :func:`pit_ensemble` and :func:`pit_mixture`;
* :func:`log_predictive_density`: the mean log density of ``y_true`` under the mixture,
  computed exactly (higher is better; ``log_predictive_scorer`` is its scorer);
* :func:`expected_calibration_error` for classifiers' ``predict_proba``;
* out-of-distribution detection: :func:`uncertainty_score` (a posterior's per-row
  uncertainty: the epistemic sd, the predictive entropy or the mutual information), and
  how well it tells shifted inputs from familiar ones, :func:`ood_auroc` and
  :func:`ood_fpr_at_tpr`;
* plots, as scikit-learn's ``Display`` objects (``from_estimator``, ``from_predictions``,
  ``.plot(ax=...)``; matplotlib, the ``plot`` extra, is imported only when they draw):
  :class:`PredictiveBandDisplay` (a 1-D input's predictive mean, intervals and posterior
  draws), :class:`PITDisplay` (observed against nominal coverage, or the PIT histogram)
  and :class:`OutOfDistributionDisplay` (an uncertainty score on familiar and on shifted
  inputs). For classifiers, :class:`sklearn.calibration.CalibrationDisplay` draws the
  reliability diagram.

The functions that take a predictive distribution name its family by suffix, as the
``scoringrules`` package does: ``_gaussian`` (one mean and sd per row), ``_ensemble``
(draws) and ``_mixture`` (weighted Gaussian components; a Gaussian is the one-component
case).

Shapes follow the estimators'. For ``n`` rows and ``k`` targets, ``y_true`` is ``(n,)``
or ``(n, k)``; draws are ``(n, m)`` or ``(n, k, m)``, as ``sample_y`` returns them; the
components of a mixture are ``(n, S)`` or ``(n, k, S)`` with ``weights`` of shape
``(S,)``, as ``predict_mixture`` returns them.
"""

from ._plot import PITDisplay, PredictiveBandDisplay
from ._scores import (
    crps_ensemble,
    crps_gaussian,
    crps_mixture,
    expected_calibration_error,
    interval_coverage,
    log_predictive_density,
    mean_interval_width,
    pit_ensemble,
    pit_mixture,
)
from ._shift import OutOfDistributionDisplay, ood_auroc, ood_fpr_at_tpr, uncertainty_score

__all__ = [
    "OutOfDistributionDisplay",
    "PITDisplay",
    "PredictiveBandDisplay",
    "crps_ensemble",
    "crps_gaussian",
    "crps_mixture",
    "expected_calibration_error",
    "interval_coverage",
    "log_predictive_density",
    "mean_interval_width",
    "ood_auroc",
    "ood_fpr_at_tpr",
    "pit_ensemble",
    "pit_mixture",
    "uncertainty_score",
]
