"""A second core for a lone network: a helper thread that takes half of each step's work.

A fit that trains one network (VI, LBBNN, Laplace's MAP, a one-member ensemble, or the last
member of an ensemble once the others are done) runs one chain of minibatch steps, each of
which needs the last: the members' threads have nothing to share out. What does split is
each step's work. :func:`skbnn.kernels.gemm.gemm` cuts the product of a wide layer
(:data:`SPLIT_MIN_WEIGHTS` weights or more, by the layer's shape alone) into two fixed
halves of its columns, always: one BLAS call per half. With a team running
(:func:`skbnn.kernels.helper.team`), the calling thread hands the second half to the helper
and computes the first; without one it computes both. Either way the same two
single-threaded BLAS calls make the same bits, so a result never depends on ``n_jobs``,
where BLAS's own threads (which split a product by the thread count) would change its last
bits. The training engine hands over half of a wide minibatch's gather and of an Adam step
the same way (each value there is computed alone, so any split keeps the bits).

The hand-off is one slot of shared memory, :data:`CTL`, that the kernels reach through a
symbol registered with LLVM (so cached kernels find it in a new process) and change by
atomic loads, stores and compare-and-swap: ``IDLE`` -> ``CLAIMED`` (a poster owns the slot
and writes the task) -> ``POSTED`` -> ``DONE`` (the helper's part is in place) -> ``IDLE``.
A kernel that finds the slot taken (another thread's task, or no team: ``OFF``) does all of
its work itself. The helper opens the slot (``OFF`` -> ``IDLE``) once it runs without the
GIL, and :func:`team_close` shuts it once no task is in flight. Waiting threads spin, and
yield their core to the scheduler after :data:`SPINS` tries, so an oversubscribed machine
slows, never stalls. A forked child starts with the slot shut: it has no helper.
"""

from __future__ import annotations

import ctypes
import os
import sys

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from ._compile import DISABLED, njit

#: The fewest weights (inputs x outputs) of a layer whose products split in two.
SPLIT_MIN_WEIGHTS = 2**16
#: Spins of a waiting thread before each yield of its core.
SPINS = 2000

# the slot's states
OFF, IDLE, CLAIMED, POSTED, DONE = -1, 0, 1, 2, 3
# the task's fields: its kind, its arguments, and the helper's result (a float's bits)
_KIND, _X, _RESULT = 1, 2, 15
_SLOTS = 16
#: The kinds of task: a matrix product (:func:`skbnn.kernels.gemm.gemm`), the gather of a
#: minibatch's features and an Adam step on a range of parameters
#: (:mod:`skbnn.kernels.optim`), and the two passes of an LBBNN step over its weights
#: (:func:`skbnn.kernels.lbbnn.spike_slab_prepare` and ``spike_slab_finish``, which the
#: mean-field and flow families share), and the low-rank family's two
#: (:func:`skbnn.kernels.lbbnn_lowrank.lowrank_slab_terms`); the helper calls the kinds
#: from ``PREPARE`` on through :data:`TASKS`.
GEMM, GATHER, ADAM, PREPARE, FINISH, LOWRANK_SUMS, LOWRANK_GRAD = 0, 1, 2, 3, 4, 5, 6

#: The hand-off slot, shared by every thread of the process.
CTL = np.full(_SLOTS, OFF, dtype=np.int64)
_CTL_SYMBOL = "skbnn_team_ctl"
_YIELD_SYMBOL = "skbnn_team_yield"
#: Per kind of task, the address of the kernel that the helper calls for it, or 0: the
#: kinds that only some methods post (``PREPARE`` and after) are called through it, so
#: that the helper's loop, which every method with a team compiles, links none of their
#: code (:func:`register_task`).
TASKS = np.zeros(8, dtype=np.int64)
_TASKS_SYMBOL = "skbnn_team_tasks"


def _yield_address() -> int:
    # the C library's "give up the core" (POSIX sched_yield, Windows SwitchToThread)
    if sys.platform == "win32":
        return ctypes.cast(ctypes.windll.kernel32.SwitchToThread, ctypes.c_void_p).value
    libc = ctypes.CDLL(None)
    return ctypes.cast(libc.sched_yield, ctypes.c_void_p).value


if not DISABLED:
    llvm.add_symbol(_CTL_SYMBOL, CTL.ctypes.data)
    llvm.add_symbol(_TASKS_SYMBOL, TASKS.ctypes.data)
    llvm.add_symbol(_YIELD_SYMBOL, _yield_address())


def _off_in_child() -> None:
    # a forked child has no helper thread: a poster there would wait for ever
    CTL[0] = OFF


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_off_in_child)


def _slot(builder, index):
    module = builder.module
    ctl = module.globals.get(_CTL_SYMBOL)
    if ctl is None:
        ctl = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(64), _SLOTS), _CTL_SYMBOL)
        ctl.linkage = "external"
    return builder.gep(ctl, [ir.Constant(ir.IntType(32), 0), index])


def _index(context, builder, sig, args):
    return context.cast(builder, args[0], sig.args[0], types.intp)


@intrinsic
def load(typingcontext, index):
    """The slot's field ``index``, read with acquire ordering."""

    def codegen(context, builder, sig, args):
        return builder.load_atomic(_slot(builder, _index(context, builder, sig, args)),
                                   "acquire", 8)  # fmt: skip

    return types.int64(index), codegen


@intrinsic
def store(typingcontext, index, value):
    """Set the slot's field ``index`` to ``value``, with release ordering."""

    def codegen(context, builder, sig, args):
        value = context.cast(builder, args[1], sig.args[1], types.int64)
        builder.store_atomic(value, _slot(builder, _index(context, builder, sig, args)),
                             "release", 8)  # fmt: skip
        return context.get_dummy_value()

    return types.void(index, value), codegen


@intrinsic
def swap(typingcontext, index, expected, value):
    """Set the field ``index`` to ``value`` if it holds ``expected``; whether it did."""

    def codegen(context, builder, sig, args):
        old = context.cast(builder, args[1], sig.args[1], types.int64)
        new = context.cast(builder, args[2], sig.args[2], types.int64)
        slot = _slot(builder, _index(context, builder, sig, args))
        return builder.extract_value(builder.cmpxchg(slot, old, new, "acq_rel", "acquire"), 1)

    return types.boolean(index, expected, value), codegen


def register_task(kind: int, kernel) -> None:
    """Let the helper run tasks of ``kind``: ``kernel`` is a
    :class:`~skbnn.kernels._compile.CompiledKernel` of signature ``int64(int64, int64,
    int64, int64)`` (the task's first four arguments; its result's bits), compiled or
    loaded here if it is not yet. Until a kind is registered, its posters do all of its
    work themselves (:func:`task_address`)."""
    if not DISABLED:
        TASKS[kind] = kernel.resolve()


@intrinsic
def task_address(typingcontext, kind):
    """The address of the kernel registered for the task ``kind`` (:func:`register_task`),
    or 0."""

    def codegen(context, builder, sig, args):
        module = builder.module
        table = module.globals.get(_TASKS_SYMBOL)
        if table is None:
            table = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(64), TASKS.size),
                                      _TASKS_SYMBOL)  # fmt: skip
            table.linkage = "external"
        kind = context.cast(builder, args[0], sig.args[0], types.intp)
        at = builder.gep(table, [ir.Constant(ir.IntType(32), 0), kind])
        return builder.load_atomic(at, "acquire", 8)

    return types.int64(kind), codegen


@intrinsic
def call_task(typingcontext, addr, x0, x1, x2, x3):
    """Call the task kernel at ``addr`` (:func:`register_task`) with four arguments."""

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        fn = builder.inttoptr(args[0], ir.FunctionType(i64, [i64] * 4).as_pointer())
        values = [context.cast(builder, a, t, types.int64)
                  for a, t in zip(args[1:], sig.args[1:], strict=True)]  # fmt: skip
        return builder.call(fn, values)

    return types.int64(addr, x0, x1, x2, x3), codegen


@intrinsic
def as_bits(typingcontext, value):
    """A float64's bits as an int64."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(context.cast(builder, args[0], sig.args[0], types.float64),
                               ir.IntType(64))  # fmt: skip

    return types.int64(value), codegen


@intrinsic
def from_bits(typingcontext, bits):
    """The float64 whose bits an int64 holds."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(bits), codegen


@intrinsic
def address(typingcontext, array, offset):
    """The address of ``array[offset]``."""

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        at = builder.gep(data, [context.cast(builder, args[1], sig.args[1], types.intp)])
        return builder.ptrtoint(at, ir.IntType(64))

    return types.int64(array, offset), codegen


@intrinsic
def doubles_at(typingcontext, addr):
    """A pointer to the float64 at the address ``addr`` (for :func:`numba.carray`)."""

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], ir.DoubleType().as_pointer())

    return types.CPointer(types.float64)(addr), codegen


@intrinsic
def integers_at(typingcontext, addr):
    """A pointer to the int64 at the address ``addr`` (for :func:`numba.carray`)."""

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], ir.IntType(64).as_pointer())

    return types.CPointer(types.int64)(addr), codegen


@intrinsic
def give_way(typingcontext):
    """Yield the core to the scheduler."""

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(32), []), _YIELD_SYMBOL
        )
        builder.call(fn, ())
        return context.get_dummy_value()

    return types.void(), codegen


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _pause(spins):
    # one more spin; every SPINS of them, yield the core (the count starts again)
    spins += 1
    if spins >= SPINS:
        give_way()
        return 0
    return spins


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def post(kind, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12) -> bool:
    """Hand the helper the task ``kind`` with thirteen arguments (integers, addresses, or a
    float's bits, :func:`as_bits`); False, and nothing posted, when the slot is taken or
    no team runs."""
    if not swap(0, IDLE, CLAIMED):
        return False
    store(_KIND, kind)
    args = (x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12)
    for i in range(13):
        store(_X + i, args[i])
    store(0, POSTED)
    return True


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def collect() -> int:
    """Wait for the posted task, free the slot, and return the helper's result (bits)."""
    spins = 0
    while load(0) != DONE:
        spins = _pause(spins)
    result = load(_RESULT)
    store(0, IDLE)
    return result


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def next_task() -> bool:
    """The helper's wait: True when a product is posted, False when the team closed."""
    spins = 0
    while True:
        state = load(0)
        if state == POSTED:
            return True
        if state == OFF:
            return False
        spins = _pause(spins)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def task():
    """The posted task: its kind and its thirteen arguments."""
    return (load(_KIND), load(_X), load(_X + 1), load(_X + 2), load(_X + 3), load(_X + 4),
            load(_X + 5), load(_X + 6), load(_X + 7), load(_X + 8), load(_X + 9),
            load(_X + 10), load(_X + 11), load(_X + 12))  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def done(result) -> None:
    """The helper's part is in place, and ``result`` (bits) is its value."""
    store(_RESULT, result)
    store(0, DONE)


@njit(cache=True, nogil=True, error_model="numpy")
def team_close() -> None:
    """Turn the slot ``OFF`` once no product is in flight."""
    spins = 0
    while not swap(0, IDLE, OFF):
        spins = _pause(spins)


if DISABLED:
    # the kernels run as Python (NUMBA_DISABLE_JIT): no addresses, no team, every task alone

    def post(kind, *args) -> bool:  # noqa: F811
        return False

    def address(array, offset) -> int:  # noqa: F811
        return 0

    def task_address(kind) -> int:  # noqa: F811
        return 0

    def as_bits(value) -> int:  # noqa: F811
        return 0
