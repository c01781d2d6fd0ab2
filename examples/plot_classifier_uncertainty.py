"""
Where is a classifier unsure, and why? Entropy and its epistemic share
======================================================================

A classifier's predictive distribution over the classes can be uncertain for two
reasons, and they call for different actions:

* **aleatoric**: the classes overlap where the input lies, so every plausible network
  hesitates; more data of the same kind will not help;
* **epistemic**: the input lies where the data were few, so the posterior's networks
  disagree; more data there would.

:meth:`~skbnn.BayesianMLPClassifier.predict_entropy` splits the entropy of the
predictive into these two parts: the posterior average of each network's own entropy
(``kind="aleatoric"``) and the rest, the mutual information between the label and the
weights (``kind="epistemic"``). This example draws, over the plane of the two-moons
data, the probability of one class, the total entropy, and the share of it that is
epistemic, for the exact posterior (NUTS) and for a deep ensemble.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_moons

from skbnn import BayesianMLPClassifier
from skbnn.methods import NUTS, DeepEnsemble

X, y = make_moons(n_samples=200, noise=0.2, random_state=0)
grid = np.stack(np.meshgrid(np.linspace(-3, 4, 120), np.linspace(-2.5, 3, 100)), axis=-1)
rows = grid.reshape(-1, 2)

models = {
    "NUTS": BayesianMLPClassifier(method=NUTS(), random_state=0),
    "deep ensemble": BayesianMLPClassifier(method=DeepEnsemble(), random_state=0),
}
fig, axes = plt.subplots(2, 3, figsize=(13, 7), sharex=True, sharey=True)
for ax_row, (name, model) in zip(axes, models.items(), strict=True):
    model.fit(X, y)
    proba = model.predict_proba(rows)[:, 1].reshape(grid.shape[:2])
    total = model.predict_entropy(rows).reshape(grid.shape[:2])
    epistemic = model.predict_entropy(rows, kind="epistemic").reshape(grid.shape[:2])
    # the share is undefined where there is no uncertainty at all
    share = np.divide(epistemic, total, out=np.zeros_like(total), where=total > 1e-6)
    panels = [
        (proba, "P(class 1)", "RdBu_r", (0, 1)),
        (total, "entropy (nats)", "viridis", (0, np.log(2))),
        (share, "epistemic share of the entropy", "magma", (0, 1)),
    ]
    for ax, (values, title, cmap, (lo, hi)) in zip(ax_row, panels, strict=True):
        mesh = ax.pcolormesh(grid[..., 0], grid[..., 1], values, cmap=cmap, vmin=lo, vmax=hi)
        ax.scatter(X[:, 0], X[:, 1], c=y, cmap="RdBu_r", s=8, edgecolors="k", linewidths=0.3)
        ax.set_title(f"{name}: {title}", fontsize="medium")
        fig.colorbar(mesh, ax=ax, shrink=0.8)
fig.tight_layout()

# %%
# Between the moons, where the two classes mix, the entropy is high and its epistemic
# share is at its lowest: the networks agree that the label is uncertain. Away from the
# data the share rises: the answer there rests on extrapolation, on which the networks
# differ. The probability can still be far from one half there, so the entropy alone may
# be low where the share is high (the ensemble's confident corners). NUTS's posterior
# raises the share over the whole region without data; the ensemble's five members
# disagree only along some directions.
#
# :func:`skbnn.metrics.uncertainty_score` with ``score="mutual_information"`` turns the
# epistemic part into an out-of-distribution score (see the example on detecting inputs
# unlike the training data).
