"""Choosing the network by its evidence on the UCI splits, against cross-validation and the
fixed protocol.

On each split of each dataset, every candidate of a grid (widths ``--widths``, depths
``--depths``, activations ``--activations``; the prior precisions of each candidate chosen by
Laplace's empirical Bayes, one per weight matrix and bias vector) is fitted on the training
rows by ``Laplace`` (``--hessian``), and the rules choose:

* ``fixed``: the protocol's network, one layer of 50 ReLU units, whatever the data;
* ``evidence``: the candidate of highest Laplace evidence;
* ``bma``: ``BayesianModelAverage``, every candidate weighed by its evidence;
* ``clml``: the candidate of highest conditional evidence ``log p(y_held | y_rest)``, the
  log evidence of all rows less that of a fit on ``1 - --held-fraction`` of them (Lotfi et
  al. 2022: how well the architecture predicts rows it has not seen, once it has learned
  from the others, rather than from the prior alone);
* ``holdout``: the candidate whose fit on those rows best predicts the held ones;
* ``cv``: the candidate of highest mean held-out log predictive density over ``--cv``
  folds of the training rows (the rule scikit-learn users know), refitted on all of them;
* ``oracle``: the candidate of highest test log-likelihood (a bound no rule can reach, for
  scale, never a rule).

The fits on all training rows run first (``kind`` ``"candidate"`` and ``"split"`` lines);
``--held-out`` then runs the fits that hold rows out (``"held_out"`` lines), and
``--report FILE`` joins the two and prints the doc/choosing.md tables: each rule's test
RMSE and log-likelihood in the target's original units, its wall time, and the Spearman
rank correlation over candidates between each rule's score and the test log-likelihood.
``--smc`` instead fits, with ``SMC(n_mcmc_steps=--moves, target_ess=--target-ess)`` and
``--particles`` particles, the candidates of at most ``--smc-max-params`` parameters
(``"smc"`` lines), for two more rules:

* ``smc``: the candidate of highest SMC evidence, with its SMC posterior's predictive;
* ``smc_bma``: ``BayesianModelAverage`` over those SMC fits.

With ``--screen`` too, ``BayesianModelAverage``'s screen ranks those candidates first by
Laplace's evidence under SMC's own prior (``optimize_prior=False``), and SMC fits only the
ones within ``--screen-margin`` nats of the best, for two rules of the cost of one or two
SMC fits:

* ``smc_screen``: the most probable of the candidates SMC refitted;
* ``smc_screen_bma``: their average.

``--nuts`` ranks the candidates of at most ``--nuts-max-params`` parameters by Laplace's
evidence under NUTS's own prior (``"nuts"`` lines) and samples by NUTS (``--nuts-samples``
draws after ``--nuts-warmup`` warmup steps per chain):

* ``nuts``: the candidate of highest evidence, with its NUTS posterior's predictive;
* ``nuts_fixed``: the fixed protocol's network, sampled by NUTS alike (the report's
  reference for ``nuts``: whether the evidence's choice helps the sampler).

``--smc-nuts FILE`` takes the network SMC's evidence chose in ``FILE``'s ``--smc`` runs (at
``--particles``, ``--moves``, ``--target-ess``) and samples it by NUTS alike:

* ``smc_nuts``: SMC's evidence chooses, under the prior NUTS samples, and NUTS's
  predictive serves; its time is SMC's and NUTS's.

A split whose SMC rules ran at several settings reports its last run, or, with
``--smc-setting PARTICLES MOVES TARGET_ESS``, its run at that setting.
SMC's evidence is an unbiased estimate of the exact one, so where it ranks better than
Laplace's, the failure is the approximation's; where it does not, the evidence's own.
Run::

    python benchmarks/architecture.py --splits 0-4 --out benchmarks/results/architecture.jsonl
    python benchmarks/architecture.py --splits 0 --held-out \\
        --out benchmarks/results/architecture.jsonl
    python benchmarks/architecture.py --splits 0-2 --smc \\
        --out benchmarks/results/architecture.jsonl
    python benchmarks/architecture.py --splits 0-2 --smc --screen \\
        --out benchmarks/results/architecture.jsonl
    python benchmarks/architecture.py --splits 0-2 --nuts \\
        --out benchmarks/results/architecture.jsonl
    python benchmarks/architecture.py --splits 0-2 \\
        --smc-nuts benchmarks/results/architecture.jsonl \\
        --out benchmarks/results/architecture.jsonl
    python benchmarks/architecture.py --report benchmarks/results/architecture.jsonl

``--report-seeds FILE`` prints the spread of each candidate's evidence over ``--seed``
runs of one split (Laplace's or SMC's), ``--report-margins FILE`` replays the screen at
several margins on the splits where SMC fitted every candidate and the screen ran, and
``--report-goals FILE`` sets ``smc_nuts`` at each SMC setting against the fixed protocol,
the published figures and five minutes a split.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import emitter, load_split, machine, split_ids, standardize  # noqa: E402
from uci import parse_splits  # noqa: E402

DATASETS = ["bostonHousing", "concrete", "energy", "wine-quality-red", "yacht"]
#: The strongest published test log-likelihoods per row on these splits (the issue's table:
#: Deep Evidential Regression, Amini et al. 2020; Wasserstein gradient boosting, Matsubara
#: 2024).
PUBLISHED = {"bostonHousing": -2.35, "concrete": -2.83, "energy": -0.53,
             "wine-quality-red": -0.89, "yacht": -0.16}  # fmt: skip
FIXED = {"hidden_layer_sizes": (50,), "activation": "relu"}
RULES = ["fixed", "evidence", "bma", "clml", "holdout", "cv", "smc", "smc_bma", "smc_screen",
         "smc_screen_bma", "nuts_fixed", "nuts", "smc_nuts", "oracle"]  # fmt: skip


def _revision() -> str:
    try:
        return subprocess.run(
            ["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
            cwd=Path(__file__).resolve().parent, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _spearman(a, b) -> float | None:
    from scipy.stats import spearmanr

    a, b = np.asarray(a, float), np.asarray(b, float)
    keep = np.isfinite(a) & np.isfinite(b)
    return float(spearmanr(a[keep], b[keep])[0]) if keep.sum() > 2 else None


def n_params(n_in: int, hidden: tuple[int, ...]) -> int:
    """Weights and biases of a fully connected network with one output."""
    sizes = (n_in, *hidden, 1)
    return sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def grid(args, n_in: int = 0, max_params: float = np.inf) -> list[dict]:
    """The candidates, those of at most ``max_params`` parameters on ``n_in`` inputs."""
    hidden = [(w,) * d for d in args.depths for w in args.widths
              if n_params(n_in, (w,) * d) <= max_params]  # fmt: skip
    return [{"hidden_layer_sizes": hidden, "activation": args.activations}]


def _scores(est, X, y) -> tuple[float, float]:
    from skbnn.model_selection import log_predictive_scorer

    rmse = float(np.sqrt(np.mean((est.predict(X) - y) ** 2)))
    return rmse, log_predictive_scorer(est, X, y)


def _candidate_rows(bma, X_test, y_test, base: dict) -> list[dict]:
    """One record per candidate of a fitted ``BayesianModelAverage``: ``base``, the
    candidate, its evidence and probability, its test scores and its fit time."""
    rows = []
    for i, (p, est) in enumerate(zip(bma.candidate_params_, bma.estimators_, strict=True)):
        d = est.diagnostics_
        rmse, test_ll = _scores(est, X_test, y_test)
        rows.append({
            **base, "hidden": list(p["hidden_layer_sizes"]), "activation": p["activation"],
            "n_params": n_params(est.n_features_in_, p["hidden_layer_sizes"]),
            "log_evidence": float(bma.log_evidences_[i]),
            "model_probability": float(bma.model_probabilities_[i]),
            "rmse": rmse, "test_ll": test_ll,
            "fit_time": d["wall_time"] - d.get("compile_time", 0.0),
        })  # fmt: skip
    return rows


def _template(args):
    from skbnn import BayesianMLPRegressor
    from skbnn.methods import Laplace

    return BayesianMLPRegressor(
        method=Laplace(hessian=args.hessian, n_init=args.n_init), random_state=args.seed
    )


def run_held_out(args, dataset: str, split: int, emit, common: dict) -> None:
    """The rules that hold rows out of the training split, one line per candidate: the mean
    log predictive density over ``args.cv`` folds, and a fit on ``1 - args.held_fraction`` of
    the rows (a seeded permutation) with its evidence, for the conditional evidence
    ``log p(y_held | y_rest) = log p(y) - log p(y_rest)`` (Lotfi et al. 2022), and its log
    predictive density of the held rows."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import GridSearchCV, KFold

    from skbnn.model_selection import BayesianModelAverage, log_predictive_scorer

    X, y, _, _ = load_split(dataset, split, args.data_dir)
    X, _ = standardize(X, X)
    template = _template(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        search = GridSearchCV(
            template, grid(args), scoring=log_predictive_scorer, refit=False,
            cv=KFold(args.cv, shuffle=True, random_state=args.seed), n_jobs=args.n_jobs,
        ).fit(X, y)  # fmt: skip
        cv_time = time.perf_counter() - start
        order = np.random.default_rng(args.seed).permutation(len(y))
        rest, held = np.split(order, [round(len(y) * (1 - args.held_fraction))])
        start = time.perf_counter()
        part = BayesianModelAverage(template, grid(args), n_jobs=args.n_jobs).fit(X[rest], y[rest])
        part_time = time.perf_counter() - start
    for i, p in enumerate(part.candidate_params_):
        assert search.cv_results_["params"][i] == p
        emit({
            **common, "kind": "held_out", "dataset": dataset, "split": split,
            "hidden": list(p["hidden_layer_sizes"]), "activation": p["activation"],
            "cv_folds": args.cv, "cv_score": float(search.cv_results_["mean_test_score"][i]),
            "cv_time": cv_time, "n_held": len(held),
            "rest_log_evidence": float(part.log_evidences_[i]),
            "held_ll": log_predictive_scorer(part.estimators_[i], X[held], y[held]),
            "part_time": part_time,
        })  # fmt: skip


def run_split(args, dataset: str, split: int, emit, common: dict) -> None:
    from skbnn.model_selection import BayesianModelAverage

    X, y, X_test, y_test = load_split(dataset, split, args.data_dir)
    X, X_test = standardize(X, X_test)
    template = _template(args)
    # (the candidates' ConvergenceWarnings, raised in worker processes, go to their stderr:
    # they cannot be counted here)
    start = time.perf_counter()
    bma = BayesianModelAverage(template, grid(args), n_jobs=args.n_jobs).fit(X, y)
    evidence_time = time.perf_counter() - start
    params = [dict(p, hidden_layer_sizes=tuple(p["hidden_layer_sizes"]))
              for p in bma.candidate_params_]  # fmt: skip
    fixed = params.index(FIXED)

    rows = _candidate_rows(bma, X_test, y_test, {**common, "kind": "candidate",
                                                 "dataset": dataset, "split": split})  # fmt: skip
    for row, est in zip(rows, bma.estimators_, strict=True):
        d = est.diagnostics_
        row.update({
            "newton_decrement": float(d["newton_decrement"]),
            "newton_evidence_change": float(d["newton_evidence_change"]),
            "log_symmetric_modes": float(d["log_symmetric_modes"]),
            "n_prior_updates": int(d["n_prior_updates"]),
        })  # fmt: skip
        emit(row)

    ll = np.array([r["test_ll"] for r in rows])
    rmse = np.array([r["rmse"] for r in rows])
    fit_time = np.array([r["fit_time"] for r in rows])
    chosen = {"fixed": fixed, "evidence": int(bma.best_index_), "oracle": int(np.argmax(ll))}
    record = {
        **common, "kind": "split", "dataset": dataset, "split": split,
        "n_train": len(y), "n_test": len(y_test), "n_candidates": len(params),
        "evidence_time": evidence_time,
        "spearman_evidence": _spearman(bma.log_evidences_, ll),
        "max_probability": float(bma.model_probabilities_.max()),
    }  # fmt: skip
    for rule, i in chosen.items():
        record[rule] = {"candidate": i, "hidden": rows[i]["hidden"],
                        "activation": rows[i]["activation"], "test_ll": float(ll[i]),
                        "rmse": float(rmse[i])}  # fmt: skip
    record["fixed"]["time"] = float(fit_time[fixed])
    record["evidence"]["time"] = evidence_time
    bma_rmse, bma_ll = _scores(bma, X_test, y_test)
    record["bma"] = {"test_ll": bma_ll, "rmse": bma_rmse, "time": evidence_time}
    emit(record)


def run_smc(args, dataset: str, split: int, emit, common: dict) -> None:
    """The SMC rules: ``BayesianModelAverage`` of ``SMC()`` fits over the candidates of at
    most ``args.smc_max_params`` parameters, one ``"smc"`` line per candidate and a
    ``"split"`` line with the rules ``smc`` and ``smc_bma`` (merged with the Laplace one by
    the report)."""
    from sklearn.exceptions import ConvergenceWarning

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import SMC, Laplace
    from skbnn.model_selection import BayesianModelAverage

    X, y, X_test, y_test = load_split(dataset, split, args.data_dir)
    X, X_test = standardize(X, X_test)
    candidates = grid(args, X.shape[1], args.smc_max_params)
    if len(candidates[0]["hidden_layer_sizes"]) * len(args.activations) < 2:
        return
    smc = SMC(n_mcmc_steps=args.moves, target_ess=args.target_ess)
    template = BayesianMLPRegressor(
        method=smc, n_samples=args.particles, random_state=args.seed, n_jobs=args.n_jobs
    )
    common = {**common, "method": "smc", "particles": args.particles, "moves": args.moves,
              "target_ess": args.target_ess}  # fmt: skip
    screen, rule, kind = None, "smc", "smc"
    if args.screen:
        # Laplace under SMC's own prior, as BayesianModelAverage's docstring suggests
        laplace = Laplace(hessian=args.hessian, n_init=args.n_init, optimize_prior=False)
        screen, rule, kind = {"method": laplace}, "smc_screen", "smc_screen"
        common = {**common, "screen": "laplace", "screen_margin": args.screen_margin}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        bma = BayesianModelAverage(
            template, candidates, screen=screen, screen_margin=args.screen_margin
        ).fit(X, y)
        smc_time = time.perf_counter() - start
    rows = _candidate_rows(bma, X_test, y_test, {**common, "kind": kind, "dataset": dataset,
                                                 "split": split})  # fmt: skip
    for i, (row, est) in enumerate(zip(rows, bma.estimators_, strict=True)):
        row["n_stages"] = int(est.diagnostics_.get("n_stages", 0))
        if screen is not None:
            row["refitted"] = bool(bma.refitted_[i])
            row["screen_log_evidence"] = float(bma.screen_log_evidences_[i])
        emit(row)
    best = rows[int(bma.best_index_)]
    bma_rmse, bma_ll = _scores(bma, X_test, y_test)
    emit({
        **common, "kind": "split", "dataset": dataset, "split": split,
        f"{rule}_candidates": len(rows), f"{rule}_time": smc_time,
        f"{rule}_refitted": int(np.sum(bma.refitted_)),
        f"spearman_{rule}": _spearman(bma.log_evidences_, [r["test_ll"] for r in rows]),
        rule: {"hidden": best["hidden"], "activation": best["activation"],
               "test_ll": best["test_ll"], "rmse": best["rmse"], "time": smc_time},
        f"{rule}_bma": {"test_ll": bma_ll, "rmse": bma_rmse, "time": smc_time},
    })  # fmt: skip


def run_nuts(args, dataset: str, split: int, emit, common: dict) -> None:
    """The NUTS rules: Laplace's evidence under NUTS's prior (``optimize_prior=False``), over
    the candidates of at most ``args.nuts_max_params`` parameters, chooses the network, and
    NUTS samples its posterior (``nuts``); NUTS also samples the fixed protocol's network
    (``nuts_fixed``), its reference. One ``"nuts"`` line per candidate and a ``"split"`` line
    (merged with the Laplace one by the report)."""
    from sklearn.exceptions import ConvergenceWarning

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import Laplace
    from skbnn.model_selection import BayesianModelAverage

    X, y, X_test, y_test = load_split(dataset, split, args.data_dir)
    X, X_test = standardize(X, X_test)
    candidates = grid(args, X.shape[1], args.nuts_max_params)
    laplace = BayesianMLPRegressor(
        method=Laplace(hessian=args.hessian, n_init=args.n_init, optimize_prior=False),
        random_state=args.seed,
    )
    common = {**common, "method": "nuts", "nuts_samples": args.nuts_samples,
              "nuts_warmup": args.nuts_warmup}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        bma = BayesianModelAverage(laplace, candidates, n_jobs=args.n_jobs).fit(X, y)
        select_time = time.perf_counter() - start
    rows = _candidate_rows(bma, X_test, y_test, {**common, "kind": "nuts", "dataset": dataset,
                                                 "split": split})  # fmt: skip
    for row in rows:
        emit(row)
    record = {**common, "kind": "split", "dataset": dataset, "split": split,
              "nuts_candidates": len(rows), "nuts_select_time": select_time,
              "spearman_fixed_prior": _spearman(bma.log_evidences_,
                                                 [r["test_ll"] for r in rows])}  # fmt: skip
    best = bma.best_params_
    fits = {"nuts": best} if best == FIXED else {"nuts_fixed": FIXED, "nuts": best}
    for rule, params in fits.items():
        record[rule] = _nuts_fit(args, X, y, X_test, y_test, params,
                                 select_time if rule == "nuts" else 0.0)  # fmt: skip
    if "nuts_fixed" not in record:
        record["nuts_fixed"] = {**record["nuts"], "time": record["nuts"]["time"] - select_time}
    emit(record)


def _nuts_fit(args, X, y, X_test, y_test, params: dict, select_time: float) -> dict:
    """NUTS on the network ``params``, scored on the test rows; its time is the fit's plus
    ``select_time``, the choosing's."""
    from sklearn.exceptions import ConvergenceWarning

    from skbnn import BayesianMLPRegressor
    from skbnn.methods import NUTS

    est = BayesianMLPRegressor(
        method=NUTS(n_warmup=args.nuts_warmup), n_samples=args.nuts_samples,
        random_state=args.seed, n_jobs=args.n_jobs, **params,
    )  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est.fit(X, y)
    rmse, test_ll = _scores(est, X_test, y_test)
    d = est.diagnostics_
    return {
        "hidden": list(params["hidden_layer_sizes"]), "activation": params["activation"],
        "test_ll": test_ll, "rmse": rmse,
        "time": d["wall_time"] - d.get("compile_time", 0.0) + select_time,
        "rhat_loglik": float(d["rhat_loglik"]), "ess_bulk_loglik": float(d["ess_bulk_loglik"]),
        "convergence_warning": any(issubclass(w.category, ConvergenceWarning) for w in caught),
    }  # fmt: skip


def smc_choices(path: str, setting: tuple) -> dict:
    """``(dataset, split) -> the smc rule's choice`` (with its time) in the SMC runs of
    ``path`` at ``setting`` (particles, moves, target ESS); a split run twice, its last."""
    choices = {}
    for line in open(path):
        r = json.loads(line) if line.strip() else {}
        if r.get("kind") == "split" and "smc" in r and _smc_setting(r) == tuple(setting):
            choices[(r["dataset"], r["split"])] = r["smc"]
    return choices


def run_smc_nuts(args, dataset: str, split: int, emit, common: dict) -> None:
    """The ``smc_nuts`` rule: NUTS samples the network that SMC's evidence chose among the
    small candidates (``args.choices``, from an ``--smc`` run of the split); its time is
    SMC's and NUTS's. A ``"split"`` line, merged with the others by the report; nothing
    for a split without an SMC run."""
    choice = args.choices.get((dataset, split))
    if choice is None:
        return
    X, y, X_test, y_test = load_split(dataset, split, args.data_dir)
    X, X_test = standardize(X, X_test)
    params = {"hidden_layer_sizes": tuple(choice["hidden"]), "activation": choice["activation"]}
    fit = _nuts_fit(args, X, y, X_test, y_test, params, choice["time"])
    emit({
        **common, "method": "nuts", "nuts_samples": args.nuts_samples,
        "nuts_warmup": args.nuts_warmup, "kind": "split", "dataset": dataset, "split": split,
        "smc_nuts_setting": [args.particles, args.moves, args.target_ess], "smc_nuts": fit,
    })  # fmt: skip


def _held_out_rules(record: dict, candidates: dict, held: dict) -> None:
    """Add the rules that need the ``held_out`` lines to a split's record, where every
    candidate has one: ``cv``, ``clml`` (the conditional evidence per held row) and
    ``holdout`` (the held rows' log predictive density), with their Spearman correlations."""
    key = (record["dataset"], record["split"])
    cands = [c for k, c in candidates.items() if k[:2] == key]
    outs = [held.get(k) for k, c in candidates.items() if k[:2] == key]
    if not cands or any(o is None for o in outs):
        return
    ll = [c["test_ll"] for c in cands]
    scores = {
        "cv": [o["cv_score"] for o in outs],
        "clml": [(c["log_evidence"] - o["rest_log_evidence"]) / o["n_held"]
                 for c, o in zip(cands, outs, strict=True)],
        "holdout": [o["held_ll"] for o in outs],
    }  # fmt: skip
    times = {
        "cv": outs[0]["cv_time"],
        "clml": record["evidence_time"] + outs[0]["part_time"],
        "holdout": outs[0]["part_time"],
    }
    for rule, score in scores.items():
        i = int(np.nanargmax(score))
        record["spearman_" + rule] = _spearman(score, ll)
        # the rules that score held rows refit their choice on all of them (its fit above)
        refit = 0.0 if rule == "clml" else cands[i]["fit_time"]
        record[rule] = {"hidden": cands[i]["hidden"], "activation": cands[i]["activation"],
                        "test_ll": cands[i]["test_ll"], "rmse": cands[i]["rmse"],
                        "time": times[rule] + refit}  # fmt: skip


def _name(choice: dict) -> str:
    return f"{'x'.join(map(str, choice['hidden']))} {choice['activation']}"


def _smc_setting(line: dict) -> tuple | None:
    """The SMC setting of an SMC line, or of the SMC run an smc_nuts line took its choice
    from; None for the other lines."""
    if "smc_nuts_setting" in line:
        return tuple(line["smc_nuts_setting"])
    if line.get("method") != "smc":
        return None
    # lines from before --moves and --target-ess ran SMC's defaults
    return (line.get("particles"), line.get("moves", 5), line.get("target_ess", 0.5))


def _mean_se(a) -> tuple[float, float]:
    """The mean and its standard error (NaN for one value)."""
    a = np.asarray(a, float)
    se = a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else float("nan")
    return a.mean(), se


def _lines(path: str, smc_setting: tuple | None = None) -> list[dict]:
    """The lines of ``path``; with ``smc_setting``, those of other SMC settings left out."""
    lines = [json.loads(line) for line in open(path) if line.strip()]
    if smc_setting is None:
        return lines
    return [r for r in lines if _smc_setting(r) in (None, tuple(smc_setting))]


def _merged_splits(lines: list[dict]) -> list[dict]:
    """One record per dataset and split, its runs' rules merged (the last run's win)."""
    merged: dict = {}
    for r in lines:
        if r.get("kind") == "split":
            merged.setdefault((r["dataset"], r["split"]), {}).update(r)
    return list(merged.values())


def _datasets(splits: list[dict]) -> list[str]:
    """The datasets of ``splits``: the shared ones in their order, then any others."""
    seen = {r["dataset"] for r in splits}
    return [d for d in DATASETS if d in seen] + sorted(seen - set(DATASETS))


def report_goals(path: str, ensemble: str | None = None, budget: float = 300.0) -> str:
    """``smc_nuts`` against the fixed protocol and the published figures, the doc/choosing.md
    table: for each SMC setting of the ``smc_nuts`` runs in ``path``, per dataset, the
    rule's test log-likelihood; its paired differences from the fixed network's Laplace
    (this benchmark's fixed rule), NUTS (``nuts_fixed``) and, with ``ensemble`` (a
    benchmarks/uci.py results file), that file's runs on the same splits; its difference
    from the strongest published figure; and its wall time per split against ``budget``
    seconds."""
    lines = _lines(path)
    settings = sorted({tuple(r["smc_nuts_setting"]) for r in lines if "smc_nuts_setting" in r},
                      key=lambda s: (-s[0], -s[1]))  # fmt: skip
    fixed = (list(FIXED["hidden_layer_sizes"]), FIXED["activation"])
    fixed_runs = {(r["dataset"], r["split"]): r["test_ll"]
                  for r in (_lines(ensemble) if ensemble else [])
                  if "split" in r and "test_ll" in r
                  and (r.get("hidden"), r.get("activation", "relu")) == fixed}  # fmt: skip
    refs = ["fixed Laplace", "NUTS fixed"] + ["ensemble fixed"] * bool(ensemble)
    out = [
        "| dataset | SMC: particles, moves, ESS | splits | smc_nuts | "
        + " | ".join(f"vs {ref}" for ref in refs)
        + f" | vs published | time per split: median, largest | within {budget:.0f} s |",
        "|---|---|---|---|" + "---|" * (len(refs) + 3),
    ]
    for setting in settings:
        splits = _merged_splits(_lines(path, setting))
        for d in _datasets(splits):
            rows = [r for r in splits if r["dataset"] == d
                    and all(k in r for k in ("smc_nuts", "fixed", "nuts_fixed"))]  # fmt: skip
            if not rows:
                continue
            ll = np.array([r["smc_nuts"]["test_ll"] for r in rows])
            times = np.array([r["smc_nuts"]["time"] for r in rows])
            m, se = _mean_se(ll)
            cells = [d, ", ".join(map("{:g}".format, setting)), str(len(rows))]
            cells.append(f"{m:.3f} +- {se:.3f}")
            diffs = [ll - [r[k]["test_ll"] for r in rows] for k in ("fixed", "nuts_fixed")]
            if ensemble:
                diffs.append(ll - [fixed_runs.get((d, r["split"]), np.nan) for r in rows])
            for a in [*diffs, ll - PUBLISHED.get(d, np.nan)]:
                a = a[np.isfinite(a)]
                dm, dse = _mean_se(a) if a.size else (np.nan, np.nan)
                n = f" [{a.size}]" if 0 < a.size < len(rows) else ""
                cells.append(f"{dm:+.3f} +- {dse:.3f}{n}" if a.size else "-")
            cells += [f"{np.median(times):.0f} s, {times.max():.0f} s",
                      f"{(times <= budget).sum()}/{len(rows)}"]  # fmt: skip
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def report(path: str, smc_setting: tuple | None = None) -> str:
    """The doc/choosing.md tables from the lines of ``path``; with ``smc_setting``
    (particles, moves, target ESS), the SMC rules of the runs at that setting only.

    A split run twice (say without CV, then with it) counts once, its rules merged. First,
    per dataset, each rule's mean test log-likelihood +- standard error over the splits it
    ran on, and its paired difference from the fixed protocol on those splits; then the
    RMSEs and times; then the median rank correlations, each rule's most frequent choices,
    and the evidence's own error: the median gap between the two most probable candidates'
    log evidences, the median of the change one more Newton step would make to the most
    probable one's, and the share of splits whose gap exceeds the two candidates' changes.
    """
    out: list[str] = []
    lines = _lines(path, smc_setting)
    splits = _merged_splits(lines)
    candidates: dict = {}
    for r in lines:
        if r.get("kind") == "candidate":
            key = (r["dataset"], r["split"], tuple(r["hidden"]), r["activation"])
            candidates[key] = r
    held: dict = {}
    for r in lines:
        if r.get("kind") == "held_out":
            held[(r["dataset"], r["split"], tuple(r["hidden"]), r["activation"])] = r
    smcs: dict = {}
    for r in lines:
        if r.get("kind") == "smc":
            smcs[(r["dataset"], r["split"], tuple(r["hidden"]), r["activation"])] = r
    for r in splits:
        _held_out_rules(r, candidates, held)
        both = [(c["log_evidence"], candidates[k]["log_evidence"]) for k, c in smcs.items()
                if k[:2] == (r["dataset"], r["split"]) and k in candidates]  # fmt: skip
        if len(both) > 2:
            r["spearman_smc_laplace"] = _spearman(*zip(*both, strict=True))
    datasets = _datasets(splits)

    def ran(d, rule):
        return sorted((r for r in splits if r["dataset"] == d and rule in r),
                      key=lambda r: r["split"])  # fmt: skip

    rules = [r for r in RULES if any(r in s for s in splits)]

    def table(cell, last: str = "") -> None:
        out.append("| dataset | " + " | ".join(rules) + (" | " + last if last else "") + " |")
        out.append("|---|" + "---|" * (len(rules) + bool(last)))
        for d in datasets:
            cells = [cell(rows, rule) if (rows := ran(d, rule)) else "-" for rule in rules]
            extra = f" | {PUBLISHED[d]:.2f}" if last and d in PUBLISHED else " | -" * bool(last)
            out.append(f"| {d} | " + " | ".join(cells) + extra + " |")

    def ll_cell(rows, rule) -> str:
        ll = np.array([r[rule]["test_ll"] for r in rows])
        m, se = _mean_se(ll)
        cell = f"{m:.3f} +- {se:.3f}"
        if rule != "fixed":
            # NUTS's choice against NUTS on the fixed network, the others against Laplace's
            ref = "nuts_fixed" if rule in ("nuts", "smc_nuts") else "fixed"
            dm, dse = _mean_se(ll - np.array([r[ref]["test_ll"] for r in rows]))
            cell += f" ({dm:+.3f} +- {dse:.3f})"
        return cell + f" [{len(rows)}]"

    def rmse_cell(rows, rule) -> str:
        rmse = np.mean([r[rule]["rmse"] for r in rows])
        times = [r[rule]["time"] for r in rows if "time" in r[rule]]
        return f"{rmse:.3f}" + (f", {np.mean(times):.0f} s" if times else "")

    out.append("Test log-likelihood per row, mean +- standard error over splits [their number]; "
          "for each rule, its paired difference from the fixed protocol (for `nuts` and "
          "`smc_nuts`, from `nuts_fixed`).\n")  # fmt: skip
    table(ll_cell, last="published")
    out.append("\nTest RMSE (original units) and wall time per split, means over the splits.\n")
    table(rmse_cell)

    out.append("\nRank correlations over the candidates (median over splits), the most frequent "
          "choices, and the evidence's own error (nats).\n")  # fmt: skip
    out.append(
        "| dataset | Spearman with the test LL: evidence, CLML, holdout, CV, SMC | SMC with "
        "Laplace | evidence's choices | CV's choices | SMC's choices | screened SMC's choices "
        "(refits) | NUTS's choices | top-two gap | Newton change of the top | settled |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for d in datasets:
        rows = [r for r in splits if r["dataset"] == d]

        def med(key, rows=rows):
            v = [r[key] for r in rows if r.get(key) is not None]
            return f"{np.median(v):.2f}" if v else "-"

        def picks(rule, rows=rows):
            names = [_name(r[rule]) for r in rows if rule in r]
            values, counts = np.unique(names, return_counts=True)
            order = np.argsort(-counts, kind="stable")
            return ", ".join(f"{values[i]} ({counts[i]})" for i in order[:3]) or "-"

        def refits(rows):
            n = [r["smc_screen_refitted"] for r in rows if "smc_screen_refitted" in r]
            return f" ({np.mean(n):.1f})" if n else ""

        gaps, changes, settled = [], [], []
        for r in rows:
            cands = [c for k, c in candidates.items() if k[:2] == (d, r["split"])]
            top = sorted(cands, key=lambda c: -c["log_evidence"])[:2]
            gap = top[0]["log_evidence"] - top[1]["log_evidence"]
            moves = [abs(c["newton_evidence_change"]) for c in top]
            gaps.append(gap)
            changes.append(moves[0])
            settled.append(gap > sum(moves))
        corr = ", ".join(med("spearman_" + k) for k in ("evidence", "clml", "holdout", "cv", "smc"))
        out.append(f"| {d} | {corr} | {med('spearman_smc_laplace')} | "
              f"{picks('evidence')} | {picks('cv')} | {picks('smc')} | "
              f"{picks('smc_screen')}{refits(rows)} | {picks('nuts')} | "
              f"{np.median(gaps):.1f} | "
              f"{np.median(changes):.1f} | {sum(settled)}/{len(settled)} |")  # fmt: skip
    return "\n".join(out) + "\n"


def _fit_label(line: dict) -> str:
    """How a candidate line was fitted, for the seeds table: Laplace's initializations or
    SMC's setting."""
    if line.get("kind") == "smc":
        particles, moves, ess = _smc_setting(line)
        return f"SMC, {particles} particles, {moves} moves, ESS {ess}"
    return f"Laplace, n_init={line['n_init']}"


def report_seeds(path: str) -> str:
    """How much one candidate's evidence moves with the seed (``--seed``), the
    doc/choosing.md table: per dataset, split and fit (Laplace's training with
    ``--n-init`` initializations, or SMC at one setting), over the seeds, the median (over
    candidates) and largest standard deviation of a candidate's log evidence, the median
    gap between the two most probable candidates, how many seeds the most frequent choice
    won, and the spread of the chosen and of the fixed network's test log-likelihood (SMC's
    grid has no fixed network)."""
    lines = [json.loads(line) for line in open(path) if line.strip()]
    runs: dict = {}
    for r in lines:
        if r.get("kind") in ("candidate", "smc"):
            key = (r["dataset"], r["split"], r["kind"] == "smc", _fit_label(r))
            runs.setdefault(key, {}).setdefault(r["seed"], []).append(r)
    out = [
        "| dataset | split | fit | seeds | sd of a candidate's log evidence: median, largest | "
        "top-two gap (median) | seeds choosing the most frequent choice | chosen test LL "
        "(range) | fixed test LL (range) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    order = {d: i for i, d in enumerate(DATASETS)}
    fixed = (FIXED["hidden_layer_sizes"], FIXED["activation"])
    for (d, split, _, label), seeds in sorted(
        runs.items(), key=lambda kv: (order.get(kv[0][0], 99), *kv[0][1:])
    ):
        if len(seeds) < 2:
            continue
        by_cand: dict = {}
        gaps, chosen, chosen_ll, fixed_ll = [], [], [], []
        for cands in seeds.values():
            for c in cands:
                by_cand.setdefault((tuple(c["hidden"]), c["activation"]), []).append(
                    c["log_evidence"]
                )
            top = sorted(cands, key=lambda c: -c["log_evidence"])
            gaps.append(top[0]["log_evidence"] - top[1]["log_evidence"])
            chosen.append(_name(top[0]))
            chosen_ll.append(top[0]["test_ll"])
            fixed_ll += [c["test_ll"] for c in cands
                         if (tuple(c["hidden"]), c["activation"]) == fixed]  # fmt: skip
        sds = [np.std(v, ddof=1) for v in by_cand.values() if len(v) > 1]
        names, counts = np.unique(chosen, return_counts=True)
        fixed_range = f"{min(fixed_ll):.3f} to {max(fixed_ll):.3f}" if fixed_ll else "-"
        out.append(
            f"| {d} | {split} | {label} | {len(seeds)} | "
            f"{np.median(sds):.1f}, {np.max(sds):.1f} | "
            f"{np.median(gaps):.1f} | {counts.max()} ({names[np.argmax(counts)]}) | "
            f"{min(chosen_ll):.3f} to {max(chosen_ll):.3f} | {fixed_range} |"
        )
    return "\n".join(out) + "\n"


def report_margins(path: str, margins: list[float]) -> str:
    """How wide the Laplace screen in front of SMC must be, the doc/choosing.md table,
    replayed from the lines of ``path`` on the splits where SMC at its defaults fitted
    every small candidate and the screen ran too: for each ``screen_margin``, the
    candidates SMC would fit (those whose screened evidence is within the margin of the
    best), SMC's time for them (their recorded fit times, summed), how often the most
    probable of them is SMC's own choice among all, and its test log-likelihood's paired
    difference from the fixed protocol."""
    lines = [json.loads(line) for line in open(path) if line.strip()]
    smc: dict = {}
    screened: dict = {}
    fixed: dict = {}
    for r in lines:
        key = (r["dataset"], r["split"])
        if r.get("kind") == "smc" and _smc_setting(r) == (500, 5, 0.5):
            smc.setdefault(key, {})[(tuple(r["hidden"]), r["activation"])] = r
        elif r.get("kind") == "smc_screen":
            screened.setdefault(key, {})[(tuple(r["hidden"]), r["activation"])] = r
        elif r.get("kind") == "split" and "fixed" in r:
            fixed[key] = r["fixed"]["test_ll"]
    out = [
        "| dataset | screen margin (nats) | splits | candidates SMC fits (of 6) | their SMC "
        "time (s) | SMC's own choice | paired difference from the fixed network |",
        "|---|---|---|---|---|---|---|",
    ]
    keys = sorted(k for k in smc if k in screened and k in fixed
                  and smc[k].keys() == screened[k].keys())  # fmt: skip
    for d in [d for d in DATASETS if any(k[0] == d for k in keys)]:
        for margin in margins:
            kept, cost, same, diff = [], [], 0, []
            for key in (k for k in keys if k[0] == d):
                full, screen = smc[key], screened[key]
                best = max(c["screen_log_evidence"] for c in screen.values())
                keep = [c for c, r in screen.items() if r["screen_log_evidence"] >= best - margin]
                pick = max(keep, key=lambda c: full[c]["log_evidence"])
                same += pick == max(full, key=lambda c: full[c]["log_evidence"])
                kept.append(len(keep))
                cost.append(sum(full[c]["fit_time"] for c in keep))
                diff.append(full[pick]["test_ll"] - fixed[key])
            se = np.std(diff, ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
            out.append(
                f"| {d} | {margin:g} | {len(diff)} | {np.mean(kept):.1f} | {np.mean(cost):.0f} "
                f"| {same}/{len(diff)} | {np.mean(diff):+.3f} +- {se:.3f} |"
            )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=DATASETS, help="dataset folders")
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/uci")
    parser.add_argument("--splits", default="all", help='"all", "0-4" or "0,3"')
    parser.add_argument("--widths", type=int, nargs="+", default=[10, 25, 50, 100])
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--activations", nargs="+", default=["relu", "tanh"])
    parser.add_argument("--hessian", default="kron", help="Laplace's hessian for every candidate")
    parser.add_argument("--n-init", type=int, default=1, help="Laplace's initializations")
    parser.add_argument(
        "--held-out", action="store_true",
        help="run the rules that hold rows out (CV, conditional evidence), not the fits",
    )  # fmt: skip
    parser.add_argument("--cv", type=int, default=5, help="folds of the CV rule")
    parser.add_argument("--held-fraction", type=float, default=0.2,
                        help="rows held out for the conditional evidence")  # fmt: skip
    parser.add_argument(
        "--smc", action="store_true",
        help="run the SMC rules on the candidates of at most --smc-max-params, not the fits",
    )  # fmt: skip
    parser.add_argument("--smc-max-params", type=int, default=400)
    parser.add_argument("--particles", type=int, default=500, help="SMC's particles")
    parser.add_argument("--moves", type=int, default=5, help="SMC's moves per stage")
    parser.add_argument("--target-ess", type=float, default=0.5, help="SMC's target ESS")
    parser.add_argument(
        "--screen", action="store_true",
        help="with --smc: Laplace under SMC's prior screens, SMC refits the likeliest",
    )  # fmt: skip
    parser.add_argument("--screen-margin", type=float, default=10.0,
                        help="BayesianModelAverage's screen_margin, nats")  # fmt: skip
    parser.add_argument(
        "--nuts",
        action="store_true",
        help="the NUTS rules: Laplace's evidence chooses, NUTS samples (and the fixed network)",
    )
    parser.add_argument(
        "--smc-nuts", default=None, metavar="FILE",
        help="the smc_nuts rule: NUTS samples the network SMC's evidence chose in FILE's "
        "--smc runs (at --particles, --moves, --target-ess)",
    )  # fmt: skip
    parser.add_argument("--nuts-max-params", type=int, default=1000)
    parser.add_argument("--nuts-samples", type=int, default=1000, help="NUTS's draws kept")
    parser.add_argument("--nuts-warmup", type=int, default=500, help="NUTS's warmup per chain")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, help="print the table of this results file")
    parser.add_argument(
        "--report-seeds", default=None,
        help="print the table of the evidence's spread over --seed runs of this file",
    )  # fmt: skip
    parser.add_argument(
        "--report-margins", default=None,
        help="print the table of the screen's margins replayed on the SMC runs of this file",
    )  # fmt: skip
    parser.add_argument(
        "--report-goals", default=None,
        help="print the table of smc_nuts against the fixed protocol and the published figures",
    )  # fmt: skip
    parser.add_argument(
        "--ensemble", default=None, metavar="FILE",
        help="with --report-goals: benchmarks/uci.py's runs on the fixed network, paired too",
    )  # fmt: skip
    parser.add_argument("--margins", type=float, nargs="+", default=[0, 10, 20, 50, 100],
                        help="with --report-margins: the screen margins, nats")  # fmt: skip
    parser.add_argument(
        "--smc-setting", type=float, nargs=3, default=None,
        metavar=("PARTICLES", "MOVES", "TARGET_ESS"),
        help="with --report: the SMC rules of the runs at this setting only",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.report_goals:
        print(report_goals(args.report_goals, args.ensemble), end="")
        return
    if args.report:
        print(report(args.report, args.smc_setting), end="")
        return
    if args.report_seeds:
        print(report_seeds(args.report_seeds), end="")
        return
    if args.report_margins:
        print(report_margins(args.report_margins, args.margins), end="")
        return
    if (50,) not in [(w,) * d for d in args.depths for w in args.widths] or (
        "relu" not in args.activations
    ):
        parser.error("the grid must hold the fixed protocol's network: width 50, depth 1, relu")
    from skbnn import __version__

    argv = sys.argv[1:] if argv is None else list(argv)
    common = {
        "benchmark": "select", "method": "laplace", "hessian": args.hessian,
        "n_init": args.n_init, "cv_folds": args.cv, "seed": args.seed, "n_jobs": args.n_jobs,
        "skbnn": __version__, "revision": _revision(),
        "command": "python " + shlex.join(["benchmarks/architecture.py", *argv]), **machine(),
    }  # fmt: skip
    emit = emitter(args.out)
    if args.smc_nuts:
        args.choices = smc_choices(args.smc_nuts, (args.particles, args.moves, args.target_ess))
    chosen = {d: parse_splits(args.splits, split_ids(d, args.data_dir)) for d in args.data}
    # split by split across the datasets, so that a run cut short covers each alike
    for k in range(max(map(len, chosen.values()))):
        for dataset in args.data:
            if k < len(chosen[dataset]):
                run = (run_held_out if args.held_out else run_smc if args.smc
                       else run_nuts if args.nuts else run_smc_nuts if args.smc_nuts
                       else run_split)  # fmt: skip
                run(args, dataset, chosen[dataset][k], emit, common)


if __name__ == "__main__":
    main()
