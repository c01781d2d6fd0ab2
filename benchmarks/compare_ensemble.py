"""skbnn's deep ensemble vs the same ensemble in PyTorch (CPU), in one run, with sklearn's MLP.

The model both train (see ``peers/torch_ensemble.py``): X standardized on the training split, y
standardized inside, a ``d -> 50 ReLU -> 2`` heteroscedastic network (mean, softplus variance),
sklearn's uniform initialization, the minibatch loss mean NLL + prior / n, Adam at a constant
learning rate for a fixed number of epochs, M members one after another; the predictive is the
equally weighted Gaussian mixture. scikit-learn's ``MLPRegressor`` (one network, squared loss,
no uncertainty, y standardized the same way) is trained for the same epochs as the cost floor.

The sides alternate (skbnn, torch, sklearn, skbnn, ...) for ``--reps`` repetitions, so drifts in
the machine's load hit all of them. Repetition 0 uses the same seed as repetition 1 and is left
out of the warm medians; the very first skbnn fit in the process starts from an empty numba
cache (a fresh ``NUMBA_CACHE_DIR``, a new install) and is marked ``cold``. Each fit prints a
JSON line (fit time, test RMSE, test log-likelihood in original units and its standard error
over test rows, the peak RSS during the fit); each case ends with a summary line per side
(warm medians) and one with the ratios torch / skbnn and sklearn / skbnn.

Threads: skbnn runs its members in ``--n-jobs`` threads (default 2); torch trains its members one
after another on ``--torch-threads`` intra-op threads, default 1, its fastest setting here: the
matrices of a 50-unit network are too small for intra-op parallelism to pay, and on a machine
whose cores are shared, 2 OpenMP threads that spin at barriers made torch 2 to 20 times slower.
``--torch-fused`` uses Adam's fused CPU kernel (same arithmetic, 10-20% faster per step).

Cases (``--case``):

* ``boston``: UCI bostonHousing, split 0.
* ``synthetic``: 50,000 rows x 20 features (10% test) from ``synthetic_split``: a smooth
  nonlinear mean and heteroscedastic Gaussian noise; its summary also gives the oracle test
  log-likelihood and RMSE (the true generating density and mean).

Needs torch (CPU build)::

    python benchmarks/compare_ensemble.py --case boston synthetic --reps 3

doc/optimization.md's table is the report of the results file, which needs no torch::

    python benchmarks/compare_ensemble.py --report benchmarks/results/compare_ensemble.jsonl
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

SIDES = ("skbnn", "torch", "sklearn")


def synthetic_split(n_rows: int = 50_000, n_features: int = 20, seed: int = 20240314,
                    n_test: int | None = None):  # fmt: skip
    """The synthetic regression set: ``(X_train, y_train, X_test, y_test, oracle)``.

    x ~ N(0, I) in ``n_features`` (>= 10) dimensions; the mean
    ``sin(1.5 x0) + 0.5 x1 x2 + tanh(x3 + 0.5 x4) + 0.25 (x5 + x6 + x7 + x8)`` (the other
    features are noise); the noise sd ``0.1 + 0.4 sigmoid(x0 + x9)``, between 0.1 and 0.5.
    The last ``n_test`` rows (default 10%) are the test split; X is standardized on the
    training split.
    ``oracle`` holds ``oracle_test_ll``, the mean log density of the test targets under the
    true model, and ``oracle_rmse``, the RMSE of the true mean.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, n_features))
    f = (np.sin(1.5 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + np.tanh(X[:, 3] + 0.5 * X[:, 4])
         + 0.25 * X[:, 5:9].sum(axis=1))  # fmt: skip
    sd = 0.1 + 0.4 / (1.0 + np.exp(-(X[:, 0] + X[:, 9])))
    y = f + sd * rng.standard_normal(n_rows)
    n_train = n_rows - (n_rows // 10 if n_test is None else n_test)
    z = (y[n_train:] - f[n_train:]) / sd[n_train:]
    oracle = {
        "oracle_test_ll": float(np.mean(-0.5 * np.log(2 * np.pi) - np.log(sd[n_train:])
                                        - 0.5 * z**2)),
        "oracle_rmse": float(np.sqrt(np.mean((y[n_train:] - f[n_train:]) ** 2))),
    }  # fmt: skip
    X_train, X_test = standardize(X[:n_train], X[n_train:])
    return X_train, y[:n_train], X_test, y[n_train:], oracle


def load_case(name: str, rows: int, data_dir) -> tuple[tuple, dict]:
    """``(X_train, y_train, X_test, y_test)`` of a case and facts about it."""
    if name == "synthetic":
        *data, oracle = synthetic_split(rows)
        return tuple(data), {"n_rows": rows, **oracle}
    X_train, y_train, X_test, y_test = load_split("bostonHousing", 0, data_dir)
    X_train, X_test = standardize(X_train, X_test)
    return (X_train, y_train, X_test, y_test), {"dataset": "bostonHousing", "split": 0}


def _reset_peak_rss() -> bool:
    """Reset the process's peak RSS (VmHWM) on Linux; False where it cannot be."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _rss_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            line = next(line for line in f if line.startswith(field + ":"))
        return int(line.split()[1]) / 1024.0
    except (OSError, StopIteration):
        return None


def measured(fit):
    """Run ``fit()`` (returning a dict); add its wall time, RSS before and peak RSS during."""
    can_reset = _reset_peak_rss()
    before = _rss_mb("VmRSS")
    start = time.perf_counter()
    out = fit()
    out.setdefault("fit_time", time.perf_counter() - start)
    out["rss_before_mb"] = before
    out["peak_rss_mb"] = _rss_mb("VmHWM") if can_reset else None
    return out


def run_skbnn(data, cfg: dict, seed: int) -> dict:
    from skbnn import BayesianMLPRegressor
    from skbnn.methods import DeepEnsemble
    from skbnn.model_selection import log_predictive_scorer

    X_train, y_train, X_test, y_test = data
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(cfg["hidden"],), activation="relu", n_samples=cfg["members"],
        method=DeepEnsemble(
            solver="adam", heteroscedastic=True, max_iter=cfg["epochs"],
            batch_size=cfg["batch_size"], learning_rate_init=cfg["lr"],
        ),
        random_state=seed, n_jobs=cfg["n_jobs"],
    )  # fmt: skip

    def fit():
        start = time.perf_counter()
        reg.fit(X_train, y_train)
        return {"fit_time": time.perf_counter() - start}

    with warnings.catch_warnings():
        # a fixed epoch budget is the protocol, so hitting max_iter is expected
        warnings.filterwarnings("ignore", message=".*max_iter.*")
        r = measured(fit)
    mean, std = reg.predict(X_test, return_std=True)
    r["rmse"] = float(np.sqrt(np.mean((mean - y_test) ** 2)))
    r["test_ll"] = log_predictive_scorer(reg, X_test, y_test)
    if hasattr(reg, "predictive_"):
        row_ll = np.asarray(reg.predictive_.log_predictive_density(X_test, y_test)).ravel()
        r["test_ll_se"] = float(row_ll.std(ddof=1) / np.sqrt(len(row_ll)))
    diag = getattr(reg, "diagnostics_", None) or {}
    if "compile_time" in diag:
        r["compile_time"] = float(diag["compile_time"])
    return r


def run_torch(data, cfg: dict, seed: int) -> dict:
    import torch_ensemble

    X_train, y_train, X_test, y_test = data

    def fit():
        ens = torch_ensemble.train_ensemble(
            X_train, y_train, n_members=cfg["members"], hidden=cfg["hidden"],
            epochs=cfg["epochs"], batch_size=cfg["batch_size"], lr=cfg["lr"], seed=seed,
            n_threads=cfg["torch_threads"], fused=cfg["torch_fused"],
        )  # fmt: skip
        return {"fit_time": ens.fit_time, "ens": ens}

    r = measured(fit)
    ens = r.pop("ens")
    r.update(torch_ensemble.mixture_scores(*ens.predict(X_test), y_test))
    curves = ens.loss_curves
    r["loss_first_epoch"] = float(curves[:, 0].mean())
    r["loss_last_epoch"] = float(curves[:, -1].mean())
    r["loss_decreased"] = bool(np.all(curves[:, -1] < curves[:, 0]))
    return r


def run_sklearn(data, cfg: dict, seed: int) -> dict:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPRegressor
    from threadpoolctl import threadpool_limits

    X_train, y_train, X_test, y_test = data
    epochs = cfg["epochs"]
    reg = MLPRegressor(
        hidden_layer_sizes=(cfg["hidden"],), solver="adam", batch_size=cfg["batch_size"],
        learning_rate_init=cfg["lr"], max_iter=epochs, alpha=0.0, shuffle=True,
        n_iter_no_change=epochs + 1, tol=0.0, random_state=seed,
    )  # fmt: skip
    scale = {}

    def fit():
        # y standardized as on the other sides, so the same learning rate means the same
        start = time.perf_counter()
        scale["mean"], scale["sd"] = y_train.mean(), y_train.std()
        reg.fit(X_train, (y_train - scale["mean"]) / scale["sd"])
        return {"fit_time": time.perf_counter() - start}

    with threadpool_limits(cfg["n_jobs"]), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        r = measured(fit)
    pred = reg.predict(X_test) * scale["sd"] + scale["mean"]
    r["rmse"] = float(np.sqrt(np.mean((pred - y_test) ** 2)))
    r["n_iter"] = int(reg.n_iter_)
    return r


def summarize(name: str, side: str, runs: list[dict]) -> dict:
    warm = runs[1:]

    def med(key):
        vals = [r[key] for r in warm if r.get(key) is not None]
        return float(np.median(vals)) if vals else None

    out = {"summary": True, "case": name, "side": side, "cold_fit_time": runs[0]["fit_time"],
           "cold": runs[0]["cold"], "n_warm_reps": len(warm)}  # fmt: skip
    for key in ("fit_time", "rmse", "test_ll", "test_ll_se", "peak_rss_mb", "rss_before_mb"):
        out[key] = med(key)
    lls = [r["test_ll"] for r in warm if r.get("test_ll") is not None]
    out["test_ll_sd_over_reps"] = float(np.std(lls, ddof=1)) if len(lls) > 1 else None
    return out


def _ratio(summaries: dict, side: str, key: str) -> float | None:
    """``side``'s ``key`` over skbnn's, or None where either is missing."""
    sk, other = summaries.get("skbnn"), summaries.get(side)
    if sk is None or other is None or not sk[key] or not other[key]:
        return None
    return other[key] / sk[key]


#: the cases' names in the table
LABELS = {"boston": "Boston, split 0", "synthetic": "synthetic 50,000 x 20"}


def _seconds(t: float) -> str:
    return f"{t:.2g} s" if t < 1 else f"{t:.1f} s"


def report(path) -> str:
    """doc/optimization.md's table of the results file ``path`` (a case's later summary
    replaces an earlier one); the test log-likelihood's difference to two significant
    figures of its standard error."""
    lines = read_results(path)
    summary = {(r["case"], r["side"]): r for r in lines if r.get("summary")}
    out = ["| case | skbnn | PyTorch | ratio | sklearn `MLPRegressor` (one net) | "
           "test LL skbnn - torch |", "|---|---|---|---|---|---|"]  # fmt: skip
    for case in dict.fromkeys(c for c, _ in summary):
        sk, th, sl, ratio = (summary[case, side] for side in (*SIDES, "ratios"))
        cold = f" ({sk['cold_fit_time']:.1f} s cold)" if sk["cold"] else ""
        se = ratio["its se (test rows)"]
        digits = max(0, 1 - math.floor(math.log10(se)))
        cells = [LABELS.get(case, case), _seconds(sk["fit_time"]) + cold,
                 _seconds(th["fit_time"]), f"**{ratio['torch_time / skbnn_time']:.1f}x**",
                 _seconds(sl["fit_time"]),
                 f"{ratio['test_ll skbnn - torch']:+.{digits}f} +- {se:.{digits}f}"]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", choices=["boston", "synthetic"],
                        default=["boston", "synthetic"])  # fmt: skip
    parser.add_argument("--reps", type=int, default=3, help="at least 2 (rep 0 is not warm)")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--members", type=int, default=5, help="M")
    parser.add_argument("--hidden", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=100, help="B")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--n-jobs", type=int, default=2, help="skbnn n_jobs, sklearn's BLAS")
    parser.add_argument("--torch-threads", type=int, default=1, help="see the module docstring")
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
        try:
            from skbnn.methods import DeepEnsemble  # noqa: F401
        except ImportError as exc:
            emit({"side": "skbnn", "skipped": f"skbnn.methods.DeepEnsemble: {exc}"})
            sides.remove("skbnn")
    if "torch" in sides:
        import torch

        versions["torch"] = torch.__version__
    if "sklearn" in sides:
        import sklearn

        versions["sklearn"] = sklearn.__version__
    cfg = {k: getattr(args, k) for k in ("members", "hidden", "epochs", "batch_size", "lr",
                                         "n_jobs", "torch_threads", "torch_fused")}  # fmt: skip
    command = "python benchmarks/compare_ensemble.py " + " ".join(sys.argv[1:])
    runners = {"skbnn": run_skbnn, "torch": run_torch, "sklearn": run_sklearn}
    first_fit = set(sides)  # sides whose next fit is the first in this process

    for name in args.case:
        data, facts = load_case(name, args.synthetic_rows, args.data_dir)
        runs = {side: [] for side in sides}
        for rep in range(args.reps):
            seed = max(rep - 1, 0)
            for side in list(sides):
                try:
                    r = runners[side](data, cfg, seed)
                except Exception as exc:
                    if side != "skbnn":
                        raise
                    # the skbnn side is under construction: say so and keep the peers running
                    emit({"case": name, "side": side, "rep": rep, "error": repr(exc)})
                    sides.remove(side)
                    del runs[side]
                    continue
                r["cold"] = side in first_fit
                first_fit.discard(side)
                runs[side].append(r)
                emit({"case": name, "side": side, "rep": rep, "seed": seed, **r})
        summaries = {side: summarize(name, side, rs) for side, rs in runs.items()}
        for s in summaries.values():
            emit({**s, **cfg, **facts, **versions, **machine(), "command": command})
        sk = summaries.get("skbnn")
        ll_diff = ll_diff_se = None
        if sk and "torch" in summaries and sk["test_ll"] is not None:
            th = summaries["torch"]
            ll_diff = sk["test_ll"] - th["test_ll"]
            if sk["test_ll_se"] is not None:
                ll_diff_se = float(np.hypot(sk["test_ll_se"], th["test_ll_se"]))
        emit({
            "summary": True, "case": name, "side": "ratios",
            "torch_time / skbnn_time": _ratio(summaries, "torch", "fit_time"),
            "torch_time / skbnn_time (cold)": (_ratio(summaries, "torch", "cold_fit_time")
                                               if sk and sk["cold"] else None),
            "sklearn_time / skbnn_time": _ratio(summaries, "sklearn", "fit_time"),
            "test_ll skbnn - torch": ll_diff, "its se (test rows)": ll_diff_se,
        })  # fmt: skip


if __name__ == "__main__":
    main()
