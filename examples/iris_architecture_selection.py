"""
Choosing a network's architecture by its model evidence, on iris: SMC beside Laplace.
=====================================================================================

The experiment of the talk "Uncertainty Quantification and Model Selection in Neural
Networks Using Adaptive Annealed SMC": ten candidate architectures, each fitted by adaptive
annealed SMC, which gives the posterior and the evidence p(y | architecture). The evidence
trades fit against complexity (an Occam factor), so it ranks architectures from the
training data alone, and the posterior model probabilities weigh the candidates'
predictions into one model average.

Beside SMC, the Laplace approximation estimates the same evidence from a MAP fit and the
curvature there (``method=Laplace``), in less time than SMC. Its evidence counts
the symmetric copies of the mode (hidden units relabelled), as SMC's integral does, and
each Laplace fit keeps the best of ``--n-init`` initializations (5): a network's log
posterior has many modes, and single initializations' evidences differ by up to 6 nats
here. It uses the prior of the SMC fits, ``GaussianPrior(std=1)`` with fan-in scaling
(``Laplace(optimize_prior=False)``), so both columns estimate the same
``p(y | architecture)``; the rank correlation, the most probable architecture and the
time ratio printed at the end compare the two.

SMC runs with 300 particles, one HMC move per stage and stages that keep 90 % of the ESS
(``SMC(n_mcmc_steps=1, target_ess=0.9)``; ``--particles``, ``--moves``, ``--target-ess``),
not its defaults of 5 moves and 50 %: on these ten candidates the spread of the evidence
over seeds is the defaults' with 500 particles, for a quarter of their gradients
(``benchmarks/smc_knobs.py``; doc/performance.md). Small steps between the tempered
targets need little mixing to follow.

Two more routes run on request:

* ``--empirical-bayes``: **Laplace with the prior tuned** (``Laplace()``, whose default
  ``optimize_prior=True`` tunes one prior precision per weight matrix and bias vector to
  maximize the evidence). That changes the model being compared (each architecture gets
  its own best prior), so its evidence is ``max over priors p(y | architecture, prior)``:
  higher than under the fixed prior, and not an estimate of what SMC estimates.
* ``--screen``: **SMC, screened by Laplace**
  (``BayesianModelAverage(..., screen={"method": Laplace(...)})``, Laplace under SMC's
  prior). Every candidate is first fitted by Laplace, and SMC refits only those whose
  Laplace evidence comes within ``--screen-margin`` nats (5) of the best one's; the others
  carry no probability. A refitted candidate's SMC fit is the one the plain SMC route
  makes, bit for bit, so the only approximation is the probability of the candidates left
  out.

Every method runs once per seed (SMC's particles, and the MAP's random initialization, both
follow the seed). The table gives per architecture the number of parameters, each method's
log-evidence (mean +- sd over seeds), SMC's posterior model probability, each method's
test accuracy and wall time per fit (mean over seeds, kernel compilation excluded); then
each method's model average, the Spearman rank correlation of the mean evidences, the most
probable architecture of each, and the ratio of the total fit times. Run::

    python examples/iris_architecture_selection.py [--seeds 3] [--particles 300] [--moves 1]
        [--target-ess 0.9] [--n-init 5] [--empirical-bayes] [--screen] [--screen-margin 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import spearmanr
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier
from skbnn.methods import SMC, Laplace
from skbnn.model_selection import BayesianModelAverage
from skbnn.priors import GaussianPrior

CANDIDATES = [
    {"hidden_layer_sizes": [(1,), (2,), (3,), (4,), (5,), (1, 1), (2, 2), (3, 3), (4, 4)],
     "activation": ["relu"]},
    {"hidden_layer_sizes": [(2, 2)], "activation": ["logistic"]},
]  # fmt: skip


def n_params(n_in: int, hidden: tuple[int, ...], n_out: int) -> int:
    """Weights and biases of a fully connected network."""
    sizes = (n_in, *hidden, n_out)
    return sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def fit_seeds(method, seeds: int, n_samples: int, n_jobs: int, X, y, **average) -> dict:
    """One ``BayesianModelAverage(**average)`` over the candidates per seed, and its
    figures."""
    fits = []
    start = time.perf_counter()
    for seed in range(seeds):
        # N(0, 1) with fan-in scaling: the prior of the recorded run (README, doc/user_guide.md);
        # the classifier's default is std 3, which rescales every evidence
        template = BayesianMLPClassifier(
            method=method,
            prior=GaussianPrior(std=1.0),
            n_samples=n_samples,
            random_state=seed,
            n_jobs=n_jobs,
        )
        fits.append(BayesianModelAverage(template, CANDIDATES, **average).fit(X, y))
    wall = time.perf_counter() - start
    diag = [[est.diagnostics_ for est in bma.estimators_] for bma in fits]
    compile_time = np.array([[d.get("compile_time", 0.0) for d in row] for row in diag])
    fit_time = np.array([[d["wall_time"] for d in row] for row in diag]) - compile_time
    return {
        "fits": fits,
        "log_z": np.array([bma.log_evidences_ for bma in fits]),  # (seeds, candidates)
        "probs": np.array([bma.model_probabilities_ for bma in fits]),
        "fit_time": fit_time,  # (seeds, candidates), compilation excluded
        "compile_time": float(compile_time.sum()),
        "wall": wall,
    }


def _spread(a: np.ndarray) -> float:
    return float(a.std(ddof=1)) if a.size > 1 else 0.0


def _name(params: dict) -> str:
    return f"{params['hidden_layer_sizes']} {params['activation']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="independent runs of each method")
    parser.add_argument("--particles", type=int, default=300)
    parser.add_argument("--moves", type=int, default=1, help="SMC's HMC moves per stage")
    parser.add_argument(
        "--target-ess", type=float, default=0.9, help="SMC's ESS kept per stage, a fraction"
    )
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--n-init", type=int, default=5, help="Laplace's initializations")
    parser.add_argument(
        "--screen-margin", type=float, default=5.0, help="nats within which SMC refits"
    )
    parser.add_argument(
        "--empirical-bayes",
        action="store_true",
        help="also fit Laplace with the prior tuned by empirical Bayes",
    )
    parser.add_argument("--screen", action="store_true", help="also fit SMC screened by Laplace")
    args = parser.parse_args()

    X, y = load_iris(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, stratify=y, random_state=0
    )
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

    data = (X_train, y_train)
    smc_method = SMC(n_mcmc_steps=args.moves, target_ess=args.target_ess)
    runs = {"SMC": fit_seeds(smc_method, args.seeds, args.particles, args.n_jobs, *data)}
    # Laplace's n_samples only sets its draws for sample_y; its evidence needs none
    same_prior = Laplace(optimize_prior=False, n_init=args.n_init)
    runs["Laplace"] = fit_seeds(same_prior, args.seeds, None, args.n_jobs, *data)
    if args.empirical_bayes:
        tuned = Laplace(n_init=args.n_init)
        runs["Laplace EB"] = fit_seeds(tuned, args.seeds, None, args.n_jobs, *data)
    for run in runs.values():
        run["accuracy"] = np.array(
            [[est.score(X_test, y_test) for est in bma.estimators_] for bma in run["fits"]]
        )

    smc, lap = runs["SMC"], runs["Laplace"]
    candidates = smc["fits"][0].candidate_params_
    print(f"iris: {len(y_train)} training rows, {len(y_test)} test rows; SMC with "
          f"{args.particles} particles, {args.moves} move{'s' * (args.moves != 1)} per stage "
          f"and target ESS {args.target_ess:g}; Laplace (GGN, GLM predictive, best of "
          f"{args.n_init} "
          "initializations) under SMC's prior N(0, 1)" +
          (" and with the prior tuned by empirical Bayes (EB)" if args.empirical_bayes
           else "") + f"; {args.seeds} seeds each\n")  # fmt: skip
    names = [{"SMC": "SMC", "Laplace": "Laplace", "Laplace EB": "EB"}[n] for n in runs]
    m = len(names)
    groups = [("log-evidence, mean +- sd over seeds", 18 * m), ("P(model|y)", 11),
              ("test accuracy %", 9 * m), ("seconds per fit", 9 * m)]  # fmt: skip
    print(" " * 29 + "".join(f"{g:>{w}}" for g, w in groups))
    print(f"{'architecture':<22}{'params':>7}" + "".join(f"{n:>18}" for n in names)
          + f"{'SMC':>11}" + "".join(f"{n:>9}" for n in names) * 2)  # fmt: skip
    for j, params in enumerate(candidates):
        hidden = params["hidden_layer_sizes"]
        row = f"{_name(params):<22}{n_params(X.shape[1], hidden, 3):>7}"
        for run in runs.values():
            z = run["log_z"][:, j]
            row += f"{f'{z.mean():.2f} +- {_spread(z):.2f}':>18}"
        row += f"{smc['probs'][:, j].mean():>11.3f}"
        row += "".join(f"{100 * run['accuracy'][:, j].mean():>9.2f}" for run in runs.values())
        row += "".join(f"{run['fit_time'][:, j].mean():>9.3f}" for run in runs.values())
        print(row)

    print()
    n_fits = args.seeds * len(candidates)
    for name, run in runs.items():
        bma_acc = np.array([bma.score(X_test, y_test) for bma in run["fits"]])
        best = [str(bma.best_params_["hidden_layer_sizes"]) for bma in run["fits"]]
        print(f"{name}:\n  model average (weights P(model | y)): test accuracy "
              f"{100 * bma_acc.mean():.2f}% (per seed: "
              f"{', '.join(f'{100 * a:.2f}' for a in bma_acc)})\n"
              f"  most probable architecture per seed: {', '.join(best)}\n"
              f"  wall time for all {n_fits} fits: {run['wall']:.1f} s (numba compilation "
              f"{run['compile_time']:.1f} s of it)")  # fmt: skip

    print("\nSMC against Laplace under the same prior (mean log-evidence over seeds):")
    smc_mean, lap_mean = smc["log_z"].mean(axis=0), lap["log_z"].mean(axis=0)
    rho = spearmanr(smc_mean, lap_mean).statistic
    print(f"  Spearman rank correlation of the evidences: {rho:.3f}")
    best_smc = _name(candidates[int(np.argmax(smc_mean))])
    best_lap = _name(candidates[int(np.argmax(lap_mean))])
    same = "the same" if best_smc == best_lap else "different"
    print(f"  most probable architecture: SMC {best_smc}, Laplace {best_lap} ({same})")
    # a Laplace evidence is local to the mode its MAP found: the highest over the seeds'
    # MAPs guards against a seed whose training ended in a poor mode
    lap_best = lap["log_z"].max(axis=0)
    print(f"  Laplace, the highest evidence over the seeds' MAPs: Spearman with SMC "
          f"{spearmanr(smc_mean, lap_best).statistic:.3f}, most probable "
          f"{_name(candidates[int(np.argmax(lap_best))])}")  # fmt: skip
    if "Laplace EB" in runs:
        eb_mean = runs["Laplace EB"]["log_z"].mean(axis=0)
        print(f"  (empirical Bayes, a tuned prior: Spearman with SMC "
              f"{spearmanr(smc_mean, eb_mean).statistic:.3f}, most probable "
              f"{_name(candidates[int(np.argmax(eb_mean))])})")  # fmt: skip
    print("  total fit time over all fits, compilation excluded (compilation):")
    for name, run in runs.items():
        total = run["fit_time"].sum()
        print(f"    {name:<11}{total:8.2f} s ({run['compile_time']:.1f} s), "
              f"{total / smc['fit_time'].sum():.4f} of SMC's")  # fmt: skip

    if not args.screen:
        return
    screen = {"method": same_prior}
    screened = fit_seeds(smc_method, args.seeds, args.particles, args.n_jobs, *data,
                         screen=screen, screen_margin=args.screen_margin)  # fmt: skip
    print(f"\nSMC screened by Laplace (same prior), SMC refitting the candidates within "
          f"{args.screen_margin:g} nats of the best:")  # fmt: skip
    fits = screened["fits"]
    print(
        "  candidates refitted per seed: "
        + ", ".join(f"{bma.refitted_.sum()} of {len(candidates)}" for bma in fits)
    )
    dropped = smc["probs"][~np.array([bma.refitted_ for bma in fits])]
    print(f"  SMC's probability of the candidates left out: at most {dropped.max(initial=0):.4f}")
    moved = np.abs(screened["probs"] - smc["probs"]).max()
    print(f"  largest change of a model probability from SMC's: {moved:.4f}")
    best = [str(bma.best_params_["hidden_layer_sizes"]) for bma in fits]
    print(f"  most probable architecture per seed: {', '.join(best)}")
    accuracy = np.mean([bma.score(X_test, y_test) for bma in fits])
    print(f"  model average test accuracy: {100 * accuracy:.2f}%")
    print(f"  wall time for all seeds: {screened['wall']:.1f} s, against {smc['wall']:.1f} s "
          f"for SMC on every candidate ({screened['wall'] / smc['wall']:.2f} of it)")  # fmt: skip


if __name__ == "__main__":
    main()
