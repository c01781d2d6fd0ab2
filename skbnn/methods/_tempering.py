"""Parallel tempering of the HMC family's chains: replica exchange over a ladder."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ..kernels import density as knet
from ..log_posterior import NoiseMode
from ..utils import thread_map

#: Constraints of the parallel-tempering parameters (NUTS and HMC).
TEMPERING_CONSTRAINTS: dict = {
    "n_temperatures": [Interval(Integral, 1, None, closed="left")],
    "max_temperature": [Interval(Real, 1, None, closed="left")],
}


def ladder_betas(n_temperatures: int, max_temperature: float) -> np.ndarray:
    """Inverse temperatures of a chain's replicas, 1 first, geometric to the hottest."""
    if n_temperatures == 1:
        return np.ones(1)
    n_temps = n_temperatures
    return float(max_temperature) ** (-np.arange(n_temps) / (n_temps - 1))


# round-trip phases of a state in a tempering ladder
_NOT_STARTED, _LEFT_COLD, _REACHED_HOT = 0, 1, 2


class ReplicaExchange:
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
        self.marginal = target.likelihood == "gaussian" and target.noise == NoiseMode.MARGINAL
        # the kernel's own marginal likelihood, evaluated at other betas than a replica's
        self.n, self.k = target.weight_sum, target.n_outputs
        self.noise_prior = target.noise_prior
        self.hierarchical = target.hierarchical

    def _tempered_loglik(self, chain, beta: float) -> float:
        """The tempered log-likelihood of ``chain``'s state at inverse temperature ``beta``."""
        st = chain.arrays.stats
        if self.marginal:
            # log int p(y | theta, tau)^beta Gamma(tau | a, b) dtau, from the state's SSR
            return knet.log_marginal(self.n, self.k, st, *self.noise_prior, beta)
        return beta * st[0]

    @staticmethod
    def _refresh(chain) -> None:
        # log density and gradient at the chain's state under its (new) state or beta
        arrays = chain.arrays
        state = arrays.state[0]
        state["logp"] = knet.log_density(
            arrays.q, chain.tgt, chain.ws, arrays.grad, arrays.stats, True
        )
        state["n_grad_evals"] += 1

    def _swap_states(self, x, y) -> None:
        # the state is the parameters, the noise precisions and a hierarchical prior's
        # scales; each replica keeps its temperature, step size and mass matrix
        pairs = [(x.arrays.q, y.arrays.q)]
        parts = ("prior_scale", "tau") if self.hierarchical else ("tau",)
        pairs += [(getattr(x.tgt, name), getattr(y.tgt, name)) for name in parts]
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
                replica.tgt.cfg[0]["beta"] = self.betas[c, k]
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
            order = sorted(replicas, key=lambda r: -r.last)
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
