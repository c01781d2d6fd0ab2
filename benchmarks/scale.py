"""A million rows: the methods that scale, at their defaults, and beside PyTorch.

The data: ``compare_ensemble.synthetic_split`` (20 standard-normal features, a smooth
nonlinear mean of ten of them, heteroscedastic Gaussian noise, sd 0.1-0.5), ``--rows``
training rows and ``--test-rows`` test rows; the oracle's test log-likelihood and RMSE
(the true density and mean) are the ceiling. The model: ``BayesianMLPRegressor(
hidden_layer_sizes=(100, 100), method=M, random_state=0, n_jobs=2)``, a 20-100-100-1
ReLU network, each method at its defaults: ``"ensemble"``, ``"vi"``, ``"swag"``,
``Laplace(hessian="kron")`` and ``"sghmc"``.

Each fit runs in a process of its own, so that its peak memory is its own: the process
builds the data, fits the method once on 200 rows (which compiles its kernels: the timed
fit is warm), notes its resident memory, then fits on all the rows, predicts the test rows
(``predict(return_std=True)`` and the log predictive density) and predicts every training
row. Each prints a JSON line: the fit and prediction times, the peak resident memory above
the memory the process held with the data loaded, the test RMSE and log-likelihood, the
warnings the fit raised, and the epochs its members ran.

``--torch-rows N`` adds the same models in PyTorch (``peers/torch_ensemble.py``,
``peers/torch_bbb.py``) on N training rows, each beside skbnn fitted with the same explicit
settings (epochs, batch size, learning rate; no early stopping), each side in its own
process. Needs torch (the ``bench`` extra)::

    python benchmarks/scale.py --rows 1000000 --torch-rows 100000 \\
        --out benchmarks/results/scale.jsonl

``--report`` prints doc/performance.md's tables of results files, no fit: the default fits
on the most rows (``--part million``) or the PyTorch comparison (``--part torch``)::

    python benchmarks/scale.py --report benchmarks/results/scale.jsonl
    python benchmarks/scale.py --part torch --report benchmarks/results/scale.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))
from _uci import add_report_argument, emitter, machine, read_results  # noqa: E402
from compare_ensemble import _reset_peak_rss, _rss_mb, synthetic_split  # noqa: E402

HIDDEN = (100, 100)
DEFAULTS = ("ensemble", "vi", "swag", "laplace_kron", "sghmc")
#: The torch comparison's settings, the same on both sides: epochs, rows per batch (the
#: engine's ``batch_size="auto"`` on 10^5 rows) and Adam's constant learning rate.
PEER_EPOCHS = 10
PEER_BATCH = 100
PEER_LR = 1e-3
#: Draws of torch's ``q`` for its test log-likelihood (skbnn's VI predicts with its
#: ``n_samples`` default).
PEER_DRAWS = 100


#: The report's label of each method; ``{}``: its members or chains.
LABELS = {
    "ensemble": '`"ensemble"` ({} members)',
    "vi": '`"vi"`',
    "swag": '`"swag"`',
    "laplace_kron": '`Laplace(hessian="kron")`',
    "sghmc": '`"sghmc"` ({} chains)',
}
PEER_LABELS = {"ensemble": "deep ensemble, {} members", "vi": "VI"}


def _row(cells) -> str:
    return "|" + "|".join(f" {c} " if c != "" else " " for c in cells) + "|"


def _warning(texts: list[str]) -> str:
    # a warning's first clause, after its category: the rest is advice the prose gives
    return "; ".join(t.split(": ", 2)[1] for t in texts) or "none"


def report(paths, part: str = "million") -> str:
    """doc/performance.md's table of the results in ``paths``: the default fits on the most
    rows (``part="million"``; a later line of a method replaces an earlier one), or the
    PyTorch comparison (``"torch"``)."""
    lines = read_results(paths)
    lines = [r for r in lines if "error" not in r]
    if part == "million":
        rows = max(r["rows"] for r in lines)
        fits = {r["method"]: r for r in lines if r["side"] == "skbnn" and r["rows"] == rows}
        test_rows = {r["test_rows"] for r in fits.values()}.pop()
        out = [
            f"| method, defaults | fit | predict {test_rows:,} rows | predict {rows:,} rows "
            "| peak above the data | test log-lik. | test RMSE | epochs per member | warning |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for method, r in fits.items():
            epochs = sorted(set(r["epochs"]))
            cells = [
                LABELS[method].format(len(r["epochs"])),
                f"{r['fit_time']:.0f} s",
                f"{r['predict_test_time']:.1f} s",
                f"{r['predict_train_time']:.1f} s",
                f"{r['peak_above_data_mb']:.0f} MB",
                f"{r['test_ll']:.3f}",
                f"{r['rmse']:.3f}",
                "-".join(map(str, (epochs[0], epochs[-1]) if len(epochs) > 1 else epochs)),
                _warning(r["warnings"]),
            ]
            out.append(_row(cells))
        return "\n".join(out) + "\n"
    rows = max(r["rows"] for r in lines if r["side"] == "torch")
    sides = {(r["method"], r["side"]): r for r in lines if r["rows"] == rows}
    version = next(r["torch"] for r in sides.values() if r["side"] == "torch").split("+")[0]
    out = [
        f"| {rows:,} rows | skbnn | PyTorch {version} | ratio | test log-lik. skbnn / PyTorch |",
        "|---|---|---|---|---|",
    ]
    for method, label in PEER_LABELS.items():
        ours, peer = sides[method, "skbnn"], sides[method, "torch"]
        ll = f"{ours['test_ll']:.3f} / {peer['test_ll']:.3f}"
        if "test_ll_se" in peer:
            ll += f" (se {peer['test_ll_se']:.3f})"
        cells = [
            label.format(len(ours["epochs"])),
            f"{ours['fit_time']:.1f} s",
            f"{peer['fit_time']:.1f} s",
            f"**{peer['fit_time'] / ours['fit_time']:.1f}x**",
            ll,
        ]
        out.append(_row(cells))
    return "\n".join(out) + "\n"


def _method(name: str, peer: bool = False):
    """The method of a default fit, or of the torch comparison's fixed settings (``peer``)."""
    from skbnn.methods import DeepEnsemble, Laplace, VariationalInference

    if not peer:
        return Laplace(hessian="kron") if name == "laplace_kron" else name
    fixed = {"max_iter": PEER_EPOCHS, "batch_size": PEER_BATCH, "learning_rate_init": PEER_LR,
             "early_stopping": False, "n_iter_no_change": PEER_EPOCHS}  # fmt: skip
    if name == "ensemble":
        return DeepEnsemble(solver="adam", heteroscedastic=True, **fixed)
    return VariationalInference(n_mc=1, init_std=0.01, tol=0.0, **fixed)


def _data(rows: int, test_rows: int):
    X_train, y_train, X_test, y_test, oracle = synthetic_split(rows + test_rows,
                                                               n_test=test_rows)  # fmt: skip
    return X_train, y_train, X_test, y_test, oracle


def warm_up(reg, X, y) -> None:
    """Fit ``reg`` on 200 rows, which compiles its method's kernels, warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(X[:200], y[:200])


def timed_fit(reg, X, y) -> tuple[float, list[str]]:
    """Fit ``reg``: its wall time, and the warnings it raised (each ``"Category: text"``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        reg.fit(X, y)
        fit_time = time.perf_counter() - t0
    return fit_time, [f"{w.category.__name__}: {w.message}"[:300] for w in caught]


def provenance() -> dict:
    """The command, commit, date and machine that each JSON line carries."""
    commit = subprocess.run(["git", "-C", str(HERE), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    return {"command": " ".join(sys.argv), "commit": commit, "date": time.strftime("%Y-%m-%d"),
            **machine()}  # fmt: skip


def run_skbnn(name: str, rows: int, test_rows: int, peer: bool) -> dict:
    from skbnn import BayesianMLPRegressor
    from skbnn.model_selection import log_predictive_scorer

    X_train, y_train, X_test, y_test, oracle = _data(rows, test_rows)

    def model():
        return BayesianMLPRegressor(hidden_layer_sizes=HIDDEN, method=_method(name, peer),
                                    random_state=0, n_jobs=2)  # fmt: skip

    warm_up(model(), X_train, y_train)
    _reset_peak_rss()
    base = _rss_mb("VmRSS")
    reg = model()
    fit_time, caught = timed_fit(reg, X_train, y_train)
    t0 = time.perf_counter()
    mean, _ = reg.predict(X_test, return_std=True)
    test_ll = float(log_predictive_scorer(reg, X_test, y_test))
    predict_test = time.perf_counter() - t0
    t0 = time.perf_counter()
    reg.predict(X_train, return_std=True)
    predict_train = time.perf_counter() - t0
    diag = reg.diagnostics_
    return {
        "side": "skbnn",
        "fit_time": fit_time,
        "predict_test_time": predict_test,
        "predict_train_time": predict_train,
        "peak_above_data_mb": _rss_mb("VmHWM") - base,
        "rss_with_data_mb": base,
        "rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
        "test_ll": test_ll,
        **oracle,
        "n_draws": int(reg.posterior_.thetas.shape[0]),
        "epochs": np.asarray(diag.get("n_iter", [])).tolist(),
        "max_iter": diag.get("max_iter"),
        "warnings": caught,
    }


def run_torch(name: str, rows: int, test_rows: int) -> dict:
    import torch

    X_train, y_train, X_test, y_test, oracle = _data(rows, test_rows)
    _reset_peak_rss()
    base = _rss_mb("VmRSS")
    if name == "ensemble":
        from torch_ensemble import mixture_scores, train_ensemble

        fit = train_ensemble(X_train, y_train, n_members=5, hidden=HIDDEN, epochs=PEER_EPOCHS,
                             batch_size=PEER_BATCH, lr=PEER_LR, n_threads=2)  # fmt: skip
        peak = _rss_mb("VmHWM") - base
        scores = mixture_scores(*fit.predict(X_test), y_test)
    else:
        from torch_bbb import predictive_log_density, sample_q, train_bbb

        fit = train_bbb(X_train, y_train, hidden=HIDDEN, epochs=PEER_EPOCHS,
                        batch_size=PEER_BATCH, lr=PEER_LR, n_mc=1, init_std=0.01,
                        n_threads=2)  # fmt: skip
        peak = _rss_mb("VmHWM") - base
        thetas = sample_q(fit.mu, fit.sigma, PEER_DRAWS)
        # in blocks of rows: the draws' hidden layers of all test rows at once do not fit
        row_ll = np.concatenate([
            predictive_log_density(thetas, fit.sizes, X_test[lo : lo + 2000],
                                   y_test[lo : lo + 2000], fit.y_mean, fit.y_sd)
            for lo in range(0, len(y_test), 2000)
        ])  # fmt: skip
        scores = {"test_ll": float(np.mean(row_ll))}
    return {
        "side": "torch",
        "torch": torch.__version__,
        "fit_time": fit.fit_time,
        "peak_above_data_mb": peak,
        **scores,
        **oracle,
    }


def child(args) -> None:
    if args.side == "torch":
        record = run_torch(args.method, args.rows, args.test_rows)
    else:
        record = run_skbnn(args.method, args.rows, args.test_rows, args.side == "peer")
    record.update(method=args.method, rows=args.rows, test_rows=args.test_rows,
                  hidden=list(HIDDEN))  # fmt: skip
    print("RESULT " + json.dumps(record), flush=True)


def spawn(method: str, side: str, rows: int, test_rows: int) -> dict:
    cmd = [sys.executable, __file__, "--child", "--method", method, "--side", side,
           "--rows", str(rows), "--test-rows", str(test_rows)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    if out.returncode or not lines:
        return {"method": method, "side": side, "rows": rows, "error": out.stderr[-2000:]}
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument("--methods", nargs="+", default=list(DEFAULTS), choices=DEFAULTS)
    parser.add_argument("--torch-rows", type=int, default=0,
                        help="rows of the PyTorch comparison (0: none)")  # fmt: skip
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--side", default="skbnn", help=argparse.SUPPRESS)
    add_report_argument(parser, "doc/performance.md")
    parser.add_argument(
        "--part",
        choices=("million", "torch"),
        default="million",
        help="the report's table: the default fits, or the PyTorch comparison",
    )
    args = parser.parse_args()
    if args.report:
        print(report(args.report, args.part), end="")
        return
    if args.child:
        child(args)
        return
    emit = emitter(args.out)
    info = provenance()
    for method in args.methods:
        emit({**info, **spawn(method, "skbnn", args.rows, args.test_rows)})
    if args.torch_rows:
        for method in ("ensemble", "vi"):
            for side in ("peer", "torch"):
                emit({**info, **spawn(method, side, args.torch_rows, args.test_rows)})


if __name__ == "__main__":
    main()
