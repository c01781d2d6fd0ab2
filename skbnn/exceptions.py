"""Warnings skbnn raises besides scikit-learn's (``ConvergenceWarning`` for fits that did not
converge)."""


class DataScaleWarning(UserWarning):
    """The data's scale makes the fit slow or the prior a poor fit.

    Raised when features are far from standardized (the priors assume inputs of unit
    scale; put a :class:`sklearn.preprocessing.StandardScaler` before the estimator) and when
    a regression target is constant (every residual can be zero, so the inferred noise
    shrinks to what its prior allows and sampling slows down). Filter it with
    ``warnings.filterwarnings("ignore", category=DataScaleWarning)``.
    """
