"""Markdown tables for ``doc/benchmarks.md`` from the JSON lines of ``uci.py`` and
``compare_nuts.py``.

UCI: per dataset and method, test RMSE and test log-likelihood (mean +- standard error over
splits) with the fit time, beside the published figures of ``PUBLISHED.md``. ``--methods``:
the summary lines of several methods' files side by side, one row per dataset and one column
per method. NumPyro: the summary lines of each comparison case. With ``--out FILE`` the
tables replace the text between ``<!-- report:start -->`` and ``<!-- report:end -->`` in
FILE (created if missing), so the prose around them survives a rerun. Usage::

    python benchmarks/report.py --uci benchmarks/results/uci_nuts.jsonl \\
        --methods benchmarks/results/uci_{nuts,ensemble,rms,swag,laplace}.jsonl \\
        --compare benchmarks/results/compare_nuts.jsonl --out doc/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _uci import DEFAULT_DATA_DIR  # noqa: E402

START, END = "<!-- report:start -->", "<!-- report:end -->"


def read_lines(paths: list[str]) -> list[dict]:
    records = []
    for path in paths:
        with open(path) as f:
            records.extend(json.loads(line) for line in f if line.strip())
    return records


def parse_published(path: Path) -> tuple[list[str], dict[str, list[tuple[str, str]]]]:
    """Column names and, per dataset row, ``(rmse, ll)`` strings from PUBLISHED.md's table."""
    rows = [line for line in Path(path).read_text().splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    names = [re.sub(r"\s*RMSE / LL$", "", h) for h in header[1:]]
    table = {}
    for line in rows[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[0]] = [tuple(p.strip() for p in c.split(" / ")) for c in cells[1:]]
    return names, table


def _published_row(dataset: str, table: dict) -> list[tuple[str, str]] | None:
    for name, row in table.items():
        if dataset.lower().startswith(name.lower()):
            return row
    return None


def _pm(mean: float, se: float | None, digits: int) -> str:
    return f"{mean:.{digits}f}" + (f" +- {se:.{digits}f}" if se is not None else "")


def method_label(record: dict) -> str:
    method = dict(record["method"])
    name = method.pop("name")
    args = ", ".join(f"{k}={v}" for k, v in method.items())
    extra = [f"{k}={record[k]}" for k in ("noise_std",) if k in record]
    if record.get("activation", "tanh") != "relu":
        extra.append(f"activation={record.get('activation', 'tanh')}")
    prior = record.get("prior", "default")
    if prior != "default":
        extra.append(f"prior={prior}")
    return f"{name}({args})" + (", " + ", ".join(extra) if extra else "")


def uci_tables(records: list[dict], published: Path) -> str:
    summaries = {}
    for r in records:
        if r.get("benchmark") == "uci" and r.get("summary"):
            # a rerun of the same dataset and settings replaces the earlier line
            summaries[(r["dataset"], method_label(r), tuple(r["hidden"]), r["n_samples"])] = r
    if not summaries:
        return ""
    names, table = parse_published(published)
    out = []
    for metric, col, digits in (("rmse", 0, 2), ("test_ll", 1, 2)):
        title = "Test RMSE (lower is better)" if metric == "rmse" else (
            "Test log-likelihood, nats per point (higher is better)")  # fmt: skip
        out += [f"### {title}", ""]
        head = ["dataset", "skbnn method", "hidden", "draws", "splits", "skbnn",
                "fits warned (R-hat > 1.05 or divergences)", "fit time / split"]  # fmt: skip
        out.append("| " + " | ".join(head + names) + " |")
        out.append("|" + "---|" * (len(head) + len(names)))
        for (dataset, label, hidden, n_samples), r in sorted(summaries.items()):
            pub = _published_row(dataset, table) or [("", "")] * len(names)
            splits = r["splits"]
            split_text = f"{len(splits)} ({splits[0]}-{splits[-1]})" if len(splits) > 1 else (
                str(splits[0]))  # fmt: skip
            cells = [
                dataset, f"`{label}`", "-".join(map(str, hidden)) or "none", str(n_samples),
                split_text, _pm(r[metric], r[metric + "_se"], digits),
                f"{r['n_convergence_warnings']} of {len(splits)}", f"{r['fit_time']:.1f} s",
            ]  # fmt: skip
            out.append("| " + " | ".join(cells + [p[col] for p in pub]) + " |")
        out.append("")
    warnings = {k[0]: r["n_convergence_warnings"] for k, r in summaries.items()}
    flagged = {k: v for k, v in warnings.items() if v}
    if flagged:
        out.append(
            "Fits with a `ConvergenceWarning` (R-hat > 1.05 or a divergence): "
            + ", ".join(f"{k} {v}" for k, v in sorted(flagged.items()))
            + "."
        )
        out.append("")
    out += _provenance(summaries.values())
    return "\n".join(out)


def method_tables(records: list[dict], published: Path) -> str:
    """The UCI summaries of several methods side by side: per dataset, one column per
    method with its test log-likelihood, then its RMSE and fit time per split, beside
    the published figures."""
    summaries = {}
    for r in records:
        if r.get("benchmark") == "uci" and r.get("summary"):
            # a rerun of the same dataset and settings replaces the earlier line
            summaries[(r["dataset"], method_label(r))] = r
    if not summaries:
        return ""
    labels = list(dict.fromkeys(label for _, label in summaries))
    names = [label.split("(", 1)[0] for label in labels]
    heads = [n if names.count(n) == 1 else f"{n} {names[:i + 1].count(n)}"
             for i, n in enumerate(names)]  # fmt: skip
    datasets = sorted({d for d, _ in summaries})
    pub_names, table = parse_published(published)
    out = []
    for metric, col in (("test_ll", 1), ("rmse", 0)):
        title = ("Test log-likelihood, nats per point (higher is better)" if metric == "test_ll"
                 else "Test RMSE (lower is better) / fit time per split")  # fmt: skip
        out += [f"### UCI, methods side by side: {title}", ""]
        out.append("| dataset | " + " | ".join(heads + pub_names) + " |")
        out.append("|" + "---|" * (1 + len(heads) + len(pub_names)))
        for dataset in datasets:
            cells = [dataset]
            for label in labels:
                r = summaries.get((dataset, label))
                if r is None:
                    cells.append("")
                    continue
                cell = _pm(r[metric], r[metric + "_se"], 2)
                if metric == "rmse":
                    cell += f" / {r['fit_time']:.2f} s"
                cells.append(cell)
            pub = _published_row(dataset, table) or [("", "")] * len(pub_names)
            out.append("| " + " | ".join(cells + [p[col] for p in pub]) + " |")
        out.append("")
    out.append("Columns (mean +- standard error over the splits; fits with a "
               "`ConvergenceWarning` of any kind, over all datasets):")  # fmt: skip
    out.append("")
    for head, label in zip(heads, labels, strict=True):
        rows = [r for (_, lab), r in summaries.items() if lab == label]
        n_splits = sorted({len(r["splits"]) for r in rows})
        warned = sum(r["n_convergence_warnings"] for r in rows)
        total = sum(len(r["splits"]) for r in rows)
        draws = sorted({r["n_samples"] for r in rows})
        hidden = sorted({"-".join(map(str, r["hidden"])) or "none" for r in rows})
        out.append(f"* {head}: `{label}`, hidden {', '.join(hidden)}, n_samples "
                   f"{', '.join(map(str, draws))}, {' or '.join(map(str, n_splits))} splits "
                   f"per dataset; {warned} of {total} fits warned.")  # fmt: skip
    out.append("")
    out += _provenance(summaries.values())
    return "\n".join(out)


def compare_tables(records: list[dict]) -> str:
    rows = [r for r in records if r.get("summary") and "case" in r]
    if not rows:
        return ""
    latest = {}
    for r in rows:
        latest[(r["case"], r["side"])] = r
    out = ["### skbnn vs NumPyro NUTS (same model, data, chains; split 0)", ""]
    head = ["case", "side", "cold wall", "compile (cold / warm)", "warm wall",
            "grad evals/s", "leapfrog / draw", "bulk ESS (loglik)", "ESS/s warm",
            "ESS/s cold", "ESS/s sampling only", "max R-hat", "test RMSE", "test LL"]  # fmt: skip
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    for (case, side), r in latest.items():
        if side == "skbnn / numpyro":
            cells = [case, "**ratio**", f(r["cold_wall_time"], ".2f") + "x", "",
                     f(r["warm_wall_time"], ".2f") + "x", f(r["grad_evals_per_s"], ".2f") + "x",
                     "", "", "**" + f(r["warm_ess_per_s"], ".2f") + "x**",
                     f(r["cold_ess_per_s"], ".2f") + "x", f(r["ess_per_s_sampling"], ".2f") + "x",
                     "", "", ""]  # fmt: skip
        else:
            cells = [case, side, f(r["cold_wall_time"], ".1f") + " s",
                     f(r["compile_time"], ".1f") + " / " + f(r["warm_compile_time"], ".1f") + " s",
                     f(r["warm_wall_time"], ".1f") + " s",
                     f(r["grad_evals_per_s"] / 1e3, ".1f") + "k", f(r["leapfrog_per_draw"], ".0f"),
                     f(r["ess_bulk_loglik"], ".0f"), f(r["ess_per_s"], ".2f"),
                     f(r["cold_ess_per_s"], ".2f"), f(r["ess_per_s_sampling"], ".2f"),
                     f(r["max_rhat"], ".3f"),
                     f(r["test_rmse"], ".3f"), f(r["test_ll"], ".3f")]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    settings = {}
    for (case, side), r in latest.items():
        if side == "skbnn":
            settings[case] = r
    for case, r in settings.items():
        noise = "inferred" if r["noise_std"] is None else f"fixed sd {r['noise_std']}"
        out.append(
            f"* {case}: {r['dataset']}, 1 hidden layer of {r['hidden']} ReLU units, noise "
            f"{noise}, {r['chains']} chains x ({r['warmup']} warm-up + {r['draws']} draws), "
            f"target_accept {r['target_accept']}, max_tree_depth {r['max_tree_depth']}; "
            f"warm figures are medians of {r['n_warm_reps']} repetitions; skbnn "
            f"{r['skbnn']}, NumPyro {r['numpyro']}, jax {r['jax']}."
        )
    out.append("")
    out += _provenance(settings.values())
    return "\n".join(out)


def _provenance(records) -> list[str]:
    records = list(records)
    machines = sorted({f"{r['cores']} cores, {r['cpu']}, Python {r['python']}" for r in records})
    commands = sorted({r["command"] for r in records})
    out = ["Machine: " + "; ".join(machines) + ". Reproduce with:", "", "```"]
    return out + commands + ["```", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uci", nargs="*", default=[], help="uci.py JSON-lines files")
    parser.add_argument(
        "--methods", nargs="*", default=[], help="uci.py files to show side by side"
    )
    parser.add_argument("--compare", nargs="*", default=[], help="compare_nuts.py files")
    parser.add_argument("--published", default=str(DEFAULT_DATA_DIR / "PUBLISHED.md"))
    parser.add_argument("--out", default=None, help="markdown file to update (default: print)")
    args = parser.parse_args()
    body = "\n".join(
        part
        for part in (
            uci_tables(read_lines(args.uci), Path(args.published)),
            method_tables(read_lines(args.methods), Path(args.published)),
            compare_tables(read_lines(args.compare)),
        )
        if part
    )
    block = f"{START}\n\n{body}\n{END}"
    if not args.out:
        print(block)
        return
    path = Path(args.out)
    text = path.read_text() if path.exists() else "# Benchmarks\n\n" + START + END + "\n"
    if START not in text or END not in text:
        text = text.rstrip("\n") + "\n\n" + START + END + "\n"
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(head + block + tail)


if __name__ == "__main__":
    main()
