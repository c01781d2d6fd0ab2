"""skbnn: Bayesian neural networks for scikit-learn users.

``BayesianMLPRegressor`` and ``BayesianMLPClassifier`` compute a posterior over a
multilayer perceptron's weights with the method named by ``method=`` and predict with its
uncertainty.
"""

from .estimators import BayesianMLPClassifier, BayesianMLPRegressor

__version__ = "0.1.0"

__all__ = ["BayesianMLPClassifier", "BayesianMLPRegressor", "__version__"]
