"""Small helpers shared across modules."""

from __future__ import annotations

import numbers
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from functools import wraps

import joblib
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


def thread_map(
    fn, items, n_jobs: int, interruptible: bool = False, on_interrupt=None, poll=None
) -> list:
    """``[fn(item) for item in items]``, up to ``n_jobs`` at a time on :func:`shared_pool`.

    With ``n_jobs == 1`` (or one item) it runs in the calling thread, unless
    ``interruptible`` and the caller is the main thread. Results come back in the order of
    ``items``; the first exception is raised after all tasks finished.

    A ``KeyboardInterrupt`` (Ctrl-C) reaches only the main thread, and only between Python
    bytecodes, never inside a compiled kernel. So when the main thread waits here, it
    sets the flag that :func:`check_interrupt` reads, calls ``on_interrupt()`` (which tells
    running kernels to stop at their next iteration), cancels the tasks not started, waits
    for the running ones, and raises the ``KeyboardInterrupt``: no thread of the pool
    works on after it. Long tasks pass ``interruptible=True`` so that even one of them
    runs on the pool, with the main thread free to hear Ctrl-C.

    ``poll()``, if given, is called by the waiting thread between its short waits (so a
    warning it raises points at the caller's line); an exception from it stops the tasks
    as Ctrl-C does, and is raised.
    """
    items = list(items)
    in_main = threading.current_thread() is threading.main_thread()
    if (n_jobs <= 1 or len(items) <= 1) and not (interruptible and in_main):
        return [fn(item) for item in items]
    pool = shared_pool()
    gate = threading.Semaphore(max(1, int(n_jobs)))

    def run(item):
        with gate:
            if _interrupt.is_set():
                raise KeyboardInterrupt
            return fn(item)

    futures = [pool.submit(run, item) for item in items]
    try:
        # in short waits: Ctrl-C interrupts a blocked wait only when the signal lands on
        # the main thread; a signal taken by another thread, or _thread.interrupt_main, is
        # seen when the main thread next runs bytecode
        while wait(futures, timeout=0.1).not_done:
            if poll is not None:
                poll()
    except BaseException as exc:
        # Ctrl-C stops every task on the pool; poll's own error only this call's
        ctrl_c = isinstance(exc, KeyboardInterrupt)
        if ctrl_c:
            _interrupt.set()
        try:
            if on_interrupt is not None:
                on_interrupt()
            for f in futures:
                f.cancel()
            wait(futures)
        finally:
            if ctrl_c:
                _interrupt.clear()
        raise
    return [f.result() for f in futures]


#: Set while the main thread stops the pool's tasks after a KeyboardInterrupt.
_interrupt = threading.Event()


def last_step(estimator, X):
    """The estimator that predicts, and ``X`` as it sees it: a Pipeline's last step and
    ``X`` through every step before it, or ``estimator`` and ``X`` unchanged."""
    if hasattr(estimator, "steps"):
        return estimator.steps[-1][1], estimator[:-1].transform(X)
    return estimator, X


def unchanged_on_failure(fit):
    """``fit`` that leaves the estimator as it was when it raises, also on Ctrl-C
    (``KeyboardInterrupt``): unfitted, or with its previous fit intact, so that it can be
    used, pickled or fitted again as if the call had not happened."""

    @wraps(fit)
    def wrapper(self, *args, **kwargs):
        # a fit rebinds its attributes and never changes a previous fit's objects in place
        # (warm_start continues from a copy of the chains), so a shallow copy suffices
        before = dict(self.__dict__)
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    return wrapper


def check_interrupt() -> None:
    """Raise ``KeyboardInterrupt`` while :func:`thread_map` stops the pool after Ctrl-C:
    loops that run on the pool call it between their steps."""
    if _interrupt.is_set():
        raise KeyboardInterrupt


def backend_elsewhere() -> bool:
    """Whether joblib's active backend (``joblib.parallel_config``) runs its tasks in other
    processes, such as ``"dask"`` or ``"loky"``, rather than the default threads.

    Independent units of a fit (MCMC chains, ensemble members) then go through joblib, so
    that a cluster's context spreads them over its workers; otherwise they run on
    :func:`shared_pool`, with no process start-up and no copies. A fit that is itself a
    task on a Dask worker (one candidate of a search) keeps its units on the worker's
    threads: the search already fills the cluster, and joblib's Dask backend, active again
    inside the task, would send every chain back through the scheduler.
    """
    from joblib.parallel import get_active_backend

    backend, _ = get_active_backend(prefer="threads")
    if getattr(backend, "supports_sharedmem", False):
        return False
    distributed = sys.modules.get("distributed")
    if distributed is not None:
        try:
            distributed.get_worker()
            return False
        except ValueError:
            pass
    return True


#: How far a recorded projection of the training X may move and still count as the same
#: data, relative to the sum of the absolute terms it adds up. A Pipeline's ``transform``
#: can differ from the ``fit_transform`` the estimator saw in the last bits (PCA's does, by
#: about 1e-14 of each value), which moves it by at most that fraction. Other data move it
#: by about ``1 / sqrt(X.size)`` of that sum, far above this for any X that fits in memory;
#: a single value must move by more than about 1e-9 of the sum of ``|X|`` to count.
_SAME_X_RTOL = 1e-9


def _canonical_y(y) -> np.ndarray:
    """``y`` as one array whatever container or label type it came in."""
    y = np.asarray(y)
    y = y.astype(np.float64) if y.dtype.kind in "biuf" else y.astype(str)
    return np.ascontiguousarray(y.reshape(len(y), -1))


def _projections(shape) -> tuple[np.ndarray, np.ndarray]:
    """Four fixed random row weightings and one column weighting for an X of ``shape``."""
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, shape[0])), rng.standard_normal(shape[1])


def data_fingerprint(X, y) -> dict:
    """A small record of validated training data ``(X, y)``, to recognize them later.

    ``y`` is kept as the hash of its values and compared exactly. ``X`` is kept as its
    shape and four random projections ``r_j @ X @ v``, compared with a tolerance (see
    ``_SAME_X_RTOL``), so that a Pipeline's ``transform`` of the training rows is
    recognized although it may differ in the last bits from its ``fit_transform``.
    """
    X = np.asarray(X, dtype=np.float64)
    r, v = _projections(X.shape)
    return {
        "shape": X.shape,
        "projections": r @ (X @ v),
        "scale": np.abs(r) @ (np.abs(X) @ np.abs(v)),
        "y": joblib.hash(_canonical_y(y)),
    }


def data_difference(fingerprint: dict, X, y) -> str | None:
    """``None`` if ``(X, y)`` are the data of ``fingerprint``, else what differs."""
    X = np.asarray(X, dtype=np.float64)
    if X.shape != fingerprint["shape"]:
        return f"X has shape {X.shape}, the training data {fingerprint['shape']}"
    r, v = _projections(X.shape)
    moved = np.abs(r @ (X @ v) - fingerprint["projections"])
    if np.any(~(moved <= _SAME_X_RTOL * fingerprint["scale"])):
        return "X has the shape of the training data but other values"
    if joblib.hash(_canonical_y(y)) != fingerprint["y"]:
        return "X is the training data but y is not"
    return None
