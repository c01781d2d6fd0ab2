"""Deep ensembles (Lakshminarayanan, Pritzel and Blundell, 2017)."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ..posterior import WeightedDraws
from ._base import FitResult
from ._optim import _Trainer, glorot_init, noise_of


class DeepEnsemble(_Trainer):
    """Independently initialized and trained networks, averaged as equally weighted draws.

    Each of the estimator's ``n_samples`` members is a MAP fit (the prior acts as weight
    decay) from its own random initialization, and optionally its own share of the rows.
    The spread across members is the epistemic uncertainty; with ``heteroscedastic=True``
    each member also predicts the noise of every row, and the prediction is the Gaussian
    mixture over members, the configuration of the Deep Ensembles paper.

    Every prior with a gradient works; a hierarchical prior's layer precisions are held at
    their prior mean (the optimizer does not learn them). With ``noise_std=None`` each
    member's noise precision is a MAP estimate, optimized with the weights under its
    ``Gamma(1, 1e-3)`` prior.

    Five members are the default (``n_samples=None`` in the estimator): the paper's UCI
    figures use five, and the predictive log-likelihood gains little beyond five to ten
    members, while each member costs a full training run.

    Parameters
    ----------
    solver : {"auto", "lbfgs", "adam", "sgd"}, default="auto"
        ``"auto"`` is full-batch L-BFGS up to 5,000 rows (no learning rate to tune, one
        pass over the data is cheap) and Adam above.
    learning_rate_init : float, default=1e-3
        Step size of Adam and SGD (on the per-row loss, as scikit-learn's MLP).
    learning_rate : {"constant", "cosine", "step"}, default="constant"
        Schedule over the epochs: constant, cosine decay to zero, or x0.1 at half and at
        three quarters of ``max_iter``.
    momentum : float, default=0.9
        SGD's momentum.
    nesterovs_momentum : bool, default=True
    beta_1, beta_2, epsilon : float, default=0.9, 0.999, 1e-8
        Adam's moment decay rates and its denominator's floor.
    batch_size : int or "auto", default="auto"
        Rows per minibatch; ``"auto"`` is ``min(200, n_rows)`` as in scikit-learn.
    max_iter : int, default=None
        Epochs of Adam and SGD, iterations of L-BFGS; ``None`` is 200 epochs (as
        scikit-learn's MLP) or 1000 L-BFGS iterations, each one pass over the data: networks
        of tens of units need a few hundred to reach ``tol``.
    tol : float, default=1e-4
        A member stops when its loss (or validation loss) has not improved by ``tol`` for
        more than ``n_iter_no_change`` epochs. For L-BFGS it is the gradient tolerance,
        as in scikit-learn; scipy's relative reduction test (``ftol=2.2e-9``) may stop it
        first.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of each member's rows and stop on their
        log-likelihood, keeping the best parameters (Adam and SGD only, as in scikit-learn).
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=10
    heteroscedastic : bool, default=False
        Regression only: each member has a second output per target, mapped through
        ``softplus + 1e-6`` to the noise variance of each row, and is trained on the
        Gaussian likelihood with that variance. ``noise_std`` must then be None.
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
        **_Trainer._parameter_constraints,
        "heteroscedastic": ["boolean"],
        "data_fraction": [Interval(Real, 0, 1, closed="right")],
    }

    def __init__(
        self,
        solver="auto",
        learning_rate_init=1e-3,
        learning_rate="constant",
        momentum=0.9,
        nesterovs_momentum=True,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        batch_size="auto",
        max_iter=None,
        tol=1e-4,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=10,
        heteroscedastic=False,
        data_fraction=1.0,
    ):
        self.solver = solver
        self.learning_rate_init = learning_rate_init
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.nesterovs_momentum = nesterovs_momentum
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.heteroscedastic = heteroscedastic
        self.data_fraction = data_fraction

    def likelihood(self, likelihood: str) -> str:
        """The heteroscedastic Gaussian in place of the Gaussian when asked for."""
        if not self.heteroscedastic:
            return likelihood
        if likelihood != "gaussian":
            raise ValueError(
                "heteroscedastic=True applies to regression only (a classifier has no noise)"
            )
        return "heteroscedastic"

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
        )
        return FitResult(posterior, diagnostics=diagnostics)
