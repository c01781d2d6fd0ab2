"""NUTS, HMC, MALA and adaptive Metropolis on Boston housing split 0, in one run.

The model of ``nuts_boston.py``: 13-10-1 ReLU, N(0, 1) on every weight and bias, noise sd
fixed at 0.5 on the standardized target (``--noise inferred`` infers it), 3 chains on both
cores. NUTS runs 1000 warm-up + 3000 draws per chain at target_accept 0.9, HMC the same
iterations. MALA and adaptive Metropolis get NUTS's budget of gradient (log-density)
evaluations: a quarter as warm-up, the rest thinned to 1000 kept draws per chain. Prints
one JSON line per sampler, then a markdown table (``--markdown``); ``--report FILE``
prints the tables of a file of such lines::

    python benchmarks/mcmc_family.py [--data-dir DIR] [--noise fixed|inferred] [--markdown]
    python benchmarks/mcmc_family.py --report benchmarks/results/mcmc_family.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _uci import load_split, provenance, read_results, standardize  # noqa: E402


def table(records: list[dict]) -> str:
    """A markdown table of the samplers' lines: budget, sampling time, bulk ESS of the
    log-likelihood (and per second), R-hat, whether the fit warned, and test figures."""
    lines = ["| sampler | gradient (density) evals | wall (sampling) | bulk ESS loglik | "
             "ESS/s | R-hat loglik / max | warned | test RMSE | test LPD |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in records:
        lines.append(
            f"| {r['method']} | {r['n_grad_evals'] / 1e6:.2f}M | "
            f"{r['wall_time_s'] - r['compile_time_s']:.1f} s | {r['ess_bulk_loglik']:.0f} | "
            f"{r['ess_bulk_loglik_per_s']:.2f} | {r['rhat_loglik']:.3f} / {r['max_rhat']:.3f}"
            f" | {'yes' if r['warned'] else 'no'} | {r['test_rmse']:.2f} | "
            f"{r['test_lpd']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def report(path, noise: str | None = None) -> str:
    """The tables of a results file, one per noise setting (``noise`` names one), each of
    the last line per sampler."""
    rows = read_results(path)
    out = []
    for setting in dict.fromkeys(r["noise"] for r in rows):
        if noise in (None, setting):
            last = {r["method"]: r for r in rows if r["noise"] == setting}
            out.append(table(list(last.values())))
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--noise", default="fixed", choices=["fixed", "inferred"])
    parser.add_argument("--chains", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--markdown", action="store_true", help="also print a markdown table")
    parser.add_argument("--report", default=None, help="print the tables of a results file")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return

    import warnings

    import numpy as np
    from sklearn.exceptions import ConvergenceWarning

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import HMC, MALA, NUTS, AdaptiveMetropolis
    from skbnn.model_selection import log_predictive_scorer
    from skbnn.priors import GaussianPrior

    X_train, y_train, X_test, y_test = load_split("bostonHousing", 0, args.data_dir)
    X_train, X_test = standardize(X_train, X_test)
    chains = args.chains

    def fit(method, n_samples):
        reg = BayesianMLPRegressor(
            hidden_layer_sizes=(10,),
            activation="relu",
            method=method,
            prior=GaussianPrior(std=1.0, fan_in_scaling=False),
            n_samples=n_samples,
            noise_std=0.5 if args.noise == "fixed" else None,
            random_state=args.seed,
            n_jobs=args.n_jobs,
        )
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            reg.fit(X_train, y_train)
        wall = time.perf_counter() - start
        d = reg.diagnostics_
        sampling = wall - d["compile_time"]
        rmse = float(np.sqrt(np.mean((reg.predict(X_test) - y_test) ** 2)))
        record = {
            "benchmark": "mcmc_family",
            "method": d["method"],
            "noise": args.noise,
            "params": method.get_params(),
            "wall_time_s": round(wall, 2),
            "compile_time_s": round(d["compile_time"], 2),
            "n_grad_evals": d["n_grad_evals"],
            "grad_evals_per_s": round(d["n_grad_evals"] / sampling),
            "ess_bulk_loglik": round(float(d["ess_bulk_loglik"]), 1),
            "ess_bulk_loglik_per_s": round(float(d["ess_bulk_loglik"]) / sampling, 3),
            "rhat_loglik": round(float(d["rhat_loglik"]), 4),
            "max_rhat": round(float(max(d["rhat_loglik"], np.max(d["rhat_outputs"]))), 4),
            "divergences": d["divergences"],
            "accept_rate": [round(float(a), 3) for a in d["accept_rate"]],
            "warned": any(issubclass(w.category, ConvergenceWarning) for w in caught),
            "test_rmse": round(rmse, 4),
            "test_lpd": round(log_predictive_scorer(reg, X_test, y_test), 4),
            "chains": chains,
            "n_jobs": args.n_jobs,
            **provenance("mcmc_family.py", None),
        }
        print(json.dumps(record), flush=True)
        return record

    records = [fit(NUTS(n_chains=chains, n_warmup=1000, target_accept=0.9), chains * 3000)]
    budget = records[0]["n_grad_evals"] // chains  # per chain
    records.append(fit(HMC(n_chains=chains, n_warmup=1000, target_accept=0.9), chains * 3000))
    warmup = budget // 4
    thin = max(1, (budget - warmup) // 1000)
    records.append(fit(MALA(n_chains=chains, n_warmup=warmup, thin=thin), chains * 1000))
    am = AdaptiveMetropolis(n_chains=chains, n_warmup=warmup, thin=thin)
    records.append(fit(am, chains * 1000))

    if args.markdown:
        print()
        print(table(records), end="")


if __name__ == "__main__":
    main()
