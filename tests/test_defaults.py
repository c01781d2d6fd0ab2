"""The newcomer's contract (DESIGN.md): defaults on scikit-learn's diabetes data converge,
match BayesianRidge's accuracy and give calibrated intervals."""

import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import BayesianRidge
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPRegressor


def test_defaults_on_diabetes():
    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        reg = BayesianMLPRegressor(random_state=0, n_jobs=2).fit(X_train, y_train)
    assert reg.diagnostics_["rhat_loglik"] < 1.05
    assert reg.diagnostics_["rhat_outputs"].max() < 1.05
    rmse = np.sqrt(np.mean((reg.predict(X_test) - y_test) ** 2))
    ridge = BayesianRidge().fit(X_train, y_train)
    rmse_ridge = np.sqrt(np.mean((ridge.predict(X_test) - y_test) ** 2))
    assert rmse < 1.05 * rmse_ridge, (rmse, rmse_ridge)
    lower, upper = reg.predict_interval(X_test, coverage=0.9)
    coverage = np.mean((y_test >= lower) & (y_test <= upper))
    # 111 test points: the binomial sd of the coverage is about 2.8 %
    assert 0.85 <= coverage <= 0.95, coverage
