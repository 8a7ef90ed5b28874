"""The "Great Expectations" section of a synthetic release's report.

Read from the manifest's `expectations` entry (`release.synthetic.expectations`): whether
Great Expectations validated the synthetic table against the public schema's suite, how many
expectations held, and each one that failed with its rule and what GX observed (synthetic
values: a DP output). When the check did not run, the section says why and how to get it.
"""

from __future__ import annotations

from dprelease.release.files import EXPECTATIONS_FILE, EXPECTATIONS_KEY, SYNTHETIC_FILE

PUBLISHABLE = (
    "The suite is derived from the public schema and the rows checked are the synthetic rows "
    "(a DP output), so the suite and its results may be published; never publish results of "
    "the suite on the real table."
)


def expectations_section(manifest: dict) -> list[str]:
    """The section (none when the manifest has no `expectations` entry)."""
    entry = manifest.get(EXPECTATIONS_KEY)
    if entry is None:
        return []
    lines = ["## Great Expectations", ""]
    if not entry["checked"]:
        return lines + [
            f"Not checked: {entry['reason']}. With the gx extra, every release validates its "
            "synthetic table against the public schema's Expectation Suite; `dprelease verify "
            "--expectations` runs it on this release.",
            "",
        ]
    held, total = entry["held"], entry["expectations"]
    verdict = "every expectation holds" if entry["success"] else f"{held} of {total} hold"
    lines += [
        f"Great Expectations {entry['great_expectations_version']} validated "
        f"`{SYNTHETIC_FILE}` (the schema's columns) against the suite `{entry['suite']}`, "
        f"derived from the public schema: **{verdict}** ({total} expectations).",
        "",
    ]
    if entry["failed"]:
        lines += ["| expectation | column | rule | observed |", "| --- | --- | --- | --- |"]
        lines += [
            f"| `{row['expectation']}` | {row['column'] or ''} | {_cell(row['rule'])} | "
            f"{_cell(row['observed'])} |"
            for row in entry["failed"]
        ]
        lines.append("")
    return lines + [
        f"`{EXPECTATIONS_FILE}` holds the suite and GX's full result (GX's own JSON). "
        f"{PUBLISHABLE} `dprelease verify --expectations` runs the suite again on this release.",
        "",
    ]


def _cell(text: str) -> str:
    """Text for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")
