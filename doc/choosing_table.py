"""The cost-against-fidelity table of doc/choosing.md, rendered from the benchmark
results in ``benchmarks/results/`` so that it cannot drift from them.

``tests/test_docs.py`` fails when the table in doc/choosing.md differs from what this
renders::

    python doc/choosing_table.py           # print the table
    python doc/choosing_table.py --write   # rewrite it in doc/choosing.md, between the markers
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = Path(__file__).resolve().parent / "choosing.md"
START, END = "<!-- choosing-table:start -->", "<!-- choosing-table:end -->"

#: (results file, the method's name in the table); every file is ``benchmarks/uci.py``'s
METHODS = [
    ("uci_nuts.jsonl", "NUTS, defaults"),
    ("uci_nuts_converged600.jsonl", "NUTS, until converged (600 s cap)"),
    ("uci_ensemble.jsonl", "deep ensemble"),
    ("uci_rms.jsonl", "randomized MAP"),
    ("uci_swag.jsonl", "SWAG"),
    ("uci_laplace.jsonl", "Laplace"),
    ("uci_vi.jsonl", "VI"),
]
DATASETS = [
    ("bostonHousing", "Boston"),
    ("concrete", "concrete"),
    ("energy", "energy"),
    ("wine-quality-red", "wine"),
    ("yacht", "yacht"),
]
#: the splits every method ran: the comparison is on the same rows
SPLITS = range(5)


def _records(name: str) -> list[dict]:
    with open(RESULTS / name) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r.get("split") in SPLITS]


def _cell(rows: list[dict]) -> str:
    if not rows:
        return "not run"
    ll = np.array([r["test_ll"] for r in rows])
    se = ll.std(ddof=1) / np.sqrt(ll.size) if ll.size > 1 else None
    seconds = float(np.median([r["fit_time"] for r in rows]))
    time = f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    warned = sum(bool(r.get("convergence_warning")) for r in rows)
    text = f"{ll.mean():.2f}" + (f" +- {se:.2f}" if se is not None else "") + f", {time}"
    if ll.size < len(SPLITS):
        text += f" ({ll.size} split{'s' if ll.size > 1 else ''})"
    return text + (f", warned {warned}/{ll.size}" if warned else "")


def render() -> str:
    """The markdown table: per method and dataset, the test log-likelihood (mean +-
    standard error over splits 0-4), the median fit time and the fits that warned."""
    lines = [
        "| method | threads | " + " | ".join(label for _, label in DATASETS) + " |",
        "|---|---|" + "---|" * len(DATASETS),
    ]
    for name, label in METHODS:
        rows = _records(name)
        threads = {r["n_jobs"] for r in rows}
        threads = ", ".join("2" if t in (-1, 2) else str(t) for t in sorted(threads))
        cells = [_cell([r for r in rows if r["dataset"] == d]) for d, _ in DATASETS]
        lines.append(f"| {label} | {threads} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def current(text: str) -> str | None:
    """The table between the markers of ``text``, or None without markers."""
    m = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), text, re.S)
    return m.group(1) if m else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite doc/choosing.md's table")
    args = parser.parse_args()
    table = render()
    if not args.write:
        print(table, end="")
        return
    text = PAGE.read_text()
    if current(text) is None:
        raise SystemExit(f"{PAGE} has no {START} ... {END} markers")
    head, rest = text.split(START + "\n", 1)
    PAGE.write_text(head + START + "\n" + table + END + rest.split(END, 1)[1])


if __name__ == "__main__":
    main()
