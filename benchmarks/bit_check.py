"""Fingerprints of seeded fits, to show that a refactor changed no bit of any result.

Fits every method (and the variants whose code paths differ: tempering, the hierarchical,
logistic and scale-mixture priors, tanh, heteroscedastic members, two outputs, row weights)
on small synthetic data with fixed seeds, and prints one JSON line per fit with the SHA-256
of its predictions and of its posterior's parameter draws. Run it on two checkouts with the
same numba target and compare::

    PYTHONPATH=/path/to/old python benchmarks/bit_check.py --out old.jsonl
    PYTHONPATH=/path/to/new python benchmarks/bit_check.py --against old.jsonl

``--against`` exits with status 1 if any fingerprint differs. Not a timed benchmark.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings

import numpy as np


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _cases():
    from skbnn.methods import (
        HMC,
        LBBNN,
        MALA,
        NUTS,
        SMC,
        SWAG,
        AdaptiveMetropolis,
        DeepEnsemble,
        Laplace,
        RandomizedMAP,
        VariationalInference,
    )
    from skbnn.priors import HierarchicalPrior, LogisticPrior, ScaleMixturePrior

    methods = {
        "nuts": lambda: NUTS(n_chains=2, n_warmup=60, max_tree_depth=6),
        "nuts_pt": lambda: NUTS(n_chains=2, n_warmup=40, max_tree_depth=5, n_temperatures=3),
        "nuts_gibbs": lambda: NUTS(n_chains=2, n_warmup=40, max_tree_depth=5, noise_update="gibbs"),
        "hmc": lambda: HMC(n_chains=2, n_warmup=60),
        "mala": lambda: MALA(n_chains=2, n_warmup=300, thin=2),
        "amcmc": lambda: AdaptiveMetropolis(n_chains=2, n_warmup=1000),
        "smc": lambda: SMC(n_mcmc_steps=2),
        "ensemble": lambda: DeepEnsemble(max_iter=200),
        "ensemble_hom": lambda: DeepEnsemble(max_iter=200, heteroscedastic=False),
        "rms": lambda: RandomizedMAP(max_iter=200),
        "swag": lambda: SWAG(swa_epochs=10, rank=5),
        "laplace": lambda: Laplace(),
        "laplace_diag": lambda: Laplace(hessian="diag"),
        "vi": lambda: VariationalInference(max_iter=300, learning_rate_init=0.01),
        "lbbnn": lambda: LBBNN(max_iter=300, learning_rate_init=0.01),
    }
    for name, make in methods.items():
        yield name, "regressor", dict(method=make())
        if name in ("nuts", "smc", "ensemble", "laplace", "vi", "lbbnn", "mala", "swag", "rms"):
            yield name, "classifier", dict(method=make())
            yield name, "multiclass", dict(method=make())
    yield (
        "nuts",
        "regressor_tanh_hier",
        dict(method=methods["nuts"](), activation="tanh", prior=HierarchicalPrior()),
    )
    yield "hmc", "regressor_logistic", dict(method=methods["hmc"](), prior=LogisticPrior())
    yield "vi", "regressor_mixture", dict(method=methods["vi"](), prior=ScaleMixturePrior())
    yield "laplace", "regressor_2out", dict(method=methods["laplace"]())
    yield "smc", "regressor_weights", dict(method=methods["smc"]())
    yield "nuts", "regressor_fixed_noise", dict(method=methods["nuts"](), noise_std=0.5)


def _data(kind: str):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    f = np.tanh(X[:, 0]) + 0.5 * X[:, 1]
    if kind == "classifier":
        return X, (f > 0).astype(int)
    if kind == "multiclass":
        return X, np.digitize(f, [-0.5, 0.5])
    y = 10.0 + 3.0 * f + 0.3 * rng.standard_normal(60)
    if kind.endswith("2out"):
        return X, np.column_stack([y, -2.0 * y + rng.standard_normal(60)])
    return X, y


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="write the JSON lines to this file too")
    parser.add_argument("--against", default=None, help="compare with this file's lines")
    parser.add_argument("--only", nargs="+", default=None, help="these method names only")
    args = parser.parse_args(argv)

    from skbnn import BayesianMLPClassifier, BayesianMLPRegressor

    warnings.simplefilter("ignore")
    lines = []
    for name, kind, params in _cases():
        if args.only and name not in args.only:
            continue
        X, y = _data(kind)
        is_clf = kind in ("classifier", "multiclass")
        cls = BayesianMLPClassifier if is_clf else BayesianMLPRegressor
        est = cls(hidden_layer_sizes=(4,), n_samples=20, random_state=3, **params)
        fit_params = {}
        if kind.endswith("weights"):
            fit_params["sample_weight"] = np.linspace(0.5, 2.0, len(y))
        est.fit(X, y, **fit_params)
        if is_clf:
            out = (est.predict_proba(X),)
        else:
            mean, std = est.predict(X, return_std=True)
            out = (mean, std, est.sample_y(X[:5], n_samples=3, random_state=1))
        posterior = est.posterior_
        draws = getattr(posterior, "thetas", None)
        line = {
            "case": f"{name}/{kind}",
            "predictions": _digest(*out),
            "draws": None if draws is None else _digest(draws),
        }
        lines.append(line)
        print(json.dumps(line), flush=True)

    if args.out:
        with open(args.out, "w") as fh:
            fh.writelines(json.dumps(line) + "\n" for line in lines)
    if args.against:
        with open(args.against) as fh:
            old = {d["case"]: d for d in map(json.loads, fh)}
        differ = [
            line["case"]
            for line in lines
            if line["case"] in old
            and (line["predictions"], line["draws"])
            != (old[line["case"]]["predictions"], old[line["case"]]["draws"])
        ]
        missing = sorted(set(old) - {line["case"] for line in lines})
        print(json.dumps({"compared": len(lines), "differ": differ, "missing": missing}))
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
