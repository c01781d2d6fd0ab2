"""End-to-end smoke tests of predictive quality on small synthetic and bundled data."""

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import NUTS


def test_intervals_cover_fresh_points_1d():
    # y = sin(3x) + noise: 90 % predictive intervals must cover 85-95 % of 2000 fresh points
    # (the binomial standard error of the coverage is 0.7 %, so the band is about +-7 SE)
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (150, 1))
    y = np.sin(3 * x[:, 0]) + 0.3 * rng.standard_normal(150)
    x_new = rng.uniform(-2, 2, (2000, 1))
    y_new = np.sin(3 * x_new[:, 0]) + 0.3 * rng.standard_normal(2000)
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(10,),
        method=NUTS(n_warmup=300),
        n_samples=400,
        random_state=0,
        n_jobs=2,
    ).fit(x, y)
    lower, upper = reg.predict_interval(x_new, coverage=0.9)
    coverage = np.mean((y_new >= lower) & (y_new <= upper))
    assert 0.85 <= coverage <= 0.95, coverage
    # and the fit explains the signal (noise variance 0.09 of a total of about 0.59)
    assert reg.score(x_new, y_new) > 0.8


def test_classifier_breast_cancer_accuracy_and_log_loss():
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0, stratify=y)
    clf = make_pipeline(
        StandardScaler(),
        BayesianMLPClassifier(
            hidden_layer_sizes=(5,), method=NUTS(n_warmup=200), n_samples=200, random_state=0,
            n_jobs=2,
        ),
    ).fit(X_train, y_train)  # fmt: skip
    proba = clf.predict_proba(X_test)
    assert clf.score(X_test, y_test) > 0.94
    log_loss = -np.mean(np.log(proba[np.arange(len(y_test)), y_test]))
    # a logistic regression reaches about 0.1 here; a badly calibrated model would not
    assert log_loss < 0.15, log_loss
