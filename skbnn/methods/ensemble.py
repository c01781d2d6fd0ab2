"""Deep ensembles (Lakshminarayanan, Pritzel and Blundell, 2017)."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..posterior import WeightedDraws
from ._base import NOISE_DF_CONSTRAINT, FitResult, store_params
from ._optim import (
    ENGINE_DEFAULTS,
    NoiseHead,
    Trainer,
    engine_parameters,
    glorot_init,
    noise_of,
)

_ENGINE = ENGINE_DEFAULTS["members"]


@engine_parameters()
class DeepEnsemble(NoiseHead, Trainer):
    """Independently initialized and trained networks, averaged as equally weighted draws.

    Each of the estimator's ``n_samples`` members minimizes the negative log posterior (the
    prior acts as weight decay) from its own random initialization, stopped early on its
    own held-out rows, and optionally on its own share of the rows. The spread across
    members is the epistemic uncertainty. With the noise inferred (``noise_std=None``), each
    member also predicts the noise of every row (``heteroscedastic="auto"``) and the
    prediction is the Gaussian mixture over members, the configuration of the Deep
    Ensembles paper (Lakshminarayanan et al. 2017); with ``heteroscedastic=False`` each
    member's noise precision is one MAP estimate under its ``Gamma(1, 1e-3)`` prior.

    Every prior with a gradient works; a hierarchical prior's layer precisions are held at
    their prior mean (the optimizer does not learn them).

    The spread across members is only as wide as the modes they find: a classifier's
    members train to the optimum, and on small problems (iris, wine) they reach the same
    mode up to relabelled units, so the prediction is that network's and ``predict_std``
    is near zero. NUTS (``method="nuts"``) or Laplace gives the spread around a mode.

    Five members are the default (``n_samples=None`` in the estimator): the paper's UCI
    figures use five, and the predictive log-likelihood gains little beyond five to ten
    members, while each member costs a full training run.

    Parameters
    ----------
    <engine parameters>
    heteroscedastic : bool or "auto", default="auto"
        Regression only: each member has a second output per target, mapped through
        ``softplus + 1e-6`` to the noise variance of each row, and is trained on the
        Gaussian likelihood with that variance (the configuration of the Deep Ensembles
        paper). ``"auto"`` is True where the noise is inferred (``noise_std=None``), so the
        intervals widen where the data are noisier, and False for a fixed ``noise_std`` and
        for classifiers; True needs ``noise_std=None``.
    noise_df : float or None, default=None
        The degrees of freedom of a Student-t noise of each row, in place of the
        Gaussian, with ``heteroscedastic``: a member's predicted variance of a row is the
        square of the t's scale. Its heavier tails let a member give up on a few rows far
        from the rest instead of widening every row's noise for them, and a held-out row
        far out costs fewer nats. Above 2, so that the predictive has a variance.
        ``None``: the Gaussian.
    data_fraction : float, default=1.0
        Each member trains on a random subset of this share of the rows (drawn without
        replacement), which decorrelates the members further.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skbnn import BayesianMLPRegressor
    >>> from skbnn.methods import DeepEnsemble
    >>> X, y = make_regression(n_samples=200, n_features=3, noise=5.0, random_state=0)
    >>> reg = BayesianMLPRegressor(method=DeepEnsemble(heteroscedastic=True), random_state=0)
    >>> mean, std = reg.fit(X, y).predict(X[:2], return_std=True)
    """

    name = "ensemble"
    default_n_samples = 5

    _parameter_constraints: dict = {
        **Trainer._parameter_constraints,
        "heteroscedastic": ["boolean", StrOptions({"auto"})],
        "noise_df": NOISE_DF_CONSTRAINT,
        "data_fraction": [Interval(Real, 0, 1, closed="right")],
    }

    def __init__(
        self,
        solver=_ENGINE["solver"],
        learning_rate_init=_ENGINE["learning_rate_init"],
        learning_rate=_ENGINE["learning_rate"],
        momentum=_ENGINE["momentum"],
        nesterovs_momentum=_ENGINE["nesterovs_momentum"],
        beta_1=_ENGINE["beta_1"],
        beta_2=_ENGINE["beta_2"],
        epsilon=_ENGINE["epsilon"],
        batch_size=_ENGINE["batch_size"],
        max_iter=_ENGINE["max_iter"],
        tol=_ENGINE["tol"],
        early_stopping=_ENGINE["early_stopping"],
        validation_fraction=_ENGINE["validation_fraction"],
        n_iter_no_change=_ENGINE["n_iter_no_change"],
        heteroscedastic="auto",
        noise_df=None,
        data_fraction=1.0,
    ):
        store_params(self, locals())

    def run(self, target, n_samples: int, random_state, n_jobs, verbose: int) -> FitResult:
        """Train ``n_samples`` members; see :meth:`BaseMethod.run`."""

        def start(target, rng):
            return glorot_init(target, rng), None, None

        members, diagnostics = self._train_members(
            target, n_samples, random_state, n_jobs, verbose, start, self.data_fraction
        )
        thetas = np.stack([m.theta for m in members])
        posterior = WeightedDraws(
            thetas,
            noise_precision=noise_of(target, thetas),
            heteroscedastic=target.likelihood == "heteroscedastic",
            noise_df=target.noise_df,
        )
        return FitResult(posterior, diagnostics=diagnostics)
