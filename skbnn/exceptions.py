"""Warnings skbnn raises besides scikit-learn's (``ConvergenceWarning`` for fits that did not
converge)."""

from sklearn.exceptions import InconsistentVersionWarning as _SklearnInconsistentVersionWarning


class DataScaleWarning(UserWarning):
    """The data's scale makes the fit slow or the prior a poor fit.

    Raised when features are far from standardized (the priors assume inputs of unit
    scale; put a :class:`sklearn.preprocessing.StandardScaler` before the estimator) and when
    a regression target is constant (every residual can be zero, so the inferred noise
    shrinks to what its prior allows and sampling slows down). Filter it with
    ``warnings.filterwarnings("ignore", category=DataScaleWarning)``.
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
