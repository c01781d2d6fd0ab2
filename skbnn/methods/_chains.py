"""Running the chains: one chain's blocks, the chains interleaved over threads, or sent
as tasks of joblib's backend."""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..kernels import chain as kchain
from ..kernels import density as knet
from ..kernels.linalg import DENSE, LOW_RANK, Metric
from ..log_posterior import aligned_empty, padded_rows
from ..utils import thread_map
from ._starts import finite_start
from ._warmup import restart_step_size, update_metric


@dataclass
class ChainState:
    """One chain (or one tempering replica) as the driver runs it.

    Everything a chain's draws depend on is here, so that the chain can run its blocks in
    another process and come back with the same bits.
    """

    #: the chain's own random stream
    rng: np.random.Generator
    #: the kernels' arrays (:data:`skbnn.kernels.chain.Chain`)
    arrays: kchain.Chain
    #: the chain's own kernel target (its noise precisions, beta, a hierarchical prior's
    #: scales)
    tgt: object
    #: the length of the network kernel's scratch
    ws_size: int
    #: the scratch itself: allocated where the chain runs, dropped before it travels
    ws: np.ndarray | None = None
    #: blocks run, and the iterations they ended at
    pos: int = 0
    it_done: int = 0
    #: seconds spent running blocks, and on the last one
    time: float = 0.0
    last: float = 0.0
    #: gradient evaluations at the end of warm-up (None until warm-up ends here)
    warmup_grad_evals: int | None = None

    def take(self, other: ChainState) -> None:
        """Become ``other``: a chain that ran elsewhere comes back."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(other, f.name))

    def grow(self, rows: int) -> None:
        """Room for ``rows`` more kept draws."""
        a = self.arrays
        self.arrays = a._replace(
            draws=np.vstack([a.draws, np.zeros((rows, a.draws.shape[1]))]),
            trace=np.vstack([a.trace, np.zeros((rows, a.trace.shape[1]))]),
            taus=np.vstack([a.taus, np.zeros((rows, a.taus.shape[1]))]),
        )

    def keep(self, rows) -> None:
        """Keep only the kept draws ``rows`` (a slice or an index array)."""
        a = self.arrays
        self.arrays = a._replace(draws=a.draws[rows], trace=a.trace[rows], taus=a.taus[rows])


def new_chain(
    target, rng, beta: float, n_rows: int, kind: int, start=None, window: int = 0
) -> ChainState:
    """A chain of ``target`` at inverse temperature ``beta`` (relative to the target's own)
    with room for ``n_rows`` kept draws, at ``start`` or a finite prior draw, with the
    prior variances as its inverse mass matrix of ``kind`` (:mod:`skbnn.kernels.linalg`);
    warm-up keeps up to ``window`` draws of a window for a low-rank metric (0: none)."""
    d, k = target.n_params, target.n_outputs
    n_hyper = target.layout.n_layers if target.hierarchical else 0
    init_var = np.ones(d)
    init_var[: target.layout.n_weights] = target.prior_var
    if kind == DENSE:
        metric = Metric(init_var, np.diag(init_var), np.diag(np.sqrt(init_var)))
    elif kind == LOW_RANK:
        # no low-rank part until the first window's estimate
        metric = Metric(init_var, np.zeros((0, d)), np.zeros((3, 0)))
    else:
        # (1, 1) placeholders, so that every kind shares one compiled kernel
        metric = Metric(init_var, np.zeros((1, 1)), np.zeros((1, 1)))
    tgt = knet.density_target(target.kernel_target(own=True, padded=True))
    # relative to the target's own beta (0 samples the prior, as tests do)
    tgt.cfg[0]["beta"] *= beta
    q = finite_start(target, rng) if start is None else start.copy()
    return ChainState(
        rng=rng,
        # the kernels' arrays; the step-size search starts from 0.1
        arrays=kchain.make_chain(q, 2 + k, metric, kind == DENSE, n_rows, k + n_hyper, window),
        tgt=tgt,
        ws_size=knet.workspace_size(target.layout.sizes, padded_rows(target.n_rows)),
    )


@dataclass
class SavedChain:
    """One chain as a fit left it: what :func:`restore` needs to continue it."""

    #: the chain's random stream
    rng: np.random.Generator
    #: the kernels' arrays: state, metric, draws
    arrays: kchain.Chain
    #: its noise precisions, kernel settings and a hierarchical prior's scales
    tau: np.ndarray
    cfg: np.ndarray
    prior_scale: np.ndarray
    #: the gradient evaluations its warm-up spent (None before warm-up ends)
    warmup_grad_evals: int | None = None


@dataclass
class ResumeState:
    """What a sampler's fit leaves for a later ``run(..., resume=state)``
    (``FitResult.state``; the estimators' ``warm_start``)."""

    #: kept draws per chain, iterations per chain, and the draws asked for in all
    n_keep: int
    n_iter: int
    n_samples: int
    #: what the MAP starts cost, counted once
    init_grad_evals: int
    init_time: float
    chains: list[SavedChain]

    @classmethod
    def of(cls, state) -> ResumeState:
        """``state`` as a record: estimators pickled before it held a mapping of the same
        fields (and each chain a mapping), which still continue."""
        if isinstance(state, cls):
            return state
        fields = dict(state)
        fields["chains"] = [
            c if isinstance(c, SavedChain) else SavedChain(**c) for c in fields["chains"]
        ]
        return cls(**fields)


def restore(chain: ChainState, state: SavedChain, n_keep: int, hierarchical: bool) -> None:
    """``chain`` as a previous fit left it (``state``, one of that fit's saved chains):
    state, metric, noise and random stream, with room for ``n_keep`` draws."""
    chain.arrays = state.arrays
    chain.grow(n_keep - chain.arrays.draws.shape[0])
    chain.rng = state.rng
    chain.tgt.tau[:] = state.tau
    chain.tgt.cfg[:] = state.cfg
    if hierarchical:
        chain.tgt.prior_scale[:] = state.prior_scale
    if state.warmup_grad_evals is not None:
        chain.warmup_grad_evals = state.warmup_grad_evals


def saved(chain: ChainState) -> SavedChain:
    """What :func:`restore` needs of ``chain`` (a fit's ``state`` holds it)."""
    return SavedChain(
        rng=chain.rng,
        arrays=chain.arrays,
        tau=chain.tgt.tau.copy(),
        cfg=chain.tgt.cfg.copy(),
        prior_scale=chain.tgt.prior_scale.copy(),
        warmup_grad_evals=chain.warmup_grad_evals,
    )


def run_interleaved(
    chains: list[ChainState],
    n_blocks: int,
    advance,
    n_workers: int,
    stop_early=None,
    on_interrupt=None,
    poll=None,
) -> None:
    """Advance every chain through ``n_blocks`` blocks on ``n_workers`` threads.

    Each free thread takes the least advanced chain that no other thread holds, so chains
    progress together and no thread idles while work remains. A chain's blocks run in order
    and its state is its own, so the draws do not depend on the schedule.

    ``stop_early``, if given, is asked (under the scheduler's lock) before each block is
    handed out; when it returns a block count, sampling ends early: every chain completes
    the blocks it or any other chain has started, and at least that many, so all chains end
    at the same block. ``on_interrupt`` and ``poll``: see :func:`~skbnn.utils.thread_map`.
    """
    cond = threading.Condition()
    busy: set[int] = set()
    failed = []
    limit = [n_blocks]

    def worker():
        while True:
            with cond:
                while True:
                    if failed:
                        return
                    if stop_early is not None and limit[0] == n_blocks:
                        floor = stop_early()
                        if floor is not None:
                            started = max(c.pos + (i in busy) for i, c in enumerate(chains))
                            limit[0] = min(n_blocks, max(floor, started))
                    free = [i for i, c in enumerate(chains)
                            if i not in busy and c.pos < limit[0]]  # fmt: skip
                    if free:
                        i = min(free, key=lambda j: chains[j].pos)
                        busy.add(i)
                        break
                    if all(c.pos >= limit[0] for c in chains):
                        return
                    cond.wait()
            try:
                advance(chains[i])
            except BaseException:
                failed.append(i)
                raise
            finally:
                with cond:
                    busy.discard(i)
                    cond.notify_all()

    # A worker waits only for chains that running workers hold, so workers that the shared
    # pool has not started yet cannot block the others.
    thread_map(
        lambda _: worker(),
        range(n_workers),
        n_workers,
        interruptible=True,
        on_interrupt=on_interrupt,
        poll=poll,
    )


class ChainBlocks:
    """Runs one chain's blocks: the kernel, and the metric and step-size updates between
    them (where warm-up's windows end).

    Picklable, without its progress bar, so that a chain can run its blocks in another
    process: the kernel is found through the method's class, and a chain's state (arrays,
    kernel target, random generator) is all in its :class:`ChainState`, so the draws are the same
    bits wherever it runs.
    """

    def __init__(
        self, method, settings, moves, after, sched, stops, n_warmup, n_keep, kind, metric
    ):
        self.method = method
        self.settings = settings
        self.moves = moves
        self.after = after
        self.sched = sched
        # the driver's own list: extending the run appends to it
        self.stops = stops
        self.n_warmup = n_warmup
        self.n_keep = n_keep
        self.kind = kind
        self.metric = metric
        self.bar = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "bar": None}

    def advance(self, chain: ChainState) -> None:
        """Run ``chain`` through its next block (starting it first if it is new)."""
        t0 = time.perf_counter()
        method, stops, sched, n_warmup = self.method, self.stops, self.sched, self.n_warmup
        walk = not method._uses_step_size
        arrays = chain.arrays
        state = arrays.state[0]
        if chain.ws is None:
            chain.ws = aligned_empty(chain.ws_size)
        if chain.pos == 0:
            # a random walk never reads the gradient
            g = arrays.grad[:0] if walk else arrays.grad
            state["logp"] = knet.log_density(
                arrays.q, chain.tgt, chain.ws, g, arrays.stats, not walk
            )
            state["n_grad_evals"] += 1
            if not walk:
                restart_step_size(chain, self.kind)
        it, stop = (stops[chain.pos - 1] if chain.pos else 0), stops[chain.pos]
        first, last = it, stop
        if len(arrays.draws) < self.n_keep and it >= n_warmup:
            # a hot replica (one iteration per block) records into its only row
            first, last = n_warmup, n_warmup + 1
        kernel = type(method)._block_kernel
        stopped = kernel(
            chain.rng, arrays, chain.tgt, self.settings, sched, first, last, self.moves,
            self.after,
        )  # fmt: skip
        if stopped < last:
            # stopped by Ctrl-C (the driver's stop_chains): the fit is abandoned
            raise KeyboardInterrupt
        if stop == n_warmup:
            chain.warmup_grad_evals = int(state["n_grad_evals"])
        if stop <= n_warmup and sched[stop - 1, 1]:
            chain.arrays = update_metric(arrays, self.metric)
            restart_step_size(chain, self.kind)
        if self.bar is not None:
            phase = "warmup" if stop <= n_warmup else "sampling"
            step_size = state["step_size"]
            self.bar.update(stop - it, phase if walk else f"{phase}, step size {step_size:.3g}")
        chain.pos += 1
        chain.it_done = stop
        chain.last = time.perf_counter() - t0
        chain.time += chain.last

    def finish(self, chain: ChainState) -> ChainState:
        """Run ``chain`` through all its remaining blocks; returns it without its scratch."""
        while chain.pos < len(self.stops):
            self.advance(chain)
        chain.ws = None
        return chain


def run_elsewhere(blocks: ChainBlocks, chains: list[ChainState], n_jobs) -> None:
    """Run every chain's remaining blocks as one task of joblib's active backend (a
    cluster's workers under ``parallel_config(backend="dask")``) and take their states
    back. Each task carries its chain and the data; a worker loads the compiled kernels
    from numba's cache (or compiles them once)."""
    from joblib import Parallel, delayed

    sent = [dataclasses.replace(c, ws=None) for c in chains]
    done = Parallel(n_jobs=n_jobs)(delayed(blocks.finish)(c) for c in sent)
    for chain, new in zip(chains, done, strict=True):
        if blocks.bar is not None:
            blocks.bar.update(new.it_done - chain.it_done, "sampled elsewhere")
        chain.take(new)


def grad_evals(chain) -> int:
    """Gradient (log-density, for a random walk) evaluations of a driver's chain so far."""
    return int(chain.arrays.state[0]["n_grad_evals"])


@dataclass
class Runner:
    """Runs every chain's remaining blocks: tempering's rounds, tasks of joblib's backend
    (``elsewhere``), one thread through the chains in order, or the chains interleaved
    over ``n_workers`` threads.

    With a ``deadline`` (a :func:`time.perf_counter` time), the first run ends early when
    it passes, every chain at the same block and at least ``min_blocks`` blocks in.
    """

    blocks: ChainBlocks
    chains: list[ChainState]
    n_workers: int
    n_jobs: object
    exchange: object = None
    elsewhere: bool = False
    deadline: float | None = None
    min_blocks: int = 0
    #: called once, by the thread that waits for the chains, with the share of warm-up
    #: done when the deadline passed during warm-up (which it does not cut short)
    on_late_warmup: object = None
    #: that share, as the chains' threads found it
    late_share: float | None = None
    late_told: bool = False

    def stop_chains(self) -> None:
        # every kernel reads this before each iteration (Ctrl-C in the main thread)
        self.blocks.settings[0]["interrupt"] = 1

    def _stop_early(self) -> int | None:
        if time.perf_counter() < self.deadline:
            return None
        stops, n_warmup = self.blocks.stops, self.blocks.n_warmup
        done = sum(min(stops[c.pos - 1] if c.pos else 0, n_warmup) for c in self.chains)
        if self.late_share is None and done < n_warmup * len(self.chains):
            self.late_share = done / (n_warmup * len(self.chains))
        return self.min_blocks

    def _tell_late_warmup(self) -> None:
        if self.late_share is not None and not self.late_told and self.on_late_warmup:
            self.late_told = True
            self.on_late_warmup(self.late_share)

    def _run_serially(self, _) -> None:
        for chain in self.chains:
            while chain.pos < len(self.blocks.stops):
                self.blocks.advance(chain)

    def run(self, first: bool = False) -> None:
        """Run the chains through the blocks of ``blocks.stops`` (grown since, when the
        chains are extended)."""
        blocks, n_blocks = self.blocks, len(self.blocks.stops)
        # the kernels run on the pool, also with one thread: the main thread waits,
        # where it can hear Ctrl-C
        if self.exchange is not None:
            self.exchange.run(
                n_blocks, blocks.n_warmup, blocks.advance, self.n_workers, self.stop_chains
            )
        elif self.elsewhere:
            run_elsewhere(blocks, self.chains, self.n_jobs)
        elif self.n_workers == 1 and self.deadline is None:
            thread_map(
                self._run_serially, [None], 1, interruptible=True, on_interrupt=self.stop_chains
            )
        else:
            # with max_time, one thread also interleaves the chains, so that all of
            # them, not only the first, have sampled when the time runs out
            run_interleaved(
                self.chains,
                n_blocks,
                blocks.advance,
                self.n_workers,
                self._stop_early if self.deadline is not None and first else None,
                on_interrupt=self.stop_chains,
                poll=self._tell_late_warmup,
            )
            self._tell_late_warmup()
