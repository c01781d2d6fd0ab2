"""Compilation of the kernels, in one place.

* :func:`njit`: numba's, with its on-disk cache only where numba can write one, the cache's
  saves locked across processes, and cached kernels checked against every kernel source.
* :class:`CompiledKernel`: a kernel handed to other kernels by address, and
  :func:`compile_aside`, which compiles such kernels in a helper process while this one
  compiles their callers.
* The flags and the overload options the kernels compile with.
* :func:`compile_once` and :func:`compile_for`, through which a method's first fit compiles
  (or loads from the cache) the kernels it runs.

numba caches a kernel beside its source (``skbnn/kernels/__pycache__``) or, where that
folder is not writable (a read-only install), in the user's cache folder
(``~/.cache/numba`` or ``$XDG_CACHE_HOME/numba``), or wherever ``NUMBA_CACHE_DIR`` says.
Where none of them is writable, ``njit(cache=True)`` raises at import. Here the kernels
then compile without the cache, after one warning: every new process compiles them again.

numba checks a cached kernel only against its own module's source file, but a kernel
inlines functions of other modules (every sampler kernel calls
:func:`skbnn.kernels.density.logp_grad`): after a change to another module only, the cached
kernel would keep running the old code, silently wrong. So each kernel's cache index here
also records a digest of all the kernel modules' sources, and an index written for other
sources reads as empty: the kernel compiles again and overwrites it.

Processes that share a cache (test workers, ``cross_validate``'s worker processes, a
cluster's workers on one ``NUMBA_CACHE_DIR``) may compile the same kernel at once. numba
writes each file atomically, but a save reads the kernel's index, adds an entry and writes
the index and a data file: two processes saving two signatures of one kernel together can
lose an entry (a recompile later) or leave an entry naming the other signature's data (a
wrong function loaded). Here each save holds an exclusive lock on a file beside the index
of its folder (POSIX; elsewhere numba's own save runs unlocked).

With ``NUMBA_DISABLE_JIT=1`` the kernels run as plain Python, for stepping through them in
a debugger (slowly): :data:`DISABLED`.

This module reaches into numba's internals in five places, each where numba offers no
public way, and nowhere else in skbnn: the dispatcher class of kernels compiled without a
Python entry point (:class:`KernelOnlyDispatcher`), the cache index's file object (for the
lock and the sources' digest), the cache's index key (to tell, without compiling, whether
a helper process is needed), the cache's locators (where numba caches, if anywhere) and the
code generator's CPU features (:func:`target_features`).
The numba versions they are tested with are pinned in ``pyproject.toml``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import hashlib
import inspect
import os
import pickle
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numba
import numba.experimental.function_type  # noqa: F401  (registers numba's typing of the addresses)
import numpy as np
from numba.core import types
from numba.core.caching import IndexDataCacheFile
from numba.core.registry import CPUDispatcher
from numba.core.types.function_type import WrapperAddressProtocol

#: Whether ``NUMBA_DISABLE_JIT`` is set: the kernels are then plain Python functions.
DISABLED = bool(numba.config.DISABLE_JIT)


def _numba_cache_dir(source: Path) -> Path | None:
    """The folder numba caches a kernel of ``source`` in: the first of its locators that
    finds a writable one, as numba picks; ``None`` where none does."""
    from numba.core import caching

    def probe():  # a function for the locators to look at; never compiled
        return None

    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in numba 0.60
    for locator_class in impl._locator_classes:
        try:
            locator = locator_class.from_function(probe, str(source))
        except Exception:  # locators for other sources (IPython cells, zip files) may fail
            continue
        if locator is not None:
            return Path(locator.get_cache_path()).resolve()
    return None


#: Whether the kernels use numba's on-disk cache (decided once, at import).
CACHE = not DISABLED and _numba_cache_dir(Path(__file__)) is not None
if not CACHE and not DISABLED:
    # imported here: skbnn.exceptions imports scikit-learn, which the process that compiles
    # the network kernel beside a fit (compile_aside) would otherwise load for nothing
    from ..exceptions import CompilationCacheWarning

    warnings.warn(
        "numba cannot cache skbnn's compiled kernels (neither skbnn/kernels/__pycache__ nor "
        "the user cache folder is writable), so every new process compiles them again; set "
        "NUMBA_CACHE_DIR to a writable folder to keep them.",
        CompilationCacheWarning,
        stacklevel=2,
    )


def sources_digest(here: Path | None = None) -> str:
    """A digest of the kernel modules' sources (``here/*.py``, by default this package's),
    recorded in every cached kernel's index: a kernel cached for other sources is stale."""
    here = Path(__file__).resolve().parent if here is None else here
    digest = hashlib.sha256()
    for source in sorted(here.glob("*.py")):
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


_SOURCES = sources_digest()


def stamp_sources(cache_file: IndexDataCacheFile, digest: str = _SOURCES) -> None:
    """Make ``cache_file``'s index version name the kernel sources' ``digest`` too: numba
    reads an index only if its version matches, before it unpickles anything else."""
    cache_file._version = (numba.__version__, digest)


def target_features() -> frozenset[str]:
    """The CPU features numba compiles for (``+avx2``, ``-avx512f``, ...): the host's, or
    those ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` name. numba keys its cache by them
    too, so a cached kernel was compiled for the same."""
    from numba.core.registry import cpu_target

    return frozenset(cpu_target.target_context.codegen().magic_tuple()[2].split(","))


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
#: prior codes that :func:`skbnn.kernels.density.logp_grad_for` passes as constants, so that
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
            "or through skbnn.kernels._compile.call"
        )


def njit(*args, from_python: bool = True, by_address: bool = False, **kwargs):
    """:func:`numba.njit`, with ``cache=True`` dropped when numba cannot cache (:data:`CACHE`),
    the cache's saves locked across processes and its entries tied to the kernel sources'
    digest, and ``fastmath`` off unless given.

    ``from_python=False`` compiles a kernel that only other kernels call without the two
    wrappers numba adds to every compiled function, one that converts Python arguments and
    one with a C signature. A callee's wrappers are compiled, optimized and cached with it
    and never used (about a seventh of the network kernel's compile time). Its dispatcher
    is a :class:`KernelOnlyDispatcher`. ``by_address=True`` keeps the C one, for a kernel
    that others call through its address (:class:`CompiledKernel`).

    With :data:`DISABLED` (``NUMBA_DISABLE_JIT=1``) it returns the function itself.
    """
    if args and callable(args[0]):  # a bare @njit
        return njit(from_python=from_python, by_address=by_address, **kwargs)(args[0])
    if DISABLED:
        return _in_python
    if not CACHE:
        kwargs["cache"] = False
    if not from_python:
        kwargs["no_cpython_wrapper"] = True
        kwargs["no_cfunc_wrapper"] = not by_address
    # numba compiles a kernel that leaves fastmath unset with its first caller's flags and
    # caches that code for every later caller: weight_sum, first compiled by a caller
    # without fastmath, summed its rows one by one in one cache and vectorized in another.
    # Set, the flags are the kernel's own whoever compiles it first.
    kwargs.setdefault("fastmath", False)
    decorate = numba.njit(*args, **kwargs)

    def wrap(func):
        dispatcher = decorate(func)
        if not from_python:
            # numba has no public way to refuse calls from Python: same state, a __call__
            # that refuses
            dispatcher.__class__ = KernelOnlyDispatcher
        _compile_calls_unliteral(dispatcher)
        cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
        if type(cache_file) is IndexDataCacheFile:
            # numba builds the file object itself and offers no hook: same state, a locked
            # save, and an index version that names every kernel source, not only the
            # kernel's own module (see the module's docstring). numba compares the version
            # before it unpickles the index, so an index written for other sources is never
            # unpickled: its entries may name types of modules that no longer exist.
            cache_file.__class__ = LockedIndexDataCacheFile
            stamp_sources(cache_file)
        return dispatcher

    return wrap


# reassoc lets LLVM vectorize the row reductions and contract fuses multiply-adds; neither
# assumes finite values, so a divergent trajectory still shows up as inf/NaN.
#
# Hot inner loops index per-row views (``x = src[i * n : (i + 1) * n]; x[t]``), never
# ``buf[base + t]``: numba wraps negative indices, and since LLVM cannot prove ``base + t``
# non-negative it turns such loops into gathers or leaves them scalar (several times slower).
_FM = {"reassoc", "contract"}


# The activation, likelihood and prior codes select branches. A kernel compiled by
# skbnn.kernels.density.logp_grad_for passes them as constants (literal types, see
# LITERAL_PARAMETERS), and the functions that branch on one are overloaded on its type:
# for a literal code numba types and compiles that branch's body only, for a run-time code
# every branch, as one function. (numba's own dead-branch pruning does not read literal
# arguments.)
_OVERLOAD = {"prefer_literal": True, "jit_options": {"nogil": True, "error_model": "numpy",
                                                     "fastmath": _FM}}  # fmt: skip


def _code(arg) -> int | None:
    """The value of a literal code argument's type, None for a run-time code."""
    value = getattr(arg, "literal_value", None)
    return value if isinstance(value, int) else None


def _dispatch(arg, variants: dict, default):
    """An overload's implementation: ``variants[code]`` (or ``default``) for a literal code
    ``arg``, else None (the caller then returns its run-time branching)."""
    code = _code(arg)
    if code is None:
        return None
    return variants.get(code, default)


def _in_python(func):
    # NUMBA_DISABLE_JIT: the function itself, with the little of a dispatcher that skbnn's
    # Python code asks for. It runs for any argument types, as if compiled for all: the
    # warm-ups that compile kernels ahead of a fit have nothing to do.
    func.py_func = func
    func.signatures = [()]
    func.compile = lambda sig: None
    return func


def record(fields, **kwargs) -> np.dtype:
    """``np.dtype(fields, **kwargs)``, a record dtype of the kernels' settings; with
    :data:`DISABLED` its elements are :class:`numpy.record`, whose fields read as attributes
    (``cfg.beta``), as in a compiled kernel."""
    dtype = np.dtype(fields, **kwargs)
    return np.dtype((np.record, dtype)) if DISABLED else dtype


@njit
def _trampoline(kernel, args):
    return kernel(*args)


def call(kernel, *args):
    """``kernel(*args)`` from Python through a compiled caller, for a kernel compiled with
    ``njit(from_python=False)`` (tests and exploration; each kernel and set of argument
    types compiles a caller of its own, not cached)."""
    return _trampoline(kernel, args)


def _named(func, name: str):
    # numba names a kernel's machine code and cache files after its qualified name: two
    # closures of one name and signature, compiled in two processes and loaded from the
    # cache into a third, can get the same symbol there, and the address looked up for
    # one is then the other's (a fit then sampled another likelihood's posterior)
    func.__name__ = func.__qualname__ = name
    return func


class CompiledKernel(WrapperAddressProtocol):
    """A kernel compiled (or loaded from numba's cache) for one signature and handed to
    other kernels by address: numba's first-class function type.

    A kernel that takes it is compiled for its signature, not for the function, and calls
    it through a pointer: numba links no copy of it (and of the tree below it) into the
    caller's machine code, and the two can compile at once in two processes
    (:func:`compile_aside`). The address is looked up in each process (a pickled one
    compiles or loads its kernel again where it is unpickled).

    Parameters
    ----------
    sig : numba.core.typing.Signature
        The signature to compile for.
    source : tuple
        ``(module, name, args)``: the kernel is the attribute ``name`` of the module, or,
        when ``args`` is not None, what that attribute returns for ``args`` (a factory such
        as :func:`skbnn.kernels.density.logp_grad_for`). Picklable, so a helper process can
        find the kernel.
    """

    def __init__(self, sig: numba.core.typing.Signature, source: tuple) -> None:
        self._sig = sig
        self._source = source
        self._address = None
        self._helper = None
        self._aside = False
        self._lock = threading.Lock()
        #: the numba types of the DensityTargets that hold this kernel, by their ids, with
        #: weak references to their arrays (:func:`skbnn.kernels.density.density_target`)
        self.target_types = {}

    def resolve(self) -> int:
        """Compile or load the kernel (once a helper process compiling it has cached it,
        or ended); return the address of its C-callable wrapper."""
        if DISABLED:
            return 0  # no address: kernels in pure Python call it (__call__)
        with self._lock:
            if self._address is None:
                if self._helper is not None:
                    # its line when the kernel is in the cache, or the end of a helper that
                    # failed: compiling here covers either. The helper may go on to other
                    # kernels while this process samples; it is not waited for.
                    self._helper.wait_for(self._job)
                    self._helper = None
                kernel = self.dispatcher()
                kernel.compile(self._sig.args)
                cres = kernel.get_compile_result(self._sig)
                name = cres.fndesc.llvm_cfunc_wrapper_name
                self._address = cres.library.get_pointer_to_function(name)
            return self._address

    def __wrapper_address__(self) -> int:
        """:meth:`resolve`: numba asks for it when a kernel is called with this object."""
        return self.resolve()

    def __call__(self, *args):
        """The kernel called from Python (in pure Python with :data:`DISABLED`)."""
        return self.dispatcher()(*args)

    def signature(self) -> numba.core.typing.Signature:
        """The numba signature it is compiled for."""
        return self._sig

    @property
    def compiled_aside(self) -> bool:
        """Whether a helper process was started to compile it (:func:`compile_aside`)."""
        return self._aside

    def dispatcher(self) -> numba.core.registry.CPUDispatcher:
        """The kernel it is the address of: for calls from Python."""
        return _kernel_of(self._source)

    def _needs_compiling(self) -> bool:
        return (
            self._address is None
            and self._helper is None
            and not _cached(self.dispatcher(), self._sig)
        )

    def __reduce__(self):
        return (_resolved_kernel, (self._sig, self._source))


class KernelType(types.FunctionType):
    """numba's type of a :class:`CompiledKernel`: its first-class function type, unboxed
    from the address the kernel has resolved.

    numba unboxes a first-class function by calling two Python functions with its
    signature unpickled; a Ctrl-C raised in that unpickling left the signature NULL, and
    the call without it raised a TypeError in place of the KeyboardInterrupt. This reads
    the address without running Python once it is resolved.
    """


def _register_kernel_type() -> None:
    from numba.core import cgutils
    from numba.core.extending import NativeValue, box, register_model, typeof_impl, unbox
    from numba.experimental.function_type import FunctionModel, box_function_type

    register_model(KernelType)(FunctionModel)
    box(KernelType)(box_function_type)

    @typeof_impl.register(CompiledKernel)
    def _typeof_compiled_kernel(val, c):
        return KernelType(val.signature())

    @unbox(KernelType)
    def _unbox_compiled_kernel(typ, obj, c):
        pyapi, builder = c.pyapi, c.builder
        slot = cgutils.alloca_once_value(builder, pyapi.object_getattr_string(obj, "_address"))
        # not yet resolved (None): resolve it, in Python (an interrupt there raises from it)
        with builder.if_then(builder.icmp_unsigned("==", builder.load(slot), pyapi.borrow_none())):
            pyapi.decref(builder.load(slot))
            builder.store(pyapi.call_method(obj, "resolve"), slot)
        addr = builder.load(slot)
        failed = cgutils.alloca_once_value(builder, cgutils.is_null(builder, addr))
        sfunc = cgutils.create_struct_proxy(typ)(c.context, builder)
        sfunc.py_addr = builder.ptrtoint(obj, c.context.get_value_type(types.voidptr))
        with builder.if_then(builder.not_(builder.load(failed))):
            sfunc.c_addr = pyapi.long_as_voidptr(addr)
            pyapi.decref(addr)
            builder.store(cgutils.is_not_null(builder, pyapi.err_occurred()), failed)
        return NativeValue(sfunc._getvalue(), is_error=builder.load(failed))


if not DISABLED:
    _register_kernel_type()


def _kernel_of(source: tuple) -> numba.core.registry.CPUDispatcher:
    import importlib

    module, name, args = source
    kernel = getattr(importlib.import_module(module), name)
    return kernel if args is None else kernel(*args)


class _Helper:
    # one helper process and the lines it has printed so far, one per kernel it has cached:
    # the kernels it compiles wait for their own line
    def __init__(self, process: subprocess.Popen, n_jobs: int) -> None:
        self._process = process
        self._n_jobs = n_jobs
        self._lines = 0
        self._lock = threading.Lock()

    def wait_for(self, job: int) -> None:
        with self._lock:
            while self._lines <= job:
                if not self._process.stdout.readline():
                    self._lines = sys.maxsize  # ended (or failed): nothing more to wait for
                    break
                self._lines += 1
            if self._lines >= self._n_jobs and not self._process.stdout.closed:
                self._process.stdout.close()  # every line read: the rest is not waited for


def compile_aside(*kernels: CompiledKernel, activation: int | None = None) -> None:
    """Start compiling ``kernels`` into numba's cache in one helper process, in this order,
    skipping those compiled or cached already; each one's :meth:`CompiledKernel.resolve`
    then waits until the helper has cached it, and loads it. The helper goes on to compile
    the kernels of a first prediction (:func:`skbnn.kernels.density.forward_batch_kernel`
    ``activation`` unless it is None, :func:`skbnn.kernels.predict.mixture_quantiles`) and
    ends; looking those up (:func:`skbnn.kernels.density.forward_batch_for`,
    :func:`skbnn.kernels.predict.mixture_quantiles`) waits for that
    (:func:`wait_for_helpers`).

    Nothing is started when :func:`compile_aside_enabled` is False or every kernel is
    cached: each then compiles or loads where it is first called. A kernel that calls these
    through their addresses compiles without their code, so the two processes compile at
    once: on two cores, in about the time of the longer.
    """
    if not compile_aside_enabled():
        return
    todo = [k for k in dict.fromkeys(kernels) if k._needs_compiling()]
    if not todo:
        return
    jobs = [(k._sig, k._source) for k in todo]
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _COMPILE_ASIDE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        process.stdin.write(pickle.dumps((jobs, activation)))
        process.stdin.close()
    except (OSError, pickle.PicklingError):  # no helper: each compiles where it is called
        return
    _BACKGROUND[:] = [p for p in _BACKGROUND if p.poll() is None]
    running = {p.pid for p in _BACKGROUND}
    for pid in [pid for pid in _COMPILES_AFTER if pid not in running]:
        del _COMPILES_AFTER[pid]
    _BACKGROUND.append(process)
    after = {"mixture_quantiles_kernel"}
    if activation is not None:
        after.add(f"forward_batch_{int(activation)}")
    _COMPILES_AFTER[process.pid] = frozenset(after)
    helper = _Helper(process, len(todo))
    for job, kernel in enumerate(todo):
        with kernel._lock:
            kernel._helper, kernel._job, kernel._aside = helper, job, True


# what the helper process of compile_aside runs: this very package's kernels (not a skbnn
# the working folder might hold), with the jobs from stdin. The package is registered as an
# empty module so that its __init__, which imports the estimators and scikit-learn, does
# not run: the kernels need only numba, and the helper's start is on the cold fit's critical
# path, where scikit-learn's import would be most of it. It prints a line once each kernel
# is in the cache, then goes on with the kernels a first prediction compiles, while the
# fit's process, no longer waiting, samples. It never collects garbage: it lives only to compile,
# and numba's compiler leaves cycles behind that every collection would walk again.
_COMPILE_ASIDE = (
    "import gc, pickle, sys, types\n"
    "gc.disable()\n"
    "package = types.ModuleType('skbnn')\n"
    f"package.__path__ = [{os.path.dirname(os.path.dirname(__file__))!r}]\n"
    "sys.modules['skbnn'] = package\n"
    "from skbnn.kernels import _compile, density, predict\n"
    "jobs, activation = pickle.load(sys.stdin.buffer)\n"
    "for sig, source in jobs:\n"
    "    _compile._kernel_of(source).compile(sig.args)\n"
    "    print('cached', flush=True)\n"
    "if activation is not None:\n"
    "    density.forward_batch_kernel(activation).compile(density.FORWARD_BATCH_ARGS)\n"
    "predict.mixture_quantiles_kernel.compile(predict.MIXTURE_QUANTILES_ARGS)\n"
)

# helper processes that may still be compiling: referenced until they end, so that none is
# collected (and warned about) while it runs
_BACKGROUND: list = []

# the names of the kernels each helper process (by its pid) compiles after its jobs: a
# kernel looked up for prediction waits only for the helpers that compile it
_COMPILES_AFTER: dict = {}


def wait_for_helpers(*kernels, timeout: float = 10.0) -> None:
    """Wait (at most ``timeout`` seconds each) for the helper processes of
    :func:`compile_aside` that compile one of ``kernels`` not compiled in this process yet
    (with no ``kernels``, for all of them) to end: those kernels are then in the cache.

    Prediction's kernels call it when looked up (:func:`skbnn.kernels.density.forward_batch_for`,
    :func:`skbnn.kernels.predict.mixture_quantiles`), so that a first prediction right after
    a cold fit loads them rather than compile them a second time.
    """
    if not _BACKGROUND:
        return
    names = {k.py_func.__qualname__ for k in kernels if not k.signatures}
    if kernels and not names:
        return
    for process in _BACKGROUND:
        if kernels and not names & _COMPILES_AFTER.get(process.pid, frozenset()):
            continue
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass


@atexit.register
def _finish_background() -> None:
    # a process that ends right after a cold fit lets its helper finish caching prediction's
    # kernels (a second or two) for the next process, and leaves no process behind
    for helper in _BACKGROUND:
        try:
            helper.wait(timeout=10)
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.wait()


def _cached(kernel, sig) -> bool:
    """Whether ``kernel`` is compiled for ``sig`` in this process or in numba's cache (its
    index, read without loading the code); True when numba's cache cannot tell."""
    if tuple(sig.args) in kernel.overloads:
        return True
    try:
        cache = kernel._cache
        # keyed as numba's own compile keys it: by the tuple of argument types
        key = cache._index_key(tuple(sig.args), kernel.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:  # a numba without these internals, or no cache: compile here
        return True


def compile_aside_enabled() -> bool:
    """Whether :func:`skbnn.kernels.density.density_target` with ``aside=True`` may start
    a helper process: the environment variable ``SKBNN_COMPILE_ASIDE`` (``0`` or ``1``) if
    set, otherwise when numba caches the kernels and this process may run on more than one
    core (never with :data:`DISABLED`)."""
    setting = os.environ.get("SKBNN_COMPILE_ASIDE", "").strip()
    if DISABLED:
        return False
    if setting:
        return setting not in ("0", "false", "False", "no")
    if getattr(sys, "frozen", False) or "python" not in os.path.basename(sys.executable).lower():
        return False  # sys.executable may not be a Python that can run the helper
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return CACHE and cores > 1


@functools.cache
def compiled_kernel(sig: numba.core.typing.Signature, source: tuple) -> CompiledKernel:
    """The one :class:`CompiledKernel` of this process for ``sig`` and ``source``, so that a
    fit finds the one its warm-up started a helper process for."""
    return CompiledKernel(sig, source)


def _resolved_kernel(sig, source) -> CompiledKernel:
    kernel = compiled_kernel(sig, source)
    kernel.resolve()
    return kernel


_compile_lock = threading.Lock()


def compile_once(kernels, warm, compiled=None) -> float:
    """Compile (or load from numba's cache) ``kernels`` once per process.

    ``warm`` calls every kernel on a tiny problem; it runs under a lock unless every kernel
    already has a signature, or, when given, ``compiled()`` is true (for a kernel with
    several specializations, of which the fit needs one), with Python's automatic garbage
    collection paused meanwhile. Returns the seconds it took (0 when nothing was compiled),
    for ``diagnostics_["compile_time"]``.
    """
    with _compile_lock:
        if compiled() if compiled is not None else all(k.signatures for k in kernels):
            return 0.0
        start = time.perf_counter()
        with _collector_paused():
            warm()
        return time.perf_counter() - start


@contextlib.contextmanager
def _collector_paused():
    # numba's compiler leaves a hundred thousand objects in reference cycles behind, and
    # each automatic full collection meanwhile walks every object of the process
    # (scikit-learn, scipy and pandas hold about 150,000), a large share of a first fit's
    # compiling. They are collected once, afterwards, by the next automatic collection.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def compile_for(kernel, *args) -> None:
    """Compile (or load from numba's cache) ``kernel`` for the types of ``args``, without
    calling it.

    A kernel that takes a :data:`~skbnn.kernels.density.DensityTarget` waits, when first
    called, for the network kernel that a helper process may be compiling beside a cold fit
    (:func:`compile_aside`); compiling it from the types alone does not, so a fit's
    warm-up compiles each of its kernels this way first, and waits once, when it calls
    them.
    """
    kernel.compile(tuple(numba.typeof(a) for a in args))
