"""LBBNN's variable selection in the logistic simulation study of Hubin and Storvik (2018).

The model: ``n = 2000`` rows, ``eta ~ N(X beta, 0.5)`` (variance 0.5) with

    beta = (-4, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1.2, 0, 37.1, 0, 0, 50, -0.00005, 10, 3, 0)

(the first entry the intercept, then 19 covariates), and ``Y ~ Bernoulli(logistic(eta))``.
It is fitted with ``BayesianMLPClassifier(hidden_layer_sizes=(), method=LBBNN())`` (a
logistic regression with an inclusion indicator per covariate, default knobs) on
standardized covariates, and a covariate counts as included when its inclusion probability
``alpha`` exceeds 0.5. Per covariate, the share of ``--reps`` replications (new data and a
new seed each) that include it: the true-positive rate for the coefficients with
``|beta| >= 1``, the false-positive rate for the zeros. ``-0.00005`` is reported apart: a
nonzero too small to matter.

The design of X (``--design``), which the study leaves open:

* ``scaled`` (the default): ``X_j = s_j Z_j`` with ``Z ~ N(0, Sigma)``, ``Sigma_ij =
  0.5^|i - j|`` (AR(1) correlation 0.5 between neighbouring covariates) and ``s_j = 1 /
  max(1, |beta_j|)``: each covariate measured in units in which its effect is of order one
  (the coefficients 37.1 and 50 belong to covariates of small spread). The linear
  predictor then has sd about 3.2, and 13-15 % of the labels are 1.
* ``unit``: the same correlated ``Z`` with ``s_j = 1``. The covariates with coefficients
  50, 37.1 and 10 then dominate a linear predictor of sd about 70: most labels are
  determined, and a coefficient of 1 is not identifiable beside them; what it gives is
  reported for the record.

How much the data say about each coefficient, whatever the method: per replication,
``ml_z`` holds the maximum-likelihood z statistics of the covariates (unpenalized logistic
regression on the standardized covariates, scikit-learn's ``LogisticRegression(C=inf)``;
each coefficient over its standard error from the inverse of the observed Fisher
information ``X'WX``). It is ``None`` when the labels are (quasi-)separated, so that the
maximum-likelihood estimate does not exist; the summary averages the others.

Each replication prints a JSON line; the run ends with a summary line per design (the rates
per covariate, and whether the goal held: every ``|beta| >= 1`` found in every
replication, a false-positive rate of at most 10 %). ``--plot FILE`` draws the rates as
bars, as the talk does (needs matplotlib)::

    python benchmarks/lbbnn_simulation.py --reps 10 --plot doc/lbbnn_simulation.png

``--report`` prints doc/optimization.md's table of the ``--posterior`` runs in a results
file (no fit): per prior, each family's weak effects included, their mean ``alpha``, the
large effects' rates and the false positives, the exact posterior's (``--reference``)
beside them, and the Wald test's rate on the weak effects::

    python benchmarks/lbbnn_simulation.py --report benchmarks/results/lbbnn_simulation.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _uci import emitter, machine  # noqa: E402

BETA = np.array([-4, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1.2, 0, 37.1, 0, 0, 50, -0.00005, 10, 3, 0])
N_ROWS = 2000
#: The 5 % two-sided Wald test's threshold on the maximum-likelihood z statistic.
WALD_Z = 1.959964


def simulate(seed: int, design: str = "scaled"):
    """``(X, y)`` of one replication."""
    rng = np.random.default_rng(seed)
    coef = BETA[1:]
    d = coef.size
    sigma = 0.5 ** np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    Z = rng.standard_normal((N_ROWS, d)) @ np.linalg.cholesky(sigma).T
    scale = 1.0 / np.maximum(1.0, np.abs(coef)) if design == "scaled" else np.ones(d)
    X = Z * scale
    eta = BETA[0] + X @ coef + np.sqrt(0.5) * rng.standard_normal(N_ROWS)
    y = (rng.random(N_ROWS) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
    return X, y


def ml_z(Xs, y) -> np.ndarray | None:
    """Maximum-likelihood z statistics of the covariates ``Xs`` (intercept left out), or
    None when the Fisher information is singular to working precision (separation)."""
    from scipy.special import expit
    from sklearn.linear_model import LogisticRegression

    # C=inf: no penalty (penalty=None is deprecated from scikit-learn 1.8)
    ml = LogisticRegression(C=np.inf, tol=1e-8, max_iter=10_000).fit(Xs, y)
    A = np.column_stack([np.ones(len(y)), Xs])
    coef = np.concatenate([ml.intercept_, ml.coef_[0]])
    eta = A @ coef
    info = A.T @ (A * (expit(eta) * expit(-eta))[:, None])
    # separated data send |coef| to infinity and the weights to 0: a condition number
    # near 1 / eps (the others here are at most 1e5)
    if np.linalg.cond(info) > 1e12:
        return None
    return (coef / np.sqrt(np.diag(np.linalg.inv(info))))[1:]


def reference_inclusion(
    Xs, y, psi: float, slab: float, bias_sd: float, seed: int, sweeps: int = 3000, burn: int = 500
) -> np.ndarray:
    """Posterior inclusion probabilities of LBBNN's model itself, by an exact sampler.

    The model of ``BayesianMLPClassifier((), method=LBBNN(...))``: ``y ~
    Bernoulli(logistic(b + sum_j gamma_j beta_j x_j))`` with ``gamma_j ~ Bernoulli(psi)``,
    ``beta_j ~ N(0, slab^2)`` and ``b ~ N(0, bias_sd^2)``. Gibbs sampling with Polya-Gamma
    augmentation (Polson, Scott and Windle 2013): given the augmentation ``omega`` the
    likelihood is Gaussian in the coefficients, so each ``gamma_j`` is drawn with the
    coefficients integrated out, then the coefficients and ``omega``. Needs the
    ``polyagamma`` package. Returns the share of the ``sweeps - burn`` kept sweeps that
    include each covariate (Rao-Blackwellized: the conditional probability, averaged)."""
    from polyagamma import random_polyagamma

    rng = np.random.default_rng(seed)
    n, d = Xs.shape
    A = np.column_stack([np.ones(n), Xs])
    kappa = y - 0.5
    prior_prec = np.r_[1.0 / bias_sd**2, np.full(d, 1.0 / slab**2)]
    log_odds = np.log(psi) - np.log1p(-psi)
    gamma = np.ones(d, dtype=bool)
    omega = np.full(n, 0.25)
    pip = np.zeros(d)

    def log_marginal(cols, G, c):
        # log of the integral over the coefficients of exp(kappa' A theta - theta' A'
        # Omega A theta / 2) N(theta; 0, S), for the columns cols
        P = G[np.ix_(cols, cols)] + np.diag(prior_prec[cols])
        L = np.linalg.cholesky(P)
        v = np.linalg.solve(L, c[cols])
        return (0.5 * np.sum(np.log(prior_prec[cols])) - np.sum(np.log(np.diag(L)))
                + 0.5 * v @ v)  # fmt: skip

    for sweep in range(sweeps):
        G = A.T @ (A * omega[:, None])
        c = A.T @ kappa
        for j in rng.permutation(d):
            on = np.flatnonzero(np.r_[True, gamma | (np.arange(d) == j)])
            off = np.flatnonzero(np.r_[True, gamma & (np.arange(d) != j)])
            logit_j = log_odds + log_marginal(on, G, c) - log_marginal(off, G, c)
            prob = 1.0 / (1.0 + np.exp(-logit_j))
            gamma[j] = rng.random() < prob
            if sweep >= burn:
                pip[j] += prob
        cols = np.flatnonzero(np.r_[True, gamma])
        P = G[np.ix_(cols, cols)] + np.diag(prior_prec[cols])
        L = np.linalg.cholesky(P)
        mean = np.linalg.solve(L.T, np.linalg.solve(L, c[cols]))
        theta = mean + np.linalg.solve(L.T, rng.standard_normal(cols.size))
        omega = random_polyagamma(1.0, A[:, cols] @ theta, random_state=rng)
    return pip / (sweeps - burn)


def fit(X, y, seed: int, n_jobs: int, posterior: str = "meanfield", **knobs):
    """The fitted classifier and the standardized covariates it saw; ``knobs`` go to
    :class:`~skbnn.methods.LBBNN`."""
    from sklearn.preprocessing import StandardScaler

    from skbnn import BayesianMLPClassifier
    from skbnn.methods import LBBNN

    Xs = StandardScaler().fit_transform(X)
    clf = BayesianMLPClassifier((), method=LBBNN(posterior=posterior, **knobs),
                                random_state=seed, n_jobs=n_jobs)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(Xs, y)
    clf.warnings_ = [str(w.message) for w in caught]
    return clf, Xs


def plot(summaries: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(summaries), 1, figsize=(9, 2.6 * len(summaries)), squeeze=False)
    coef = BETA[1:]
    labels = [f"x{j + 1}\n{b:g}" for j, b in enumerate(coef)]
    for ax, s in zip(axes[:, 0], summaries, strict=True):
        rates = np.array(s["inclusion_rate"])
        colors = ["tab:blue" if abs(b) >= 1 else "tab:gray" if b else "tab:red" for b in coef]
        ax.bar(range(coef.size), rates, color=colors)
        ax.axhline(0.1, color="k", lw=0.8, ls=":")
        ax.set_xticks(range(coef.size), labels, fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("share included")
        ax.set_title(f"design '{s['design']}': {s['reps']} replications, alpha > 0.5 "
                     "(blue: |beta| >= 1, red: beta = 0, gray: -0.00005)", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)


FAMILIES = {"meanfield": "mean-field", "flow": "flow", "lowrank": "low-rank"}


def _rate(rates) -> str:
    """The share of replications, "all" where every one."""
    rates = np.atleast_1d(rates)
    return "all" if np.all(rates == 1) else ", ".join(f"{100 * r:.0f} %" for r in rates)


def report(path) -> str:
    """doc/optimization.md's table of the results file ``path``: its summaries of
    ``--posterior`` runs, each with the replications' lines before it."""
    coef = BETA[1:]
    weak = np.flatnonzero((np.abs(coef) >= 1) & (np.abs(coef) < 3))
    x18, others = np.flatnonzero(coef == 3), np.flatnonzero(np.abs(coef) > 3)
    zero = coef == 0
    groups, reps = {}, []
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        if not r.get("summary"):
            reps.append(r)
            continue
        if "posterior" in r:
            prior = (r.get("inclusion_prior"), r.get("slab_std"))
            groups.setdefault(prior, {})[r["posterior"]] = (r, reps)
        reps = []
    names = ", ".join(f"x{j + 1}" for j in weak)
    n = next(iter(next(iter(groups.values())).values()))[0]["reps"]
    head = (f"| prior | | weak effects in ({names}; of {len(weak) * n}) | their mean `alpha` | "
            f"x{x18[0] + 1} ({coef[x18[0]]:g}) in | "
            + ", ".join(f"x{j + 1}" for j in others)
            + f" in | false positives (of {zero.sum() * n}) |")  # fmt: skip
    out = [head, "|---|---|---|---|---|---|---|"]

    def row(*cells):
        out.append("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")

    def family_row(prior, family, weak_in, alphas, rates, false):
        mean = ", ".join(f"{a:.2f}" for a in np.mean(alphas, axis=0)[weak])
        row(prior, family, f"{weak_in:.0f}", mean, _rate(rates[x18]), _rate(rates[others]),
            f"{false:.0f}")  # fmt: skip

    for (psi, slab), runs in groups.items():
        label = "defaults" if psi is None else f"`psi = {psi:g}`, slab {slab:g}"
        reference = None
        for family in (f for f in FAMILIES if f in runs):
            r, lines = runs[family]
            family_row(label, FAMILIES[family], r["weak_rate"] * len(weak) * r["reps"],
                [x["alpha"] for x in lines], np.array(r["inclusion_rate"]),
                r["fpr"] * zero.sum() * r["reps"])  # fmt: skip
            label = ""
            if r["reference_rate"] is not None:
                reference = (r, lines)
        if reference:
            r, lines = reference
            rates = np.array(r["reference_rate"])
            weak_in = r["reference_weak_rate"] * len(weak) * r["reps"]
            family_row("", "the model's posterior", weak_in, [x["reference_pip"] for x in lines],
                       rates, rates[zero].sum() * r["reps"])  # fmt: skip
    # the Wald test does not depend on the prior: the last run's
    wald = len(weak) * (r["reps"] - r["ml_separated"])
    row("", "Wald test, 5 %", f"{100 * r['wald_weak_rate']:.0f} % of {wald}", "", "", "", "")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--design", nargs="+", choices=["scaled", "unit"],
                        default=["scaled", "unit"])  # fmt: skip
    parser.add_argument("--posterior", nargs="+", choices=["meanfield", "flow", "lowrank"],
                        default=["meanfield"], help="LBBNN's variational families")  # fmt: skip
    parser.add_argument("--inclusion-prior", type=float, default=None,
                        help="LBBNN's inclusion_prior (default: its own)")  # fmt: skip
    parser.add_argument("--slab-std", type=float, default=None,
                        help="LBBNN's slab_std (default: the prior's sds)")  # fmt: skip
    parser.add_argument("--reference", action="store_true",
                        help="also the model's own inclusion probabilities, by an exact "
                             "Gibbs sampler (needs polyagamma)")  # fmt: skip
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--plot", default=None, help="save the bar plot to this file")
    parser.add_argument("--report", default=None, metavar="FILE",
                        help="print the table of this results file (no fit)")  # fmt: skip
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    emit = emitter(args.out)
    import skbnn

    command = "python benchmarks/lbbnn_simulation.py " + " ".join(sys.argv[1:])
    knobs = {}
    if args.inclusion_prior is not None:
        knobs["inclusion_prior"] = args.inclusion_prior
    if args.slab_std is not None:
        knobs["slab_std"] = args.slab_std
    coef = BETA[1:]
    strong, zero = np.abs(coef) >= 1, coef == 0
    ref_cache = {}
    weak, large = (np.abs(coef) >= 1) & (np.abs(coef) < 3), np.abs(coef) >= 3
    summaries = []
    for design, posterior in itertools.product(args.design, args.posterior):
        included, zs, times, refs = [], [], [], []
        for rep in range(args.reps):
            X, y = simulate(rep, design)
            start = time.perf_counter()
            clf, Xs = fit(X, y, rep, args.n_jobs, posterior, **knobs)
            seconds = time.perf_counter() - start
            times.append(seconds)
            alpha = clf.inclusion_probabilities_[0][:, 0]
            included.append(alpha > 0.5)
            z = ml_z(Xs, y)
            zs.append(z)
            ref = None
            if args.reference:
                # the prior the fit used: psi and the slab's sd of the first layer
                psi = (
                    float(clf.method_.inclusion_prior)
                    if np.ndim(clf.method_.inclusion_prior) == 0
                    else float(clf.method_.inclusion_prior[0])
                )
                slab = clf.method_.slab_std
                slab = float(slab) if slab is not None else 1.0 / np.sqrt(Xs.shape[1])
                # the model does not depend on the variational family: once per data set
                if (design, rep) not in ref_cache:
                    ref_cache[design, rep] = reference_inclusion(Xs, y, psi, slab, 1.0, rep)
                ref = ref_cache[design, rep]
                refs.append(ref)
            emit({"design": design, "posterior": posterior, "rep": rep, "fit_time": seconds,
                  "reference_pip": None if ref is None else ref.round(4).tolist(),
                  "alpha": alpha.round(4).tolist(), "share_of_ones": float(y.mean()),
                  "train_accuracy": float(clf.score(Xs, y)), "elbo": float(clf.elbo_),
                  "warnings": clf.warnings_,
                  "ml_z": None if z is None else z.round(3).tolist(),
                  "tpr": float(np.mean(alpha[strong] > 0.5)),
                  "fpr": float(np.mean(alpha[zero] > 0.5))})  # fmt: skip
        inc = np.array(included)
        rates = inc.mean(axis=0)
        found = [z for z in zs if z is not None]
        mean_z = np.mean(found, axis=0) if found else np.full(coef.size, np.nan)
        # the 5 % Wald test on the maximum-likelihood fit, where it exists
        wald = np.mean(np.abs(found) > WALD_Z, axis=0) if found else np.full(coef.size, np.nan)
        weak_rate, wald_weak = float(inc[:, weak].mean()), float(np.mean(wald[weak]))
        summary = {
            "summary": True, "design": design, "posterior": posterior, "reps": args.reps,
            **knobs,
            "inclusion_rate": rates.tolist(),
            "tpr_per_strong_covariate": dict(zip([f"x{j + 1}" for j in np.flatnonzero(strong)],
                                                 rates[strong].tolist(), strict=True)),
            "fpr": float(inc[:, zero].mean()),
            "ml_z_mean_per_strong_covariate": dict(zip(
                [f"x{j + 1}" for j in np.flatnonzero(strong)],
                mean_z[strong].round(2).tolist(), strict=True)),
            "ml_separated": len(zs) - len(found),
            "wald_rate": wald.tolist(),
            "reference_rate": np.mean(np.array(refs) > 0.5, axis=0).tolist() if refs else None,
            "reference_weak_rate": float(np.mean(np.array(refs)[:, weak] > 0.5)) if refs
            else None,
            "weak_rate": weak_rate, "wald_weak_rate": wald_weak,
            "tiny_coefficient_rate": float(rates[coef == -0.00005][0]),
            "goal_met": bool(np.all(inc[:, strong]) and inc[:, zero].mean() <= 0.10),
            # the goal: every |beta| >= 3 always, the weak ones at least half as
            # often as the Wald test, at most 10 % false positives
            "simulation_goal_met": bool(np.all(inc[:, large]) and weak_rate >= 0.5 * wald_weak
                                        and inc[:, zero].mean() <= 0.10),
            "fit_time": float(np.mean(times)),
            "skbnn": skbnn.__version__, **machine(), "command": command,
        }  # fmt: skip
        emit(summary)
        summaries.append(summary)
    if args.plot:
        plot(summaries, args.plot)


if __name__ == "__main__":
    main()
