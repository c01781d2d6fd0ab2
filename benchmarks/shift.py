"""Which posterior knows what it does not know: detecting shifted inputs by each method's
uncertainty, and what the method costs.

Two shifts, each method with its defaults (``method=name``) in
``skbnn.pipeline.make_pipeline(StandardScaler(), estimator)``:

``digits``, classes held back. For each of five pairs of digits ({0, 1}, {2, 3}, ...,
{8, 9}; ``--splits`` picks them), a classifier of 32 ReLU units learns the other eight
digits from a random 1,000 of their images. The familiar rows are the rest of those eight
digits' images, the shifted rows every image of the pair. Scores
(:func:`skbnn.metrics.uncertainty_score`): the predictive entropy, the mutual information
and one minus the largest probability.

``uci``, a region left out. For each shared UCI set (``../shared/data/uci``) and split, the
training rows whose first principal component (of the standardized training inputs) lies
in its top quarter are left out of training; the familiar rows are the split's test rows
below that threshold, the shifted rows every row of the split above it. A regressor with
the UCI protocol's 50 ReLU units; scores: the epistemic sd and the predictive sd.

Per fit it records the AUROC and the FPR at 95 % TPR of each score (:func:`ood_auroc`,
:func:`ood_fpr_at_tpr`), the accuracy or test log-likelihood on the familiar rows, and the
fit time. ``--report FILE`` prints doc/shift.md's tables.

Usage::

    python benchmarks/shift.py --out benchmarks/results/shift.jsonl
    python benchmarks/shift.py --part uci --data yacht --splits 0-4 --methods laplace
    python benchmarks/shift.py --report benchmarks/results/shift.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, load_split, provenance, split_ids  # noqa: E402
from uci import parse_splits  # noqa: E402

METHODS = ("ensemble", "rms", "swag", "laplace", "vi", "lbbnn", "nuts")
UCI_SETS = ("bostonHousing", "concrete", "energy", "wine-quality-red", "yacht")
CLASSIFICATION_SCORES = ("entropy", "mutual_information", "max_probability")
REGRESSION_SCORES = ("epistemic_std", "total_std")


def _fit(model, X, y) -> float:
    from skbnn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        # a warning's text is recorded by benchmarks/defaults.py; here only the scores
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        return time.perf_counter() - start


def _detection(model, X_in, X_out, scores) -> dict:
    from skbnn.metrics import ood_auroc, ood_fpr_at_tpr, uncertainty_score

    out = {}
    for score in scores:
        a = uncertainty_score(model, X_in, score)
        b = uncertainty_score(model, X_out, score)
        out[score] = {"auroc": ood_auroc(a, b), "fpr95": ood_fpr_at_tpr(a, b)}
    return out


def digits_runs(methods, splits, emit) -> None:
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler

    from skbnn import BayesianMLPClassifier
    from skbnn.pipeline import make_pipeline

    X, y = load_digits(return_X_y=True)
    for split in splits:
        held = (y == 2 * split) | (y == 2 * split + 1)
        rng = np.random.default_rng(split)
        familiar = rng.permutation(np.flatnonzero(~held))
        train, test = familiar[:1000], familiar[1000:]
        for name in methods:
            model = make_pipeline(
                StandardScaler(),
                BayesianMLPClassifier((32,), activation="relu", method=name, random_state=split),
            )
            elapsed = _fit(model, X[train], y[train])
            scores = _detection(model, X[test], X[held], CLASSIFICATION_SCORES)
            emit({"part": "digits", "dataset": "digits", "split": split, "method": name,
                  "held_back": [2 * split, 2 * split + 1], "n_in": len(test),
                  "n_out": int(held.sum()), "fit_time": elapsed,
                  "accuracy": float(model.score(X[test], y[test])), "scores": scores})  # fmt: skip


def uci_runs(methods, datasets, splits_text, data_dir, emit) -> None:
    from sklearn.preprocessing import StandardScaler

    from skbnn import BayesianMLPRegressor
    from skbnn.model_selection import log_predictive_scorer
    from skbnn.pipeline import make_pipeline

    for dataset in datasets:
        for split in parse_splits(splits_text, split_ids(dataset, data_dir)):
            X_train, y_train, X_test, y_test = load_split(dataset, split, data_dir)
            scaler = StandardScaler().fit(X_train)
            # the first principal component of the standardized training inputs
            _, _, vt = np.linalg.svd(scaler.transform(X_train), full_matrices=False)
            pc_train = scaler.transform(X_train) @ vt[0]
            pc_test = scaler.transform(X_test) @ vt[0]
            cut = np.quantile(pc_train, 0.75)
            fit_rows, test_in = pc_train <= cut, pc_test <= cut
            X_out = np.r_[X_train[~fit_rows], X_test[~test_in]]
            for name in methods:
                model = make_pipeline(
                    StandardScaler(),
                    BayesianMLPRegressor(
                        (50,), activation="relu", method=name, random_state=split
                    ),  # fmt: skip
                )
                elapsed = _fit(model, X_train[fit_rows], y_train[fit_rows])
                emit({"part": "uci", "dataset": dataset, "split": split, "method": name,
                      "n_in": int(test_in.sum()), "n_out": len(X_out), "fit_time": elapsed,
                      "test_ll": log_predictive_scorer(model, X_test[test_in], y_test[test_in]),
                      "scores": _detection(model, X_test[test_in], X_out,
                                           REGRESSION_SCORES)})  # fmt: skip


def _mean_se(values) -> str:
    v = np.asarray(values, dtype=float)
    se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
    return f"{v.mean():.3f} +- {se:.3f}" if v.size > 1 else f"{v.mean():.3f}"


def report(path) -> str:
    """doc/shift.md's tables from a results file (the last record of each fit wins)."""
    records = {}
    for line in open(path):
        r = json.loads(line)
        if "part" in r:
            records[(r["part"], r["dataset"], r["split"], r["method"])] = r
    rows = list(records.values())
    lines = []
    digits = [r for r in rows if r["part"] == "digits"]
    if digits:
        methods = list(dict.fromkeys(r["method"] for r in digits))
        n = len({r["split"] for r in digits})
        lines += [f"**Digits, two classes held back** ({n} pairs): AUROC and FPR at 95 % TPR "
                  "of each score, accuracy on the familiar digits, fit time; mean +- "
                  "standard error over the pairs.", "",
                  "| method | entropy AUROC | entropy FPR95 | mutual information AUROC "
                  "| mutual information FPR95 | 1 - max p AUROC | accuracy | fit |",
                  "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for m in methods:
            fits = [r for r in digits if r["method"] == m]
            cells = [_mean_se([r["scores"][s][k] for r in fits])
                     for s, k in (("entropy", "auroc"), ("entropy", "fpr95"),
                                  ("mutual_information", "auroc"),
                                  ("mutual_information", "fpr95"),
                                  ("max_probability", "auroc"))]  # fmt: skip
            acc = np.mean([r["accuracy"] for r in fits])
            t = np.mean([r["fit_time"] for r in fits])
            lines.append(f"| {m} | " + " | ".join(cells) + f" | {acc:.3f} | {t:.1f} s |")
    uci = [r for r in rows if r["part"] == "uci"]
    if uci:
        methods = list(dict.fromkeys(r["method"] for r in uci))
        seen = list(dict.fromkeys(r["dataset"] for r in uci))
        sets = [d for d in UCI_SETS if d in seen] + [d for d in seen if d not in UCI_SETS]
        short = {"bostonHousing": "Boston", "wine-quality-red": "wine"}
        if lines:
            lines.append("")
        lines += ["**UCI, the top quarter of the first principal component left out**: "
                  "AUROC of the epistemic sd (in brackets of the predictive sd), mean over "
                  "the splits; the last column the mean fit time.", "",
                  "| method | " + " | ".join(short.get(d, d) for d in sets) + " | fit |",
                  "|---" * (len(sets) + 2) + "|"]  # fmt: skip
        for m in methods:
            cells = []
            for d in sets:
                fits = [r for r in uci if r["method"] == m and r["dataset"] == d]
                if not fits:
                    cells.append("")
                    continue
                epi = np.mean([r["scores"]["epistemic_std"]["auroc"] for r in fits])
                tot = np.mean([r["scores"]["total_std"]["auroc"] for r in fits])
                cells.append(f"{epi:.3f} ({tot:.3f})")
            t = np.mean([r["fit_time"] for r in uci if r["method"] == m])
            lines.append(f"| {m} | " + " | ".join(cells) + f" | {t:.1f} s |")
        splits = sorted({r["split"] for r in uci})
        lines += ["", f"Splits {', '.join(map(str, splits))} of each set."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", nargs="+", choices=["digits", "uci"], default=["digits", "uci"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--data", nargs="+", default=list(UCI_SETS), help="UCI sets")
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/uci")
    parser.add_argument("--splits", default="0-4", help='"all", "0-4" or "0,3"')
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, help="print the tables of this file")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return
    common = {"benchmark": "shift", **provenance("shift.py", argv)}
    write = emitter(args.out)

    def emit(record):
        # the cores may be shared: the load says how far the times are from a quiet machine's
        write({**common, **record, "loadavg_1min": os.getloadavg()[0]})

    if "digits" in args.part:
        digits_runs(args.methods, parse_splits(args.splits, list(range(5))), emit)
    if "uci" in args.part:
        uci_runs(args.methods, args.data, args.splits, args.data_dir, emit)


if __name__ == "__main__":
    main()
