"""BlackJAX's MCLMC on the log density of a skbnn ``LogPosterior``: the same model, evaluated
by the same code, so that a comparison with skbnn's MCLMC is one of samplers alone.

The density and its gradient reach JAX through ``jax.pure_callback`` (a custom VJP hands
back the gradient skbnn's kernels computed with the density), so BlackJAX runs its own
MCLMC (``blackjax.mcmc.mclmc`` with its default McLachlan integrator, two gradients a
step) and its own tuning (``blackjax.mclmc_find_L_and_step_size``: energy variance
5e-4 per parameter, a diagonal preconditioner, then ``L`` from the autocorrelation), one
chain at a time. Every call of the density is counted, so the gradient counts are exact.
Wall time is not comparable (each evaluation crosses from XLA to Python); ESS per
gradient is.

Needs JAX and BlackJAX (``pip install blackjax``; bde pins one). Float64 throughout.
"""

from __future__ import annotations

import time

import numpy as np


def available() -> bool:
    """Whether JAX and BlackJAX import here."""
    try:
        import blackjax  # noqa: F401
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


class _Counted:
    """The target's log density and gradient, counting the evaluations."""

    def __init__(self, target):
        self.target = target
        self.n = 0

    def __call__(self, x):
        self.n += 1
        logp, grad = self.target.logp_and_grad(np.asarray(x, dtype=np.float64))
        return np.float64(logp), np.asarray(grad, dtype=np.float64)


def _logdensity(counted: _Counted, d: int):
    import jax
    import jax.numpy as jnp

    shapes = (jax.ShapeDtypeStruct((), jnp.float64), jax.ShapeDtypeStruct((d,), jnp.float64))

    def both(x):
        return jax.pure_callback(counted, shapes, x)

    @jax.custom_vjp
    def logdensity(x):
        return both(x)[0]

    def forward(x):
        logp, grad = both(x)
        return logp, grad

    def backward(grad, cotangent):
        return (cotangent * grad,)

    logdensity.defvjp(forward, backward)
    return logdensity


def sample(target, start, n_chains: int, n_steps: int, thin: int, seed: int) -> dict:
    """``n_chains`` BlackJAX MCLMC chains from ``start``, each tuned for ``n_steps``
    sampling steps, keeping every ``thin``-th.

    Returns the kept draws ``(n_chains, n_steps // thin, d)``, the gradient evaluations of
    tuning and of sampling (summed over chains), each chain's ``L`` and step size, and the
    wall seconds.
    """
    import jax

    jax.config.update("jax_enable_x64", True)
    import blackjax
    import jax.numpy as jnp

    d = int(target.n_params)
    counted = _Counted(target)
    logdensity = _logdensity(counted, d)
    draws, tune_grads, sample_grads, ls, steps = [], 0, 0, [], []
    t0 = time.perf_counter()
    for key in jax.random.split(jax.random.PRNGKey(seed), n_chains):
        init_key, tune_key, run_key = jax.random.split(key, 3)
        state = blackjax.mcmc.mclmc.init(
            position=jnp.asarray(start, dtype=jnp.float64), logdensity_fn=logdensity,
            rng_key=init_key,
        )  # fmt: skip

        def kernel(sqrt_diag_cov):
            return blackjax.mcmc.mclmc.build_kernel(
                logdensity_fn=logdensity, sqrt_diag_cov=sqrt_diag_cov,
                integrator=blackjax.mcmc.integrators.isokinetic_mclachlan,
            )  # fmt: skip

        before = counted.n
        state, params = blackjax.mclmc_find_L_and_step_size(
            mclmc_kernel=kernel, num_steps=n_steps, state=state, rng_key=tune_key,
            diagonal_preconditioning=True,
        )  # fmt: skip
        tune_grads += counted.n - before
        algorithm = blackjax.mclmc(
            logdensity, L=params.L, step_size=params.step_size,
            sqrt_diag_cov=params.sqrt_diag_cov,
        )  # fmt: skip

        def step(state, key, algorithm=algorithm):
            state, _ = algorithm.step(key, state)
            return state, state.position

        before = counted.n
        _, positions = jax.lax.scan(step, state, jax.random.split(run_key, n_steps))
        positions = np.asarray(positions)
        sample_grads += counted.n - before
        draws.append(positions[thin - 1 :: thin])
        ls.append(float(params.L))
        steps.append(float(params.step_size))
    return {
        "draws": np.stack(draws),
        "grad_evals_warmup": int(tune_grads),
        "grad_evals_sampling": int(sample_grads),
        "L": ls,
        "step_size": steps,
        "seconds": time.perf_counter() - t0,
    }
