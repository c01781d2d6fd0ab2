"""skbnn's variational inference vs the same Bayes by Backprop in PyTorch (CPU), in one run.

The model both fit (see ``peers/torch_bbb.py``): X standardized on the training split, y
standardized inside, a ``d -> 50 ReLU -> 1`` network with the default Gaussian prior
(weights N(0, 1/fan_in), biases N(0, 1)) and the noise precision inferred under its
Gamma(1, 1e-3) prior; ``q`` mean-field Gaussian over weights, biases and ``log tau``,
``sigma = softplus(rho)`` from ``init_std``, means from scikit-learn's initialization;
the per-step objective whose epoch average is the ELBO, with the weights' KL in closed form
and the local reparameterization trick; ``n_mc`` draws per step; Adam at a constant
learning rate for a fixed number of epochs (skbnn: ``tol=0``, so no early stop) with the
same batch size.

Both sides' fitted ``q`` are judged by the same numpy code (``torch_bbb.elbo_draws`` and
``torch_bbb.predictive_log_density``): the ELBO from ``--elbo-draws`` independent draws
over all training rows, in original units, with its Monte Carlo standard error; the test
log-likelihood of the mixture of ``--pred-draws`` draws of ``q``. skbnn's own ``elbo_``
and ``log_predictive_scorer`` are reported beside them.

The sides alternate (skbnn, torch, skbnn, ...) for ``--reps`` repetitions, so drifts in
the machine's load hit both. Repetition 0 uses the same seed as repetition 1 and is left
out of the warm medians; the very first skbnn fit in the process starts from an empty numba
cache (a fresh ``NUMBA_CACHE_DIR``, a new install) and is marked ``cold``. Times:
``fit_time`` is skbnn's whole ``fit`` (validation, compilation when cold, training, the
final 100-draw ELBO and the prediction draws) and torch's training alone (numpy in, trained
``q`` out); ``train_time`` is the optimization alone on both sides (skbnn's
``diagnostics_["train_time"]``). The ratios are torch's over skbnn's.

Each fit prints a JSON line; each case ends with a summary per side (warm medians, and the
sd over warm repetitions of the ELBO and test log-likelihood, i.e. across seeds) and a
ratio line: the time ratios, and the differences skbnn - torch of the mean ELBO, test
log-likelihood and RMSE over the warm repetitions (each a different seed), with their
standard errors from the spread over seeds.

Both sides run on one thread: VI trains one ``q``, so skbnn has nothing to run in
parallel, and torch's intra-op threads do not pay on matrices this small (see
``compare_ensemble.py``).

Cases (``--case``), with the epochs and batch size of each (``--epochs`` and
``--batch-size`` override them):

* ``boston``: UCI bostonHousing, split 0 (455 training rows); batch 32, 700 epochs
  (10,500 steps, about VI's default of 10,000).
* ``synthetic``: the 50,000-row, 20-feature set of ``compare_ensemble.py`` (45,000
  training rows); batch 100, 20 epochs (9,000 steps).

Needs torch (CPU build)::

    python benchmarks/compare_vi.py --case boston synthetic --reps 3

doc/optimization.md's table is the report of the results file, which needs no torch::

    python benchmarks/compare_vi.py --report benchmarks/results/compare_vi.jsonl
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))
from _uci import emitter, fresh_numba_cache, load_split, machine, read_results, standardize  # noqa: E402
from torch_bbb import elbo_draws, predictive_log_density, sample_q  # noqa: E402

SIDES = ("skbnn", "torch")
#: Per case: (batch size, epochs).
CASES = {"boston": (32, 700), "synthetic": (100, 20)}


def load_case(name: str, rows: int, data_dir) -> tuple[tuple, dict]:
    """``(X_train, y_train, X_test, y_test)`` of a case (X standardized) and facts."""
    if name == "synthetic":
        from compare_ensemble import synthetic_split

        *data, oracle = synthetic_split(rows)
        return tuple(data), {"n_rows": rows, **oracle}
    X_train, y_train, X_test, y_test = load_split("bostonHousing", 0, data_dir)
    X_train, X_test = standardize(X_train, X_test)
    return (X_train, y_train, X_test, y_test), {"dataset": "bostonHousing", "split": 0}


def judge(mu, sigma, sizes, data, y_mean, y_sd, cfg: dict, seed: int) -> dict:
    """The ELBO and the test log-likelihood of ``q = N(mu, diag(sigma^2))``, by the same code
    for both sides; the per-row test log densities under ``"_row_ll"``."""
    X_train, y_train, X_test, y_test = data
    draws = elbo_draws(mu, sigma, sizes, X_train, y_train, y_mean, y_sd, cfg["elbo_draws"],
                       seed=10_000 + seed)  # fmt: skip
    thetas = sample_q(mu, sigma, cfg["pred_draws"], seed=20_000 + seed)
    row_ll = predictive_log_density(thetas, sizes, X_test, y_test, y_mean, y_sd)
    f = predictive_mean(thetas, sizes, X_test, y_mean, y_sd)
    return {
        "elbo": float(draws.mean()),
        "elbo_se": float(draws.std(ddof=1) / math.sqrt(draws.size)),
        "test_ll": float(row_ll.mean()),
        "test_ll_se": float(row_ll.std(ddof=1) / math.sqrt(row_ll.size)),
        "rmse": float(np.sqrt(np.mean((f - y_test) ** 2))),
        "_row_ll": row_ll,
    }


def predictive_mean(thetas, sizes, X, y_mean, y_sd) -> np.ndarray:
    from torch_bbb import _outputs

    n_w = thetas.shape[1] - 1
    return _outputs(thetas[:, :n_w], sizes, X).mean(axis=0) * y_sd + y_mean


def run_skbnn(data, cfg: dict, seed: int) -> dict:
    from skbnn import BayesianMLPRegressor
    from skbnn.methods import VariationalInference
    from skbnn.model_selection import log_predictive_scorer

    X_train, y_train, X_test, y_test = data
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(cfg["hidden"],), activation="relu", n_samples=cfg["pred_draws"],
        method=VariationalInference(
            n_mc=cfg["n_mc"], init_std=cfg["init_std"], learning_rate_init=cfg["lr"],
            batch_size=cfg["batch_size"], max_iter=cfg["epochs"], tol=0.0,
        ),
        random_state=seed, n_jobs=1,
    )  # fmt: skip
    with warnings.catch_warnings():
        # a fixed epoch budget is the protocol; tol=0 never declares convergence
        warnings.filterwarnings("ignore", message=".*ELBO had not stabilized.*")
        start = time.perf_counter()
        reg.fit(X_train, y_train)
        fit_time = time.perf_counter() - start
    diag = reg.diagnostics_
    post = reg.posterior_
    sizes = (X_train.shape[1], cfg["hidden"], 1)
    y_mean, y_sd = float(reg.predictive_.y_mean[0]), float(reg.predictive_.y_std[0])
    r = {"fit_time": fit_time, "train_time": float(diag["train_time"]),
         "compile_time": float(diag["compile_time"])}  # fmt: skip
    r.update(judge(post.mean[0], np.sqrt(post.var[0]), sizes, data, y_mean, y_sd, cfg, seed))
    r["own_elbo"] = float(reg.elbo_)
    r["own_elbo_se"] = float(diag["elbo_se"])
    r["own_test_ll"] = float(log_predictive_scorer(reg, X_test, y_test))
    curve = diag["loss_curve"][0]
    r["loss_first_epoch"], r["loss_last_epoch"] = float(curve[0]), float(curve[-1])
    r["n_steps"] = int(diag["n_grad_evals"]) // cfg["n_mc"]
    return r


def run_torch(data, cfg: dict, seed: int) -> dict:
    import torch_bbb

    X_train, y_train = data[0], data[1]
    fit = torch_bbb.train_bbb(
        X_train, y_train, hidden=cfg["hidden"], epochs=cfg["epochs"],
        batch_size=cfg["batch_size"], lr=cfg["lr"], n_mc=cfg["n_mc"], init_std=cfg["init_std"],
        seed=seed, n_threads=cfg["torch_threads"], fused=cfg["torch_fused"],
    )  # fmt: skip
    r = {"fit_time": fit.fit_time, "train_time": fit.fit_time}
    r.update(judge(fit.mu, fit.sigma, fit.sizes, data, fit.y_mean, fit.y_sd, cfg, seed))
    r["loss_first_epoch"] = float(fit.loss_curve[0])
    r["loss_last_epoch"] = float(fit.loss_curve[-1])
    return r


def summarize(name: str, side: str, runs: list[dict]) -> dict:
    warm = runs[1:]
    out = {"summary": True, "case": name, "side": side, "cold_fit_time": runs[0]["fit_time"],
           "cold": runs[0]["cold"], "n_warm_reps": len(warm)}  # fmt: skip
    for key in ("fit_time", "train_time", "elbo", "elbo_se", "test_ll", "test_ll_se", "rmse",
                "own_elbo", "own_test_ll", "loss_last_epoch"):  # fmt: skip
        vals = [r[key] for r in warm if r.get(key) is not None]
        out[key] = float(np.median(vals)) if vals else None
    for key in ("elbo", "test_ll"):
        vals = [r[key] for r in warm]
        out[key + "_sd_over_reps"] = float(np.std(vals, ddof=1)) if len(vals) > 1 else None
    return out


#: per case, its name and training rows in the table (the results lines keep neither)
LABELS = {"boston": ("Boston, split 0", 455), "synthetic": ("synthetic 50,000 x 20", 45_000)}


def _diff(r: dict, key: str, fmt: str) -> str:
    return f"{r[key + ' skbnn - torch']:{fmt}} +- {r[key + ' difference se']:{fmt[1:]}}"


def report(path) -> str:
    """doc/optimization.md's table of the results file ``path`` (a case's later run
    replaces an earlier one)."""
    lines = read_results(path)
    summary = {(r["case"], r["side"]): r for r in lines if r.get("summary")}
    steps = {r["case"]: r["n_steps"] for r in lines if "n_steps" in r}
    head = ("| case | steps | skbnn fit | PyTorch | ratio | ELBO skbnn - torch | "
            "test LL skbnn - torch | training alone |")  # fmt: skip
    out = [head, "|---|---|---|---|---|---|---|---|"]
    for case in dict.fromkeys(c for c, _ in summary):
        sk, th, ratio = (summary[case, side] for side in (*SIDES, "ratios"))
        name, rows = LABELS.get(case, (case, None))
        label = f"{name} ({rows:,} rows, batch {sk['batch_size']}, {sk['epochs']} epochs)"
        cold = f" ({sk['cold_fit_time']:.1f} s cold)" if sk["cold"] else ""
        elbo_fmt = "+.1f" if ratio["elbo difference se"] < 10 else "+.0f"
        cells = [label, f"{steps[case]:,}", f"{sk['fit_time']:.2f} s{cold}",
                 f"{th['fit_time']:.2f} s", f"**{ratio['torch / skbnn fit_time']:.1f}x**",
                 f"{_diff(ratio, 'elbo', elbo_fmt)} (of {sk['elbo']:,.0f})",
                 _diff(ratio, "test_ll", "+.3f"),
                 f"{ratio['torch / skbnn train_time']:.1f}x"]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--reps", type=int, default=3, help="at least 2 (rep 0 is not warm)")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--hidden", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=None, help="default: per case")
    parser.add_argument("--batch-size", type=int, default=None, help="B; default: per case")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--n-mc", type=int, default=1)
    parser.add_argument("--init-std", type=float, default=0.01)
    parser.add_argument("--elbo-draws", type=int, default=100)
    parser.add_argument("--pred-draws", type=int, default=100)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--torch-fused", action="store_true", help="torch: Adam(fused=True)")
    parser.add_argument("--synthetic-rows", type=int, default=50_000)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--keep-cache", action="store_true", help="skbnn: use numba's cache")
    parser.add_argument("--report", default=None, metavar="FILE",
                        help="print the table of this results file (no fit)")  # fmt: skip
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    if args.reps < 2:
        parser.error("--reps must be at least 2: rep 0 is left out of the warm medians")
    if not args.keep_cache:
        fresh_numba_cache()

    emit = emitter(args.out)

    sides = [s for s in SIDES if s in args.sides]
    versions = {}
    if "skbnn" in sides:
        import skbnn

        versions["skbnn"] = skbnn.__version__
    if "torch" in sides:
        import torch

        versions["torch"] = torch.__version__
    command = "python benchmarks/compare_vi.py " + " ".join(sys.argv[1:])
    runners = {"skbnn": run_skbnn, "torch": run_torch}
    first_fit = set(sides)

    for name in args.case:
        data, facts = load_case(name, args.synthetic_rows, args.data_dir)
        batch, epochs = CASES[name]
        cfg = {"hidden": args.hidden, "epochs": args.epochs or epochs,
               "batch_size": args.batch_size or batch, "lr": args.lr, "n_mc": args.n_mc,
               "init_std": args.init_std, "elbo_draws": args.elbo_draws,
               "pred_draws": args.pred_draws, "torch_threads": args.torch_threads,
               "torch_fused": args.torch_fused}  # fmt: skip
        runs = {side: [] for side in sides}
        for rep in range(args.reps):
            seed = max(rep - 1, 0)
            for side in sides:
                r = runners[side](data, cfg, seed)
                r["cold"] = side in first_fit
                first_fit.discard(side)
                runs[side].append(r)
                emit({"case": name, "side": side, "rep": rep, "seed": seed, **r})
        summaries = {side: summarize(name, side, rs) for side, rs in runs.items()}
        for s in summaries.values():
            emit({**s, **cfg, **facts, **versions, **machine(), "command": command})
        if len(summaries) == 2:
            sk, th = summaries["skbnn"], summaries["torch"]
            record = {
                "summary": True, "case": name, "side": "ratios",
                "torch / skbnn fit_time": th["fit_time"] / sk["fit_time"],
                "torch / skbnn train_time": th["train_time"] / sk["train_time"],
                "torch / skbnn fit_time (cold)": (th["cold_fit_time"] / sk["cold_fit_time"]
                                                  if sk["cold"] else None),
            }  # fmt: skip
            warm = {side: rs[1:] for side, rs in runs.items()}
            for key in ("elbo", "test_ll", "rmse"):
                # the seeds differ between repetitions: the difference of the means over
                # repetitions, with its standard error from their spread (Welch)
                a, b = (np.array([r[key] for r in warm[side]]) for side in SIDES)
                record[f"{key} skbnn - torch"] = float(a.mean() - b.mean())
                record[f"{key} difference se"] = float(
                    math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
                )
            # the test rows are the same on both sides: the paired difference's se shows
            # how much of a repetition's difference is test-set noise
            paired = [(a["_row_ll"] - b["_row_ll"]).std(ddof=1) / math.sqrt(a["_row_ll"].size)
                      for a, b in zip(warm["skbnn"], warm["torch"], strict=True)]  # fmt: skip
            record["test_ll paired se per repetition (median)"] = float(np.median(paired))
            emit(record)


if __name__ == "__main__":
    main()
