"""Rerun the statistical tests under many seed offsets and count their failures.

Every test marked ``statistical`` adds ``SKBNN_TEST_SEED_OFFSET`` to its seeds and states a
false-alarm probability of at most ``--rate`` (1e-3 unless it says otherwise), so over
``n_tests x n_offsets`` runs the failures should be few: their expected number is at most
``rate x n_tests x n_offsets``. A test that fails more often than that has a tolerance that
does not hold, and the sweep names it.

    python benchmarks/seed_sweep.py --offsets 1-20          # the host CPU
    NUMBA_CPU_NAME=generic NUMBA_CACHE_DIR=/tmp/nb-generic python benchmarks/seed_sweep.py

Prints one JSON line per offset (its tests by file, its failures) and a summary line with
the failure count, the expected count, and the Poisson probability of seeing at least as
many failures if every test met its stated rate; ``--out FILE`` appends them to a results
file, whose last sweep ``--report FILE`` prints as doc/testing.md's table::

    python benchmarks/seed_sweep.py --offsets 1-10 --out benchmarks/results/seed_sweep.jsonl \\
        -- -n 2
    python benchmarks/seed_sweep.py --report benchmarks/results/seed_sweep.jsonl
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from scipy.stats import poisson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _uci import emitter, provenance, read_results  # noqa: E402


def _offsets(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def _run(offset: int, marker: str, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        env = {**os.environ, "SKBNN_TEST_SEED_OFFSET": str(offset)}
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-m", marker, "-q", "-p", "no:cacheprovider",
             f"--junitxml={report}", *extra],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        if not report.exists():
            raise RuntimeError(f"pytest wrote no report:\n{proc.stdout}\n{proc.stderr}")
        tests, failed, by_file = 0, [], Counter()
        for case in ET.parse(report).getroot().iter("testcase"):
            if case.find("skipped") is not None:
                continue
            tests += 1
            by_file[case.get("classname").rsplit(".", 1)[-1] + ".py"] += 1
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(f"{case.get('classname')}::{case.get('name')}")
    return {"offset": offset, "tests": tests, "failed": failed, "by_file": dict(by_file),
            "seconds": round(seconds, 1)}  # fmt: skip


def report(path) -> str:
    """doc/testing.md's table of the last sweep in a results file: per test file the
    statistical tests, their runs over the offsets and the failures, then the total with
    the failures a test meeting its rate allows."""
    lines = read_results(path)
    last = max(i for i, r in enumerate(lines) if r.get("summary"))
    first = max((i for i, r in enumerate(lines[:last]) if lines[i].get("summary")), default=-1)
    runs, summary = lines[first + 1 : last], lines[last]
    total, failed = Counter(), Counter()
    for run in runs:
        total.update(run["by_file"])
        failed.update(name.split("::")[0].rsplit(".", 1)[-1] + ".py" for name in run["failed"])
    tests = {name: max(run["by_file"].get(name, 0) for run in runs) for name in total}
    out = [f"| file | statistical tests | test runs ({len(runs)} offsets) | failures |",
           "|---|---|---|---|"]  # fmt: skip
    for name, n in total.most_common():
        out.append(f"| {name} | {tests[name]} | {n:,} | {failed[name]} |")
    out.append(f"| **all** | **{sum(tests.values())}** | **{summary['test_runs']:,}** | "
               f"**{summary['failures']}** (at most {summary['expected_at_most']} expected; "
               f"p = {summary['p_value']:.2g}) |")  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--offsets", default="1-20", help="e.g. 1-20 or 0,3,5-9")
    parser.add_argument("--marker", default="statistical")
    parser.add_argument("--rate", type=float, default=1e-3,
                        help="the false-alarm probability each test states at most")  # fmt: skip
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (e.g. a file)")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--report", default=None, help="print the table of a results file")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
    emit = emitter(args.out)
    head = provenance("seed_sweep.py", None)

    runs, failures = [], Counter()
    for offset in _offsets(args.offsets):
        run = _run(offset, args.marker, args.pytest_args)
        emit({**run, **head})
        runs.append(run)
        failures.update(run["failed"])

    n_runs = sum(r["tests"] for r in runs)
    n_failed = sum(failures.values())
    expected = args.rate * n_runs
    emit(
        {
            "summary": True,
            "offsets": len(runs),
            "test_runs": n_runs,
            "failures": n_failed,
            "expected_at_most": round(expected, 2),
            # P(N >= observed) for N ~ Poisson(expected): small means some test fails
            # more often than it says
            "p_value": float(poisson.sf(n_failed - 1, expected)) if n_failed else 1.0,
            "failures_by_test": dict(failures.most_common()),
            "seconds": round(sum(r["seconds"] for r in runs), 1),
            **head,
        }
    )


if __name__ == "__main__":
    main()
