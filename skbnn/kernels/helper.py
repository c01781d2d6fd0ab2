"""The team's helper thread (:mod:`skbnn.kernels.team`): the loop that runs the tasks the
kernels post, and the context in which it runs (:func:`team`)."""

from __future__ import annotations

import contextlib
import threading
import time

from numba.core import types

from ._compile import DISABLED, CompiledKernel, compiled_kernel, njit
from .gemm import gemm_task
from .optim import adam_task, gather_task
from .team import (
    ADAM,
    CTL,
    GATHER,
    GEMM,
    IDLE,
    PREPARE,
    call_task,
    done,
    next_task,
    store,
    task,
    task_address,
    team_close,
)


@njit(cache=True, nogil=True, error_model="numpy")
def serve() -> int:
    """The team's helper: run each posted task until the team
    closes. Returns the number of tasks it ran.

    It opens the slot itself (``OFF`` to ``IDLE``): until it runs, without the GIL, no
    kernel can post a task it would wait for, whether or not that kernel holds the GIL."""
    store(0, IDLE)
    served = 0
    while next_task():
        kind, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12 = task()
        result = 0
        if kind == GEMM:
            gemm_task(x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12)
        elif kind == GATHER:
            gather_task(x0, x1, x2, x3, x4, x5, x6)
        elif kind == ADAM:
            adam_task(x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11)
        elif kind >= PREPARE:
            # through the registered kernel's address: this loop, which every method with
            # a team compiles, links no copy of LBBNN's passes
            result = call_task(task_address(kind), x0, x1, x2, x3)
        done(result)
        served += 1
    return served


def serve_kernel() -> CompiledKernel:
    """:func:`serve` as a :class:`~skbnn.kernels._compile.CompiledKernel`: a cold fit's
    warm-up hands it to its helper process (:func:`~skbnn.kernels._compile.compile_aside`),
    and the team's thread loads it from the cache rather than compile it."""
    return compiled_kernel(types.int64(), (__name__, "serve", None))


_lock = threading.Lock()
_members = 0
_helper: threading.Thread | None = None
#: Tasks the helpers of this process have run (tests read it).
served = [0]


@contextlib.contextmanager
def team(enabled: bool = True):
    """A helper thread (:mod:`skbnn.kernels.team`) that takes half of every wide product,
    gather and Adam step while the context lasts.

    The helper runs :func:`serve`. Nested and concurrent teams share one helper, which
    stops when the last context ends. ``enabled=False`` (or ``NUMBA_DISABLE_JIT``) runs
    without one: the same bits.
    """
    global _members, _helper
    if not enabled or DISABLED:
        yield
        return
    with _lock:
        _members += 1
        if _members == 1:

            def run():
                # waits for a helper process compiling it, if one is; the kernels compute
                # alone meanwhile
                serve_kernel().resolve()
                served[0] += serve()

            _helper = threading.Thread(target=run, name="skbnn-team", daemon=True)
            _helper.start()
            # the helper opens the slot once it runs; until then kernels compute alone
            while CTL[0] != IDLE:
                if not _helper.is_alive():
                    _members = 0
                    raise RuntimeError("skbnn's team helper thread ended before it started")
                time.sleep(1e-4)
    try:
        yield
    finally:
        with _lock:
            _members -= 1
            if _members == 0:
                team_close()
                _helper.join()
                _helper = None


class TailTeam:
    """A :func:`team` for a run of ``n_tasks`` tasks, ``n_jobs`` at a time, whenever a
    core would idle: from the start where the tasks are fewer than ``n_jobs``, else once
    none waits to start and fewer than ``n_jobs`` run, so that the cores the last tasks
    leave take half of their wide products (an ensemble of five members on two cores:
    the fifth trains alone). A task runs in :meth:`task`; the team ends with the
    context. The helper changes no result's bits.
    """

    def __init__(self, n_tasks: int, n_jobs: int):
        self._lock = threading.Lock()
        self._waiting = int(n_tasks)
        self._running = 0
        self._n_jobs = int(n_jobs)
        self._stack = contextlib.ExitStack()
        self._started = False

    @contextlib.contextmanager
    def task(self):
        """The context of one task."""
        with self._lock:
            self._waiting -= 1
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                if not self._started and self._waiting == 0 and 0 < self._running < self._n_jobs:
                    self._stack.enter_context(team())
                    self._started = True

    def __enter__(self) -> TailTeam:
        if 0 < self._waiting < self._n_jobs:
            self._stack.enter_context(team())
            self._started = True
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()
