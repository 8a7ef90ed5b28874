"""The Prefect artifacts of a release, shared by every release flow.

Only DP outputs and public metadata reach here; the artifacts hold the release's report and
the ledger totals, never anything computed on the real table (docs/privacy-model.md
section 8). Each artifact has a description (the Prefect UI lists artifacts by it):

- `release-report-<dataset>`: the release's report.md with its figures embedded and the
  release's real directory in place of the report's `path/to/<dataset>/<release_id>`
  (the published report keeps the placeholder: a recipient's copy lives elsewhere);
- `ledger-totals-<dataset>`: the dataset's spend and what remains under the accountant that
  enforces the cap (`Ledger.summary`'s `by_accountant`: the Rényi filter for rdp datasets),
  under basic composition beside it, and the PLD figure where one is reported (never used to
  admit a release; the description says what it is valid for), each number rounded for
  people (`report.common.human`, 4 digits), in four columns narrow enough for the UI
  (`ledger_totals`);
- `expectations-<dataset>` (a synthetic release checked by Great Expectations,
  `release.synthetic.expectations`): one row per expectation of the public schema's suite,
  the failed ones first (the description names them too), with its result on the synthetic
  table, the rule and what GX observed
  (`expectation_rows`, from `expectations.json`). It is a DP output checked against public
  rules, so it may be published; the description says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from dprelease.orchestration.tasks import NO_PERSISTENCE
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.release.files import EXPECTATIONS_FILE, EXPECTATIONS_KEY, MANIFEST_FILE
from dprelease.release.report.common import human
from dprelease.release.writer import artifact_markdown

DIGITS = 4


@task(name="publish-artifacts", **NO_PERSISTENCE)
def publish_artifacts(release_dir: str, ledger_url: str) -> None:
    """A markdown artifact (the report, figures embedded), a table artifact (ledger totals)
    and, for a release checked by Great Expectations, a table artifact of its expectations;
    see the module docstring."""
    directory = Path(release_dir).resolve()
    manifest = json.loads((directory / MANIFEST_FILE).read_text())
    dataset, release_id = manifest["dataset"], manifest["release_id"]
    key = "".join(c if c.isalnum() else "-" for c in dataset.lower())
    report = artifact_markdown(directory).replace(
        f"path/to/{dataset}/{release_id}", directory.as_posix()
    )
    create_markdown_artifact(
        markdown=report,
        key=f"release-report-{key}",
        description=f"Report of release {release_id} of dataset {dataset!r}, published in "
        f"{directory}",
    )
    with Ledger(ledger_url) as ledger:
        summary = ledger.summary(dataset)
    create_table_artifact(
        table=ledger_totals(summary),
        key=f"ledger-totals-{key}",
        description=f"Privacy budget of dataset {dataset!r} after release {release_id}: the "
        f"cap is enforced by the {summary['accountant']} accountant"
        + "".join(
            f"; {name} is reported only, {figure['valid_for']}"
            for name, figure in summary["reported"].items()
        ),
    )
    checked = manifest.get(EXPECTATIONS_KEY) or {}
    if checked.get("checked"):
        record = json.loads((directory / EXPECTATIONS_FILE).read_text())
        failed = "; ".join(
            f"{outcome['column'] or '(table)'}: {outcome['rule']}" for outcome in checked["failed"]
        )
        verdict = (
            "every expectation holds"
            if checked["success"]
            else f"{checked['held']} of {checked['expectations']} expectations hold; "
            f"failed (listed first below): {failed}"
        )
        create_table_artifact(
            table=expectation_rows(record),
            key=f"expectations-{key}",
            description=f"Great Expectations {checked['great_expectations_version']} on the "
            f"synthetic table of release {release_id} of dataset {dataset!r}, against the "
            f"suite {checked['suite']!r} derived from the public schema: {verdict}. A DP "
            "output checked against public rules: this result may be published.",
        )


def expectation_rows(record: dict) -> list[dict[str, str]]:
    """One row per expectation of `expectations.json`, in the suite's order: its result (ok
    or FAILED), the column, the rule, what GX observed and GX's name of the expectation (last:
    the UI cuts a wide table on the right), the failed ones first (the UI may show a page
    of rows at a time)."""
    outcomes = sorted(record["outcomes"], key=lambda outcome: outcome["success"])
    return [
        {
            "result": "ok" if outcome["success"] else "FAILED",
            "column": outcome["column"] or "(table)",
            "rule": outcome["rule"],
            "observed": outcome["observed"],
            "expectation": outcome["expectation"],
        }
        for outcome in outcomes
    ]


def ledger_totals(summary: dict) -> list[dict[str, str]]:
    """One row per accountant of `Ledger.summary(...)`, the enforcing one first, in four
    short columns (the Prefect UI cuts a table at 1,400 px): the accountant and its role,
    then spent, remaining and the cap, each as one "ε ..., δ ..." cell."""
    cap = summary["cap"]
    rows = []
    for name, pair in summary["by_accountant"].items():
        spent, remaining = pair["spent"], pair["remaining"]
        role = "enforces the cap" if name == summary["accountant"] else "sum of the entries"
        rows.append(_totals_row(f"{name} ({role})", spent, remaining, cap))
    for name, reported in summary["reported"].items():
        rows.append(_totals_row(f"{name} (reported only)", reported["spent"], None, cap))
    return rows


def _totals_row(accountant: str, spent: dict, remaining: dict | None, cap: dict) -> dict:
    """A row of `ledger_totals`: no remaining budget for a figure that is reported only; the
    remaining epsilon "at the cap's δ" where the accountant spends the cap's delta whole."""
    if remaining is None:
        left = "not used to admit releases"
    elif remaining["delta"] is None:
        left = f"ε {human(remaining['epsilon'], DIGITS)} at the cap's δ"
    else:
        left = _pair(remaining)
    return {"accountant": accountant, "spent": _pair(spent), "remaining": left, "cap": _pair(cap)}


def _pair(pair: dict) -> str:
    """An (epsilon, delta) pair in one cell, rounded for people: `ε 1.234, δ 1e-6`."""
    return f"ε {human(pair['epsilon'], DIGITS)}, δ {human(pair['delta'], DIGITS)}"
