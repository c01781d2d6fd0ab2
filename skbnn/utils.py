"""Small helpers shared across modules."""

from __future__ import annotations

import numbers
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np


def seed_sequence(random_state) -> np.random.SeedSequence:
    """A ``SeedSequence`` determined by an sklearn-style ``random_state``.

    ``None`` gives fresh OS entropy, an int seeds directly, and a ``RandomState`` or
    ``Generator`` instance is consumed for 128 bits so repeated fits with the same instance
    differ, as sklearn users expect.
    """
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, numbers.Integral):
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(random_state.randint(0, 2**32, size=4, dtype=np.uint64))
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(random_state.integers(0, 2**32, size=4, dtype=np.uint64))
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    raise ValueError(f"{random_state!r} cannot be used to seed a random generator")


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def shared_pool() -> ThreadPoolExecutor:
    """The one thread pool that runs chains, particles, members and predictions.

    Created on first use with one thread per core and kept for the life of the process,
    so a fit does not pay for starting threads and nested parts of skbnn never multiply
    the number of threads. The kernels release the GIL, so threads run in parallel.
    Callers bound their own concurrency by how many tasks they submit (``n_jobs``);
    tasks never wait on other tasks of the pool, so it cannot deadlock.
    """
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=max(2, os.cpu_count() or 1), thread_name_prefix="skbnn"
            )
        return _pool


def thread_map(fn, items, n_jobs: int) -> list:
    """``[fn(item) for item in items]``, up to ``n_jobs`` at a time on :func:`shared_pool`.

    With ``n_jobs == 1`` (or one item) it runs in the calling thread. Results come back in
    the order of ``items``; the first exception is raised after all tasks finished.
    """
    items = list(items)
    if n_jobs <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    pool = shared_pool()
    gate = threading.Semaphore(int(n_jobs))

    def run(item):
        with gate:
            return fn(item)

    futures = [pool.submit(run, item) for item in items]
    wait(futures)
    return [f.result() for f in futures]


_compile_lock = threading.Lock()


def compile_once(kernels, warm) -> float:
    """Compile (or load from numba's cache) ``kernels`` once per process.

    ``warm`` calls every kernel on a tiny problem; it runs under a lock unless every kernel
    already has a signature. Returns the seconds it took (0 when nothing was compiled), for
    ``diagnostics_["compile_time"]``.
    """
    with _compile_lock:
        if all(k.signatures for k in kernels):
            return 0.0
        start = time.perf_counter()
        warm()
        return time.perf_counter() - start
