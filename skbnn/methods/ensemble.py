"""Deep ensembles (Lakshminarayanan, Pritzel and Blundell, 2017)."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..exceptions import collected_warnings, raise_warnings
from ..posterior import WeightedDraws
from ..utils import seed_sequence
from ._base import NOISE_DF_CONSTRAINT, FitResult, store_params
from ._engine_params import ENGINE_DEFAULTS, engine_parameters
from ._optim import NoiseHead, Trainer, glorot_init, noise_of
from ._records import EnsembleDiagnostics

_ENGINE = ENGINE_DEFAULTS["members"]

#: The Student-t that ``noise_df="auto"`` weighs against the Gaussian: the noise of the
#: multi-mode route that led bde (MILE) on the UCI sets (doc/samplers.md). Five degrees of
#: freedom keep a variance while a row ten scales out costs 6 nats, not 50.
AUTO_NOISE_DF = 5.0


def held_out_gain(target, gaussian: list, student: list) -> tuple[float, float, int]:
    """How many nats per held-out row the Student-t members predict better than the
    Gaussian ones: each member's log density of the rows it held out, the t's minus the
    Gaussian's of the member trained from the same seed (the same held-out rows), averaged
    over the member-row pairs with the rows' weights.

    Returns
    -------
    gain, standard error, number of member-row pairs
    """
    # partners by their seed: the same spawn key in two runs from the same root seed
    partner = {m.seed_key: m for m in gaussian if m.val_rows is not None}
    t_target = target.with_noise_df(AUTO_NOISE_DF)
    diffs, weights = [], []
    for m in student:
        g = partner.get(m.seed_key) if m.val_rows is not None else None
        if g is None:
            # a member dropped from one of the two fits has no partner
            continue
        rows = m.val_rows
        diffs.append(
            t_target.pointwise_loglik(m.theta[None], rows=rows)[0]
            - target.pointwise_loglik(g.theta[None], rows=rows)[0]
        )
        weights.append(target.W[rows])
    if not diffs:
        return float("nan"), float("nan"), 0
    d, w = np.concatenate(diffs), np.concatenate(weights)
    total = w.sum()
    gain = float(np.dot(w, d) / total)
    # frequency weights, as everywhere in skbnn: a row of weight 3 counts as three rows
    # (so the error scales with the weights' sum, not only with their number)
    var = np.dot(w, (d - gain) ** 2) / max(total - 1.0, 1.0)
    return gain, float(np.sqrt(var / total)), int(d.size)


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
        paper). On targets rounded to a grid of spacing ``h`` (integers: ``h = 1``) the
        ``1e-6`` is the rounding's variance, ``h ** 2 / 12``, so that no member's density
        piles onto the grid's points. ``"auto"`` is True where the noise is inferred
        (``noise_std=None``), so the intervals widen where the data are noisier, and False
        for a fixed ``noise_std`` and for classifiers; True needs ``noise_std=None``.
    noise_df : float, "auto" or None, default=None
        The degrees of freedom of a Student-t noise of each row, in place of the
        Gaussian, with ``heteroscedastic``: a member's predicted variance of a row is the
        square of the t's scale. Its heavier tails let a member give up on a few rows far
        from the rest instead of widening every row's noise for them, and a held-out row
        far out costs fewer nats. Above 2, so that the predictive has a variance.
        ``None``: the Gaussian. ``"auto"``: the data choose. The members train twice, with
        the Gaussian and with a t of ``AUTO_NOISE_DF`` (5) degrees of freedom, from the
        same seeds, so each member of the one fit holds out the same rows as its partner
        in the other; the fit whose members predict their held-out rows better is kept
        (``diagnostics_["noise"]``, with the gain in nats per held-out row and its
        standard error), and its warnings are the ones raised. Twice the training time.
        Without held-out rows (``early_stopping=False``, ``solver="lbfgs"``, or too few
        rows) there is nothing to choose by, and it is the Gaussian, trained once; so it is
        where every t member diverged. Without a noise head
        (``heteroscedastic`` resolving to False: a classifier, a fixed ``noise_std``),
        ``"auto"`` is the Gaussian.
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
        "noise_df": [*NOISE_DF_CONSTRAINT, StrOptions({"auto"})],
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

        if self.noise_df == "auto" and target.likelihood == "heteroscedastic":
            target, members, diagnostics = self._choose_noise(
                target, n_samples, random_state, n_jobs, verbose, start
            )
        else:
            members, diagnostics = self._train_members(
                target, n_samples, random_state, n_jobs, verbose, start, self.data_fraction
            )
        thetas = np.stack([m.theta for m in members])
        posterior = WeightedDraws(
            thetas,
            noise_precision=noise_of(target, thetas),
            heteroscedastic=target.likelihood == "heteroscedastic",
            min_var=target.min_var,
            noise_df=target.noise_df,
        )
        return FitResult(posterior, diagnostics=diagnostics)

    def _choose_noise(self, target, n_samples, random_state, n_jobs, verbose, start):
        """``noise_df="auto"``: both fits, and the one whose members predict their
        held-out rows better, with its warnings and the choice in its diagnostics."""
        # one root seed for both fits, resolved once (random_state=None or a RandomState
        # gives a new one at each call), so each member of the one meets its partner
        root = seed_sequence(random_state)
        fits = []
        for t in (target, target.with_noise_df(AUTO_NOISE_DF)):
            seeds = np.random.SeedSequence(
                root.entropy, spawn_key=root.spawn_key, n_children_spawned=root.n_children_spawned
            )
            try:
                with collected_warnings() as caught:
                    members, diagnostics = self._train_members(
                        t, n_samples, seeds, n_jobs, verbose, start, self.data_fraction
                    )
            except ValueError:
                if not fits:
                    raise
                # every t member diverged where the Gaussian's did not: the Gaussian
                break
            fits.append((t, members, diagnostics, caught))
            if not any(m.val_rows is not None for m in members):
                # no held-out rows to choose by: the Gaussian, trained once
                break
        gain, se, n_pairs = (
            held_out_gain(target, fits[0][1], fits[1][1])
            if len(fits) == 2
            else (float("nan"), float("nan"), 0)
        )
        keep = 1 if gain > 0 else 0
        chosen, members, diagnostics, caught = fits[keep]
        raise_warnings(caught)
        both = [f[2] for f in fits]
        diagnostics = EnsembleDiagnostics.extending(
            diagnostics,
            noise="student_t" if keep else "gaussian",
            noise_df_gain=gain,
            noise_df_gain_se=se,
            noise_df_rows=n_pairs,
            n_grad_evals=sum(d.n_grad_evals for d in both),
            train_time=sum(d.train_time for d in both),
            compile_time=sum(d.compile_time for d in both),
        )
        return chosen, members, diagnostics
