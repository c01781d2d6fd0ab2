"""skbnn: Bayesian neural networks for scikit-learn users.

``BayesianMLPRegressor`` and ``BayesianMLPClassifier`` compute a posterior over a
multilayer perceptron's weights with the method named by ``method=`` and predict with its
uncertainty; a fitted estimator's ``predictive_`` (a :class:`Predictive`) predicts by
itself. The method classes of :mod:`skbnn.methods` are importable from here too, so
the fix a warning names (``method=NUTS(max_tree_depth=12)``) runs after
``from skbnn import NUTS``.
"""

from ._version import __version__
from .estimators import BayesianMLPClassifier, BayesianMLPRegressor
from .methods import (
    HMC,
    LBBNN,
    MALA,
    MAMS,
    MCLMC,
    NUTS,
    SGHMC,
    SMC,
    SWAG,
    AdaptiveMetropolis,
    DeepEnsemble,
    Laplace,
    RandomizedMAP,
    VariationalInference,
)
from .predictive import Predictive, PredictiveMixture

__all__ = [
    "AdaptiveMetropolis",
    "BayesianMLPClassifier",
    "BayesianMLPRegressor",
    "DeepEnsemble",
    "HMC",
    "LBBNN",
    "Laplace",
    "MALA",
    "MAMS",
    "MCLMC",
    "NUTS",
    "Predictive",
    "PredictiveMixture",
    "RandomizedMAP",
    "SGHMC",
    "SMC",
    "SWAG",
    "VariationalInference",
    "__version__",
]
