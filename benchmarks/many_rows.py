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
from _uci import emitter, provenance  # noqa: E402

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
    args = parser.parse_args(argv)
    emit = emitter(args.out)
    head = provenance("many_rows.py", argv)
    for method in args.methods:
        emit({"benchmark": "many_rows", **head, **run_fit(method, args)})


if __name__ == "__main__":
    main()
