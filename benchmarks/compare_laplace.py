"""skbnn's Laplace against laplace-torch's at the same MAP: evidence, GLM variances, time.

For each case, skbnn fits ``method=Laplace()`` with its defaults: the MAP trained by the
shared engine, the GGN over all weights, and empirical Bayes of one prior precision per
weight matrix and bias vector and of the noise precision. Its MAP weights and its final
hyperparameters then go to laplace-torch (``benchmarks/peers/laplace_torch.py``: the
equivalent float64 ``torch.nn.Sequential``, ``Laplace(subset_of_weights="all",
hessian_structure="full")``, the same per-tensor prior precisions and noise sd, no tuning),
fitted on the same training rows. Both compute, at the same weights under the same
hyperparameters:

* the log marginal likelihood of the one mode, on the standardized scale for regression
  (skbnn's ``log_evidence_`` less the standardization's Jacobian term and less
  ``diagnostics_["log_symmetric_modes"]``, the symmetric copies of the mode that skbnn
  counts and laplace-torch does not);
* the GLM functional covariance ``J(x) Sigma J(x)^T`` at the test rows (skbnn:
  ``posterior_.function_moments``; regression also through the estimator's
  ``predict_std(kind="epistemic")``);
* for classifiers, the probit predictive (``predict_proba``).

Agreement is the relative difference (goal: below 1e-6). Time is the *Laplace step* at the
given MAP, the same work on both sides, best and median of ``--repeats`` warm runs, one
thread each (``--threads``):

* skbnn: the GGN accumulated from the numba Jacobian kernel, the evidence with its
  Cholesky log-determinant, the posterior (its covariance factor and the stored draws)
  and the GLM variance at the test rows: the code ``Laplace.run`` runs at its final
  hyperparameters.
* laplace-torch: ``Laplace(...)``, ``fit``, ``log_marginal_likelihood()`` and the GLM
  functional variance at the test rows (backend ``backpack``, its fastest exact one here;
  ``--backend`` for the others).

skbnn's whole fit (training, empirical Bayes and polishing included) is reported too, for
scale; laplace-torch has no counterpart for it.

``--hessian kron`` compares ``Laplace(hessian="kron")`` with laplace-torch's ``KronLaplace``
(``hessian_structure="kron"``, one prior precision per tensor) in the same way, and adds
what the Kronecker approximation costs: the full GGN's evidence at the same MAP and
hyperparameters (``log_evidence_minus_ggn``), and both fitted with their own empirical
Bayes: the evidence each reports and its test log predictive density per row
(``test_ll``, ``ggn_test_ll``). backpack has no Kronecker factors for the
binary classifier's two-logit module: run ``breast-cancer`` with ``--backend asdl``.

Run::

    python benchmarks/compare_laplace.py [--cases boston-10 boston-50 iris iris-2-2 \
        breast-cancer] [--repeats 7] [--threads 1] [--hessian kron] [--out FILE]

Needs torch and laplace-torch (``pip install ".[bench]" laplace-torch``). doc/optimization.md's
tables are the reports of the results files, which need neither::

    python benchmarks/compare_laplace.py --report benchmarks/results/compare_laplace.jsonl
    python benchmarks/compare_laplace.py --report benchmarks/results/compare_laplace_kron.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))

from _uci import load_split, machine, read_results, standardize  # noqa: E402
from laplace_torch import torch_laplace  # noqa: E402

#: skbnn's ``Laplace(hessian=...)`` and laplace-torch's ``hessian_structure`` that matches it
STRUCTURE = {"ggn": "full", "kron": "kron"}

#: name: (problem, hidden layers, activation)
CASES = {
    # the Boston network of the published PyMC3 run (README) and of the UCI protocol
    "boston-10": ("boston", (10,), "relu"),
    "boston-50": ("boston", (50,), "relu"),
    "boston-10-tanh": ("boston", (10,), "tanh"),
    # iris: a 10-unit tanh network, and the most probable architecture of the example
    "iris": ("iris", (10,), "tanh"),
    "iris-2-2": ("iris", (2, 2), "relu"),
    # the binary (Bernoulli) classifier
    "breast-cancer": ("breast_cancer", (10,), "tanh"),
}


def load(problem: str):
    """``(X, y, X_test, y_test, is_classifier)``, X standardized by the training rows."""
    if problem == "boston":
        X, y, X_test, y_test = load_split("bostonHousing", 0)
        X, X_test = standardize(X, X_test)
        return X, y, X_test, y_test, False
    from sklearn.datasets import load_breast_cancer, load_iris
    from sklearn.model_selection import train_test_split

    data = {"iris": load_iris, "breast_cancer": load_breast_cancer}[problem]()
    X, X_test, y, y_test = train_test_split(
        data.data, data.target, test_size=0.2, stratify=data.target, random_state=0
    )
    X, X_test = standardize(X, X_test)
    return X, y, X_test, y_test, True


def fit_skbnn(problem, hidden, activation, threads, seed=0, hessian="ggn"):
    """skbnn's Laplace fit with its defaults (but ``hessian``); the estimator, its fit time
    and warnings."""
    from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
    from skbnn.methods import Laplace

    X, y, X_test, y_test, classifier = load(problem)
    cls = BayesianMLPClassifier if classifier else BayesianMLPRegressor
    est = cls(hidden_layer_sizes=hidden, activation=activation, method=Laplace(hessian=hessian),
              random_state=seed, n_jobs=threads)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        est.fit(X, y)
        fit_time = time.perf_counter() - t0
    return est, (X, y, X_test, y_test), fit_time, [str(w.message)[:120] for w in caught]


def skbnn_step(est, X, y, X_test, method=None):
    """skbnn's Laplace step at the fitted MAP under its final hyperparameters.

    Rebuilds the estimator's target (its merged, weighted rows and standardized y), sets the
    prior scales and noise precision empirical Bayes chose, and runs what ``Laplace.run``
    runs once they are final: ``_assemble`` (GGN, evidence), the posterior, and the GLM
    variance at ``X_test``, with BLAS on one thread as there; ``method``, another Laplace,
    runs it in place of the estimator's. Returns ``(log_evidence, f_var (n_test, k, k),
    seconds)``.
    """
    from skbnn.posterior import single_threaded_blas

    with single_threaded_blas():
        return _skbnn_step(est, X, y, X_test, method)


def _skbnn_step(est, X, y, X_test, method=None):
    from skbnn._data import weighted_rows as _weighted_rows
    from skbnn.log_posterior import LogPosterior
    from skbnn.posterior import ForwardPass, LaplacePosterior
    from skbnn.priors import GaussianPrior

    t0 = time.perf_counter()
    diag = est.diagnostics_
    if hasattr(est, "classes_"):
        codes = np.searchsorted(est.classes_, y)
        k = len(est.classes_)
        Y = codes[:, None].astype(float) if k == 2 else np.eye(k)[codes]
        rows, Y, W = _weighted_rows(X, Y, None)
        target = LogPosterior(rows, Y, est.hidden_layer_sizes, est.activation,
                        "bernoulli" if k == 2 else "categorical", prior=GaussianPrior(),
                        sample_weight=W)  # fmt: skip
    else:
        rows, Y, W = _weighted_rows(X, y[:, None], None)
        Y = (Y - est.predictive_.y_mean) / est.predictive_.y_std
        target = LogPosterior(rows, Y, est.hidden_layer_sizes, est.activation, "gaussian",
                        prior=GaussianPrior(), noise="gibbs",
                        noise_precision=diag["noise_precision"], sample_weight=W)  # fmt: skip
    layout = target.layout
    for layer in range(layout.n_layers):
        for j, sl in enumerate(layout.slices(layer)):
            target.prior_scale[sl] = diag["prior_precision"][2 * layer + j] ** -0.5
    method = est.method if method is None else method
    first_layer = layout.n_layers - 1 if method.subset == "last_layer" else 0
    sl = slice(int(layout.offsets[first_layer]), layout.n_weights)
    threads = max(1, est.n_jobs or 1)
    net = ForwardPass(layout, target.activation_code, threads)
    state = method._assemble(
        target, net, est.posterior_.theta, first_layer, sl, threads, target.evaluator()
    )
    posterior = LaplacePosterior(
        state.theta,
        state.precision,
        first_layer,
        layout,
        n_draws=est.posterior_.n_draws,
        random_state=0,
        noise_precision=target.tau.copy(),
        precision_factor=None if state.factor is None else state.factor[0],
    )
    _, f_var = posterior.function_moments(net, X_test)
    return state.log_evidence, f_var, time.perf_counter() - t0


def _rel(a, b) -> float:
    """Largest absolute difference relative to the reference's largest magnitude."""
    return float(np.max(np.abs(np.asarray(a) - b)) / np.max(np.abs(b)))


def run_case(name, repeats, threads, backend, hessian="ggn") -> dict:
    problem, hidden, activation = CASES[name]
    est, (X, y, X_test, y_test), fit_time, caught = fit_skbnn(
        problem, hidden, activation, threads, hessian=hessian
    )
    diag = est.diagnostics_
    classifier = hasattr(est, "classes_")
    theta = est.posterior_.theta
    sizes = [int(s) for s in est.predictive_.layout.sizes]
    if classifier:
        Y = np.searchsorted(est.classes_, y)
        likelihood, sigma = "classification", 1.0
    else:
        Y = (y - est.predictive_.y_mean[0]) / est.predictive_.y_std[0]
        likelihood = "regression"
        sigma = float(diag["noise_precision"][0] ** -0.5)
    net = est.predictive_.network()
    _, f_var = est.posterior_.function_moments(net, X_test)
    # the evidence on the standardized scale, of the one mode (laplace-torch counts no
    # symmetric copies)
    symmetric = diag["log_symmetric_modes"]
    evidence = est.posterior_.log_evidence - symmetric

    step_times, torch_times = [], []
    step_evidence = step_var = res = None
    for _ in range(repeats + 1):  # the first of each is a warm-up
        step_evidence, step_var, seconds = skbnn_step(est, X, y, X_test)
        step_times.append(seconds)
        res = torch_laplace(X, Y, sizes, theta, activation=activation, likelihood=likelihood,
                            prior_precision=diag["prior_precision"], sigma_noise=sigma,
                            X_test=X_test, backend=backend, n_threads=threads,
                            warmup=False, hessian_structure=STRUCTURE[hessian])  # fmt: skip
        torch_times.append(res["setup_time"] + res["fit_time"] + res["marglik_time"]
                           + res["predictive_time"])  # fmt: skip
    step_times, torch_times = np.array(step_times[1:]), np.array(torch_times[1:])
    ours = np.diagonal(f_var, axis1=1, axis2=2)
    theirs = np.diagonal(res["f_var"], axis1=1, axis2=2)

    record = {
        "benchmark": "compare_laplace",
        "case": name,
        "layer_sizes": sizes,
        "activation": activation,
        "n_train": len(X),
        "n_test": len(X_test),
        "n_params": int(theta.size),
        "prior_precision": np.asarray(diag["prior_precision"]).tolist(),
        "sigma_noise": sigma,
        "skbnn_log_evidence": evidence,
        "skbnn_log_symmetric_modes": symmetric,
        "torch_log_marglik": res["log_marglik"],
        "log_evidence_rel_diff": abs(evidence - res["log_marglik"]) / abs(res["log_marglik"]),
        "step_log_evidence_rel_diff": abs(step_evidence - evidence) / abs(evidence),
        "f_var_rel_diff": _rel(f_var, res["f_var"]),
        "f_var_diag_max_rel_diff": float(np.max(np.abs(ours - theirs) / theirs)),
        "step_f_var_rel_diff": _rel(step_var, f_var),
        "skbnn_step_time_min": float(step_times.min()),
        "skbnn_step_time_median": float(np.median(step_times)),
        "torch_step_time_min": float(torch_times.min()),
        "torch_step_time_median": float(np.median(torch_times)),
        "time_ratio_torch_over_skbnn": float(np.median(torch_times) / np.median(step_times)),
        "skbnn_fit_time": fit_time,
        "skbnn_n_prior_updates": diag["n_prior_updates"],
        "skbnn_newton_decrement": diag["newton_decrement"],
        "skbnn_warnings": caught,
        "backend": backend,
        "hessian": hessian,
        "threads": threads,
        "repeats": repeats,
        "torch": res["torch"],
        "laplace_torch": res["laplace"],
    }
    if hessian != "ggn":
        # what the approximation costs: the full GGN's evidence at the same MAP and
        # hyperparameters (both of the one mode: the step counts no symmetric copies)
        from skbnn.methods import Laplace
        from skbnn.model_selection import log_predictive_scorer

        ggn_evidence, _, _ = skbnn_step(est, X, y, X_test, Laplace(hessian="ggn"))
        record["ggn_log_evidence_same_map"] = ggn_evidence
        record["log_evidence_minus_ggn"] = step_evidence - ggn_evidence
        # and each fitted with its own empirical Bayes: the evidence it reports and its
        # test log predictive density per row
        ggn, _, ggn_fit_time, _ = fit_skbnn(problem, hidden, activation, threads)
        record.update(
            fit_log_evidence=est.log_evidence_, ggn_fit_log_evidence=ggn.log_evidence_,
            test_ll=log_predictive_scorer(est, X_test, y_test),
            ggn_test_ll=log_predictive_scorer(ggn, X_test, y_test),
            ggn_fit_time=ggn_fit_time,
        )  # fmt: skip
    if classifier:
        record["proba_max_abs_diff"] = float(np.max(np.abs(est.predict_proba(X_test)
                                                           - res["proba"])))  # fmt: skip
    else:
        epistemic = est.predict_std(X_test, kind="epistemic") / est.predictive_.y_std[0]
        record["predict_std_epistemic_rel_diff"] = _rel(epistemic**2, res["f_var"][:, 0, 0])
    return record


def _network(r) -> str:
    return "-".join(str(n) for n in r["layer_sizes"]) + " " + r["activation"]


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f} ms"


def report(path) -> str:
    """doc/optimization.md's table of the results file ``path``: the full GGN's, or with the
    approximation's cost where its lines are ``--hessian kron``'s (a later line of a case
    replaces an earlier one)."""
    lines = read_results(path)
    records = {r["case"]: r for r in lines}.values()
    kron = all(r["hessian"] == "kron" for r in records)
    if kron:
        head = ("| case | parameters | evidence | `J Sigma J'` | probabilities | skbnn | "
                "laplace-torch | speed-up | K-FAC - GGN evidence, same MAP | "
                "fitted evidence, K-FAC / GGN | test log-lik., K-FAC / GGN |")  # fmt: skip
    else:
        head = ("| case | network | rows | parameters | evidence | `J Sigma J'` | "
                "probabilities | skbnn | laplace-torch | speed-up | skbnn fit |")  # fmt: skip
    out = [head, "|" + "---|" * head[1:].count("|")]
    for r in records:
        proba = f"{r['proba_max_abs_diff']:.0e}" if "proba_max_abs_diff" in r else "-"
        agree = [f"{r['log_evidence_rel_diff']:.0e}", f"{r['f_var_rel_diff']:.0e}", proba,
                 _ms(r["skbnn_step_time_median"]), _ms(r["torch_step_time_median"]),
                 f"{r['time_ratio_torch_over_skbnn']:.1f}x"]  # fmt: skip
        if kron:
            cells = [f"{r['case']} ({_network(r)})", r["n_params"], *agree,
                     f"{r['log_evidence_minus_ggn']:.1f}",
                     f"{r['fit_log_evidence']:.1f} / {r['ggn_fit_log_evidence']:.1f}",
                     f"{r['test_ll']:.3f} / {r['ggn_test_ll']:.3f}"]  # fmt: skip
        else:
            cells = [r["case"], _network(r), r["n_train"], r["n_params"], *agree,
                     f"{r['skbnn_fit_time']:.2f} s"]  # fmt: skip
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--repeats", type=int, default=7, help="timed runs after a warm-up")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backend", default="backpack",
                        choices=("backpack", "asdl", "curvlinops"))  # fmt: skip
    parser.add_argument("--hessian", default="ggn", choices=list(STRUCTURE),
                        help="skbnn's Laplace(hessian=...), and laplace-torch's match")  # fmt: skip
    parser.add_argument("--out", help="also append the JSON lines to this file")
    parser.add_argument("--report", default=None, metavar="FILE",
                        help="print the table of this results file (no fit)")  # fmt: skip
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    command = " ".join(["python", *sys.argv])
    for name in args.cases:
        record = run_case(name, args.repeats, args.threads, args.backend, args.hessian)
        record.update({"command": command, **machine()})
        line = json.dumps(record)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    main()
