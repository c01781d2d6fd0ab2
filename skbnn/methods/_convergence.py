"""Convergence of the HMC family's chains: diagnostics, the warning that reads them, and
sampling on until they meet their targets."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import NamedTuple

import numpy as np
from scipy import stats
from scipy.special import expit, ndtri, softmax

from .._data import MAX_FEATURE_RMS, feature_rms
from ..diagnostics import ess_bulk, ess_mean, ess_tail, rhat
from ..kernels import chain as kchain
from ..kernels import density as knet
from ..kernels.likelihoods import HETERO_MIN_VAR
from ._records import ChainDiagnostics, ModeFigures, PredictiveModes

#: The deepest tree NUTS accepts (``max_tree_depth``): 2**20 - 1 leapfrog steps a draw
MAX_TREE_DEPTH = 20

#: ``target_rhat`` / ``target_ess`` without ``max_time``: the chains grow to at most this
#: many times the ``n_samples`` they were asked for (``stopped_because="max_draws"``).
MAX_EXTENSION = 20
#: With ``max_time``, the fewest draws a chain keeps when the time runs out before its first
#: ``n_samples`` draws are complete.
MIN_TIMED_DRAWS = 20
#: With ``max_time``, time bounds the run, and the draws held while it grows (every draw,
#: its trace row and noise precisions, all chains) at most this many bytes.
MAX_EXTENSION_BYTES = 2**29
#: With several modes, a mode whose weight in the predictive is below this is not judged:
#: whatever its draws, it moves a predictive probability by less than this, and stacking
#: gives a chain stuck where it fits badly such a weight (Yao, Vehtari & Gelman 2022).
MIN_JUDGED_WEIGHT = 0.05
#: R-hat above this is reported as chains that disagree (Vehtari et al. 2021 recommend
#: 1.01 for final inference; 1.05 flags clear failures without crying wolf on short runs).
RHAT_WARN = 1.05
#: A ConvergenceWarning fires when the Monte Carlo error of the predictive at a monitored
#: training row exceeds this: ``sqrt(2 KL)`` of the estimated predictive from the exact
#: one (:func:`predictive_error`), for a Gaussian predictive ``sqrt(d**2 + 2 e**2)`` with
#: an error ``d`` sds in the mean and a relative error ``e`` in the sd. Below it the error
#: costs the predictive under ``ERROR_WARN**2 / 2 = 0.005`` nats of log density per row
#: and a 90 % interval under 0.2 points of coverage: less than any benchmark resolves.
#: Chains in separate modes are not an error of this kind: the predictive is their
#: mixture, as an ensemble's is of its members.
ERROR_WARN = 0.1
#: Targets at each monitored row at which the predictive density and its draws' are
#: compared (:func:`predictive_error`): on independent draws, its integral over them
#: came within 10 % of the closed form on average (tests/test_predictive_error.py).
DENSITY_POINTS = 512
#: Of those, every few whose autocovariances make the ESS: 64 sample the integral that
#: weighs them as well as 512 do, at an eighth of the FFTs.
ESS_POINTS = 64
#: At most this many densities of one mode's draws are held at once (32 MB), so that
#: very long chains are judged at fewer points.
DENSITY_CELLS = 2**22
#: The advice asks for this many times the draws the error's estimate says would reach
#: ``ERROR_WARN``: the estimate, from a few hundred draws, is itself uncertain.
DRAWS_MARGIN = 2.0
#: With several modes, a mode's chains whose log-likelihood's split R-hat (the halves of
#: each chain, within its mode) exceeds this are still drifting: their error falls more
#: slowly than one over the square root of their draws, so a coarse predictive asks for
#: more modes, whose independent chains lower it at that rate, not for more draws (which
#: left it above ``ERROR_WARN`` in about half the fits it was followed in).
RHAT_DRIFT = 1.1
#: A chain whose mean acceptance after warm-up is below this moved in a handful of its
#: draws: they are a few points, whatever its log-likelihood's spread (an inferred noise
#: varies it while the weights stay put).
STUCK_ACCEPT = 0.02


def monitored_predictions(outputs: np.ndarray, likelihood: str) -> np.ndarray:
    """What the convergence diagnostics watch at the monitored rows, per draw.

    ``outputs`` are the network outputs, shape (draws, outputs, rows). Regression watches
    every output; a classifier its class probabilities, which are identified where softmax
    logits are not (adding a constant to every logit changes nothing). A binary classifier
    watches p(class 1) alone: p(class 0) = 1 - p(class 1) has the same R-hat and ESS. A
    heteroscedastic network watches its means and its noise variances (the raw outputs of
    the variance head, monotone in the variance, so with the same ranks).
    """
    if likelihood == "bernoulli":
        return expit(outputs)
    if likelihood == "categorical":
        return softmax(outputs, axis=1)
    return outputs


def e_bfmi(energy: np.ndarray) -> np.ndarray:
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


class StopRule(NamedTuple):
    """When sampling goes on past the first ``n_samples`` draws: until ``target_rhat`` and
    ``target_ess`` hold or ``max_time`` seconds are spent (None: not a condition)."""

    target_rhat: float | None = None
    target_ess: float | None = None
    max_time: float | None = None

    @property
    def extends(self) -> bool:
        """Whether any condition is set, so that the chains may be extended."""
        return any(value is not None for value in self)


def _worst(diag: ChainDiagnostics) -> tuple[float, float]:
    """The highest R-hat and the lowest bulk ESS of the monitored quantities (an infinite
    R-hat when the log-likelihood's cannot be computed yet)."""
    diag = judged(diag)
    # fmax/fmin skip NaN, and give NaN without numpy's nanmax warning where every figure
    # is NaN (chains too short for split R-hat)
    worst_rhat = float(np.fmax.reduce(np.append(diag.rhat_outputs, diag.rhat_loglik)))
    least_ess = float(np.fmin.reduce(np.append(diag.ess_bulk_outputs, diag.ess_bulk_loglik)))
    if np.isnan(diag.rhat_loglik):
        worst_rhat = math.inf
    return worst_rhat, least_ess


def _wanted_rows(kept: int, least_ess: float, target_ess: float | None, cap: int) -> int:
    """Draws per chain for the next round: as many as the ESS shortfall asks for (10 %
    over), at least a tenth of those kept and at most as many again, within ``cap``."""
    want = kept
    if target_ess is not None and least_ess > 0:
        want = math.ceil(1.1 * kept * (target_ess / least_ess - 1.0))
    return int(min(max(want, kept // 10, 10), kept, cap - kept))


def _grow(chains, stops: list, rows: int, thin: int, block: int) -> None:
    """Room for ``rows`` more draws in every chain, and the blocks that sample them."""
    last = stops[-1]
    for chain in chains:
        chain.grow(rows)
    end = last + rows * thin
    stops.extend(range(last + block, end, block))
    stops.append(end)


def extend_until_converged(method, target, chains, stops, n_keep, thin, block, bar,
                           run_all, t_budget, cut) -> ChainDiagnostics:  # fmt: skip
    """Extend every chain in blocks, with its adapted step size and metric, until R-hat
    and bulk ESS of the log-likelihood and the monitored outputs meet their targets,
    ``max_time`` is spent, or the chains hold as many draws as they may
    (``MAX_EXTENSION``, ``MAX_EXTENSION_BYTES``); then thin each chain evenly to its
    ``n_keep`` draws. Returns the figures it adds."""
    target_rhat, target_ess, max_time = method._stop_rule()
    deadline = t_budget + max_time if max_time is not None else math.inf
    kept = n_keep
    a = chains[0].arrays
    row_bytes = 8 * len(chains) * (a.draws.shape[1] + a.trace.shape[1] + a.taus.shape[1])
    cap = MAX_EXTENSION * n_keep
    if max_time is not None:
        cap = max(cap, MAX_EXTENSION_BYTES // row_bytes)
    round_times, round_starts, divergences = [], [], None
    last_cost = 0.0  # seconds per iteration of the last block
    while True:
        diag = method._diagnostics(target, chains, kept)
        worst_rhat, least_ess = _worst(diag)
        bar.status = f"R-hat {worst_rhat:.3f}, ESS {least_ess:.0f}"
        bar.update(0, "extending")
        divergences = diag.divergences_per_chain
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
        rows = _wanted_rows(kept, least_ess, target_ess, cap)
        # the cost of an iteration: the mean so far (warm-up's shorter trajectories
        # included) or the last block's, whichever is higher, so that a block does not
        # overrun the deadline because the trajectories grew or the machine got busier
        per_iter = (now - t_budget) / max(1, chains[0].it_done)
        per_iter = max(per_iter, last_cost)
        if math.isfinite(deadline):
            # at most half the time left: the blocks shrink toward the deadline, and a
            # block that takes twice its estimate still ends by it
            rows = min(rows, int(0.5 * (deadline - now) / (per_iter * thin)))
        if rows < 1:
            stopped = "max_time"
            break
        _grow(chains, stops, rows, thin, block)
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
            chain.keep(idx)
    return ChainDiagnostics(
        stopped_because=stopped,
        stop_rhat=worst_rhat,
        stop_ess=least_ess,
        n_draws_sampled_per_chain=n_sampled,
        # over every sampled transition, not only the kept ones
        divergences=int(np.sum(divergences)),
        divergences_per_chain=np.asarray(divergences),
        extension_round_times=np.array(round_times),
        extension_round_starts=np.array(round_starts),
        budget_time=time.perf_counter() - t_budget,
    )


def chain_diagnostics(method, target, chains, n_keep) -> ChainDiagnostics:
    """The figures of ``chains`` (each with ``n_keep`` kept draws) that every sampler of
    the family reports, and those ``method``'s kernel adds."""
    trace = np.stack([c.arrays.trace for c in chains])  # (chains, draws, fields)
    field = {name: i for i, name in enumerate(kchain.TRACE_FIELDS)}
    states = [c.arrays.state[0] for c in chains]
    loglik = trace[:, :, field["loglik"]]
    X = target.XT.reshape(target.n_features, target.n_rows)
    out = ChainDiagnostics(
        method=method.name,
        n_chains=len(chains),
        n_warmup=method.n_warmup,
        n_draws_per_chain=n_keep,
        accept_rate=trace[:, :, field["accept_stat"]].mean(axis=1),
        divergences=int(trace[:, :, field["divergent"]].sum()),
        divergences_per_chain=trace[:, :, field["divergent"]].sum(axis=1).astype(int),
        warmup_divergences=int(sum(s["warmup_divergences"] for s in states)),
        n_grad_evals=int(sum(s["n_grad_evals"] for s in states)),
        n_grad_evals_per_chain=np.array([int(s["n_grad_evals"]) for s in states]),
        mean_n_leapfrog=trace[:, :, field["n_leapfrog"]].mean(axis=1),
        chain_time=np.array([c.time for c in chains]),
        inverse_mass_matrix=np.stack([c.arrays.metric.inv_m for c in chains]),
        loglik=loglik,
        ess_bulk_loglik=ess_bulk(loglik),
        ess_tail_loglik=ess_tail(loglik),
        rhat_loglik=rhat(loglik),
        # the largest feature root mean square: unscaled inputs narrow the posterior
        x_rms_max=float(feature_rms(X, axis=1).max()) if X.size else 0.0,
        likelihood=target.likelihood,
    )
    if method._uses_step_size:
        out.step_size = np.array([s["step_size"] for s in states])
    method._kernel_diagnostics(trace, field, out)
    rows = np.unique(np.linspace(0, target.n_rows - 1, min(5, target.n_rows)).astype(int))
    xt = X[:, rows]
    thetas = np.concatenate([c.arrays.draws for c in chains])
    outputs = np.empty((thetas.shape[0], target.layout.sizes[-1], rows.size))
    predict = knet.forward_batch_for(target.activation_code)
    predict(
        thetas, np.ascontiguousarray(xt).ravel(), target.layout.sizes,
        target.layout.offsets, rows.size, outputs,
    )  # fmt: skip
    monitored = monitored_predictions(outputs, target.likelihood)
    monitored = monitored.reshape(len(chains), n_keep, *monitored.shape[1:])
    out.rhat_outputs = _per_output(rhat, monitored)
    out.ess_bulk_outputs = _per_output(ess_bulk, monitored)
    if method._n_modes > 1:
        _mode_diagnostics(method, out, monitored)
    taus = np.stack([c.arrays.taus for c in chains])
    groups = method._mode_of_chain() if method._n_modes > 1 else np.arange(len(chains))
    out.predictive_modes = predictive_modes(
        groups,
        monitored,
        taus,
        target.likelihood,
        target.n_outputs,
        target.noise_df,
        target.min_var,
    )
    return out


def _variance_and_ess(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The variance and the ESS for the mean of each monitored quantity of ``x``, shape
    (chains, draws, outputs, rows); each of shape (rows, outputs). A quantity that does
    not vary has an ESS of 1: the chains may not have moved (where every mode's is
    constant, :func:`predictive_error` counts no error); one the chains are too short
    to judge (under 4 draws each) NaN."""
    var = x.var(axis=(0, 1)).T
    ess = _per_output(ess_mean, x)
    if x.shape[1] >= 4:
        ess[var == 0] = 1.0
    return var, ess


def _vector_ess(x: np.ndarray) -> float:
    """The ESS for the mean of a vector from its draws ``x`` of shape (chains, draws, k),
    split chains: NaN for chains too short to judge (under 4 draws) or not finite, 1 for
    draws that do not vary (chains that may not have moved)."""
    if x.shape[1] >= 4 and np.all(x == x.flat[0]):
        return 1.0
    return ess_mean(x)


def _noise_pdf(z: np.ndarray, noise_df: float | None) -> np.ndarray:
    """The noise's density at standardized residuals ``z`` (Student-t with ``noise_df``)."""
    if noise_df is None:
        return np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    nu = noise_df
    log_c = math.lgamma(0.5 * (nu + 1.0)) - math.lgamma(0.5 * nu) - 0.5 * math.log(nu * math.pi)
    return np.exp(log_c - 0.5 * (nu + 1.0) * np.log1p(z * z / nu))


def _points(f, scale, groups, modes, n_points: int, noise_df: float | None) -> np.ndarray:
    """``n_points`` targets drawn from the equal-weight mixture of the modes at each
    monitored row and output, shape (rows, outputs, points): a Halton sequence picks the
    mode, its draw and the noise's quantile, so the points are the same on any machine
    and stratified where a seeded draw would cluster."""
    u = stats.qmc.Halton(d=3, scramble=False).random(n_points + 1)[1:]
    z = ndtri(u[:, 2]) if noise_df is None else stats.t.ppf(u[:, 2], noise_df)
    y = np.empty((f.shape[3], f.shape[2], n_points))
    for j in range(n_points):
        m = modes[int(u[j, 0] * modes.size)]
        chains = np.flatnonzero(groups == m)
        k = int(u[j, 1] * chains.size * f.shape[1])
        c, d = chains[k // f.shape[1]], k % f.shape[1]
        y[:, :, j] = (f[c, d] + scale[c, d] * z[j]).T
    return y


def predictive_modes(groups, monitored, taus, likelihood: str, n_targets: int,
                     noise_df: float | None = None,
                     min_var: float = HETERO_MIN_VAR) -> PredictiveModes:  # fmt: skip
    """What the predictive's Monte Carlo error is judged by, per mode (a group of chains:
    ``groups[c]`` is chain ``c``'s), at each monitored row and output.

    Returns ``mean``, the mode's predictive mean (class probabilities for a classifier),
    with ``mean_var`` and ``mean_ess``, the variance of its draws and their ESS for it,
    of shape (modes, rows, outputs). For regression also the mode's predictive density
    (``density``) at ``DENSITY_POINTS`` targets drawn from the equal-weight mixture of
    the modes (``proposal``, its density there), the variance of its draws' densities
    (``density_var``) and their ESS for it (``density_ess``, one for all the points,
    weighted as :func:`predictive_error` weighs them).
    """
    if likelihood == "heteroscedastic":
        f = monitored[:, :, :n_targets]
        noise = np.logaddexp(0.0, monitored[:, :, n_targets:]) + min_var
    elif likelihood == "gaussian":
        f = monitored
        noise = np.broadcast_to((1.0 / taus[:, :, :n_targets])[..., None], f.shape)
    else:
        f, noise = monitored, None
    modes = np.unique(groups)
    shape = (modes.size, f.shape[3], f.shape[2])
    out = PredictiveModes(mean=np.empty(shape), mean_var=np.empty(shape), mean_ess=np.empty(shape))
    for i, m in enumerate(modes):
        x = f[groups == m]
        out.mean[i] = x.mean(axis=(0, 1)).T
        out.mean_var[i], out.mean_ess[i] = _variance_and_ess(x)
    if noise is None:
        return out
    # the noise's scale: its sd, or the Student-t's scale (the kernel's variance term)
    scale = np.sqrt(noise)
    # fewer points where a mode holds very many draws: their densities fit in memory
    largest = max(int(np.sum(groups == m)) for m in modes) * f.shape[1]
    n_points = int(np.clip(DENSITY_CELLS // largest, 16, DENSITY_POINTS))
    y = _points(f, scale, groups, modes, n_points, noise_df)
    out.density, out.density_var = (np.empty((*shape, n_points)) for _ in range(2))
    out.density_ess = np.empty(shape)

    # each mode's draws, gathered once: a boolean index copies them
    f_modes = [f[groups == m] for m in modes]
    scale_modes = [scale[groups == m] for m in modes]

    def densities(i, r, o, points=slice(None)):
        """The density of each of mode ``i``'s draws at row ``r``'s, output ``o``'s
        ``points``, shape (chains, draws, points)."""
        s = scale_modes[i][:, :, o, r, None]
        return _noise_pdf((y[r, o, points] - f_modes[i][:, :, o, r, None]) / s, noise_df) / s

    for r, o in np.ndindex(f.shape[3], f.shape[2]):
        for i in range(modes.size):
            d = densities(i, r, o)
            out.density[i, r, o] = d.mean(axis=(0, 1))
            out.density_var[i, r, o] = d.var(axis=(0, 1))
    out.proposal = out.density.mean(axis=0)
    # the ESS, one number, from every few points: they sample the same integral
    every = slice(None, None, max(1, n_points // ESS_POINTS))
    for r, o in np.ndindex(f.shape[3], f.shape[2]):
        q = out.proposal[r, o, every]
        for i in range(modes.size):
            # the ESS of the densities' mean in the norm predictive_error sums them by
            out.density_ess[i, r, o] = _vector_ess(densities(i, r, o, every) / q)
    return out


def predictive_error(diag: ChainDiagnostics) -> np.ndarray:
    """The Monte Carlo error of the predictive at each monitored row and output, in units
    of the predictive sd (see ``ERROR_WARN``); shape (rows, outputs).

    The predictive is the mixture of the modes (with several modes, by their weights;
    otherwise each chain is a mode of equal weight), and its error combines the modes'
    own: chains in separate modes add to the predictive's spread, not to its error.

    For regression it is ``sqrt(2 KL)``, the expected Kullback-Leibler divergence of the
    estimated predictive density ``p^`` from the exact ``p``, to second order
    ``integral of Var(p^(y)) / p(y) dy``; the integral is over the targets the modes'
    densities were evaluated at (importance-weighted from the equal-weight mixture). For
    a Gaussian predictive with an error ``d`` sds in its mean and a relative error ``e``
    in its sd this is ``sqrt(d**2 + 2 e**2)``; unlike a sum of the mean's and the sd's
    errors it stays finite where a few draws of a heavy-tailed noise rule the
    predictive's variance but not its density. A classifier's error in a class
    probability ``p`` is in units of ``sqrt(p (1 - p))``, the Bernoulli form of the same
    cost.
    """
    pm = diag.predictive_modes
    n = pm.mean.shape[0]
    weights = diag.mode_weights if diag.mode_weights is not None else np.full(n, 1.0 / n)
    w = np.asarray(weights)[:, None, None]

    def combined(own_var, ess, w):
        """Each mode's variance of the mean from its ESS and the larger of its own draws'
        variance and the modes' average, since a chain that hardly moves has a small
        variance as well as a small ESS; weighted by the squared weights. A mode of
        weight 0 adds none, however short its chains."""
        average = np.sum(np.where(w > 0, w * own_var, 0.0), axis=0)
        var = np.maximum(own_var, average)
        with np.errstate(divide="ignore", invalid="ignore"):
            # a mode too short to judge (NaN ESS) leaves the error unknown, not 0
            terms = np.where((var == 0) & ~np.isnan(ess), 0.0, w**2 * var / ess)
        return np.sum(np.where(w > 0, terms, 0.0), axis=0)

    if pm.density is None:
        mean = np.sum(w * pm.mean, axis=0)
        mcse = np.sqrt(combined(pm.mean_var, pm.mean_ess, w))
        with np.errstate(divide="ignore", invalid="ignore"):
            # an error of exactly 0 is none, even where the predictive does not vary
            return np.where(mcse == 0, 0.0, mcse / np.sqrt(mean * (1.0 - mean)))
    w = w[..., None]
    density = np.sum(w * pm.density, axis=0)
    var = combined(pm.density_var, pm.density_ess[..., None], w)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(var == 0, 0.0, var / (density * pm.proposal))
    # a point far in the tails, where a few draws make the density, can weigh more than
    # all the rest: truncated at 4 sqrt(points) times the mean (as Ionides 2008 truncates
    # importance weights), the integral's noise stays bounded and its bias vanishes as
    # the points grow
    cap = 4.0 * np.sqrt(ratio.shape[-1]) * np.mean(ratio, axis=-1, keepdims=True)
    return np.sqrt(np.mean(np.minimum(ratio, cap), axis=-1))


def _per_output(statistic, monitored: np.ndarray) -> np.ndarray:
    """``statistic`` (R-hat or an ESS) of each monitored output at each monitored row, from
    ``monitored`` of shape (chains, draws, outputs, rows); shape (rows, outputs)."""
    n_out, n_rows = monitored.shape[2], monitored.shape[3]
    return np.array(
        [[statistic(monitored[:, :, o, j]) for o in range(n_out)] for j in range(n_rows)]
    )


def _mode_diagnostics(method, out: ChainDiagnostics, monitored: np.ndarray) -> None:
    """Add the figures of each mode's chains alone to ``out``: R-hat and ESS within a
    mode, where chains started at one optimum can agree, while chains in separate modes
    never do in a run's time (their R-hat across modes stays in ``rhat_loglik``)."""
    mode_of_chain = method._mode_of_chain()
    loglik = out.loglik
    modes = []
    for m in range(method._n_modes):
        c = np.flatnonzero(mode_of_chain == m)
        modes.append(
            ModeFigures(
                chains=c,
                rhat_loglik=rhat(loglik[c]),
                rhat_outputs=_per_output(rhat, monitored[c]),
                ess_bulk_loglik=ess_bulk(loglik[c]),
                ess_bulk_outputs=_per_output(ess_bulk, monitored[c]),
                divergences=int(out.divergences_per_chain[c].sum()),
                mean_loglik=float(np.mean(loglik[c])),
            )
        )
    out.n_modes = method._n_modes
    out.mode_of_chain = mode_of_chain
    out.modes = modes
    out.rhat_loglik_within_modes = max(m.rhat_loglik for m in modes)


def judged(diag: ChainDiagnostics) -> ChainDiagnostics:
    """The figures that convergence is judged by: with several modes, each mode's own
    (the worst R-hat and the least ESS within any mode that carries at least
    ``MIN_JUDGED_WEIGHT`` of the predictive); else all chains together."""
    if diag.modes is None:
        return diag
    # with more than 20 equally weighted modes none reaches the bar: then judge them all
    modes = [m for m in diag.modes if (m.weight is None or m.weight >= MIN_JUDGED_WEIGHT)]
    modes = modes or diag.modes
    return replace(
        diag,
        rhat_loglik=max(m.rhat_loglik for m in modes),
        rhat_outputs=np.fmax.reduce([m.rhat_outputs for m in modes]),
        ess_bulk_loglik=min(m.ess_bulk_loglik for m in modes),
        ess_bulk_outputs=np.fmin.reduce([m.ess_bulk_outputs for m in modes]),
    )


def _figures(method, diag: ChainDiagnostics, error: float | None) -> list[str]:
    """The figures a ConvergenceWarning opens with (with several modes, within them)."""
    within = " within modes" if diag.modes is not None else ""
    diag = judged(diag)
    figures = []
    if error is not None and np.isfinite(error):
        figures.append(f"Monte Carlo error of the predictive up to {error:.3f} of its sd")
    figures.append(f"R-hat of the log-likelihood{within} {diag.rhat_loglik:.3f}")
    if np.isfinite(np.nanmax(diag.rhat_outputs, initial=-np.inf)):
        figures.append(f"max R-hat of training predictions {np.nanmax(diag.rhat_outputs):.3f}")
    figures.append(f"bulk ESS of the log-likelihood {diag.ess_bulk_loglik:.0f}")
    if method._uses_step_size:
        figures.append(f"{diag.divergences} {method._divergent_unit} after warm-up")
    if diag.mean_tree_depth is not None:
        figures.append(
            f"mean tree depth {np.mean(diag.mean_tree_depth):.1f} of "
            f"max_tree_depth={method.max_tree_depth}"
        )
    stopped = diag.stopped_because
    if stopped is not None:
        figures.append(
            f"after {diag.n_draws_sampled_per_chain} draws per chain in "
            f"{diag.budget_time:.0f} s (stopped_because={stopped!r})"
        )
    return figures


def _growth(error: float) -> float:
    """How many times its independent draws a predictive error ``error`` needs to fall
    under ``ERROR_WARN`` with ``DRAWS_MARGIN`` to spare: the error falls as one over their
    square root. An infinite error (a predictive of sd 0 whose draws still vary): ten."""
    return DRAWS_MARGIN * (error / ERROR_WARN) ** 2 if math.isfinite(error) else 10


def wanted_draws(n_kept: int, n_chains: int, error: float) -> int:
    """The estimator's ``n_samples`` that brings a predictive error ``error`` (from
    ``n_kept`` draws) under ``ERROR_WARN`` (:func:`_growth`). A whole number of draws per
    chain."""
    per_chain = math.ceil(n_kept / n_chains * _growth(error))
    return n_chains * max(per_chain, math.ceil(n_kept / n_chains) + 1)


def wanted_modes(n_modes: int, error: float) -> int:
    """The ``n_modes`` that brings a predictive error ``error`` (over ``n_modes`` modes of
    equal weight) under ``ERROR_WARN`` (:func:`_growth`) at the same draws per chain: the
    modes' chains are independent draws of the mixture."""
    return max(math.ceil(n_modes * _growth(error)), n_modes + 1)


def convergence_message(method, diag: ChainDiagnostics) -> str | None:
    """The ConvergenceWarning's text for a run's diagnostics, or None when nothing is
    wrong: the figures, then what went wrong and the knob that addresses it, by its
    full path (``method=NUTS(...)``: the method's knobs live on the method object).

    A run is wrong when its draws are too few to judge, when trajectories diverged, or
    when the Monte Carlo error of the predictive is material (``ERROR_WARN``). Chains
    that disagree because they sit in separate modes do not warn: the predictive is
    their mixture, and its error is judged within each mode (each chain, when the
    chains were not started at ``n_modes`` optima). A coarse predictive asks for the
    draws that make it precise by the square-root law; with several modes whose chains
    are still drifting (``RHAT_DRIFT``), for more modes instead."""
    error = None
    if diag.predictive_modes is not None:
        errors = predictive_error(diag)
        error = float(np.nanmax(errors)) if not np.all(np.isnan(errors)) else float("nan")
    figures = _figures(method, diag, error)
    diag = judged(diag)
    rhats = np.append(diag.rhat_outputs, diag.rhat_loglik)
    divergent = method._uses_step_size and diag.divergences > 0
    n_kept = diag.n_chains * diag.n_draws_per_chain
    depth_share = 0.0
    if diag.max_tree_depth_hits is not None and n_kept:
        depth_share = float(np.sum(diag.max_tree_depth_hits)) / n_kept
    capped = depth_share > 0.05
    coarse = error is not None and error > ERROR_WARN
    # a chain whose every proposal after warm-up was rejected holds one point: its
    # variance and its error both look like 0
    loglik = diag.loglik
    stuck_chains = np.zeros(diag.n_chains, dtype=bool)
    if loglik is not None and loglik.shape[1] >= 4:
        stuck_chains |= np.ptp(loglik, axis=1) == 0
    # judged from enough draws that such a rate means a move or none, not bad luck; where
    # trajectories diverged after a warm-up, the step size it adapted is the cause, and
    # the divergence advice names it
    judged_rate = diag.n_draws_per_chain >= 1 / STUCK_ACCEPT
    if judged_rate and np.size(diag.accept_rate) == diag.n_chains:
        if not divergent or method.n_warmup == 0:
            stuck_chains |= np.asarray(diag.accept_rate) < STUCK_ACCEPT
    stuck = int(np.sum(stuck_chains))
    # NaN figures: chains too short to judge, unless a chain that never moved made them
    too_short = not stuck and (
        bool(np.isnan(rhats).any()) or (error is not None and np.isnan(error))
    )
    # chains that never moved are the predictive's error too: their warm-up, not more
    # draws of the same chains, mends it (the figure still reports the error)
    coarse = coarse and not too_short and not stuck
    # judged within each mode, where chains started at one optimum can agree
    drifting = diag.modes is not None and diag.rhat_loglik > RHAT_DRIFT
    if not (too_short or divergent or coarse or stuck):
        return None
    # out of time before the chains drew more than they keep: a longer run adds kept
    # draws. Thinned from a longer run (out of time later, or at the draw cap), more kept
    # draws, not a longer run, lower the error
    thinned = (diag.n_draws_sampled_per_chain or 0) > diag.n_draws_per_chain
    out_of_time = diag.stopped_because == "max_time" and not thinned
    advice = []
    max_time = method._stop_rule().max_time
    longer_time = None if max_time is None else 2 * max_time
    if too_short:
        advice.append(
            f"too few draws to judge: {diag.n_draws_per_chain} per chain, and split "
            "R-hat needs at least 4 (nan above); "
            + (
                f"the time ran out first: {method._fix(max_time=longer_time)}"
                if out_of_time
                else (
                    f"raise the estimator's n_samples to n_samples={4 * diag.n_chains} or "
                    f"more (now {n_kept} over {diag.n_chains} chains)"
                )
            )
        )
    if stuck:
        # doubled, or the sampler's default where there was none at all
        default_warmup = type(method)().n_warmup
        advice.append(
            f"{stuck} of {diag.n_chains} chains never moved after warm-up (their "
            f"proposals were rejected, all or over {1 - STUCK_ACCEPT:.0%} of them): their "
            "step size or metric adapted poorly; "
            + ("lengthen the warm-up: " if method.n_warmup else "give them a warm-up: ")
            + f"{method._fix(n_warmup=2 * method.n_warmup or default_warmup)}"
        )
    if coarse:
        text = (
            "the draws estimate the predictive too coarsely: its Monte Carlo error at a "
            f"training row reaches {error:.3f} of the predictive sd (warn above "
            f"{ERROR_WARN}, where it costs {ERROR_WARN**2 / 2:.3g} nats of log density "
            "per row)"
        )
        if out_of_time:
            text += f"; give the chains more time: {method._fix(max_time=longer_time)}"
        elif drifting:
            fix, n_chains = method._more_modes_fix(wanted_modes(diag.n_modes, error))
            text += (
                f"; the halves of a chain disagree within its mode (R-hat of the "
                f"log-likelihood within modes {diag.rhat_loglik:.2f}), so more draws of the "
                "same chains lower the error more slowly than the square root of their "
                "number; sample more modes, whose independent chains lower it at that "
                f"rate, with as many draws each: {fix} and the estimator's "
                f"n_samples={diag.n_draws_per_chain * n_chains} (now {n_kept})"
            )
        else:
            text += method._coarse_advice(n_kept, wanted_draws(n_kept, diag.n_chains, error))
        advice.append(text)
    if capped:
        depth = min(method.max_tree_depth + 2, MAX_TREE_DEPTH)
        advice.append(
            f"{depth_share:.0%} of the trajectories stopped at the depth cap: the "
            "posterior needs longer paths than the cap allows. "
            + (
                f"Raise it, {method._fix(max_tree_depth=depth)} (each level doubles the "
                "cost of a draw), or simplify the network"
                if depth > method.max_tree_depth
                else f"The cap is at its largest ({MAX_TREE_DEPTH}): simplify the network"
            )
        )
    # without warm-up the advice is one (the stuck chains' when there are any): the
    # acceptance target acts through the warm-up's step-size adaptation
    if divergent and method.n_warmup:
        advice.append(method._divergence_advice())
    elif divergent and not stuck:
        advice.append(
            "divergent transitions: without warm-up the step size is never adapted; "
            f"add one: {method._fix(n_warmup=type(method)().n_warmup)}"
        )
    rms = diag.x_rms_max or 0.0
    if rms > MAX_FEATURE_RMS:
        regression = diag.likelihood in ("gaussian", "heteroscedastic")
        estimator = "BayesianMLPRegressor" if regression else "BayesianMLPClassifier"
        # the cause the other advice cannot mend: followed first, it often ends the rest
        advice.insert(
            0,
            f"the inputs are far from standardized (a feature's root mean square is "
            f"{rms:.3g}), which narrows the posterior in some directions and makes every "
            "trajectory long; longer paths or runs treat the symptom. Scale them first: "
            f"make_pipeline(StandardScaler(), {estimator}(...)); if it still "
            "warns once scaled, the advice below applies",
        )
    name = method._title()
    sentences = " ".join(a[0].upper() + a[1:] + "." for a in advice)
    return f"{name} may not have converged: {', '.join(figures)}. {sentences}"
