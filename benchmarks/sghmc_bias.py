"""SGHMC's bias on Bayesian linear regression, whose posterior is known in closed form.

A regressor with no hidden layer and a fixed noise is Bayesian linear regression: the
posterior of its weights is Gaussian with a closed-form mean and covariance. For each step
size (``learning_rate_init``) and batch size, the run fits ``SGHMC`` with many chains and
prints one JSON line with:

* ``mean_error``: the largest over the coefficients of ``|mean of the draws - posterior
  mean| / posterior sd``;
* ``sd_ratio``: the draws' sd over the posterior sd, averaged over the coefficients (1 is
  exact; above 1 the minibatch noise widens the draws);
* their Monte Carlo standard errors, from the spread over chains (each chain's cycles end
  in nearly independent draws, as the next cycle's large steps forget the last).

The data: ``--rows`` rows of 5 standard normal features, coefficients (1, -0.5, 0.25, 0,
0.5), intercept 2, noise sd 0.5; the prior is the library's default::

    python benchmarks/sghmc_bias.py [--rows 2000] [--chains 50] [--seed 0] >> RESULTS
    python benchmarks/sghmc_bias.py --report benchmarks/results/sghmc_bias.jsonl

``--report`` prints the markdown table of ``sd_ratio``, a row per batch size and a column
per step size, of the last line of each (batch size, step size) in the file.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np


def closed_form(X, y, noise_std):
    """The posterior mean and covariance of (weights, bias) on the standardized target,
    with noise sd ``noise_std`` on that scale, under ``GaussianPrior()``: weights
    N(0, 1/d), bias N(0, 1)."""
    z = (y - y.mean()) / y.std()
    tau = 1.0 / noise_std**2
    phi = np.hstack([X, np.ones((len(X), 1))])
    d = X.shape[1]
    precision = tau * phi.T @ phi + np.diag(np.r_[np.full(d, float(d)), 1.0])
    cov = np.linalg.inv(precision)
    return cov @ (tau * phi.T @ z), cov


def errors(draws, n_chains, mean, cov):
    """``mean_error``, ``sd_ratio`` and their standard errors from the chains' spread."""
    sd = np.sqrt(np.diag(cov))
    per_chain = draws.reshape(n_chains, -1, draws.shape[1])
    chain_means = per_chain.mean(axis=1)
    z = (chain_means.mean(axis=0) - mean) / sd
    z_se = chain_means.std(axis=0, ddof=1) / np.sqrt(n_chains) / sd
    worst = int(np.argmax(np.abs(z)))
    chain_sd = np.sqrt(((per_chain - mean) ** 2).mean(axis=1)) / sd
    ratio = chain_sd.mean(axis=1)
    return {
        "mean_error": float(abs(z[worst])),
        "mean_error_se": float(z_se[worst]),
        "sd_ratio": float(np.sqrt((ratio**2).mean())),
        "sd_ratio_se": float(ratio.std(ddof=1) / np.sqrt(n_chains)),
    }


def report(path) -> str:
    """The markdown table of ``sd_ratio`` (two decimals): a row per batch size, a column
    per step size. A rerun appends to the file; the last line of each (batch size, step
    size) is its current measure."""
    last = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            last[(r["batch_size"], r["learning_rate_init"])] = r
    batches = sorted({b for b, _ in last})
    rates = sorted({lr for _, lr in last})
    lines = ["| batch size | " + " | ".join(f"lr {lr:g}" for lr in rates) + " |",
             "|---|" + "---|" * len(rates)]  # fmt: skip
    for b in batches:
        cells = [f"{last[b, lr]['sd_ratio']:.2f}" if (b, lr) in last else "" for lr in rates]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--chains", type=int, default=50)
    parser.add_argument("--cycles", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.001, 0.003, 0.01, 0.03])
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 32, 128, 512])
    parser.add_argument("--report", default=None, help="print the table of this results file")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import SGHMC

    rng = np.random.default_rng(args.seed)
    X = rng.standard_normal((args.rows, 5))
    noise = 0.5
    y = X @ np.array([1.0, -0.5, 0.25, 0.0, 0.5]) + 2.0 + noise * rng.standard_normal(args.rows)
    # the estimator's noise_std is on the standardized target
    noise = noise / y.std()
    mean, cov = closed_form(X, y, noise)
    per_chain = args.cycles  # one draw per cycle: the cycles' last steps
    for batch in args.batches:
        for rate in args.rates:
            method = SGHMC(n_chains=args.chains, n_cycles=args.cycles, learning_rate_init=rate,
                           batch_size=batch)  # fmt: skip
            reg = BayesianMLPRegressor(
                hidden_layer_sizes=(), noise_std=noise, method=method,
                n_samples=args.chains * per_chain, random_state=args.seed, n_jobs=2,
            )  # fmt: skip
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                reg.fit(X, y)
            seconds = time.perf_counter() - t0
            # no hidden layer: the five weights, then the bias
            draws = reg.posterior_.thetas[:, :6]
            steps = reg.diagnostics_["max_iter"] * -(-args.rows // batch) // args.cycles
            row = {"rows": args.rows, "batch_size": batch, "learning_rate_init": rate,
                   "steps_per_cycle": steps, "n_chains": args.chains,
                   "seconds": round(seconds, 2)}  # fmt: skip
            row.update({k: round(v, 4) for k, v in errors(draws, args.chains, mean, cov).items()})
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
