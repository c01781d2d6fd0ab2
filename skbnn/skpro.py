"""skbnn as a skpro probabilistic regressor (the ``skpro`` extra).

`skpro <https://skpro.readthedocs.io>`_ is scikit-learn's framework for probabilistic
regression: a regressor's ``predict_proba`` returns a distribution object, with ``mean``,
``var``, ``pdf``, ``cdf``, ``ppf`` and ``sample``, which skpro's metrics (CRPS, log loss,
pinball loss, ...) score. :class:`BayesianMLPProbaRegressor` wraps
:class:`~skbnn.BayesianMLPRegressor` so, and returns the posterior predictive as a
:class:`PosteriorPredictiveMixture` of normals or, for a fit with Student-t noise, a
:class:`PosteriorPredictiveStudentMixture` (both exact), or as skpro's ``Empirical``
distribution of posterior predictive draws.

This module imports skpro; ``import skbnn`` does not import it.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import pandas as pd
from scipy.special import logsumexp, stdtr
from skpro.distributions.empirical import Empirical
from skpro.distributions.normal_mixture import NormalMixture
from skpro.regression.base import BaseProbaRegressor

from skbnn._data import validate_X
from skbnn._draws import noise_logpdf, student_mixture_quantile
from skbnn.estimators import BayesianMLPRegressor
from skbnn.metrics._scores import mixture_spread, student_abs_mean, student_mixture_spread

__all__ = [
    "BayesianMLPProbaRegressor",
    "PosteriorPredictiveMixture",
    "PosteriorPredictiveStudentMixture",
]

#: The constructor parameters passed on to BayesianMLPRegressor.
_REGRESSOR_PARAMS = ("hidden_layer_sizes", "activation", "method", "prior", "n_samples",
                     "noise_std", "random_state", "n_jobs", "verbose", "warm_start")  # fmt: skip


class PosteriorPredictiveMixture(NormalMixture):
    """A mixture of normal distributions per entry, with an exact CRPS.

    skpro's :class:`~skpro.distributions.NormalMixture` (same parameters and layout), with
    the self-energy ``E|X - X'|`` of the mixture in closed form (the spread term of the
    CRPS: skpro 2.16's approximation ignores the spread of the component means and is
    ``sqrt(2)`` too large for a single normal), the variance in two passes (``E[X^2] -
    E[X]^2`` cancels where the sd is small against the mean) and vectorized sampling. It is
    what :meth:`BayesianMLPProbaRegressor.predict_proba` returns by default: one component
    per posterior draw (the network's output and that draw's noise sd, or a linearized
    Laplace's Gaussian), with the posterior's weights in every row.

    The self-energy sums ``S^2 / 2`` pairs per entry for ``S`` components (about 10 ms
    for 1000): for thousands of components over many rows, score draws
    (``distribution="empirical"``) instead.

    Parameters
    ----------
    pi : array-like of shape (n_rows, S) or (S,)
        Mixture weights per row (normalized here).
    mu : array-like of shape (n_rows, S, n_columns), (n_rows, S) or (S,)
        The components' means.
    sigma : array-like, shaped as ``mu``
        The components' standard deviations, positive.
    index, columns : pandas.Index, default=None
        As skpro's distributions: the rows and columns (``RangeIndex`` when None).

    Examples
    --------
    >>> import numpy as np
    >>> from skbnn.skpro import PosteriorPredictiveMixture
    >>> d = PosteriorPredictiveMixture(
    ...     pi=[[0.5, 0.5]], mu=[[[-1.0], [1.0]]], sigma=[[[1.0], [1.0]]]
    ... )
    >>> float(d.var().iloc[0, 0])
    2.0
    """

    def __init__(self, pi, mu, sigma, index=None, columns=None):
        super().__init__(pi=pi, mu=mu, sigma=sigma, index=index, columns=columns)
        # every component in full, weights (n_rows, S) and sds (n_rows, S, n_columns), as
        # the means: NormalMixture keeps a scalar sd or one row of weights as given
        self._pi = np.broadcast_to(self._pi, self._mu.shape[:2])
        self._sigma = np.broadcast_to(self._sigma, self._mu.shape)

    def _var(self):
        pi, mu, sigma = self._pi, self._mu, self._sigma
        mean = np.sum(pi[:, :, None] * mu, axis=1, keepdims=True)
        var = np.sum(pi[:, :, None] * (sigma**2 + (mu - mean) ** 2), axis=1)
        return float(var[0, 0]) if self.ndim == 0 else var

    def _energy_self(self):
        pi, mu, sigma = self._pi, self._mu, self._sigma
        spread = mixture_spread(
            np.transpose(mu, (0, 2, 1)), np.transpose(sigma, (0, 2, 1)) ** 2, pi
        )
        if self.ndim == 0:
            return float(spread[0, 0])
        # skpro's energy is the sum over a row's columns
        return np.sum(spread, axis=1, keepdims=True)

    def sample(self, n_samples=None):
        """Draws from the distribution, with numpy's global random generator as skpro's
        distributions use it.

        A draw picks one component per row (the same for all columns: a posterior draw
        gives every output), then draws from that component.

        Parameters
        ----------
        n_samples : int, default=None
            Number of draws; None for one, in the shape of ``self``.

        Returns
        -------
        float or pandas.DataFrame
            A float for a scalar distribution without ``n_samples``; a DataFrame with the
            index of ``self`` for one draw, otherwise rows ``(draw, index)``.
        """
        N = 1 if n_samples is None else n_samples
        pi, mu, sigma = self._pi, self._mu, self._sigma
        n_rows, S, n_cols = mu.shape
        cdf = np.cumsum(pi, axis=1)
        # numpy's global state, as skpro's distributions: np.random.seed reproduces them
        u = np.random.random_sample((N, n_rows, 1)) * cdf[None, :, -1:]  # noqa: NPY002
        which = np.minimum(np.sum(u >= cdf[None], axis=2), S - 1)  # (N, n_rows)
        rows = np.arange(n_rows)[None, :]
        mu, sigma = mu[rows, which], sigma[rows, which]  # (N, n_rows, n_cols)
        draws = (mu + sigma * self._standard_noise(mu.shape)).reshape(N * n_rows, n_cols)
        if self.ndim == 0:
            if n_samples is None:
                return float(draws[0, 0])
            return pd.DataFrame(draws, index=pd.RangeIndex(N), columns=pd.RangeIndex(1))
        index = (self.index if n_samples is None
                 else pd.MultiIndex.from_product([pd.RangeIndex(N), self.index]))  # fmt: skip
        return pd.DataFrame(draws, index=index, columns=self.columns)

    def _standard_noise(self, shape):
        """The components' noise at unit scale, from numpy's global state."""
        return np.random.standard_normal(shape)  # noqa: NPY002

    def _iloc(self, rowidx=None, colidx=None):
        return self._same_type(super()._iloc(rowidx, colidx))

    def _iat(self, rowidx=None, colidx=None):
        return self._same_type(super()._iat(rowidx, colidx))

    def _same_type(self, d):
        # NormalMixture's subsets are NormalMixture objects: keep this class's methods
        if not isinstance(d, NormalMixture) or isinstance(d, type(self)):
            return d
        if d.ndim == 0:
            return self._like(pi=d._pi[0], mu=d._mu[0, :, 0], sigma=d._sigma[0, :, 0])
        return self._like(pi=d._pi, mu=d._mu, sigma=d._sigma, index=d.index,
                          columns=d.columns)  # fmt: skip

    def _like(self, **params):
        """A distribution of this class with these components (and this one's other
        parameters)."""
        return type(self)(**params)


def _as_2d(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x.reshape(1, 1) if x.ndim == 0 else x[None, :] if x.ndim == 1 else x


class PosteriorPredictiveStudentMixture(PosteriorPredictiveMixture):
    """A mixture of Student-t distributions per entry, sharing their degrees of freedom.

    The posterior predictive of a fit with Student-t observation noise (a method's
    ``noise_df``): one component per posterior draw, a Student-t of ``df`` degrees of
    freedom with the network's output as location and that draw's noise scale. It is what
    :meth:`BayesianMLPProbaRegressor.predict_proba` returns for such a fit. It subclasses
    :class:`PosteriorPredictiveMixture` (so skpro's ``NormalMixture``) for their layout,
    subsetting and sampling; its components are Student-t's, not normals.

    The mean, variance (``sigma^2 df / (df - 2)`` per component, in two passes), density,
    log density, CDF and ``E|X - x|`` (the CRPS's first term) are in closed form; the
    quantiles are the CDF's roots, by Newton's method inside a bracket, to rounding. The
    self-energy ``E|X - X'|`` (the CRPS's spread term) has no closed form: it is
    ``2 * integral of F (1 - F)``, computed by double-exponential quadrature whose step is
    halved until a halving changes it by less than ``1e-8`` (relative; its error is then
    usually at rounding), which is why the tags call ``energy`` approximate. skpro's
    default, the mean of a thousand draws of ``|X - X'|``, would be random and a few
    percent off. Each node of the quadrature evaluates every component's CDF, and narrow
    components far apart need more nodes: an entry whose budget runs out while a halving
    still changes it by more than ``1e-6`` warns.

    Parameters
    ----------
    pi : array-like of shape (n_rows, S) or (S,)
        Mixture weights per row (normalized here).
    mu : array-like of shape (n_rows, S, n_columns), (n_rows, S) or (S,)
        The components' locations (their means).
    sigma : array-like, shaped as ``mu``
        The components' scales, positive (their sds are ``sigma * sqrt(df / (df - 2))``).
    df : float
        The components' degrees of freedom, finite and above 2 (a finite variance).
    index, columns : pandas.Index, default=None
        As skpro's distributions: the rows and columns (``RangeIndex`` when None).

    See Also
    --------
    PosteriorPredictiveMixture : The mixture of normals, for a fit with Gaussian noise.

    Examples
    --------
    >>> from skbnn.skpro import PosteriorPredictiveStudentMixture
    >>> d = PosteriorPredictiveStudentMixture(
    ...     pi=[[0.5, 0.5]], mu=[[[-1.0], [1.0]]], sigma=[[[1.0], [1.0]]], df=4.0
    ... )
    >>> float(d.var().iloc[0, 0])  # each component's 4 / (4 - 2), plus the means' spread
    3.0
    >>> float(d.cdf(0.0).iloc[0, 0])
    0.5
    """

    _tags = {
        "capabilities:approx": ["pdfnorm", "energy"],
        "capabilities:exact": ["mean", "var", "pdf", "log_pdf", "cdf", "ppf"],
    }

    def __init__(self, pi, mu, sigma, df, index=None, columns=None):
        if not (isinstance(df, Real) and 2 < df < np.inf):
            raise ValueError(f"df must be a finite number above 2, got {df!r}")
        self.df = df
        super().__init__(pi=pi, mu=mu, sigma=sigma, index=index, columns=columns)

    def _like(self, **params):
        return type(self)(df=self.df, **params)

    def _standard_noise(self, shape):
        return np.random.standard_t(self.df, shape)  # noqa: NPY002

    def _out(self, a):
        return float(a[0, 0]) if self.ndim == 0 else a

    def _var(self):
        pi, mu, sigma = self._pi, self._mu, self._sigma
        mean = np.sum(pi[:, :, None] * mu, axis=1, keepdims=True)
        factor = self.df / (self.df - 2.0)
        return self._out(np.sum(pi[:, :, None] * (sigma**2 * factor + (mu - mean) ** 2), axis=1))

    def _log_pdf(self, x):
        x = _as_2d(x)[:, None, :]
        with np.errstate(divide="ignore"):
            log_pi = np.log(self._pi)[:, :, None]
        log_comp = noise_logpdf(x - self._mu, self._sigma, self.df)
        return self._out(logsumexp(log_pi + log_comp, axis=1))

    def _pdf(self, x):
        x = _as_2d(x)[:, None, :]
        comp = np.exp(noise_logpdf(x - self._mu, self._sigma, self.df))
        return self._out(np.sum(self._pi[:, :, None] * comp, axis=1))

    def _cdf(self, x):
        z = (_as_2d(x)[:, None, :] - self._mu) / self._sigma
        return self._out(np.sum(self._pi[:, :, None] * stdtr(self.df, z), axis=1))

    def _ppf(self, p):
        p = np.broadcast_to(_as_2d(p), self._mu[:, 0, :].shape)
        n, S, k = self._mu.shape
        inside = (p > 0.0) & (p < 1.0)
        # one row of components per entry, as the self-energy's
        x = student_mixture_quantile(
            np.transpose(self._mu, (0, 2, 1)).reshape(n * k, S),
            np.transpose(self._sigma, (0, 2, 1)).reshape(n * k, S),
            np.repeat(self._pi, k, axis=0),
            np.where(inside, p, 0.5).ravel(),
            float(self.df),
        ).reshape(n, k)
        out = np.where(inside, x, np.where(p <= 0.0, -np.inf, np.where(p >= 1.0, np.inf, np.nan)))
        return self._out(out)

    def _energy_x(self, x):
        z = (_as_2d(x)[:, None, :] - self._mu) / self._sigma
        comp = student_abs_mean(z, self.df)
        energy = np.sum(self._pi[:, :, None] * self._sigma * comp, axis=1)
        if self.ndim == 0:
            return float(energy[0, 0])
        return np.sum(energy, axis=1, keepdims=True)

    def _energy_self(self):
        n, S, k = self._mu.shape
        # one row of components per entry
        spread = student_mixture_spread(
            np.transpose(self._mu, (0, 2, 1)).reshape(n * k, S),
            np.transpose(self._sigma, (0, 2, 1)).reshape(n * k, S),
            np.repeat(self._pi, k, axis=0),
            float(self.df),
            advice='distribution="empirical" scores draws instead',
        ).reshape(n, k)
        if self.ndim == 0:
            return float(spread[0, 0])
        return np.sum(spread, axis=1, keepdims=True)

    @classmethod
    def get_test_params(cls, parameter_set="default"):
        """skpro's test settings of :class:`~skpro.distributions.NormalMixture`, with
        degrees of freedom.

        Parameters
        ----------
        parameter_set : str, default="default"
            Unused.

        Returns
        -------
        list of dict
            Rows of two components over two columns (with a RangeIndex and with an index
            and columns of their own) and a scalar distribution, with 5, 3 and 2.5 degrees
            of freedom.
        """
        params = NormalMixture.get_test_params(parameter_set)
        return [{**p, "df": df} for p, df in zip(params, [5.0, 3.0, 2.5], strict=True)]


class BayesianMLPProbaRegressor(BaseProbaRegressor):
    """A Bayesian MLP as a skpro probabilistic regressor.

    Fits a :class:`~skbnn.BayesianMLPRegressor` with the same parameters (exposed as
    ``estimator_``), and predicts through skpro's interface: ``predict_proba`` returns the
    posterior predictive distribution of ``y``, and ``predict``, ``predict_var``,
    ``predict_interval`` and ``predict_quantiles`` its mean, variance, equal-tailed
    intervals and quantiles, computed exactly from the predictive's mixture (of normals, or
    of Student-t's for a method with Student-t noise, ``noise_df``) whatever
    ``distribution`` is. Multi-output ``y`` is supported; missing values are not.
    ``X`` is used as given: put a scaler in front (``StandardScaler() * regressor``, a skpro
    Pipeline), as for ``BayesianMLPRegressor``.

    Parameters
    ----------
    hidden_layer_sizes, activation, method, prior, n_samples, noise_std, random_state, \
n_jobs, verbose, warm_start
        As :class:`~skbnn.BayesianMLPRegressor`'s, with the same defaults. With
        ``warm_start=True``, ``set_params(n_samples=...)`` then ``fit`` on the same data
        continues the chains (skbase's ``set_params`` resets other fitted state).
    distribution : {"mixture", "empirical"}, default="mixture"
        What ``predict_proba`` returns. ``"mixture"``: the predictive exactly (every
        method's predictive is a mixture, one component per posterior draw), with
        closed-form mean, variance, density and CDF: a :class:`PosteriorPredictiveMixture`
        of normals, with a closed-form CRPS, or for a method with ``noise_df`` a
        :class:`PosteriorPredictiveStudentMixture` of Student-t's, whose CRPS's spread term
        is a quadrature. ``"empirical"``: skpro's ``Empirical`` of
        ``n_draws`` draws of ``sample_y``, each jointly coherent across the rows (one
        posterior draw per draw of all rows), sampled as wholes: for joint statements about
        several rows, and cheaper to score by CRPS than a mixture of thousands of components.
    n_draws : int, default=1000
        Draws of ``distribution="empirical"``, seeded by ``random_state`` (ignored by the
        mixture).

    Attributes
    ----------
    estimator_ : skbnn.BayesianMLPRegressor
        The fitted regressor: its ``diagnostics_``, ``log_evidence_`` and other fitted
        attributes describe the fit.

    See Also
    --------
    skbnn.BayesianMLPRegressor : The scikit-learn estimator this wraps.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.datasets import make_regression
    >>> from skbnn.skpro import BayesianMLPProbaRegressor
    >>> X, y = make_regression(n_samples=60, n_features=2, noise=1.0, random_state=0)
    >>> X, y = pd.DataFrame(X, columns=["a", "b"]), pd.DataFrame({"y": y})
    >>> reg = BayesianMLPProbaRegressor(method="laplace", random_state=0).fit(X, y)
    >>> dist = reg.predict_proba(X.iloc[:3])
    >>> dist.shape
    (3, 1)
    """

    _tags = {
        "authors": ["skbnn developers"],
        "capability:multioutput": True,
        "capability:missing": False,
        "X_inner_mtype": "pd_DataFrame_Table",
        "y_inner_mtype": "pd_DataFrame_Table",
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
        distribution="mixture",
        n_draws=1000,
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
        self.distribution = distribution
        self.n_draws = n_draws
        super().__init__()

    def _fit(self, X: pd.DataFrame, y: pd.DataFrame, C=None) -> BayesianMLPProbaRegressor:
        if self.distribution not in ("mixture", "empirical"):
            raise ValueError(
                f"distribution must be 'mixture' or 'empirical', got {self.distribution!r}"
            )
        if not (isinstance(self.n_draws, Integral) and self.n_draws >= 1):
            raise ValueError(f"n_draws must be a positive int, got {self.n_draws!r}")
        params = {name: getattr(self, name) for name in _REGRESSOR_PARAMS}
        # skbase's set_params (the way to raise n_samples) resets a fitted object but for
        # attributes whose names hold "__": the previous fit's regressor is kept in one, so
        # that warm_start continues its chains as BayesianMLPRegressor's does
        previous = getattr(self, "_warm__estimator", None)
        if self.warm_start and previous is not None:
            estimator = previous.set_params(**params)
        else:
            estimator = BayesianMLPRegressor(**params)
        # skpro has checked the column names; skbnn sees arrays (skpro allows names
        # of mixed types, which scikit-learn's checks refuse)
        Y = y.to_numpy(dtype=np.float64)
        self.estimator_ = estimator.fit(self._array(X), Y[:, 0] if Y.shape[1] == 1 else Y)
        self._warm__estimator = self.estimator_ if self.warm_start else None
        return self

    @staticmethod
    def _array(X: pd.DataFrame) -> np.ndarray:
        return X.to_numpy(dtype=np.float64)

    def _frame(self, a: np.ndarray, X: pd.DataFrame, columns=None) -> pd.DataFrame:
        a = a.reshape(len(X), -1)
        columns = self._get_columns(method="predict") if columns is None else columns
        return pd.DataFrame(a, index=X.index, columns=columns)

    def _predict(self, X: pd.DataFrame) -> pd.DataFrame:
        return self._frame(self.estimator_.predict(self._array(X)), X)

    def _predict_var(self, X: pd.DataFrame) -> pd.DataFrame:
        return self._frame(self.estimator_.predict_std(self._array(X)) ** 2, X)

    def _predict_quantiles(self, X: pd.DataFrame, alpha: list) -> pd.DataFrame:
        rows = validate_X(self.estimator_, self._array(X))
        q = self.estimator_.predictive_.quantiles(rows, alpha, n_jobs=self.n_jobs)
        # (alpha, row, output) to skpro's columns: each output's quantiles together
        columns = self._get_columns(method="predict_quantiles", alpha=alpha)
        return self._frame(np.transpose(q, (1, 2, 0)), X, columns)

    def _predict_proba(
        self, X: pd.DataFrame
    ) -> PosteriorPredictiveMixture | PosteriorPredictiveStudentMixture | Empirical:
        columns = self._get_columns(method="predict")
        k = len(columns)
        if self.distribution == "empirical":
            draws = self.estimator_.sample_y(self._array(X), self.n_draws, self.random_state)
            draws = draws.reshape(len(X), k, self.n_draws)
            # skpro's sample layout: rows (draw, instance), one column per output
            spl = pd.DataFrame(
                np.transpose(draws, (2, 0, 1)).reshape(-1, k),
                index=pd.MultiIndex.from_product([pd.RangeIndex(self.n_draws), X.index]),
                columns=columns,
            )
            return Empirical(spl, time_indep=False, index=X.index, columns=columns)
        means, scales, weights, df = self.estimator_.predict_mixture(self._array(X), return_df=True)
        means, scales = means.reshape(len(X), k, -1), scales.reshape(len(X), k, -1)
        params = {
            "pi": np.broadcast_to(weights, (len(X), len(weights))),
            "mu": np.transpose(means, (0, 2, 1)),
            "sigma": np.transpose(scales, (0, 2, 1)),
            "index": X.index,
            "columns": columns,
        }
        if df is None:
            return PosteriorPredictiveMixture(**params)
        return PosteriorPredictiveStudentMixture(df=df, **params)

    @classmethod
    def get_test_params(cls, parameter_set: str = "default") -> list[dict]:
        """Small, fast settings for skpro's estimator checks.

        Parameters
        ----------
        parameter_set : str, default="default"
            Unused: one set of settings serves all tests.

        Returns
        -------
        list of dict
            Constructor parameters of the instances skpro's checks build: a Laplace fit
            (the mixture) and a two-member deep ensemble (the empirical distribution), on
            networks of three and two hidden units: a fraction of a second each.
        """
        from skbnn.methods import DeepEnsemble, Laplace

        return [
            {"hidden_layer_sizes": (3,), "method": Laplace(max_iter=100), "random_state": 0},
            {
                "hidden_layer_sizes": (2,),
                "method": DeepEnsemble(max_iter=300),
                "n_samples": 2,
                "random_state": 1,
                "distribution": "empirical",
                "n_draws": 50,
            },
        ]
