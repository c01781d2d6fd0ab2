"""SMC's ``max_time`` against the wall time it gives, on ``make_friedman1`` with many rows.

A stage's moves cost rows x particles x ``n_mcmc_steps`` x leapfrog steps, so on 10,000
rows one stage of 1,000 particles takes about a minute: a bound checked only between stages
overran by a stage or more. Prints one JSON line per fit: the bound, the fit's wall time
(compilation included), the compile time, the stages and each one's time, the share of
each stage's transitions that ran before the deadline, and why the tempering stopped.
Usage::

    python benchmarks/smc_max_time.py [--rows 10000] [--max-time 60] [--particles 1000]
        [--n-jobs 1] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _uci import machine  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10000])
    parser.add_argument("--max-time", type=float, nargs="+", default=[60.0])
    parser.add_argument("--particles", type=int, default=1000)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from sklearn.datasets import make_friedman1

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import SMC

    for rows in args.rows:
        X, y = make_friedman1(rows, 10, random_state=args.seed)
        for max_time in args.max_time:
            reg = BayesianMLPRegressor(
                method=SMC(max_time=max_time),
                n_samples=args.particles,
                n_jobs=args.n_jobs,
                random_state=args.seed,
            )
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                reg.fit(X, y)
            wall = time.perf_counter() - start
            d = reg.diagnostics_
            print(
                json.dumps(
                    {
                        "rows": rows,
                        "particles": args.particles,
                        "n_jobs": args.n_jobs,
                        "max_time": max_time,
                        "wall_time": round(wall, 2),
                        "compile_time": round(d["compile_time"], 2),
                        "n_stages": int(d["n_stages"]),
                        "stage_time": [round(float(t), 2) for t in d["smc"]["stage_time"]],
                        "moved": [round(float(m), 3) for m in d["smc"]["moved"]],
                        "stopped_because": d["stopped_because"],
                        "n_unique": int(d["n_unique"]),
                        "warnings": [type(w.message).__name__ for w in caught],
                        "machine": machine(),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
