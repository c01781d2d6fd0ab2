"""NUTS options side by side: bulk ESS per draw and per gradient, on diabetes.

Diabetes (scikit-learn's copy, X standardized), a 10-unit network, noise inferred, 4 chains
x (500 warm-up + 1000 draws), several seeds per configuration. Each configuration is a set of
``NUTS`` parameters; the default compares Stan's variance metric with the gradient-balanced
one and the ReLU scale moves on and off. Prints one JSON line per (activation, configuration,
seed) and a summary line (mean +- se over seeds) per (activation, configuration). Usage::

    python benchmarks/sampler_options.py [--seeds 5] [--activation relu tanh]
        [--configs '[{"metric": "diagonal"}, {"metric": "diagonal_grad"}]']
    python benchmarks/sampler_options.py --out benchmarks/results/sampler_options.jsonl
    python benchmarks/sampler_options.py --report benchmarks/results/sampler_options.jsonl

``--report FILE`` prints doc/performance.md's table of the summary lines (the last of each
activation and configuration; the scale moves act on ReLU units only, so a tanh network's
rows with them are left out), the best ESS per gradient of an activation in bold.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPRegressor
from skbnn.methods import NUTS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, provenance, read_results  # noqa: E402

DEFAULT_CONFIGS = [
    {"metric": "diagonal", "rescale_units": False},
    {"metric": "diagonal", "rescale_units": True},
    {"metric": "diagonal_grad", "rescale_units": False},
    {"metric": "diagonal_grad", "rescale_units": True},
]


def _mean_se(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(values.size))


def report(path) -> str:
    """doc/performance.md's table of a results file."""
    lines = read_results(path)
    last = {}
    for r in lines:
        if r.get("summary") and (r["activation"] == "relu" or not r["config"]["rescale_units"]):
            last[(r["activation"], json.dumps(r["config"], sort_keys=True))] = r
    out = ["| activation | metric | scale moves | bulk ESS loglik | min ESS outputs | "
           "leapfrog / draw | ESS / 1k gradients | wall |", "|---" * 8 + "|"]  # fmt: skip
    for activation in dict.fromkeys(a for a, _ in last):
        rows = [r for (a, _), r in last.items() if a == activation]
        best = max(r["ess_per_1k_grads"][0] for r in rows)
        for r in rows:
            moves = (
                ("on" if r["config"]["rescale_units"] else "off") if activation == "relu" else "-"
            )
            ess = "{:.2f} +- {:.2f}".format(*r["ess_per_1k_grads"])
            cells = [activation, r["config"]["metric"], moves,
                     "{:.0f} +- {:.0f}".format(*r["ess_bulk_loglik"]),
                     "{:.0f} +- {:.0f}".format(*r["min_ess_bulk_outputs"]),
                     f"{r['leapfrog_per_draw'][0]:.0f}",
                     f"**{ess}**" if r["ess_per_1k_grads"][0] == best else ess,
                     f"{r['wall_time_s'][0]:.1f} s"]  # fmt: skip
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--activation", nargs="+", default=["relu", "tanh"])
    parser.add_argument("--configs", type=json.loads, default=DEFAULT_CONFIGS)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    emit = emitter(args.out)
    head = provenance("sampler_options.py", None)
    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    for activation in args.activation:
        for config in args.configs:
            rows = []
            for seed in range(args.seeds):
                reg = BayesianMLPRegressor(
                    hidden_layer_sizes=(10,),
                    activation=activation,
                    method=NUTS(n_chains=4, n_warmup=500, **config),
                    n_samples=4000,
                    random_state=seed,
                    n_jobs=args.n_jobs,
                ).fit(X, y)
                d = reg.diagnostics_
                row = {
                    "ess_bulk_loglik": float(d["ess_bulk_loglik"]),
                    "min_ess_bulk_outputs": float(np.min(d["ess_bulk_outputs"])),
                    "max_rhat": float(max(d["rhat_loglik"], np.max(d["rhat_outputs"]))),
                    "leapfrog_per_draw": float(np.mean(d["mean_n_leapfrog"])),
                    "ess_per_1k_grads": 1000 * float(d["ess_bulk_loglik"]) / d["n_grad_evals"],
                    "wall_time_s": float(d["wall_time"]),
                }
                rows.append(row)
                record = {"benchmark": "sampler_options", "activation": activation,
                          "config": config, "seed": seed}  # fmt: skip
                record.update({key: round(value, 4) for key, value in row.items()})
                emit({**record, **head})
            summary = {"benchmark": "sampler_options", "summary": True,
                       "activation": activation, "config": config, **head}  # fmt: skip
            for key in rows[0]:
                mean, se = _mean_se([r[key] for r in rows])
                summary[key] = [round(mean, 4), round(se, 4)]
            emit(summary)


if __name__ == "__main__":
    main()
