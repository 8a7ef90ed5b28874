"""The parts of `report.md` every release kind shares, and rounding numbers for people.

A kind's report function (`report(directory, manifest)` of its `ReleaseBundle`) builds its
markdown from these sections plus its own, and writes it with `write_markdown`:

    lines = [
        *header_section(manifest, "Synthetic release"),
        *privacy_section(manifest),
        ...kind-specific sections...,
        *budget_section(directory, manifest),
        *verification_section(manifest),
    ]
    write_markdown(directory, lines)

Everything is read from the manifest and `ledger.parquet` of the release being written (the
writer puts the ledger there before it calls the report): public metadata and DP outputs
only, nothing computed from the real table (docs/privacy-model.md section 8).

Rounding (`human`): three significant digits; values of 1,000 and more as whole numbers with
thousands separators; values below 0.001 in short scientific notation (`1e-6`, `2.5e-7`).
The exact values stay in `manifest.json`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from dprelease.release.files import LEDGER_FILE, REPORT_FILE

BASIC = "basic"
MAX_PAST_RELEASES = 20
INVALID_ROWS_TEXT = {
    "refuse": (
        "**refuse** (the interactive default): an input table with any invalid row (a value "
        "outside the schema's categories, a missing value in a column the schema does not "
        "mark nullable, no rows at all) is refused as a whole, so that this release exists "
        "tells that every input row was valid. Scheduled releases should use `drop`."
    ),
    "drop": (
        "**drop**: invalid input rows were dropped inside the mechanism, a stable "
        "transformation (adding or removing one input row changes the cleaned table by at "
        "most one row), so whether this release exists does not depend on any one row."
    ),
}


def human(value: float, digits: int = 3) -> str:
    """A number rounded for people (see the module docstring)."""
    value = float(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "infinite" if value > 0 else "minus infinite"
    if value == 0:
        return "0"
    if abs(value) >= 10**digits:
        return f"{round(value):,}"
    if abs(value) < 1e-3:
        mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exponent)}"
    return f"{value:.{digits}g}"


def percent(share: float) -> str:
    """A share in [0, 1] as a percentage with one decimal (`37.5%`)."""
    return "n/a" if math.isnan(share) else f"{100 * share:.1f}%"


def spend_text(spend: dict) -> str:
    return f"ε = {human(spend['epsilon'])}, δ = {human(spend['delta'])}"


def accountant_name(manifest: dict) -> str:
    return str(manifest.get("accountant", BASIC))


def header_section(manifest: dict, title: str) -> list[str]:
    """Title line and provenance (release id, dataset, time, dprelease version)."""
    created = str(manifest.get("created_at", ""))[:19].replace("T", " ")
    version = manifest.get("package_versions", {}).get("dprelease", "unknown")
    return [
        f"# {title} `{manifest['release_id']}` of `{manifest['dataset']}`",
        "",
        f"Created {created} UTC with dprelease {version}. Every number in this report is "
        "computed from what the release contains (differentially private outputs and public "
        "metadata); nothing was computed from the real table.",
        "",
    ]


def privacy_section(manifest: dict) -> list[str]:
    """What this release spent (the delta actually used), under which accountant and
    neighbouring relation, the policy for invalid input rows, and the formal statement."""
    accountant = accountant_name(manifest)
    how = (
        "basic composition (epsilons add up, deltas add up)"
        if accountant == BASIC
        else f"the `{accountant}` accountant"
    )
    lines = [
        "## Privacy",
        "",
        f"- This release spent **{spend_text(manifest['release_spend'])}** (the δ actually "
        "used, whether given or the default).",
        "- Guarantee: (ε, δ)-differential privacy for adding or removing one row of the real "
        f"table ({manifest.get('neighbouring', 'add/remove-one')} neighbouring).",
        f"- The dataset's lifetime budget is composed with {how}.",
    ]
    policy = invalid_rows_policy(manifest)
    if policy in INVALID_ROWS_TEXT:
        lines.append(f"- Invalid input rows: {INVALID_ROWS_TEXT[policy]}")
    bounds = manifest.get("on_out_of_bounds")
    if bounds in ("clip", "reject"):
        lines.append(f"- Out-of-bounds numbers: {out_of_bounds_text(bounds, policy)}")
    columns = manifest.get("schema", {}).get("columns", {})
    coded = [name for name, spec in columns.items() if spec.get("values") is not None]
    if coded and manifest.get("kind", "synthetic") == "synthetic":
        names = ", ".join(f"`{name}`" for name in coded)
        lines.append(
            f"- Coded columns ({names}): the schema's codebook; a real value between two "
            "codebook values counted as the nearer one (part of the mechanism, like clipping), "
            "and every synthetic value is a codebook value."
        )
    lines += ["", "Formal statement (as recorded in `manifest.json`):", ""]
    lines += [f"> {manifest['privacy_statement']}", ""]
    return lines


def out_of_bounds_text(out_of_bounds: str, invalid_rows: str | None) -> str:
    """The out-of-bounds policy that applied, for people (never how many rows it touched)."""
    if out_of_bounds == "clip":
        return (
            "**clip**: numbers outside the schema's bounds were clipped to the nearest bound "
            "(part of the mechanism: a narrow bound cuts the tail of a column)."
        )
    if invalid_rows == "drop":
        return (
            "**reject** under `drop`: rows with a number outside the schema's bounds were "
            "dropped with the invalid rows, so whether this release exists does not depend on "
            "any one of them."
        )
    return (
        "**reject**: an input with any number outside the schema's bounds is refused, so that "
        "this release exists tells that every number was within the bounds."
    )


def invalid_rows_policy(manifest: dict) -> str | None:
    """`refuse` or `drop`: the manifest's `on_invalid_rows`, else the synthetic kind's
    `configuration.release.on_invalid_rows`; None for releases that predate the policy."""
    release = manifest.get("configuration", {}).get("release", {})
    return manifest.get("on_invalid_rows", release.get("on_invalid_rows"))


def read_ledger(directory: Path) -> list[dict]:
    """The ledger entries stored in the release (`ledger.parquet`), as plain rows."""
    import pyarrow.parquet as pq

    return pq.read_table(directory / LEDGER_FILE).to_pylist()


def budget_section(directory: Path, manifest: dict) -> list[str]:
    """The dataset's budget (cap, spent, remaining) and its releases so far, this one
    included, from the ledger entries stored in the release."""
    cap, total = manifest["cap"], manifest["dataset_total"]
    remaining = {key: max(0.0, cap[key] - total[key]) for key in ("epsilon", "delta")}
    lines = [
        "## Budget of the dataset",
        "",
        "| | ε | δ |",
        "| --- | --- | --- |",
        f"| lifetime cap | {human(cap['epsilon'])} | {human(cap['delta'])} |",
        f"| spent so far, this release included | {human(total['epsilon'])} "
        f"| {human(total['delta'])} |",
        f"| remaining (basic composition) | {human(remaining['epsilon'])} "
        f"| {human(remaining['delta'])} |",
    ]
    tight = manifest.get("accountant_total")
    if accountant_name(manifest) != BASIC and isinstance(tight, dict):
        name = accountant_name(manifest)
        left = human(max(0.0, cap["epsilon"] - tight["epsilon"]))
        lines += [
            f"| spent under the `{name}` accountant | {human(tight['epsilon'])} "
            f"| {human(tight['delta'])} |",
            f"| remaining under the `{name}` accountant | {left} | at δ = {human(cap['delta'])} |",
            "",
            f"The cap is checked against the `{name}` accountant's figure. The basic rows are the "
            "entries' sum, a looser bound: under this accountant it may exceed the cap (and show "
            f"nothing remaining) without any overspend, because `{name}` composes the releases' "
            "noise more tightly than adding up their ε.",
        ]
    lines += ["", *_past_releases(read_ledger(directory), manifest["release_id"]), ""]
    return lines


def _past_releases(entries: list[dict], release_id: str) -> list[str]:
    releases: dict[str, dict] = {}
    for entry in entries:
        summary = releases.setdefault(
            entry["release_id"],
            {"date": entry["reserved_at"], "epsilon": [], "delta": [], "mechanisms": []},
        )
        summary["date"] = min(summary["date"], entry["reserved_at"])
        summary["epsilon"].append(entry["epsilon"])
        summary["delta"].append(entry["delta"])
        summary["mechanisms"].append(entry["mechanism"])
    ordered = sorted(releases.items(), key=lambda item: str(item[1]["date"]))
    if len(ordered) == 1:
        intro = "This is the first release of this dataset in its ledger."
    else:
        intro = f"The dataset has {len(ordered)} releases in its ledger, this one included"
        if len(ordered) > MAX_PAST_RELEASES:
            intro += f"; the {MAX_PAST_RELEASES} most recent (all are in `{LEDGER_FILE}`)"
            ordered = ordered[-MAX_PAST_RELEASES:]
        intro += ":"
    lines = [
        intro,
        "",
        "| release | date (UTC) | ε | δ | mechanisms |",
        "| --- | --- | --- | --- | --- |",
    ]
    for rid, summary in ordered:
        name = f"`{rid}`" + (" (this release)" if rid == release_id else "")
        mechanisms = ", ".join(dict.fromkeys(summary["mechanisms"]))
        lines.append(
            f"| {name} | {str(summary['date'])[:10]} | {human(math.fsum(summary['epsilon']))} "
            f"| {human(math.fsum(summary['delta']))} | {mechanisms} |"
        )
    return lines


def verification_section(manifest: dict) -> list[str]:
    """How a recipient checks the release without trusting the publisher's tooling."""
    return [
        "## How to verify this release",
        "",
        "```",
        f"dprelease verify path/to/{manifest['dataset']}/{manifest['release_id']}",
        "```",
        "",
        "recomputes the sha256 of every file listed in `manifest.json`, checks that "
        "`ledger.parquet` adds up to the privacy statement and stays within the cap, and "
        "checks the data files against the public schema; it exits with 0 when everything "
        "holds. The manifest itself is not signed: compare its sha256 (printed by `dprelease "
        "verify`) with one the publisher announced through another channel.",
        "",
    ]


def opening_sections(manifest: dict, title: str, mechanism: str) -> list[str]:
    """The header, the privacy section and one line stating the kind's mechanism."""
    return [
        *header_section(manifest, title),
        *privacy_section(manifest),
        f"- Mechanism: {mechanism}.",
        "",
    ]


def closing_sections(directory: Path, manifest: dict) -> list[str]:
    """The dataset's budget and how to verify the release: the end of every report."""
    return [*budget_section(directory, manifest), *verification_section(manifest)]


def save_figure(directory: Path, name: str, figure: Any) -> None:  # a matplotlib Figure
    """Write a figure of the report as a PNG into the release directory; close it when
    pyplot manages it (a bare `matplotlib.figure.Figure` needs no closing)."""
    figure.savefig(directory / name, dpi=100)
    if figure.canvas.manager is not None:
        import matplotlib.pyplot as plt

        plt.close(figure)


def write_markdown(directory: Path, lines: list[str]) -> None:
    """Write `report.md` (one trailing newline)."""
    (directory / REPORT_FILE).write_text("\n".join(lines).rstrip("\n") + "\n")
