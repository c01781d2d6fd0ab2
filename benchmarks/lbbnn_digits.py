"""Sparsity without loss: LBBNN against mean-field VI on scikit-learn's digits.

The offline stand-in for the talk's MNIST experiment: the 8x8 digits (1,797 images, 64
pixels, 10 classes), a stratified 75/25 split (``random_state=0``), pixels standardized on
the training split, a ``64 -> 100 -> 100 -> 10`` ReLU classifier with the default prior.
``method=LBBNN()`` and ``method=VariationalInference()`` (all weights in) are fitted with the
same engine settings (``--lr``, ``--max-iter``, default batch) and the same seed; for each,
the test accuracy of

* the model-averaged prediction (``predict``: 100 draws of ``q``, for LBBNN of the
  indicators too),
* the posterior-mean network (VI: the means; LBBNN: ``alpha * kappa``, the weights'
  means under ``q``),
* for LBBNN, the median probability model (``LBBNN(model="median")``: the weights with
  ``alpha > 0.5`` only, as a sparse network would be deployed),

with the density (the share of weights with ``alpha > 0.5``), the ELBO and the wall time.
Goal: density below 0.2 at an accuracy within one point of VI's. ``--seeds`` repeats it.

    python benchmarks/lbbnn_digits.py --seeds 0 1 2 --out benchmarks/results/lbbnn_digits.jsonl
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
from _uci import emitter, machine  # noqa: E402


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
    coefs, intercepts = clf._layout.unpack(theta)
    a = X
    for i, (w, b) in enumerate(zip(coefs, intercepts, strict=True)):
        a = a @ w + b
        if i < len(coefs) - 1:
            a = np.maximum(a, 0.0)
    return float(np.mean(clf.classes_[a.argmax(axis=1)] == y))


def run(name: str, method, hidden, seed: int, d) -> dict:
    from skbnn import BayesianMLPClassifier

    X_train, y_train, X_test, y_test = d
    clf = BayesianMLPClassifier(hidden, activation="relu", method=method, random_state=seed,
                                n_samples=100, n_jobs=1)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        clf.fit(X_train, y_train)
        seconds = time.perf_counter() - start
    post = clf.posterior_
    if name == "vi":
        mean = post.mean[0]
    else:
        mean = post.mean * post.alpha
    return {
        "method": name, "seed": seed, "fit_time": seconds,
        "compile_time": float(clf.diagnostics_["compile_time"]),
        "accuracy_averaged": float(clf.score(X_test, y_test)),
        "accuracy_mean_network": mean_network_accuracy(clf, mean, X_test, y_test),
        "density": float(getattr(clf, "density_", 1.0)),
        "expected_density": float(clf.diagnostics_.get("expected_density", 1.0)),
        "elbo": float(clf.elbo_), "n_iter": int(clf.diagnostics_["n_iter"][0]),
        "warnings": [str(w.message)[:120] for w in caught],
        "_clf": clf,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--hidden", type=int, nargs="+", default=[100, 100])
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--max-iter", type=int, default=None, help="epochs; None: VI's default")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args()
    emit = emitter(args.out)
    import skbnn
    from skbnn.methods import LBBNN, VariationalInference

    d = data()
    hidden = tuple(args.hidden)
    common = {"learning_rate_init": args.lr, "max_iter": args.max_iter}
    command = "python benchmarks/lbbnn_digits.py " + " ".join(sys.argv[1:])
    rows = []
    for seed in args.seeds:
        for name, method in (("lbbnn", LBBNN(**common)), ("vi", VariationalInference(**common))):
            r = run(name, method, hidden, seed, d)
            clf = r.pop("_clf")
            if name == "lbbnn":
                # the median probability model of the same fit: only its draws differ
                from skbnn.posterior import SpikeSlabPosterior

                post = clf.posterior_
                clf.posterior_ = SpikeSlabPosterior(post.mean, post.var, post.alpha, 100,
                                                    random_state=seed, model="median")  # fmt: skip
                r["accuracy_median_model"] = float(clf.score(d[2], d[3]))
            rows.append(r)
            emit({**r, "hidden": list(hidden), **common})
    for name in ("lbbnn", "vi"):
        rs = [r for r in rows if r["method"] == name]
        summary = {"summary": True, "method": name, "seeds": args.seeds,
                   "hidden": list(hidden), **common, "skbnn": skbnn.__version__, **machine(),
                   "command": command}  # fmt: skip
        for key in ("fit_time", "accuracy_averaged", "accuracy_mean_network",
                    "accuracy_median_model", "density", "elbo"):  # fmt: skip
            vals = [r[key] for r in rs if key in r]
            if vals:
                summary[key] = float(np.mean(vals))
        emit(summary)


if __name__ == "__main__":
    main()
