"""The Prefect artifacts of a release, shared by every release flow.

Only DP outputs and public metadata reach here; the artifacts hold the release's report and
the ledger totals, never anything computed on the real table (docs/privacy-model.md
section 8).
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from dprelease.privacy.ledger import Ledger
from dprelease.release.files import MANIFEST_FILE
from dprelease.release.writer import artifact_markdown
from tasks import NO_PERSISTENCE


@task(name="publish-artifacts", **NO_PERSISTENCE)
def publish_artifacts(release_dir: str, ledger_url: str) -> None:
    """A markdown artifact (the report, figures embedded) and a table artifact (ledger
    totals)."""
    dataset = json.loads((Path(release_dir) / MANIFEST_FILE).read_text())["dataset"]
    key = "".join(c if c.isalnum() else "-" for c in dataset.lower())
    create_markdown_artifact(
        markdown=artifact_markdown(Path(release_dir)), key=f"release-report-{key}"
    )
    with Ledger(ledger_url) as ledger:
        summary = ledger.summary(dataset)
    create_table_artifact(
        table=[
            {"budget": name, "spent": summary["spent"][name], "cap": summary["cap"][name]}
            for name in ("epsilon", "delta")
        ],
        key=f"ledger-totals-{key}",
    )
