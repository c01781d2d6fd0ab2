"""Candidate default priors of skbnn's estimators against the models a sklearn user compares.

Issue 15, item 1: the defaults should be chosen from measurements. Every model runs in
``make_pipeline(StandardScaler(), model)`` with its default settings (skbnn: NUTS, 4 chains,
a (10,) tanh network; ``random_state=0, n_jobs=-1``); only the skbnn prior changes.

Classification (iris, wine, breast_cancer, digits): ``--folds``-fold ``StratifiedKFold``
(shuffled, ``random_state=0``), out-of-fold probabilities as in ``cross_val_predict``. Per
(dataset, model): log loss (mean over rows of ``-log p(true class)``, probabilities clipped
at 1e-15) with its standard error over rows, Brier score in the multiclass form (mean over
rows of the sum over classes of ``(p_k - onehot_k)**2``, between 0 and 2; for a binary
problem twice sklearn's ``brier_score_loss``), accuracy, median top probability, and the fit
wall time summed over folds. digits is a stratified subsample of ``--digits-rows`` rows
(default 500, so that one NUTS fit of its 64-10-10 network stays under about a minute on 2
shared cores).

Regression (diabetes, ``make_friedman1(n_samples=500, noise=1.0, random_state=0)``):
``KFold`` (shuffled, ``random_state=0``); mean test log predictive density per row in the
target's original units (skbnn: ``skbnn.model_selection.log_predictive_scorer`` per fold,
weighted by fold size; ``BayesianRidge`` and ``GaussianProcessRegressor``: the Gaussian
density of ``predict(return_std=True)``, whose sd includes the noise), RMSE, the coverage of
90 % central intervals (skbnn ``predict_interval``, the others mean +- 1.645 sd), fit time.

The first skbnn fit of each estimator class compiles numba kernels (cached under
``NUMBA_CACHE_DIR``); a short warm-up fit before the timed ones keeps compilation out of the
figures, and its time is reported on its own. The timings are wall time on a machine whose
cores may be shared: compare them within one run.

Prints one JSON line per (dataset, model), then one summary line per dataset (the best model,
and every skbnn candidate's gap to ``LogisticRegression`` / ``BayesianRidge`` with the standard
error of the paired difference: over rows for classification, over folds for regression);
``--out`` appends the same lines to a file. Usage::

    python benchmarks/defaults.py --datasets iris wine breast_cancer digits \\
        --out benchmarks/results/defaults.jsonl
    python benchmarks/defaults.py --datasets diabetes friedman1 \\
        --candidates bayes_ridge gp bnn_gaussian bnn_hierarchical

Candidates: ``logreg`` (``LogisticRegression()``), ``logreg_cv``
(``LogisticRegressionCV(scoring="neg_log_loss")``), ``hgb``, ``bayes_ridge``, ``gp`` and
``bnn_<prior>`` for every name of ``PRIOR_NAMES`` (see ``_skbnn_prior``). The default list
includes ``bnn_hier_wide`` on digits, about 20 min on 2 cores; the recorded run left it out.

Results (``benchmarks/results/defaults.jsonl``; every line carries its command; 2 shared
cores, load average 0-5, so the times are only good to a factor of about 2). Log loss, in
brackets its paired gap to ``LogisticRegression`` (standard error over rows), then the fit time
of 5 folds in s; ``*`` marks a ``ConvergenceWarning`` (R-hat > 1.05) in at least one fold:

=================  ================  ================  ================  ================
prior               iris              wine              breast_cancer     digits (500)
=================  ================  ================  ================  ================
LogisticRegression  0.155, 0.5 s      0.063, 0.2 s      0.074, 0.7 s      0.199, 0.1 s
gaussian (default)  0.265 (+.110) 9   0.200 (+.138) 10  0.109 (+.035) 30  0.630 (+.432) 18
GaussianPrior(2)    0.135 (-.020) 17  0.114 (+.052) 10  0.083 (+.009) 43  0.372 (+.174) 26
GaussianPrior(3)    0.107 (-.048) 22  0.097 (+.034) 27  0.078 (+.005) 61  0.317 (+.119) 39
GaussianPrior(5)    0.097 (-.058) 14  0.086 (+.023) 18  0.076 (+.002) 71  0.289 (+.090) 141
hierarchical        0.091 (-.064) 54* 0.078 (+.015) 45* 0.075 (+.001) 70* 0.235 (+.037) 243*
Hier.(1, 0.5)       0.089 (-.066) 87* 0.073 (+.011) 58* 0.075 (+.001) 71*  not run
=================  ================  ================  ================  ================

No prior reaches ``LogisticRegression`` on wine and digits. On wine even Bayesian softmax
regression with LogisticRegression's own prior (``hidden_layer_sizes=()``,
``GaussianPrior(std=1, fan_in_scaling=False)``) scores 0.078, and an independent importance
sampler of that posterior agrees (0.078), while its MAP plug-in scores 0.064: averaging over
the posterior costs confidence on rows beyond the training data, whatever the prior.

Regression (mean test log predictive density per row, higher is better; fit time of 5 folds):
diabetes: BayesianRidge -5.420, GP -5.414, gaussian -5.405 (23 s), hierarchical -5.406
(22 s), GaussianPrior(2) -5.410 (27 s). friedman1 (noise sd 1, so at best about -1.42):
BayesianRidge -2.435, GP -1.480, gaussian -1.569 (54 s), hierarchical -1.541 (182 s),
GaussianPrior(2) -1.547 (204 s, R-hat 1.14).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import machine  # noqa: E402

CLASSIFICATION = ("iris", "wine", "breast_cancer", "digits")
REGRESSION = ("diabetes", "friedman1")
#: z of a central 90 % Gaussian interval.
Z90 = 1.6448536269514722


PRIOR_NAMES = ("gaussian", "gaussian_std2", "gaussian_std3", "gaussian_std5",
               "gaussian_std2_nofanin", "logistic", "hierarchical", "hier_wide", "hier_t2",
               "hier_cauchy")  # fmt: skip


def _skbnn_prior(name: str):
    """The prior of an skbnn candidate: a string default or an object."""
    from skbnn.priors import GaussianPrior, HierarchicalPrior, LogisticPrior

    return {
        "gaussian": "gaussian",
        "gaussian_std2": GaussianPrior(std=2.0),
        "gaussian_std3": GaussianPrior(std=3.0),
        "gaussian_std5": GaussianPrior(std=5.0),
        "gaussian_std2_nofanin": GaussianPrior(std=2.0, fan_in_scaling=False),
        "logistic": LogisticPrior(),
        "hierarchical": "hierarchical",
        "hier_wide": HierarchicalPrior(shape=1.0, rate=0.5),
        "hier_t2": HierarchicalPrior(shape=1.0, rate=1.0),
        "hier_cauchy": HierarchicalPrior(shape=0.5, rate=0.5),
    }[name]


def classifiers() -> dict:
    """Candidate name -> factory of an unfitted classifier (the pipeline's last step)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV

    from skbnn import BayesianMLPClassifier

    models = {
        "logreg": LogisticRegression,
        "logreg_cv": lambda: LogisticRegressionCV(scoring="neg_log_loss"),
        "hgb": lambda: HistGradientBoostingClassifier(random_state=0),
    }
    for prior in PRIOR_NAMES:
        models["bnn_" + prior] = lambda p=prior: BayesianMLPClassifier(
            prior=_skbnn_prior(p), random_state=0, n_jobs=-1
        )
    return models


def regressors(n_features: int) -> dict:
    """Candidate name -> factory of an unfitted regressor (the pipeline's last step)."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from sklearn.linear_model import BayesianRidge

    from skbnn import BayesianMLPRegressor

    def gp():
        kernel = ConstantKernel() * RBF(np.ones(n_features)) + WhiteKernel()
        return GaussianProcessRegressor(
            kernel=kernel, normalize_y=True, n_restarts_optimizer=2, random_state=0
        )

    models = {"bayes_ridge": BayesianRidge, "gp": gp}
    for prior in PRIOR_NAMES:
        models["bnn_" + prior] = lambda p=prior: BayesianMLPRegressor(
            prior=_skbnn_prior(p), random_state=0, n_jobs=-1
        )
    return models


DEFAULT_CANDIDATES = (
    "logreg", "logreg_cv", "hgb", "bnn_gaussian", "bnn_gaussian_std2", "bnn_gaussian_std3",
    "bnn_hierarchical", "bnn_hier_wide",
    "bayes_ridge", "gp", "bnn_gaussian", "bnn_hierarchical", "bnn_gaussian_std2",
)  # fmt: skip


def load(name: str, digits_rows: int):
    """``(X, y, facts)`` of a dataset."""
    from sklearn import datasets
    from sklearn.model_selection import train_test_split

    if name == "friedman1":
        X, y = datasets.make_friedman1(n_samples=500, noise=1.0, random_state=0)
        return X, y, {"source": "make_friedman1(n_samples=500, noise=1.0, random_state=0)"}
    X, y = getattr(datasets, "load_" + name)(return_X_y=True)
    facts = {"source": f"sklearn.datasets.load_{name}"}
    if name == "digits" and digits_rows < len(y):
        X, _, y, _ = train_test_split(X, y, train_size=digits_rows, stratify=y, random_state=0)
        facts["subsample"] = f"stratified {digits_rows} of 1797 rows, random_state=0"
    return X, y, facts


def _final(pipe):
    return pipe.steps[-1][1]


def _diagnostics(model) -> dict:
    diag = getattr(model, "diagnostics_", None)
    if not diag:
        return {}
    out = {}
    for key in ("compile_time", "rhat_loglik", "divergences", "n_grad_evals"):
        value = diag.get(key)
        if value is not None and np.ndim(value) == 0:
            out[key] = float(value)
    return out


def _fit(pipe, X, y):
    """Fit; wall time, the warnings raised (counted by category) and skbnn diagnostics."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        pipe.fit(X, y)
        elapsed = time.perf_counter() - start
    kinds: dict[str, int] = {}
    for w in caught:
        kinds[w.category.__name__] = kinds.get(w.category.__name__, 0) + 1
    return elapsed, kinds, _diagnostics(_final(pipe))


def _merge_fold(acc: dict, elapsed: float, kinds: dict, diag: dict) -> None:
    acc["fit_time"] += elapsed
    for k, v in kinds.items():
        acc["warnings"][k] = acc["warnings"].get(k, 0) + v
    for k, v in diag.items():
        if k == "rhat_loglik":
            acc["max_rhat_loglik"] = max(acc.get("max_rhat_loglik", 0.0), v)
        else:
            acc[k] = acc.get(k, 0.0) + v


def classification_run(name, factory, X, y, folds: int) -> tuple[dict, np.ndarray]:
    """Out-of-fold metrics of one classifier; also the per-row log losses."""
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import LabelEncoder, StandardScaler

    codes = LabelEncoder().fit_transform(y)
    n_classes = int(codes.max()) + 1
    proba = np.full((len(y), n_classes), np.nan)
    acc = {"fit_time": 0.0, "warnings": {}}
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=0)
    for train, test in cv.split(X, codes):
        pipe = make_pipeline(StandardScaler(), factory())
        _merge_fold(acc, *_fit(pipe, X[train], codes[train]))
        proba[test] = pipe.predict_proba(X[test])
    onehot = np.eye(n_classes)[codes]
    row_loss = -np.log(np.clip(proba[np.arange(len(y)), codes], 1e-15, 1.0))
    record = {
        "log_loss": float(row_loss.mean()),
        "log_loss_se": float(row_loss.std(ddof=1) / np.sqrt(len(y))),
        "brier": float(np.mean(np.sum((proba - onehot) ** 2, axis=1))),
        "accuracy": float(np.mean(proba.argmax(axis=1) == codes)),
        "median_top_prob": float(np.median(proba.max(axis=1))),
        "max_row_log_loss": float(row_loss.max()),
        **acc,
    }
    return record, row_loss


def _gaussian_lpd(y, mean, std) -> np.ndarray:
    return -0.5 * np.log(2 * np.pi) - np.log(std) - 0.5 * ((y - mean) / std) ** 2


def regression_run(name, factory, X, y, folds: int) -> tuple[dict, np.ndarray]:
    """Cross-validated metrics of one regressor; also the per-fold mean log densities."""
    from sklearn.model_selection import KFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skbnn.model_selection import log_predictive_scorer

    acc = {"fit_time": 0.0, "warnings": {}}
    fold_lpd, sizes, sq_err, covered = [], [], 0.0, 0
    cv = KFold(n_splits=folds, shuffle=True, random_state=0)
    for train, test in cv.split(X):
        pipe = make_pipeline(StandardScaler(), factory())
        _merge_fold(acc, *_fit(pipe, X[train], y[train]))
        model, X_test = _final(pipe), pipe[:-1].transform(X[test])
        if name.startswith("bnn_"):
            mean = model.predict(X_test)
            lo, hi = model.predict_interval(X_test, coverage=0.9)
            fold_lpd.append(log_predictive_scorer(pipe, X[test], y[test]))
        else:
            mean, std = model.predict(X_test, return_std=True)
            lo, hi = mean - Z90 * std, mean + Z90 * std
            fold_lpd.append(float(np.mean(_gaussian_lpd(y[test], mean, std))))
        sizes.append(len(test))
        sq_err += float(np.sum((mean - y[test]) ** 2))
        covered += int(np.sum((lo <= y[test]) & (y[test] <= hi)))
    fold_lpd, sizes = np.asarray(fold_lpd), np.asarray(sizes)
    record = {
        "test_lpd": float(np.sum(fold_lpd * sizes) / sizes.sum()),
        "test_lpd_folds": fold_lpd.tolist(),
        "rmse": float(np.sqrt(sq_err / sizes.sum())),
        "coverage90": covered / sizes.sum(),
        **acc,
    }
    return record, fold_lpd


def warm_up(kind: str) -> float:
    """Compile the kernels one skbnn estimator class needs (tiny, short fit); its wall time."""
    from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
    from skbnn.methods import NUTS

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    cls = BayesianMLPClassifier if kind == "classification" else BayesianMLPRegressor
    y = (X[:, 0] > 0).astype(int) if kind == "classification" else X[:, 0]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for prior in ("gaussian", "hierarchical"):
            cls(method=NUTS(n_warmup=20), prior=prior, n_samples=20, random_state=0,
                n_jobs=-1).fit(X, y)  # fmt: skip
    return time.perf_counter() - start


def summarize(dataset: str, kind: str, records: dict, per: dict) -> dict:
    """Best model and each skbnn candidate's paired gap to the linear baseline."""
    if kind == "classification":
        key, better, base = "log_loss", min, "logreg"
    else:
        key, better, base = "test_lpd", max, "bayes_ridge"
    best = better(records, key=lambda m: records[m][key])
    summary = {"benchmark": "defaults", "summary": True, "dataset": dataset, "metric": key,
               "best": best, "best_" + key: records[best][key], "baseline": base}  # fmt: skip
    if base in records:
        summary["baseline_" + key] = records[base][key]
        gaps = {}
        for model in records:
            if not model.startswith("bnn_"):
                continue
            diff = per[model] - per[base]
            gaps[model] = {
                "gap": records[model][key] - records[base][key],
                "gap_se": float(diff.std(ddof=1) / np.sqrt(diff.size)),
                "fit_time_ratio": records[model]["fit_time"] / records[base]["fit_time"],
            }
        summary["gaps"] = gaps
    return summary


def run(args) -> None:
    import sklearn

    from skbnn import __version__

    common = {
        "benchmark": "defaults",
        "folds": args.folds,
        "skbnn": __version__,
        "sklearn": sklearn.__version__,
        "command": "python " + shlex.join(["benchmarks/defaults.py", *args.argv]),
        **machine(),
    }
    out = open(args.out, "a") if args.out else None  # noqa: SIM115
    warmed: set[str] = set()
    try:
        for dataset in args.datasets:
            kind = "classification" if dataset in CLASSIFICATION else "regression"
            X, y, facts = load(dataset, args.digits_rows)
            registry = classifiers() if kind == "classification" else regressors(X.shape[1])
            chosen = [m for m in dict.fromkeys(args.candidates) if m in registry]
            if any(m.startswith("bnn_") for m in chosen) and kind not in warmed:
                warmed.add(kind)
                _emit({**common, "warm_up": kind, "wall_time": warm_up(kind)}, out)
            records, per = {}, {}
            for model in chosen:
                runner = classification_run if kind == "classification" else regression_run
                record, per[model] = runner(model, registry[model], X, y, args.folds)
                records[model] = record
                _emit({**common, "dataset": dataset, "task": kind, "n_rows": len(y),
                       "n_features": X.shape[1], **facts, "model": model,
                       "estimator": repr(registry[model]()), **record}, out)  # fmt: skip
            if records:
                _emit({**common, **summarize(dataset, kind, records, per)}, out)
    finally:
        if out:
            out.close()


def _emit(record: dict, out) -> None:
    # The cores are shared: the load says how far the wall times are from a quiet machine's.
    line = json.dumps({**record, "loadavg_1min": os.getloadavg()[0]})
    print(line, flush=True)
    if out:
        out.write(line + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=[*CLASSIFICATION, *REGRESSION],
                        choices=[*CLASSIFICATION, *REGRESSION])  # fmt: skip
    parser.add_argument("--candidates", nargs="+", default=list(DEFAULT_CANDIDATES),
                        help="model names; each dataset runs those of its task")  # fmt: skip
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--digits-rows", type=int, default=500, help="stratified subsample")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    run(args)


if __name__ == "__main__":
    main()
