"""The skbnn NUTS benchmark model in PyMC, sampled by nutpie, for same-machine comparisons.

Same model as ``BayesianMLPRegressor(method=NUTS(...), prior=GaussianPrior(std,
fan_in_scaling=False))`` and as ``numpyro_nuts.py``: X as given (standardize it first), y
standardized with its mean and population sd, a one-hidden-layer ReLU network (or any
``hidden`` tuple) with N(0, std^2) on every weight and bias (``W0, b0, W1, b1, ...``, shaped
as in NumPyro), Gaussian noise either fixed (sd on the standardized scale) or with precision
``tau ~ Gamma(1, 1e-3)``, which nutpie samples jointly with the weights (PyMC puts a log
transform on it, as NumPyro does). float64 throughout, as in skbnn.

PyMC builds the log density and pytensor compiles it and its gradient with the numba backend
(``nutpie.compile_pymc_model(model, backend="numba")``; the jax backend only if numba is
missing, which skbnn's own dependency on it rules out in practice). Chains run on ``n_chains``
threads of nutpie's Rust sampler, so they share the machine's cores as NumPyro's devices do.
``adaptation`` picks nutpie's mass matrix: ``"diag"`` (its default, a diagonal estimated
from the draws' and gradients' variances) or ``"low_rank"`` (diagonal plus a low-rank
correction, ``low_rank_modified_mass_matrix=True``).

Needs the ``bench`` extra (``pip install ".[bench]"``). Standalone use, one UCI split::

    python benchmarks/peers/nutpie_nuts.py --dataset bostonHousing --hidden 10 \\
        --noise-std 0.5 --chains 3 --warmup 1000 --draws 3000 --target-accept 0.9
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from importlib.util import find_spec

import numpy as np

# numpy and scipy only: the NumPyro side's definitions of the per-draw log-likelihood, ESS,
# R-hat and test metrics, so that all sides are measured by the same code.

ADAPTATIONS = ("diag", "low_rank")


def fresh_pytensor_cache(prefix: str = "skbnn-compare-pytensor-") -> None:
    """Point pytensor's compile directory (which holds its numba cache) at a new empty
    folder, so the first compilation is that of a new install (before pytensor is imported)."""
    flags = os.environ.get("PYTENSOR_FLAGS", "")
    if "base_compiledir" not in flags:
        folder = tempfile.mkdtemp(prefix=prefix)
        os.environ["PYTENSOR_FLAGS"] = f"{flags},base_compiledir={folder}".lstrip(",")


def import_pymc():
    # The warning is about pytensor's C backend, which the numba backend does not use.
    warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")
    import pymc

    return pymc


def _model(X, y, hidden, prior_std, noise_std, fan_in=False):
    pm = import_pymc()

    sizes = [X.shape[1], *hidden, 1]
    with pm.Model() as model:
        h = X
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            # skbnn's fan_in_scaling: a layer's weights have sd prior_std / sqrt(inputs)
            W = pm.Normal(f"W{i}", 0.0, prior_std / np.sqrt(a) if fan_in else prior_std,
                          shape=(a, b))  # fmt: skip
            bias = pm.Normal(f"b{i}", 0.0, prior_std, shape=(b,))
            h = h @ W + bias
            if i < len(hidden):
                h = pm.math.maximum(h, 0.0)
        f = h[:, 0]
        if noise_std is None:
            tau = pm.Gamma("tau", alpha=1.0, beta=1e-3)
            sigma = tau**-0.5
        else:
            sigma = noise_std
        pm.Normal("y", mu=f, sigma=sigma, observed=y)
    return model


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
    adaptation: str = "diag",
    fan_in: bool = False,
) -> dict:
    """Compile the PyMC model and run nutpie's NUTS; timings, leapfrog counts and draws.

    ``noise_std`` is on the standardized scale (None: inferred); ``adaptation`` is ``"diag"``
    or ``"low_rank"``. Returns a dict with ``wall_time`` (model building, compilation, warm-up
    and sampling), ``compile_time`` (building the PyMC model and
    ``nutpie.compile_pymc_model``), ``sampling_time`` (the ``nutpie.sample`` call: warm-up and
    draws, which nutpie does not time apart), ``n_grad_evals`` (``n_steps`` summed over
    warm-up and draws; the gradients of initialization are not counted, as in NumPyro),
    ``leapfrog_per_draw`` (mean ``n_steps`` after warm-up), ``max_tree_depth_hits`` (draws
    after warm-up whose trajectory used all ``2**max_tree_depth - 1`` steps, NumPyro's
    definition), ``maxdepth_reached`` (nutpie's own flag, which stays off for some of those
    trajectories), ``divergences`` (after warm-up), ``step_size`` (mean
    over draws after warm-up), ``backend``, ``params`` (each of shape
    ``(n_chains, n_draws, ...)``), ``tau`` (or None), ``y_mean``, ``y_sd``.
    """
    if adaptation not in ADAPTATIONS:
        raise ValueError(f"adaptation must be one of {ADAPTATIONS}, got {adaptation!r}")
    import nutpie
    from threadpoolctl import threadpool_limits

    import_pymc()  # outside the timings, as NumPyro's side imports jax before its clock starts
    start = time.perf_counter()
    y_mean, y_sd = float(y.mean()), float(y.std())
    ys = (y - y_mean) / y_sd
    backend = "numba" if find_spec("numba") else "jax"
    model = _model(X, ys, tuple(hidden), prior_std, noise_std, fan_in)
    compiled = nutpie.compile_pymc_model(model, backend=backend)
    t_compiled = time.perf_counter()
    # one BLAS thread per chain: BLAS's own threads on top of nutpie's chain threads
    # oversubscribe the cores, which slows the fits on the larger data sets many-fold
    with threadpool_limits(limits=1, user_api="blas"):
        trace = nutpie.sample(
            compiled, draws=n_draws, tune=n_warmup, chains=n_chains, cores=n_chains,
            seed=seed, target_accept=target_accept, maxdepth=max_tree_depth,
            progress_bar=False, save_warmup=True,  # for the warm-up's n_steps
            low_rank_modified_mass_matrix=adaptation == "low_rank",
        )  # fmt: skip
    end = time.perf_counter()
    stats, warm_stats = trace.sample_stats, trace.warmup_sample_stats
    steps = stats["n_steps"].to_numpy().astype(np.int64)
    posterior = trace.posterior
    n_layers = len(hidden) + 1
    names = [f"{p}{i}" for i in range(n_layers) for p in ("W", "b")]
    return {
        "wall_time": end - start,
        "compile_time": t_compiled - start,
        "sampling_time": end - t_compiled,
        "n_grad_evals": int(warm_stats["n_steps"].to_numpy().astype(np.int64).sum() + steps.sum()),
        "leapfrog_per_draw": float(steps.mean()),
        "max_tree_depth_hits": int((steps >= 2**max_tree_depth - 1).sum()),
        "maxdepth_reached": int(stats["maxdepth_reached"].to_numpy().sum()),
        "divergences": int(stats["diverging"].to_numpy().sum()),
        "step_size": float(stats["step_size"].to_numpy().mean()),
        "backend": backend,
        "adaptation": adaptation,
        "params": {k: posterior[k].to_numpy() for k in names},
        "tau": posterior["tau"].to_numpy() if noise_std is None else None,
        "noise_std": noise_std,
        "hidden": tuple(hidden),
        "y_mean": y_mean,
        "y_sd": y_sd,
    }


def main() -> None:
    from numpyro_nuts import standalone, standalone_parser

    parser = standalone_parser(__doc__.splitlines()[0])
    parser.add_argument("--adaptation", choices=ADAPTATIONS, default="diag")
    args = parser.parse_args()
    standalone(args, fit, "nutpie", adaptation=args.adaptation)


if __name__ == "__main__":
    main()
