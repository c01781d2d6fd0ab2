"""Many short chains or a few long ones? Wall time to convergence on this machine.

Issue 19 asks whether more chains than cores, judged by nested R-hat (Margossian et al.
2022), converge faster in wall time than a few long chains on our posteriors. For each
dataset (UCI split 0, X standardized, the estimator's default 10 tanh units, NUTS) this
runs, alternately in one process:

* ``long``: 4 chains, ``n_warmup`` 500, 250 draws each (the defaults);
* ``short``: 16 chains as 4 superchains of 4 (``--chains``, ``--superchains``), a shorter
  warm-up (``--short-warmup``, 150) and ``--short-draws`` (60) draws each.

Each line gives the wall time, gradient evaluations, split R-hat of the log-likelihood
and the worst monitored output over all chains, nested R-hat of the log-likelihood with
the chains grouped into superchains (the sampler starts every chain from its own prior
draw, so the grouping is nominal: a conservative use of nested R-hat), the bulk ESS of the
log-likelihood, ESS per second and the test log-likelihood.

    python benchmarks/many_chains.py --out benchmarks/results/many_chains.jsonl
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


def fit(data, n_chains: int, n_warmup: int, draws: int, seed: int, superchains: int):
    from skbnn import BayesianMLPRegressor
    from skbnn.diagnostics import nested_rhat
    from skbnn.methods import NUTS
    from skbnn.model_selection import log_predictive_scorer

    X_train, y_train, X_test, y_test = data
    reg = BayesianMLPRegressor(method=NUTS(n_chains=n_chains, n_warmup=n_warmup),
                               n_samples=n_chains * draws, random_state=seed, n_jobs=2)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        reg.fit(X_train, y_train)
        seconds = time.perf_counter() - start
    d = reg.diagnostics_
    ess = float(d["ess_bulk_loglik"])
    return {
        "n_chains": n_chains, "n_warmup": n_warmup, "draws_per_chain": draws, "seed": seed,
        "fit_time": seconds, "n_grad_evals": int(d["n_grad_evals"]),
        "rhat_loglik": float(d["rhat_loglik"]),
        "max_rhat_outputs": float(np.max(d["rhat_outputs"])),
        "nested_rhat_loglik": nested_rhat(d["loglik"], superchains),
        "ess_bulk_loglik": ess, "ess_per_s": ess / seconds,
        "test_ll": float(log_predictive_scorer(reg, X_test, y_test)),
        "warned": any("converged" in str(w.message) for w in caught),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["bostonHousing", "energy"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--chains", type=int, default=16)
    parser.add_argument("--superchains", type=int, default=4)
    parser.add_argument("--short-warmup", type=int, default=150)
    parser.add_argument("--short-draws", type=int, default=60)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    emit = emitter(args.out)
    import skbnn

    facts = {"skbnn": skbnn.__version__, **machine(),
             "command": "python benchmarks/many_chains.py " + " ".join(sys.argv[1:])}  # fmt: skip
    for dataset in args.datasets:
        X_train, y_train, X_test, y_test = load_split(dataset, 0, args.data_dir)
        X_train, X_test = standardize(X_train, X_test)
        data = (X_train, y_train, X_test, y_test)
        for seed in args.seeds:
            runs = {
                "long": (4, 500, 250, 2),
                "short": (args.chains, args.short_warmup, args.short_draws, args.superchains),
            }
            for name, (chains, warmup, draws, supers) in runs.items():
                r = fit(data, chains, warmup, draws, seed, supers)
                emit({"dataset": dataset, "run": name, **r, **facts})


if __name__ == "__main__":
    main()
