"""The chain driver shared by the HMC family: dispersed starts, Stan's warm-up windows,
threads over chains, progress bar, draws and diagnostics."""

from __future__ import annotations

import copy
import math
import threading
import time
from numbers import Integral, Real

import numba
import numpy as np
from joblib import effective_n_jobs
from scipy.linalg import solve_triangular
from scipy.special import expit, softmax
from sklearn.utils._param_validation import Interval, StrOptions

from ..diagnostics import ess_bulk, ess_tail, rhat
from ..exceptions import ConvergenceWarning, SlowFitWarning, warn
from ..kernels import chain as kchain
from ..kernels import network as knet
from ..kernels.linalg import Metric
from ..posterior import WeightedDraws
from ..target import aligned_empty, padded_rows
from ..utils import backend_elsewhere, compile_once, seed_sequence, thread_map
from ._base import BaseMethod, FitResult
from ._progress import SLOW_FIT, ProgressBar, duration

#: ``target_rhat`` / ``target_ess`` without ``max_time``: the chains grow to at most this
#: many times the ``n_samples`` they were asked for (``stopped_because="max_draws"``).
MAX_EXTENSION = 20
#: With ``max_time``, the fewest draws a chain keeps when the time runs out before its first
#: ``n_samples`` draws are complete.
MIN_TIMED_DRAWS = 20
#: With ``max_time``, time bounds the run, and the draws held while it grows (every draw,
#: its trace row and noise precisions, all chains) at most this many bytes.
MAX_EXTENSION_BYTES = 2**29
#: What a ConvergenceWarning says when max_time ran out with the chains still apart.
OUT_OF_REACH = (
    "Some network posteriors are out of reach of any chain in minutes (every trajectory at "
    "the depth cap, R-hat well above 1.05 however long the chains run). The draws then mix "
    "the modes the chains found, an ensemble of modes rather than the posterior: read "
    "their intervals as an ensemble's, or use fewer hidden units"
)
#: R-hat above this raises a ConvergenceWarning (Vehtari et al. 2021 recommend 1.01 for
#: final inference; 1.05 flags clear failures without crying wolf on short runs).
RHAT_WARN = 1.05


def stan_windows(n_warmup: int) -> np.ndarray:
    """Stan's warm-up schedule: ``sched[i] = (in_window, end_window)`` per iteration.

    A fast initial buffer (step size only), then doubling slow windows that estimate the
    diagonal mass matrix, then a terminal buffer; buffers shrink for short warm-ups (15 % /
    75 % / 10 %). Fewer than 20 warm-up iterations adapt the step size only.
    """
    sched = np.zeros((max(n_warmup, 0), 2), dtype=np.uint8)
    if n_warmup < 20:
        return sched
    init_buffer, term_buffer, window = 75, 50, 25
    if init_buffer + window + term_buffer > n_warmup:
        init_buffer = int(0.15 * n_warmup)
        term_buffer = int(0.1 * n_warmup)
        window = n_warmup - init_buffer - term_buffer
    last = n_warmup - term_buffer - 1
    start = init_buffer
    while start <= last:
        end = min(start + window - 1, last)
        # a later window that would leave less than twice its size before the end absorbs
        # the rest (Stan applies this from the second window on)
        if start > init_buffer and end + 2 * window > last:
            end = last
        sched[start : end + 1, 0] = 1
        sched[end, 1] = 1
        start = end + 1
        window *= 2
    return sched


def _ensure_compiled(
    kernel, moves: bool | None, after, codes: tuple[int, int, int], after_aside: bool
) -> float:
    """Compile (or load from numba's cache) a chain kernel for its ``moves`` and ``after``
    arguments (see :func:`skbnn.kernels.chain.run_nuts_block`), and the network and
    prediction kernels for the fit's activation, likelihood and prior ``codes``
    (:func:`skbnn.kernels.network.target_codes`); return the seconds spent. With
    ``after_aside``, a helper process compiling the network kernel compiles ``after``
    too."""
    last_types = (numba.typeof(moves), numba.typeof(after))
    density, predict = knet.logp_grad_for(*codes), knet.forward_batch_for(codes[0])

    def compiled() -> bool:
        return any(tuple(sig[-2:]) == last_types for sig in kernel.signatures) and bool(
            density.signatures
        )

    def warm():
        from ..target import Target

        rng = np.random.default_rng(0)
        x = rng.standard_normal((3, 1))
        target = Target(x, x[:, 0], (1,), "tanh", "gaussian")
        # the fit's network kernel compiles in another process meanwhile, if it can
        also = (after,) if after_aside else ()
        tgt = knet.density_target(target.kernel_target(), aside=True, codes=codes, aside_with=also)
        d = target.n_params
        # any valid two-iteration run: numba compiles every branch whatever the values
        settings = kchain.make_settings(
            max_tree_depth=2, max_steps=4, noise_update=kchain.NOISE_GIBBS,
            gibbs_output_layer=1, rescale_units=1, t0=2, t_adapt=4, target_accept=0.8,
            max_delta_energy=1000.0, path_length=1.0, step_jitter=0.1, gamma=1.0,
        )  # fmt: skip
        chain = kchain.make_chain(np.zeros(d), n_stats=3, n_taus=1)
        sched = np.zeros((1, 2), dtype=np.uint8)
        if not after_aside:
            # compiled here before the call, which may wait for the helper's network kernel
            after.resolve()
        kernel(rng, chain, tgt, settings, sched, 0, 2, moves, after)
        if not tgt.density.compiled_aside:
            # the helper process, when there is one, compiles it while the chains run
            predict.compile(knet.FORWARD_BATCH_ARGS)

    return compile_once((kernel, density), warm, compiled)


def _momentum(rng, metric, dense: bool) -> np.ndarray:
    """p ~ N(0, M) for the inverse mass matrix ``metric`` (as the numba kernel draws it)."""
    inv_m, _, chol = metric
    z = rng.standard_normal(inv_m.size)
    if dense:
        return solve_triangular(chol, z, trans="T", lower=True)
    return z / np.sqrt(inv_m)


# a step far past the stability limit overflows to inf or NaN, which the search counts as
# a rejection; numpy's warnings about it would say nothing the caller can act on
@np.errstate(over="ignore", invalid="ignore")
def _init_step_size(chain, eps: float, dense: bool) -> float:
    """Stan's heuristic: double or halve until one leapfrog's acceptance crosses 0.8.

    Runs a handful of leapfrog steps, so it lives in Python around the compiled log density
    rather than in the chain kernel, which keeps the kernel's compile time down.
    """
    arrays, tgt = chain["arrays"], chain["tgt"]
    metric, state = arrays.metric, arrays.state[0]
    inv_m, sigma, _ = metric
    ws = aligned_empty(chain["ws_size"])
    st = np.empty_like(arrays.stats)

    def kinetic(p):
        return 0.5 * p @ (sigma @ p if dense else inv_m * p)

    direction = 0
    for _ in range(100):
        p = _momentum(chain["rng"], metric, dense)
        h0 = -state["logp"] + kinetic(p)
        q, g = arrays.q.copy(), arrays.grad.copy()
        # one leapfrog step, in numpy around the compiled log density
        p += 0.5 * eps * g
        q += eps * (sigma @ p if dense else inv_m * p)
        lp = knet.log_density(q, tgt, ws, g, st, True)
        p += 0.5 * eps * g
        state["n_grad_evals"] += 1
        h = -lp + kinetic(p)
        delta = h0 - (np.inf if np.isnan(h) else h)
        up = delta > np.log(0.8)
        if direction == 0:
            direction = 1 if up else -1
        elif (direction == 1) != up:
            break
        eps = eps * 2.0 if direction == 1 else eps * 0.5
        if eps > 1e7 or eps < 1e-12:
            break
    return eps


def _restart_step_size(chain, dense: bool) -> None:
    # new step size by the heuristic, then dual averaging restarted around 10x it (Stan)
    state = chain["arrays"].state[0]
    state["step_size"] = _init_step_size(chain, state["step_size"], dense)
    state["mu"] = np.log(10.0 * state["step_size"])
    state["log_step_size_bar"] = state["accept_gap_bar"] = 0.0
    state["n_adapt"] = 0


def _update_metric(arrays, dense: bool, grad_metric: bool) -> None:
    """End of a slow window: the regularized Welford estimate becomes the metric.

    ``arrays`` is a chain's :data:`skbnn.kernels.chain.Chain`; with ``grad_metric`` a
    diagonal metric balances the draws' variance against the gradients'. Stan's
    regularization shrinks the estimate towards 1e-3 I with the weight of five draws, which
    keeps it positive definite after short windows.
    """
    inv_m, sigma, chol = arrays.metric
    state, w_m2 = arrays.state[0], arrays.w_m2
    c = float(state["welford_count"])
    shrink, ridge = c / (c + 5.0), 1e-3 * 5.0 / (c + 5.0)
    if c < 2:
        # no variance from fewer than two draws: Stan's schedule gives a 1-draw last window
        # for 151 warm-up iterations, and the metric adapted so far is kept rather than
        # shrunk towards 1e-3 I with the weight of five draws
        pass
    elif dense:
        sigma[:] = shrink * (w_m2 / (c - 1.0)) + ridge * np.eye(inv_m.size)
        chol[:] = np.linalg.cholesky(sigma)
        inv_m[:] = np.diag(sigma)
    else:
        var = w_m2[0] / (c - 1.0)
        if grad_metric:
            # Nutpie's estimate: the geometric mean of the draws' variance and the inverse
            # of the gradients' variance (equal for a Gaussian with diagonal covariance)
            var_g = w_m2[2] / (c - 1.0)
            var = np.sqrt(var / np.maximum(var_g, 1e-300))
        inv_m[:] = shrink * var + ridge
    w_m2[:] = 0.0
    arrays.w_mean[:] = 0.0
    state["welford_count"] = 0


def _run_interleaved(
    chains: list[dict], n_blocks: int, advance, n_workers: int, stop_early=None, on_interrupt=None
) -> None:
    """Advance every chain through ``n_blocks`` blocks on ``n_workers`` threads.

    Each free thread takes the least advanced chain that no other thread holds, so chains
    progress together and no thread idles while work remains. A chain's blocks run in order
    and its state is its own, so the draws do not depend on the schedule.

    ``stop_early``, if given, is asked (under the scheduler's lock) before each block is
    handed out; when it returns a block count, sampling ends early: every chain completes
    the blocks it or any other chain has started, and at least that many, so all chains end
    at the same block. ``on_interrupt``: see :func:`~skbnn.utils.thread_map`.
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
                            started = max(c["pos"] + (i in busy) for i, c in enumerate(chains))
                            limit[0] = min(n_blocks, max(floor, started))
                    free = [i for i, c in enumerate(chains)
                            if i not in busy and c["pos"] < limit[0]]  # fmt: skip
                    if free:
                        i = min(free, key=lambda j: chains[j]["pos"])
                        busy.add(i)
                        break
                    if all(c["pos"] >= limit[0] for c in chains):
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
    )


class _ChainBlocks:
    """Runs one chain's blocks: the kernel, and the metric and step-size updates between
    them (where warm-up's windows end).

    Picklable, without its progress bar, so that a chain can run its blocks in another
    process: the kernel is found through the method's class, and a chain's state (arrays,
    kernel target, random generator) is all in the chain's dict, so the draws are the same
    bits wherever it runs.
    """

    def __init__(
        self, method, settings, moves, after, sched, stops, n_warmup, n_keep, dense, grad_metric
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
        self.dense = dense
        self.grad_metric = grad_metric
        self.bar = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "bar": None}

    def advance(self, chain: dict) -> None:
        """Run ``chain`` through its next block (starting it first if it is new)."""
        t0 = time.perf_counter()
        method, stops, sched, n_warmup = self.method, self.stops, self.sched, self.n_warmup
        walk = not method._uses_step_size
        arrays = chain["arrays"]
        state = arrays.state[0]
        if "ws" not in chain:
            chain["ws"] = aligned_empty(chain["ws_size"])
        if chain["pos"] == 0:
            # a random walk never reads the gradient
            g = arrays.grad[:0] if walk else arrays.grad
            state["logp"] = knet.log_density(
                arrays.q, chain["tgt"], chain["ws"], g, arrays.stats, not walk
            )
            state["n_grad_evals"] += 1
            if not walk:
                _restart_step_size(chain, self.dense)
        it, stop = (stops[chain["pos"] - 1] if chain["pos"] else 0), stops[chain["pos"]]
        first, last = it, stop
        if len(arrays.draws) < self.n_keep and it >= n_warmup:
            # a hot replica (one iteration per block) records into its only row
            first, last = n_warmup, n_warmup + 1
        kernel = type(method)._block_kernel
        stopped = kernel(
            chain["rng"], arrays, chain["tgt"], self.settings, sched, first, last, self.moves,
            self.after,
        )  # fmt: skip
        if stopped < last:
            # stopped by Ctrl-C (the driver's stop_chains): the fit is abandoned
            raise KeyboardInterrupt
        if stop == n_warmup:
            chain["warmup_grad_evals"] = int(state["n_grad_evals"])
        if stop <= n_warmup and sched[stop - 1, 1]:
            _update_metric(arrays, self.dense, self.grad_metric)
            _restart_step_size(chain, self.dense)
        if self.bar is not None:
            phase = "warmup" if stop <= n_warmup else "sampling"
            step_size = state["step_size"]
            self.bar.update(stop - it, phase if walk else f"{phase}, step size {step_size:.3g}")
        chain["pos"] += 1
        chain["it_done"] = stop
        chain["last"] = time.perf_counter() - t0
        chain["time"] += chain["last"]

    def finish(self, chain: dict) -> dict:
        """Run ``chain`` through all its remaining blocks; returns it without its scratch."""
        while chain["pos"] < len(self.stops):
            self.advance(chain)
        chain.pop("ws", None)
        return chain


def _run_elsewhere(blocks: _ChainBlocks, chains: list[dict], n_jobs) -> None:
    """Run every chain's remaining blocks as one task of joblib's active backend (a
    cluster's workers under ``parallel_config(backend="dask")``) and take their states
    back. Each task carries its chain and the data; a worker loads the compiled kernels
    from numba's cache (or compiles them once)."""
    from joblib import Parallel, delayed

    sent = [{k: v for k, v in c.items() if k != "ws"} for c in chains]
    done = Parallel(n_jobs=n_jobs)(delayed(blocks.finish)(c) for c in sent)
    for chain, new in zip(chains, done, strict=True):
        if blocks.bar is not None:
            blocks.bar.update(new["it_done"] - chain.get("it_done", 0), "sampled elsewhere")
        chain.clear()
        chain.update(new)


class _HMCFamily(BaseMethod):
    """Chain driver and warm-up shared by NUTS and HMC (not public)."""

    _parameter_constraints: dict = {
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "n_warmup": [Interval(Integral, 0, None, closed="left")],
        "target_accept": [Interval(Real, 0, 1, closed="neither")],
        "metric": [StrOptions({"diagonal", "dense", "diagonal_grad"})],
        "noise_update": [StrOptions({"marginal", "gibbs"})],
        "gibbs_output_layer": ["boolean"],
        "rescale_units": ["boolean"],
        # a small threshold would flag ordinary leaves as divergent, and cutting trajectories
        # at them depends on where the trajectory started, which breaks reversibility
        "max_delta_energy": [Interval(Real, 100, None, closed="left")],
        "init": [StrOptions({"prior", "map"})],
        "target_rhat": [Interval(Real, 1, None, closed="neither"), None],
        "target_ess": [Interval(Real, 1, None, closed="left"), None],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
    }

    @property
    def noise_handling(self) -> str:
        """How the target treats an unknown Gaussian noise: ``noise_update``."""
        return self.noise_update

    #: Whether the kernel integrates with a step size (tuned by Stan's heuristic and dual
    #: averaging) and adapts the metric over Stan's windows; a random walk does neither.
    _uses_step_size = True
    #: Whether a cold fit's helper process compiles the bookkeeping after each transition
    #: (:func:`skbnn.kernels.chain.compiled_after`) beside the network kernel: for NUTS,
    #: whose block kernel is otherwise the longer of the two processes' work; the other
    #: samplers' kernels compile in less than the helper's, so they compile it themselves.
    _after_aside = False

    def _settings(self) -> dict:
        """The kernel's fields of :data:`skbnn.kernels.chain.SETTINGS` (the driver sets the
        noise, metric, Gibbs-move and thinning fields)."""
        raise NotImplementedError

    def _betas(self) -> np.ndarray:
        """Inverse temperatures of each chain's replicas, 1 first, geometric to the hottest."""
        n_temps = getattr(self, "n_temperatures", 1)
        if n_temps == 1:
            return np.ones(1)
        return float(self.max_temperature) ** (-np.arange(n_temps) / (n_temps - 1))

    def _check_target(self, target) -> None:
        """Hook for method-specific checks or warnings about the target."""

    def _max_gradients(self) -> int:
        """The most gradient passes one iteration of a chain makes."""
        return 1

    def _warn_if_slow(self, target, n_replicas: int, n_iter: int, n_jobs) -> None:
        """A SlowFitWarning before sampling when the run may take over ``SLOW_FIT`` seconds
        here: a timed gradient pass (never part of the result) times the most passes the
        iterations may make, on the threads the chains share."""
        if not self._slow_warning or getattr(self, "max_time", None) is not None:
            return
        evaluate = target.evaluator()
        theta = _finite_start(target, np.random.default_rng(0))
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            evaluate(theta)
            times.append(time.perf_counter() - t0)
        threads = max(1, min(effective_n_jobs(n_jobs), n_replicas))
        passes = math.ceil(n_replicas / threads) * n_iter * self._max_gradients()
        projected = passes * min(times)
        if projected <= SLOW_FIT:
            return
        cls = type(self).__name__
        warn(
            f"{cls} may take up to {duration(projected)} here: {n_iter} iterations x "
            f"{n_replicas} chains on {threads} threads, each iteration up to "
            f"{self._max_gradients()} gradient passes over {target.n_rows} rows and "
            f"{target.n_params} parameters ({min(times) * 1e3:.2g} ms each). For an answer "
            "in seconds to minutes: method='auto' (the default; NUTS where it is fast, the "
            "deep ensemble beyond), method='ensemble' or method='vi'; method='laplace' also "
            f"gives the evidence. Or bound the sampling time: {self._fix(max_time=600)}.",
            SlowFitWarning,
        )

    @property
    def can_resume(self) -> bool:
        """Whether a fit's chains can be continued (``warm_start``): not with parallel
        tempering or sampling until converged."""
        knobs = ("target_rhat", "target_ess", "max_time")
        return getattr(self, "n_temperatures", 1) == 1 and all(
            getattr(self, k, None) is None for k in knobs
        )

    def run(self, target, n_samples, random_state, n_jobs, verbose, resume=None) -> FitResult:
        """Run ``n_chains`` chains in threads; keep ``n_samples`` draws in total.

        Each chain starts from its own draw from the prior (dispersed relative to the
        posterior, as R-hat assumes) with the prior variances as its initial inverse mass
        matrix, and is seeded by its own child of ``random_state``'s ``SeedSequence``, so the
        draws do not depend on ``n_jobs``. ``resume`` (a previous result's ``state``)
        continues those chains instead, to ``n_samples`` draws.
        """
        self._validate_params()
        t_start = time.perf_counter()
        n_chains = self.n_chains
        n_warmup = self.n_warmup
        n_keep = math.ceil(n_samples / n_chains)
        thin = getattr(self, "thin", 1)
        n_iter = n_warmup + n_keep * thin
        if resume is not None:
            # a private copy: a continuation that fails leaves the stored state as it was
            resume = copy.deepcopy(resume)
            if n_keep < resume["n_keep"]:
                raise ValueError(
                    f"warm_start=True continues the chains: n_samples={n_samples} must be at "
                    f"least the previous fit's {resume['n_samples']}"
                )
        dense = self.metric == "dense"
        # both exact moves use the conditionals of a Gaussian prior
        gaussian_prior = target.prior_kind == 0
        gaussian = target.likelihood == "gaussian" and target.noise != "theta"
        # only ReLU and identity units have the scale symmetry; no hidden layer, no units
        symmetric = target.activation in ("identity", "relu") and target.layout.n_layers > 1
        settings = kchain.make_settings(
            **self._settings(),
            noise_update={"gibbs": kchain.NOISE_GIBBS, "marginal": kchain.NOISE_MARGINAL}.get(
                target.noise, kchain.NOISE_FIXED
            ),
            dense=dense,
            gibbs_output_layer=self.gibbs_output_layer and gaussian and gaussian_prior,
            rescale_units=self.rescale_units and symmetric and gaussian_prior,
            thin=thin,
        )
        self._check_target(target)
        # None compiles the kernel without the moves this fit never makes
        moves = True if kchain.needs_moves(settings, target.hierarchical) else None
        after = kchain.compiled_after(target.kernel_target())
        compile_time = _ensure_compiled(
            self._block_kernel, moves, after, target.kernel_codes, self._after_aside
        )
        if self._uses_step_size:
            sched = stan_windows(n_warmup)
        else:
            sched = np.zeros((n_warmup, 2), dtype=np.uint8)
        d = target.n_params
        k = target.n_outputs
        n_hyper = target.layout.n_layers if target.hierarchical else 0

        n_temps = getattr(self, "n_temperatures", 1)
        betas = self._betas()

        root = seed_sequence(random_state)
        chain_seeds = root.spawn(n_chains)
        init_grad_evals, init_time = 0, 0.0
        starts = None
        if resume is not None:
            init_grad_evals, init_time = resume["init_grad_evals"], resume["init_time"]
        elif self.init == "map":
            # seeds of their own, spawned after the chains', so init="prior" is unchanged
            t0 = time.perf_counter()
            starts, init_grad_evals = map_starts(target, root.spawn(n_chains), n_jobs)
            init_time = time.perf_counter() - t0

        def new_chain(rng, beta, keep, start=None):
            # a hot replica's draws are never kept: it records each one over the last
            n_rows = n_keep if keep else 1
            init_var = np.ones(d)
            init_var[: target.layout.n_weights] = target.prior_var
            # the dense factors are (1, 1) placeholders for a diagonal metric, so both kinds
            # share one compiled kernel
            size = d if dense else 1
            metric = Metric(init_var, np.zeros((size, size)), np.zeros((size, size)))
            if dense:
                metric.sigma[:] = np.diag(init_var)
                metric.chol[:] = np.diag(np.sqrt(init_var))
            tgt = knet.density_target(target.kernel_target(own=True, padded=True))
            # relative to the target's own beta (0 samples the prior, as tests do)
            tgt.cfg[0]["beta"] *= beta
            q = _finite_start(target, rng) if start is None else start.copy()
            return {
                "rng": rng,
                # the kernels' arrays; the step-size search starts from 0.1
                "arrays": kchain.make_chain(q, 2 + k, metric, dense, n_rows, k + n_hyper),
                "tgt": tgt,
                "ws_size": knet.workspace_size(target.layout.sizes, padded_rows(target.n_rows)),
            }

        # chains[c] is chain c's replica at beta = 1; ladders[c] all of its replicas, coldest
        # first. The cold replica keeps chain c's seed, so n_temperatures=1 draws exactly
        # what it did before tempering existed; the hot ones and the swaps get children of it.
        chains, ladders, swap_rngs = [], [], []
        for c, child in enumerate(chain_seeds):
            start = None if starts is None else starts[c]
            ladder = [new_chain(np.random.default_rng(child), 1.0, True, start)]
            if n_temps > 1:
                kids = child.spawn(n_temps)
                swap_rngs.append(np.random.default_rng(kids[0]))
                ladder += [
                    new_chain(np.random.default_rng(s), b, False)
                    for s, b in zip(kids[1:], betas[1:], strict=True)
                ]
            chains.append(ladder[0])
            ladders.append(ladder)
        if resume is not None:
            # each chain as the previous fit left it: state, metric, noise and random
            # stream, with room for its new draws
            for chain, saved in zip(chains, resume["chains"], strict=True):
                a = saved["arrays"]
                rows = n_keep - a.draws.shape[0]
                chain["arrays"] = a._replace(
                    draws=np.vstack([a.draws, np.zeros((rows, a.draws.shape[1]))]),
                    trace=np.vstack([a.trace, np.zeros((rows, a.trace.shape[1]))]),
                    taus=np.vstack([a.taus, np.zeros((rows, a.taus.shape[1]))]),
                )
                chain["rng"] = saved["rng"]
                chain["tgt"].tau[:] = saved["tau"]
                chain["tgt"].cfg[:] = saved["cfg"]
                if target.hierarchical:
                    chain["tgt"].prior_scale[:] = saved["prior_scale"]
                if "warmup_grad_evals" in saved:
                    chain["warmup_grad_evals"] = saved["warmup_grad_evals"]
        replicas = [r for ladder in ladders for r in ladder]
        if resume is None:
            self._warn_if_slow(target, len(replicas), n_iter, n_jobs)

        bar = ProgressBar(len(replicas) * n_iter, verbose, f"{self.name.upper()} {n_chains} chains")
        n_workers = max(1, min(effective_n_jobs(n_jobs), len(replicas)))
        extends = self._extends()
        timed = extends and self.max_time is not None
        block = max(1, n_iter // 50) if verbose > 0 else n_iter
        if n_temps > 1:
            # replicas exchange states after every iteration
            block = 1
        elif n_workers < n_chains or timed:
            # more chains than threads: run short blocks so every thread can switch to the
            # least advanced chain; otherwise 3 chains on 2 threads take two chain-lengths.
            # With max_time, the first n_samples draws also end at the deadline, at the end
            # of a block, so a block is the most the run can overrun it by after warm-up.
            block = min(block, max(1, n_iter // 40))
        # blocks end at every window end, where the metric is updated between kernel calls
        # (and at the end of warm-up, to count its cost; blocks never change the draws)
        stops = sorted(
            {*range(block, n_iter, block), *(np.flatnonzero(sched[:, 1]) + 1), n_iter}
            | ({n_warmup} if 0 < n_warmup < n_iter else set())
        )
        if resume is not None:
            # the previous fit ran its iterations; the chains go on from there
            stops = [resume["n_iter"], *(x for x in stops if x > resume["n_iter"])]
        blocks = _ChainBlocks(
            self,
            settings,
            moves,
            after,
            sched,
            stops,
            n_warmup,
            n_keep,
            dense,
            self.metric == "diagonal_grad",
        )
        blocks.bar = bar
        advance = blocks.advance
        # chains go where joblib's backend sends its tasks when that is another process
        # (parallel_config(backend="dask"), "loky"); threads otherwise. Tempering's replicas
        # swap states every iteration and max_time needs one clock: both stay local.
        elsewhere = n_temps == 1 and not timed and backend_elsewhere()

        for chain in replicas:
            chain["pos"], chain["time"] = (0 if resume is None else 1), 0.0
        exchange = (
            _ReplicaExchange(
                ladders,
                swap_rngs,
                betas * target.beta,
                target,
                # rounds are single iterations. The ladder adapts at the metric's window
                # ends but the last, so the last (longest) window estimates every
                # replica's metric at its final beta; a new beta restarts the step size.
                adapt_rounds=np.flatnonzero(sched[:, 1])[:-1] if self._uses_step_size else [],
                on_new_beta=(lambda c: _restart_step_size(c, dense))
                if self._uses_step_size
                else None,
            )  # fmt: skip
            if n_temps > 1
            else None
        )

        # Warm-up always runs to its end (an unadapted chain samples badly), and a chain
        # keeps at least MIN_TIMED_DRAWS draws, so a deadline that passes before then ends
        # sampling at the first block past that point.
        min_stop = n_warmup + thin * min(n_keep, MIN_TIMED_DRAWS)
        min_blocks = next(i + 1 for i, s in enumerate(stops) if s >= min_stop)

        def stop_early():
            return min_blocks if time.perf_counter() >= t_budget + self.max_time else None

        def stop_chains():
            # every kernel reads this before each iteration (Ctrl-C in the main thread)
            settings[0]["interrupt"] = 1

        def run_serially(_):
            for chain in chains:
                while chain["pos"] < len(stops):
                    advance(chain)

        def run_all(first=False):
            # the kernels run on the pool, also with one thread: the main thread waits,
            # where it can hear Ctrl-C
            if exchange is not None:
                exchange.run(len(stops), n_warmup, advance, n_workers, stop_chains)
            elif elsewhere:
                _run_elsewhere(blocks, chains, n_jobs)
            elif n_workers == 1 and not timed:
                thread_map(run_serially, [None], 1, interruptible=True, on_interrupt=stop_chains)
            else:
                # with max_time, one thread also interleaves the chains, so that all of
                # them, not only the first, have sampled when the time runs out
                _run_interleaved(
                    chains,
                    len(stops),
                    advance,
                    n_workers,
                    stop_early if timed and first else None,
                    on_interrupt=stop_chains,
                )

        t_budget = time.perf_counter()
        try:
            run_all(first=True)
            cut = timed and chains[0]["pos"] < len(stops)
            if cut:
                # the deadline passed before the first n_samples draws were complete: keep
                # the complete draws of the blocks every chain ran
                del stops[chains[0]["pos"] :]
                n_keep = (stops[-1] - n_warmup) // thin
                blocks.n_keep = n_keep
                for chain in chains:
                    a = chain["arrays"]
                    chain["arrays"] = a._replace(
                        draws=a.draws[:n_keep], trace=a.trace[:n_keep], taus=a.taus[:n_keep]
                    )
            extension = None
            if extends:
                extension = self._extend_until_converged(
                    target, chains, stops, n_keep, thin, block, bar, run_all, t_budget, cut
                )
        finally:
            bar.close()
            for chain in replicas:
                chain.pop("ws", None)

        draws = np.concatenate([c["arrays"].draws for c in chains])[:n_samples]
        taus = np.concatenate([c["arrays"].taus for c in chains])[:n_samples]
        posterior = WeightedDraws(
            draws,
            noise_precision=taus[:, :k] if target.likelihood == "gaussian" else None,
            chain_shape=(n_chains, n_keep),
        )
        if n_hyper:
            posterior.prior_precision = taus[:, k:].copy()
        diagnostics = self._diagnostics(target, chains, n_keep)
        if exchange is not None:
            # the hot replicas' work is part of the cost of every kept draw
            diagnostics["n_grad_evals"] = int(sum(_grad_evals(c) for c in replicas))
            diagnostics["n_grad_evals_per_chain"] = np.array(
                [int(sum(_grad_evals(c) for c in ladder)) for ladder in ladders]
            )
            diagnostics["chain_time"] = np.array([sum(c["time"] for c in ld) for ld in ladders])
            diagnostics["tempering"] = exchange.summary()
        if extension is not None:
            diagnostics.update(extension)
        state = None
        if self.can_resume:
            state = {
                "n_keep": n_keep, "n_iter": n_iter, "n_samples": n_samples,
                "init_grad_evals": init_grad_evals, "init_time": init_time,
                "chains": [
                    {"rng": c["rng"], "arrays": c["arrays"], "tau": c["tgt"].tau.copy(),
                     "cfg": c["tgt"].cfg.copy(), "prior_scale": c["tgt"].prior_scale.copy(),
                     **({"warmup_grad_evals": c["warmup_grad_evals"]}
                        if "warmup_grad_evals" in c else {})}
                    for c in chains
                ],
            }  # fmt: skip
        diagnostics["compile_time"] = compile_time
        diagnostics["init"] = self.init
        diagnostics["init_grad_evals"] = init_grad_evals
        diagnostics["init_time"] = init_time
        # what the chains spent on warm-up (their MAP starts: init_grad_evals)
        diagnostics["warmup_grad_evals"] = int(sum(c.get("warmup_grad_evals", 0) for c in chains))
        diagnostics["wall_time"] = time.perf_counter() - t_start
        self._warn(diagnostics)
        return FitResult(posterior=posterior, diagnostics=diagnostics, state=state)

    def _extends(self) -> bool:
        """Whether sampling goes on until ``target_rhat`` / ``target_ess`` hold or
        ``max_time`` runs out (NUTS, HMC and MALA)."""
        knobs = [getattr(self, k, None) for k in ("target_rhat", "target_ess", "max_time")]
        if all(k is None for k in knobs):
            return False
        if getattr(self, "n_temperatures", 1) > 1:
            raise ValueError(
                "target_rhat, target_ess and max_time need n_temperatures=1: parallel "
                "tempering's replicas cannot be extended yet"
            )
        return True

    def _extend_until_converged(self, target, chains, stops, n_keep, thin, block, bar,
                                run_all, t_budget, cut) -> dict:  # fmt: skip
        """Extend every chain in blocks, with its adapted step size and metric, until R-hat
        and bulk ESS of the log-likelihood and the monitored outputs meet their targets,
        ``max_time`` is spent, or the chains hold as many draws as they may
        (``MAX_EXTENSION``, ``MAX_EXTENSION_BYTES``); then thin each chain evenly to its
        ``n_keep`` draws. Returns the diagnostics it adds."""
        target_rhat, target_ess = self.target_rhat, self.target_ess
        deadline = t_budget + self.max_time if self.max_time is not None else math.inf
        kept = n_keep
        a = chains[0]["arrays"]
        row_bytes = 8 * len(chains) * (a.draws.shape[1] + a.trace.shape[1] + a.taus.shape[1])
        cap = MAX_EXTENSION * n_keep
        if self.max_time is not None:
            cap = max(cap, MAX_EXTENSION_BYTES // row_bytes)
        round_times, round_starts, divergences = [], [], None
        last_cost = 0.0  # seconds per iteration of the last block
        while True:
            diag = self._diagnostics(target, chains, kept)
            worst_rhat = float(np.nanmax(np.append(diag["rhat_outputs"], diag["rhat_loglik"])))
            least_ess = float(np.nanmin(np.append(diag["ess_bulk_outputs"],
                                                  diag["ess_bulk_loglik"])))  # fmt: skip
            if np.isnan(diag["rhat_loglik"]):
                worst_rhat = math.inf
            bar.status = f"R-hat {worst_rhat:.3f}, ESS {least_ess:.0f}"
            bar.update(0, "extending")
            divergences = diag["divergences_per_chain"]
            met = (target_rhat is None or worst_rhat <= target_rhat) and (
                target_ess is None or least_ess >= target_ess
            )
            now = time.perf_counter()
            if met:
                # max_time alone: the run either finished its n_samples draws or was cut
                stopped = "targets_met"
                if target_rhat is None and target_ess is None:
                    stopped = "max_time" if cut else "n_samples"
                break
            if now >= deadline:
                stopped = "max_time"
                break
            if kept >= cap:
                stopped = "max_draws"
                break
            # as many draws as the ESS shortfall asks for (10 % over), at least a tenth of
            # those kept and at most as many again, and no more than the time left allows
            want = kept
            if target_ess is not None and least_ess > 0:
                want = math.ceil(1.1 * kept * (target_ess / least_ess - 1.0))
            rows = int(min(max(want, kept // 10, 10), kept, cap - kept))
            # the cost of an iteration: the mean so far (warm-up's shorter trajectories
            # included) or the last block's, whichever is higher, so that a block does not
            # overrun the deadline because the trajectories grew or the machine got busier
            per_iter = (now - t_budget) / max(1, chains[0]["it_done"])
            per_iter = max(per_iter, last_cost)
            if math.isfinite(deadline):
                # at most half the time left: the blocks shrink toward the deadline, and a
                # block that takes twice its estimate still ends by it
                rows = min(rows, int(0.5 * (deadline - now) / (per_iter * thin)))
            if rows < 1:
                stopped = "max_time"
                break
            last = stops[-1]
            for chain in chains:
                a = chain["arrays"]
                chain["arrays"] = a._replace(
                    draws=np.vstack([a.draws, np.zeros((rows, a.draws.shape[1]))]),
                    trace=np.vstack([a.trace, np.zeros((rows, a.trace.shape[1]))]),
                    taus=np.vstack([a.taus, np.zeros((rows, a.taus.shape[1]))]),
                )
            end = last + rows * thin
            stops.extend(range(last + block, end, block))
            stops.append(end)
            bar.extend(rows * thin * len(chains))
            # a round starts when it is decided, before the deadline: its time includes
            # growing the arrays
            round_starts.append(now - t_budget)
            run_all()
            round_times.append(time.perf_counter() - now)
            kept += rows
            last_cost = round_times[-1] / (rows * thin)
        n_sampled = kept
        if kept > n_keep:
            # even thinning to n_keep draws a chain: n_samples caps what is kept
            idx = np.round(np.linspace(0, kept - 1, n_keep)).astype(int)
            for chain in chains:
                a = chain["arrays"]
                chain["arrays"] = a._replace(draws=a.draws[idx], trace=a.trace[idx],
                                             taus=a.taus[idx])  # fmt: skip
        return {
            "stopped_because": stopped,
            "stop_rhat": worst_rhat,
            "stop_ess": least_ess,
            "n_draws_sampled_per_chain": n_sampled,
            # over every sampled transition, not only the kept ones
            "divergences": int(np.sum(divergences)),
            "divergences_per_chain": np.asarray(divergences),
            "extension_round_times": np.array(round_times),
            "extension_round_starts": np.array(round_starts),
            "budget_time": time.perf_counter() - t_budget,
        }

    def _diagnostics(self, target, chains, n_keep) -> dict:
        trace = np.stack([c["arrays"].trace for c in chains])  # (chains, draws, fields)
        field = {name: i for i, name in enumerate(kchain.TRACE_FIELDS)}
        states = [c["arrays"].state[0] for c in chains]
        loglik = trace[:, :, field["loglik"]]
        energy = trace[:, :, field["energy"]]
        out = {
            "method": self.name,
            "n_chains": len(chains),
            "n_warmup": self.n_warmup,
            "n_draws_per_chain": n_keep,
            "accept_rate": trace[:, :, field["accept_stat"]].mean(axis=1),
            "divergences": int(trace[:, :, field["divergent"]].sum()),
            "divergences_per_chain": trace[:, :, field["divergent"]].sum(axis=1).astype(int),
            "warmup_divergences": int(sum(s["warmup_divergences"] for s in states)),
            "n_grad_evals": int(sum(s["n_grad_evals"] for s in states)),
            "n_grad_evals_per_chain": np.array([int(s["n_grad_evals"]) for s in states]),
            "mean_n_leapfrog": trace[:, :, field["n_leapfrog"]].mean(axis=1),
            "chain_time": np.array([c["time"] for c in chains]),
            "inverse_mass_matrix": np.stack([c["arrays"].metric.inv_m for c in chains]),
            "loglik": loglik,
            "ess_bulk_loglik": ess_bulk(loglik),
            "ess_tail_loglik": ess_tail(loglik),
            "rhat_loglik": rhat(loglik),
        }
        if self._uses_step_size:
            out["step_size"] = np.array([s["step_size"] for s in states])
        if self.name in ("nuts", "hmc"):
            # E-BFMI needs the Hamiltonian at each resampled momentum; MALA's single step
            # and the random walk have none (their trace records NaN)
            out["e_bfmi"] = _e_bfmi(energy)
        if self.name == "nuts":
            depth = trace[:, :, field["tree_depth"]]
            out["mean_tree_depth"] = depth.mean(axis=1)
            out["max_tree_depth_hits"] = (depth >= self.max_tree_depth).sum(axis=1)
        rows = np.unique(np.linspace(0, target.n_rows - 1, min(5, target.n_rows)).astype(int))
        xt = target.XT.reshape(target.n_features, target.n_rows)[:, rows]
        thetas = np.concatenate([c["arrays"].draws for c in chains])
        outputs = np.empty((thetas.shape[0], target.n_outputs, rows.size))
        predict = knet.forward_batch_for(target.activation_code)
        knet.wait_for_helpers(predict)  # the fit's helper process may be compiling it
        predict(
            thetas, np.ascontiguousarray(xt).ravel(), target.layout.sizes,
            target.layout.offsets, rows.size, outputs,
        )  # fmt: skip
        monitored = _monitored_predictions(outputs, target.likelihood)
        monitored = monitored.reshape(len(chains), n_keep, *monitored.shape[1:])
        out["rhat_outputs"] = np.array(
            [[rhat(monitored[:, :, o, j]) for o in range(monitored.shape[2])]
             for j in range(rows.size)]
        )  # fmt: skip
        out["ess_bulk_outputs"] = np.array(
            [[ess_bulk(monitored[:, :, o, j]) for o in range(monitored.shape[2])]
             for j in range(rows.size)]
        )  # fmt: skip
        return out

    def _warn(self, diag: dict) -> None:
        message = self._convergence_message(diag)
        if message is not None:
            warn(message, ConvergenceWarning)

    def _convergence_message(self, diag: dict) -> str | None:
        """The ConvergenceWarning's text for a run's diagnostics, or None when nothing is
        wrong: the figures, then what went wrong and the knob that addresses it, by its
        full path (``method=NUTS(...)``: the method's knobs live on the method object)."""
        rhats = np.append(diag["rhat_outputs"], diag["rhat_loglik"])
        too_short = bool(np.isnan(rhats).any())
        worst = float(np.nanmax(rhats)) if not np.all(np.isnan(rhats)) else float("nan")
        divergent = self._uses_step_size and diag["divergences"] > 0
        n_kept = diag["n_chains"] * diag["n_draws_per_chain"]
        depth_share = 0.0
        if "max_tree_depth_hits" in diag and n_kept:
            depth_share = float(np.sum(diag["max_tree_depth_hits"])) / n_kept
        capped = depth_share > 0.05
        disagree = worst > RHAT_WARN
        if not (too_short or divergent or disagree):
            return None
        cls = type(self).__name__
        figures = [f"R-hat of the log-likelihood {diag['rhat_loglik']:.3f}"]
        if np.isfinite(np.nanmax(diag["rhat_outputs"], initial=-np.inf)):
            figures.append(
                f"max R-hat of training predictions {np.nanmax(diag['rhat_outputs']):.3f}"
            )
        figures.append(f"bulk ESS of the log-likelihood {diag['ess_bulk_loglik']:.0f}")
        if self._uses_step_size:
            figures.append(f"{diag['divergences']} divergent transitions after warm-up")
        if "mean_tree_depth" in diag:
            figures.append(
                f"mean tree depth {np.mean(diag['mean_tree_depth']):.1f} of "
                f"max_tree_depth={self.max_tree_depth}"
            )
        stopped = diag.get("stopped_because")
        out_of_time = stopped == "max_time"
        if stopped is not None:
            figures.append(
                f"after {diag['n_draws_sampled_per_chain']} draws per chain in "
                f"{diag['budget_time']:.0f} s (stopped_because={stopped!r})"
            )
        advice = []
        max_time = getattr(self, "max_time", None)
        longer_time = None if max_time is None else 2 * max_time
        if too_short:
            advice.append(
                f"too few draws to judge: {diag['n_draws_per_chain']} per chain, and split "
                "R-hat needs at least 4 (nan above); "
                + (
                    f"the time ran out first: {self._fix(max_time=longer_time)}"
                    if out_of_time
                    else f"raise the estimator's n_samples (now {n_kept} over "
                    f"{diag['n_chains']} chains)"
                )
            )
        if capped:
            advice.append(
                f"{depth_share:.0%} of the trajectories stopped at the depth cap: the "
                "posterior needs longer paths than the cap allows. Raise it, "
                f"{self._fix(max_tree_depth=self.max_tree_depth + 2)} (each level doubles "
                "the cost of a draw), or simplify the network"
            )
        if divergent:
            accept = round(min(0.99, 1 - (1 - self.target_accept) / 2), 3)
            advice.append(
                "divergent transitions: the step size is too large for parts of the "
                f"posterior; raise the acceptance target: {self._fix(target_accept=accept)}"
            )
        if disagree:
            text = (
                f"the chains disagree (R-hat up to {worst:.3f}, warn above {RHAT_WARN}): "
                "they sit in different regions of the posterior"
            )
            if out_of_time:
                text += (
                    f". If they were still approaching, give them more time: "
                    f"{self._fix(max_time=longer_time)}. {OUT_OF_REACH}"
                )
            elif stopped == "max_draws":
                text += (
                    f": {cls} held as many draws as it may without max_time; let time bound "
                    f"the run instead: {self._fix(max_time=600)}"
                )
            else:
                text += self._disagreement_advice(n_kept)
            advice.append(text)
        name = {"amcmc": "ADAPTIVE METROPOLIS"}.get(self.name, self.name.upper())
        sentences = " ".join(a[0].upper() + a[1:] + "." for a in advice)
        return f"{name} may not have converged: {', '.join(figures)}. {sentences}"

    def _disagreement_advice(self, n_kept: int) -> str:
        """What the warning advises when the chains disagree (appended to that sentence)."""
        return (
            f". If the chains are still approaching, run longer "
            f"({self._fix(n_warmup=2 * self.n_warmup)} and n_samples={2 * n_kept}), "
            "or let them run until they agree: "
            f"{self._fix(target_rhat=1.01, target_ess=400, max_time=600)} extends them "
            "in blocks and stops when R-hat and ESS meet their targets. If they sit "
            "in separate modes, more of the same rarely joins them: try "
            f"{self._fix(n_temperatures=4)} (parallel tempering), method='smc' (on up "
            "to a few thousand rows; it also returns the evidence), method='ensemble', "
            "or fewer hidden units"
        )


#: Constraints of the parallel-tempering parameters (NUTS and HMC).
TEMPERING_CONSTRAINTS: dict = {
    "n_temperatures": [Interval(Integral, 1, None, closed="left")],
    "max_temperature": [Interval(Real, 1, None, closed="left")],
}


# round-trip phases of a state in a tempering ladder
_NOT_STARTED, _LEFT_COLD, _REACHED_HOT = 0, 1, 2


class _ReplicaExchange:
    """Parallel tempering of each chain over a ladder of tempered replicas.

    Replica ``k`` of a chain targets ``prior * likelihood**beta_k`` (with the noise
    marginalized, the tempered likelihood integrated over the noise precision) with its own
    step size and mass matrix. After every iteration, neighbouring replicas propose to swap
    their states, alternately the even and the odd pairs (the deterministic even-odd scheme,
    which sends states through the ladder in one direction instead of a random walk; Syed et
    al. 2021), with the Metropolis ratio of the swap. Only the ``beta = 1`` replica's draws
    are kept; the hot ones let it cross between modes that a local sampler leaves rarely.

    At the end of each of Stan's slow warm-up windows but the last, each chain respaces its
    inner betas so every neighbouring pair rejects about equally often (Syed et al.'s
    schedule: equal steps of the cumulative rejection rate), which removes the bottleneck a
    geometric ladder has at the cold end; the last window then estimates each replica's
    metric at its final beta. A warm-up too short for two windows keeps the geometric
    ladder. The uniforms come from each chain's own generator, so the draws do not depend
    on the thread schedule.
    """

    def __init__(self, ladders, rngs, betas, target, adapt_rounds, on_new_beta=None):
        self.ladders, self.rngs, self.on_new_beta = ladders, rngs, on_new_beta
        n_chains, n_temps = len(ladders), len(betas)
        self.betas = np.tile(betas, (n_chains, 1))
        self.adapt_rounds = set(int(r) for r in adapt_rounds)
        self.attempts = np.zeros((n_chains, n_temps - 1))
        self.accepts = np.zeros((n_chains, n_temps - 1))
        # which initial state sits in each slot, and where each state is on its way: a round
        # trip is a state's way from the cold end to the hot one and back (Syed et al.)
        self.ids = [np.arange(n_temps) for _ in ladders]
        self.phase = [np.zeros(n_temps, dtype=np.int8) for _ in ladders]
        self.round_trips = np.zeros(n_chains, dtype=int)
        self._track_ends()
        self.marginal = target.likelihood == "gaussian" and target.noise == "marginal"
        # the kernel's own marginal likelihood, evaluated at other betas than a replica's
        self.n, self.k = target.weight_sum, target.n_outputs
        self.noise_prior = target.noise_prior
        self.hierarchical = target.hierarchical

    def _tempered_loglik(self, chain, beta: float) -> float:
        """The tempered log-likelihood of ``chain``'s state at inverse temperature ``beta``."""
        st = chain["arrays"].stats
        if self.marginal:
            # log int p(y | theta, tau)^beta Gamma(tau | a, b) dtau, from the state's SSR
            return knet.log_marginal(self.n, self.k, st, *self.noise_prior, beta)
        return beta * st[0]

    @staticmethod
    def _refresh(chain) -> None:
        # log density and gradient at the chain's state under its (new) state or beta
        arrays = chain["arrays"]
        state = arrays.state[0]
        state["logp"] = knet.log_density(
            arrays.q, chain["tgt"], chain["ws"], arrays.grad, arrays.stats, True
        )
        state["n_grad_evals"] += 1

    def _swap_states(self, x, y) -> None:
        # the state is the parameters, the noise precisions and a hierarchical prior's
        # scales; each replica keeps its temperature, step size and mass matrix
        pairs = [(x["arrays"].q, y["arrays"].q)]
        parts = ("prior_scale", "tau") if self.hierarchical else ("tau",)
        pairs += [(getattr(x["tgt"], name), getattr(y["tgt"], name)) for name in parts]
        for a, b in pairs:
            tmp = a.copy()
            a[:] = b
            b[:] = tmp
        self._refresh(x)
        self._refresh(y)

    def exchange(self, round_: int) -> None:
        """Propose the even (or odd) neighbour swaps of every chain after round ``round_``."""
        for c, ladder in enumerate(self.ladders):
            betas = self.betas[c]
            # one uniform per pair every round, used or not, keeps the streams aligned
            log_u = np.log(self.rngs[c].random(len(betas) - 1))
            ids = self.ids[c]
            for k in range(round_ % 2, len(betas) - 1, 2):
                x, y = ladder[k], ladder[k + 1]
                log_r = (
                    self._tempered_loglik(y, betas[k]) + self._tempered_loglik(x, betas[k + 1])
                    - self._tempered_loglik(x, betas[k]) - self._tempered_loglik(y, betas[k + 1])
                )  # fmt: skip
                self.attempts[c, k] += 1
                # a NaN ratio (a diverged state) compares false: rejected
                if log_u[k] < log_r:
                    self.accepts[c, k] += 1
                    self._swap_states(x, y)
                    ids[k], ids[k + 1] = ids[k + 1], ids[k]
        self._track_ends()
        if round_ in self.adapt_rounds:
            self._adapt()

    def _track_ends(self) -> None:
        """Advance each state's round-trip phase from where it now sits."""
        for c, ids in enumerate(self.ids):
            phase = self.phase[c]
            cold, hot = ids[0], ids[-1]
            if phase[hot] == _LEFT_COLD:
                phase[hot] = _REACHED_HOT
            if phase[cold] == _REACHED_HOT:
                self.round_trips[c] += 1
            phase[cold] = _LEFT_COLD

    def _adapt(self) -> None:
        """Respace each chain's inner betas to equal steps of cumulative rejection."""
        for c, ladder in enumerate(self.ladders):
            # (a prior-only target, beta = 0, has nothing to temper)
            if np.any(self.attempts[c] == 0) or self.betas[c, 0] <= 0.0:
                continue
            # a floor keeps the cumulative rate strictly increasing for the interpolation
            reject = np.maximum(1.0 - self.accepts[c] / self.attempts[c], 1e-3)
            cum = np.r_[0.0, np.cumsum(reject)]
            levels = np.linspace(0.0, cum[-1], len(cum))
            log_betas = np.interp(levels, cum, np.log(self.betas[c]))
            self.betas[c, 1:-1] = np.exp(log_betas[1:-1])
            for k, replica in enumerate(ladder[1:-1], start=1):
                replica["tgt"].cfg[0]["beta"] = self.betas[c, k]
                self._refresh(replica)
                if self.on_new_beta is not None:
                    self.on_new_beta(replica)
        self.attempts[:] = 0.0
        self.accepts[:] = 0.0

    def end_warmup(self) -> None:
        """Count swaps and round trips over the kept iterations only."""
        self.attempts[:] = 0.0
        self.accepts[:] = 0.0
        self.round_trips[:] = 0
        for phase in self.phase:
            phase[:] = _NOT_STARTED
        self._track_ends()

    def run(self, n_rounds: int, n_warmup_rounds: int, advance, n_workers: int,
            on_interrupt=None) -> None:  # fmt: skip
        """Advance every replica one block per round on ``n_workers`` threads, then exchange
        (``on_interrupt``: see :func:`~skbnn.utils.thread_map`)."""
        replicas = [r for ladder in self.ladders for r in ladder]
        for round_ in range(n_rounds):
            if round_ == n_warmup_rounds:
                self.end_warmup()
            # the slowest replicas first, so the threads finish a round together
            order = sorted(replicas, key=lambda r: -r.get("last", 0.0))
            thread_map(advance, order, n_workers, interruptible=True, on_interrupt=on_interrupt)
            self.exchange(round_)

    def summary(self) -> dict:
        """Ladders, swap acceptance per neighbouring pair and round trips, after warm-up."""
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = self.accepts / self.attempts
        return {
            "betas": self.betas.copy(),
            "swap_accept": rate,
            "round_trips": self.round_trips.copy(),
        }


def _grad_evals(chain) -> int:
    """Gradient (log-density, for a random walk) evaluations of a driver's chain so far."""
    return int(chain["arrays"].state[0]["n_grad_evals"])


#: The MAP start's budget (``init="map"``): L-BFGS iterations on up to
#: ``LBFGS_MAX_ROWS`` rows, else Adam epochs (at 0.01). A start, not a converged fit.
MAP_INIT_LBFGS_ITER = 200
MAP_INIT_EPOCHS = 20


def map_starts(target, seeds, n_jobs) -> tuple[list, int]:
    """One MAP estimate per seed, each from its own scikit-learn initialization, trained by
    the optimization methods' engine on the shared pool (``init="map"``).

    Returns the starts and the gradient evaluations they took. A start whose every attempt
    diverged (or that is not finite) falls back to a prior draw from the same seed.
    """
    from ..posterior import single_threaded_blas
    from ._optim import LBFGS_MAX_ROWS, glorot_init
    from .ensemble import DeepEnsemble

    lbfgs = target.n_rows <= LBFGS_MAX_ROWS
    trainer = DeepEnsemble(
        solver="lbfgs" if lbfgs else "adam",
        learning_rate_init=0.01,
        max_iter=MAP_INIT_LBFGS_ITER if lbfgs else MAP_INIT_EPOCHS,
        learning_rate="constant",
        early_stopping=False,
        heteroscedastic=False,
    )

    def start(target, rng):
        return glorot_init(target, rng), None, None

    train = trainer.member_trainer(target, start)

    def one(ss):
        member = train(ss)
        theta = None if member is None else member.theta
        if theta is None or not np.isfinite(target.logp(theta)):
            return _finite_start(target, np.random.default_rng(ss)), 0
        return theta, member.n_grad_evals

    # L-BFGS's vector operations are BLAS calls on tiny vectors (see the engine)
    with single_threaded_blas():
        out = thread_map(one, list(seeds), effective_n_jobs(n_jobs))
    return [theta for theta, _ in out], int(sum(n for _, n in out))


def _finite_start(target, rng, tries: int = 100) -> np.ndarray:
    """A prior draw with a finite log density (Stan likewise retries its initialization)."""
    for _ in range(tries):
        theta = target.sample_prior(rng, 1)[0]
        if np.isfinite(target.logp(theta)):
            return theta
    raise ValueError(
        f"no finite starting point in {tries} draws from the prior: the log-likelihood "
        "overflows; check X and y for extreme values (standardize X)"
    )


def _monitored_predictions(outputs: np.ndarray, likelihood: str) -> np.ndarray:
    """What the convergence diagnostics watch at the monitored rows, per draw.

    ``outputs`` are the network outputs, shape (draws, outputs, rows). Regression watches
    every output; a classifier its class probabilities, which are identified where softmax
    logits are not (adding a constant to every logit changes nothing). A binary classifier
    watches p(class 1) alone: p(class 0) = 1 - p(class 1) has the same R-hat and ESS.
    """
    if likelihood == "bernoulli":
        return expit(outputs)
    if likelihood == "categorical":
        return softmax(outputs, axis=1)
    return outputs


def _e_bfmi(energy: np.ndarray) -> np.ndarray:
    """Energy Bayesian fraction of missing information per chain (Betancourt 2016).

    NaN for a chain whose energies are not all finite (every transition diverged) or do not
    vary: there is nothing to judge the momentum resampling by.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        num = np.sum(np.diff(energy, axis=1) ** 2, axis=1)
        den = np.sum((energy - energy.mean(axis=1, keepdims=True)) ** 2, axis=1)
        out = num / den
    out[~np.all(np.isfinite(energy), axis=1)] = np.nan
    return out
