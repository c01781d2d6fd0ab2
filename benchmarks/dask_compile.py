"""What the numba kernels cost a ``distributed`` worker: compiled, or loaded from a cache.

Each scenario starts a new ``LocalCluster`` of ``--workers`` worker processes (one thread
each) and fits, on every worker in turn or on all at once, the regressor with each method
of ``--methods`` (small settings: compilation does not depend on them). Every fit is the
first of its method in that worker process, so its ``diagnostics_["compile_time"]`` is what
that worker paid to compile or load the method's kernels. Scenarios:

* ``warm``: the workers use the cache every process on this machine uses (beside the
  package, or ``NUMBA_CACHE_DIR`` if set), already filled: a worker loads.
* ``cold_together``: the workers' ``NUMBA_CACHE_DIR`` is a new empty folder and they fit at
  the same moment: each compiles everything itself, as when every worker of a cluster has
  a cache of its own (or none).
* ``cold_shared``: a new empty folder shared by the workers, which fit one after the
  other: the first compiles and saves, the next ones load what it saved. This is the
  shared ``NUMBA_CACHE_DIR`` doc/dask.md recommends.

Each fit prints a JSON line (scenario, worker, method, ``compile_time_s``, the fit's wall
time ``fit_s``, ``import_s``: importing skbnn in the worker for its first task, and the
1-minute load average before the scenario). Run nothing else meanwhile::

    python benchmarks/dask_compile.py --out     # appends to results/dask_compile.jsonl
    python benchmarks/dask_compile.py --report benchmarks/results/dask_compile.jsonl

``--report FILE`` prints doc/dask.md's first table, ``--report FILE --cluster`` its second,
of ``examples/dask_cluster.py``'s JSON lines (``results/dask_cluster.jsonl``: the runs of
the last code they name, in order). The first: per scenario (its last run) each worker's
``compile_time`` of NUTS and of Laplace after it, sorted where the workers fit at once and
in their order where one followed the other, with Laplace's whole fit where compiling made
it slow, and the load before each scenario.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _uci import emitter, machine, read_results  # noqa: E402

#: Each method's class in skbnn.methods and its small settings.
SETTINGS = {
    "nuts": ("NUTS", {"n_chains": 2, "n_warmup": 50}),
    "laplace": ("Laplace", {"max_iter": 50}),
    "smc": ("SMC", {"n_mcmc_steps": 2}),
}


def first_fit(method: str) -> dict:
    """Fit the regressor with ``method`` in this worker; what it cost (runs on a worker)."""
    import warnings

    start = time.perf_counter()
    import numba
    from sklearn.datasets import load_diabetes
    from sklearn.preprocessing import StandardScaler

    import skbnn.methods
    from skbnn import BayesianMLPRegressor

    import_s = time.perf_counter() - start
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)[:100]
    name, kwargs = SETTINGS[method]
    est = BayesianMLPRegressor(
        (10,), method=getattr(skbnn.methods, name)(**kwargs), n_samples=50, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short runs warn that they did not converge
        start = time.perf_counter()
        est.fit(X, y[:100])
    return {
        "pid": os.getpid(),
        "cache_dir": numba.config.CACHE_DIR or "beside the package",
        "import_s": round(import_s, 3),
        "fit_s": round(time.perf_counter() - start, 3),
        "compile_time_s": round(est.diagnostics_["compile_time"], 3),
    }


def scenario(name: str, n_workers: int, methods: list[str], emit) -> None:
    import distributed

    env = {}
    if name != "warm":
        env["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="skbnn-dask-compile-")
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with (
        distributed.LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            env=env,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.wait_for_workers(n_workers)
        cluster_s = time.perf_counter() - start
        workers = sorted(client.scheduler_info()["workers"])
        for method in methods:
            if name == "cold_together":
                futures = [
                    client.submit(first_fit, method, workers=[w], pure=False) for w in workers
                ]
                results = client.gather(futures)
            else:  # one worker after the other
                results = [
                    client.submit(first_fit, method, workers=[w], pure=False).result()
                    for w in workers
                ]
            for i, result in enumerate(results):
                emit(
                    {
                        "scenario": name,
                        "worker": i,
                        "method": method,
                        **result,
                        "cluster_start_s": round(cluster_s, 3),
                        "load_1min": load,
                        **machine(),
                    }
                )


#: The report's rows.
SCENARIOS = {
    "warm": "warm: the install's cache, already filled",
    "cold_together": "empty, one per worker (both compile at once)",
    "cold_shared": "empty, shared, the workers one after the other",
}


def report_cluster(lines: list[dict]) -> str:
    """doc/dask.md's table of the architecture search's runs on the last code named."""
    runs = [r for r in lines if r["code"] == lines[-1]["code"]]
    out = ["| run | workers | load | wall time of the search | CPU, calling process "
           "| CPU, workers | tasks on the workers |", "|---" * 7 + "|"]  # fmt: skip
    for i, r in enumerate(runs, 1):
        out.append(f"| {i} | {r['workers']} | {r['load_1min']:.1f} | {r['search_s']:.1f} s | "
                   f"{r['client_cpu_s']:.1f} s | {r['workers_cpu_s']:.1f} s | "
                   f"{r['tasks_on_workers']} |")  # fmt: skip
    return "\n".join(out) + "\n"


def report(path, part: str = "compile") -> str:
    """doc/dask.md's table of a results file (``part="cluster"``: :func:`report_cluster`)."""
    lines = read_results(path)
    if part == "cluster":
        return report_cluster(lines)
    out = ["| cache | load before | NUTS, first fit per worker | Laplace, after NUTS |",
           "|---|---|---|---|"]  # fmt: skip
    for name, label in SCENARIOS.items():
        runs = [r for r in lines if r["scenario"] == name]
        if not runs:
            continue
        # the last run of the scenario: its lines share one cluster start
        runs = [r for r in runs if r["cluster_start_s"] == runs[-1]["cluster_start_s"]]
        cells = []
        for method in ("nuts", "laplace"):
            fits = sorted((r for r in runs if r["method"] == method), key=lambda r: r["worker"])
            if name != "cold_shared":
                fits.sort(key=lambda r: r["compile_time_s"])
            texts = []
            for r in fits:
                text = f"{r['compile_time_s']:.2f} s" if r["compile_time_s"] < 1 else (
                    f"{r['compile_time_s']:.1f} s")  # fmt: skip
                # a fit much longer than its compile time compiled more than it counts
                if method == "laplace" and r["fit_s"] > 2 * max(r["compile_time_s"], 0.5):
                    text += f" (fit {r['fit_s']:.1f} s)"
                texts.append(text)
            cells.append((", then " if name == "cold_shared" else ", ").join(texts))
        out.append(f"| {label} | {runs[0]['load_1min']:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--methods", nargs="+", default=["nuts", "laplace"], choices=SETTINGS)
    parser.add_argument(
        "--scenarios",
        nargs="+",
        default=["warm", "cold_together", "cold_shared"],
        choices=["warm", "cold_together", "cold_shared"],
    )
    parser.add_argument(
        "--out", nargs="?", const=str(HERE / "results" / "dask_compile.jsonl"), default=None,
        help="also append the JSON lines to this file (default: results/dask_compile.jsonl)",
    )  # fmt: skip
    parser.add_argument("--report", default=None, help="print the table of a results file")
    parser.add_argument("--cluster", action="store_true",
                        help="--report: the file is examples/dask_cluster.py's")  # fmt: skip
    args = parser.parse_args()
    if args.report:
        print(report(args.report, "cluster" if args.cluster else "compile"), end="")
        return
    emit = emitter(args.out)
    for name in args.scenarios:
        scenario(name, args.workers, args.methods, emit)


if __name__ == "__main__":
    main()
