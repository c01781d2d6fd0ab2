"""``method="auto"``, the estimators' default: a method chosen from the problem's size.

The rule reads only the task and the numbers of rows and network parameters, never a
timing, so a fit still depends on ``random_state`` alone, on any machine:

- regression with at most ``NUTS_MAX_WORK`` rows x parameters: :class:`~skbnn.methods.NUTS`,
  the exact posterior, in about a minute at that size;
- larger regression problems, and every classification problem:
  :class:`~skbnn.methods.DeepEnsemble`, in seconds on 10^4 rows.

Classifiers take the ensemble at every size: on iris, wine, breast_cancer and digits its
held-out log loss was at or below ``LogisticRegression``'s, where NUTS's posterior under the
default prior was not on wine and breast_cancer (its average over the weights the few rows
leave free costs the easy rows confidence), at a tenth of the time (doc/choosing.md).
"""

from __future__ import annotations

from ._base import BaseMethod

#: Rows times network parameters up to which ``"auto"`` samples the exact posterior with
#: NUTS. Its cost is a gradient per leapfrog step, each a pass over every row and parameter,
#: and NUTS's trajectories lengthen as more rows narrow the posterior; at this size its
#: default run (4 chains x 750 iterations) takes about a minute on two cores even when
#: every trajectory reaches the depth cap (doc/choosing.md).
NUTS_MAX_WORK = 250_000


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
    from . import NUTS, DeepEnsemble

    if task == "regression" and n_rows * n_weights <= NUTS_MAX_WORK:
        return NUTS()
    return DeepEnsemble()
