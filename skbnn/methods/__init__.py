"""Posterior methods. Each is a small parameter holder with a ``run(target, ...)`` method.

``METHODS`` maps the estimators' ``method=`` strings to classes; a new method is one module
and one line here.
"""

from ._base import BaseMethod, FitResult
from .amcmc import AdaptiveMetropolis
from .hmc import HMC
from .mala import MALA
from .nuts import NUTS
from .smc import SMC

METHODS = {
    "nuts": NUTS,
    "hmc": HMC,
    "mala": MALA,
    "amcmc": AdaptiveMetropolis,
    "smc": SMC,
}

__all__ = [
    "AdaptiveMetropolis",
    "BaseMethod",
    "FitResult",
    "HMC",
    "MALA",
    "NUTS",
    "SMC",
    "METHODS",
]
