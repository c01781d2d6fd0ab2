"""What compiling the numba kernels costs: per method, cold (a new install) and warm.

Every fit runs in a fresh Python process whose ``NUMBA_CACHE_DIR`` is a new empty temporary
folder, which is what a new install pays: numba then reads and writes its cache there only,
never beside the package, and ``skbnn.kernels`` stamps that folder with the hash of the
kernel sources (``skbnn/kernels/__init__.py``). A second process on the same, now filled,
folder is the warm run. Runs, one process at a time:

* ``cold`` / ``warm``: each method (``--methods``) for the regressor and the classifier
  (``--estimators``). NUTS fits the quickstart's data with the estimators' defaults (the
  regressor on diabetes exactly as ``examples/quickstart.py``, the classifier on wine,
  standardized); the other methods small settings (``SETTINGS``), since compilation does not
  depend on them.
* ``after_nuts``: the first use of each further method (and of the classifier) in a new
  process whose cache holds what the NUTS regressor's cold run compiled: what a user pays
  for ``method="hmc"`` after running the quickstart.
* ``same_process``: one process, empty cache, fits the regressor with every method in
  ``--methods`` order; each fit's ``compile_time`` is then what that method adds to the
  ones before it in a live session.
* ``quickstart``: ``python examples/quickstart.py`` cold and warm (its printed fit and
  compile times, and the process's wall time).

Each run prints a JSON line: ``process_s`` (the whole process, interpreter start included),
``import_s`` (importing skbnn and scikit-learn), ``fit_s`` and ``predict_s`` (wall times of
the calls, so they include compiling), ``compile_time_s`` (``diagnostics_["compile_time"]``:
the wall seconds the fit spent compiling or loading its sampler or training kernels),
``compile_cpu_s`` (the CPU seconds of the thread that did it), the CPU seconds of the fit,
the prediction and the process (``*_cpu_s``), and the 1-minute load average before the run.
Then one summary line per method and estimator. numba compiles on one thread, so on an
idle machine ``compile_time_s`` equals ``compile_cpu_s``. On a loaded one both grow, the
wall time most (at a load of 4.5 on 2 cores one run took 34 s wall and 18 s CPU for what
took 11.5 s of each at a load of 2.4). Run nothing else meanwhile::

    python benchmarks/compile_time.py --out        # appends to results/compile_time.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _uci import machine  # noqa: E402

METHOD_NAMES = (
    "nuts",
    "hmc",
    "mala",
    "amcmc",
    "smc",
    "ensemble",
    "rms",
    "swag",
    "laplace",
    "vi",
    "lbbnn",
)
ESTIMATORS = ("regressor", "classifier")
OUT = HERE / "results" / "compile_time.jsonl"

# Small settings: compilation is the same whatever the iteration counts, so each fit beyond
# compiling takes a second or two. NUTS keeps its defaults (the quickstart's fit).
SETTINGS = {
    "nuts": ({}, None),
    "hmc": ({"n_chains": 2, "n_warmup": 100}, 100),
    "mala": ({"n_chains": 2, "n_warmup": 200}, 200),
    "amcmc": ({"n_chains": 2, "n_warmup": 1000}, 200),
    "smc": ({}, 100),
    "ensemble": ({}, None),
    "rms": ({}, None),
    "swag": ({"swa_epochs": 5}, 20),
    "laplace": ({}, None),
    "vi": ({"max_iter": 20}, None),
    "lbbnn": ({"max_iter": 20}, None),
}


_COMPILE_CPU = [0.0]


def _count_compile_cpu() -> None:
    """Wrap skbnn's ``compile_once`` (once per process) to add up the CPU seconds of the
    compiling thread in ``_COMPILE_CPU``."""
    import importlib

    import skbnn.methods  # noqa: F401  (imports every module that compiles)

    # its home since compilation has one module; skbnn.utils before
    original = None
    for home in ("skbnn.kernels._compile", "skbnn.utils"):
        try:
            original = getattr(importlib.import_module(home), "compile_once", None)
        except ImportError:
            continue
        if original is not None:
            break
    if original is None:  # an older or newer skbnn: no CPU figure, the rest still runs
        _COMPILE_CPU[0] = float("nan")
        return

    def timed(kernels, warm, *args, **kwargs):
        t0 = time.thread_time()
        try:
            return original(kernels, warm, *args, **kwargs)
        finally:
            _COMPILE_CPU[0] += time.thread_time() - t0

    # every module that compiles through it, by the name it imported
    for name, module in list(sys.modules.items()):
        if name.startswith("skbnn.") and getattr(module, "compile_once", None) is original:
            module.compile_once = timed


def _rounded(x: float) -> float | None:
    return None if x != x else round(x, 2)


def _fit_in_this_process(method: str, estimator: str, t_start: float) -> dict:
    """Fit one estimator with one method here; the figures of the fit."""
    import warnings

    from sklearn.datasets import load_diabetes, load_wine
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    import skbnn
    from skbnn.methods import METHODS

    import_s = time.perf_counter() - t_start
    compile_cpu_before = _COMPILE_CPU[0]
    knobs, n_samples = SETTINGS[method]
    method_obj = METHODS[method](**knobs)
    if estimator == "regressor":
        X, y = load_diabetes(return_X_y=True)
        model = skbnn.BayesianMLPRegressor(
            method=method_obj, n_samples=n_samples, random_state=0, n_jobs=-1
        )
    else:
        X, y = load_wine(return_X_y=True)
        model = skbnn.BayesianMLPClassifier(
            method=method_obj, n_samples=n_samples, random_state=0, n_jobs=-1
        )
    # the quickstart's split and pipeline
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    pipe = make_pipeline(StandardScaler(), model)
    with warnings.catch_warnings():
        # short runs may not converge; only their time matters here
        warnings.simplefilter("ignore")
        t0, c0 = time.perf_counter(), time.process_time()
        pipe.fit(X_train, y_train)
        fit_s, fit_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        if estimator == "regressor":
            pipe.predict(X_test, return_std=True)
            pipe[-1].predict_interval(pipe[:-1].transform(X_test))
        else:
            pipe.predict_proba(X_test)
        predict_s, predict_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    d = pipe[-1].diagnostics_
    return {
        "method": method,
        "estimator": estimator,
        "knobs": knobs,
        "n_samples": n_samples,
        "import_s": round(import_s, 2),
        "fit_s": round(fit_s, 2),
        "fit_cpu_s": round(fit_cpu_s, 2),
        "predict_s": round(predict_s, 2),
        "predict_cpu_s": round(predict_cpu_s, 2),
        "compile_time_s": round(float(d["compile_time"]), 2),
        "compile_cpu_s": _rounded(_COMPILE_CPU[0] - compile_cpu_before),
        "wall_time_s": round(float(d["wall_time"]), 2),
    }


def _child(args) -> None:
    t_start = time.perf_counter()
    _count_compile_cpu()
    if args.child == "same_process":
        rows = []
        for method in args.methods:
            rows.append(_fit_in_this_process(method, "regressor", t_start))
            t_start = time.perf_counter()  # import_s only for the first
        print(json.dumps(rows))
    else:
        method, estimator = args.child.split(":")
        print(json.dumps(_fit_in_this_process(method, estimator, t_start)))


def _run(cmd: list[str], cache: Path, cwd: Path | None = None) -> tuple[float, float, str]:
    """Run ``cmd`` with ``cache`` as numba's cache; its wall and CPU seconds, and stdout."""
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(cache)
    # the skbnn beside this script, not whatever else is installed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    process_s = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return process_s, cpu_s, proc.stdout


def _cache_files(cache: Path) -> int:
    return sum(1 for p in cache.rglob("*") if p.suffix in (".nbi", ".nbc"))


def _fit_process(method: str, estimator: str, cache: Path) -> dict:
    load = os.getloadavg()[0]
    process_s, cpu_s, out = _run(
        [sys.executable, str(Path(__file__).resolve()), "--child", f"{method}:{estimator}"], cache
    )
    row = json.loads(out.strip().splitlines()[-1])
    return {
        **row,
        "process_s": round(process_s, 2),
        "process_cpu_s": round(cpu_s, 2),
        "loadavg_1min": round(load, 2),
    }


def _commit(*path: str) -> str | None:
    """HEAD, or the last commit that changed ``path`` (which survives rebasing the docs)."""
    cmd = ["git", "-C", str(ROOT), "log", "-1", "--format=%H", *(["--", *path] if path else [])]
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip() or None
    except OSError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=list(METHOD_NAMES), choices=METHOD_NAMES)
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=ESTIMATORS)
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["after_nuts", "same_process", "quickstart"]
    )
    parser.add_argument("--out", action="store_true", help=f"also append the lines to {OUT}")
    parser.add_argument("--note", default="", help="a note stored with every line")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return

    common = {
        "benchmark": "compile_time",
        "commit": _commit(),
        "code_commit": _commit("skbnn"),
        "machine": machine(),
        "numba_cpu_name": os.environ.get("NUMBA_CPU_NAME"),
        "note": args.note,
        "date": time.strftime("%Y-%m-%d"),
    }
    lines = []

    def emit(record: dict) -> None:
        line = json.dumps({**common, **record})
        print(line, flush=True)
        lines.append(line)

    tmp = Path(tempfile.mkdtemp(prefix="skbnn_compile_time_"))
    try:
        nuts_cache = None
        summary = {}
        for method in args.methods:
            for estimator in args.estimators:
                cache = tmp / f"{method}_{estimator}"
                cold = _fit_process(method, estimator, cache)
                cold["cache_files"] = _cache_files(cache)
                emit({"run": "cold", **cold})
                if method == "nuts" and estimator == "regressor":
                    nuts_cache = tmp / "after_nuts_base"
                    shutil.copytree(cache, nuts_cache)
                warm = _fit_process(method, estimator, cache)
                emit({"run": "warm", **warm})
                summary[method, estimator] = {"cold": cold, "warm": warm}

        if "after_nuts" not in args.skip and nuts_cache is not None:
            for method in args.methods:
                for estimator in args.estimators:
                    if (method, estimator) == ("nuts", "regressor"):
                        continue
                    cache = tmp / f"after_nuts_{method}_{estimator}"
                    shutil.copytree(nuts_cache, cache)
                    row = _fit_process(method, estimator, cache)
                    emit({"run": "after_nuts", **row})
                    summary[method, estimator]["after_nuts"] = row

        if "same_process" not in args.skip:
            cache = tmp / "same_process"
            load = os.getloadavg()[0]
            script = str(Path(__file__).resolve())
            process_s, cpu_s, out = _run(
                [sys.executable, script, "--child", "same_process", "--methods", *args.methods],
                cache,
            )
            rows = json.loads(out.strip().splitlines()[-1])
            for i, row in enumerate(rows):
                emit({"run": "same_process", "order": i, **row, "loadavg_1min": round(load, 2)})
            emit(
                {
                    "run": "same_process_total",
                    "process_s": round(process_s, 2),
                    "process_cpu_s": round(cpu_s, 2),
                }
            )

        if "quickstart" not in args.skip:
            cache = tmp / "quickstart"
            work = tmp / "quickstart_cwd"  # it saves quickstart.png in its working folder
            work.mkdir()
            for run in ("cold", "warm"):
                load = os.getloadavg()[0]
                process_s, cpu_s, out = _run(
                    [sys.executable, str(ROOT / "examples" / "quickstart.py")], cache, cwd=work
                )
                m = re.search(r"fit time\s+([\d.]+) s \(of which compiling ([\d.]+) s\)", out)
                emit(
                    {
                        "run": f"quickstart_{run}",
                        "command": "python examples/quickstart.py",
                        "process_s": round(process_s, 2),
                        "process_cpu_s": round(cpu_s, 2),
                        "fit_s": float(m.group(1)) if m else None,
                        "compile_time_s": float(m.group(2)) if m else None,
                        "loadavg_1min": round(load, 2),
                    }
                )

        for (method, estimator), runs in summary.items():
            cold, warm = runs["cold"], runs["warm"]
            after = runs.get("after_nuts")
            emit(
                {
                    "run": "summary",
                    "method": method,
                    "estimator": estimator,
                    "cold_fit_s": cold["fit_s"],
                    "cold_compile_time_s": cold["compile_time_s"],
                    "cold_compile_cpu_s": cold["compile_cpu_s"],
                    "cold_process_s": cold["process_s"],
                    "warm_fit_s": warm["fit_s"],
                    "warm_process_s": warm["process_s"],
                    "after_nuts_fit_s": after["fit_s"] if after else None,
                    "after_nuts_compile_time_s": after["compile_time_s"] if after else None,
                    "after_nuts_compile_cpu_s": after["compile_cpu_s"] if after else None,
                    "after_nuts_process_s": after["process_s"] if after else None,
                }
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    if args.out:
        OUT.parent.mkdir(exist_ok=True)
        with open(OUT, "a") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
