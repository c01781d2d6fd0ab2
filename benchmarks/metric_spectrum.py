"""Why NUTS's trajectories run long on a network's posterior, whatever the metric.

For each chain of a NUTS fit (the UCI protocol's network: 50 ReLU units, noise inferred,
``init="map"``, split 0), take its kept draws ``x`` and their log-density gradients ``g``
and compare the posterior's global spread with its local curvature, in three metrics:

* ``C_x`` and ``C_g`` are the draws' and gradients' covariances. For a Gaussian posterior
  ``C_x = C_g^-1``, so every eigenvalue of ``C_x C_g`` is 1. These eigenvalues do not
  change under any linear reparameterization (``x -> A x`` sends ``g -> A^-T g``), so
  ``sqrt(max eig(C_x C_g))`` bounds what *any* fixed mass matrix ``M`` can do: a stable
  leapfrog step is at most about ``1 / sqrt(max eig(M C_g))``, the widest direction
  is ``sqrt(max eig(M^-1 C_x))`` long, and the product of the two is at least the bound.
  So it is the fewest leapfrog steps a trajectory needs to cross the posterior's widest
  direction, with the best dense metric there is.
* ``steps_diagonal``: the same ratio in the sampler's own adapted diagonal metric.
* ``steps_gauss_newton``: in the metric ``M = H^-1``, with ``H`` the Gauss-Newton
  precision (``tau J^T J`` plus the prior's) at the chain's last draw.

Prints one JSON line per chain, then per dataset (the chains' medians). Usage::

    python benchmarks/metric_spectrum.py --dataset bostonHousing concrete wine-quality-red \\
        energy yacht --out benchmarks/results/metric_spectrum.jsonl
    python benchmarks/metric_spectrum.py --report benchmarks/results/metric_spectrum.jsonl

``--report`` prints the markdown table of the datasets' lines, easiest posterior first.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, load_split, machine, standardize  # noqa: E402


def _ratio(cx: np.ndarray, cg: np.ndarray, m: np.ndarray) -> tuple[float, float]:
    """``(sqrt(max eig(M C_g)), sqrt(max eig(M^-1 C_x)))`` for an SPD metric ``m``."""
    chol = np.linalg.cholesky(m)
    narrow = np.linalg.eigvalsh(chol.T @ cg @ chol)[-1]
    inv = np.linalg.solve(chol, np.linalg.solve(chol, cx).T)
    wide = np.linalg.eigvalsh((inv + inv.T) / 2)[-1]
    return float(np.sqrt(narrow)), float(np.sqrt(wide))


def gauss_newton_precision(target, theta: np.ndarray) -> np.ndarray:
    """``tau J^T J`` plus the prior's precision at ``theta``, with ``tau = n / SSR``."""
    from skbnn.posterior import ForwardPass

    n, d = target.n_rows, target.n_features
    X, Y, W = target.XT.reshape(d, n).T, target.YT.reshape(-1, n), target.W

    def part(rows, f, J):
        M = J[0] * np.sqrt(W[rows])
        return M @ M.T, float(np.sum(W[rows] * (Y[0, rows] - f[0]) ** 2))

    parts = ForwardPass(target.layout, target.activation_code).map_jacobians(X, theta, 0, part)
    ggn, ssr = sum(p[0] for p in parts), sum(p[1] for p in parts)
    prec = W.sum() / ssr * ggn
    prec[np.diag_indices_from(prec)] += 1.0 / target.prior_var
    return prec


def run(dataset: str, args, emit) -> None:
    from skbnn import BayesianMLPRegressor
    from skbnn.methods import NUTS, _mcmc

    X, y, _, _ = load_split(dataset, 0, args.data_dir)
    X, _ = standardize(X, X)
    captured = {}
    assemble = _mcmc.HMCFamily._assemble

    def grab(self, target, plan, fleet, t_start):
        # the chains' final metrics and the target are not public: keep them here
        captured.update(target=target, chains=fleet.chains)
        return assemble(self, target, plan, fleet, t_start)

    _mcmc.HMCFamily._assemble = grab
    try:
        reg = BayesianMLPRegressor(
            hidden_layer_sizes=(50,), method=NUTS(n_chains=args.chains, init="map"),
            n_samples=args.chains * args.draws, random_state=args.seed, n_jobs=args.n_jobs,
        ).fit(X, y)  # fmt: skip
    finally:
        _mcmc.HMCFamily._assemble = assemble
    target, diag = captured["target"], reg.diagnostics_
    rows = []
    for c, chain in enumerate(captured["chains"]):
        draws = chain.arrays.draws
        _, grads = target.logp_grad_batch(draws, n_jobs=args.n_jobs)
        x, g = draws - draws.mean(axis=0), grads - grads.mean(axis=0)
        cx, cg = x.T @ x / len(x), g.T @ g / len(g)
        vals, vecs = np.linalg.eigh(cg)
        half = (vecs * np.sqrt(np.maximum(vals, 0.0))) @ vecs.T
        spread = np.sqrt(np.maximum(np.linalg.eigvalsh(half @ cx @ half)[::-1], 0.0))
        narrow, wide = _ratio(cx, cg, np.diag(chain.arrays.metric.inv_m))
        gn_narrow, gn_wide = _ratio(
            cx, cg, np.linalg.inv(gauss_newton_precision(target, draws[-1]))
        )
        row = {
            "dataset": dataset, "chain": c, "n_params": target.n_params,
            "n_rows": target.n_rows, "n_draws": len(draws),
            "leapfrog_per_draw": float(diag["mean_n_leapfrog"][c]),
            "step_size": float(diag["step_size"][c]),
            "steps_any_metric": float(spread[0]),
            "spread_ratio_top": spread[:5].round(1).tolist(),
            "n_directions_ratio_above_10": int(np.sum(spread > 10)),
            "n_directions_ratio_above_100": int(np.sum(spread > 100)),
            "steps_diagonal": narrow * wide,
            "steps_gauss_newton": gn_narrow * gn_wide,
            "gauss_newton_step_bound": 1.0 / gn_narrow,
        }  # fmt: skip
        rows.append(row)
        emit(row)
    keys = ("leapfrog_per_draw", "steps_any_metric", "steps_diagonal", "steps_gauss_newton",
            "n_directions_ratio_above_10", "n_directions_ratio_above_100")  # fmt: skip
    emit({"summary": True, "dataset": dataset, "rhat_loglik": float(diag["rhat_loglik"]),
          **{k: float(np.median([r[k] for r in rows])) for k in keys},
          "command": "python " + " ".join(["benchmarks/metric_spectrum.py", *sys.argv[1:]]),
          **machine()})  # fmt: skip


def report(path) -> str:
    """The markdown table of the per-dataset lines (the chains' medians), a row per
    dataset, by the fewest steps any fixed metric needs (the easiest posterior first)."""
    rows = [json.loads(s) for s in Path(path).read_text().splitlines() if s.strip()]
    sizes = {r["dataset"]: (r["n_params"], r["n_rows"]) for r in rows if "chain" in r}
    summaries = sorted((r for r in rows if r.get("summary")), key=lambda r: r["steps_any_metric"])
    lines = ["| dataset | parameters / rows | NUTS steps per draw | steps to cross, adapted "
             "diagonal | steps to cross, best fixed metric | steps to cross, Gauss-Newton | "
             "directions with spread/width above 10 / 100 | R-hat |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in summaries:
        params, n_rows = sizes[r["dataset"]]
        lines.append(
            f"| {r['dataset']} | {params} / {n_rows} | {r['leapfrog_per_draw']:.0f} | "
            f"{r['steps_diagonal']:,.0f} | {r['steps_any_metric']:,.0f} | "
            f"{r['steps_gauss_newton']:,.0f} | {r['n_directions_ratio_above_10']:g} / "
            f"{r['n_directions_ratio_above_100']:g} | {r['rhat_loglik']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", default=None, help="print the table of this results file")
    parser.add_argument("--dataset", nargs="+")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--draws", type=int, default=400, help="kept draws per chain")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return
    if not args.dataset:
        parser.error("--dataset is required to fit")
    emit = emitter(args.out)
    for dataset in args.dataset:
        run(dataset, args, emit)


if __name__ == "__main__":
    main()
