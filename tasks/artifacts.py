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
  admit a release), each number rounded for people (`report.common.human`, 4 digits).
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from dprelease.privacy.ledger import Ledger
from dprelease.release.files import MANIFEST_FILE
from dprelease.release.report.common import human
from dprelease.release.writer import artifact_markdown
from tasks import NO_PERSISTENCE

DIGITS = 4


@task(name="publish-artifacts", **NO_PERSISTENCE)
def publish_artifacts(release_dir: str, ledger_url: str) -> None:
    """A markdown artifact (the report, figures embedded) and a table artifact (ledger
    totals); see the module docstring."""
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
        f"cap is enforced by the {summary['accountant']} accountant",
    )


def ledger_totals(summary: dict) -> list[dict[str, str]]:
    """One row per accountant of `Ledger.summary(...)`: the enforcing one first."""
    cap = summary["cap"]
    rows = []
    for name, pair in summary["by_accountant"].items():
        spent, remaining = pair["spent"], pair["remaining"]
        enforces = name == summary["accountant"]
        rows.append(
            {
                "accountant": name,
                "role": "enforces the cap" if enforces else "sum of the entries",
                "spent epsilon": human(spent["epsilon"], DIGITS),
                "spent delta": human(spent["delta"], DIGITS),
                "remaining epsilon": human(remaining["epsilon"], DIGITS),
                "remaining delta": "at the cap's delta"
                if remaining["delta"] is None
                else human(remaining["delta"], DIGITS),
                "cap epsilon": human(cap["epsilon"], DIGITS),
                "cap delta": human(cap["delta"], DIGITS),
            }
        )
    for name, reported in summary["reported"].items():
        rows.append(
            {
                "accountant": name,
                "role": f"reported only ({reported['valid_for']})",
                "spent epsilon": human(reported["spent"]["epsilon"], DIGITS),
                "spent delta": human(reported["spent"]["delta"], DIGITS),
                "remaining epsilon": "",
                "remaining delta": "",
                "cap epsilon": human(cap["epsilon"], DIGITS),
                "cap delta": human(cap["delta"], DIGITS),
            }
        )
    return rows
