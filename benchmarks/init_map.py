"""What ``init="map"`` saves: MCMC chains started at their MAPs against prior draws.

For each dataset (UCI split 0, X standardized), warm-up length and seed, NUTS runs once
from prior draws (``init="prior"``) and once from per-chain MAP estimates (``init="map"``),
alternately in one process, with the estimator's defaults otherwise (10 tanh units, 4
chains, ``n_samples=1000``). Each fit prints a JSON line: the gradient evaluations of the
MAP starts and of warm-up (their sum is what the chains spend before their first kept
draw), the wall time, R-hat of the log-likelihood and the worst of the training-row
outputs, the bulk ESS of the log-likelihood and ESS per second (fit wall time), the test
log-likelihood, and the warning if one was raised. A shorter warm-up that reaches the same
R-hat and ESS from MAP starts is the saving.

    python benchmarks/init_map.py --datasets bostonHousing energy --warmup 150 500 \\
        --seeds 0 1 --out benchmarks/results/init_map.jsonl
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _uci import emitter, load_split, machine, standardize  # noqa: E402


def fit_once(data, init: str, n_warmup: int, seed: int, n_jobs: int, hidden: int) -> dict:
    from skbnn import BayesianMLPRegressor
    from skbnn.methods import NUTS
    from skbnn.model_selection import log_predictive_scorer

    X_train, y_train, X_test, y_test = data
    reg = BayesianMLPRegressor((hidden,), method=NUTS(n_warmup=n_warmup, init=init),
                               n_samples=1000, random_state=seed, n_jobs=n_jobs)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        reg.fit(X_train, y_train)
        seconds = time.perf_counter() - start
    d = reg.diagnostics_
    ess = float(d["ess_bulk_loglik"])
    return {
        "init": init, "n_warmup": n_warmup, "seed": seed, "fit_time": seconds,
        "init_grad_evals": int(d["init_grad_evals"]),
        "warmup_grad_evals": int(d["warmup_grad_evals"]),
        "grad_evals_to_first_draw": int(d["init_grad_evals"] + d["warmup_grad_evals"]),
        "n_grad_evals": int(d["n_grad_evals"]),
        "rhat_loglik": float(d["rhat_loglik"]),
        "max_rhat_outputs": float(np.max(d["rhat_outputs"])),
        "ess_bulk_loglik": ess, "ess_per_s": ess / seconds,
        "mean_tree_depth": float(np.mean(d["mean_tree_depth"])),
        "test_ll": float(log_predictive_scorer(reg, X_test, y_test)),
        "warned": any(issubclass(w.category, Warning) and "converged" in str(w.message)
                      for w in caught),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["bostonHousing", "energy"])
    parser.add_argument("--warmup", type=int, nargs="+", default=[150, 500])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--hidden", type=int, default=10)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args()
    emit = emitter(args.out)
    import skbnn

    facts = {"skbnn": skbnn.__version__, **machine(), "hidden": args.hidden,
             "command": "python benchmarks/init_map.py " + " ".join(sys.argv[1:])}  # fmt: skip
    for dataset in args.datasets:
        X_train, y_train, X_test, y_test = load_split(dataset, 0, args.data_dir)
        X_train, X_test = standardize(X_train, X_test)
        data = (X_train, y_train, X_test, y_test)
        for n_warmup in args.warmup:
            for seed in args.seeds:
                for init in ("prior", "map"):
                    r = fit_once(data, init, n_warmup, seed, args.n_jobs, args.hidden)
                    emit({"dataset": dataset, **r, **facts})


if __name__ == "__main__":
    main()
