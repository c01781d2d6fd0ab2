"""
Did the chains converge? Diagnostics with ArviZ
===============================================

skbnn reports split R-hat and bulk ESS in ``diagnostics_`` and warns when they say the
chains disagree. To look at the chains themselves, export the fit to ArviZ with
:func:`skbnn.diagnostics.to_inference_data` and use its plots: trace plots, and rank
plots, whose histograms are flat when the chains sample the same distribution (Vehtari
et al. 2021). ArviZ is an optional dependency (``pip install arviz``).
"""

# %%
import arviz as az
import matplotlib.pyplot as plt
from sklearn.datasets import load_diabetes
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPRegressor
from skbnn.diagnostics import to_inference_data

X, y = load_diabetes(return_X_y=True)
X = StandardScaler().fit_transform(X)
reg = BayesianMLPRegressor(random_state=0, n_jobs=2).fit(X, y)  # NUTS, 4 chains
d = reg.diagnostics_
print(f"R-hat of the log-likelihood {d['rhat_loglik']:.3f}, bulk ESS {d['ess_bulk_loglik']:.0f}")

idata = to_inference_data(reg, X, y)
print(idata)

# %%
# The draws of the weights are the posterior group, layer by layer (``W0`` with
# dimensions ``input`` and ``hidden1``, ``b0``, ..., and the noise ``noise_std``); the
# log-likelihood of each draw is a sample statistic (``loglik``). A network's weights are
# not identified (relabel the hidden units, flip a tanh unit's signs: the function is the
# same), so
# chains that agree on every function can disagree on the weights. Judge convergence on
# the log-likelihood and on predictions, as skbnn's own R-hat does. A trace that wanders
# apart from the others, or a rank histogram far from flat, is a chain that has not
# mixed.
az.plot_trace(idata.sample_stats, var_names=["loglik"], compact=False)
plt.tight_layout()
plt.show()

# %%
az.plot_rank(idata.sample_stats, var_names=["loglik"])
plt.tight_layout()
plt.show()

# %%
# ArviZ's diagnostics of the same quantity agree with ``diagnostics_``:
print(az.summary(idata.sample_stats, var_names=["loglik"], kind="diagnostics"))

# %%
# Given the training rows, the export also holds each draw's log-likelihood of every row
# (the ``log_likelihood`` group), so ArviZ's PSIS-LOO and model comparison work on a fit,
# and on two fits with different networks:
wider = BayesianMLPRegressor(hidden_layer_sizes=(20,), random_state=0, n_jobs=2).fit(X, y)
print(az.loo(idata))
print(az.compare({"10 units": idata, "20 units": to_inference_data(wider, X, y)}))
