"""``method="auto"``, the estimators' default: a method chosen from the problem's size.

The rule reads only the task and the numbers of rows and network parameters, never a
timing, so a fit still depends on ``random_state`` alone, on any machine:

- regression with at most ``NUTS_MAX_WORK`` rows x parameters: :class:`~skbnn.methods.NUTS`,
  the exact posterior;
- regression on at least ``MCLMC_MIN_ROWS`` rows with at most ``MCLMC_MAX_WORK``:
  :class:`~skbnn.methods.MCLMC` from eight optima (``AUTO_MCLMC``), a chain in the mode of
  each, with a noise per row as the ensemble's;
- larger regression problems: :class:`~skbnn.methods.DeepEnsemble` with
  ``noise_df="auto"``, its members' held-out rows choosing between a Gaussian and a
  Student-t noise;
- classification on fewer than ``SGHMC_MIN_ROWS`` rows: the deep ensemble;
- classification on ``SGHMC_MIN_ROWS`` rows or more: :class:`~skbnn.methods.SGHMC`.

On few rows the classifier's ensemble held out a log loss at or below
``LogisticRegression``'s on iris, wine, breast_cancer and digits, where NUTS's and SGHMC's
posteriors under the default prior did not (their average over the weights the few rows
leave free costs the easy rows confidence). On many rows that average pays: on the credit
default data SGHMC's log loss was at or below the ensemble's, in a fraction of its time.
In regression the ensemble, which predicts a noise per row, led SGHMC and Kronecker
Laplace on real data; only Laplace came near, at tens of times the time
(doc/choosing.md). Chains from several optima (``NUTS(n_modes=4)``) were measured
against NUTS's dispersed chains at the default network and did not predict better; on
a wider ReLU network the multi-mode route that led bde (MILE) on three of five UCI sets
in less than bde's time, MCLMC from eight optima and then NUTS from where its chains
ended (``NUTS(n_modes=8, n_chains=8, init=MCLMC(n_modes=8, n_chains=8))``), needed
bde's broad N(0, 1) prior, which puts density spikes on integer targets, and warned on
every fit; with a Student-t noise (``noise_df=5``) it led on four of five, and 55-75 %
of its fits warned, rightly: its chains drift within their modes, as exact MAMS's do
from the same optima (doc/samplers.md). Its first stage alone from 32 optima, as that
warning asks, led bde on four of five sets by more than two standard errors in about
half bde's time, and warned on 0-20 % of the fits on four sets and 65 % on wine's
integer targets: still above the default's goal (at most 5 %), and at bde's network and
prior. With tanh units in bde's two layers of 16, and bde's prior, the stage led this
default on every one of the twenty splits of the four continuous sets, and led bde on
them by more than two standard errors; under the default prior and network its mean
missed more than NUTS's. On wine its draws piled density onto the integer targets and
7 of 20 fits warned, until the predicted noise was floored at the targets' rounding
(``h ** 2 / 12``): then none warned, and it led NUTS and bde on all twenty splits
(1 of 100 fits warned over the five sets; doc/samplers.md, "The stage at tanh and bde's
prior, twenty splits"). The prior and the network are the estimator's, not the
method's, so running the stage here changes the default prior and network where
``"auto"`` samples this way: not done yet, so ``"auto"`` keeps the dispersed chains. Each of them
settles in a mode of its own and the predictive is their mixture, so NUTS's
ConvergenceWarning judges the predictive's Monte Carlo error within each chain, not the
chains' agreement (doc/samplers.md, "When the samplers warn").

Past NUTS's size the modes are still the unit of sampling. MCLMC from eight optima, with
bde's energy variance (0.1) and steps, led the ensemble on the diamonds data on 2,500,
4,000 and 10,000 rows (by 0.107, 0.063 and 0.046 nats per row of test log-likelihood)
and on every fit of the Friedman variant on 1,200-3,500 rows (by 0.03-0.34), with no
warning, at several times the ensemble's time (doc/choosing.md). With one noise for all
rows it trailed the ensemble on Computers and Males, whose noise per row it lacked; with
a noise per row (``AUTO_MCLMC``) it leads on 12 of 13 fits from 2,000 rows. On the UCI
sets, within NUTS's size, the chains with one noise trailed NUTS on Boston, energy and
yacht; with a noise per row they lead its density on four sets but miss its mean on all
five (yacht's RMSE 0.75 against 0.30, as exact NUTS under the same model does), so NUTS
keeps them. With 50 ReLU units on those sets (455-1,439 rows, past NUTS's size) the
chains with one noise trailed the ensemble on all four, so the ensemble keeps fewer than
``MCLMC_MIN_ROWS`` rows. ``MCLMC_MAX_WORK`` bounds its run at two to three times NUTS's
at its own bound, and its 5,000 warm-up steps are worth their time: with 2,000 the
chains took half the time and gave back 0.04 of their 0.10 lead over the ensemble on
8,000 diamonds rows (doc/choosing.md gives the times).

A Student-t noise (``noise_df=5``), the other half of that route's lead, was measured in
each regression branch (doc/choosing.md). With NUTS at the default network it raised the
test log-likelihood on every UCI set, but doubled yacht's RMSE, warned on most yacht
fits, and on wine's integer targets gained only by piling density onto them: NUTS keeps
the Gaussian. With the ensemble it gained on real data (UCI, diamonds) and lost on data
whose noise is Gaussian, which the problem's size cannot tell apart, but the ensemble's
own held-out rows can: ``DeepEnsemble(noise_df="auto")`` trains both and keeps the one
that predicts them better. It was at or above the Gaussian ensemble on every UCI set, at
two networks, on diamonds and on the Friedman data, where it kept the Gaussian, at twice
the training time; so ``"auto"``'s regression ensemble runs it.
"""

from __future__ import annotations

from ._base import BaseMethod

#: Rows times network parameters up to which ``"auto"`` samples the exact posterior with
#: NUTS. Its cost is a gradient per leapfrog step, each a pass over every row and parameter,
#: and NUTS's trajectories lengthen as more rows narrow the posterior; at this size its
#: default run (4 chains x 750 iterations) stays within the default's time budget even
#: when every trajectory reaches the depth cap (doc/choosing.md gives its times).
NUTS_MAX_WORK = 250_000

#: Rows times network parameters up to which ``"auto"`` runs :data:`AUTO_MCLMC` past NUTS's
#: size: its cost is a gradient per step, a fixed number of steps per chain, so it grows
#: with the rows times the parameters alone; at this size its default run takes two to
#: three times NUTS's at :data:`NUTS_MAX_WORK` (doc/choosing.md gives the times). Past it
#: the chains still lead the ensemble, at 13-24 times its time: the bound is the default's
#: time budget, not where the chains stop leading.
MCLMC_MAX_WORK = 5_000_000

#: Training rows from which ``"auto"`` runs :data:`AUTO_MCLMC` past NUTS's size: it led the
#: ensemble on 12 of the 13 fits measured from 2,000 rows (diamonds, Computers, the
#: Friedman variant; not Males' wages, whose held-out rows chose a Student-t noise), and,
#: with one noise, trailed it on the four UCI sets of 455-1,439 rows that a 50-unit
#: network puts past NUTS's size (doc/choosing.md).
MCLMC_MIN_ROWS = 2_000

#: The knobs of the MCLMC that ``"auto"`` runs: a chain from each of eight optima, with
#: bde's energy variance per parameter (0.1, not MCLMC's default 0.0005), 5,000 warm-up
#: steps and every fourth step kept, whose draws estimate the predictive finely enough
#: that its Monte Carlo error stays under the warning's bound, and a noise per row where
#: the noise is inferred, as the ensemble predicts one: with a single noise the chains
#: trailed the ensemble on two real data sets of the four measured (doc/choosing.md).
AUTO_MCLMC = {"n_modes": 8, "n_chains": 8, "desired_energy_var": 0.1, "rescale_units": False,
              "n_warmup": 5000, "thin": 4, "heteroscedastic": "auto"}  # fmt: skip

#: The methods ``"auto"`` may run, by registry name.
AUTO_CANDIDATES = ("nuts", "mclmc", "ensemble", "sghmc")

#: Training rows from which ``"auto"`` classifies with cyclical SGHMC rather than the deep
#: ensemble: the smallest size at which it was measured at or above the ensemble on real
#: data, with the default network and wider ones (doc/choosing.md).
SGHMC_MIN_ROWS = 10_000


#: Training rows from which ``hidden_layer_sizes="auto"`` gives a regressor
#: ``AUTO_WIDE_UNITS`` hidden units instead of 10. On the Friedman variant of
#: ``benchmarks/many_rows.py`` 50 units led 10 by 0.37 nats per row of test log-likelihood
#: on 10,000 rows and 0.82 on 30,000 (one seed each; at 1,000 rows 10 units under NUTS
#: led), and on the diamonds data the ensemble with 50 led 10 by 0.09-0.10 on 10,000 and
#: 25,000 rows (doc/defaults.md). Below it, 10 units keep NUTS fast where "auto" runs it.
AUTO_WIDE_ROWS = 5_000
#: The regressor's width from ``AUTO_WIDE_ROWS`` rows.
AUTO_WIDE_UNITS = 50


def resolve_hidden(n_rows: int, task: str) -> tuple[int, ...]:
    """The hidden layers ``hidden_layer_sizes="auto"`` gives: one layer of 10 units, or of
    ``AUTO_WIDE_UNITS`` for a regressor on ``AUTO_WIDE_ROWS`` rows or more. A classifier
    keeps 10: on the credit-default data 50 units were level with 10 for the ensemble and
    behind for SGHMC, which ``"auto"`` runs there.

    Parameters
    ----------
    n_rows : int
        Distinct training rows.
    task : {"regression", "classification"}

    Returns
    -------
    tuple of int
    """
    if task == "regression" and n_rows >= AUTO_WIDE_ROWS:
        return (AUTO_WIDE_UNITS,)
    return (10,)


def resolve(n_rows: int, n_weights: int, n_outputs: int, task: str) -> BaseMethod:
    """The method ``method="auto"`` runs.

    Parameters
    ----------
    n_rows : int
        Distinct training rows the likelihood visits.
    n_weights : int
        Weights and biases of the network.
    n_outputs : int
        The network's outputs (targets, or classes of a multiclass problem).
    task : {"regression", "classification"}

    Returns
    -------
    BaseMethod
        A new, unfitted method object.
    """
    from . import MCLMC, NUTS, SGHMC, DeepEnsemble

    if task == "regression":
        if n_rows * n_weights <= NUTS_MAX_WORK:
            return NUTS()
        if n_rows >= MCLMC_MIN_ROWS and n_rows * n_weights <= MCLMC_MAX_WORK:
            return MCLMC(**AUTO_MCLMC)
        return DeepEnsemble(noise_df="auto")
    return SGHMC() if n_rows >= SGHMC_MIN_ROWS else DeepEnsemble()


def auto_knob_message(knob: str, value) -> str:
    """Why ``method__<knob>`` cannot be set on ``method="auto"``, with a call that can: on
    a method that has the knob (one of those "auto" runs first), or, when none has it,
    the knobs of that name that exist."""
    import difflib

    from . import METHODS

    key = knob[len("method__") :].split("__")[0]
    order = [*AUTO_CANDIDATES, *(n for n in METHODS if n not in AUTO_CANDIDATES)]
    owners = [n for n in order if key in METHODS[n]().get_params()]
    head = (
        f"method='auto' has no knobs of its own, so {knob} cannot be set: it runs "
        f"{', '.join(METHODS[n].__name__ for n in AUTO_CANDIDATES[:-1])} or "
        f"{METHODS[AUTO_CANDIDATES[-1]].__name__} by the problem's size. "
    )
    if owners:
        cls = METHODS[owners[0]].__name__
        return head + (
            f"Name the method whose knob you set: set_params(method={owners[0]!r}, "
            f"{knob}={value!r}), or method={cls}({knob[len('method__') :]}={value!r})."
        )
    knobs = sorted({k for n in METHODS for k in METHODS[n]().get_params()})
    close = difflib.get_close_matches(key, knobs, n=3)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    return head + f"No method has a knob named {key!r}.{hint}"
