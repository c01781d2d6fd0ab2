"""``method="auto"``, the estimators' default: a method chosen from the problem's size.

The rule reads only the task and the numbers of rows and network parameters, never a
timing, so a fit still depends on ``random_state`` alone, on any machine:

- regression with at most ``NUTS_MAX_WORK`` rows x parameters: :class:`~skbnn.methods.NUTS`,
  the exact posterior, in about a minute at that size;
- larger regression problems, and classification on fewer than ``SGHMC_MIN_ROWS`` rows:
  :class:`~skbnn.methods.DeepEnsemble`, in seconds on 10^4 rows;
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
a wider ReLU network the multi-mode route that came closest to bde (MILE) needed bde's
broad N(0, 1) prior, which puts density spikes on integer targets (doc/samplers.md). So
``"auto"`` keeps the dispersed chains.
"""

from __future__ import annotations

from ._base import BaseMethod

#: Rows times network parameters up to which ``"auto"`` samples the exact posterior with
#: NUTS. Its cost is a gradient per leapfrog step, each a pass over every row and parameter,
#: and NUTS's trajectories lengthen as more rows narrow the posterior; at this size its
#: default run (4 chains x 750 iterations) takes about a minute on two cores even when
#: every trajectory reaches the depth cap (doc/choosing.md).
NUTS_MAX_WORK = 250_000

#: The methods ``"auto"`` may run, by registry name.
AUTO_CANDIDATES = ("nuts", "ensemble", "sghmc")

#: Training rows from which ``"auto"`` classifies with cyclical SGHMC rather than the deep
#: ensemble: the smallest size at which it was measured at or above the ensemble on real
#: data, with the default network and wider ones (doc/choosing.md).
SGHMC_MIN_ROWS = 10_000


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
    from . import NUTS, SGHMC, DeepEnsemble

    if task == "regression":
        return NUTS() if n_rows * n_weights <= NUTS_MAX_WORK else DeepEnsemble()
    return SGHMC() if n_rows >= SGHMC_MIN_ROWS else DeepEnsemble()
