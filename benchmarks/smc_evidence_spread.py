"""Precision of SMC's log evidence on the architecture-selection problem of the tests.

``tests/test_model_selection.py`` fits a 2-3-1 tanh network (``hidden_layer_sizes=(3,)``,
noise inferred, 400 particles) to 100 rows drawn from a known 2-3-1 tanh network plus noise
sd 0.1, and asks independent seeds to agree on ``log_evidence_``. This script measures how
far they agree: for every combination of ``n_mcmc_steps`` and particle count it fits the
same data under ``--seeds`` seeds and prints one JSON line per fit (log evidence, wall time,
gradient evaluations, stages, final ESS and the perfect-mixing sd of the estimate) and one
summary line per combination: the sd of the log evidence over the seeds, with the
perfect-mixing sd ``sqrt(sum_t (1 / ESS_t - 1 / N))`` (Chopin 2004, ``ESS_t`` the ESS after
each stage's reweighting) that moves which mixed perfectly within each stage would give.

One thread per fit (``--n-jobs 1``), so the wall time is the CPU time. Usage::

    python benchmarks/smc_evidence_spread.py [--seeds 0-9] [--n-mcmc-steps 5 10 20]
        [--particles 400 800] [--target-ess 0.5] [--n-jobs 1]
    python benchmarks/smc_evidence_spread.py --report benchmarks/results/smc_evidence_spread.jsonl

``--report`` prints doc/performance.md's table of the summary lines in the results files.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _uci import add_report_argument, machine, read_results  # noqa: E402


def network_data(n=100, seed=0):
    """The data of ``tests/test_model_selection.py``: a 2-3-1 tanh network plus noise sd 0.1."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    w1 = np.array([[2.0, -1.5, 0.5], [1.0, 1.5, -2.0]])
    w2 = np.array([1.5, -1.0, 1.0])
    y = np.tanh(X @ w1 + np.array([0.5, -0.5, 0.0])) @ w2 + 0.1 * rng.standard_normal(n)
    return X, y


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def _row(cells) -> str:
    return "|" + "|".join(f" {c} " if c != "" else " " for c in cells) + "|"


def report(paths) -> str:
    """doc/performance.md's table: one row per setting of the fits in ``paths``, in order.

    From the fits' lines rather than the summary lines, whose means are rounded once more."""
    lines = read_results(paths)
    settings: dict[tuple, list[dict]] = {}
    for r in lines:
        if not r.get("summary"):
            settings.setdefault((r["particles"], r["n_mcmc_steps"], r["target_ess"]), []).append(r)
    out = [
        "| particles | moves per stage | target ESS | seeds | mean log evidence | sd over seeds "
        "| range | perfect-mixing sd | wall per fit | gradient evals per fit |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    marked = False
    for (particles, steps, target), fits in settings.items():
        moves, target = str(steps), str(target)
        # SMC()'s defaults, named once
        if not marked and (moves, target) == ("5", "0.5"):
            moves, target, marked = f"{moves} (default)", f"{target} (default)", True
        z = np.array([r["log_evidence"] for r in fits])
        cells = [
            particles,
            moves,
            target,
            len(fits),
            f"{z.mean():.2f}",
            f"{z.std(ddof=1):.2f}",
            f"{np.ptp(z):.2f}",
            f"{np.mean([r['perfect_mixing_sd'] for r in fits]):.2f}",
            f"{np.mean([r['wall_time_s'] for r in fits]):.1f} s",
            f"{np.mean([r['n_grad_evals'] for r in fits]) / 1e6:.2f}M",
        ]
        out.append(_row(cells))
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-9", help="a range such as 0-9")
    parser.add_argument("--n-mcmc-steps", type=int, nargs="+", default=[5, 10, 20])
    parser.add_argument("--particles", type=int, nargs="+", default=[400, 800])
    parser.add_argument("--target-ess", type=float, default=0.5)
    parser.add_argument("--n-jobs", type=int, default=1)
    add_report_argument(parser, "doc/performance.md")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return

    from sklearn.exceptions import ConvergenceWarning

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import SMC

    X, y = network_data()
    seeds = _seeds(args.seeds)
    # compile outside the timings
    BayesianMLPRegressor((3,), activation="tanh", method="smc", n_samples=20).fit(X, y)
    for n_particles in args.particles:
        for steps in args.n_mcmc_steps:
            z, walls, grads, pm = [], [], [], []
            for seed in seeds:
                reg = BayesianMLPRegressor(
                    (3,),
                    activation="tanh",
                    method=SMC(n_mcmc_steps=steps, target_ess=args.target_ess),
                    n_samples=n_particles,
                    random_state=seed,
                    n_jobs=args.n_jobs,
                )
                start = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ConvergenceWarning)
                    reg.fit(X, y)
                wall = time.perf_counter() - start
                d = reg.diagnostics_
                ess_t = d["smc"]["ess"]
                pm_sd = float(np.sqrt(np.sum(1.0 / ess_t - 1.0 / n_particles)))
                z.append(reg.log_evidence_)
                walls.append(wall)
                grads.append(d["n_grad_evals"])
                pm.append(pm_sd)
                record = {
                    "benchmark": "smc_evidence_spread",
                    "particles": n_particles,
                    "n_mcmc_steps": steps,
                    "target_ess": args.target_ess,
                    "seed": seed,
                    "log_evidence": round(float(reg.log_evidence_), 3),
                    "wall_time_s": round(wall, 2),
                    "n_grad_evals": d["n_grad_evals"],
                    "n_stages": d["n_stages"],
                    "final_ess": round(float(d["ess"]), 1),
                    "distinct_particles": d["n_unique"],
                    "final_accept_rate": round(float(d["accept_rate"]), 3),
                    "perfect_mixing_sd": round(pm_sd, 3),
                    "warnings": len(caught),
                }
                print(json.dumps(record), flush=True)
            z = np.array(z)
            summary = {
                "benchmark": "smc_evidence_spread",
                "summary": True,
                "particles": n_particles,
                "n_mcmc_steps": steps,
                "target_ess": args.target_ess,
                "n_seeds": len(seeds),
                "mean_log_evidence": round(float(z.mean()), 3),
                "sd_log_evidence": round(float(z.std(ddof=1)), 3),
                "range_log_evidence": round(float(np.ptp(z)), 3),
                "perfect_mixing_sd": round(float(np.mean(pm)), 3),
                "mean_wall_time_s": round(float(np.mean(walls)), 2),
                "mean_n_grad_evals": round(float(np.mean(grads))),
                "n_jobs": args.n_jobs,
                **machine(),
            }
            print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
