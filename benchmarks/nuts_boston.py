"""NUTS on Boston housing split 0: a 13-10-1 ReLU net, N(0, 1) on every weight and bias,
3 chains x (1000 warm-up + 3000 draws), target_accept 0.9 (the configuration of a
published PyMC3 run that took 1496 s). Prints one JSON line per (noise, run).

The first fit runs with an empty numba cache (a new install's wait: compilation included);
the second reuses the compiled kernels. Usage::

    python benchmarks/nuts_boston.py [--data-dir DIR] [--noise fixed inferred]
        [--warmup 1000] [--draws 3000] [--max-tree-depth 10]
        [--metric diagonal_grad|diagonal|dense] [--no-rescale-units] [--runs cold warm]
        [--temperatures K --max-temperature T] [--init map]
        [--target-rhat 1.01 --target-ess 400 --max-time 600]

Besides the diagnostics' five training rows, each line reports R-hat of the network output
at every training row (median, 90th percentile, maximum, count above 1.01).

``--report`` prints doc/performance.md's table of results files, one row per fit::

    python benchmarks/nuts_boston.py --report benchmarks/results/nuts_boston_converged.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _uci import add_report_argument, load_split, read_results  # noqa: E402


def _label(r: dict) -> str:
    """A fit's settings that differ from the script's defaults."""
    parts = []
    if r.get("n_temperatures", 1) > 1:
        parts.append(f"tempering, {r['n_temperatures']} replicas up to "
                     f"T = {r['max_temperature']:g}")  # fmt: skip
    if r.get("max_time") is not None:
        parts.append(f"until converged, `max_time={r['max_time']:g}`")
    elif r.get("target_rhat") is not None:
        parts.append("until converged")
    if r.get("init", "prior") != "prior":
        parts.append(f'`init="{r["init"]}"`')
    return ", ".join(parts) or "defaults"


def report(paths) -> str:
    """doc/performance.md's table of the fits with the noise inferred in ``paths``."""
    lines = read_results(paths)
    out = [
        "| run | wall | draws sampled per chain | bulk ESS loglik | R-hat loglik / max of 5 rows "
        "| all 455 rows: median / p90 / max | rows above 1.01 | test LPD |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in lines if r["noise"] == "inferred"):
        rows = r["rhat_all_rows"]
        # a run until converged samples more draws than it keeps
        drawn = r.get("n_draws_sampled_per_chain", r["draws_per_chain"])
        cells = [
            _label(r),
            f"{r['wall_time_s']:.0f} s",
            f"{drawn:,.0f}",
            f"{r['ess_bulk_loglik']:.0f}",
            f"{r['rhat_loglik']:.3f} / {max(r['rhat_outputs']):.3f}",
            f"{rows['median']:.3f} / {rows['p90']:.3f} / {rows['max']:.3f}",
            rows["n_above_1.01"],
            f"{r['test_lpd']:.2f}",
        ]
        out.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--noise", nargs="+", default=["fixed", "inferred"])
    parser.add_argument("--chains", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=3000, help="per chain")
    parser.add_argument("--max-tree-depth", type=int, default=10)
    parser.add_argument(
        "--metric", choices=["diagonal_grad", "diagonal", "dense"], default="diagonal_grad"
    )
    parser.add_argument(
        "--noise-update",
        nargs="+",
        choices=["marginal", "gibbs"],
        default=["marginal"],
        help="how NUTS handles an inferred noise precision (ignored for fixed noise)",
    )
    parser.add_argument(
        "--no-rescale-units",
        action="store_true",
        help="turn off the exact moves along the ReLU units' scale symmetry",
    )
    parser.add_argument(
        "--temperatures",
        type=int,
        default=1,
        help="replicas per chain for parallel tempering (1: none)",
    )
    parser.add_argument("--max-temperature", type=float, default=10.0)
    parser.add_argument("--init", choices=["prior", "map"], default="prior")
    parser.add_argument("--target-rhat", type=float, default=None)
    parser.add_argument("--target-ess", type=float, default=None)
    parser.add_argument("--max-time", type=float, default=None, help="seconds of sampling")
    parser.add_argument("--runs", nargs="+", default=["cold", "warm"], choices=["cold", "warm"])
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--keep-cache", action="store_true", help="use numba's normal cache (no cold run)"
    )
    add_report_argument(parser, "doc/performance.md")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    if not args.keep_cache:
        # an empty cache makes the first fit pay compilation, as on a fresh install
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="skbnn-bench-")

    t_import = time.perf_counter()
    import numpy as np
    from sklearn.preprocessing import StandardScaler

    from skbnn import BayesianMLPRegressor
    from skbnn.diagnostics import rhat
    from skbnn.methods import NUTS
    from skbnn.model_selection import log_predictive_scorer
    from skbnn.priors import GaussianPrior

    import_time = time.perf_counter() - t_import
    X_train, y_train, X_test, y_test = load_split("bostonHousing", 0, args.data_dir)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

    settings = [
        (noise, update)
        for noise in args.noise
        for update in (args.noise_update if noise == "inferred" else ["marginal"])
    ]
    for noise, update in settings:
        for run in args.runs:
            reg = BayesianMLPRegressor(
                hidden_layer_sizes=(10,),
                activation="relu",
                method=NUTS(
                    n_chains=args.chains,
                    n_warmup=args.warmup,
                    target_accept=0.9,
                    max_tree_depth=args.max_tree_depth,
                    metric=args.metric,
                    noise_update=update,
                    rescale_units=not args.no_rescale_units,
                    n_temperatures=args.temperatures,
                    max_temperature=args.max_temperature,
                    init=args.init,
                    target_rhat=args.target_rhat,
                    target_ess=args.target_ess,
                    max_time=args.max_time,
                ),
                prior=GaussianPrior(std=1.0, fan_in_scaling=False),
                n_samples=args.chains * args.draws,
                noise_std=0.5 if noise == "fixed" else None,
                random_state=args.seed,
                n_jobs=args.n_jobs,
            )
            start = time.perf_counter()
            reg.fit(X_train, y_train)
            wall = time.perf_counter() - start
            d = reg.diagnostics_
            sampling = wall - d["compile_time"]
            # R-hat of the network output at every training row (the diagnostics check five)
            n_chains, n_keep = reg.posterior_.chain_shape
            f = np.concatenate(
                [
                    out[:, 0, :]
                    for _, out in reg.predictive_.network().outputs(X_train, reg.posterior_.thetas)
                ],
                axis=1,
            ).reshape(n_chains, n_keep, -1)
            rhat_rows = np.array([rhat(f[:, :, j]) for j in range(f.shape[2])])
            rmse = float(np.sqrt(np.mean((reg.predict(X_test) - y_test) ** 2)))
            record = {
                "benchmark": "nuts_boston",
                "noise": noise,
                "noise_update": update if noise == "inferred" else None,
                "run": run if not args.keep_cache else "cached",
                "wall_time_s": round(wall, 2),
                "compile_time_s": round(d["compile_time"], 2),
                "import_time_s": round(import_time, 2) if run == "cold" else 0.0,
                "n_grad_evals": d["n_grad_evals"],
                "grad_evals_per_s": round(d["n_grad_evals"] / sampling),
                "leapfrog_per_draw": round(float(np.mean(d["mean_n_leapfrog"])), 1),
                "ess_bulk_loglik": round(float(d["ess_bulk_loglik"]), 1),
                "ess_bulk_loglik_per_s": round(float(d["ess_bulk_loglik"]) / wall, 2),
                "rhat_loglik": round(float(d["rhat_loglik"]), 4),
                "max_rhat": round(float(max(d["rhat_loglik"], np.max(d["rhat_outputs"]))), 4),
                "rhat_all_rows": {
                    "median": round(float(np.median(rhat_rows)), 4),
                    "p90": round(float(np.quantile(rhat_rows, 0.9)), 4),
                    "max": round(float(rhat_rows.max()), 4),
                    "n_above_1.01": int((rhat_rows > 1.01).sum()),
                },
                "divergences": d["divergences"],
                "step_size": [round(float(s), 5) for s in d["step_size"]],
                "accept_rate": [round(float(a), 3) for a in d["accept_rate"]],
                "noise_std": round(float(reg.noise_std_), 4),
                "test_rmse": round(rmse, 4),
                "test_lpd": round(log_predictive_scorer(reg, X_test, y_test), 4),
                "chains": args.chains,
                "warmup": args.warmup,
                "draws_per_chain": args.draws,
                "max_tree_depth": args.max_tree_depth,
                "metric": args.metric,
                "rescale_units": not args.no_rescale_units,
                "rhat_outputs": [round(float(r), 4) for r in d["rhat_outputs"].ravel()],
                "max_tree_depth_hits": d["max_tree_depth_hits"].tolist(),
                "n_temperatures": args.temperatures,
                "init": args.init,
                "target_rhat": args.target_rhat,
                "target_ess": args.target_ess,
                "max_time": args.max_time,
                **{
                    k: (v if isinstance(v, str) else round(float(v), 4))
                    for k, v in d.items()
                    if k
                    in (
                        "stopped_because",
                        "stop_rhat",
                        "stop_ess",
                        "n_draws_sampled_per_chain",
                        "budget_time",
                    )
                },
                "n_jobs": args.n_jobs,
                "cpu": platform.processor() or platform.machine(),
                "cores": os.cpu_count(),
            }
            if "tempering" in d:
                tempering = d["tempering"]
                record["max_temperature"] = args.max_temperature
                record["swap_accept"] = np.round(tempering["swap_accept"], 3).tolist()
                record["round_trips"] = tempering["round_trips"].tolist()
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
