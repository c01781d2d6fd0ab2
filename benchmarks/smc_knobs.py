"""SMC's settings against the precision of its evidence, on the iris architecture selection.

``examples/iris_architecture_selection.py`` fits ten candidate architectures by ``SMC()``
under three seeds. For each setting of particles (``n_samples``), HMC moves per stage
(``n_mcmc_steps``) and the ESS kept per stage (``target_ess``, which sets the number of
stages), this script fits the same ten on the same rows under ``--seeds`` seeds and prints
one JSON line per seed (every candidate's log evidence, the wall time) and one summary
line per setting:

* the wall time per seed (the ten fits, ``n_jobs`` threads each) and the gradient
  evaluations per seed, the cost that does not depend on the machine or its load;
* the root mean square over candidates of the sd of the log evidence over seeds (the
  precision that decides a ranking), and its largest value;
* the mean over candidates of the difference between this setting's mean log evidence
  and the first setting's (a bias, which fewer moves could bring: mass no particle reaches
  within a stage is missed), with its standard error;
* the most probable architecture per seed.

The cost per unit of precision is the cost times the variance: a setting that halves it
gives the same precision as the first setting run twice. Usage::

    python benchmarks/smc_knobs.py [--seeds 0-2] [--settings 500,5,0.5 500,3,0.5 ...]
        [--n-jobs 2] [--out FILE]
    python benchmarks/smc_knobs.py --report benchmarks/results/smc_knobs.jsonl

``--report`` prints doc/performance.md's table: one row per summary line, in order, with
the stages and seeds of the lines before it.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _uci import add_report_argument, emitter, machine, read_results  # noqa: E402
from iris_architecture_selection import CANDIDATES  # noqa: E402
from smc_evidence_spread import _seeds  # noqa: E402

SETTINGS = ["500,5,0.5", "500,3,0.5", "250,5,0.5", "1000,2,0.5", "500,5,0.3"]


def iris_rows() -> tuple[np.ndarray, np.ndarray]:
    """The example's training rows: 80 % of iris, stratified, standardized."""
    from sklearn.datasets import load_iris
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_iris(return_X_y=True)
    X, _, y, _ = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    return StandardScaler().fit_transform(X), y


def _row(cells) -> str:
    return "|" + "|".join(f" {c} " if c != "" else " " for c in cells) + "|"


def report(paths) -> str:
    """doc/performance.md's table of the settings in ``paths``; a run's shift is from its
    first setting, the reference."""
    lines = read_results(paths)
    out = [
        "| particles | moves per stage | target ESS | seeds | stages | gradients per seed "
        "| wall per seed | spread (largest) | shift from the run's first row "
        "| gradients x variance |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    fits = []
    for r in lines:
        if not r.get("summary"):
            fits.append(r)
            continue
        stages = [n for f in fits for n in f["n_stages"]]
        seeds = sorted(f["seed"] for f in fits)
        moves, target = str(r["n_mcmc_steps"]), str(r["target_ess"])
        if "mean_shift_from_first" in r:
            shift = f"{r['mean_shift_from_first']:+.2f} +- {r['mean_shift_se']:.2f}"
        else:
            shift = "-"
            # SMC()'s defaults, named on the reference rows
            if moves == "5":
                moves += " (default)"
            if target == "0.5":
                target += " (default)"
        gradients = r["grad_evals_per_seed"] / 1e6
        cells = [
            r["particles"],
            moves,
            target,
            f"{seeds[0]}-{seeds[-1]}",
            f"{min(stages)}-{max(stages)}",
            f"{gradients:.2f}M",
            f"{r['wall_time_per_seed_s']:.1f} s",
            f"{r['rms_sd_log_evidence']:.2f} ({r['max_sd_log_evidence']:.2f})",
            shift,
            f"{gradients * r['rms_sd_log_evidence'] ** 2:.2f}",
        ]
        out.append(_row(cells))
        fits = []
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-2", help="a range such as 0-2")
    parser.add_argument(
        "--settings", nargs="+", default=SETTINGS,
        help="particles,n_mcmc_steps,target_ess; the first is the reference",
    )  # fmt: skip
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    add_report_argument(parser, "doc/performance.md")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return

    from sklearn.exceptions import ConvergenceWarning

    from skbnn import BayesianMLPClassifier
    from skbnn.methods import SMC
    from skbnn.model_selection import BayesianModelAverage
    from skbnn.priors import GaussianPrior

    X, y = iris_rows()
    emit = emitter(args.out)
    names = [f"{h} {a}" for c in CANDIDATES for a in c["activation"]
             for h in c["hidden_layer_sizes"]]  # fmt: skip
    reference = None
    for text in args.settings:
        particles, steps, ess = text.split(",")
        setting = {"particles": int(particles), "n_mcmc_steps": int(steps),
                   "target_ess": float(ess)}  # fmt: skip
        log_z, walls, grads, best = [], [], [], []
        for seed in _seeds(args.seeds):
            template = BayesianMLPClassifier(
                method=SMC(n_mcmc_steps=setting["n_mcmc_steps"], target_ess=setting["target_ess"]),
                prior=GaussianPrior(std=1.0), n_samples=setting["particles"],
                random_state=seed, n_jobs=args.n_jobs,
            )  # fmt: skip
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                start = time.perf_counter()
                bma = BayesianModelAverage(template, CANDIDATES).fit(X, y)
                wall = time.perf_counter() - start
            compile_time = sum(e.diagnostics_.get("compile_time", 0.0) for e in bma.estimators_)
            log_z.append(bma.log_evidences_)
            walls.append(wall - compile_time)
            grads.append(sum(int(e.diagnostics_["n_grad_evals"]) for e in bma.estimators_))
            best.append(names[int(bma.best_index_)])
            emit({
                "benchmark": "smc_knobs", **setting, "seed": seed,
                "wall_time_s": round(wall - compile_time, 2), "n_grad_evals": grads[-1],
                "log_evidence": [round(float(z), 3) for z in bma.log_evidences_],
                "n_stages": [int(e.diagnostics_["n_stages"]) for e in bma.estimators_],
                "warnings": len(caught),
            })  # fmt: skip
        log_z = np.array(log_z)
        sd = log_z.std(axis=0, ddof=1)
        summary = {
            "benchmark": "smc_knobs", "summary": True, **setting, "n_seeds": len(walls),
            "candidates": names, "wall_time_per_seed_s": round(float(np.mean(walls)), 2),
            "grad_evals_per_seed": round(float(np.mean(grads))),
            "rms_sd_log_evidence": round(float(np.sqrt(np.mean(sd**2))), 3),
            "max_sd_log_evidence": round(float(sd.max()), 3),
            "mean_log_evidence": [round(float(z), 3) for z in log_z.mean(axis=0)],
            "most_probable": best, "n_jobs": args.n_jobs, **machine(),
        }  # fmt: skip
        if reference is None:
            reference = log_z
        else:
            # per candidate, the difference of the two means; its standard error from both
            # settings' spreads
            diff = log_z.mean(axis=0) - reference.mean(axis=0)
            var = sd**2 / len(log_z) + reference.var(axis=0, ddof=1) / len(reference)
            summary["mean_shift_from_first"] = round(float(diff.mean()), 3)
            summary["mean_shift_se"] = round(float(np.sqrt(var.sum()) / diff.size), 3)
        emit(summary)


if __name__ == "__main__":
    main()
