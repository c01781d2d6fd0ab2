"""One epoch of MNIST's mean-field VI network and of a plain MLP: skbnn beside PyTorch.

Issue 76's target: one VI epoch in at most PyTorch's time for the same network, in the
same run. The network of ``benchmarks/mnist.py``: MNIST's first ``--rows`` training images
(pixels in [0, 1]), a ``784 -> 400 -> 600 -> 10`` ReLU classifier with a softmax
likelihood under the classifier's default prior (``GaussianPrior(std=3)``), Adam at 1e-3,
batches of 100, one epoch (every row once). Two models:

* ``vi``: ``BayesianMLPClassifier(hidden_layer_sizes=(400, 600), activation="relu",
  method=VariationalInference(batch_size=100, max_iter=1, tol=0, learning_rate_init=1e-3))``
  at its defaults otherwise: mean-field Gaussian, local reparameterization, one draw per
  step, ``init_std=0.01``, a constant rate, no early stopping (``elbo_samples=2`` and
  ``n_samples=1``: the final ELBO estimate and the draws come after the epoch and are not
  timed, but on 60,000 rows the default 100 of each would take minutes);
* ``mlp``: the same estimator with ``n_samples=1`` and ``method=DeepEnsemble(solver=
  "adam", learning_rate="constant", learning_rate_init=1e-3, batch_size=100, max_iter=1,
  early_stopping=False, tol=0)``: one MAP network (``solver="auto"`` would be L-BFGS on up
  to 5,000 rows; the classifier's ``early_stopping="auto"`` is already False, which keeps
  the 10 % validation split out).

skbnn's epoch time is ``diagnostics_["train_time"]`` of the one-epoch fit: the training
engine's time less the kernels' compilation, so the epoch plus the member's setup (its
initialization and Adam's state: 0.06 s for VI, none measurable for the MLP, from fits
of one and two epochs on 2,000 rows, against an epoch of seconds); validating and
transposing the data before it and the ELBO estimate and draws after it are not in it.
Before the timed fits, each model is fitted once on 200 rows, which compiles its kernels
(or loads them from numba's cache): the figure is the warm epoch. Each repetition is a
fit from a fresh start (``random_state=seed + repeat``), so a line's times are
``--repeats`` independent epochs. Beside them, the whole fit's wall and process CPU
seconds. The training engine trains a single member on one thread (BLAS limited to one
thread too), so skbnn's epoch uses one core whatever ``--threads`` is; torch's lines
give the epoch's CPU seconds, whose ratio to its wall time is the cores torch kept busy.
A line's ``losses`` are each epoch's loss per row, as ``diagnostics_["loss_curve"]``
has it: minus the ELBO estimate (VI), the negative log posterior (MLP). Each line also
holds the machine's one-minute load average before its timed epochs. Run on an idle
machine: with another process busy on one of two cores, torch's two OpenMP threads wait
on each other at every operation, and its epoch took 15 times as long as on one thread.

PyTorch's side is ``peers/torch_mnist.py`` (the same two models in float64, skbnn's
precision, and in float32, what a PyTorch user runs), run after skbnn's in a subprocess of
``--torch-python`` (torch need not be in skbnn's environment) on ``--threads`` intra-op
threads. The last line holds the ratios skbnn / torch of the median epoch times: the goal
is a VI ratio at most 1.

One JSON line per (library, model, dtype), then the ratio line::

    python benchmarks/mnist_epoch.py --torch-python /path/to/torch-env/bin/python \\
        --repeats 3 --out benchmarks/results/mnist_epoch.jsonl
    python benchmarks/mnist_epoch.py --rows 2000 --repeats 2   # a smoke run
    # the mean epoch of 150-epoch fits (--epochs): how an epoch's time changes as the
    # network trains (Adam's tiny weights once slowed it through subnormal arithmetic)
    python benchmarks/mnist_epoch.py --rows 10000 --epochs 150 --repeats 1 --no-torch \
        --models mlp
    # LBBNN's three families, which have no peer here, on the first 6,000 images
    python benchmarks/mnist_epoch.py --rows 6000 --no-torch \\
        --models lbbnn_meanfield lbbnn_flow lbbnn_lowrank vi

``--report`` prints a doc/optimization.md table of a results file, without a fit:
``--table torch`` skbnn's runs at ``--commits`` (the lines' ``commit``) beside the first
one's PyTorch; ``--table steps`` the first and second run of each model at the one commit
(the code before and after a change, the script run against a worktree of each), with an
epoch of 60,000 rows and 250 epochs extrapolated from the second; ``--table threads`` each
model at one commit on 1 thread beside 2 (``n_jobs``), with 250 epochs of 60,000 rows from
its one-epoch line of 60,000 rows at 2 threads where the file holds one, else from its
2-thread epoch scaled; ``--table runs`` a row per model and thread count, a column per
commit (each of its lines' median epochs, in file order: several rounds), the ratio of
the last commit's mean to the first's, and 250 epochs of 60,000 rows extrapolated from
the last::

    python benchmarks/mnist_epoch.py --table torch --commits b2c8f60 8d9b106 \\
        --report benchmarks/results/mnist_epoch.jsonl
    python benchmarks/mnist_epoch.py --table steps --commits f1c8224 \\
        --report benchmarks/results/mnist_epoch_lbbnn.jsonl
    python benchmarks/mnist_epoch.py --table threads --commits d42e108 \\
        --report benchmarks/results/mnist_epoch_lbbnn.jsonl
    python benchmarks/mnist_epoch.py --table runs --commits ae0b966 c6de715 \\
        --report benchmarks/results/mnist_epoch_lbbnn.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _mnist import load_mnist  # noqa: E402
from _uci import emitter, provenance, read_results  # noqa: E402

HIDDEN = (400, 600)
BATCH = 100
LR = 1e-3
#: Rows of the warm-up fit that compiles a model's kernels.
WARM_ROWS = 200
MODELS = ("vi", "mlp")
#: skbnn's other models at the talk's size, which have no PyTorch peer here: LBBNN's
#: three families (``--models``).
LBBNN_MODELS = ("lbbnn_meanfield", "lbbnn_flow", "lbbnn_lowrank")


def make_classifier(
    model: str, seed: int, n_jobs: int = 1, epochs: int = 1, schedule: str = "constant"
):
    """The one-epoch classifier of ``model`` (``"vi"``, ``"mlp"`` or ``"lbbnn_<posterior>"``)."""
    from skbnn import BayesianMLPClassifier
    from skbnn.methods import LBBNN, DeepEnsemble, VariationalInference

    common = {"batch_size": BATCH, "max_iter": epochs, "tol": 0.0, "learning_rate_init": LR,
              "learning_rate": schedule, "early_stopping": False}  # fmt: skip
    if model == "vi":
        method = VariationalInference(elbo_samples=2, **common)
    elif model.startswith("lbbnn_"):
        method = LBBNN(posterior=model.removeprefix("lbbnn_"), elbo_samples=2, **common)
    else:
        method = DeepEnsemble(solver="adam", **common)
    return BayesianMLPClassifier(hidden_layer_sizes=HIDDEN, activation="relu", method=method,
                                 n_samples=1, random_state=seed, n_jobs=n_jobs)  # fmt: skip


def skbnn_epoch(
    model: str, X, y, seed: int, n_jobs: int = 1, epochs: int = 1, schedule: str = "constant"
) -> dict:
    """Fit ``model`` for one epoch: its ``train_time``, the fit's wall and CPU seconds and
    the epoch's loss per row."""
    clf = make_classifier(model, seed, n_jobs, epochs, schedule)
    with warnings.catch_warnings():
        # one epoch cannot converge, and MNIST's pixels are not standardized: both known
        warnings.simplefilter("ignore")
        wall, cpu = time.perf_counter(), time.process_time()
        clf.fit(X, y)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    diag = clf.diagnostics_
    return {"epoch_time": float(diag["train_time"]) / epochs, "fit_time": wall, "cpu_time": cpu,
            "compile_time": float(diag["compile_time"]),
            "loss": float(diag["loss_curve"][0][0]), "n_iter": int(diag["n_iter"][0])}  # fmt: skip


def run_skbnn(args, X, y) -> list[dict]:
    """skbnn's lines: each model warmed up on ``WARM_ROWS`` rows, then ``--repeats`` timed
    one-epoch fits."""
    lines = []
    for model in args.models:
        skbnn_epoch(model, X[:WARM_ROWS], y[:WARM_ROWS], args.seed, args.n_jobs)
        load = os.getloadavg()[0]
        runs = [skbnn_epoch(model, X, y, args.seed + r, args.n_jobs, args.epochs,
                            args.learning_rate) for r in range(args.repeats)]  # fmt: skip
        times = [r["epoch_time"] for r in runs]
        lines.append({
            "library": "skbnn", "model": model, "dtype": "float64", "rows": len(X),
            "hidden": list(HIDDEN), "batch_size": BATCH, "lr": LR, "n_jobs": args.n_jobs,
            "epochs": args.epochs, "learning_rate": args.learning_rate,
            "epoch_time_median": statistics.median(times), "epoch_time_min": min(times),
            "epoch_times": times, "fit_times": [r["fit_time"] for r in runs],
            "fit_cpu_times": [r["cpu_time"] for r in runs],
            "compile_times": [r["compile_time"] for r in runs],
            "losses": [r["loss"] for r in runs], "n_iter": [r["n_iter"] for r in runs],
            "load_average_1min": load,
        })  # fmt: skip
    return lines


def run_torch(args) -> list[dict]:
    """The peer's lines, from ``--torch-python peers/torch_mnist.py``; one error line if it
    fails."""
    cmd = [args.torch_python, str(HERE / "peers" / "torch_mnist.py"), "--rows", str(args.rows),
           "--repeats", str(args.repeats), "--threads", str(args.threads), "--seed",
           str(args.seed), "--batch-size", str(BATCH), "--lr", str(LR)]  # fmt: skip
    cmd += ["--data-dir", args.data_dir] if args.data_dir else []
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    if out.returncode or not lines:
        return [{"library": "torch", "error": out.stderr[-2000:], "command": " ".join(cmd)}]
    return lines


def ratios(lines: list[dict]) -> dict:
    """skbnn's median epoch time over torch's, per model and torch dtype."""
    median = {(r["library"], r["model"], r["dtype"]): r["epoch_time_median"] for r in lines
              if "epoch_time_median" in r}  # fmt: skip
    out = {"ratio": "skbnn / torch median epoch time"}
    for model in MODELS:
        for dtype in ("float64", "float32"):
            sk, th = median.get(("skbnn", model, "float64")), median.get(("torch", model, dtype))
            if sk is not None and th is not None:
                out[f"{model} skbnn / torch {dtype}"] = sk / th
    vi = out.get("vi skbnn / torch float64")
    out["vi_at_most_torch_float64"] = None if vi is None else bool(vi <= 1.0)
    return out


#: the models' names in the tables
LABELS = {"vi": "mean-field VI", "mlp": "plain MLP", "lbbnn_meanfield": "LBBNN mean-field",
          "lbbnn_flow": "LBBNN flow", "lbbnn_lowrank": "LBBNN low-rank (rank 5)"}  # fmt: skip


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"about {seconds:.0f} s"
    if seconds < 90 * 60:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"


def _threads_table(runs: list[dict]) -> str:
    """Each model on 1 thread beside 2, and 250 epochs of 60,000 rows on 2."""
    at = {}
    for r in runs:
        at.setdefault(r["model"], {})[(r.get("n_jobs") or 1, r["rows"])] = r["epoch_time_median"]
    out = ["| model | 1 thread | 2 threads | ratio | 250 epochs of 60,000 rows, 2 threads |",
           "|---|---|---|---|---|"]  # fmt: skip
    for model, times in at.items():
        rows = min(n for _, n in times)
        one, two = times.get((1, rows)), times.get((2, rows))
        if one is None or two is None:
            continue
        whole = times.get((2, 60_000))
        # a measured epoch of all the rows beats one scaled from a tenth of them
        span = _duration(250 * (whole or two * 60_000 / rows))
        if whole is not None:
            span += f" (an epoch of 60,000 rows: {whole:.1f} s)"
        cells = [LABELS[model], f"{one:.2f} s", f"{two:.2f} s", f"{two / one:.2f}", span]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _runs_table(runs: list[dict], commits) -> str:
    """A row per model and thread count, a column per commit."""
    rows = runs[0]["rows"]
    at = {}
    for r in runs:
        if r["rows"] == rows:
            key = r["model"], r.get("n_jobs") or 1
            at.setdefault(key, {}).setdefault(r["commit"], []).append(r["epoch_time_median"])
    first, last = commits[0], commits[-1]
    head = ["model", "threads", *commits, f"ratio {last} / {first}",
            f"250 epochs of 60,000 rows, {last}"]  # fmt: skip
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (model, threads), times in at.items():
        cells = [LABELS[model], str(threads)]
        cells += [" / ".join(f"{t:.2f}" for t in times[c]) + " s" if c in times else ""
                  for c in commits]  # fmt: skip
        mean = {c: statistics.mean(times[c]) for c in (first, last) if c in times}
        both = len(commits) > 1 and len(mean) == 2
        cells.append(f"{mean[last] / mean[first]:.2f}" if both else "")
        cells.append(_duration(250 * mean[last] * 60_000 / rows) if last in mean else "")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def report(path, table: str = "torch", *commits: str) -> str:
    """doc/optimization.md's table ``table`` (``"torch"``, ``"steps"``, ``"threads"`` or
    ``"runs"``) of the results file ``path``, at the runs of ``commits``."""
    lines = read_results(path)
    runs = [r for r in lines if "epoch_time_median" in r and r["commit"] in commits]
    if table == "threads":
        return _threads_table(runs)
    if table == "runs":
        return _runs_table(runs, commits)
    if table == "steps":
        before, after = {}, {}
        for r in runs:
            (after if r["model"] in before else before)[r["model"]] = r
        out = ["| model | before | after | ratio | an epoch of 60,000 rows, after | "
               "250 epochs, after |", "|---|---|---|---|---|---|"]  # fmt: skip
        for model, b in before.items():
            a = after[model]["epoch_time_median"]
            epoch = a * 60_000 / after[model]["rows"]
            cells = [LABELS[model], f"{b['epoch_time_median']:.2f} s", f"{a:.2f} s",
                     f"{a / b['epoch_time_median']:.2f}", _duration(epoch),
                     _duration(250 * epoch)]  # fmt: skip
            out.append("| " + " | ".join(cells) + " |")
        return "\n".join(out) + "\n"
    time = {(r["commit"], r["library"], r["model"], r["dtype"]): r["epoch_time_median"]
            for r in runs}  # fmt: skip
    threads = {r["commit"]: r.get("n_jobs") or 1 for r in runs if r["library"] == "skbnn"}
    torch = next(r["threads"] for r in runs if r["library"] == "torch")
    head = ["model"]
    for c in commits:
        head.append(f"skbnn, float64, {threads[c]} " + ("threads" if threads[c] > 1 else "core")
                    + f" ({c})")  # fmt: skip
    head += [f"PyTorch, {d}, {torch} threads" for d in ("float64", "float32")]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model in MODELS:
        cells = [LABELS[model]]
        for c in commits:
            sk = time[c, "skbnn", model, "float64"]
            cells.append(f"{sk:.3g} s: ratio {sk / time[c, 'torch', model, 'float64']:.2f}")
        cells += [f"{time[commits[0], 'torch', model, d]:.3g} s" for d in ("float64", "float32")]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60_000, help="the first ROWS images")
    parser.add_argument("--repeats", type=int, default=3, help="timed epochs per line")
    parser.add_argument("--threads", type=int, default=2, help="torch's intra-op threads")
    parser.add_argument("--torch-python", default=sys.executable,
                        help="the Python that has torch (default: this one)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=1,
                        help="epochs per timed fit (skbnn's lines; the epoch time is the "
                             "fit's training time over them)")  # fmt: skip
    parser.add_argument("--learning-rate", choices=("constant", "adaptive"), default="constant",
                        help="skbnn's schedule (adaptive: the engine's default)")  # fmt: skip
    parser.add_argument("--n-jobs", type=int, default=2,
                        help="skbnn's n_jobs (2: its helper thread takes half of each "
                             "wide product)")  # fmt: skip
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/mnist")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument(
        "--models",
        nargs="+",
        choices=MODELS + LBBNN_MODELS,
        default=list(MODELS),
        help="skbnn's models (default: the peer's)",
    )
    parser.add_argument("--no-torch", action="store_true", help="skbnn's lines only")
    parser.add_argument("--report", default=None, metavar="FILE",
                        help="print the --table of this results file (no fit)")  # fmt: skip
    parser.add_argument("--table", choices=("torch", "steps", "threads", "runs"),
                        default="torch",
                        help="--report's table: against PyTorch, before and after, 1 thread "
                             "against 2, or a column per commit")  # fmt: skip
    parser.add_argument("--commits", nargs="+", default=[], help="--report's runs")
    args = parser.parse_args()
    if args.report:
        print(report(args.report, args.table, *args.commits), end="")
        return
    emit = emitter(args.out)
    info = provenance("mnist_epoch.py", None)
    X, y = load_mnist(args.data_dir)[:2]
    X, y = X[: args.rows], y[: args.rows]
    lines = run_skbnn(args, X, y)
    for line in lines:
        emit({**line, **info})
    del X, y
    if args.no_torch:
        return
    torch_lines = run_torch(args)
    for line in torch_lines:
        emit({**line, **info, "torch_python": args.torch_python})
    emit({**ratios(lines + torch_lines), "rows": args.rows, "threads": args.threads, **info})


if __name__ == "__main__":
    main()
