"""Effective draws per gradient of NUTS, MCLMC and MAMS within one mode, on the UCI splits.

Every chain of every sampler starts at the same MAP (that of the split's seed: the first
of ``init="map"``'s optimizations, given to all chains), so the three samplers explore
the same mode and the comparison is of how fast they mix there, not of which modes they
find. The figures are bulk ESS over the gradient evaluations after warm-up: of the
log-likelihood, and of the network's outputs at the five training rows the diagnostics
monitor (their minimum and median). ``blackjax`` is the peer: BlackJAX's MCLMC, with its
own tuning, on the very log density skbnn's samplers of the split explored (the same
``LogPosterior``, through ``benchmarks/peers/blackjax_mclmc.py``), from the same MAP,
with as many sampling steps as skbnn's MCLMC makes by default and the same thinning; it
runs after a skbnn sampler of the same split, whose target and start it takes. One JSON
line per fit::

    python benchmarks/mclmc_ess.py --data bostonHousing concrete energy --splits 0-2 \\
        --hidden 16 16 --activation relu --out benchmarks/results/mclmc_ess.jsonl

A quick check that it runs: ``--data bostonHousing --splits 0 --n-samples 100 --quick``.
The table: ``python benchmarks/mclmc_ess.py --report benchmarks/results/<file>.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from _uci import emitter, load_split, provenance, split_ids, standardize  # noqa: E402
from uci import parse_splits  # noqa: E402

UCI_SETS = ("bostonHousing", "concrete", "energy")
SAMPLERS = ("nuts", "mclmc", "mams", "blackjax")
#: The target and the MAP of the last skbnn fit, for the BlackJAX peer.
_LAST: dict = {}


def one_map_for_all_chains() -> None:
    """Make ``init="map"`` start every chain at the first chain's MAP (this script only)."""
    from skbnn.methods import _mcmc

    if not hasattr(_mcmc, "map_starts"):
        raise RuntimeError("the chain driver no longer calls map_starts: update this script")
    original = _mcmc.map_starts

    def one_map(target, seeds, n_jobs, **kw):
        starts, n_grad_evals = original(target, seeds[:1], n_jobs, **kw)
        _LAST.update(target=target, start=starts[0], n_grad_evals=n_grad_evals)
        return [starts[0]] * len(seeds), n_grad_evals

    _mcmc.map_starts = one_map


def sampler(name: str, quick: bool, mclmc_thin: int | None = None):
    """The method object of ``name`` at its defaults, started at the MAP (shorter warm-ups
    with ``quick``, for a smoke run; MCLMC keeping every ``mclmc_thin``-th step)."""
    from skbnn.methods import MAMS, MCLMC, NUTS

    warmup = {"nuts": 100, "mclmc": 300, "mams": 100} if quick else {}
    cls = {"nuts": NUTS, "mclmc": MCLMC, "mams": MAMS}[name]
    kw = {"init": "map"}
    if name in warmup:
        kw["n_warmup"] = warmup[name]
    if name == "mclmc" and mclmc_thin is not None:
        kw["thin"] = mclmc_thin
    return cls(**kw)


def run_blackjax(dataset: str, split: int, args) -> dict:
    """BlackJAX's MCLMC on the last skbnn fit's target, from its MAP."""
    import blackjax_mclmc

    from skbnn.diagnostics import ess_bulk, rhat
    from skbnn.kernels import density as knet
    from skbnn.methods import MCLMC
    from skbnn.methods._convergence import _per_output, monitored_predictions

    if "target" not in _LAST:
        raise SystemExit("blackjax runs after a skbnn sampler of the same split")
    target = _LAST["target"]
    ours = MCLMC() if args.mclmc_thin is None else MCLMC(thin=args.mclmc_thin)
    n_chains = ours.n_chains
    n_keep = args.n_samples // n_chains
    out = blackjax_mclmc.sample(
        target, _LAST["start"], n_chains, n_keep * ours.thin, ours.thin, split
    )
    draws = out["draws"]
    loglik = target.loglik_batch(draws.reshape(-1, draws.shape[-1]))[0].reshape(n_chains, -1)
    # the five training rows the skbnn diagnostics monitor
    rows = np.unique(np.linspace(0, target.n_rows - 1, min(5, target.n_rows)).astype(int))
    xt = target.XT.reshape(target.n_features, target.n_rows)[:, rows]
    flat = draws.reshape(-1, draws.shape[-1])
    outputs = np.empty((flat.shape[0], target.layout.sizes[-1], rows.size))
    knet.forward_batch_for(target.activation_code)(
        flat, np.ascontiguousarray(xt).ravel(), target.layout.sizes, target.layout.offsets,
        rows.size, outputs,
    )  # fmt: skip
    monitored = monitored_predictions(outputs, target.likelihood)
    monitored = monitored.reshape(n_chains, -1, *monitored.shape[1:])
    ess_out = np.ravel(_per_output(ess_bulk, monitored))
    sampling, ess_ll = out["grad_evals_sampling"], float(ess_bulk(loglik))
    return {
        "dataset": dataset, "split": split, "sampler": "blackjax",
        "hidden": list(args.hidden), "activation": args.activation,
        "n_samples": int(loglik.size), "n_chains": n_chains,
        "grad_evals_sampling": sampling, "grad_evals_warmup": out["grad_evals_warmup"],
        "grad_evals_init": int(_LAST["n_grad_evals"]),
        "ess_bulk_loglik": ess_ll,
        "ess_bulk_outputs_min": float(np.nanmin(ess_out)),
        "ess_bulk_outputs_median": float(np.nanmedian(ess_out)),
        "ess_per_grad_loglik": ess_ll / sampling,
        "ess_per_grad_outputs_min": float(np.nanmin(ess_out)) / sampling,
        "ess_per_grad_outputs_median": float(np.nanmedian(ess_out)) / sampling,
        "rhat_loglik": float(rhat(loglik)),
        "step_size": out["step_size"], "path_length": out["L"],
        "fit_seconds": out["seconds"],
    }  # fmt: skip


def run_fit(dataset: str, split: int, name: str, args) -> dict:
    from skbnn import BayesianMLPRegressor
    from skbnn.exceptions import ConvergenceWarning
    from skbnn.model_selection import log_predictive_scorer

    X_train, y_train, X_test, y_test = load_split(dataset, split, args.data_dir)
    X_train, X_test = standardize(X_train, X_test)
    est = BayesianMLPRegressor(
        hidden_layer_sizes=tuple(args.hidden), activation=args.activation,
        method=sampler(name, args.quick, args.mclmc_thin), n_samples=args.n_samples,
        random_state=split, n_jobs=args.n_jobs,
    )  # fmt: skip
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est.fit(X_train, y_train)
    seconds = time.perf_counter() - t0
    d = est.diagnostics_
    sampling = int(d["n_grad_evals"] - d["warmup_grad_evals"])
    outputs = np.ravel(d["ess_bulk_outputs"])
    record = {
        "dataset": dataset, "split": split, "sampler": name,
        "hidden": list(args.hidden), "activation": args.activation,
        "n_samples": args.n_samples, "n_warmup": est.method.n_warmup,
        "grad_evals_sampling": sampling, "grad_evals_warmup": int(d["warmup_grad_evals"]),
        "grad_evals_init": int(d["init_grad_evals"]),
        "ess_bulk_loglik": float(d["ess_bulk_loglik"]),
        "ess_bulk_outputs_min": float(np.nanmin(outputs)),
        "ess_bulk_outputs_median": float(np.nanmedian(outputs)),
        "ess_per_grad_loglik": float(d["ess_bulk_loglik"]) / sampling,
        "ess_per_grad_outputs_min": float(np.nanmin(outputs)) / sampling,
        "ess_per_grad_outputs_median": float(np.nanmedian(outputs)) / sampling,
        "rhat_loglik": float(d["rhat_loglik"]),
        "step_size": np.asarray(d["step_size"]).tolist(),
        "accept_rate": np.asarray(d["accept_rate"]).tolist(),
        "divergences": int(d["divergences"]),
        "test_ll": float(log_predictive_scorer(est, X_test, y_test)),
        "rmse": float(np.sqrt(np.mean((est.predict(X_test) - y_test) ** 2))),
        "convergence_warning": any(issubclass(w.category, ConvergenceWarning) for w in caught),
        "fit_seconds": seconds, "compile_seconds": float(d["compile_time"]),
    }  # fmt: skip
    if "energy_var_per_dim" in d:
        record["energy_var_per_dim"] = np.asarray(d["energy_var_per_dim"]).tolist()
    if "path_length" in d:
        record["path_length"] = np.asarray(d["path_length"]).tolist()
    return record


def _label(r: dict) -> str:
    """A sampler's row label: its name and, for MCLMC's kind, the sampling gradients."""
    if r["sampler"] in ("mclmc", "blackjax"):
        return f"{r['sampler']} ({r['grad_evals_sampling'] // 1000}k)"
    return r["sampler"]


def report(path: str) -> str:
    """A markdown table per dataset and split: each sampler's bulk ESS (log-likelihood,
    and the least of the monitored outputs) per 10^4 sampling gradients, R-hat of the
    log-likelihood, the ESS per gradient over NUTS's of the same split, and the test
    log-likelihood per row."""
    from pathlib import Path

    rows = [json.loads(s) for s in Path(path).read_text().splitlines() if s.strip()]
    nuts = {(r["dataset"], r["split"]): r for r in rows if r["sampler"] == "nuts"}
    lines = [
        "| dataset | split | sampler | sampling gradients | ESS log-lik | ESS / 10^4 grad, "
        "log-lik | outputs (least) | x NUTS, log-lik | outputs | R-hat log-lik | test LL |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = nuts.get((r["dataset"], r["split"]))
        ll, out = r["ess_per_grad_loglik"], r["ess_per_grad_outputs_min"]
        ratio = (
            [
                f"{ll / ref['ess_per_grad_loglik']:.1f}",
                f"{out / ref['ess_per_grad_outputs_min']:.1f}",
            ]
            if ref
            else ["", ""]
        )
        # BlackJAX's chains are not turned into a predictive: no test log-likelihood
        test = f"{r['test_ll']:.3f}" if "test_ll" in r else ""
        lines.append(
            f"| {r['dataset']} | {r['split']} | {_label(r)} | {r['grad_evals_sampling']:,} | "
            f"{r['ess_bulk_loglik']:.0f} | {1e4 * ll:.2f} | {1e4 * out:.2f} | "
            f"{ratio[0]} | {ratio[1]} | {r['rhat_loglik']:.3f} | {test} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", default=list(UCI_SETS))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--splits", default="0")
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    parser.add_argument("--hidden", nargs="+", type=int, default=[16, 16])
    parser.add_argument("--activation", default="relu")
    parser.add_argument("--n-samples", type=int, default=1000)
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument("--quick", action="store_true", help="short warm-ups: a smoke run")
    parser.add_argument("--mclmc-thin", type=int, default=None,
                        help="MCLMC's (and BlackJAX's) thinning: a larger budget")  # fmt: skip
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, help="print the table of this file")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return
    emit = emitter(args.out)
    info = provenance("mclmc_ess.py", argv)
    one_map_for_all_chains()
    for dataset in args.data:
        for split in parse_splits(args.splits, split_ids(dataset, args.data_dir)):
            _LAST.clear()
            for name in args.samplers:
                if name == "blackjax":
                    emit({**info, **run_blackjax(dataset, split, args)})
                else:
                    emit({**info, **run_fit(dataset, split, name, args)})


if __name__ == "__main__":
    main()
