"""What every method is: a small parameter holder with one ``run`` entry point."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval

from ..kernels._compile import compile_once
from ..log_posterior import LogPosterior, NoiseMode
from ..posterior import WeightedDraws
from ._records import RunDiagnostics

#: ``noise_df``'s constraint: above 2, so that the noise (and the predictive) has a
#: variance, which ``predict_std`` and ``predict(X, return_std=True)`` report.
NOISE_DF_CONSTRAINT = [Interval(Real, 2, None, closed="neither"), None]

#: ``noise_df``'s documentation, shared by every method that has it.
NOISE_DF_DOC = """The degrees of freedom of a Student-t noise of each row, in place of the
    Gaussian, with ``heteroscedastic``: the network's predicted variance of a row is the
    square of the t's scale. Its heavier tails let the fit give up on a few rows far from
    the rest instead of widening every row's noise for them, and a held-out row far out
    costs fewer nats. Above 2, so that the predictive has a variance. ``None``: the
    Gaussian."""


@dataclass
class FitResult:
    """What a method returns.

    Attributes
    ----------
    posterior : WeightedDraws
        The posterior the estimator predicts from.
    log_evidence : float or None
        Log marginal likelihood of the (standardized) data, for methods that estimate it.
    elbo : float or None
        The evidence lower bound of the (standardized) data, for variational methods.
    diagnostics : RunDiagnostics
        Figures of the run, a typed record whose mapping is the estimator's
        ``diagnostics_``.
    attributes : dict
        Further fitted attributes the estimator takes as they are (LBBNN's
        ``inclusion_probabilities_``, ...), by name.
    state : object or None
        What a later ``run(..., resume=state)`` needs to continue the chains
        (``warm_start``); None for methods that cannot.
    """

    posterior: WeightedDraws
    log_evidence: float | None = None
    elbo: float | None = None
    diagnostics: RunDiagnostics = field(default_factory=RunDiagnostics)
    attributes: dict = field(default_factory=dict)
    state: object = None


class BaseMethod(BaseEstimator):
    """Base class of posterior methods.

    A method holds only its own knobs (so ``GridSearchCV`` can tune them as
    ``method__<knob>``) and turns a :class:`~skbnn.log_posterior.LogPosterior` into a
    :class:`FitResult`.
    """

    #: Registry key (``method="..."`` in the estimators).
    name: str = ""
    #: How the method wants a Gaussian likelihood's unknown noise handled by the target:
    #: ``"gibbs"`` (kept outside theta and updated by the method) or ``"theta"``.
    noise_handling: str = NoiseMode.GIBBS.value
    #: Posterior draws kept when the estimator's ``n_samples`` is None: draws for the
    #: samplers and approximations, members for the ensembles.
    default_n_samples: int = 1000
    #: Whether ``run`` estimates the model evidence (``FitResult.log_evidence``, the
    #: estimators' ``log_evidence_``). ``BayesianModelAverage`` reads it to refuse, before
    #: fitting anything, a candidate whose method cannot be weighed by its evidence.
    provides_evidence: bool = False
    #: Whether a sampler warns before it starts when its projected run time is long
    #: (:class:`skbnn.exceptions.SlowFitWarning`); ``method="auto"`` turns it off on the
    #: object it chooses, which is fast at the sizes it chooses it for.
    _slow_warning: bool = True

    def _fix(self, **changes) -> str:
        """``method=<this method, with changes>`` as code a user can paste: the class with
        every knob that differs from its default, ``changes`` applied, so the fix a warning
        names runs as written and keeps the user's other settings."""
        return f"method={self._code(**changes)}"

    def _code(self, **changes) -> str:
        """This method, ``changes`` applied, as the code that builds it (see :meth:`_fix`);
        a method given as a knob (a sampler's ``init``) is written the same way."""
        defaults = type(self)().get_params(deep=False)
        params = {**self.get_params(deep=False), **changes}
        # an array (a sampler's init) is not written out: the user's own variable is
        changed = ", ".join(
            f"{key}={_knob_code(value)}"
            for key, value in params.items()
            if isinstance(value, np.ndarray | list | BaseMethod) or value != defaults[key]
        )
        return f"{type(self).__name__}({changed})"

    @property
    def can_resume(self) -> bool:
        """Whether ``run`` can continue a previous fit's chains from its
        ``FitResult.state`` (``run(..., resume=state)``, the estimators' ``warm_start``);
        False unless a method says otherwise."""
        return False

    def likelihood(self, likelihood: str, infer_noise: bool = True) -> str:
        """The likelihood the method fits in place of the estimator's ``likelihood``
        (``"gaussian"``, ``"bernoulli"`` or ``"categorical"``; ``infer_noise`` says whether
        a Gaussian's noise is inferred or fixed by ``noise_std``); the same by default."""
        return likelihood

    def _kernels(self, target) -> tuple:
        """The kernels a fit of ``target`` runs, which :meth:`_compile` compiles.

        Parameters
        ----------
        target : skbnn.log_posterior.LogPosterior
            The log posterior the fit runs on.

        Returns
        -------
        tuple
            Their numba dispatchers; none by default.
        """
        return ()

    def _compiled(self, target, kernels: tuple) -> bool:
        """Whether the kernels a fit of ``target`` runs are compiled (or loaded from the
        cache) in this process.

        Parameters
        ----------
        target : skbnn.log_posterior.LogPosterior
            The log posterior the fit runs on.
        kernels : tuple
            :meth:`_kernels` of ``target``.

        Returns
        -------
        bool
            By default, whether each of ``kernels`` has a signature; a method whose kernel
            has several specializations, of which a fit needs one, asks for that one.
        """
        return all(k.signatures for k in kernels)

    def _warm_up(self, tiny, target) -> None:
        """Call each of the kernels a fit of ``target`` runs once, on ``tiny``, so that numba
        compiles them (or loads them from its cache) for the fit's argument types.

        Parameters
        ----------
        tiny : skbnn.log_posterior.LogPosterior
            :meth:`~skbnn.log_posterior.LogPosterior.tiny`, compiled for ``target``'s codes:
            the warm-up calls the kernels on it, never on ``target``.
        target : skbnn.log_posterior.LogPosterior
            The fit's log posterior, for the settings that choose a kernel or its argument
            types.
        """

    def _compile(self, target) -> float:
        """Compile (or load from numba's cache) the kernels a fit of ``target`` runs, once
        per process: :meth:`_warm_up` on a tiny log posterior, unless :meth:`_compiled`.

        Parameters
        ----------
        target : skbnn.log_posterior.LogPosterior
            The log posterior the fit runs on.

        Returns
        -------
        float
            The seconds it took (0 when nothing was compiled), for
            ``diagnostics_["compile_time"]``.
        """
        kernels = self._kernels(target)

        def warm():
            self._warm_up(LogPosterior.tiny(target.kernel_codes), target)

        return compile_once(kernels, warm, lambda: self._compiled(target, kernels))

    def run(self, target, n_samples: int, random_state, n_jobs, verbose: int) -> FitResult:
        """Compute the posterior of ``target``.

        Parameters
        ----------
        target : skbnn.log_posterior.LogPosterior
        n_samples : int
            Number of posterior draws to keep.
        random_state : None, int, RandomState or SeedSequence
        n_jobs : int or None
            Threads to use; results never depend on it.
        verbose : int
            Progress bar when > 0.

        Returns
        -------
        FitResult
        """
        raise NotImplementedError


def store_params(method, values: dict) -> None:
    """Store every ``__init__`` parameter of ``method`` from ``values`` (that
    ``__init__``'s ``locals()``) as given, as a scikit-learn ``__init__`` does."""
    for name in inspect.signature(type(method).__init__).parameters:
        if name != "self":
            setattr(method, name, values[name])


def default_repr(value) -> str:
    """A parameter's default as a numpydoc entry states it (``"prior"``, ``1e-4``)."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float) and 0 < value < 1e-2:
        return f"{value:.0e}".replace("e-0", "e-")
    return repr(value)


def _knob_code(value) -> str:
    """A knob's value as a fix writes it: ``...`` for an array, code for a method."""
    if isinstance(value, np.ndarray | list):
        return "..."
    if isinstance(value, BaseMethod):
        return value._code()
    if isinstance(value, np.generic):
        # a NumPy scalar the user passed prints as np.float64(...) under NumPy 2, which
        # runs only where NumPy is imported as np
        value = value.item()
    return repr(value)
