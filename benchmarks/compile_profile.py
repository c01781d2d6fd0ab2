"""Where a cold first fit spends its compile time: per kernel, and per compiler stage.

Runs the quickstart's fit (``BayesianMLPRegressor``, NUTS by default, on diabetes, in its Pipeline,
then ``predict(return_std=True)`` and ``predict_interval``) in a fresh process on an empty
``NUMBA_CACHE_DIR``, as a new install does, and prints JSON lines:

* one ``"stage"`` line per compiler stage, exclusive seconds (a stage's time excludes the
  nested compilations it triggers): numba's Python front end (``typing``, ``lowering``,
  ``other_passes``: bytecode analysis, rewrites, inlining, wrappers) and LLVM
  (``llvm_function_opt`` when a function's IR is added, ``llvm_module_opt`` and
  ``llvm_codegen`` when a library is finalized, ``ir_parse``), plus the cache's saves;
* one ``"kernel"`` line per compiled function with its exclusive seconds (``self_s``), the
  number of signatures compiled and the library finalization seconds spent on it;
* one ``"helper"`` line per kernel that the fit's helper process compiled
  (``skbnn.kernels._compile.compile_aside``): when it was in the cache (``done_s``,
  seconds since the fit began) and how long the fit's process then waited for it
  (``waited_s``), so that a kernel moved to the helper can be judged by whether the
  helper, not the fit, became the longer side;
* a ``"summary"`` line: fit, predict and ``diagnostics_["compile_time"]`` wall seconds,
  the main thread's CPU seconds during the fit (it does the compiling), and the seconds
  the fit waited for its helper.

numba compiles every ``@njit`` function a kernel calls as a library of its own, and
finalizes it (module optimization and machine code) before linking it into the caller,
which optimizes and emits it again: a function's ``llvm_*`` seconds grow with the depth of
the call tree below it. The stage times hook numba's internal classes
(``numba.core.codegen``, ``typed_passes``); on a numba without them only the kernel lines
(numba's public ``numba:compile`` events) are printed. Run nothing else meanwhile::

    python benchmarks/compile_profile.py            # about a minute
    python benchmarks/compile_profile.py --top 15
    python benchmarks/compile_profile.py --activation relu   # the ReLU fits' kernels
    python benchmarks/compile_profile.py --method vi         # another method's
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict


def _profile(top: int, activation: str, method: str) -> None:
    from numba.core import event

    stage_s: dict[str, float] = defaultdict(float)
    kernel_self: dict[str, float] = defaultdict(float)
    kernel_count: dict[str, int] = defaultdict(int)
    library_s: dict[str, float] = defaultdict(float)
    local = threading.local()

    def stack() -> list:
        if not hasattr(local, "stack"):
            local.stack = []
        return local.stack

    class Compiles(event.Listener):
        # numba:compile events nest (a caller's compile triggers its callees'); exclusive
        # time is the event's span minus its children's
        def on_start(self, ev):
            stack().append([time.perf_counter(), 0.0])

        def on_end(self, ev):
            start, children = stack().pop()
            span = time.perf_counter() - start
            if stack():
                stack()[-1][1] += span
            func = ev.data["dispatcher"].py_func
            name = f"{func.__module__}.{func.__qualname__}"
            kernel_self[name] += span - children
            kernel_count[name] += 1

    event.register("numba:compile", Compiles())

    timers = threading.local()

    def timed(cls, attr, stage, per_library=False):
        original = getattr(cls, attr)

        def wrapper(*args, **kwargs):
            frames = timers.__dict__.setdefault("frames", [])
            start = time.perf_counter()
            frames.append(0.0)
            try:
                return original(*args, **kwargs)
            finally:
                span = time.perf_counter() - start
                own = span - frames.pop()
                if frames:
                    frames[-1] += span
                stage_s[stage] += own
                if per_library:
                    library_s[getattr(args[0], "name", "?")] += own

        setattr(cls, attr, wrapper)

    try:
        from numba.core import caching, codegen, compiler, typed_passes

        timed(codegen.JITCodeLibrary, "_finalize_specific", "llvm_codegen", True)
        timed(codegen.CPUCodeLibrary, "_optimize_final_module", "llvm_module_opt", True)
        timed(codegen.CPUCodeLibrary, "_optimize_functions", "llvm_function_opt")
        timed(codegen.CPUCodeLibrary, "add_ir_module", "ir_parse")
        timed(typed_passes.NopythonTypeInference, "run_pass", "typing")
        timed(typed_passes.NativeLowering, "run_pass", "lowering")
        timed(caching.Cache, "save_overload", "cache_save")
        timed(caching.Cache, "load_overload", "cache_load")
        timed(compiler.CompilerBase, "_compile_bytecode", "other_passes")
    except (ImportError, AttributeError):  # another numba's internals: kernel lines only
        stage_s.clear()

    helper_done, waited = _time_the_helper()

    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skbnn import BayesianMLPRegressor

    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.25, random_state=0)
    model = make_pipeline(
        StandardScaler(),
        BayesianMLPRegressor(activation=activation, method=method, random_state=0, n_jobs=-1),
    )
    began = time.time()
    wall, cpu = time.perf_counter(), time.thread_time()
    model.fit(X_train, y_train)
    fit_s, fit_cpu_s = time.perf_counter() - wall, time.thread_time() - cpu
    wall = time.perf_counter()
    model.predict(X_test, return_std=True)
    model[-1].predict_interval(model[:-1].transform(X_test), coverage=0.9)
    predict_s = time.perf_counter() - wall

    for stage, seconds in sorted(stage_s.items(), key=lambda kv: -kv[1]):
        print(json.dumps({"stage": stage, "seconds": round(seconds, 2)}))
    ranked = sorted(kernel_self.items(), key=lambda kv: -kv[1])
    for name, seconds in ranked[:top]:
        print(
            json.dumps(
                {
                    "kernel": name,
                    "self_s": round(seconds, 2),
                    "signatures": kernel_count[name],
                    "library_finalize_s": round(library_s.get(name.rsplit(".", 1)[-1], 0.0), 2),
                }
            )
        )
    for job, (name, done) in enumerate(helper_done()):
        print(json.dumps({"helper": name, "done_s": round(done - began, 2),
                          "waited_s": round(waited[job], 2)}))  # fmt: skip
    print(
        json.dumps(
            {
                "summary": True,
                "waited_for_helper_s": round(sum(waited.values()), 2),
                "fit_s": round(fit_s, 2),
                "fit_main_thread_cpu_s": round(fit_cpu_s, 2),
                "compile_time_s": round(model[-1].diagnostics_["compile_time"], 2),
                "predict_s": round(predict_s, 2),
                "functions_compiled": int(sum(kernel_count.values())),
                "kernel_self_total_s": round(sum(kernel_self.values()), 2),
            }
        )
    )


def _time_the_helper():
    """Have the fit's helper process record when each of its kernels is in the cache, and
    time the fit's waits for them: ``(done, waited)``, ``done()`` the helper's ``(kernel,
    wall-clock time)`` pairs in its order and ``waited`` the seconds the fit waited for
    each (by its place in that order)."""
    from skbnn.kernels import _compile

    log = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False).name
    marker = "    print('cached', flush=True)\n"
    if marker not in _compile._COMPILE_ASIDE:  # another helper script: no helper lines
        return (lambda: []), defaultdict(float)
    # the helper's script, with a line per kernel appended to the log once it is cached
    record = (
        f"    with open({log!r}, 'a') as log:\n"
        "        name = source[1] + ('' if source[2] is None else repr(source[2]))\n"
        "        log.write(__import__('json').dumps([name, __import__('time').time()]))\n"
        "        log.write('\\n')\n"
    )
    _compile._COMPILE_ASIDE = _compile._COMPILE_ASIDE.replace(marker, record + marker)
    waited: dict[int, float] = defaultdict(float)
    wait_for = _compile._Helper.wait_for

    def timed_wait(self, job):
        start = time.perf_counter()
        try:
            return wait_for(self, job)
        finally:
            waited[job] += time.perf_counter() - start

    _compile._Helper.wait_for = timed_wait

    def done():
        with open(log) as f:
            return [tuple(json.loads(line)) for line in f]

    return done, waited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=25, help="kernel lines to print")
    parser.add_argument(
        "--activation",
        default="tanh",
        help="the fit's activation: tanh (the quickstart's), or relu, whose NUTS chains "
        "also compile the units' scale moves",
    )
    parser.add_argument(
        "--method", default="auto", help="the fit's method=: auto (NUTS here) or any name"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _profile(args.top, args.activation, args.method)
        return
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        cmd = [sys.executable, __file__, "--child", "--top", str(args.top)]
        cmd += ["--activation", args.activation, "--method", args.method]
        subprocess.run(cmd, env=env, check=True)


if __name__ == "__main__":
    main()
