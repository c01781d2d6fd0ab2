"""
Are the intervals honest? Calibration on the diabetes data
==========================================================

A predictive interval is useful when it means what it says: 90 % intervals should hold
about 90 % of new targets, at every level. This example fits four methods to
scikit-learn's diabetes data (442 patients, 10 features) and checks their predictive
distributions on a held-out quarter with :mod:`skbnn.metrics`:

* the coverage of the central interval at every nominal level, and the PIT histogram
  (:class:`skbnn.metrics.PITDisplay`): on the diagonal and flat for a calibrated
  predictive, inside the grey band that a calibrated predictive stays in 95 % of the time
  with this many test rows;
* the 90 % interval's coverage and mean width, the CRPS and the log predictive density of
  the exact predictive mixture.
"""

# %%
import matplotlib.pyplot as plt
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPRegressor
from skbnn.methods import NUTS, DeepEnsemble, Laplace, VariationalInference
from skbnn.metrics import (
    PITDisplay,
    crps_mixture,
    interval_coverage,
    log_predictive_density,
    mean_interval_width,
)
from skbnn.pipeline import make_pipeline

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

methods = {
    "NUTS": NUTS(),
    "deep ensemble": DeepEnsemble(),
    "Laplace": Laplace(),
    "VI": VariationalInference(),
}
fig, (ax_cov, ax_hist) = plt.subplots(1, 2, figsize=(11, 4.5))
print(f"{'method':15s} {'90% coverage':>13s} {'width':>7s} {'CRPS':>6s} {'log density':>12s}")
for i, (name, method) in enumerate(methods.items()):
    model = make_pipeline(
        StandardScaler(), BayesianMLPRegressor(method=method, random_state=0, n_jobs=2)
    ).fit(X_train, y_train)
    # skbnn's make_pipeline: the predictive methods reach the last step
    lower, upper = model.predict_interval(X_test, coverage=0.9)
    means, stds, weights = model.predict_mixture(X_test)
    print(
        f"{name:15s} {interval_coverage(y_test, lower, upper):13.2f} "
        f"{mean_interval_width(lower, upper):7.1f} "
        f"{crps_mixture(y_test, means, stds, weights):6.1f} "
        f"{log_predictive_density(y_test, means, stds, weights):12.2f}"
    )
    disp = PITDisplay.from_estimator(model, X_test, y_test, ax=ax_cov, name=name)
    if i == 0:
        PITDisplay(pit=disp.pit, estimator_name=name).plot(kind="histogram", ax=ax_hist)
ax_cov.set_title("coverage of the central intervals, test rows")
ax_hist.set_title("PIT histogram, NUTS")
# one grey band and one diagonal are enough: drop the repeats from the legend
handles, labels = ax_cov.get_legend_handles_labels()
keep = {label: h for h, label in zip(handles, labels, strict=True)}
ax_cov.legend(keep.values(), keep.keys(), fontsize="small", loc="upper left")
fig.tight_layout()
plt.show()

# %%
# With 111 test rows the grey band is wide: a coverage curve inside it is what a
# calibrated predictive would show. A curve below the diagonal means intervals too
# narrow (targets fall outside more often than stated), above it too wide. The CRPS is in
# the units of ``y`` (disease progression) and rewards sharp and calibrated at once; the
# log predictive density is the "test log-likelihood" of the Bayesian deep-learning
# literature. For classifiers, :class:`sklearn.calibration.CalibrationDisplay` draws the
# reliability diagram and :func:`skbnn.metrics.expected_calibration_error` sums it up.
