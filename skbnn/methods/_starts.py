"""Where the chains start: a finite prior draw, or a short MAP fit of their own."""

from __future__ import annotations

import numpy as np
from joblib import effective_n_jobs

from ..posterior import single_threaded_blas
from ..utils import thread_map
from ._optim import LBFGS_MAX_ROWS, glorot_init
from .ensemble import DeepEnsemble

#: The MAP start's budget (``init="map"``): L-BFGS iterations on up to
#: ``LBFGS_MAX_ROWS`` rows, else Adam epochs (at 0.01). A start, not a converged fit.
MAP_INIT_LBFGS_ITER = 200
MAP_INIT_EPOCHS = 20


def map_starts(target, seeds, n_jobs, converged: bool = False) -> tuple[list, int]:
    """One MAP estimate per seed, each from its own scikit-learn initialization, trained by
    the optimization methods' engine on the shared pool: a short fit (``init="map"``), or
    with ``converged`` one trained as a :class:`DeepEnsemble` member is, to its stopping
    rule (the optima of ``n_modes``).

    Returns the starts and the gradient evaluations they took. A start whose every attempt
    diverged (or that is not finite) falls back to a prior draw from the same seed.
    """
    lbfgs = target.n_rows <= LBFGS_MAX_ROWS
    if converged:
        trainer = DeepEnsemble(heteroscedastic=False)
    else:
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
            return finite_start(target, np.random.default_rng(ss)), 0
        return theta, member.n_grad_evals

    # L-BFGS's vector operations are BLAS calls on tiny vectors (see the engine)
    with single_threaded_blas():
        out = thread_map(one, list(seeds), effective_n_jobs(n_jobs))
    return [theta for theta, _ in out], int(sum(n for _, n in out))


def finite_start(target, rng, tries: int = 100) -> np.ndarray:
    """A prior draw with a finite log density (Stan likewise retries its initialization)."""
    for _ in range(tries):
        theta = target.sample_prior(rng, 1)[0]
        if np.isfinite(target.logp(theta)):
            return theta
    raise ValueError(
        f"no finite starting point in {tries} draws from the prior: the log-likelihood "
        "overflows; check X and y for extreme values (standardize X)"
    )
