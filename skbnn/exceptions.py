"""The warnings skbnn raises.

Each subclasses the scikit-learn or Python warning of the same meaning, so a filter on
that one covers skbnn's too: ``warnings.filterwarnings("ignore",
category=sklearn.exceptions.ConvergenceWarning)`` silences :class:`ConvergenceWarning`.
Every warning points at the line of your code that called skbnn (``fit`` directly, or
through a ``Pipeline`` or ``GridSearchCV``), not at skbnn's internals.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import functools
import os
import sys
import threading
import warnings

import joblib
import sklearn
from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning
from sklearn.exceptions import EfficiencyWarning as _SklearnEfficiencyWarning
from sklearn.exceptions import InconsistentVersionWarning as _SklearnInconsistentVersionWarning


class ConvergenceWarning(_SklearnConvergenceWarning):
    """The fit's result is materially affected by a computation that did not finish.

    Raised when samplers' chains disagree or diverge, when an optimizer stopped while the
    loss was still improving by more than the method's tolerance, when training diverged,
    and when an approximation's assumptions fail at the point it reached. The text gives
    the figures and a setting that addresses it, in a form that runs as written
    (``method=DeepEnsemble(max_iter=1000)``). It subclasses scikit-learn's
    :class:`sklearn.exceptions.ConvergenceWarning`, so a filter on that warning covers
    this one.
    """


class SlowFitWarning(_SklearnEfficiencyWarning):
    """The fit you asked for will take long: the projected time and faster alternatives.

    Raised before a sampler named explicitly (``method="nuts"``, ...) starts when its
    projected run time on this machine is over a few minutes, and when a setting costs far
    more than it needs to (a dense proposal over many parameters). The result does not
    depend on it: the projection only informs the message. ``method="auto"`` (the default)
    never raises it, since it picks a method whose cost suits the problem's size. It
    subclasses scikit-learn's :class:`sklearn.exceptions.EfficiencyWarning`.
    """


class DataScaleWarning(UserWarning):
    """The data's scale makes the fit slow or the prior a poor fit.

    Raised when features are far from standardized (the priors assume inputs of unit
    scale; put a :class:`sklearn.preprocessing.StandardScaler` before the estimator) and when
    a regression target is constant (every residual can be zero, so the inferred noise
    shrinks to what its prior allows and sampling slows down). Filter it with
    ``warnings.filterwarnings("ignore", category=DataScaleWarning)``.
    """


class RepeatedRowsWarning(UserWarning):
    """Many training rows repeat another exactly, and every copy counts as an observation.

    skbnn's row weights are frequency weights: a row given twice, or with
    ``sample_weight=2``, is two observations, and the posterior is as sure as that many
    would make it. Copies that are not separate observations (oversampling, augmentation,
    a join that repeated rows) make it too sure, and a fit that follows them closely
    predicts new rows worse. Raised when at least a tenth of the rows repeat another
    (in ``X`` and ``y``); the message shows how to keep one of each. Filter it with
    ``warnings.filterwarnings("ignore", category=RepeatedRowsWarning)``.
    """


class InconsistentVersionWarning(_SklearnInconsistentVersionWarning):
    """An estimator was unpickled under another skbnn version than the one that pickled it.

    The kernels, the layout of a posterior's arrays and the meaning of a parameter can change
    between versions, so the loaded estimator may predict differently or fail. Refit it, or
    load it under the version it names. It subclasses scikit-learn's
    :class:`sklearn.exceptions.InconsistentVersionWarning`, so a filter on that warning
    covers this one.

    Parameters
    ----------
    estimator_name : str
        The class of the unpickled estimator.
    current_version : str
        The skbnn version that loads it.
    original_version : str
        The skbnn version that pickled it (``"unknown"`` for pickles made before skbnn
        recorded it).
    """

    def __init__(self, *, estimator_name: str, current_version: str, original_version: str):
        super().__init__(
            estimator_name=estimator_name,
            current_sklearn_version=current_version,
            original_sklearn_version=original_version,
        )
        self.current_version = current_version
        self.original_version = original_version

    def __str__(self) -> str:
        return (
            f"Trying to unpickle estimator {self.estimator_name} from skbnn version "
            f"{self.original_version} when using version {self.current_version}. It may "
            "predict differently or fail: refit it, or load it under skbnn "
            f"{self.original_version}."
        )


class CompilationCacheWarning(UserWarning):
    """numba cannot cache skbnn's compiled kernels, so every new process compiles them again.

    Raised once, on import, when neither the package's folder nor the user's cache folder
    (``~/.cache/numba``) nor ``NUMBA_CACHE_DIR`` is writable. skbnn works, but each new Python
    process spends its first fit compiling (about a minute for NUTS). Set the environment
    variable ``NUMBA_CACHE_DIR`` to a writable folder, shared by the processes that should
    start warm.
    """


def _folder(module) -> str:
    return os.path.dirname(os.path.abspath(module.__file__)) + os.sep


#: Where a warning's stack walk does not stop: skbnn, and the layers a fit passes through
#: between the user's call and skbnn (scikit-learn's Pipeline, GridSearchCV and
#: cross_validate, joblib, threads, decorators).
_INTERNAL_FOLDERS = tuple(_folder(m) for m in (sys.modules[__package__], sklearn, joblib))
_INTERNAL_FILES = frozenset(
    os.path.abspath(m.__file__) for m in (contextlib, functools, threading, warnings)
)
_INTERNAL_FOLDERS += (_folder(concurrent.futures),)


#: Layers skipped as well once imported (skbnn never imports them itself): skpro's
#: regressors and skbase's objects, which call ``skbnn.skpro``'s fit.
_OPTIONAL_LAYERS = ("skpro", "skbase")


def _internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    optional = tuple(_folder(sys.modules[name]) for name in _OPTIONAL_LAYERS if name in sys.modules)
    return (
        filename.startswith("<frozen")
        or path.startswith(_INTERNAL_FOLDERS + optional)
        or path in _INTERNAL_FILES
    )


#: The list that :func:`collected_warnings` gathers skbnn's warnings into, in this thread
#: (a new thread starts without one), or None where they are raised.
_COLLECTOR: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "skbnn_collected_warnings", default=None
)


@contextlib.contextmanager
def collected_warnings():
    """Gather the warnings skbnn raises inside the block into a list of ``(message,
    category)`` instead of raising them, for the caller to raise (:func:`raise_warnings`)
    or drop: the warnings of a trial fit that was not kept, of a step whose best repeat
    alone speaks.

    The list is this thread's alone. ``warnings.catch_warnings`` would do the same through
    the process-wide filters, and a fit running meanwhile in another thread would lose its
    own warnings into it. Warnings from outside skbnn (numpy's, scipy's) are raised as
    usual, and so are skbnn's from the threads a fit starts inside the block.
    """
    caught: list = []
    token = _COLLECTOR.set(caught)
    try:
        yield caught
    finally:
        _COLLECTOR.reset(token)


def raise_warnings(caught) -> None:
    """Raise the ``(message, category)`` pairs :func:`collected_warnings` gathered."""
    for message, category in caught:
        warn(message, category)


def warn(message: str | Warning, category: type[Warning] | None = None) -> None:
    """``warnings.warn(message, category)`` attributed to the user's line that started the
    fit: the first frame outside skbnn, scikit-learn, joblib and the standard library's
    threads and decorators.

    Where every frame is internal (a fit in a joblib worker) the warning points at the
    outermost one. ``message`` may be a Warning instance, as for ``warnings.warn``. Inside
    :func:`collected_warnings` it is gathered instead.
    """
    caught = _COLLECTOR.get()
    if caught is not None:
        if category is None:
            category = type(message) if isinstance(message, Warning) else UserWarning
        caught.append((message, category))
        return
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and _internal(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level + 1)
