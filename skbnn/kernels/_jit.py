"""``njit`` for the kernels: numba's, with its on-disk cache only where numba can write one.

numba caches a kernel beside its source (``skbnn/kernels/__pycache__``) or, where that
folder is not writable (a read-only install), in the user's cache folder
(``~/.cache/numba`` or ``$XDG_CACHE_HOME/numba``), or wherever ``NUMBA_CACHE_DIR`` says.
Where none of them is writable, ``njit(cache=True)`` raises at import. Here the kernels
then compile without the cache, after one warning: every new process compiles them again.

Processes that share a cache (test workers, ``cross_validate``'s worker processes, a
cluster's workers on one ``NUMBA_CACHE_DIR``) may compile the same kernel at once. numba
writes each file atomically, but a save reads the kernel's index, adds an entry and writes
the index and a data file: two processes saving two signatures of one kernel together can
lose an entry (a recompile later) or leave an entry naming the other signature's data (a
wrong function loaded). Here each save holds an exclusive lock on a file beside the index
of its folder (POSIX; elsewhere numba's own save runs unlocked).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import warnings
from pathlib import Path

import numba
from numba.core import types
from numba.core.caching import IndexDataCacheFile
from numba.core.registry import CPUDispatcher

from . import _numba_cache_dir

#: Whether the kernels use numba's on-disk cache (decided once, at import).
CACHE = _numba_cache_dir(Path(__file__).with_name("network.py")) is not None
if not CACHE:
    # imported here: skbnn.exceptions imports scikit-learn, which the process that compiles
    # the network kernel beside a fit (network.compile_aside) would otherwise load for
    # nothing (about 1.2 s of its start)
    from ..exceptions import CompilationCacheWarning

    warnings.warn(
        "numba cannot cache skbnn's compiled kernels (neither skbnn/kernels/__pycache__ nor "
        "the user cache folder is writable), so every new process compiles them again; set "
        "NUMBA_CACHE_DIR to a writable folder to keep them.",
        CompilationCacheWarning,
        stacklevel=2,
    )


@contextlib.contextmanager
def _exclusive(path: str):
    """An exclusive lock on ``path`` (created if missing) across processes; none on
    platforms without ``fcntl``."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class LockedIndexDataCacheFile(IndexDataCacheFile):
    """numba's index and data files of one kernel, saved under an exclusive lock, so the
    index's entries and the data files they name stay in step across processes."""

    def save(self, key, data):
        # one lock per folder: a save takes milliseconds, the compile before it is unlocked
        with _exclusive(os.path.join(self._cache_path, "skbnn-save.lock")):
            super().save(key, data)


#: Parameters whose constant values the kernels compile for: the activation, likelihood and
#: prior codes that :func:`skbnn.kernels.network.logp_grad_for` passes as constants, so that
#: the kernels below it compile only their branch.
LITERAL_PARAMETERS = frozenset({"act", "lik", "prior"})


def _compile_calls_unliteral(dispatcher) -> None:
    """Make calls from other kernels compile ``dispatcher`` for plain types only, except for
    the :data:`LITERAL_PARAMETERS`.

    numba types a constant argument (``f(x, 0)``) as a literal, and while it infers a
    caller's types it calls a kernel with each intermediate type it meets: every one
    compiled a specialization of its own, and of the whole tree below it, that the final
    program never used (``_dense`` for ``Literal[int](0)`` beside ``int64``). So the
    literals are dropped before compiling, except the codes that select a network's
    branches: those are constants throughout a specialized kernel, never intermediate.
    """
    get_call_template = dispatcher.get_call_template
    names = list(inspect.signature(dispatcher.py_func).parameters)
    keep = frozenset(i for i, name in enumerate(names) if name in LITERAL_PARAMETERS)

    def unliteral_call_template(args, kws):
        return get_call_template(
            tuple(a if i in keep else types.unliteral(a) for i, a in enumerate(args)),
            {k: v if k in LITERAL_PARAMETERS else types.unliteral(v) for k, v in kws.items()},
        )

    dispatcher.get_call_template = unliteral_call_template


class KernelOnlyDispatcher(CPUDispatcher):
    """The dispatcher of a kernel compiled with ``njit(from_python=False)``: other kernels
    call it, and a call from Python raises :class:`TypeError` (it has no entry point from
    Python; numba would jump to a null address)."""

    def __call__(self, *args, **kwargs):
        raise TypeError(
            f"{self.py_func.__module__}.{self.py_func.__qualname__} is compiled without an "
            "entry point from Python (njit(from_python=False)): call it from a kernel, "
            "or through skbnn.kernels._jit.call"
        )


def njit(*args, from_python: bool = True, by_address: bool = False, **kwargs):
    """:func:`numba.njit`, with ``cache=True`` dropped when numba cannot cache (:data:`CACHE`),
    the cache's saves locked across processes, and ``fastmath`` off unless given.

    ``from_python=False`` compiles a kernel that only other kernels call without the two
    wrappers numba adds to every compiled function, one that converts Python arguments and
    one with a C signature. A callee's wrappers are compiled, optimized and cached with it
    and never used: they took 0.9 s of the 6.3 s the tanh network kernel compiles in.
    Its dispatcher is a :class:`KernelOnlyDispatcher`. ``by_address=True`` keeps the C one,
    for a kernel that others call through its address
    (:class:`skbnn.kernels.network.CompiledKernel`).
    """
    if args and callable(args[0]):  # a bare @njit
        return njit(from_python=from_python, by_address=by_address, **kwargs)(args[0])
    if not CACHE:
        kwargs["cache"] = False
    if not from_python:
        kwargs["no_cpython_wrapper"] = True
        kwargs["no_cfunc_wrapper"] = not by_address
    # numba compiles a kernel that leaves fastmath unset with its first caller's flags and
    # caches that code for every later caller: weight_sum, first compiled by a caller
    # without fastmath, summed its rows one by one (4 % of a gradient) in one cache and
    # vectorized in another. Set, the flags are the kernel's own whoever compiles it first.
    kwargs.setdefault("fastmath", False)
    decorate = numba.njit(*args, **kwargs)

    def wrap(func):
        dispatcher = decorate(func)
        if not isinstance(dispatcher, CPUDispatcher):
            # NUMBA_DISABLE_JIT returns the function itself, and the functions that only
            # numba overloads implement would then do nothing, silently
            raise RuntimeError(
                "skbnn's kernels need numba's compiler: NUMBA_DISABLE_JIT=1 is not supported"
            )
        if not from_python:
            # same state, a __call__ that refuses
            dispatcher.__class__ = KernelOnlyDispatcher
        _compile_calls_unliteral(dispatcher)
        cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
        if type(cache_file) is IndexDataCacheFile:
            # same state, one method more: numba keeps building the file object itself
            cache_file.__class__ = LockedIndexDataCacheFile
        return dispatcher

    return wrap


@njit
def _trampoline(kernel, args):
    return kernel(*args)


def call(kernel, *args):
    """``kernel(*args)`` from Python through a compiled caller, for a kernel compiled with
    ``njit(from_python=False)`` (tests and exploration; each kernel and set of argument
    types compiles a caller of its own, not cached)."""
    return _trampoline(kernel, args)
