"""Seed 003's MNIST table: LBBNN's three families, VI, the ensemble and Kronecker Laplace.

The talk's setting: MNIST (60,000 training and 10,000 test images, pixels scaled to
[0, 1]), a ``784 -> 400 -> 600 -> 10`` ReLU classifier with a softmax likelihood, Adam,
250 epochs of batches of 100 (``--epochs``, ``--batch-size``; every method here trains on
the shared engine, so every one takes them). ``--methods`` picks among

* ``meanfield``, ``flow``, ``lowrank``: ``LBBNN(posterior=...)``, the talk's LBBNN rows;
* ``vi``: ``VariationalInference()``, the talk's BNN mean-field row;
* ``ensemble``: ``DeepEnsemble()``; ``laplace``: ``Laplace(hessian="kron")`` (its
  linearized predictive): this library's own answers to the same data.

Each fit runs in a process of its own (its wall time and peak resident memory are its
own) and its JSON line is appended to ``--out`` as it ends, so a long run can be stopped
and resumed (``--resume`` skips the fits ``--out`` holds). A line holds, as
``benchmarks/lbbnn_digits.py`` computes them: the model-averaged accuracy and the
posterior-mean network's (VI and LBBNN), LBBNN's median probability model's accuracy and
density, the test log loss, the decisions at ``--threshold`` (the share of test images
whose top class reaches it, and the accuracy on them), the fit's wall and compile time and
the process's peak memory. The summary lines give the min / median / max over seeds.

    python benchmarks/mnist.py --methods meanfield flow lowrank --seeds 0 1 2 \\
        --out benchmarks/results/mnist.jsonl
    python benchmarks/mnist.py --methods vi ensemble laplace --out benchmarks/results/mnist.jsonl
    python benchmarks/mnist.py --rows 6000 --epochs 1 --methods meanfield   # a smoke run
    python benchmarks/mnist.py --report benchmarks/results/mnist.jsonl \\
        benchmarks/results/mnist_ensemble_whole_fit.jsonl   # doc/optimization.md's table

``--report`` prints the table beside the talk's rows: per method, the latest full-size
fit (250 epochs of all 60,000 images) of each seed, as min / median / max where there are
several seeds, and the fit times of the same seed's earlier runs in parentheses.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _mnist import load_mnist  # noqa: E402
from _uci import emitter, machine, read_results  # noqa: E402
from lbbnn_digits import median_model_scores, run  # noqa: E402

#: The methods ``--methods`` names.
METHODS = ("meanfield", "flow", "lowrank", "vi", "ensemble", "laplace")
#: The talk's network.
HIDDEN = (400, 600)
#: The report's rows: each method's label (``{}``: its seeds), and the talk's row beside
#: it (its label, posterior mean, model average, density and decisions at 0.95).
REPORT_ROWS = {
    "vi": ("VI, mean-field (skbnn, {})",
           ("BNN, mean-field", "98.20 / 98.40 / 98.50", "98.20 / 98.30 / 98.50", "1.000",
            "8,477 (99.99)")),
    "meanfield": ("LBBNN, mean-field (skbnn, {})",
                  ("LBBNN, mean-field", "98.00 / 98.11 / 98.25", "97.88 / 98.01 / 98.14",
                   "0.092", "8,322 (99.99)")),
    "flow": ("LBBNN, flow (skbnn, {})",
             ("LBBNN, flow", "98.41 / 98.48 / 98.58", "98.41 / 98.51 / 98.55", "0.049", "")),
    "lowrank": ("LBBNN, low-rank (skbnn, {}, rank 5)",
                ("LBBNN, multivariate normal", "97.60 / 97.80 / 98.00",
                 "97.60 / 97.80 / 97.90", "0.180", "7,818 (100.0)")),
    "laplace": ("Kronecker Laplace, linearized (skbnn, {})", None),
    "ensemble": ("Deep ensemble (skbnn, {}, 5 members)", None),
}  # fmt: skip


def make_method(name: str, epochs: int, batch_size: int, lr: float, predictive: str = "glm"):
    """The method ``name`` with the talk's training settings (``predictive``: Laplace's)."""
    from skbnn.methods import LBBNN, DeepEnsemble, Laplace, VariationalInference

    common = {"max_iter": epochs, "batch_size": batch_size, "learning_rate_init": lr}
    if name in ("meanfield", "flow", "lowrank"):
        return LBBNN(posterior=name, **common)
    if name == "vi":
        return VariationalInference(**common)
    if name == "ensemble":
        return DeepEnsemble(solver="adam", **common)
    # the linearized predictive (the default), which the Kronecker factors give without
    # forming any Jacobian: draws of the weights pushed through a network this wide
    # predict at chance (doc/optimization.md)
    return Laplace(hessian="kron", predictive=predictive, solver="adam", **common)


def child(args) -> None:
    """One fit, in this process: print its JSON line."""
    X, y, X_test, y_test = load_mnist(args.data_dir)
    if args.rows:
        X, y = X[: args.rows], y[: args.rows]
    d = (X, y, X_test, y_test)
    method = make_method(args.child, args.epochs, args.batch_size, args.lr,
                         args.laplace_predictive)  # fmt: skip
    # the ensemble's draws are its members: its default number of them; the others' are
    # draws from the fitted approximation, 100 as in lbbnn_digits.py
    n_samples = None if args.child == "ensemble" else 100
    r = run(args.child, method, HIDDEN, args.seed, d, args.threshold, n_jobs=args.n_jobs,
            n_samples=n_samples)  # fmt: skip
    clf = r.pop("_clf")
    if args.child in ("meanfield", "flow", "lowrank"):
        r.update(median_model_scores(args.child, clf, d, args.seed, args.threshold))
    # Linux reports the peak resident set in kilobytes
    r["peak_memory_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    r["n_train"] = len(X)
    if args.child == "laplace":
        r["laplace_predictive"] = args.laplace_predictive
    print(json.dumps(r))


def _spread(values, fmt: str) -> str:
    """One value, or min / median / max over seeds."""
    if len(values) == 1:
        return fmt.format(values[0])
    middle = np.median(values).astype(type(values[0]))
    return " / ".join(fmt.format(v) for v in (min(values), middle, max(values)))


def _range(values, fmt: str) -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def _row(cells) -> str:
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def report(paths) -> str:
    """doc/optimization.md's MNIST table of the fits in ``paths`` (results files, read in
    order; a later line of a method and seed replaces an earlier one)."""
    lines = read_results(paths)
    fits = [r for r in lines if not r.get("summary") and "error" not in r
            and r.get("rows") is None and r.get("epochs") == 250]  # fmt: skip
    head = ("| method | posterior mean | model averaged | density | test log loss | "
            "decisions at 0.95 (accuracy) | fit, min (earlier runs) | peak memory |")  # fmt: skip
    out = [head, "|---|---|---|---|---|---|---|---|"]
    for name, (label, talk) in REPORT_ROWS.items():
        runs = [r for r in fits if r["method"] == name]
        latest = list({r["seed"]: r for r in runs}.values())
        if latest:
            seeds = sorted(r["seed"] for r in latest)
            seeds = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"
            pct = [100 * r["accuracy_mean_network"] for r in latest
                   if r["accuracy_mean_network"] is not None]  # fmt: skip
            density = [r["density"] for r in latest]
            decided = _spread([round(1e4 * r["decided_averaged"]) for r in latest], "{:,}")
            right = _range([100 * r["decided_accuracy_averaged"] for r in latest], "{:.2f}")
            minutes = _spread([r["fit_time"] / 60 for r in latest], "{:.0f}")
            earlier = [r for r in runs if r not in latest]
            if earlier:
                minutes += " (" + ", ".join(f"{r['fit_time'] / 60:.0f}" for r in earlier) + ")"
            memory = _range([r["peak_memory_mb"] / 1024 for r in latest], "{:.1f}")  # GiB
            cells = [
                label.format(seeds),
                _spread(pct, "{:.2f}") if pct else "",
                _spread([100 * r["accuracy_averaged"] for r in latest], "{:.2f}"),
                _spread(density, "{:.3f}" if min(density) > 0.01 else "{:.4f}"),
                _spread([r["log_loss"] for r in latest], "{:.3f}"),
                f"{decided} ({right})",
                minutes,
                f"{memory} GiB",
            ]
            out.append(_row(cells))
        if talk:
            cells = [f"{talk[0]} (the talk)", *talk[1:4], "", talk[4], "", ""]
            out.append(_row(cells))
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, default=250)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--rows", type=int, default=None, help="the first ROWS training images")
    parser.add_argument("--threshold", type=float, default=0.95,
                        help="the predictive probability a decision needs")  # fmt: skip
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--laplace-predictive", choices=("glm", "mc"), default="glm",
                        help="Laplace's predictive (its default: glm)")  # fmt: skip
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/mnist")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--resume", action="store_true", help="skip the fits --out holds")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--report", nargs="+", default=None,
                        help="print the table of these results files")  # fmt: skip
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    if args.child:
        child(args)
        return
    import skbnn

    settings = {"hidden": list(HIDDEN), "epochs": args.epochs, "batch_size": args.batch_size,
                "lr": args.lr, "rows": args.rows, "threshold": args.threshold,
                "n_jobs": args.n_jobs}  # fmt: skip
    done = set()
    if args.resume and args.out and Path(args.out).is_file():
        for line in Path(args.out).read_text().splitlines():
            r = json.loads(line)
            if (not r.get("summary") and all(r.get(k) == v for k, v in settings.items())
                    and r.get("laplace_predictive", "glm") == args.laplace_predictive):  # fmt: skip
                done.add((r["method"], r["seed"]))
    emit = emitter(args.out)
    command = "python benchmarks/mnist.py " + " ".join(sys.argv[1:])
    shared = [
        "--epochs",
        str(args.epochs),
        "--batch-size",
        str(args.batch_size),
        "--lr",
        str(args.lr),
        "--threshold",
        str(args.threshold),
        "--n-jobs",
        str(args.n_jobs),
        "--laplace-predictive",
        args.laplace_predictive,
    ]
    shared += ["--rows", str(args.rows)] if args.rows else []
    shared += ["--data-dir", args.data_dir] if args.data_dir else []
    rows = []
    for seed in args.seeds:
        for name in args.methods:
            if (name, seed) in done:
                continue
            start = time.perf_counter()
            out = subprocess.run(
                [sys.executable, __file__, "--child", name, "--seed", str(seed), *shared],
                capture_output=True, text=True,
            )  # fmt: skip
            if out.returncode != 0:
                emit({"method": name, "seed": seed, **settings, "error": out.stderr[-2000:]})
                continue
            r = json.loads(out.stdout.splitlines()[-1])
            r["process_time"] = time.perf_counter() - start
            rows.append(r)
            emit({**r, **settings, "skbnn": skbnn.__version__, **machine(), "command": command})
    for name in args.methods:
        rs = [r for r in rows if r["method"] == name]
        if not rs:
            continue
        summary = {"summary": True, "method": name, "seeds": [r["seed"] for r in rs],
                   **settings, **machine(), "command": command}  # fmt: skip
        for key in ("accuracy_mean_network", "accuracy_averaged", "accuracy_median_model",
                    "density", "log_loss", "decided_averaged", "decided_accuracy_averaged",
                    "decided_median", "decided_accuracy_median", "fit_time",
                    "peak_memory_mb"):  # fmt: skip
            vals = [r[key] for r in rs if r.get(key) is not None]
            if vals:
                summary[key + "_min_median_max"] = [float(np.min(vals)), float(np.median(vals)),
                                                    float(np.max(vals))]  # fmt: skip
        emit(summary)


if __name__ == "__main__":
    main()
