"""An ensemble of more members than cores: the wall time of its fit on MNIST's network.

Five members on two cores train as two pairs and then the fifth alone; whether the idle
core's helper (``skbnn.kernels.helper.TailTeam``) takes half of that member's wide
products is what this times. Fits ``BayesianMLPClassifier(hidden_layer_sizes=(400, 600),
activation="relu", method=DeepEnsemble(solver="adam", batch_size=100, max_iter=EPOCHS,
tol=0), n_samples=MEMBERS, n_jobs=N_JOBS)`` on MNIST's first ``--rows`` training images
(``tol=0``: every member runs all its epochs), once to compile and then ``--repeats``
times, and prints one JSON line with the fits' seconds and the tasks the helper ran.
Run it against another checkout with ``PYTHONPATH`` (``--label`` names the run)::

    python benchmarks/ensemble_cores.py --rows 10000 --epochs 15 --label after \\
        --out benchmarks/results/ensemble_cores.jsonl
    PYTHONPATH=../before python benchmarks/ensemble_cores.py ... --label before
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
from _mnist import load_mnist  # noqa: E402
from _uci import emitter, machine, package_commit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--label", default=None)
    parser.add_argument("--conditions", default=None, help="idle or loaded, for the record")
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/mnist")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args()

    from skbnn import BayesianMLPClassifier
    from skbnn.kernels import helper
    from skbnn.methods import DeepEnsemble

    X, y, _, _ = load_mnist(args.data_dir)
    X, y = X[: args.rows], y[: args.rows]

    def fit(epochs, seed):
        method = DeepEnsemble(solver="adam", batch_size=100, max_iter=epochs, tol=0.0)
        model = BayesianMLPClassifier((400, 600), activation="relu", method=method,
                                      n_samples=args.members, n_jobs=args.n_jobs,
                                      random_state=seed)  # fmt: skip
        with warnings.catch_warnings():
            # tol=0: every member is "not converged", by design
            warnings.simplefilter("ignore")
            return model.fit(X, y)

    fit(1, 0)
    seconds, served = [], []
    for seed in range(args.repeats):
        before = helper.served[0]
        start = time.perf_counter()
        fit(args.epochs, seed)
        seconds.append(time.perf_counter() - start)
        served.append(helper.served[0] - before)
    emitter(args.out)({
        "rows": args.rows, "epochs": args.epochs, "members": args.members,
        "n_jobs": args.n_jobs, "label": args.label,
        "fit_s_median": round(float(np.median(seconds)), 2),
        "fit_s": [round(s, 2) for s in seconds], "helper_tasks": served,
        "commit": package_commit(), "conditions": args.conditions, **machine(),
        "command": "python benchmarks/ensemble_cores.py " + " ".join(sys.argv[1:]),
    })  # fmt: skip


if __name__ == "__main__":
    main()
