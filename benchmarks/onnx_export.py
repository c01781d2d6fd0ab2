"""Size and latency of an ONNX export (``skbnn.onnx.to_onnx``) of a 1,000-draw NUTS posterior.

Fits the quickstart's model on diabetes (the same split: 75 % for training, seed 0), a
``StandardScaler`` then a 10-10-1 ``BayesianMLPRegressor`` sampled by NUTS, 4 chains of 250
kept draws, and exports the whole Pipeline. Then, per graph float type (``--dtypes``):

* ``model_bytes``: the serialized ONNX model (the scaler, the 1,000 draws' weights);
* ``max_rel_diff_mean`` / ``max_rel_diff_std``: onnxruntime's ``mean`` and ``std`` on the
  test rows against ``predict(X, return_std=True)``;
* ``latency_ms``: the median wall time of one call, for a batch of 1 row and of 1,000 rows
  (test rows drawn with replacement), of onnxruntime's ``session.run`` and of skbnn's own
  ``predict(X, return_std=True)`` through the Pipeline, each on ``--threads`` threads
  (onnxruntime's ``intra_op_num_threads``, the estimator's ``n_jobs``), after a warm-up
  call; ``--repeats`` calls for 1 row, a tenth as many for 1,000. ``load_1min`` is the
  machine's load average before the run: the timings are only as quiet as it was.

Prints one JSON line per float type; ``--out`` appends them to
``benchmarks/results/onnx_export.jsonl``::

    python benchmarks/onnx_export.py --out
    python benchmarks/onnx_export.py --report benchmarks/results/onnx_export.jsonl

``--report FILE`` prints doc/onnx.md's table: the last line of each float type, and the
run's CPU and load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, provenance, read_results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "onnx_export.jsonl"
BATCHES = (1, 1000)


def _median_ms(call, repeats: int) -> float:
    call()  # warm-up: first-call allocations, kernels loaded
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def _fit(n_chains: int, draws: int, threads: int):
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from skbnn import NUTS, BayesianMLPRegressor
    from skbnn.pipeline import make_pipeline

    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.25, random_state=0)
    reg = BayesianMLPRegressor((10,), method=NUTS(n_chains=n_chains), n_samples=draws,
                               random_state=0, n_jobs=threads)  # fmt: skip
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make_pipeline(StandardScaler(), reg).fit(X_train, y_train)
    return model, X_test, time.perf_counter() - start


def _ms(value: float) -> str:
    return (
        f"{value:.2f} ms" if value < 1 else f"{value:.1f} ms" if value < 10 else f"{value:.0f} ms"
    )


def report(path) -> str:
    """doc/onnx.md's table of a results file."""
    lines = read_results(path)
    last = list({r["dtype"]: r for r in lines}.values())
    out = ["| graph | model size | max rel. diff. mean, std | onnxruntime, 1 row | skbnn, 1 row "
           "| onnxruntime, 1,000 rows | skbnn, 1,000 rows |", "|---" * 7 + "|"]  # fmt: skip
    for r in last:
        times = [_ms(r[f"{who}_ms_{n}_rows"]) for n in BATCHES for who in ("onnx", "skbnn")]
        cells = [r["dtype"], f"{r['model_bytes']:,} bytes",
                 f"{r['max_rel_diff_mean']:.1e}, {r['max_rel_diff_std']:.1e}", *times]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    runs = {(r["cores"], r["cpu"], r["load_1min"], r["commit"]) for r in last}
    for cores, cpu, load, commit in sorted(runs):
        out.append(f"\n{cores} cores, {cpu}, load average {load} before the run, at {commit}.")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    parser.add_argument("--out", action="store_true", help=f"append to {RESULTS}")
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return

    import onnxruntime as ort

    from skbnn.onnx import to_onnx

    emit = emitter(str(RESULTS) if args.out else None)
    load = os.getloadavg()[0]
    model, X_test, fit_s = _fit(args.chains, args.draws, args.threads)
    rng = np.random.default_rng(0)
    batches = {n: X_test[rng.integers(0, len(X_test), n)] for n in BATCHES}
    expected_mean, expected_std = model.predict(X_test, return_std=True)
    skbnn_ms = {}
    for n, X in batches.items():
        repeats = args.repeats if n == 1 else max(1, args.repeats // 10)
        skbnn_ms[n] = _median_ms(lambda X=X: model.predict(X, return_std=True), repeats)
    for name in args.dtypes:
        dtype = np.dtype(name)
        start = time.perf_counter()
        onx = to_onnx(model, X_test, dtype=dtype)
        export_s = time.perf_counter() - start
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(onx.SerializeToString(), options)
        mean, std = session.run(["mean", "std"], {"X": X_test.astype(dtype)})
        record = {
            "benchmark": "onnx_export",
            "dataset": "diabetes",
            "network": "10-10-1",
            "method": "nuts",
            "n_chains": args.chains,
            "n_draws": args.draws,
            "dtype": name,
            "threads": args.threads,
            "load_1min": round(load, 2),
            "fit_s": round(fit_s, 2),
            "export_s": round(export_s, 3),
            "model_bytes": len(onx.SerializeToString()),
            "weights_bytes": args.draws * model[-1].predictive_.layout.n_weights * dtype.itemsize,
            "max_rel_diff_mean": float(np.max(np.abs(mean[:, 0] / expected_mean - 1))),
            "max_rel_diff_std": float(np.max(np.abs(std[:, 0] / expected_std - 1))),
        }
        for n, X in batches.items():
            repeats = args.repeats if n == 1 else max(1, args.repeats // 10)
            feed = {"X": X.astype(dtype)}
            onnx_ms = _median_ms(lambda f=feed, s=session: s.run(None, f), repeats)
            record[f"onnx_ms_{n}_rows"] = round(onnx_ms, 4)
            record[f"skbnn_ms_{n}_rows"] = round(skbnn_ms[n], 4)
        emit({**record, **provenance("onnx_export.py", argv)})


if __name__ == "__main__":
    main()
