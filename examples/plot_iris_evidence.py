"""
Which architecture? Posterior model probabilities on iris
=========================================================

The model evidence ``p(y | architecture)`` trades fit against complexity, so it ranks
architectures from the training data alone, and normalized over the candidates it gives
each one's posterior probability. :class:`skbnn.model_selection.BayesianModelAverage`
fits every candidate of a grid, weighs them by that probability, and predicts with the
weighted average.

Here the evidence comes from the Laplace approximation (``method=Laplace``), which costs
a MAP fit and a Hessian per candidate. ``examples/iris_architecture_selection.py`` runs
the same experiment with adaptive annealed SMC beside Laplace and compares the two
evidences.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier
from skbnn.methods import Laplace
from skbnn.model_selection import BayesianModelAverage

X, y = load_iris(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y,
                                                    random_state=0)  # fmt: skip
scaler = StandardScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

grid = {
    "hidden_layer_sizes": [(1,), (2,), (4,), (8,), (2, 2), (4, 4)],
    "activation": ["tanh", "relu"],
}
bma = BayesianModelAverage(
    BayesianMLPClassifier(method=Laplace(optimize_prior=False), random_state=0), grid
).fit(X_train, y_train)

names = [f"{p['hidden_layer_sizes']} {p['activation']}" for p in bma.candidate_params_]
order = np.argsort(bma.model_probabilities_)[::-1]
for i in order:
    print(f"{names[i]:14s} log evidence {bma.log_evidences_[i]:8.2f}   "
          f"P(model | y) {bma.model_probabilities_[i]:.3f}")  # fmt: skip
print(f"model average: test accuracy {bma.score(X_test, y_test):.3f}")
print(f"most probable ({names[bma.best_index_]}): "
      f"test accuracy {bma.best_estimator_.score(X_test, y_test):.3f}")  # fmt: skip

fig, (ax_ev, ax_p) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
ax_ev.barh(np.array(names)[order], bma.log_evidences_[order], color="C1")
ax_ev.set_xlabel("log evidence (Laplace)")
ax_ev.invert_yaxis()
ax_p.barh(np.array(names)[order], bma.model_probabilities_[order], color="C0")
ax_p.set_xlabel("posterior model probability P(model | y)")
fig.suptitle("iris: candidate architectures (hidden layers, activation)")
fig.tight_layout()
plt.show()

# %%
# The evidence penalizes parameters the data do not need, so a small network can win
# although a larger one fits the training rows as well. The probabilities assume equal
# prior odds over the grid (``BayesianModelAverage(prior=...)`` changes that), and they
# are only as good as the evidence estimates: the Laplace evidence of a network is a
# local approximation around one mode, which the SMC example checks.
