"""
Quickstart: a Bayesian MLP on scikit-learn's diabetes data.
===========================================================

Fits ``BayesianMLPRegressor`` (NUTS, 4 chains) in a Pipeline, then prints the test RMSE
next to ``BayesianRidge``'s, the coverage of the 90 % predictive intervals, and the
convergence diagnostics. Saves ``quickstart.png`` when matplotlib is installed.

    python examples/quickstart.py
"""

import time

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import BayesianRidge
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPRegressor
from skbnn.pipeline import make_pipeline

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

start = time.perf_counter()
model = make_pipeline(StandardScaler(), BayesianMLPRegressor(random_state=0, n_jobs=-1))
model.fit(X_train, y_train)
fit_time = time.perf_counter() - start

mean, std = model.predict(X_test, return_std=True)
bnn = model[-1]
lower, upper = model.predict_interval(X_test, coverage=0.9)
ridge = make_pipeline(StandardScaler(), BayesianRidge()).fit(X_train, y_train)

rmse = np.sqrt(np.mean((mean - y_test) ** 2))
rmse_ridge = np.sqrt(np.mean((ridge.predict(X_test) - y_test) ** 2))
coverage = np.mean((y_test >= lower) & (y_test <= upper))
d = bnn.diagnostics_
print(f"fit time            {fit_time:6.1f} s (of which compiling {d['compile_time']:.1f} s)")
print(f"test RMSE           {rmse:6.2f}   (BayesianRidge {rmse_ridge:.2f})")
print(f"90% interval cover  {coverage:6.1%}   of {len(y_test)} test points")
print(f"mean predictive sd  {std.mean():6.2f}   (noise sd {bnn.noise_std_:.2f})")
print(
    f"R-hat log-lik       {d['rhat_loglik']:6.3f}   max R-hat of predictions "
    f"{d['rhat_outputs'].max():.3f}, bulk ESS {d['ess_bulk_loglik']:.0f}, "
    f"divergences {d['divergences']}"
)

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("(install matplotlib for a plot: pip install 'skbnn[plot]')")
else:
    order = np.argsort(mean)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.fill_between(
        np.arange(len(order)), lower[order], upper[order], alpha=0.3, label="90% interval"
    )
    ax.plot(mean[order], label="predictive mean")
    ax.plot(y_test[order], ".", color="k", label="observed")
    ax.set_xlabel("test points, sorted by prediction")
    ax.set_ylabel("disease progression")
    ax.legend()
    fig.tight_layout()
    fig.savefig("quickstart.png", dpi=120)
    print("saved quickstart.png")
