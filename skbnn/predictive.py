"""The posterior predictive distribution of a fitted network, as an object that predicts by
itself.

Fitting produces a :class:`Predictive` (the estimators' ``predictive_``): the posterior, the
network it runs and the target scaling (or the class labels), with public methods for
everything a prediction is made of, in the user's units. The estimators validate ``X``
with scikit-learn's machinery, call it and shape its output; the model average, the plots
and the ArviZ export use it too. :class:`PredictiveMixture` mixes several by weight with
the same methods: a :class:`~skbnn.model_selection.BayesianModelAverage` predicts through
one made of its candidates' predictives.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from joblib import effective_n_jobs
from scipy.special import entr, logsumexp

from ._draws import noise_draws, noise_variance_factor, student_mixture_quantiles
from .kernels.predict import mixture_quantiles
from .metrics._scores import mixture_log_density
from .posterior import ForwardPass, class_probabilities
from .utils import seed_sequence, thread_map

__all__ = ["Predictive", "PredictiveMixture", "StackedDraws"]

#: Rows per chunk of :meth:`PredictiveMixture.quantiles`, whose mixture holds every
#: component's components for each row of a chunk.
INTERVAL_CHUNK_ROWS = 4096


def check_predictive_args(kind="total", coverage=0.5, n_samples=1) -> None:
    """``ValueError`` naming a predictive method's argument that is out of its range."""
    if kind not in ("total", "epistemic", "aleatoric"):
        raise ValueError(f"kind must be one of 'total', 'epistemic', 'aleatoric'; got {kind!r}")
    if not (isinstance(coverage, Real) and 0 < coverage < 1):
        raise ValueError(f"coverage must be a float in (0, 1), got {coverage!r}")
    if not (isinstance(n_samples, Integral) and n_samples >= 1):
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")


def entropy_parts(proba: np.ndarray, aleatoric: np.ndarray, kind: str) -> np.ndarray:
    """The ``kind`` part of the predictive entropy, from the averaged class probabilities
    and the average of the draws' entropies."""
    total = entr(proba).sum(axis=1)
    if kind == "total":
        return total
    # the difference is the mutual information, >= 0 up to rounding
    aleatoric = np.minimum(aleatoric, total)
    return aleatoric if kind == "aleatoric" else total - aleatoric


#: Where a prediction overflows float64, :func:`finite_prediction` refuses it with its own
#: error (or a mean is finite while its spread overflowed): numpy's RuntimeWarning on
#: the way would only repeat that, from inside skbnn
_OVERFLOW_REFUSED = np.errstate(over="ignore", invalid="ignore")


def raise_student_components(df: float) -> None:
    """The error of a caller that expects Gaussian components from a Student-t noise."""
    raise ValueError(
        f"this predictive's noise is a Student-t (noise_df={df:g}), so its components are "
        "Student-t's of that many degrees of freedom, with scales in place of sds: ask "
        "for them with return_df=True (predict_mixture(X, return_df=True) returns "
        "means, scales, weights, df), and score them with df=df in "
        "skbnn.metrics.log_predictive_density and pit_mixture"
    )


def finite_prediction(a: np.ndarray) -> np.ndarray:
    """``a``, or a ValueError when a prediction overflowed float64: inputs far beyond the
    training data's scale (or a y near 1e300) can take the network's outputs, their spread
    or their units beyond its range, which must not come back as inf or NaN."""
    if not np.all(np.isfinite(a)):
        raise ValueError(
            "the prediction overflows float64 at these inputs (the network's outputs, or "
            "their spread in the units of y, are beyond its range): check X for extreme "
            "values (standardize X) and y's scale"
        )
    return a


def _interval_probs(coverage: float) -> np.ndarray:
    check_predictive_args(coverage=coverage)
    return np.array([(1 - coverage) / 2, (1 + coverage) / 2])


def _label_log_proba(proba: np.ndarray, classes: np.ndarray, y) -> np.ndarray:
    """``log proba`` of each row's label ``y`` (labels of ``classes``)."""
    y = np.asarray(y)
    index = np.searchsorted(classes, y)
    index = np.clip(index, 0, len(classes) - 1)
    if not np.all(classes[index] == y):
        raise ValueError("y contains labels not seen during fit")
    with np.errstate(divide="ignore"):
        return np.log(proba[np.arange(len(y)), index])


class StackedDraws(NamedTuple):
    """A posterior's draws as stacked per-layer arrays (:meth:`Predictive.stacked_draws`)."""

    coefs: list
    intercepts: list
    weights: np.ndarray
    noise_var: np.ndarray | None


class _Shared:
    """The methods a predictive and a mixture of them share, written once."""

    def interval(self, X, coverage: float = 0.9, n_jobs=None) -> tuple[np.ndarray, np.ndarray]:
        """Equal-tailed interval of the predictive distribution of ``y``.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Validated inputs (see the class docstring).
        coverage : float, default=0.9
            Probability mass inside the interval, in (0, 1).
        n_jobs : int, default=None
            Threads (``None`` means 1); the result does not depend on it.

        Returns
        -------
        lower, upper : ndarrays of shape (n_samples, n_outputs)
        """
        bounds = self.quantiles(X, _interval_probs(coverage), n_jobs=n_jobs)
        return bounds[0], bounds[1]

    def entropy(self, X, kind: str = "total", n_jobs=None) -> np.ndarray:
        """Entropy of the predictive class distribution, in nats, and its two parts.

        The total is the entropy of the averaged class probabilities; ``"aleatoric"`` is
        the average of each draw's own entropy, ``"epistemic"`` the rest (the mutual
        information between the label and the weights). See
        :meth:`skbnn.BayesianMLPClassifier.predict_entropy`.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        kind : {"total", "epistemic", "aleatoric"}, default="total"
        n_jobs : int, default=None

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_predictive_args(kind=kind)
        proba, aleatoric = self.class_entropies(X, n_jobs=n_jobs)
        return entropy_parts(proba, aleatoric, kind)


class Predictive(_Shared):
    """The posterior predictive distribution of a fitted network.

    Everything a prediction needs, and nothing of the estimator that fitted it: the
    posterior, the network it runs (its layout and activation) and, for a regressor, the
    target scaling (every output is in the units of ``y``), for a classifier the class
    labels. The estimators hold one as ``predictive_``; it predicts on its own, pickles,
    and gives the same bits as the estimator's methods.

    Its methods take inputs as the estimator's prediction methods pass them: a 2-D float
    array with the training data's features, after any checks of feature names (use the
    estimator's methods for data frames and sklearn's input checks). ``n_jobs`` is the
    number of threads (``None`` means 1, ``-1`` all cores); results never depend on it.
    Regression outputs are 2-D, ``(n_samples, n_outputs)``, single outputs included.

    Parameters
    ----------
    posterior : skbnn.posterior.WeightedDraws
        Or any posterior of :mod:`skbnn.posterior`: what predicts, on the standardized
        scale for a regressor.
    layout : skbnn.layout.NetworkLayout
        The network's layer sizes and flat parameter layout.
    activation : int
        The kernel code of the hidden layers' activation (``LogPosterior.activation_code``).
    y_mean, y_std : ndarray of shape (n_outputs,), default=None
        A regressor's target scaling, ``y = z * y_std + y_mean``.
    classes : ndarray of shape (n_classes,), default=None
        A classifier's sorted class labels. Exactly one of ``classes`` and the scaling is
        given.

    Attributes
    ----------
    is_classifier : bool
    n_outputs : int
        Targets of a regressor, classes of a classifier.
    n_features : int

    Examples
    --------
    >>> import pickle
    >>> from sklearn.datasets import make_regression
    >>> from skbnn import BayesianMLPRegressor
    >>> X, y = make_regression(n_samples=60, n_features=2, noise=1.0, random_state=0)
    >>> reg = BayesianMLPRegressor(method="laplace", random_state=0).fit(X, y)
    >>> predictive = pickle.loads(pickle.dumps(reg.predictive_))
    >>> mean, epistemic_var, aleatoric_var = predictive.moments(X[:3])
    >>> mean.shape
    (3, 1)
    """

    def __init__(self, posterior, layout, activation: int, *, y_mean=None, y_std=None,
                 classes=None):  # fmt: skip
        if (classes is None) == (y_mean is None or y_std is None):
            raise ValueError("give a regressor's y_mean and y_std, or a classifier's classes")
        self.posterior = posterior
        self.layout = layout
        self.activation = int(activation)
        self.y_mean = None if y_mean is None else np.asarray(y_mean, dtype=np.float64)
        self.y_std = None if y_std is None else np.asarray(y_std, dtype=np.float64)
        self.classes = None if classes is None else np.asarray(classes)

    @property
    def is_classifier(self) -> bool:
        """Whether this predicts classes."""
        return self.classes is not None

    @property
    def n_outputs(self) -> int:
        """Targets of a regressor, classes of a classifier."""
        return len(self.classes) if self.is_classifier else len(self.y_mean)

    @property
    def n_features(self) -> int:
        """Inputs of the network."""
        return int(self.layout.sizes[0])

    @property
    def noise_df(self) -> float | None:
        """The degrees of freedom of a regressor's Student-t noise, whose components are
        then Student-t's (``noise_df`` of the method); None for the Gaussian noise and for
        a classifier."""
        return getattr(self.posterior, "noise_df", None)

    def network(self, n_jobs=None) -> ForwardPass:
        """The fitted network, run on ``n_jobs`` threads.

        Parameters
        ----------
        n_jobs : int, default=None

        Returns
        -------
        skbnn.posterior.ForwardPass
        """
        return ForwardPass(self.layout, self.activation, effective_n_jobs(n_jobs))

    def stacked_draws(self) -> StackedDraws:
        """The posterior's stored draws as stacked per-layer arrays, for exports that run
        them all at once (:func:`skbnn.onnx.to_onnx`).

        These are the draws the predictions push through the network, except under a
        Laplace fit's linearized predictive (``posterior.predictive_kind == "glm"``),
        which predicts from the MAP and the covariance instead.

        Returns
        -------
        StackedDraws
            ``coefs`` and ``intercepts``, per layer ``(S, fan_in, fan_out)`` and ``(S,
            fan_out)``; ``weights`` ``(S,)``, summing to one; ``noise_var`` ``(S,
            n_outputs)``, each draw's noise variance on the standardized scale, or None for
            a classifier and for a heteroscedastic network (whose outputs are each
            target's mean, then each target's raw variance, see
            :meth:`skbnn.posterior.WeightedDraws.predictive`).
        """
        posterior = self.posterior
        coefs, intercepts = self.layout.unpack_draws(posterior.thetas)
        noise = None if self.is_classifier else posterior.noise_variances(self.n_outputs)
        return StackedDraws(coefs, intercepts, posterior.normalized_weights(), noise)

    def _require_regressor(self) -> None:
        if self.is_classifier:
            raise TypeError(
                "a classifier's predictive has class probabilities and entropies, not the "
                "moments, mixture, quantiles or draws of y"
            )

    def _require_classifier(self) -> None:
        if not self.is_classifier:
            raise TypeError("a regressor's predictive has no class probabilities or entropies")

    def _rows(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(
                f"X must have shape (n_samples, {self.n_features}) (the network's inputs), "
                f"got {X.shape}"
            )
        return X

    # regression: the predictive mixture of Gaussians on the standardized scale

    def _components(self, X, n_jobs):
        """The posterior's predictive mixture over chunks of rows (see
        :meth:`skbnn.posterior.WeightedDraws.components`)."""
        self._require_regressor()
        return self.posterior.components(self.network(n_jobs), self._rows(X), self.n_outputs)

    def _standardized_mixture(self, X, n_jobs):
        """The predictive mixture per chunk of rows, in :mod:`skbnn.metrics`' layout:
        ``(rows, weights, means, sds)`` with means and sds of shape ``(n_chunk, n_targets,
        S)`` on the standardized scale, each component's sd holding its noise and its
        function variance (a linearized Laplace's)."""
        for rows, w, f, fvar, sd in self._components(X, n_jobs):
            if fvar is not None:
                sd = np.sqrt(sd**2 + fvar)
            sd = np.broadcast_to(sd, f.shape)
            yield rows, w, np.transpose(f, (2, 1, 0)), np.transpose(sd, (2, 1, 0))

    def _standardized_moments(self, X, n_jobs):
        """Predictive mean, epistemic and aleatoric variance (standardized), each (n, k)."""
        X = self._rows(X)
        mean = np.empty((X.shape[0], self.n_outputs))
        var = np.empty_like(mean)
        alea = np.empty_like(mean)
        for rows, w, f, fvar, sd in self._components(X, n_jobs):
            m = np.einsum("s,skn->nk", w, f)
            mean[rows] = m
            # two passes: E[x^2] - m^2 cancels catastrophically where sd << |mean|
            var[rows] = np.einsum("s,skn->nk", w, (f - m.T[None]) ** 2)
            if fvar is not None:
                var[rows] += np.einsum("s,skn->nk", w, fvar)
            alea[rows] = np.einsum("s,skn->nk", w, np.broadcast_to(sd**2, f.shape))
        return mean, var, alea * noise_variance_factor(self.noise_df)

    @_OVERFLOW_REFUSED
    def moments(self, X, n_jobs=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean and the two parts of the variance of the predictive distribution of ``y``.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        n_jobs : int, default=None

        Returns
        -------
        mean : ndarray of shape (n_samples, n_outputs)
        epistemic_var : ndarray of shape (n_samples, n_outputs)
            The variance of the network's output over the posterior.
        aleatoric_var : ndarray of shape (n_samples, n_outputs)
            The posterior average of the observation noise's variance.
        """
        mean, var, alea = self._standardized_moments(X, n_jobs)
        scale = self.y_std**2
        mean, var, alea = mean * self.y_std + self.y_mean, var * scale, alea * scale
        return finite_prediction(mean), finite_prediction(var), finite_prediction(alea)

    @_OVERFLOW_REFUSED
    def mean(self, X, return_std: bool = False, n_jobs=None):
        """Predictive mean of ``y``, and optionally its standard deviation.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the sd of the predictive of ``y`` (network and noise), from the
            same pass over the posterior.
        n_jobs : int, default=None

        Returns
        -------
        mean : ndarray of shape (n_samples, n_outputs)
        std : ndarray of shape (n_samples, n_outputs), only with ``return_std``
        """
        mean, var, alea = self._standardized_moments(X, n_jobs)
        y_mean = finite_prediction(mean * self.y_std + self.y_mean)
        if not return_std:
            return y_mean
        return y_mean, finite_prediction(np.sqrt(var + alea) * self.y_std)

    @_OVERFLOW_REFUSED
    def std(self, X, kind: str = "total", n_jobs=None) -> np.ndarray:
        """Standard deviation of the prediction of ``y``.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        kind : {"total", "epistemic", "aleatoric"}, default="total"
            As :meth:`skbnn.BayesianMLPRegressor.predict_std`.
        n_jobs : int, default=None

        Returns
        -------
        ndarray of shape (n_samples, n_outputs)
        """
        check_predictive_args(kind=kind)
        _, var, alea = self._standardized_moments(X, n_jobs)
        total = {"epistemic": var, "aleatoric": alea, "total": var + alea}[kind]
        return finite_prediction(np.sqrt(total) * self.y_std)

    def mixture(self, X, n_jobs=None, return_df: bool = False) -> tuple:
        """The predictive distribution of ``y`` as a Gaussian mixture, or a Student-t
        mixture for a noise of :attr:`noise_df` degrees of freedom.

        One component per posterior draw (the network's output and that draw's noise), or
        per Gaussian of a Laplace fit with the linearized predictive.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        n_jobs : int, default=None
        return_df : bool, default=False
            Also return the components' degrees of freedom. Without it, a Student-t
            noise is a ``ValueError``: its components are not the Gaussians the caller
            expects.

        Returns
        -------
        means, stds : ndarrays of shape (n_samples, n_outputs, S)
            Each component's mean and standard deviation (the scale of a Student-t), in
            the units of ``y``.
        weights : ndarray of shape (S,)
            The components' weights, summing to one.
        df : float or None
            With ``return_df``: :attr:`noise_df`.
        """
        if self.noise_df is not None and not return_df:
            raise_student_components(self.noise_df)
        X = self._rows(X)
        means = stds = weights = None
        for rows, w, mu, sd in self._standardized_mixture(X, n_jobs):
            if means is None:
                means = np.empty((X.shape[0], self.n_outputs, len(w)))
                stds = np.empty_like(means)
                weights = w
            means[rows], stds[rows] = mu, sd
        means = finite_prediction(means * self.y_std[:, None] + self.y_mean[:, None])
        stds = finite_prediction(stds * self.y_std[:, None])
        out = means, stds, np.array(weights)
        return (*out, self.noise_df) if return_df else out

    def quantiles(self, X, q, n_jobs=None) -> np.ndarray:
        """Quantiles of the predictive distribution of ``y``, by bisection on the
        mixture's CDF.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        q : array-like of shape (n_quantiles,)
            Probabilities in (0, 1).
        n_jobs : int, default=None

        Returns
        -------
        ndarray of shape (n_quantiles, n_samples, n_outputs)
        """
        X = self._rows(X)
        probs = np.asarray(q, dtype=np.float64)
        bounds = np.empty((len(probs), X.shape[0], self.n_outputs))
        out = np.empty((X.shape[0], len(probs)))
        n_threads = max(1, effective_n_jobs(n_jobs))
        for rows, w, f, fvar, sd in self._components(X, n_jobs):
            if fvar is not None:
                sd = np.sqrt(sd**2 + fvar)
            for o in range(self.n_outputs):
                mu = np.ascontiguousarray(f[:, o, :].T)
                sd_o = np.ascontiguousarray(sd[:, o, :].T)
                dest = out[rows]
                cuts = np.linspace(0, len(mu), n_threads + 1).astype(int)
                parts = [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]

                def part(ab, mu=mu, sd_o=sd_o, dest=dest, w=w):
                    a, b = ab
                    sd_part = sd_o if sd_o.shape[0] == 1 else sd_o[a:b]
                    if self.noise_df is None:
                        mixture_quantiles(mu[a:b], sd_part, w, probs, dest[a:b])
                    else:
                        student_mixture_quantiles(
                            mu[a:b], sd_part, w, probs, self.noise_df, dest[a:b]
                        )

                thread_map(part, parts, n_threads)
                bounds[:, rows, o] = dest.T
        return finite_prediction(bounds * self.y_std + self.y_mean)

    def sample_y(self, X, n_samples: int = 1, random_state=None, n_jobs=None) -> np.ndarray:
        """Draws from the predictive distribution of ``y``.

        Each draw takes one posterior draw of the weights (and noise) and adds its
        observation noise (Gaussian, or Student-t with :attr:`noise_df`), so a draw is
        jointly coherent across the rows of ``X``.

        Parameters
        ----------
        X : ndarray of shape (n_samples_X, n_features)
        n_samples : int, default=1
        random_state : int, RandomState instance, Generator or None, default=None
        n_jobs : int, default=None

        Returns
        -------
        ndarray of shape (n_samples_X, n_outputs, n_samples)
        """
        return self._draws(X, n_samples, random_state, n_jobs, noise=True)

    def function_draws(self, X, n_samples: int = 1, random_state=None, n_jobs=None) -> np.ndarray:
        """Draws of the network's output (the mean of ``y``, without the noise) over the
        posterior, each jointly coherent across the rows of ``X``: the curves a plot of
        the predictive shows. Parameters and shape as :meth:`sample_y`'s, in the units of
        ``y``; with the same ``random_state``, the functions ``sample_y`` adds noise to.
        """
        return self._draws(X, n_samples, random_state, n_jobs, noise=False)

    def _draws(self, X, n_samples, random_state, n_jobs, noise: bool):
        check_predictive_args(n_samples=n_samples)
        self._require_regressor()
        X = self._rows(X)
        k = self.n_outputs
        rng = np.random.default_rng(seed_sequence(random_state))
        out = np.empty((X.shape[0], k, n_samples))
        draws = self.posterior.function_draws(self.network(n_jobs), X, k, n_samples, rng)
        for rows, f, sd in draws:
            if noise:
                f = f + noise_draws(rng, f.shape, self.noise_df) * sd
            out[rows] = np.transpose(f, (2, 1, 0))
        return finite_prediction(out * self.y_std[None, :, None] + self.y_mean[None, :, None])

    def log_predictive_density(self, X, y, n_jobs=None) -> np.ndarray:
        """Log density (regressor) or probability (classifier) of each row's ``y`` under
        the predictive distribution.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets in their own units, or class labels.
        n_jobs : int, default=None

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        if self.is_classifier:
            proba = self.class_probabilities(X, n_jobs=n_jobs)[0]
            return _label_log_proba(proba, self.classes, y)
        X = self._rows(X)
        Y = np.asarray(y, dtype=np.float64).reshape(X.shape[0], -1)
        Z = (Y - self.y_mean) / self.y_std
        out = np.empty(X.shape[0])
        for rows, w, mu, sd in self._standardized_mixture(X, n_jobs):
            out[rows] = mixture_log_density(Z[rows], mu, sd, w, self.noise_df)
        return out - np.sum(np.log(self.y_std))

    def per_draw(self, X, index=None, n_jobs=None):
        """Each stored posterior draw's own predictive at ``X``, chunk by chunk of rows.

        The draws are pushed through the network (also for a Laplace fit, whose other
        methods may use its linearized predictive): for per-draw exports such as ArviZ's
        ``log_likelihood`` group.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        index : ndarray of int, default=None
            Which of ``posterior.thetas`` to use (default: all, in order).
        n_jobs : int, default=None

        Yields
        ------
        rows : slice
        mean, sd : ndarrays of shape (n_draws, n_outputs, n_chunk)
            A regressor's: each draw's mean and noise sd (the scale of a Student-t noise,
            :attr:`noise_df`), in the units of ``y``.
        proba : ndarray of shape (n_draws, n_chunk, n_classes)
            A classifier's, instead of ``mean, sd``: each draw's class probabilities.
        """
        thetas = self.posterior.thetas if index is None else self.posterior.thetas[index]
        for rows, f in self.network(n_jobs).outputs(self._rows(X), thetas):
            if self.is_classifier:
                yield rows, class_probabilities(f, len(self.classes) == 2)
                continue
            mean, sd = self.posterior.predictive(f, self.n_outputs, index)
            mean = mean * self.y_std[None, :, None] + self.y_mean[None, :, None]
            yield rows, mean, np.broadcast_to(sd * self.y_std[None, :, None], mean.shape)

    # classification

    def class_probabilities(self, X, n_jobs=None) -> tuple[np.ndarray, np.ndarray]:
        """Posterior-averaged class probabilities and their spread across draws.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        n_jobs : int, default=None

        Returns
        -------
        mean, sd : ndarrays of shape (n_samples, n_classes)
        """
        return self._classes(X, n_jobs, entropy=False)

    def class_entropies(self, X, n_jobs=None) -> tuple[np.ndarray, np.ndarray]:
        """The class probabilities and the posterior average of each draw's entropy (the
        aleatoric part of :meth:`entropy`).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        n_jobs : int, default=None

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        expected_entropy : ndarray of shape (n_samples,)
        """
        return self._classes(X, n_jobs, entropy=True)

    def _classes(self, X, n_jobs, entropy: bool):
        """The class probabilities, and their sd (n, n_classes) or with ``entropy`` the
        average of the draws' entropies (n,)."""
        self._require_classifier()
        X = self._rows(X)
        mean = np.empty((X.shape[0], len(self.classes)))
        other = np.empty(X.shape[0] if entropy else mean.shape)
        binary = len(self.classes) == 2
        summary = self.posterior.class_entropies if entropy else self.posterior.class_probabilities
        for rows, m, o in summary(self.network(n_jobs), X, binary):
            mean[rows] = m
            other[rows] = o
        # a weighted sum of probabilities that are all 1 can round to 1 + 2e-16
        return np.clip(mean, 0.0, 1.0, out=mean), other

    def __repr__(self) -> str:
        sizes = "-".join(str(int(s)) for s in self.layout.sizes)
        task = "classes" if self.is_classifier else "target(s)"
        return f"Predictive({sizes} network, {self.n_outputs} {task}, {self.posterior!r})"


class PredictiveMixture(_Shared):
    """A weighted mixture of predictive distributions, with the methods of
    :class:`Predictive`.

    The components are :class:`Predictive` objects (or mixtures) of one task: a
    :class:`~skbnn.model_selection.BayesianModelAverage` holds its candidates' predictives,
    weighted by their posterior probabilities, as its ``predictive_``. Every method is the
    mixture's: means and probabilities are the weighted averages, the variances add the
    spread of the components' means, the Gaussian mixture holds every component's
    components, and a draw picks a component by its weight.

    Each method takes ``X`` as :class:`Predictive` does, or a list of them, one per
    component: the inputs as each component sees them (the candidates of a model average
    may each transform ``X`` in their own Pipeline).

    Parameters
    ----------
    predictives : list of Predictive or PredictiveMixture
    weights : array-like of shape (n_components,)
        Non-negative, summing to one.

    Attributes
    ----------
    is_classifier : bool
    n_outputs : int
    classes : ndarray or None
    """

    def __init__(self, predictives, weights):
        self.predictives = list(predictives)
        self.weights = np.asarray(weights, dtype=np.float64)
        if not self.predictives or self.weights.shape != (len(self.predictives),):
            raise ValueError("give one weight per predictive, and at least one predictive")
        if np.any(self.weights < 0) or not np.isclose(self.weights.sum(), 1.0):
            raise ValueError(f"the weights must be non-negative and sum to one; got {weights!r}")
        if len({p.is_classifier for p in self.predictives}) > 1:
            raise ValueError("the predictives must all be a regressor's or all a classifier's")

    @property
    def is_classifier(self) -> bool:
        """Whether this predicts classes."""
        return self.predictives[0].is_classifier

    @property
    def n_outputs(self) -> int:
        """Targets of a regressor, classes of a classifier."""
        return self.predictives[0].n_outputs

    @property
    def classes(self):
        """A classifier's class labels (None for a regressor)."""
        return self.predictives[0].classes

    def _inputs(self, X) -> list:
        if isinstance(X, (list, tuple)):
            if len(X) != len(self.predictives):
                raise ValueError(
                    f"X is a list of {len(X)} inputs for {len(self.predictives)} components: "
                    "give one per component, or one array for all"
                )
            return list(X)
        return [X] * len(self.predictives)

    def _parts(self, X, call) -> list:
        """``[(weight, call(component, its X))]``."""
        return [(w, call(p, Xc)) for p, Xc, w in
                zip(self.predictives, self._inputs(X), self.weights, strict=True)]  # fmt: skip

    @_OVERFLOW_REFUSED
    def moments(self, X, n_jobs=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As :meth:`Predictive.moments`: within each component from its own moments, and
        the spread of the components' means added to the epistemic part (the law of total
        variance). Components whose moments are finite can still spread beyond float64:
        that is refused as a component's own overflow is."""
        parts = self._parts(X, lambda p, Xc: p.moments(Xc, n_jobs=n_jobs))
        mean = sum(w * m for w, (m, _, _) in parts)
        # two passes: E[x^2] - m^2 cancels catastrophically where the sd << |mean|
        epistemic = sum(w * (v + (m - mean) ** 2) for w, (m, v, _) in parts)
        aleatoric = sum(w * a for w, (_, _, a) in parts)
        return finite_prediction(mean), finite_prediction(epistemic), finite_prediction(aleatoric)

    def mean(self, X, return_std: bool = False, n_jobs=None):
        """As :meth:`Predictive.mean`, from :meth:`moments` (the mean alone from the
        components' means, which stays finite where their spread may not)."""
        if not return_std:
            parts = self._parts(X, lambda p, Xc: p.mean(Xc, n_jobs=n_jobs))
            return finite_prediction(sum(w * m for w, m in parts))
        mean, epistemic, aleatoric = self.moments(X, n_jobs=n_jobs)
        return mean, np.sqrt(epistemic + aleatoric)

    def std(self, X, kind: str = "total", n_jobs=None) -> np.ndarray:
        """As :meth:`Predictive.std`, from :meth:`moments`."""
        check_predictive_args(kind=kind)
        _, epistemic, aleatoric = self.moments(X, n_jobs=n_jobs)
        total = {"epistemic": epistemic, "aleatoric": aleatoric,
                 "total": epistemic + aleatoric}[kind]  # fmt: skip
        return np.sqrt(total)

    @property
    def noise_df(self) -> float | None:
        """The components' Student-t degrees of freedom, shared by all of them (None for
        Gaussian noise); a ``ValueError`` where they differ."""
        dfs = {p.noise_df for p in self.predictives}
        if len(dfs) > 1:
            raise ValueError(
                f"the predictives' noises differ (noise_df {sorted(dfs, key=str)}), so "
                "their components form no one mixture of a single family"
            )
        return dfs.pop()

    def mixture(self, X, n_jobs=None, return_df: bool = False) -> tuple:
        """As :meth:`Predictive.mixture`: every component's components, each one's weights
        multiplied by the component's."""
        df = self.noise_df
        if df is not None and not return_df:
            raise_student_components(df)
        parts = self._parts(X, lambda p, Xc: p.mixture(Xc, n_jobs=n_jobs, return_df=True))
        means = np.concatenate([m for _, (m, *_) in parts], axis=-1)
        stds = np.concatenate([sd for _, (_, sd, *_) in parts], axis=-1)
        weights = np.concatenate([w * cw for w, (_, _, cw, _) in parts])
        out = means, stds, weights / weights.sum()
        return (*out, df) if return_df else out

    def quantiles(self, X, q, n_jobs=None) -> np.ndarray:
        """As :meth:`Predictive.quantiles`, of the mixture of :meth:`mixture`, in
        chunks of rows (the mixture holds every component's components for each row)."""
        probs = np.asarray(q, dtype=np.float64)
        inputs = self._inputs(X)
        n = len(inputs[0])
        chunks = []
        for start in range(0, n, INTERVAL_CHUNK_ROWS):
            rows = slice(start, min(n, start + INTERVAL_CHUNK_ROWS))
            means, stds, weights, df = self.mixture([Xc[rows] for Xc in inputs],
                                                    n_jobs=n_jobs, return_df=True)  # fmt: skip
            bounds = np.empty((len(probs), *means.shape[:2]))
            dest = np.empty((means.shape[0], len(probs)))
            for o in range(means.shape[1]):
                mu, sd = np.ascontiguousarray(means[:, o]), np.ascontiguousarray(stds[:, o])
                if df is None:
                    mixture_quantiles(mu, sd, weights, probs, dest)
                else:
                    student_mixture_quantiles(mu, sd, weights, probs, df, dest)
                bounds[:, :, o] = dest.T
            chunks.append(bounds)
        return np.concatenate(chunks, axis=1)

    def sample_y(self, X, n_samples: int = 1, random_state=None, n_jobs=None) -> np.ndarray:
        """As :meth:`Predictive.sample_y`: each draw picks a component by its weight, then
        draws from it."""
        check_predictive_args(n_samples=n_samples)
        return self._draws(X, n_samples, random_state, n_jobs, "sample_y")

    def function_draws(self, X, n_samples: int = 1, random_state=None, n_jobs=None) -> np.ndarray:
        """As :meth:`Predictive.function_draws`: each draw picks a component by its
        weight, then draws from it."""
        check_predictive_args(n_samples=n_samples)
        return self._draws(X, n_samples, random_state, n_jobs, "function_draws")

    def _draws(self, X, n_samples, random_state, n_jobs, name):
        seeds = seed_sequence(random_state).spawn(len(self.predictives) + 1)
        rng = np.random.default_rng(seeds[-1])
        counts = rng.multinomial(n_samples, self.weights)
        draws = []
        for p, Xc, count, seed in zip(self.predictives, self._inputs(X), counts, seeds[:-1],
                                      strict=True):  # fmt: skip
            if count > 0:
                draw = getattr(p, name)
                draws.append(draw(Xc, int(count), np.random.default_rng(seed), n_jobs=n_jobs))
        # in a random order, so that any slice of the draws is a sample of the mixture
        return np.concatenate(draws, axis=-1)[..., rng.permutation(n_samples)]

    def log_predictive_density(self, X, y, n_jobs=None) -> np.ndarray:
        """As :meth:`Predictive.log_predictive_density`, of the mixture."""
        parts = self._parts(X, lambda p, Xc: p.log_predictive_density(Xc, y, n_jobs=n_jobs))
        log_w = np.log([w for w, _ in parts])
        return logsumexp(np.stack([lpd for _, lpd in parts]) + log_w[:, None], axis=0)

    def class_probabilities(self, X, n_jobs=None) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`Predictive.class_probabilities`: the spread is over every
        component's draws."""
        parts = self._parts(X, lambda p, Xc: p.class_probabilities(Xc, n_jobs=n_jobs))
        mean = sum(w * m for w, (m, _) in parts)
        var = sum(w * (sd**2 + (m - mean) ** 2) for w, (m, sd) in parts)
        return mean, np.sqrt(var)

    def class_entropies(self, X, n_jobs=None) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`Predictive.class_entropies`, over every component's draws."""
        parts = self._parts(X, lambda p, Xc: p.class_entropies(Xc, n_jobs=n_jobs))
        proba = sum(w * m for w, (m, _) in parts)
        return proba, sum(w * h for w, (_, h) in parts)

    def __repr__(self) -> str:
        return (f"PredictiveMixture({len(self.predictives)} components, weights "
                f"{np.array2string(self.weights, precision=3)})")  # fmt: skip
