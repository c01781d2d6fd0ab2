"""Deep ensembles (Lakshminarayanan, Pritzel and Blundell, 2017)."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..posterior import WeightedDraws
from ._base import FitResult
from ._optim import _NoiseHead, _Trainer, glorot_init, noise_of


class DeepEnsemble(_NoiseHead, _Trainer):
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
    solver : {"auto", "adam", "sgd", "lbfgs"}, default="auto"
        The optimizer. ``"auto"`` is Adam where members stop early (early stopping needs a
        minibatch solver) or have more than 5,000 rows, and full-batch L-BFGS otherwise
        (no learning rate; it trains to the optimum, and ignores early stopping, as in
        scikit-learn).
    learning_rate_init : float, default=0.01
        Step size of Adam and SGD (on the per-row loss, as scikit-learn's MLP). With the
        adaptive schedule a large start costs nothing: a plateau lowers it.
    learning_rate : {"adaptive", "constant", "cosine", "step"}, default="adaptive"
        Schedule over the epochs. ``"adaptive"`` (scikit-learn's name): when the monitored
        loss has not improved by ``tol`` for ``n_iter_no_change`` epochs, the rate is
        divided by 5 and training goes on from the best parameters so far; at the plateau
        after the third division the member stops. A fast start and a precise end, which
        near-noiseless data need. ``"constant"``; ``"cosine"``, decay to zero over
        ``max_iter``; ``"step"``, x0.1 at half and at three quarters of ``max_iter``.
    momentum : float, default=0.9
        SGD's momentum.
    nesterovs_momentum : bool, default=True
    beta_1, beta_2, epsilon : float, default=0.9, 0.999, 1e-8
        Adam's moment decay rates and its denominator's floor.
    batch_size : int or "auto", default="auto"
        Rows per minibatch; ``"auto"`` is 32, raised on more than 32,000 rows so that an
        epoch takes at most 1,000 steps.
    max_iter : int, default=None
        Epochs of Adam and SGD, iterations of L-BFGS. ``None`` is a cap rather than a
        length: epochs for 300,000 steps and at least 200 (the stopping rule ends most
        runs far sooner), or 1000 L-BFGS iterations.
    tol : float, default=1e-4
        An epoch counts as an improvement when it lowers the monitored loss (nats per row)
        by more than ``tol``. For L-BFGS it is the gradient tolerance, as in scikit-learn.
    early_stopping : bool or "auto", default="auto"
        Hold out ``validation_fraction`` of each member's rows, monitor their
        log-likelihood instead of the training loss, and keep the best parameters.
        ``"auto"`` is True where the noise is learned with the weights (regression with
        ``noise_std=None``): a network of tens of units fitted to its optimum on a few
        hundred rows overfits, and its noise estimate shrinks with the training residuals,
        so its intervals under-cover. It is False for classifiers and a fixed
        ``noise_std``, whose members are trained to the optimum: there the prior regularizes
        alone, and a held-out share only costs rows. Each member holds out its own rows,
        which also decorrelates the members. A member with too few rows to hold one out
        trains on all of them.
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=20
        Epochs without improvement that make a plateau.
    heteroscedastic : bool or "auto", default="auto"
        Regression only: each member has a second output per target, mapped through
        ``softplus + 1e-6`` to the noise variance of each row, and is trained on the
        Gaussian likelihood with that variance (the configuration of the Deep Ensembles
        paper). ``"auto"`` is True where the noise is inferred (``noise_std=None``), so the
        intervals widen where the data are noisier, and False for a fixed ``noise_std`` and
        for classifiers; True needs ``noise_std=None``.
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
        "heteroscedastic": ["boolean", StrOptions({"auto"})],
        "data_fraction": [Interval(Real, 0, 1, closed="right")],
    }

    def __init__(
        self,
        solver="auto",
        learning_rate_init=0.01,
        learning_rate="adaptive",
        momentum=0.9,
        nesterovs_momentum=True,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        batch_size="auto",
        max_iter=None,
        tol=1e-4,
        early_stopping="auto",
        validation_fraction=0.1,
        n_iter_no_change=20,
        heteroscedastic="auto",
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
