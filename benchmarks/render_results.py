"""The benchmarks page, docs/benchmarks.md, rendered from the fidelity study's artefacts.

`python benchmarks/render_results.py [--results benchmarks/results] [--out docs/benchmarks.md]`

Each `fidelity-e<epsilon>[-n<rows>].csv` in the results directory (one row per table, method
and seed, the metrics as columns; written by benchmarks/fidelity.py) and its `.meta.json`
(commit, date, machine, settings, seeds, tables, methods, peers) become one section: the run's
metadata, the tables, methods and seeds actually in the CSV, per table every method's mean ±
standard error over its seeds, and the default release's standing against the best peer of each
metric: the paired difference (default - peer over the seeds both have, the splits being
shared) with its standard error, "better" or "worse" when it is more than 2 SE from zero.
Standard library only: it runs without the study's dependencies.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).parent.parent
DEFAULT = "dprelease"  # the default release's method (`dprelease@<tag>` for a tagged run)
# (column, heading, lower is better) of every rendered metric.
METRICS = (
    ("tvd1", "TVD1", True),
    ("tvd2", "TVD2", True),
    ("tvd3", "TVD3", True),
    ("bmse_w", "bMSE-w", True),
    ("tstr", "TSTR", False),
    ("cpu", "CPU s", True),
    ("peak_mb", "peak MB", True),
)
INTRO = """# Benchmarks: the default release against its peers

The fidelity study (`benchmarks/fidelity.py`; its protocol is on
[Benchmark protocol](development/benchmark-protocol.md)) releases synthetic rows from the
training split of public tables with dprelease's default release and with its peers (OpenDP's
and dpmm's AIM and MST on the same public cells), and compares them with the held-out split:
TVD1/2/3 are the mean total variation distances over the 1-, 2- and 3-way marginals (lower is
better), bMSE-w the weighted beta-MSE of the table's target model (lower is better), TSTR the
held-out ROC-AUC or R^2 of a model trained on the synthetic rows (higher is better), CPU s the
release's CPU seconds and peak MB its process's peak resident memory (both depend on what
else ran on the machine at the time). `real-train` is the
training split itself (each metric's floor: sampling error only). Each cell is the mean ±
standard error over the seeds (each seed its own 80/20 split); the standing compares the default
with the best peer of each metric, paired by seed.

This page is generated from `benchmarks/results/` by `benchmarks/render_results.py`
(`make bench-fidelity` re-runs the study and renders it); it claims nothing beyond the tables,
methods and seeds listed with each run. The full tables behind the defaults' decisions are on
[Benchmark results](development/fidelity-results.md).
"""


def mean_se(values: list[float]) -> tuple[float, float]:
    """The mean and its standard error (sample SD / sqrt(n); NaN for fewer than 2 values)."""
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return statistics.fmean(values), se


def number(value: float, metric: str = "") -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:.0f}" if metric in ("cpu", "peak_mb") and abs(value) >= 10 else f"{value:.3g}"


def cell(values: list[float], metric: str) -> str:
    mean, se = mean_se(values)
    return number(mean, metric) + ("" if math.isnan(se) else f" ± {se:.2g}")


def load(path: Path) -> tuple[dict, dict[str, dict[str, dict[int, dict[str, float]]]]]:
    """The run's metadata and its rows as {table: {method: {seed: {metric: value}}}}."""
    meta = json.loads(path.with_suffix(".meta.json").read_text())
    rows: dict = defaultdict(lambda: defaultdict(dict))
    meta["roles"] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            meta["roles"][row["table"]] = row["role"]
            rows[row["table"]][row["method"]][int(row["seed"])] = {
                metric: float(row[metric]) for metric, _, _ in METRICS
            }
    return meta, rows


def standing(table: str, methods: dict, peers: list[str]) -> list[str]:
    """One line per default method and metric: the default against the best peer."""
    lines = []
    present = [m for m in peers if methods.get(m)]
    for ours in (m for m in methods if m.split("@")[0] == DEFAULT):
        for metric, heading, lower in METRICS if present else ():
            means = {m: mean_se([r[metric] for r in methods[m].values()])[0] for m in present}
            best = (min if lower else max)(means, key=means.__getitem__)
            shared = sorted(set(methods[ours]) & set(methods[best]))
            diff = [methods[ours][s][metric] - methods[best][s][metric] for s in shared]
            mean, se = mean_se(diff)
            verdict = "within 2 SE" if abs(mean) <= 2 * se else "n/a (one seed)"
            if abs(mean) > 2 * se:  # False for a NaN SE (one seed)
                verdict = "better" if (mean < 0) == lower else "worse"
            values = [cell([r[metric] for r in methods[m].values()], metric) for m in (ours, best)]
            lines.append(
                f"| {table} | {heading} | {ours} | {values[0]} | {best} | {values[1]} | "
                f"{number(mean, metric)} ± {number(se)} ({len(diff)}) | {verdict} |"
            )
    return lines


def section(path: Path) -> str:
    meta, rows = load(path)
    machine = meta["machine"]
    packages = ", ".join(f"{name} {version}" for name, version in machine["packages"].items())
    out = [
        f"## epsilon = {meta['epsilon']:g}, delta = {meta['delta']:g}, "
        f"{meta['n_synthetic']:,} synthetic rows",
        "",
        f"- Results: `benchmarks/results/{path.name}` (metadata in `{path.stem}.meta.json`)",
        f"- Commit: `{meta['commit']}`" + (" (with uncommitted changes)" if meta["dirty"] else ""),
        f"- Date (UTC): {meta['date']}",
        f"- Machine: {machine['cpu']}, {machine['cores']} cores, {machine['ram_gb']:g} GB RAM; "
        f"Python {machine['python']}; {packages}",
        f"- Seeds: {', '.join(map(str, meta['seeds']))}; tables: {', '.join(meta['tables'])}; "
        f"methods: {', '.join(meta['methods'])}",
        "",
        "Releases in the results (method: seeds); a requested release missing here failed or "
        "timed out:",
        "",
    ]
    for table, methods in rows.items():
        runs = "; ".join(f"{m}: {', '.join(map(str, sorted(s)))}" for m, s in methods.items())
        out.append(f"- {table} ({meta['roles'][table]}): {runs}")
    out += [
        "",
        "### Standing of the default against the best peer",
        "",
        "Paired difference: default - best peer, per seed, mean ± SE (seeds); the standing "
        "is better or worse when the difference is more than 2 SE from zero. With n seeds the "
        "SE has n - 1 degrees of freedom: on few seeds a standing is indicative, not a test.",
        "",
        "| table | metric | default | value | best peer | value | paired difference | standing |",
        "|---" * 8 + "|",
    ]
    for table, methods in rows.items():
        out += standing(table, methods, meta["peers"])
    for table, methods in rows.items():
        headings = " | ".join(heading for _, heading, _ in METRICS)
        out += [
            "",
            f"### {table} ({meta['roles'][table]})",
            "",
            f"| method | n | {headings} |",
            "|---" * (len(METRICS) + 2) + "|",
        ]
        for method, seeds in methods.items():
            cells = " | ".join(cell([r[m] for r in seeds.values()], m) for m, _, _ in METRICS)
            out.append(f"| {method} | {len(seeds)} | {cells} |")
    return "\n".join(out) + "\n"


def render(results: Path, out: Path) -> None:
    sections = [section(path) for path in sorted(results.glob("fidelity-*.csv"))]
    if not sections:
        sections = ["No results yet: run `make bench-fidelity`.\n"]
    out.write_text(INTRO + "\n" + "\n".join(sections))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = parser.parse_args()
    render(args.results, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
