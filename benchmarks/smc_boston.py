"""Adaptive annealed SMC on Boston housing split 0: the 13-10-1 ReLU net of
``nuts_boston.py`` (N(0, 1) on every weight and bias), noise inferred (or fixed at 0.5 on
the standardized target), 200 and 1000 particles. Prints one JSON line per fit: wall time,
compile time, stages, gradient evaluations per second, log evidence (original units), test
RMSE and test mean log predictive density (original units).

The first fit runs with an empty numba cache (a new install's wait: compilation included)
unless ``--keep-cache``. Usage::

    python benchmarks/smc_boston.py [--data-dir DIR] [--particles 200 1000]
        [--noise inferred fixed] [--seeds 0] [--n-mcmc-steps 5] [--n-jobs 2]
    python benchmarks/smc_boston.py --report benchmarks/results/smc_boston.jsonl

``--report`` prints doc/performance.md's table of the fits in the results files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _uci import add_report_argument, load_split, machine, read_results, standardize  # noqa: E402


def _row(cells) -> str:
    return "|" + "|".join(f" {c} " if c != "" else " " for c in cells) + "|"


def report(paths) -> str:
    """doc/performance.md's SMC-on-Boston table: one row per fit in ``paths``, in order."""
    fits = read_results(paths)
    out = [
        "| noise | particles | seed | run | wall | stages | grad evals/s | log evidence | "
        "final ESS / distinct | test RMSE | test LPD |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in fits:
        wall = f"{r['wall_time_s']:.1f} s"
        if r["compile_time_s"] > 0:
            wall += f" ({r['compile_time_s']:.1f} compiling)"
        cells = [
            "fixed 0.5" if r["noise"] == "fixed" else r["noise"],  # main()'s fixed value
            r["particles"],
            r["seed"],
            r["run"],
            wall,
            r["n_stages"],
            f"{r['grad_evals_per_s'] / 1e3:.0f}k",
            f"{r['log_evidence']:.1f}",
            f"{r['final_ess']:.0f} / {r['distinct_particles']}",
            f"{r['test_rmse']:.2f}",
            f"{r['test_lpd']:.2f}",
        ]
        out.append(_row(cells))
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--particles", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--noise", nargs="+", default=["inferred"], choices=["inferred", "fixed"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--n-mcmc-steps", type=int, default=5)
    parser.add_argument("--target-ess", type=float, default=0.5)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument(
        "--keep-cache", action="store_true", help="use numba's normal cache (no cold run)"
    )
    add_report_argument(parser, "doc/performance.md")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    if not args.keep_cache:
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="skbnn-bench-")

    import numpy as np

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import SMC
    from skbnn.model_selection import log_predictive_scorer
    from skbnn.priors import GaussianPrior

    X_train, y_train, X_test, y_test = load_split("bostonHousing", 0, args.data_dir)
    X_train, X_test = standardize(X_train, X_test)

    first = True
    for noise in args.noise:
        for n_particles in args.particles:
            for seed in args.seeds:
                reg = BayesianMLPRegressor(
                    hidden_layer_sizes=(10,),
                    activation="relu",
                    method=SMC(n_mcmc_steps=args.n_mcmc_steps, target_ess=args.target_ess),
                    prior=GaussianPrior(std=1.0, fan_in_scaling=False),
                    n_samples=n_particles,
                    noise_std=0.5 if noise == "fixed" else None,
                    random_state=seed,
                    n_jobs=args.n_jobs,
                )
                start = time.perf_counter()
                reg.fit(X_train, y_train)
                wall = time.perf_counter() - start
                d = reg.diagnostics_
                smc = d["smc"]
                rmse = float(np.sqrt(np.mean((reg.predict(X_test) - y_test) ** 2)))
                record = {
                    "benchmark": "smc_boston",
                    "noise": noise,
                    "particles": n_particles,
                    "seed": seed,
                    "run": "cached" if args.keep_cache else ("cold" if first else "warm"),
                    "wall_time_s": round(wall, 2),
                    "compile_time_s": round(d["compile_time"], 2),
                    "n_stages": d["n_stages"],
                    "n_grad_evals": d["n_grad_evals"],
                    "grad_evals_per_s": round(d["n_grad_evals"] / (wall - d["compile_time"])),
                    "log_evidence": round(float(reg.log_evidence_), 3),
                    "final_ess": round(float(d["ess"]), 1),
                    "distinct_particles": d["n_unique"],
                    "final_accept_rate": round(float(d["accept_rate"]), 3),
                    "mean_step_size_last": round(float(smc["step_size"][-1].mean()), 4),
                    "mean_n_leapfrog_last": round(float(smc["n_leapfrog"][-1].mean()), 1),
                    "noise_std": round(float(reg.noise_std_), 4),
                    "test_rmse": round(rmse, 4),
                    "test_lpd": round(log_predictive_scorer(reg, X_test, y_test), 4),
                    "n_mcmc_steps": args.n_mcmc_steps,
                    "target_ess": args.target_ess,
                    "n_jobs": args.n_jobs,
                    **machine(),
                }
                first = False
                print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
