"""Posterior methods. Each is a small parameter holder with a ``run(target, ...)`` method.

``METHODS`` maps the estimators' ``method=`` strings (each class's ``name``) to classes; a
new method is one module and one line here.
"""

from ._base import BaseMethod, FitResult
from .amcmc import AdaptiveMetropolis
from .ensemble import DeepEnsemble
from .hmc import HMC
from .laplace import Laplace
from .lbbnn import LBBNN
from .mala import MALA
from .mclmc import MAMS, MCLMC
from .nuts import NUTS
from .rms import RandomizedMAP
from .sghmc import SGHMC
from .smc import SMC
from .swag import SWAG
from .vi import VariationalInference

METHODS = {
    method.name: method
    for method in (
        NUTS,
        HMC,
        MALA,
        AdaptiveMetropolis,
        MCLMC,
        MAMS,
        SMC,
        SGHMC,
        DeepEnsemble,
        RandomizedMAP,
        SWAG,
        Laplace,
        VariationalInference,
        LBBNN,
    )
}

__all__ = [
    "AdaptiveMetropolis",
    "BaseMethod",
    "DeepEnsemble",
    "FitResult",
    "HMC",
    "Laplace",
    "LBBNN",
    "MALA",
    "MAMS",
    "MCLMC",
    "NUTS",
    "RandomizedMAP",
    "SGHMC",
    "SMC",
    "SWAG",
    "VariationalInference",
    "METHODS",
]
