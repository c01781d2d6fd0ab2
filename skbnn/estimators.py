"""The scikit-learn layer: parameters, building the target from the prepared data
(:mod:`skbnn._data`), calling the method, and predicting from posterior draws."""

from __future__ import annotations

import copy
import time
from functools import partial
from numbers import Integral, Real

import joblib
import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context, clone
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from . import _version
from ._data import (
    check_hidden_layer_sizes,
    encode_labels,
    rounding_variance,
    standardize,
    validate_X,
    warn_repeated,
    warn_unscaled,
    weighted_rows,
)
from ._draws import noise_variance_factor
from .exceptions import InconsistentVersionWarning, warn
from .kernels.likelihoods import HETERO_MIN_VAR
from .layout import ACTIVATIONS, NetworkLayout
from .log_posterior import LogPosterior, noise_mode
from .methods import METHODS, BaseMethod
from .methods._auto import auto_knob_message, resolve_hidden
from .methods._auto import resolve as resolve_auto
from .predictive import Predictive, check_predictive_args
from .priors import PRIORS, GaussianPrior, HierarchicalPrior, LogisticPrior, ScaleMixturePrior
from .utils import data_fingerprint, unchanged_on_failure

_SHARED_PARAMS_DOC = """
    hidden_layer_sizes : tuple of int or "auto", default="auto" (regressor), (10,) (classifier)
        Width of each hidden layer; ``()`` means no hidden layer (Bayesian linear, logistic
        or softmax regression). ``"auto"`` chooses from the number of rows and records the
        choice in ``hidden_layer_sizes_``: ``(10,)``, enough for most tabular problems of
        a few hundred rows and fast under NUTS, and for a regressor ``(50,)`` from 5,000
        rows, where ten units underfit (``skbnn.methods._auto.resolve_hidden``). The
        classifier's default is ``(10,)``: on many rows 50 units did not predict better.
        Widen for more complex functions.
    activation : {"tanh", "relu", "logistic", "identity"}, default="tanh"
        Hidden-layer activation. ``tanh`` is the default because its smooth posterior suits
        gradient-based samplers: the kinks of ``relu`` cost energy errors and smaller steps.
    method : str or method object, default="auto"
        How the posterior is computed: a name (``"nuts"``, ``"hmc"``, ``"mala"``, ``"amcmc"``,
        ``"mclmc"``, ``"mams"``, ``"smc"``; ``"ensemble"``, ``"rms"``, ``"swag"``,
        ``"laplace"``, ``"vi"``, ``"lbbnn"`` for the optimization methods, which scale to many
        rows) or an object from :mod:`skbnn.methods` carrying its own knobs
        (``NUTS(target_accept=0.9)``), which ``GridSearchCV`` can tune as ``method__<knob>``.
        ``"auto"`` chooses from the problem's size alone, within a time budget (the times are in
        the documentation's "Choosing a method"; ``n_jobs=-1`` uses every core): NUTS (exact, no
        path length to tune) for regression where rows x network parameters is at most 250,000
        (the diabetes data and a 10-unit network: 442 x 121); from 2,000 rows up to 5,000,000,
        MCLMC with a chain in each of eight optima and a noise per row (``MCLMC(n_modes=8,
        heteroscedastic="auto", ...)``), which led the ensemble there; and beyond it the deep
        ensemble, whose held-out rows choose between a Gaussian and a Student-t noise
        (``DeepEnsemble(noise_df="auto")``, which led the Gaussian on real data and kept it on
        Gaussian noise); for a classifier, the deep ensemble on fewer than 10,000 rows (whose
        held-out log loss it gave at or below
        ``LogisticRegression``'s) and cyclical SGHMC from there; ``method_`` says which ran
        (see :mod:`skbnn.methods._auto`). Chains from several optima, and NUTS with a
        Student-t noise, which predict better on some real data, stay knobs of the methods
        (``NUTS(n_modes=8)``, ``NUTS(heteroscedastic=True, noise_df=5)``):
        :mod:`skbnn.methods._auto` says why.
    prior : {"gaussian", "logistic", "hierarchical", "scale_mixture"} or prior object, \
default="gaussian"
        Prior over weights and biases; ``"gaussian"`` is ``GaussianPrior()``, N(0, 1) with
        fan-in scaling of the weights, for the regressor and ``GaussianPrior(std=3)`` for
        the classifier (its logits need the larger scale; see the classifier's Notes);
        ``"logistic"`` is ``LogisticPrior()``, a standard logistic on every weight and bias;
        ``"hierarchical"`` is ``HierarchicalPrior()``, Gaussian weights whose per-layer
        precision is learned from the data; ``"scale_mixture"`` is
        ``ScaleMixturePrior()``, Bayes by Backprop's mixture of a broad and a narrow
        Gaussian.
    n_samples : int, default=None
        Posterior draws kept for prediction: draws summed over chains, SMC particles,
        ensemble or randomized-MAP members, or draws from SWAG's Gaussian. ``None`` takes the
        method's own default: 1000 draws for the samplers (the Monte Carlo error of
        predictive means well below the posterior spread), 5 members for ``"ensemble"``, 10
        for ``"rms"``, 100 draws for ``"swag"``, ``"laplace"``, ``"vi"`` and ``"lbbnn"`` (see
        each method's docstring).
    random_state : int, RandomState instance or None, default=None
        Seeds everything random (chain starts, momenta, noise updates). With an int the fit
        is reproducible on the same hardware with the same library versions, and does not
        depend on ``n_jobs``. It is not reproducible across processors: numba compiles for
        the host CPU, whose instruction set changes the last bits of every gradient, so a
        seeded chain takes another path there (as with NumPyro and Stan); the posterior it
        samples is the same.
    n_jobs : int, default=None
        Threads for chains, members and predictions (``None`` means 1, ``-1`` all
        cores). A method that trains fewer networks than it has threads (VI, LBBNN,
        Laplace's MAP, a one-member ensemble), or an ensemble's last members once the
        others are done, gives one more thread half of every wide layer's products,
        minibatch gathers and Adam steps; the result is the same.
    verbose : int, default=0
        A progress bar when > 0.
    warm_start : bool, default=False
        Continue the previous fit's chains instead of starting anew (scikit-learn's
        meaning): raise ``n_samples`` and call ``fit`` again on the same data, and NUTS,
        HMC, MALA and adaptive Metropolis extend every chain from where it stopped, with
        its adapted step size and metric and its random stream, so the draws are
        bit-identical to one fit with the larger ``n_samples`` (on the same machine). It
        works after pickling. The data and every other parameter must be the previous
        fit's; methods that cannot continue (the optimization methods, SMC, parallel
        tempering, ``target_rhat``/``target_ess``/``max_time``) fit anew.
"""


class _BaseBayesianMLP(BaseEstimator):
    """Shared fitting and prediction machinery of the two estimators."""

    _parameter_constraints: dict = {
        "hidden_layer_sizes": [
            "array-like",
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "method": [StrOptions({"auto", *METHODS}), BaseMethod],
        # the public classes, so a wrong prior's error message names what is accepted
        "prior": [
            StrOptions(set(PRIORS)),
            GaussianPrior,
            LogisticPrior,
            HierarchicalPrior,
            ScaleMixturePrior,
        ],
        "n_samples": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
    }

    #: Parameters that take a registry name or an object with its own parameters: nested
    #: ``method__*`` and ``prior__*`` work on the named default object too.
    _NESTED = {"method": METHODS, "prior": PRIORS}

    def get_params(self, deep: bool = True) -> dict:
        """Parameters of this estimator, as :meth:`sklearn.base.BaseEstimator.get_params`.

        With ``deep=True`` a ``method`` or ``prior`` given by name also lists the knobs of
        the object that name stands for (``method__target_accept``, ``prior__std``), so
        ``GridSearchCV`` can tune them from the defaults.
        """
        params = super().get_params(deep=deep)
        if deep:
            for name, registry in self._NESTED.items():
                value = params.get(name)
                if isinstance(value, str) and value in registry:
                    for key, sub in registry[value]().get_params(deep=True).items():
                        params[f"{name}__{key}"] = sub
        return params

    def set_params(self, **params):
        """Set parameters, as :meth:`sklearn.base.BaseEstimator.set_params`.

        A nested ``method__<knob>`` or ``prior__<knob>`` on a ``method`` or ``prior`` given
        by name first replaces the name by its default object (``"nuts"`` by ``NUTS()``),
        then sets the knob on it.
        """
        for name, registry in self._NESTED.items():
            nested = any(key.startswith(name + "__") for key in params)
            value = params.get(name, getattr(self, name, None))
            if nested and name == "method" and value == "auto":
                knob = next(key for key in params if key.startswith("method__"))
                raise ValueError(auto_knob_message(knob, params[knob]))
            if nested and isinstance(value, str) and value in registry:
                params[name] = registry[value]()
        return super().set_params(**params)

    def __getstate__(self) -> dict:
        # a copy: BaseEstimator may hand back the instance's own __dict__
        return dict(super().__getstate__(), _skbnn_version=_version.__version__)

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        pickled = state.pop("_skbnn_version", "unknown")
        if pickled != _version.__version__:
            warn(
                InconsistentVersionWarning(
                    estimator_name=type(self).__name__,
                    current_version=_version.__version__,
                    original_version=pickled,
                )
            )
        if "_layout" in state and "predictive_" not in state:
            # pickled before the predictive object: the same parts, assembled
            scaling = (
                {"classes": state["classes_"]}
                if "classes_" in state
                else {"y_mean": state.pop("_y_mean"), "y_std": state.pop("_y_std")}
            )
            state["predictive_"] = Predictive(
                state.pop("posterior_"), state.pop("_layout"), state.pop("_act"), **scaling
            )
        super().__setstate__(state)

    @property
    def posterior_(self):
        """The posterior object: ``predictive_.posterior``. Setting it gives ``predictive_``
        that posterior, so the predictions follow it."""
        return self.predictive_.posterior

    @posterior_.setter
    def posterior_(self, posterior) -> None:
        predictive = copy.copy(self.predictive_)
        predictive.posterior = posterior
        self.predictive_ = predictive

    def _resolve_method(self, X, Y, hidden, likelihood) -> BaseMethod:
        """The method object to run: a new one for a name (``"auto"`` chosen from the size
        of ``X`` and the network), a copy of a given one."""
        if self.method == "auto":
            n_weights = NetworkLayout((X.shape[1], *hidden, Y.shape[1])).n_weights
            task = "regression" if likelihood == "gaussian" else "classification"
            method = resolve_auto(X.shape[0], n_weights, Y.shape[1], task)
            # its choice is fast at this size: no projection to announce
            method._slow_warning = False
            return method
        if isinstance(self.method, str):
            return METHODS[self.method]()
        return clone(self.method)

    def _resolve_prior(self):
        registry = self._NESTED["prior"]
        return registry[self.prior]() if isinstance(self.prior, str) else self.prior

    def _run(self, X, Y, W, likelihood, scaling, noise_precision=1.0, infer_noise=False,
             min_var=None):  # fmt: skip
        """Build the target, run the method and keep what it returns; ``scaling`` holds
        the predictive's target scaling or class labels (:class:`~skbnn.predictive.Predictive`),
        ``min_var`` the floor of a predicted noise variance (:class:`LogPosterior`)."""
        start = time.perf_counter()
        task = "regression" if likelihood == "gaussian" else "classification"
        hidden = self.hidden_layer_sizes
        if isinstance(hidden, str) and hidden == "auto":
            hidden = resolve_hidden(X.shape[0], task)
        hidden = check_hidden_layer_sizes(hidden)
        method = self._resolve_method(X, Y, hidden, likelihood)
        likelihood = method.likelihood(likelihood, infer_noise=infer_noise)
        noise = noise_mode(likelihood, infer_noise, method.noise_handling)
        target = LogPosterior(
            X,
            Y,
            hidden,
            self.activation,
            likelihood,
            prior=self._resolve_prior(),
            noise=noise,
            noise_precision=noise_precision,
            sample_weight=W,
            # "auto" (the deep ensemble's) builds the Gaussian; the method weighs the t
            noise_df=None if (df := getattr(method, "noise_df", None)) == "auto" else df,
            min_var=min_var,
        )
        n_samples = method.default_n_samples if self.n_samples is None else self.n_samples
        run_kwargs = {}
        if method.can_resume:
            # what must not change for chains to continue: the data, and every parameter
            # but how many draws to keep, the threads and the progress bar
            key = joblib.hash(
                (X, Y, W, likelihood, noise, noise_precision,
                 {k: v for k, v in self.get_params().items()
                  if k not in ("n_samples", "n_jobs", "verbose", "warm_start")})
            )  # fmt: skip
            previous = getattr(self, "_sampler_state", None)
            if self.warm_start and previous is not None:
                if previous["key"] != key:
                    raise ValueError(
                        "warm_start=True continues the previous fit's chains, so the data "
                        "and every parameter but n_samples, n_jobs and verbose must be the "
                        "previous fit's; they differ. Set warm_start=False to fit anew."
                    )
                run_kwargs["resume"] = previous["chains"]
        result = method.run(
            target, n_samples, self.random_state, self.n_jobs, self.verbose, **run_kwargs
        )
        self.__dict__.pop("_sampler_state", None)
        if result.state is not None:
            self._sampler_state = {"key": key, "chains": result.state}
        self.predictive_ = Predictive(
            result.posterior, target.layout, target.activation_code, **scaling
        )
        # a refit with a method that has no evidence must not keep the previous fit's
        self.__dict__.pop("log_evidence_", None)
        self.__dict__.pop("elbo_", None)
        if result.log_evidence is not None:
            self.log_evidence_ = float(result.log_evidence)
        if result.elbo is not None:
            self.elbo_ = float(result.elbo)
        for name in getattr(self, "_method_attributes", ()):
            self.__dict__.pop(name, None)
        for name, value in result.attributes.items():
            setattr(self, name, value)
        self._method_attributes = tuple(result.attributes)
        self.method_ = method
        self.hidden_layer_sizes_ = hidden
        result.diagnostics.wall_time = time.perf_counter() - start
        self.diagnostics_ = result.diagnostics.as_dict()
        return result


class BayesianMLPRegressor(RegressorMixin, _BaseBayesianMLP):
    __doc__ = (
        """Bayesian multilayer perceptron regressor.

    The posterior over the network's weights given the data is computed by ``method``; the
    prediction is the posterior predictive distribution: its mean, standard deviation,
    intervals and draws. Targets are standardized internally (training mean and population
    standard deviation per output); the prior and ``noise_std`` live on that scale and every
    prediction is returned in the original units.

    Parameters
    ----------"""
        + _SHARED_PARAMS_DOC
        + """    noise_std : float or None, default=None
        Standard deviation of the Gaussian observation noise on the standardized target.
        ``None`` infers it: each output's noise precision ``1 / sigma**2`` has a
        ``Gamma(1, 1e-3)`` prior (nearly flat for any sd above 3 % of the target's; see
        :mod:`skbnn.priors`) and the MCMC methods update it by exact Gibbs steps.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has feature names.
    n_outputs_ : int
    method_ : method object
        The method that ran: a copy of ``method``, or the one ``"auto"`` chose.
    hidden_layer_sizes_ : tuple of int
        The hidden layers of the fitted network: ``hidden_layer_sizes``, or the ones
        ``"auto"`` chose.
    posterior_ : skbnn.posterior.WeightedDraws
        Posterior draws of the flat parameter vector (standardized scale).
    predictive_ : skbnn.predictive.Predictive
        The posterior predictive distribution: ``posterior_``, the network and the target
        scaling in one object that predicts by itself (every prediction method calls it
        after checking ``X``), pickles, and outlives the estimator.
    diagnostics_ : dict
        Figures of the fit: ``wall_time``, ``compile_time``, ``n_grad_evals``, and for MCMC
        ``n_chains``, ``step_size`` (per chain; adaptive Metropolis has none),
        ``accept_rate`` (per chain), ``divergences``, ``ess_bulk_loglik``, ``rhat_loglik``,
        and ``rhat_outputs``, ``ess_bulk_outputs`` of every output at five training rows
        (shape rows x outputs) ...
    noise_std_ : float or ndarray of shape (n_outputs,)
        Posterior mean noise standard deviation, original units.
    log_evidence_ : float
        Only for a method that estimates it (SMC, Laplace): ``log p(y | X, architecture)``
        of the training data, original units. It describes those rows only; see
        :func:`skbnn.model_selection.evidence_scorer` and
        :class:`skbnn.model_selection.BayesianModelAverage`.
    elbo_ : float
        Only for variational inference (``"vi"``, ``"lbbnn"``): the evidence lower bound of
        the training data, original units, estimated after training
        (``diagnostics_["elbo_se"]`` is its Monte Carlo standard error). A lower bound on
        ``log p(y | X, architecture)``, short of it by the KL divergence from the
        approximation to the posterior: never the evidence itself. See
        :func:`skbnn.model_selection.elbo_scorer`.
    inclusion_probabilities_ : list of ndarray
        Only for ``"lbbnn"``: the probability under the variational posterior that each
        weight is in the network, per layer, shaped as ``MLPRegressor.coefs_``.
    density_ : float
        Only for ``"lbbnn"``: the share of weights whose inclusion probability exceeds 0.5
        (the median probability model's).
    feature_inclusion_ : ndarray of shape (n_features,)
        Only for ``"lbbnn"``: per input, the probability that it has a path to an output
        through the median probability model's weights (see
        :class:`skbnn.methods.LBBNN`); for
        ``SelectFromModel(importance_getter="feature_inclusion_")``.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skbnn import BayesianMLPRegressor
    >>> X, y = make_regression(n_samples=100, n_features=3, noise=5.0, random_state=0)
    >>> reg = BayesianMLPRegressor(n_samples=200, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:2], return_std=True)
    """
    )

    _parameter_constraints: dict = {
        **_BaseBayesianMLP._parameter_constraints,
        "noise_std": [Interval(Real, 0, None, closed="neither"), None],
    }

    def __init__(
        self,
        hidden_layer_sizes="auto",
        activation="tanh",
        method="auto",
        prior="gaussian",
        n_samples=None,
        noise_std=None,
        random_state=None,
        n_jobs=None,
        verbose=0,
        warm_start=False,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.method = method
        self.prior = prior
        self.n_samples = n_samples
        self.noise_std = noise_std
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.warm_start = warm_start

    @_fit_context(prefer_skip_nested_validation=False)
    @unchanged_on_failure
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight=None) -> BayesianMLPRegressor:
        """Compute the posterior of the network's weights given ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row's log-likelihood: a row of weight 2 counts as
            two rows (integer weights give exactly the fit of repeated rows), weight 0
            leaves it out. The target is standardized with the weighted mean and sd.

        Returns
        -------
        self : BayesianMLPRegressor
        """
        X, y = validate_data(
            self,
            X,
            y,
            multi_output=True,
            y_numeric=True,
            dtype=np.float64,
            ensure_min_samples=2,
        )
        # validate_data converts only object arrays for y_numeric; catch str arrays too
        y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
        self.n_outputs_ = 1 if y.ndim == 1 else y.shape[1]
        warn_unscaled(X, self)
        data = weighted_rows(X, y.reshape(len(y), -1), sample_weight)
        warn_repeated(X.shape[0], data, sample_weight)
        rows, W = data.X, data.W
        Y, y_mean, y_std = standardize(data.Y, W, infer_noise=self.noise_std is None)
        scaling = {"y_mean": y_mean, "y_std": y_std}
        if self.noise_std is None:
            # targets rounded to a grid: a noise the network predicts is at least the rounding
            floor = rounding_variance(data.Y, y_std)
            floor = None if floor is None else max(floor, HETERO_MIN_VAR)
            result = self._run(rows, Y, W, "gaussian", scaling, 1.0, True, floor)
        else:
            result = self._run(rows, Y, W, "gaussian", scaling, 1.0 / self.noise_std**2)
        # posterior mean noise sd, averaged over the training rows when it varies by row
        w = self.posterior_.normalized_weights()
        if self.posterior_.heteroscedastic:
            noise = np.zeros(self.n_outputs_)
            for part, wc, _, _, sd in self.posterior_.components(
                self.predictive_.network(self.n_jobs), rows, self.n_outputs_
            ):
                noise += np.einsum("s,skn,n->k", wc, sd, W[part]) / data.weight_sum
            # a Student-t noise's sd is its scale times sqrt(df / (df - 2))
            noise *= np.sqrt(noise_variance_factor(self.predictive_.noise_df))
        else:
            tau = np.broadcast_to(self.posterior_.noise_precision, (len(w), self.n_outputs_))
            noise = w @ (1.0 / np.sqrt(tau))
        noise = noise * y_std
        self.noise_std_ = noise if self.n_outputs_ > 1 else float(noise[0])
        if result.log_evidence is not None or result.elbo is not None:
            # the density of y in original units: the standardization's Jacobian
            jacobian = data.weight_sum * float(np.sum(np.log(y_std)))
            if result.log_evidence is not None:
                self.log_evidence_ -= jacobian
            else:
                self.elbo_ -= jacobian
            result.diagnostics.shift_evidence(-jacobian)
            self.diagnostics_ = result.diagnostics.as_dict()
            # the evidence is of these rows only: evidence_scorer refuses any others
            self._evidence_data = data_fingerprint(X, y)
        return self

    def _squeeze(self, a):
        return a[:, 0] if self.n_outputs_ == 1 else a

    def predict(
        self, X: ArrayLike, return_std: bool = False
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Posterior predictive mean, and optionally its standard deviation.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of the posterior predictive distribution of
            ``y`` (network uncertainty plus observation noise), as ``BayesianRidge`` does.

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        y_std : ndarray, same shape, only with ``return_std``
        """
        X = validate_X(self, X)
        out = self.predictive_.mean(X, return_std, n_jobs=self.n_jobs)
        return tuple(map(self._squeeze, out)) if return_std else self._squeeze(out)

    def predict_std(self, X: ArrayLike, kind: str = "total") -> np.ndarray:
        """Standard deviation of the prediction.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        kind : {"total", "epistemic", "aleatoric"}, default="total"
            ``epistemic``: spread of the network output across posterior draws;
            ``aleatoric``: the observation noise (per row for a heteroscedastic ensemble);
            ``total``: of the posterior predictive of ``y`` (both).

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        check_predictive_args(kind=kind)
        X = validate_X(self, X)
        return self._squeeze(self.predictive_.std(X, kind, n_jobs=self.n_jobs))

    def predict_interval(
        self, X: ArrayLike, coverage: float = 0.9
    ) -> tuple[np.ndarray, np.ndarray]:
        """Equal-tailed interval of the posterior predictive distribution of ``y``.

        The predictive distribution is the mixture over posterior draws of the Gaussian
        observation model; its quantiles are found by bisection on the mixture CDF.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        coverage : float, default=0.9
            Probability mass inside the interval, in (0, 1).

        Returns
        -------
        lower, upper : ndarrays of shape (n_samples,) or (n_samples, n_outputs)
        """
        check_predictive_args(coverage=coverage)
        X = validate_X(self, X)
        bounds = self.predictive_.interval(X, coverage, n_jobs=self.n_jobs)
        return self._squeeze(bounds[0]), self._squeeze(bounds[1])

    def sample_y(self, X: ArrayLike, n_samples: int = 1, random_state=None) -> np.ndarray:
        """Draws from the posterior predictive distribution of ``y``.

        Each draw takes one posterior draw of the weights (and noise) and adds Gaussian
        noise, so a draw is jointly coherent across the rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_outputs, n_samples)
            As ``GaussianProcessRegressor.sample_y``.
        """
        check_predictive_args(n_samples=n_samples)
        X = validate_X(self, X)
        out = self.predictive_.sample_y(X, n_samples, random_state, n_jobs=self.n_jobs)
        return out[:, 0, :] if self.n_outputs_ == 1 else out

    def predict_mixture(self, X: ArrayLike, return_df: bool = False) -> tuple:
        """The posterior predictive distribution of ``y`` as a Gaussian mixture, or as a
        Student-t mixture for a method with ``noise_df``.

        Every method's predictive is a mixture: one component per posterior draw (the
        network's output and that draw's noise), or per Gaussian of a Laplace fit with the
        linearized predictive. The components are Gaussians, or Student-t's of
        ``noise_df`` degrees of freedom for a fit with that noise. :mod:`skbnn.metrics`
        scores it exactly (``crps_mixture`` for Gaussians, ``pit_mixture`` and
        ``log_predictive_density``, with ``df=`` for Student-t's). It holds
        ``n_samples x S`` numbers: for many rows, score them in chunks.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_df : bool, default=False
            Also return the components' degrees of freedom (None for Gaussians). Without
            it, a Student-t noise is a ``ValueError``: its components are not the
            Gaussians a caller of the three-value form expects.

        Returns
        -------
        y_means, y_stds : ndarrays of shape (n_samples, S) or (n_samples, n_outputs, S)
            Each component's mean and standard deviation (a Student-t's scale), in the
            units of ``y``.
        weights : ndarray of shape (S,)
            The components' weights, summing to one.
        df : float or None
            With ``return_df``: the Student-t's degrees of freedom, or None for Gaussians.

        Examples
        --------
        >>> from skbnn.metrics import log_predictive_density
        >>> means, stds, weights = reg.predict_mixture(X_test)  # doctest: +SKIP
        >>> log_predictive_density(y_test, means, stds, weights)  # doctest: +SKIP
        >>> *mixture, df = reg.predict_mixture(X_test, return_df=True)  # doctest: +SKIP
        >>> log_predictive_density(y_test, *mixture, df=df)  # doctest: +SKIP
        """
        X = validate_X(self, X)
        means, stds, *rest = self.predictive_.mixture(X, n_jobs=self.n_jobs,
                                                      return_df=return_df)  # fmt: skip
        if self.n_outputs_ == 1:
            means, stds = means[:, 0], stds[:, 0]
        return (means, stds, *rest)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class BayesianMLPClassifier(ClassifierMixin, _BaseBayesianMLP):
    #: ``"gaussian"`` stands for the larger scale logits need (the class Notes)
    _NESTED = {
        **_BaseBayesianMLP._NESTED,
        "prior": {**PRIORS, "gaussian": partial(GaussianPrior, std=3.0)},
    }

    __doc__ = (
        """Bayesian multilayer perceptron classifier.

    Binary problems use one logit with a Bernoulli likelihood, multiclass problems a softmax
    over one output per class. ``predict_proba`` averages the class probabilities over the
    posterior draws (Bayesian model averaging). What the spread across draws
    (``predict_std``, ``predict_entropy(kind="epistemic")``) holds depends on the method:
    the default on fewer than 10,000 rows is a deep ensemble of 5 MAP networks, whose
    spread is the disagreement between its members only, so where they agree it reports
    none (even where one network's weights are poorly determined); a sampler (``"nuts"``)
    or ``"rms"`` also spreads its draws within each mode.

    Parameters
    ----------"""
        + _SHARED_PARAMS_DOC
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has feature names.
    method_ : method object
        The method that ran: a copy of ``method``, or the one ``"auto"`` chose.
    hidden_layer_sizes_ : tuple of int
        The hidden layers of the fitted network.
    posterior_ : skbnn.posterior.WeightedDraws
    predictive_ : skbnn.predictive.Predictive
        The posterior predictive distribution: ``posterior_``, the network and
        ``classes_`` in one object that predicts by itself; see
        :class:`BayesianMLPRegressor`.
    diagnostics_ : dict
        See :class:`BayesianMLPRegressor`.
    log_evidence_ : float
        Only for a method that estimates it (SMC, Laplace): ``log p(y | X, architecture)``
        of the training labels; see :class:`BayesianMLPRegressor`.
    elbo_ : float
        Only for variational inference (``"vi"``, ``"lbbnn"``): the evidence lower bound of
        the training labels, a lower bound on their log evidence; see
        :class:`BayesianMLPRegressor`.
    inclusion_probabilities_, density_, feature_inclusion_
        Only for ``"lbbnn"``: see :class:`BayesianMLPRegressor`.

    Notes
    -----
    ``prior="gaussian"`` means ``GaussianPrior(std=3)`` here (``GaussianPrior()`` in the
    regressor): under N(0, 1) the output layer's fan-in-scaled weights (sd ``1/sqrt(10)``)
    keep the logits near a prior sd of 1, and the probabilities of a network that classifies
    well stay underconfident; ``std=3`` gives the logits room (doc/choosing.md compares the
    two).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skbnn import BayesianMLPClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = BayesianMLPClassifier(n_samples=200, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:1]).shape
    (1, 3)
    """
    )

    def __init__(
        self,
        hidden_layer_sizes=(10,),
        activation="tanh",
        method="auto",
        prior="gaussian",
        n_samples=None,
        random_state=None,
        n_jobs=None,
        verbose=0,
        warm_start=False,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.method = method
        self.prior = prior
        self.n_samples = n_samples
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.warm_start = warm_start

    @_fit_context(prefer_skip_nested_validation=False)
    @unchanged_on_failure
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight=None) -> BayesianMLPClassifier:
        """Compute the posterior of the network's weights given ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels of any type.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row's log-likelihood: a row of weight 2 counts as
            two rows (integer weights give exactly the fit of repeated rows), weight 0
            leaves it out.

        Returns
        -------
        self : BayesianMLPClassifier
        """
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        self.classes_, Y, likelihood = encode_labels(y, self)
        warn_unscaled(X, self)
        data = weighted_rows(X, Y, sample_weight)
        warn_repeated(X.shape[0], data, sample_weight)
        self._run(*data, likelihood, {"classes": self.classes_})
        if hasattr(self, "log_evidence_") or hasattr(self, "elbo_"):
            # the evidence is of these rows only: evidence_scorer refuses any others
            self._evidence_data = data_fingerprint(X, y)
        return self

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Posterior-averaged class probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        X = validate_X(self, X)
        return self.predictive_.class_probabilities(X, n_jobs=self.n_jobs)[0]

    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Class with the highest posterior-averaged probability.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def predict_std(self, X: ArrayLike) -> np.ndarray:
        """Across-draw standard deviation of each class probability (for the default
        ensemble, between its members only: see the class docstring).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        X = validate_X(self, X)
        return self.predictive_.class_probabilities(X, n_jobs=self.n_jobs)[1]

    def predict_entropy(self, X: ArrayLike, kind: str = "total") -> np.ndarray:
        """Entropy of the predictive class distribution, in nats, and its two parts.

        The total is the entropy of :meth:`predict_proba`. It splits into the posterior
        average of each network's own entropy (``"aleatoric"``: classes that overlap where
        the data do) and the rest, the mutual information between the label and the
        weights (``"epistemic"``: networks that disagree, as they do away from the training
        data; the BALD score of active learning).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        kind : {"total", "epistemic", "aleatoric"}, default="total"

        Returns
        -------
        ndarray of shape (n_samples,)
            Between 0 and ``log(n_classes)``.

        Notes
        -----
        Laplace's linearized predictive averages its entropies over draws of the Gaussian
        logits; the total is still the entropy of :meth:`predict_proba`, so with its probit
        link the epistemic part is the difference of two approximations, set to 0 where
        it falls below.
        """
        check_predictive_args(kind=kind)
        X = validate_X(self, X)
        return self.predictive_.entropy(X, kind, n_jobs=self.n_jobs)
