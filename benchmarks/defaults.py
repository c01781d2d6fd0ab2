"""What a user gets from skbnn's defaults, against the models they compare, on real data.

Two suites (``--suite``):

``methods``: every method with its defaults, as a user names it
(``BayesianMLPRegressor(method=name)``), and the default estimator itself
(``BayesianMLPRegressor()``, ``method="auto"``), on

* the five shared UCI sets, every split (``../shared/data/uci``; the protocol's 50 ReLU
  units for the named methods, the estimator's own defaults for ``default``);
* ``make_friedman1`` (noise sd 1) at 2,000, 15,000 and 100,000 training rows, and a
  near-noiseless smooth target of 16 inputs at 10,000 rows (noise sd 1/1000 of the
  signal's), each against 1,000 test rows;
* the diabetes data, 5 random 75/25 splits, every method with the estimator's defaults;
* iris, wine, breast_cancer and digits: 5-fold stratified out-of-fold log loss of the
  default classifier and of each optimization method, beside ``LogisticRegression``;
* (``--only nuts_scaling``, not run by default) NUTS's default fit on ``make_friedman1``
  at 250 to 4,000 rows: the time and gradient passes behind ``method="auto"``'s threshold;
* (``--only cold_start``, not run by default) the quickstart and the default estimator on
  15,000 rows, each a new process on an empty numba cache, then on the filled one.

A method named ``lbbnn_flow`` or ``lbbnn_lowrank`` is ``LBBNN(posterior="flow")`` or
``LBBNN(posterior="lowrank")`` with its other defaults; ``--synthetic friedman15000``
keeps one synthetic problem.

Per fit it records the test log-likelihood (nats per row, in the target's units) or log
loss, RMSE, the coverage of 90 % predictive intervals, the fit's wall and compile time, the
``ConvergenceWarning`` texts, and the method ``"auto"`` chose. ``--report FILE`` turns the
lines into the markdown tables of doc/defaults.md: per method the share of fits that
warned, the coverage, the test log-likelihood against today's tuned UCI runs
(``results/uci_*.jsonl``, paired per split) and the fit time.

``priors``: candidate default priors of the NUTS estimators (the study behind
``GaussianPrior(std=3)`` for the classifier; doc/choosing.md has its table). Every model
runs in ``make_pipeline(StandardScaler(), model)``; classification by 5-fold stratified
out-of-fold log loss, regression (diabetes, ``make_friedman1(500)``) by 5-fold test log
predictive density, each against ``LogisticRegression`` / ``BayesianRidge``.

Usage::

    python benchmarks/defaults.py --suite methods --out benchmarks/results/defaults_methods.jsonl
    python benchmarks/defaults.py --suite methods --only uci --methods ensemble --splits 0-4
    python benchmarks/defaults.py --report benchmarks/results/defaults_methods.jsonl
    python benchmarks/defaults.py --suite methods --only synthetic --synthetic friedman15000 \
        --methods lbbnn lbbnn_flow lbbnn_lowrank --out results.jsonl
    python benchmarks/defaults.py --suite families --report benchmarks/results/defaults_lbbnn.jsonl
    python benchmarks/defaults.py --suite priors --datasets iris wine --out results.jsonl
    python benchmarks/defaults.py --suite priors --report benchmarks/results/defaults.jsonl

``--pair FILE:METHOD[@COMMITS] FILE:METHOD[@COMMITS] --labels A B`` pairs two methods'
UCI fits by split (of those commits, if named): doc/choosing.md's tables of MCLMC's
chains against NUTS and the ensemble. ``--suite priors --report FILE`` prints
doc/user_guide.md's classification table of the priors (``--short``: doc/choosing.md's,
without HistGradientBoosting and the times). ``--suite spread --report FILE`` prints
doc/samplers.md's table of the classifiers in a methods-suite file: log loss, mean
``predict_std``, mutual information and fit time, beside ``LogisticRegression``::

    python benchmarks/defaults.py --suite spread \\
        --report benchmarks/results/defaults_classifier_modes.jsonl

The timings are wall times on a machine whose cores may be shared: compare them within one
run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import provenance  # noqa: E402

from skbnn.methods._auto import AUTO_MCLMC  # noqa: E402

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
    common = {"benchmark": "defaults", "folds": args.folds,
              **provenance("defaults.py", args.argv)}  # fmt: skip
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


# --------------------------------------------------------------------------------------
# The methods suite
# --------------------------------------------------------------------------------------

#: The optimization methods, each named as a user names it, with its defaults.
OPTIMIZATION = ("ensemble", "rms", "swag", "laplace", "vi", "lbbnn", "sghmc")
#: Every method the diabetes part fits with the estimator's defaults.
ALL_METHODS = ("default", "nuts", "hmc", "mala", "amcmc", "smc", *OPTIMIZATION)
UCI_SETS = ("bostonHousing", "concrete", "energy", "wine-quality-red", "yacht")
#: The sets' names in the tables.
UCI_SHORT = {"bostonHousing": "Boston", "wine-quality-red": "wine"}
#: (name, training rows, seeds) of the synthetic regression problems
SYNTHETIC = (("friedman", 2000, 3), ("friedman", 15000, 3), ("friedman", 100000, 1),
             ("smooth16", 10000, 1))  # fmt: skip
#: MCLMC from eight optima at the default network: its defaults, and the longer steps of
#: bde's energy variance (0.1)
MCLMC_MODES = {
    "mclmc8": {"n_modes": 8, "n_chains": 8},
    "mclmc8_long": {"n_modes": 8, "n_chains": 8, "desired_energy_var": 0.1,
                    "rescale_units": False, "n_warmup": 5000, "thin": 2},
    # the chains "auto" runs past NUTS's size (a noise per row), run where it runs NUTS
    "mclmc8_auto": AUTO_MCLMC,
}  # fmt: skip
#: The tuned UCI runs each method's test log-likelihood is compared with, per split.
TUNED = {m: f"uci_{m}.jsonl" for m in ("ensemble", "rms", "swag", "laplace", "vi")}


def synthetic(name: str, n: int, seed: int):
    """``(X_train, y_train, X_test, y_test)`` of a synthetic problem with 1,000 test rows."""
    from sklearn.datasets import make_friedman1

    if name == "friedman":
        X, y = make_friedman1(n_samples=n + 1000, noise=1.0, random_state=seed)
    else:
        # a smooth function of 16 inputs observed with noise 1/1000 of its sd
        rng = np.random.default_rng(seed)
        X = rng.uniform(-1.0, 1.0, (n + 1000, 16))
        f = (np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.5 * X[:, 3] ** 2
             + np.tanh(X[:, 4:8].sum(axis=1)) + 0.3 * X[:, 8:].sum(axis=1))  # fmt: skip
        y = f + rng.normal(0.0, 1e-3 * f.std(), f.size)
    return X[:n], y[:n], X[n:], y[n:]


def _regressor(name: str, seed: int, protocol: bool):
    """The estimator a user writes: the default one, or ``method=name`` (with the UCI
    protocol's 50 ReLU units when ``protocol``)."""
    from skbnn import BayesianMLPRegressor

    kw = {"random_state": seed, "n_jobs": -1}
    if name == "default":
        return BayesianMLPRegressor(**kw)
    if name in MCLMC_MODES:
        # a chain from each of eight optima at the default network, the candidate for
        # "auto"'s sampler (issue 74)
        from skbnn.methods import MCLMC

        return BayesianMLPRegressor(method=MCLMC(**MCLMC_MODES[name]), **kw)
    if protocol:
        kw.update(hidden_layer_sizes=(50,), activation="relu")
    if name.startswith("lbbnn_"):
        # LBBNN's other variational families, as a user asks for them
        from skbnn.methods import LBBNN

        return BayesianMLPRegressor(method=LBBNN(posterior=name[len("lbbnn_") :]), **kw)
    return BayesianMLPRegressor(method=name, **kw)


def _fit_record(est, fit) -> dict:
    """Fit (``fit()``); wall time, compile time, the method that ran and its warnings."""
    from skbnn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        fit()
        elapsed = time.perf_counter() - start
    final = est.steps[-1][1] if hasattr(est, "steps") else est
    convergence = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    others = sorted({w.category.__name__ for w in caught} - {"ConvergenceWarning"})
    return {
        "fit_time": elapsed,
        "compile_time": float(final.diagnostics_.get("compile_time", 0.0)),
        "method_": type(final.method_).__name__,
        "warned": bool(convergence),
        "warnings": [m[:300] for m in convergence],
        "other_warnings": others,
    }


def _regression_fit(name, seed, data, protocol) -> dict:
    from skbnn.model_selection import log_predictive_scorer

    X_train, y_train, X_test, y_test = data
    mean, sd = X_train.mean(axis=0), X_train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    X_train, X_test = (X_train - mean) / sd, (X_test - mean) / sd
    est = _regressor(name, seed, protocol)
    record = _fit_record(est, lambda: est.fit(X_train, y_train))
    low, high = est.predict_interval(X_test, coverage=0.9)
    return {
        **record,
        "n_train": len(y_train),
        "test_ll": log_predictive_scorer(est, X_test, y_test),
        "rmse": float(np.sqrt(np.mean((est.predict(X_test) - y_test) ** 2))),
        "coverage_90": float(np.mean((y_test >= low) & (y_test <= high))),
        **({"density": float(est.density_)} if hasattr(est, "density_") else {}),
    }


def _classification_fold_fits(name, dataset):
    """Out-of-fold metrics of the default classifier or ``method=name`` on ``dataset``."""
    from sklearn import datasets
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import LabelEncoder, StandardScaler

    from skbnn import BayesianMLPClassifier

    X, y = getattr(datasets, "load_" + dataset)(return_X_y=True)
    codes = LabelEncoder().fit_transform(y)
    proba = np.zeros((len(y), int(codes.max()) + 1))
    spread, mutual = np.zeros(len(y)), np.zeros(len(y))
    acc = {"fit_time": 0.0, "compile_time": 0.0, "warned_folds": 0, "warnings": []}
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(X, codes):
        if name == "logreg":
            model = LogisticRegression()
        elif name == "default":
            model = BayesianMLPClassifier(random_state=0, n_jobs=-1)
        elif re.fullmatch(r"nuts_modes\d+", name):
            # chains from several optima (issue 75, item 6): the ensemble's modes, with
            # the spread within each
            from skbnn.methods import NUTS

            k = int(name[len("nuts_modes") :])
            model = BayesianMLPClassifier(
                method=NUTS(n_modes=k, n_chains=k), random_state=0, n_jobs=-1
            )
        else:
            model = BayesianMLPClassifier(method=name, random_state=0, n_jobs=-1)
        pipe = make_pipeline(StandardScaler(), model)
        if name == "logreg":
            start = time.perf_counter()
            pipe.fit(X[train], codes[train])
            acc["fit_time"] += time.perf_counter() - start
        else:
            record = _fit_record(pipe, lambda p=pipe, t=train: p.fit(X[t], codes[t]))
            acc["fit_time"] += record["fit_time"]
            acc["compile_time"] += record["compile_time"]
            acc["warned_folds"] += record["warned"]
            acc["warnings"] += record["warnings"]
            acc["method_"] = record["method_"]
        proba[test] = pipe.predict_proba(X[test])
        if name != "logreg":
            # the predicted class's posterior sd, and the mutual information
            Z, clf = pipe[:-1].transform(X[test]), pipe[-1]
            std = clf.predict_std(Z)
            spread[test] = std[np.arange(len(test)), proba[test].argmax(axis=1)]
            mutual[test] = clf.predict_entropy(Z, kind="epistemic")
    row = -np.log(np.clip(proba[np.arange(len(y)), codes], 1e-15, 1.0))
    return {
        **acc,
        "n_rows": len(y),
        "log_loss": float(row.mean()),
        "log_loss_se": float(row.std(ddof=1) / np.sqrt(len(y))),
        "accuracy": float(np.mean(proba.argmax(axis=1) == codes)),
        "mean_predict_std": float(spread.mean()),
        "mean_mutual_information": float(mutual.mean()),
    }


def methods_suite(args, common, out) -> None:
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _uci import load_split, split_ids
    from uci import parse_splits

    names = args.methods or ("default", *OPTIMIZATION)
    if "uci" in args.only:
        for dataset in args.uci_sets:
            splits = parse_splits(args.splits, split_ids(dataset, args.data_dir))
            for split in splits:
                data = load_split(dataset, split, args.data_dir)
                for name in names:
                    record = _regression_fit(name, split, data, protocol=True)
                    _emit({**common, "part": "uci", "dataset": dataset, "split": split,
                           "method": name, **record}, out)  # fmt: skip
    if "synthetic" in args.only:
        for problem, n, seeds in SYNTHETIC:
            if args.synthetic and f"{problem}{n}" not in args.synthetic:
                continue
            for seed in range(seeds):
                data = synthetic(problem, n, seed)
                for name in names:
                    record = _regression_fit(name, seed, data, protocol=True)
                    _emit({**common, "part": "synthetic", "dataset": f"{problem}{n}",
                           "split": seed, "method": name, **record}, out)  # fmt: skip
    if "diabetes" in args.only:
        X, y = load_diabetes(return_X_y=True)
        for name in args.methods or ALL_METHODS:
            for split in range(5):
                X_train, X_test, y_train, y_test = train_test_split(
                    X, y, test_size=0.25, random_state=split
                )
                data = (X_train, y_train, X_test, y_test)
                record = _regression_fit(name, split, data, protocol=False)
                _emit({**common, "part": "diabetes", "dataset": "diabetes", "split": split,
                       "method": name, **record}, out)  # fmt: skip
    if "cold_start" in args.only:
        for name, cmd in (
            ("quickstart", [sys.executable, "examples/quickstart.py"]),
            ("default_15000", [sys.executable, __file__, "--child-15000"]),
        ):
            cache = Path(tempfile.mkdtemp())
            for run in ("cold", "warm"):
                start = time.perf_counter()
                proc = subprocess.run(cmd, env=dict(os.environ, NUMBA_CACHE_DIR=str(cache)),
                                      capture_output=True, text=True, check=True,
                                      cwd=Path(__file__).resolve().parents[1])  # fmt: skip
                _emit({**common, "part": "cold_start", "dataset": name, "method": "default",
                       "run": run, "process_s": time.perf_counter() - start,
                       "output": proc.stdout.strip().splitlines()[0]}, out)  # fmt: skip
    if "nuts_scaling" in args.only:
        # what "auto"'s threshold rests on: NUTS's default fit against the rows
        from skbnn import BayesianMLPRegressor

        for n in (250, 500, 1000, 2000, 4000):
            X, y, _, _ = synthetic("friedman", n, 0)
            X = (X - X.mean(axis=0)) / X.std(axis=0)
            est = BayesianMLPRegressor(method="nuts", random_state=0, n_jobs=-1)
            record = _fit_record(est, lambda X=X, y=y, e=est: e.fit(X, y))
            diag = est.diagnostics_
            iterations = diag["n_chains"] * (est.method_.n_warmup + diag["n_draws_per_chain"])
            _emit({**common, "part": "nuts_scaling", "dataset": f"friedman{n}", "split": 0,
                   "method": "nuts", "n_train": n, "n_params": est.predictive_.layout.n_weights,
                   "grads_per_iteration": diag["n_grad_evals"] / iterations,
                   "rhat_loglik": diag["rhat_loglik"], **record}, out)  # fmt: skip
    if "classification" in args.only:
        for dataset in (d for d in CLASSIFICATION if d in args.datasets):
            for name in ("logreg", *(args.methods or ("default", *OPTIMIZATION))):
                record = _classification_fold_fits(name, dataset)
                _emit({**common, "part": "classification", "dataset": dataset,
                       "method": name, **record}, out)  # fmt: skip


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------


def _tuned_runs() -> dict:
    """``{(method, dataset, split): test_ll}`` of the tuned UCI runs."""
    out = {}
    for method, name in TUNED.items():
        path = Path(__file__).resolve().parent / "results" / name
        for line in open(path):
            r = json.loads(line)
            if "split" in r and not r.get("summary"):
                out[(method, r["dataset"], r["split"])] = r["test_ll"]
    return out


def _mean_se(values) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    return float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0


#: The priors suite's classification columns: model name, label.
PRIOR_COLUMNS = {"logreg": "LogisticRegression", "hgb": "HistGradientBoosting",
                 "bnn_gaussian": "`GaussianPrior()`",
                 "bnn_gaussian_std3": "`GaussianPrior(std=3)`", "bnn_gaussian_std5": "`std=5`",
                 "bnn_hierarchical": '`"hierarchical"`'}  # fmt: skip
#: The shorter table's columns and labels.
PRIOR_COLUMNS_SHORT = {"logreg": "LogisticRegression", "bnn_gaussian": "std=1",
                       "bnn_gaussian_std3": "std=3", "bnn_gaussian_std5": "std=5",
                       "bnn_hierarchical": "hierarchical"}  # fmt: skip


def report_priors(path: str, short: bool = False) -> str:
    """The priors suite's classification table: out-of-fold log loss (the last line of
    each dataset and model wins), the row's best in bold, a network's summed fit time,
    ``*`` where a ConvergenceWarning fired in some folds."""
    last = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("task") == "classification" and "log_loss" in r:
            last[(r["dataset"], r["model"])] = r
    columns = PRIOR_COLUMNS_SHORT if short else PRIOR_COLUMNS
    lines = ["| data | " + " | ".join(columns.values()) + " |", "|---" * (len(columns) + 1) + "|"]
    for dataset in dict.fromkeys(d for d, _ in last):
        fits = [last.get((dataset, m)) for m in columns]
        best = f"{min(r['log_loss'] for r in fits if r):.3f}"
        cells = []
        for r in fits:
            if r is None:
                cells.append("")
                continue
            cell = f"{r['log_loss']:.3f}"
            cell = f"**{cell}**" if cell == best else cell
            if r["model"].startswith("bnn"):
                cell += "" if short else f" ({r['fit_time']:.0f} s)"
                cell += " *" if r.get("warnings") else ""
            cells.append(cell)
        some = next(r for r in fits if r)
        name = f"{dataset} ({some['n_rows']} rows)" if some.get("subsample") else dataset
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _uci_fits(spec: str) -> dict:
    """``FILE:METHOD[@COMMIT,...]``: that method's UCI fits in a methods-suite file, by
    (dataset, split), the last line of each winning (of those commits, if named)."""
    path, _, method = spec.rpartition(":")
    method, _, commits = method.partition("@")
    fits = {}
    for line in open(path):
        r = json.loads(line)
        if (
            r.get("part") == "uci"
            and r["method"] == method
            and (not commits or r.get("commit", "")[:7] in commits.split(","))
        ):
            fits[(r["dataset"], r["split"])] = r
    return fits


def report_pair(first: str, second: str, labels=("first", "second")) -> str:
    """Two methods' UCI fits paired by split (:func:`_uci_fits` specs): per set the mean
    test log-likelihoods, the first minus the second (mean ± se, wins of the pairs, and
    median), the RMSEs, the 90 % coverages, the median fit times and the fits that warned."""
    a, b = _uci_fits(first), _uci_fits(second)
    one, two = labels
    lines = [f"| UCI set, 20 splits | test LL: {one}, {two} | {one} − {two} (wins) | median | "
             f"RMSE: {one}, {two} | 90 % coverage | median fit s | fits warned |",
             "|---" * 8 + "|"]  # fmt: skip
    for dataset in UCI_SETS:
        keys = [k for k in a if k[0] == dataset and k in b]
        if not keys:
            continue
        pairs = [(a[k], b[k]) for k in keys]

        def both(key, fmt, pairs=pairs):
            return ", ".join(fmt.format(np.mean([x[i][key] for x in pairs])) for i in (0, 1))

        diff = [x["test_ll"] - y["test_ll"] for x, y in pairs]
        mean, se = _mean_se(diff)
        wins = sum(d > 0 for d in diff)
        fit = ", ".join(f"{np.median([x[i]['fit_time'] for x in pairs]):.1f}" for i in (0, 1))
        warned = ", ".join(str(sum(x[i]["warned"] for x in pairs)) for i in (0, 1))
        lines.append(f"| {UCI_SHORT.get(dataset, dataset)} | {both('test_ll', '{:.3f}')} | "
                     f"{mean:+.3f} ± {se:.3f} ({wins}) | {np.median(diff):+.3f} | "
                     f"{both('rmse', '{:.2f}')} | {both('coverage_90', '{:.3f}')} | {fit} | "
                     f"{warned} |")  # fmt: skip
    return "\n".join(lines) + "\n"


#: LBBNN's families in doc/optimization.md's table: method name and column
FAMILIES = {"lbbnn": "mean-field", "lbbnn_flow": "flow", "lbbnn_lowrank": "low-rank"}


def report_families(path: str) -> str:
    """doc/optimization.md's table of LBBNN's families on the synthetic problems of a
    methods-suite file (the last record of each fit wins): per problem and family the means
    over seeds of the test log-likelihood, 90 % coverage, fit time and density."""
    records = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("part") == "synthetic" and r["method"] in FAMILIES:
            records[(r["dataset"], r["split"], r["method"])] = r
    fits = list(records.values())
    families = [m for m in FAMILIES if any(r["method"] == m for r in fits)]
    lines = ["| rows | " + " | ".join(FAMILIES[m] for m in families) + " |",
             "|---" * (len(families) + 1) + "|"]  # fmt: skip
    for dataset in dict.fromkeys(r["dataset"] for r in fits):
        cells = []
        for m in families:
            runs = [r for r in fits if r["dataset"] == dataset and r["method"] == m]
            mean = {k: np.mean([r[k] for r in runs])
                    for k in ("test_ll", "coverage_90", "fit_time", "density")}  # fmt: skip
            cells.append(f"{mean['test_ll']:.2f}, {mean['coverage_90']:.2f}, "
                         f"{mean['fit_time']:.1f} s, density {mean['density']:.3f}")  # fmt: skip
        rows = next(r["n_train"] for r in fits if r["dataset"] == dataset)
        lines.append(f"| {rows:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _classifier_label(name: str) -> str:
    """A classifier's name in the methods suite as the user writes it."""
    modes = re.fullmatch(r"nuts_modes(\d+)", name)
    return f"`NUTS(n_modes={modes[1]})`" if modes else name


def report_spread(path: str) -> str:
    """doc/samplers.md's table of the classifiers of a methods-suite file (the last record
    of each wins): per set ``LogisticRegression``'s log loss, then per method its log loss
    (mean +- se over rows), mean ``predict_std``, mean mutual information and fit time."""
    records = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("part") == "classification":
            records[(r["dataset"], r["method"])] = r
    methods = [m for m in dict.fromkeys(m for _, m in records) if m != "logreg"]
    head = ["set", "LogisticRegression"]
    for m in methods:
        head += [f"{_classifier_label(m)}: log loss", "its `predict_std`", "its MI",
                 "its fit time (5 folds)"]  # fmt: skip
    # figures that all sit below 0.05 (the ensemble's spread) keep a fourth decimal
    digits = {(m, key): 4 if all(r[key] < 0.05 for (_, n), r in records.items() if n == m)
              else 3 for m in methods
              for key in ("mean_predict_std", "mean_mutual_information")}  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for dataset in dict.fromkeys(d for d, _ in records):
        cells = [dataset, f"{records[dataset, 'logreg']['log_loss']:.3f}"]
        for m in methods:
            r = records[dataset, m]
            seconds = r["fit_time"]
            cells += [f"{r['log_loss']:.3f} +- {r['log_loss_se']:.3f}",
                      f"{r['mean_predict_std']:.{digits[m, 'mean_predict_std']}f}",
                      f"{r['mean_mutual_information']:.{digits[m, 'mean_mutual_information']}f}",
                      f"{seconds:.{0 if seconds >= 10 else 1}f} s"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def report(path: str, suite: str = "methods", short: bool = False) -> str:
    """The markdown tables of a methods-suite file (the last record of each fit wins), or
    of a priors-suite file (``suite="priors"``: :func:`report_priors`), or the table of
    LBBNN's families (``suite="families"``: :func:`report_families`), or the classifiers'
    log loss and spread (``suite="spread"``: :func:`report_spread`)."""
    if suite == "priors":
        return report_priors(path, short)
    if suite == "spread":
        return report_spread(path)
    if suite == "families":
        return report_families(path)
    records = {}
    for line in open(path):
        r = json.loads(line)
        if "part" in r:
            records[(r["part"], r["dataset"], r.get("split"), r["method"])] = r
    rows = list(records.values())
    tuned = _tuned_runs()
    lines = []
    regression = [r for r in rows if r["part"] != "classification"]
    methods = list(dict.fromkeys(r["method"] for r in regression))

    lines += ["**Regression fits that raised a ConvergenceWarning** (fits with one / fits):", ""]
    parts = [("uci", "UCI, every split"), ("synthetic", "synthetic"), ("diabetes", "diabetes")]
    lines.append("| method | " + " | ".join(label for _, label in parts) + " | all |")
    lines.append("|---" * (len(parts) + 2) + "|")
    total = [0, 0]
    for m in methods:
        cells, mw, mn = [], 0, 0
        for part, _ in parts:
            fits = [r for r in regression if r["method"] == m and r["part"] == part]
            warned = sum(r["warned"] for r in fits)
            cells.append(f"{warned} / {len(fits)}" if fits else "")
            mw, mn = mw + warned, mn + len(fits)
        total = [total[0] + mw, total[1] + mn]
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {mw} / {mn} |")
    classification = [r for r in rows if r["part"] == "classification" and r["method"] != "logreg"]
    cw = sum(r["warned_folds"] for r in classification)
    lines += ["", f"All regression fits: {total[1] - total[0]} of {total[1]} without a warning "
              f"({(total[1] - total[0]) / max(total[1], 1):.1%}); classification folds: "
              f"{5 * len(classification) - cw} of {5 * len(classification)}.", ""]  # fmt: skip

    uci = [r for r in rows if r["part"] == "uci"]
    head = "| method | " + " | ".join(UCI_SHORT.get(d, d) for d in UCI_SETS) + " |"
    rule = "|---" * (len(UCI_SETS) + 1) + "|"

    def cells(metric):
        out = []
        for m in methods:
            row = []
            for dataset in UCI_SETS:
                fits = [r for r in uci if r["dataset"] == dataset and r["method"] == m]
                row.append(metric(m, dataset, fits) if fits else "")
            if any(row):
                out.append(f"| {m} | " + " | ".join(row) + " |")
        return out

    def loglik(m, dataset, fits):
        ll, se = _mean_se([r["test_ll"] for r in fits])
        paired = [(r["test_ll"], tuned[(m, dataset, r["split"])]) for r in fits
                  if (m, dataset, r["split"]) in tuned]  # fmt: skip
        if not paired:
            return f"{ll:.2f} +- {se:.2f}"
        t, tse = _mean_se([b for _, b in paired])
        ok = "" if np.mean([a for a, _ in paired]) >= t - tse else " **below**"
        return f"{ll:.2f} +- {se:.2f} ({t:.2f} +- {tse:.2f}){ok}"

    lines += ["**Test log-likelihood on the UCI splits**, nats per row, mean +- standard "
              "error over the splits; in brackets the tuned run of the same method on the "
              "same splits (`results/uci_<method>.jsonl`), and **below** where the default "
              "is more than one of its standard errors under it:", "", head, rule]  # fmt: skip
    lines += cells(loglik)
    lines += ["", "**90 % interval coverage** on the UCI splits (mean over splits):", "",
              head, rule]  # fmt: skip
    lines += cells(lambda m, d, fits: f"{np.mean([r['coverage_90'] for r in fits]):.3f}")
    lines += ["", "**Fit time** per UCI split, seconds (mean; 2 cores, compile included in "
              "the first):", "", head, rule]  # fmt: skip
    lines += cells(lambda m, d, fits: f"{np.mean([r['fit_time'] for r in fits]):.1f}")
    lines += ["", "**Synthetic problems and diabetes** (test log-likelihood, 90 % coverage, "
              "fit time, and LBBNN's density; mean over seeds or splits):", ""]  # fmt: skip
    sets = list(dict.fromkeys(r["dataset"] for r in rows if r["part"] in ("synthetic", "diabetes")))
    lines.append("| data | " + " | ".join(methods) + " |")
    lines.append("|---" * (len(methods) + 1) + "|")
    for dataset in sets:
        cells = []
        for m in methods:
            fits = [r for r in rows if r["dataset"] == dataset and r["method"] == m
                    and r["part"] in ("synthetic", "diabetes")]  # fmt: skip
            if not fits:
                cells.append("")
                continue
            ll = np.mean([r["test_ll"] for r in fits])
            cov = np.mean([r["coverage_90"] for r in fits])
            t = np.mean([r["fit_time"] for r in fits])
            chose = {r["method_"] for r in fits} if m == "default" else set()
            note = f" ({'/'.join(sorted(chose))})" if chose else ""
            if all("density" in r for r in fits):
                note += f", density {np.mean([r['density'] for r in fits]):.3f}"
            cells.append(f"{ll:.2f}, {cov:.2f}, {t:.1f} s{note}")
        lines.append(f"| {dataset} | " + " | ".join(cells) + " |")

    scaling = sorted((r for r in rows if r["part"] == "nuts_scaling"), key=lambda r: r["n_train"])
    if scaling:
        lines += ["", "**NUTS's default fit against the rows** (`make_friedman1`, noise sd 1, the "
                  "default 10 tanh units; `--only nuts_scaling`):", "",
                  "| rows | rows x parameters | fit time | gradient passes per iteration "
                  "| R-hat of the log-likelihood |", "|---|---|---|---|---|"]  # fmt: skip
        for r in scaling:
            lines.append(
                f"| {r['n_train']:,} | {r['n_train'] * r['n_params']:,} | {r['fit_time']:.1f} s "
                f"| {r['grads_per_iteration']:.0f} | {r['rhat_loglik']:.3f} |"
            )

    clf = [r for r in rows if r["part"] == "classification"]
    if clf:
        cmethods = list(dict.fromkeys(r["method"] for r in clf))
        lines += ["", "**Classification**: 5-fold out-of-fold log loss (standard error over "
                  "rows) and the fit time of the 5 folds:", ""]  # fmt: skip
        lines.append("| data | " + " | ".join(cmethods) + " |")
        lines.append("|---" * (len(cmethods) + 1) + "|")
        for dataset in CLASSIFICATION:
            cells = []
            for m in cmethods:
                r = next((r for r in clf if r["dataset"] == dataset and r["method"] == m), None)
                if r is None:
                    cells.append("")
                    continue
                loss = f"{r['log_loss']:.3f} +- {r['log_loss_se']:.3f}"
                cells.append(f"{loss}, {r['fit_time']:.1f} s")
            lines.append(f"| {dataset} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _emit(record: dict, out) -> None:
    # The cores are shared: the load says how far the wall times are from a quiet machine's.
    line = json.dumps({**record, "loadavg_1min": os.getloadavg()[0]})
    print(line, flush=True)
    if out:
        out.write(line + "\n")
        out.flush()


def _default_15000() -> None:
    """The default estimator on 15,000 ``make_friedman1`` rows in a StandardScaler pipeline:
    fit, then a 90 % interval on 1,000 more rows; prints what ran and the coverage."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skbnn import BayesianMLPRegressor

    X, y, X_test, y_test = synthetic("friedman", 15000, 0)
    model = make_pipeline(StandardScaler(), BayesianMLPRegressor(random_state=0, n_jobs=-1))
    start = time.perf_counter()
    model.fit(X, y)
    fit = time.perf_counter() - start
    low, high = model[-1].predict_interval(model[:-1].transform(X_test))
    covered = np.mean((y_test >= low) & (y_test <= high))
    compiling = model[-1].diagnostics_["compile_time"]
    print(f"{model[-1].method_}: fit {fit:.1f} s ({compiling:.1f} s compiling), "
          f"90 % coverage {covered:.3f}")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=["methods", "priors", "families", "spread"],
                        default=None, help="default: priors, or methods with --report; "
                        "families, spread: --report's table of LBBNN's families or of the "
                        "classifiers' log loss and spread only")  # fmt: skip
    parser.add_argument("--report", default=None, help="print the suite's tables of a file")
    parser.add_argument("--pair", nargs=2, default=None, metavar="FILE:METHOD[@COMMITS]",
                        help="print two methods' UCI fits paired by split")  # fmt: skip
    parser.add_argument("--labels", nargs=2, default=("first", "second"),
                        help="--pair: the two methods' names in the table")  # fmt: skip
    parser.add_argument("--short", action="store_true",
                        help="priors suite: doc/choosing.md's shorter table")  # fmt: skip
    parser.add_argument("--datasets", nargs="+", default=[*CLASSIFICATION, *REGRESSION],
                        choices=[*CLASSIFICATION, *REGRESSION])  # fmt: skip
    parser.add_argument("--candidates", nargs="+", default=list(DEFAULT_CANDIDATES),
                        help="model names; each dataset runs those of its task")  # fmt: skip
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--digits-rows", type=int, default=500, help="stratified subsample")
    parser.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help="methods suite: these names (default: all, and the default one)",
    )
    parser.add_argument("--only", nargs="+", default=["uci", "synthetic", "diabetes",
                        "classification"], help="methods suite: these parts")  # fmt: skip
    parser.add_argument("--synthetic", nargs="+", default=None,
                        choices=[f"{p}{n}" for p, n, _ in SYNTHETIC],
                        help="methods suite: these synthetic problems only")  # fmt: skip
    parser.add_argument("--splits", default="all", help='UCI splits: "all", "0-4" or "0,3"')
    parser.add_argument("--uci-sets", nargs="+", default=list(UCI_SETS), choices=UCI_SETS,
                        help="methods suite: these UCI sets only")  # fmt: skip
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/uci")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--child-15000", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    if args.child_15000:
        _default_15000()
        return
    if args.pair:
        print(report_pair(*args.pair, args.labels), end="")
        return
    if args.report:
        print(report(args.report, args.suite or "methods", args.short), end="")
        return
    args.suite = args.suite or "priors"
    if args.suite in ("families", "spread"):
        parser.error(f"--suite {args.suite} only reports: give --report FILE")
    if args.suite == "methods":
        common = {"benchmark": "defaults_methods", **provenance("defaults.py", argv)}
        out = open(args.out, "a") if args.out else None  # noqa: SIM115
        try:
            methods_suite(args, common, out)
        finally:
            if out:
                out.close()
        return
    run(args)


if __name__ == "__main__":
    main()
