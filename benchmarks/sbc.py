"""Simulation-based calibration (Talts et al. 2018) of the samplers on a nonlinear network.

Draw the weights from the prior, simulate labels, fit, and find where the true value of
each checked quantity falls among the posterior draws: its rank, as a fraction ``u`` of
the (weighted) draws below it. If the sampler draws from the posterior, ``u`` is uniform
on (0, 1) over replications, whatever the data. A sampler that is too narrow puts ``u``
near 0 and 1 (a U-shaped histogram), one too wide puts it in the middle, a biased one
to one side.

The model: a binary ``BayesianMLPClassifier`` with 2 inputs, 3 tanh units and 20 rows,
under ``GaussianPrior(std=1)``. The classifier, because a regressor standardizes its
targets, so its model would depend on the data it is fit to. The checked quantities: the
network's output (the logit) at three fixed inputs, functions of the weights that the
network's symmetries (sign flips, permuted units) leave unchanged. Datasets with a single
class are redrawn: that selects datasets, and given each dataset the draws must still
follow its posterior, so ``u`` stays uniform.

Also ``"langevin"``: a Langevin sampler written here in numpy, with the Metropolis
correction (``adjust=True``, MALA) or without it (the unadjusted Langevin algorithm,
biased at a finite step). It is the broken sampler SBC must catch, and its adjusted twin
the control that the catch is the missing correction. It is a fixture, not part of skbnn.

Run ``python benchmarks/sbc.py --reps 300`` for the full check (JSON lines: per sampler
and quantity the KS p-value and a 10-bin rank histogram); ``tests/test_sbc.py`` runs a
shorter version in every CI run. ``python benchmarks/sbc.py --report
benchmarks/results/sbc.jsonl`` prints doc/testing.md's table of a results file: per
sampler the p-values, the share of each quantity's ``u`` in the middle fifth of (0, 1)
(a fifth for a correct sampler) and the time.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
import warnings

import numpy as np
from scipy import stats
from scipy.special import expit, log_expit

from skbnn import BayesianMLPClassifier
from skbnn.layout import NetworkLayout
from skbnn.methods import HMC, MALA, NUTS, SMC
from skbnn.priors import GaussianPrior

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _uci import read_results  # noqa: E402

N_ROWS, N_INPUTS, N_HIDDEN = 20, 2, 3
LAYOUT = NetworkLayout((N_INPUTS, N_HIDDEN, 1))
PRIOR = GaussianPrior(std=1.0)
STDS = PRIOR.stds(LAYOUT)
_design = np.random.default_rng(12345)
#: the fixed inputs of every replication, and the three where the logit is checked
X = _design.standard_normal((N_ROWS, N_INPUTS))
X_CHECK = _design.standard_normal((3, N_INPUTS))

#: the samplers and their settings: enough warm-up for this 13-parameter posterior, and
#: enough draws that each rank has an effective sample size in the hundreds
SAMPLERS = {
    "nuts": (lambda: NUTS(n_chains=2, n_warmup=200), 400),
    "hmc": (lambda: HMC(n_chains=2, n_warmup=200), 400),
    "mala": (lambda: MALA(n_chains=2, n_warmup=500, thin=1), 2000),
    "smc": (lambda: SMC(), 400),
}


def logit(theta: np.ndarray, X: np.ndarray) -> np.ndarray:
    """The network's output for weights ``theta`` of shape (C, K) at rows ``X``: (C, n)."""
    theta = np.atleast_2d(theta)
    c = theta.shape[0]
    (w1, b1), (w2, b2) = LAYOUT.slices(0), LAYOUT.slices(1)
    hidden = np.tanh(
        np.einsum("ni,cih->cnh", X, theta[:, w1].reshape(c, N_INPUTS, N_HIDDEN))
        + theta[:, None, b1]
    )
    return np.einsum("cnh,ch->cn", hidden, theta[:, w2]) + theta[:, b2]


def simulate(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """True weights from the prior and labels from the model, both classes present."""
    while True:
        theta = STDS * rng.standard_normal(STDS.size)
        y = (rng.uniform(size=N_ROWS) < expit(logit(theta, X)[0])).astype(np.int64)
        if 0 < y.sum() < N_ROWS:
            return theta, y


def rank_fraction(draws: np.ndarray, weights: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """``u`` per checked quantity: the weight of the draws below the true value (ties
    count half)."""
    f_draws, f_true = logit(draws, X_CHECK), logit(theta, X_CHECK)
    below = (f_draws < f_true) + 0.5 * (f_draws == f_true)
    return weights @ below


def langevin(y, rng, step=0.9, adjust=True, n_chains=4, n_warmup=300, n_draws=300):
    """Langevin draws of this model's posterior, preconditioned by the prior's variances;
    ``adjust=False`` drops the Metropolis correction (the broken sampler).

    At the default step the corrected sampler accepts 26 % of its proposals (51 % at 0.7,
    77 % at 0.5; 20 replications), a step a tuned MALA could take.
    """
    var = STDS**2
    (w1, b1), (w2, b2) = LAYOUT.slices(0), LAYOUT.slices(1)

    def logp_grad(theta):
        c = theta.shape[0]
        hidden = np.tanh(
            np.einsum("ni,cih->cnh", X, theta[:, w1].reshape(c, N_INPUTS, N_HIDDEN))
            + theta[:, None, b1]
        )
        f = np.einsum("cnh,ch->cn", hidden, theta[:, w2]) + theta[:, b2]
        logp = (y * f + log_expit(-f)).sum(1) - 0.5 * (theta**2 / var).sum(1)
        r = y - expit(f)
        grad = np.empty_like(theta)
        grad[:, w2] = np.einsum("cnh,cn->ch", hidden, r)
        grad[:, b2] = r.sum(1)[:, None]
        delta = r[:, :, None] * theta[:, None, w2] * (1 - hidden**2)
        grad[:, w1] = np.einsum("ni,cnh->cih", X, delta).reshape(c, -1)
        grad[:, b1] = delta.sum(1)
        return logp, grad - theta / var

    theta = STDS * rng.standard_normal((n_chains, STDS.size))
    logp, grad = logp_grad(theta)
    half = 0.5 * step**2
    kept = []
    for it in range(n_warmup + n_draws):
        prop = theta + half * var * grad + step * np.sqrt(var) * rng.standard_normal(theta.shape)
        logp_p, grad_p = logp_grad(prop)
        if adjust:
            forward = ((prop - theta - half * var * grad) ** 2 / var).sum(1)
            backward = ((theta - prop - half * var * grad_p) ** 2 / var).sum(1)
            log_ratio = logp_p - logp + (forward - backward) / (2 * step**2)
            accept = np.log(rng.uniform(size=n_chains)) < log_ratio
        else:
            accept = np.ones(n_chains, dtype=bool)
        theta = np.where(accept[:, None], prop, theta)
        logp = np.where(accept, logp_p, logp)
        grad = np.where(accept[:, None], grad_p, grad)
        if it >= n_warmup:
            kept.append(theta.copy())
    return np.concatenate(kept)


def run(sampler: str, n_reps: int, seed: int = 0, **langevin_kwargs) -> np.ndarray:
    """``u`` of the three checked quantities over ``n_reps`` replications: (n_reps, 3)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n_reps, X_CHECK.shape[0]))
    for r in range(n_reps):
        theta, y = simulate(rng)
        if sampler == "langevin":
            draws = langevin(y, np.random.default_rng([seed, r]), **langevin_kwargs)
            weights = np.full(draws.shape[0], 1.0 / draws.shape[0])
        else:
            make, n_samples = SAMPLERS[sampler]
            clf = BayesianMLPClassifier(
                hidden_layer_sizes=(N_HIDDEN,), prior=PRIOR, method=make(),
                n_samples=n_samples, random_state=100_000 * seed + r, n_jobs=1,
            )  # fmt: skip
            with warnings.catch_warnings():
                # short runs may warn; whether their draws are calibrated is the question
                warnings.simplefilter("ignore")
                clf.fit(X, y)
            draws = clf.posterior_.thetas[:, : LAYOUT.n_weights]
            weights = clf.posterior_.normalized_weights()
        out[r] = rank_fraction(draws, weights, theta)
    return out


def uniformity_pvalues(u: np.ndarray) -> np.ndarray:
    """Kolmogorov-Smirnov p-value of each column of ``u`` against the uniform."""
    return np.array([stats.kstest(u[:, j], "uniform").pvalue for j in range(u.shape[1])])


def report(path) -> str:
    """doc/testing.md's table of a results file (the last line of each sampler)."""
    lines = read_results(path)
    step = inspect.signature(langevin).parameters["step"].default
    labels = {"nuts": "NUTS", "hmc": "HMC", "mala": "MALA", "smc": "SMC",
              "langevin-adjusted": f"Langevin with the correction (fixture, step {step})",
              "langevin-unadjusted": f"Langevin without it (fixture, step {step})"}  # fmt: skip
    out = ["| sampler | KS p-values of the three logits | `u` in the middle fifth | seconds |",
           "|---|---|---|---|"]  # fmt: skip
    for r in {r["sampler"]: r for r in lines}.values():
        middle = [(h[4] + h[5]) / sum(h) for h in r["histograms"]]
        pvalues = ", ".join(f"{p:g}" for p in r["ks_pvalues"])
        shares = ", ".join(f"{100 * m:.0f} %" for m in middle)
        name = labels.get(r["sampler"], r["sampler"])
        out.append(f"| {name} | {pvalues} | {shares} | {r['seconds']:.0f} |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--samplers", nargs="+", default=[*SAMPLERS, "langevin-adjusted", "langevin-unadjusted"]
    )
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    for name in args.samplers:
        start = time.perf_counter()
        if name.startswith("langevin"):
            u = run("langevin", args.reps, args.seed, adjust=name.endswith("-adjusted"))
        else:
            u = run(name, args.reps, args.seed)
        row = {
            "sampler": name,
            "reps": args.reps,
            "seed": args.seed,
            "seconds": round(time.perf_counter() - start, 1),
            "ks_pvalues": [float(f"{p:.3g}") for p in uniformity_pvalues(u)],
            "histograms": [np.histogram(col, bins=10, range=(0, 1))[0].tolist() for col in u.T],
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
