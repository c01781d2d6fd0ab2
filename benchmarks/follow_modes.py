"""Following the more-modes advice as printed, on the UCI splits.

Each split is fitted with MCLMC from ``--n-modes`` optima (bde's network, prior and
energy variance, a Student-t noise per row: the multi-mode route's stage of
doc/samplers.md). Where the fit warns, the ``method=`` and ``n_samples=`` the warning
prints are run as printed, and the followed fit is recorded beside the first: test
log-likelihood per row, the predictive's Monte Carlo error, fit time and whether it
warned. One JSON line per split. Usage::

    python benchmarks/follow_modes.py --data bostonHousing --splits 0-19 --out FILE
    python benchmarks/follow_modes.py --data wine-quality-red --n-modes 32 --max-modes 128 \
        --out FILE       # advice past 128 modes recorded, not run
    python benchmarks/follow_modes.py --report FILE      # doc/samplers.md's table
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, machine, standardize  # noqa: E402
from bde import _signed_mean_se, load_data, score, skbnn_mixture  # noqa: E402

#: the route's stage (doc/samplers.md, "Thirty-two modes"), at ``n_modes`` optima
STAGE = {"heteroscedastic": True, "n_warmup": 5000, "desired_energy_var": 0.1,
         "rescale_units": False, "thin": 2, "noise_df": 5}  # fmt: skip
DRAWS_PER_CHAIN = 125
_FIX = re.compile(r"method=(MCLMC\(.*?\))(?: and|;|,? or|\.)", re.S)


def _fit(method, n_samples: int, data, seed: int, split: int) -> dict:
    """One fit of the stage; its test scores, error and warning."""
    import skbnn
    from skbnn.methods._convergence import predictive_error
    from skbnn.methods._records import ChainDiagnostics

    X_train, y_train, X_test, y_test = data
    est = skbnn.BayesianMLPRegressor(
        hidden_layer_sizes=(16, 16), activation="relu", method=method, n_samples=n_samples,
        random_state=seed, n_jobs=2,
    ).set_params(prior__fan_in_scaling=False)  # fmt: skip
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", skbnn.exceptions.ConvergenceWarning)
        est.fit(X_train, y_train)
    fit_time = time.perf_counter() - t0
    texts = [str(w.message) for w in caught
             if issubclass(w.category, skbnn.exceptions.ConvergenceWarning)]  # fmt: skip
    means, stds, weights, df = skbnn_mixture(est, X_test)
    error = predictive_error(ChainDiagnostics.from_dict(est.diagnostics_))
    # bde.py's generator for the split: the jitter of integer targets' scores
    scores = score(y_test, means, stds, weights, np.random.default_rng([seed, split, 74]), 20, df)
    return {
        "n_modes": method.n_modes,
        "n_samples": n_samples,
        "test_ll": scores["test_ll"],
        **{k: scores[k] for k in ("ll_discrete",) if k in scores},
        "error": float(np.nanmax(error)),
        "fit_time": fit_time,
        "warned": bool(texts),
        "_text": texts[-1] if texts else None,
    }


def run(args) -> None:
    import skbnn

    namespace = {name: getattr(skbnn, name) for name in skbnn.__all__}
    emit = emitter(args.out)
    first, last = (int(s) for s in args.splits.split("-"))
    for dataset in args.data:
        for split in range(first, last + 1):
            X_train, y_train, X_test, y_test = load_data(dataset, split, args.data_dir)
            X_train, X_test = standardize(X_train, X_test)
            data = (X_train, y_train, X_test, y_test)
            method = skbnn.MCLMC(n_modes=args.n_modes, n_chains=args.n_modes, **STAGE)
            fit = _fit(method, DRAWS_PER_CHAIN * args.n_modes, data, args.seed, split)
            record = {"benchmark": "follow_modes", "command": "python " + " ".join(sys.argv),
                      **machine(), "dataset": dataset, "split": split, "first": fit}  # fmt: skip
            match = _FIX.search(fit["_text"] or "")
            if match:
                # the advice as printed: its method and its n_samples
                fix = eval(match.group(1), namespace)
                n_samples = int(re.search(r"n_samples=(\d+)", fit["_text"]).group(1))
                record["advice"] = match.group(1)
                record["modes_asked"] = fix.n_modes
                if args.max_modes is None or fix.n_modes <= args.max_modes:
                    record["followed"] = _fit(fix, n_samples, data, args.seed, split)
            elif fit["warned"]:
                record["advice"] = None
                record["text"] = fit["_text"]
            for part in ("first", "followed"):
                if part in record:
                    record[part] = {k: v for k, v in record[part].items() if k[0] != "_"}
            emit(record)


def _range(values, digits: int) -> str:
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}" if values else ""


def _mean_se(values: np.ndarray) -> str:
    """Mean ± its standard error (bde.py's cell), or nothing for no values."""
    return _signed_mean_se(values, bold=False) if values.size else ""


def report(path) -> str:
    """doc/samplers.md's table: per data set and number of modes of the first fits, how
    the printed advice fared."""
    rows = [json.loads(line) for line in open(path)]
    lines = ["| data set | modes | fits | warned | advice printed | run as printed "
             "| silenced as printed | modes asked | error, warned fits | error, followed "
             "| test LL, followed − first | discrete LL, followed − first | followed fit s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for dataset, modes in dict.fromkeys((r["dataset"], r["first"]["n_modes"]) for r in rows):
        fits = [r for r in rows if (r["dataset"], r["first"]["n_modes"]) == (dataset, modes)]
        warned = [r for r in fits if r["first"]["warned"]]
        advised = [r for r in warned if r.get("advice")]
        followed = [r for r in advised if "followed" in r]
        # runs before --max-modes recorded the modes asked only in the followed fit
        asked = [r.get("modes_asked", r.get("followed", {}).get("n_modes")) for r in advised]
        gain, discrete = (
            np.array([r["followed"][k] - r["first"][k] for r in followed if k in r["first"]])
            for k in ("test_ll", "ll_discrete")
        )
        lines.append(
            f"| {dataset} | {modes} | {len(fits)} | {len(warned)} | {len(advised)} | "
            f"{len(followed)} | {sum(not r['followed']['warned'] for r in followed)} | "
            f"{_range(asked, 0)} | "
            f"{_range([r['first']['error'] for r in warned], 3)} | "
            f"{_range([r['followed']['error'] for r in followed], 3)} | "
            f"{_mean_se(gain)} | {_mean_se(discrete)} | "
            f"{_range([r['followed']['fit_time'] for r in followed], 0)} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=["bostonHousing"])
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/uci")
    parser.add_argument("--splits", default="0-19", help="first-last")
    parser.add_argument("--n-modes", type=int, default=8)
    parser.add_argument("--max-modes", type=int, default=None,
                        help="record, but do not run, advice asking for more modes")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
    else:
        run(args)


if __name__ == "__main__":
    main()
