"""Sparsity without loss: LBBNN's variational families against mean-field VI on digits.

The offline stand-in for the talk's MNIST experiment: the 8x8 digits (1,797 images, 64
pixels, 10 classes), a stratified 75/25 split (``random_state=0``), pixels standardized on
the training split, a ``64 -> 100 -> 100 -> 10`` ReLU classifier with the default prior
(the talk's two hidden layers, scaled to 64 inputs). ``--methods`` picks among
``LBBNN(posterior="meanfield")`` (``meanfield``, the talk's LBBNN-GP-MF),
``LBBNN(posterior="flow")`` (``flow``, LBBNN-GP-FLOW), ``LBBNN(posterior="lowrank")``
(``lowrank``, LBBNN-GP-MVN) and ``VariationalInference()``
(``vi``, all weights in), fitted with the same engine settings (``--lr``, ``--max-iter``,
default batch) and the same seed; for each, the test accuracy of

* the model-averaged prediction (``predict``: 100 draws of ``q``, for LBBNN of the
  indicators too),
* the posterior-mean network (VI: the means; LBBNN: the weights' means under ``q``,
  ``alpha * kappa``, times ``E[z]`` for the flow family),
* for LBBNN, the median probability model (``model="median"``: the weights with ``alpha >
  0.5`` only, as a sparse network would be deployed),

with the density (the share of weights with ``alpha > 0.5``), the ELBO and the wall time;
and the talk's uncertainty-aware decisions: a class is decided only where its predictive
probability is at least 0.95 (``--threshold``), and the share of test images decided and
the accuracy on them are reported, for the averaged and the median model. Goal: the flow
family's accuracy at or above the mean-field one's, at a lower density. ``--seeds``
repeats it; the summary gives the min, median and max over seeds.

    python benchmarks/lbbnn_digits.py --seeds 0 1 2 3 4 --out benchmarks/results/lbbnn_digits.jsonl

``--report`` prints doc/optimization.md's table of a results file (no fit): per method, min /
median / max over the seeds of its lines (a later line of a method and seed replaces an
earlier one)::

    python benchmarks/lbbnn_digits.py --report benchmarks/results/lbbnn_digits.jsonl
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _uci import emitter, machine, read_results  # noqa: E402


def data():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0,
                                                        stratify=y)  # fmt: skip
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), y_train, scaler.transform(X_test), y_test


def mean_network_accuracy(clf, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    """Test accuracy of the single network ``theta`` (ReLU hidden layers, argmax logit)."""
    coefs, intercepts = clf.predictive_.layout.unpack(theta)
    a = X
    for i, (w, b) in enumerate(zip(coefs, intercepts, strict=True)):
        a = a @ w + b
        if i < len(coefs) - 1:
            a = np.maximum(a, 0.0)
    return float(np.mean(clf.classes_[a.argmax(axis=1)] == y))


def decisions(proba: np.ndarray, classes, y, threshold: float) -> tuple[float, float]:
    """The share of rows whose largest predictive probability reaches ``threshold``, and
    the accuracy on those rows (NaN when none does)."""
    decided = proba.max(axis=1) >= threshold
    if not decided.any():
        return 0.0, float("nan")
    hits = classes[proba[decided].argmax(axis=1)] == y[decided]
    return float(decided.mean()), float(hits.mean())


def run(name: str, method, hidden, seed: int, d, threshold: float, n_jobs: int = 1,
        n_samples: int | None = 100) -> dict:  # fmt: skip
    """Fit one classifier and score it (see the module's docstring); ``name`` is one of
    :data:`METHODS` (or ``ensemble`` or ``laplace``, whose mean network is not scored).
    The fitted classifier is returned under ``"_clf"``."""
    from sklearn.metrics import log_loss

    from skbnn import BayesianMLPClassifier

    X_train, y_train, X_test, y_test = d
    clf = BayesianMLPClassifier(hidden, activation="relu", method=method, random_state=seed,
                                n_samples=n_samples, n_jobs=n_jobs)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        clf.fit(X_train, y_train)
        seconds = time.perf_counter() - start
    post = clf.posterior_
    if name == "vi":
        mean = post.mean[0]
    elif name == "flow":
        # E[z] by 1,000 draws of the flow: the weights' means are alpha kappa E[z] (the
        # slab means are linear in z, so z is averaged first: one row of n_params, not
        # 1,000, which at MNIST's size would take 4.5 GB)
        z, _ = post.latent(1000, np.random.default_rng(seed))
        mean = post.scaled_means(z.mean(axis=0, keepdims=True))[0] * post.alpha
    elif name in ("meanfield", "lowrank"):
        mean = post.mean * post.alpha
    else:  # the ensemble and Laplace: no one network stands for the posterior here
        mean = None
    proba = clf.predict_proba(X_test)
    share, accuracy = decisions(proba, clf.classes_, y_test, threshold)
    return {
        "method": name, "seed": seed, "fit_time": seconds,
        "compile_time": float(clf.diagnostics_["compile_time"]),
        "accuracy_averaged": float(np.mean(clf.classes_[proba.argmax(axis=1)] == y_test)),
        "log_loss": float(log_loss(y_test, proba, labels=clf.classes_)),
        "accuracy_mean_network": None if mean is None
        else mean_network_accuracy(clf, mean, X_test, y_test),
        "density": float(getattr(clf, "density_", 1.0)),
        "expected_density": float(clf.diagnostics_.get("expected_density", 1.0)),
        "elbo": float(getattr(clf, "elbo_", np.nan)),
        "n_iter": int(np.max(clf.diagnostics_.get("n_iter", [0]))),
        "decided_averaged": share, "decided_accuracy_averaged": accuracy,
        "warnings": [str(w.message)[:120] for w in caught],
        "_clf": clf,
    }  # fmt: skip


def median_model_scores(name: str, clf, d, seed: int, threshold: float) -> dict:
    """The median probability model of an LBBNN fit (``name`` one of ``meanfield``,
    ``flow``, ``lowrank``): its test accuracy and decisions. Only its draws differ from the
    fit's, so ``clf``'s posterior is replaced by the median model's."""
    from skbnn.posterior import (
        FlowSpikeSlabPosterior,
        LowRankSpikeSlabPosterior,
        SpikeSlabPosterior,
    )

    post = clf.posterior_
    if name == "lowrank":
        clf.posterior_ = LowRankSpikeSlabPosterior(
            post.mean, post.var, post.alpha, post.factors, clf.predictive_.layout,
            post.rank, 100, random_state=seed, model="median",
        )  # fmt: skip
    elif name == "flow":
        clf.posterior_ = FlowSpikeSlabPosterior(
            post.mean, post.var, post.alpha, post.flow, clf.predictive_.layout,
            post.flow_hidden, post.flow_steps, 100, random_state=seed, model="median",
        )  # fmt: skip
    else:
        clf.posterior_ = SpikeSlabPosterior(post.mean, post.var, post.alpha, 100,
                                            random_state=seed, model="median")  # fmt: skip
    share, accuracy = decisions(clf.predict_proba(d[2]), clf.classes_, d[3], threshold)
    return {"accuracy_median_model": float(clf.score(d[2], d[3])), "decided_median": share,
            "decided_accuracy_median": accuracy}  # fmt: skip


#: the table's columns: method and its name
COLUMNS = {"meanfield": "LBBNN mean-field", "flow": "LBBNN flow", "lowrank": "LBBNN low-rank",
           "vi": "VI (all weights)"}  # fmt: skip


def _spread(values, fmt: str) -> str:
    """min / median / max, or the one value where they agree."""
    cells = [fmt.format(v) for v in (min(values), np.median(values), max(values))]
    return cells[0] if len(set(cells)) == 1 else " / ".join(cells)


def _decided(runs, share: str, accuracy: str) -> str:
    if share not in runs[0]:
        return "-"
    right = _spread([r[accuracy] for r in runs], "{:.3f}")
    right = f"all {right}" if " / " not in right else right
    return f"{_spread([r[share] for r in runs], '{:.2f}')}, {right}"


def report(path) -> str:
    """doc/optimization.md's table of the results file ``path``."""
    lines = read_results(path)
    fits = {(r["method"], r["seed"]): r for r in lines if not r.get("summary")}
    runs = {m: [r for (method, _), r in fits.items() if method == m] for m in COLUMNS}
    runs = {m: rs for m, rs in runs.items() if rs}

    def cell(m, key, fmt):
        rs = runs[m]
        return _spread([r[key] for r in rs], fmt) if key in rs[0] else "-"

    rows = [
        ("test accuracy, model average", lambda m: cell(m, "accuracy_averaged", "{:.3f}")),
        ("posterior-mean network", lambda m: cell(m, "accuracy_mean_network", "{:.3f}")),
        ("median probability model", lambda m: cell(m, "accuracy_median_model", "{:.3f}")),
        ("density (weights with `alpha > 0.5`)", lambda m: cell(m, "density", "{:.2g}")),
        ("ELBO", lambda m: cell(m, "elbo", "{:.0f}")),
        ("decided at 0.95, model average: share / accuracy",
         lambda m: _decided(runs[m], "decided_averaged", "decided_accuracy_averaged")),
        ("decided at 0.95, median model: share / accuracy",
         lambda m: _decided(runs[m], "decided_median", "decided_accuracy_median")),
        ("fit", lambda m: cell(m, "fit_time", "{:.0f}") + " s"),
    ]  # fmt: skip
    out = ["| | " + " | ".join(COLUMNS[m] for m in runs) + " |", "|---" * (len(runs) + 1) + "|"]
    for label, value in rows:
        out.append(f"| {label} | " + " | ".join(value(m) for m in runs) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--hidden", type=int, nargs="+", default=[100, 100])
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--max-iter", type=int, default=None, help="epochs; None: VI's default")
    parser.add_argument("--flow-hidden", type=int, default=None, help="LBBNN's flow_hidden")
    parser.add_argument("--flow-steps", type=int, default=None, help="LBBNN's flow_steps")
    parser.add_argument("--threshold", type=float, default=0.95,
                        help="the predictive probability a decision needs")  # fmt: skip
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, metavar="FILE",
                        help="print the table of this results file (no fit)")  # fmt: skip
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    emit = emitter(args.out)
    import skbnn
    from skbnn.methods import LBBNN, VariationalInference

    d = data()
    hidden = tuple(args.hidden)
    common = {"learning_rate_init": args.lr, "max_iter": args.max_iter}
    command = "python benchmarks/lbbnn_digits.py " + " ".join(sys.argv[1:])
    flow = {k: v for k, v in (("flow_hidden", args.flow_hidden), ("flow_steps", args.flow_steps))
            if v is not None}  # fmt: skip
    make = {"meanfield": lambda: LBBNN(**common),
            "flow": lambda: LBBNN(posterior="flow", **flow, **common),
            "lowrank": lambda: LBBNN(posterior="lowrank", **common),
            "vi": lambda: VariationalInference(**common)}  # fmt: skip
    rows = []
    for seed in args.seeds:
        for name in args.methods:
            r = run(name, make[name](), hidden, seed, d, args.threshold)
            clf = r.pop("_clf")
            if name != "vi":
                r.update(median_model_scores(name, clf, d, seed, args.threshold))
            rows.append(r)
            knobs = flow if name == "flow" else {}
            emit({**r, "hidden": list(hidden), **common, **knobs, "threshold": args.threshold})
    for name in args.methods:
        rs = [r for r in rows if r["method"] == name]
        summary = {"summary": True, "method": name, "seeds": args.seeds,
                   "hidden": list(hidden), **common, **(flow if name == "flow" else {}),
                   "threshold": args.threshold,
                   "skbnn": skbnn.__version__, **machine(), "command": command}  # fmt: skip
        for key in ("fit_time", "accuracy_averaged", "accuracy_mean_network",
                    "accuracy_median_model", "density", "elbo", "decided_averaged",
                    "decided_accuracy_averaged", "decided_median",
                    "decided_accuracy_median"):  # fmt: skip
            vals = [r[key] for r in rs if r.get(key) is not None]
            if vals:
                summary[key] = float(np.mean(vals))
                summary[key + "_min_median_max"] = [float(np.min(vals)), float(np.median(vals)),
                                                    float(np.max(vals))]  # fmt: skip
        emit(summary)


#: The methods ``--methods`` names.
METHODS = ("meanfield", "flow", "lowrank", "vi")

if __name__ == "__main__":
    main()
