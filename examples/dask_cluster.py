"""
An architecture search on a Dask cluster.
=========================================

Twenty candidate networks for scikit-learn's diabetes data (ten layer shapes, each with
ReLU and tanh units) are compared by ``GridSearchCV`` under
``joblib.parallel_config(backend="dask")``, which sends the fits to the workers of a
``distributed`` cluster. With ``--method laplace`` (the default) each candidate is fitted
once on all rows and scored by its model evidence (``evidence_scorer``); with
``--method nuts`` it is sampled on each of 3 folds and scored by the held-out log
predictive density (``log_predictive_scorer``), 60 fits. Each fit depends on its data and
``random_state`` only, so the scores are those of a local run on the same CPU type.

By default a ``LocalCluster`` of ``--workers`` worker processes (one thread each) on this
machine stands in for a cluster. On a real one, start a scheduler and workers, with
skbnn of the same version installed on every machine and ``NUMBA_CACHE_DIR`` pointing at
one shared folder (doc/dask.md says why)::

    dask scheduler                                  # on one machine: tcp://host:8786
    dask worker tcp://host:8786 --nthreads 1        # on each worker machine, once per core

then pass the scheduler's address; the same code runs there::

    python examples/dask_cluster.py                               # LocalCluster, 2 workers
    python examples/dask_cluster.py --workers 1                   # 1 worker (see below)
    python examples/dask_cluster.py --scheduler tcp://host:8786   # a real cluster

Prints the best parameters, then one JSON line: the wall time of the search
(``search_s``; the cluster's start, ``cluster_s``, and importing skbnn on the workers,
``import_s``, apart), the CPU seconds it took on the workers and in this process, and the
number of tasks the workers ran. ``--json FILE`` also appends the line to a file. On a
cluster of one thread joblib does not use the cluster: it runs the fits one after the
other in this process (``tasks_on_workers`` is 0), which is what one worker would do.
doc/dask.md has the timings on 1 and 2 workers.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import joblib
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPRegressor
from skbnn.methods import NUTS, Laplace
from skbnn.model_selection import evidence_scorer, log_predictive_scorer

SHAPES = [(2,), (4,), (8,), (16,), (32,), (4, 4), (8, 8), (16, 16), (8, 8, 8), (16, 16, 16)]
GRID = {
    "bayesianmlpregressor__hidden_layer_sizes": SHAPES,
    "bayesianmlpregressor__activation": ["relu", "tanh"],
}


def search(method: str, quick: bool, n_rows: int) -> GridSearchCV:
    """The 20-candidate search, unfitted."""
    if method == "laplace":
        method_ = Laplace(max_iter=20, max_prior_updates=2) if quick else Laplace()
        # the evidence is of the rows a candidate was fitted on: one split, all rows
        every_row = np.arange(n_rows)
        cv, scoring = [(every_row, every_row)], evidence_scorer
    else:
        method_ = NUTS(n_chains=2, n_warmup=20 if quick else 200)
        cv, scoring = KFold(3, shuffle=True, random_state=0), log_predictive_scorer
    # n_jobs=1: inside a task on a worker, n_jobs=None would mean every core of the
    # cluster (joblib runs the task under the same dask context), so a fit would start as
    # many threads as the cluster has cores; one thread per fit matches one per worker
    model = BayesianMLPRegressor(
        method=method_, n_samples=20 if quick else 200, random_state=0, n_jobs=1
    )
    # refit=False: only the search's fits, all on the cluster, are timed (refitting the best
    # candidate would be one more fit, in this process; best_params_ is there without it)
    pipe = make_pipeline(StandardScaler(), model)
    return GridSearchCV(pipe, GRID, cv=cv, scoring=scoring, refit=False)


def import_skbnn() -> None:
    """Import skbnn (with numba, scikit-learn) in this process: run on every worker."""
    import skbnn  # noqa: F401


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument(
        "--scheduler", metavar="ADDRESS",
        help="a running scheduler, such as tcp://host:8786; default: start a LocalCluster",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=int, default=2,
        help="worker processes of the LocalCluster, one thread each (default 2)",
    )  # fmt: skip
    parser.add_argument("--method", choices=["laplace", "nuts"], default="laplace")
    parser.add_argument("--quick", action="store_true", help="tiny fits on 100 rows, for the tests")
    parser.add_argument("--json", metavar="FILE", help="also append the JSON line to FILE")
    args = parser.parse_args()

    import distributed  # the dask extra: pip install "skbnn[dask]"

    X, y = load_diabetes(return_X_y=True)
    if args.quick:
        X, y = X[:100], y[:100]
    load = os.getloadavg()[0]  # the machine's other work, before this run adds its own
    start = time.perf_counter()
    if args.scheduler is None:
        cluster = distributed.LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = distributed.Client(cluster)
    else:
        cluster, client = None, distributed.Client(args.scheduler)
    try:
        workers = client.scheduler_info()["workers"]
        cluster_s = time.perf_counter() - start
        # a new worker imports skbnn with its first task, 2-3 s: done before the clock
        # starts, as on a cluster that is already running
        start = time.perf_counter()
        client.run(import_skbnn)
        import_s = time.perf_counter() - start
        grid_search = search(args.method, args.quick, len(y))
        workers_cpu = client.run(time.process_time)
        client_cpu = time.process_time()
        start = time.perf_counter()
        with (
            joblib.parallel_config(backend="dask"),
            warnings.catch_warnings(),
            distributed.get_task_stream(client) as stream,
        ):
            # Some candidates' MAP training stops short of a mode and Laplace says so, once
            # per fit, in the worker's log. Silenced here, where only the timing matters: a
            # filter set in this process travels with every task (scikit-learn's Parallel
            # carries it), while the warnings themselves stay on the workers
            warnings.simplefilter("ignore", ConvergenceWarning)
            grid_search.fit(X, y)
        search_s = time.perf_counter() - start
        client_cpu = time.process_time() - client_cpu
        # CPU seconds beside wall seconds: on a shared machine the wall time also measures
        # the other work, the CPU time only this search's
        workers_cpu = sum(t - workers_cpu[w] for w, t in client.run(time.process_time).items())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

    results = grid_search.cv_results_
    n_workers = f"{len(workers)} worker" + "s" * (len(workers) != 1)
    print(f"{len(results['params'])} candidates on {n_workers}, {args.method}")
    print("best parameters:", grid_search.best_params_)
    print(f"best score: {grid_search.best_score_:.3f}")
    if not stream.data:
        # joblib's dask backend counts the cluster's threads, and for one thread joblib
        # runs the calls itself, one after the other, here
        print("(the cluster has one thread, so joblib ran every fit in this process)")
    record = {
        "example": "dask_cluster",
        "method": args.method,
        "quick": args.quick,
        "scheduler": args.scheduler or "LocalCluster",
        "workers": len(workers),
        "threads": sum(w["nthreads"] for w in workers.values()),
        "n_candidates": len(results["params"]),
        "n_fits": len(results["params"]) * grid_search.n_splits_,
        "cluster_s": round(cluster_s, 2),
        "import_s": round(import_s, 2),
        "search_s": round(search_s, 2),
        # joblib runs everything in this process when the cluster has a single thread
        "tasks_on_workers": len(stream.data),
        "workers_cpu_s": round(workers_cpu, 2),
        "client_cpu_s": round(client_cpu, 2),
        "load_1min": round(load, 2),
        "best_params": {k.split("__")[-1]: v for k, v in grid_search.best_params_.items()},
    }
    line = json.dumps(record)
    print(line)
    if args.json:
        with open(args.json, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
