"""The skbnn NUTS benchmark model in NumPyro, for same-machine comparisons.

Same model as ``BayesianMLPRegressor(method=NUTS(...), prior=GaussianPrior(std,
fan_in_scaling=False))``: X as given (standardize it first), y standardized with its mean and
population sd, a one-hidden-layer ReLU network (or any ``hidden`` tuple) with N(0, std^2) on
every weight and bias, Gaussian noise either fixed (sd on the standardized scale) or with
precision ``tau ~ Gamma(1, 1e-3)``, which NumPyro samples jointly with the weights (on the
log scale, as its NUTS does for any positive parameter). float64 throughout, as in skbnn.
Chains run in parallel on ``n_chains`` XLA host devices, so they share the machine's cores.

Needs the ``bench`` extra (``pip install ".[bench]"``). Standalone use, one UCI split::

    python benchmarks/peers/numpyro_nuts.py --dataset bostonHousing --hidden 10 \\
        --noise-std 0.5 --chains 3 --warmup 1000 --draws 3000 --target-accept 0.9
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import logsumexp


def setup_jax(n_devices: int) -> None:
    """Give XLA ``n_devices`` host devices (must run before jax is first imported)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n_devices}"
    import jax

    jax.config.update("jax_enable_x64", True)


def _network(params: dict, X, hidden: tuple[int, ...]):
    import jax.numpy as jnp

    h = X
    for i in range(len(hidden)):
        h = jnp.maximum(h @ params[f"W{i}"] + params[f"b{i}"], 0.0)
    i = len(hidden)
    return (h @ params[f"W{i}"] + params[f"b{i}"])[..., 0]


def _model(X, y, hidden, prior_std, noise_std, fan_in=False):
    import numpyro
    import numpyro.distributions as dist

    sizes = [X.shape[1], *hidden, 1]
    params = {}
    prior = dist.Normal(0.0, prior_std)
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        # skbnn's fan_in_scaling: a layer's weights have sd prior_std / sqrt(inputs)
        w_prior = dist.Normal(0.0, prior_std / np.sqrt(a)) if fan_in else prior
        params[f"W{i}"] = numpyro.sample(f"W{i}", w_prior.expand([a, b]).to_event(2))
        params[f"b{i}"] = numpyro.sample(f"b{i}", prior.expand([b]).to_event(1))
    f = _network(params, X, hidden)
    if noise_std is None:
        tau = numpyro.sample("tau", dist.Gamma(1.0, 1e-3))
        sigma = tau**-0.5
    else:
        sigma = noise_std
    numpyro.sample("y", dist.Normal(f, sigma), obs=y)


def fit(
    X: np.ndarray,
    y: np.ndarray,
    hidden: tuple[int, ...],
    noise_std: float | None,
    n_chains: int,
    n_warmup: int,
    n_draws: int,
    target_accept: float = 0.8,
    max_tree_depth: int = 10,
    prior_std: float = 1.0,
    seed: int = 0,
    fan_in: bool = False,
) -> dict:
    """Run NumPyro's NUTS; timings, leapfrog counts and draws as numpy arrays.

    ``noise_std`` is on the standardized scale (None: inferred). Returns a dict with
    ``wall_time`` (warm-up + sampling, compilation included), ``compile_time`` (JAX's
    compile-duration events during the fit), ``warmup_time``,
    ``sample_time``, ``n_grad_evals`` (leapfrog steps, warm-up included), ``params`` (each of
    shape ``(n_chains, n_draws, ...)``), ``tau`` (or None), ``y_mean``, ``y_sd``.
    """
    import jax
    from numpyro.infer import MCMC, NUTS

    y_mean, y_sd = float(y.mean()), float(y.std())
    ys = (y - y_mean) / y_sd
    kernel = NUTS(
        _model, target_accept_prob=target_accept, max_tree_depth=max_tree_depth,
        dense_mass=False,
    )  # fmt: skip
    mcmc = MCMC(
        kernel, num_warmup=n_warmup, num_samples=n_draws, num_chains=n_chains,
        chain_method="parallel", progress_bar=False,
    )  # fmt: skip
    args = (X, ys, tuple(hidden), prior_std, noise_std, fan_in)
    compile_time = [0.0]

    def on_event(event: str, duration: float, **kwargs) -> None:
        # tracing, lowering and XLA compilation of every jitted function in this fit
        if event.startswith("/jax/core/compile/"):
            compile_time[0] += duration

    jax.monitoring.register_event_duration_secs_listener(on_event)
    start = time.perf_counter()
    mcmc.warmup(jax.random.PRNGKey(seed), *args, extra_fields=("num_steps",), collect_warmup=True)
    warm_steps = np.asarray(mcmc.get_extra_fields()["num_steps"])
    jax.block_until_ready(mcmc.post_warmup_state)
    t_warm = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, *args, extra_fields=("num_steps", "diverging"))
    samples = mcmc.get_samples(group_by_chain=True)
    jax.block_until_ready(samples)
    end = time.perf_counter()
    jax.monitoring.unregister_event_duration_listener(on_event)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    steps = np.asarray(extra["num_steps"])
    return {
        "wall_time": end - start,
        "compile_time": compile_time[0],
        "warmup_time": t_warm - start,
        "sample_time": end - t_warm,
        "n_grad_evals": int(warm_steps.sum() + steps.sum()),
        "leapfrog_per_draw": float(steps.mean()),
        "max_tree_depth_hits": int((steps >= 2**max_tree_depth - 1).sum()),
        "divergences": int(np.asarray(extra["diverging"]).sum()),
        "params": {k: np.asarray(v) for k, v in samples.items() if k != "tau"},
        "tau": np.asarray(samples["tau"]) if "tau" in samples else None,
        "noise_std": noise_std,
        "hidden": tuple(hidden),
        "y_mean": y_mean,
        "y_sd": y_sd,
    }


def network_outputs(result: dict, X: np.ndarray) -> np.ndarray:
    """Network outputs on the standardized scale, shape ``(n_chains, n_draws, n_rows)``."""
    p = result["params"]
    h = np.broadcast_to(X, (*p["W0"].shape[:2], *X.shape))
    for i in range(len(result["hidden"])):
        h = np.maximum(h @ p[f"W{i}"] + p[f"b{i}"][..., None, :], 0.0)
    i = len(result["hidden"])
    return (h @ p[f"W{i}"] + p[f"b{i}"][..., None, :])[..., 0]


def noise_sd(result: dict) -> np.ndarray:
    """Noise sd per draw on the standardized scale, shape ``(n_chains, n_draws)``."""
    if result["tau"] is None:
        shape = result["params"]["W0"].shape[:2]
        return np.full(shape, result["noise_std"])
    return 1.0 / np.sqrt(result["tau"])


def evaluate(result: dict, X_train, y_train, X_test, y_test) -> dict:
    """Bulk ESS / R-hat of the log-likelihood, R-hat of five training predictions, and test
    RMSE and mean log predictive density in original units (skbnn's definitions)."""
    from skbnn.diagnostics import ess_bulk, rhat

    ys = (y_train - result["y_mean"]) / result["y_sd"]
    sd = noise_sd(result)
    f = network_outputs(result, X_train)
    loglik = (
        -0.5 * ((ys - f) / sd[..., None]) ** 2 - np.log(sd[..., None]) - 0.5 * np.log(2 * np.pi)
    ).sum(-1)
    rows = np.unique(np.linspace(0, len(y_train) - 1, min(5, len(y_train))).astype(int))
    f_test = network_outputs(result, X_test) * result["y_sd"] + result["y_mean"]
    s_test = (sd * result["y_sd"])[..., None]
    f_flat, s_flat = f_test.reshape(-1, len(y_test)), s_test.reshape(-1, 1)
    logp = -0.5 * ((y_test - f_flat) / s_flat) ** 2 - np.log(s_flat) - 0.5 * np.log(2 * np.pi)
    return {
        "ess_bulk_loglik": float(ess_bulk(loglik)),
        "rhat_loglik": float(rhat(loglik)),
        "max_rhat": float(max(rhat(loglik), *(rhat(f[..., j]) for j in rows))),
        "test_rmse": float(np.sqrt(np.mean((f_flat.mean(0) - y_test) ** 2))),
        "test_ll": float(np.mean(logsumexp(logp, axis=0) - np.log(len(f_flat)))),
        "noise_sd_y_units": float(np.mean(sd) * result["y_sd"]),
    }


def standalone_parser(description: str) -> argparse.ArgumentParser:
    """The command line a peer script shares: one UCI split, the network and the chains."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dataset", default="bostonHousing")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--hidden", type=int, default=10)
    parser.add_argument("--noise-std", type=float, default=None, help="default: inferred")
    parser.add_argument("--chains", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=3000)
    parser.add_argument("--target-accept", type=float, default=0.9)
    parser.add_argument("--max-tree-depth", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fan-in", action="store_true", help="skbnn's default prior")
    return parser


def standalone(args, fit, peer: str, **kwargs) -> None:
    """Fit ``args``'s split with a peer's ``fit`` and print its JSON line."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _uci import load_split, standardize

    X_train, y_train, X_test, y_test = load_split(args.dataset, args.split, args.data_dir)
    X_train, X_test = standardize(X_train, X_test)
    result = fit(
        X_train, y_train, (args.hidden,), args.noise_std, args.chains, args.warmup,
        args.draws, args.target_accept, args.max_tree_depth, seed=args.seed,
        fan_in=args.fan_in, **kwargs,
    )  # fmt: skip
    record = {k: v for k, v in result.items() if k not in ("params", "tau")}
    record.update(evaluate(result, X_train, y_train, X_test, y_test))
    print(json.dumps({"peer": peer, **vars(args), **record}), flush=True)


def main() -> None:
    args = standalone_parser(__doc__.splitlines()[0]).parse_args()
    setup_jax(args.chains)
    standalone(args, fit, "numpyro")


if __name__ == "__main__":
    main()
