"""A method's defaults on many rows: the Friedman-1 variant of 20 features on up to 10^6
rows, test RMSE and log-likelihood, the fit time and the warnings.

The data: ``X ~ U(-1.7, 1.7)`` in 20 columns (unit variance, so no scaler is needed), the
target Friedman's ``10 sin(pi x0 x1) + 20 (x2 - 0.5)**2 + 10 x3 + 5 x4`` of those
columns as they are (so the sine turns through several periods: the variant of issue 75,
where HistGradientBoostingRegressor reaches an RMSE near 5 on 15,000 rows) plus noise of
sd 1; the noise floor of the test log-likelihood is ``-0.5 log(2 pi e) = -1.419``. One
JSON line per fit::

    python benchmarks/many_rows.py --rows 1000000 --hidden 100 100 --methods sghmc ensemble \\
        --out benchmarks/results/many_rows.jsonl
    python benchmarks/many_rows.py --rows 1000000 --hidden 100 100 --methods sghmc \\
        --method-params '{"max_iter": 80}' --out benchmarks/results/many_rows.jsonl
    python benchmarks/many_rows.py --report benchmarks/results/many_rows_width.jsonl

``--report FILE`` prints a results file's fits as doc/defaults.md's table: the test
log-likelihood by rows and network (the last line of each), the method that ran where it
is not the ensemble, the fit time, the best of a row in bold.
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
from _uci import emitter, provenance, read_results  # noqa: E402

N_FEATURES = 20
HALF_WIDTH = 1.7


def friedman_variant(n_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_rows`` rows of the variant: 20 unit-variance features, Friedman-1 of the
    first five, noise sd 1."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-HALF_WIDTH, HALF_WIDTH, (n_rows, N_FEATURES))
    f = (
        10 * np.sin(np.pi * X[:, 0] * X[:, 1])
        + 20 * (X[:, 2] - 0.5) ** 2
        + 10 * X[:, 3]
        + 5 * X[:, 4]
    )
    return X, f + rng.standard_normal(n_rows)


def run_fit(method: str, args) -> dict:
    from skbnn import BayesianMLPRegressor
    from skbnn.exceptions import ConvergenceWarning
    from skbnn.methods import METHODS
    from skbnn.model_selection import log_predictive_scorer

    X, y = friedman_variant(args.rows, args.seed)
    X_test, y_test = friedman_variant(args.test_rows, args.seed + 1)
    params = json.loads(args.method_params) if args.method_params else {}
    est = BayesianMLPRegressor(
        hidden_layer_sizes=tuple(args.hidden),
        activation=args.activation,
        method="auto" if method == "auto" else METHODS[method](**params),
        random_state=args.seed,
        n_jobs=-1,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        est.fit(X, y)
        fit_time = time.perf_counter() - t0
    texts = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    diag = est.diagnostics_
    gains = diag.get("cycle_gains")
    return {
        "method": method,
        "method_": type(est.method_).__name__,
        "method_params": params,
        "rows": args.rows,
        "hidden": list(args.hidden),
        "activation": args.activation,
        "seed": args.seed,
        "fit_time": fit_time,
        "compile_time": float(diag.get("compile_time", 0.0)),
        "rmse": float(np.sqrt(np.mean((est.predict(X_test) - y_test) ** 2))),
        "test_ll": float(log_predictive_scorer(est, X_test, y_test)),
        "warned": bool(texts),
        "warnings": texts,
        "max_iter": diag.get("max_iter"),
        "cycle_gains": None if gains is None else np.asarray(gains).tolist(),
    }


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def report(path) -> str:
    """doc/defaults.md's table of a results file: rows by network."""
    lines = read_results(path)
    last = {(r["rows"], "-".join(map(str, r["hidden"]))): r for r in lines}
    networks = sorted({k[1] for k in last}, key=lambda h: [int(u) for u in h.split("-")])
    out = ["| rows | " + " | ".join(f"{h} units" if i == 0 else h for i, h in enumerate(networks))
           + " |", "|---" * (len(networks) + 1) + "|"]  # fmt: skip
    for rows in sorted({k[0] for k in last}):
        fits = [last.get((rows, h)) for h in networks]
        best = f"{max(r['test_ll'] for r in fits if r):.2f}"
        cells = []
        for r in fits:
            if r is None:
                cells.append("")
                continue
            ll = f"{r['test_ll']:.2f}"
            ran = "" if r["method_"] == "DeepEnsemble" else f"{r['method_']}, "
            cells.append(f"{f'**{ll}**' if ll == best else ll} ({ran}{_seconds(r['fit_time'])})")
        out.append(f"| {rows:,} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--test-rows", type=int, default=10_000)
    parser.add_argument("--hidden", type=int, nargs="+", default=[100, 100])
    parser.add_argument("--methods", nargs="+", default=["sghmc", "ensemble"])
    parser.add_argument("--activation", default="tanh", choices=["tanh", "relu"])
    parser.add_argument("--method-params", default=None, help="JSON knobs of every method")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return
    emit = emitter(args.out)
    head = provenance("many_rows.py", argv)
    for method in args.methods:
        emit({"benchmark": "many_rows", **head, **run_fit(method, args)})


if __name__ == "__main__":
    main()
