"""Following the ConvergenceWarning's advice on make_friedman1, as issue 19's user did.

``make_friedman1(n_samples=300, noise=0.1)`` with the estimator's defaults (10 tanh units,
NUTS, 4 chains), then each setting the warning suggests. Prints one JSON line per
(setting, seed): the worst split R-hat (log-likelihood and monitored outputs), the bulk ESS
of the log-likelihood, why sampling stopped, the wall time and whether it warned. Usage::

    python benchmarks/friedman_advice.py [--seeds 0 1] [--max-time 120] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning

from skbnn import BayesianMLPRegressor
from skbnn.methods import NUTS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, machine  # noqa: E402


def settings(max_time: float) -> dict[str, dict]:
    until = {"target_rhat": 1.01, "target_ess": 400, "max_time": max_time}
    return {
        "defaults": {},
        "until converged": {"method": NUTS(**until)},
        "until converged, init=map": {"method": NUTS(init="map", **until)},
        "until converged, 5 units": {"method": NUTS(**until), "hidden_layer_sizes": (5,)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--max-time", type=float, default=120.0)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args()
    emit = emitter(args.out)
    X, y = make_friedman1(n_samples=300, noise=0.1, random_state=0)
    # compile outside the timings
    BayesianMLPRegressor(method=NUTS(n_warmup=10), n_samples=8).fit(X[:20], y[:20])
    for name, params in settings(args.max_time).items():
        for seed in args.seeds:
            reg = BayesianMLPRegressor(random_state=seed, **params)
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                reg.fit(X, y)
            d = reg.diagnostics_
            rhats = np.append(d["rhat_outputs"], d["rhat_loglik"])
            emit(
                {
                    "benchmark": "friedman_advice",
                    "command": "python " + " ".join(sys.argv),
                    **machine(),
                    "setting": name,
                    "seed": seed,
                    "max_rhat": float(np.nanmax(rhats)),
                    "rhat_loglik": float(d["rhat_loglik"]),
                    "ess_bulk_loglik": float(d["ess_bulk_loglik"]),
                    "stopped_because": d.get("stopped_because"),
                    "draws_sampled_per_chain": int(
                        d.get("n_draws_sampled_per_chain", d["n_draws_per_chain"])
                    ),
                    "fit_time": time.perf_counter() - t0,
                    "warned": any(issubclass(w.category, ConvergenceWarning) for w in caught),
                }
            )


if __name__ == "__main__":
    main()
