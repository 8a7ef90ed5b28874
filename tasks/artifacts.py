"""Prefect tasks that publish a release, shared by every release flow.

Only DP outputs and public metadata reach here; the artifacts hold the release's report and
the ledger totals, never anything computed on the real table (PRIVACY_MODEL.md section 8).
"""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from dprelease.privacy.ledger import Ledger
from dprelease.release import ReleaseBundle, artifact_markdown
from dprelease.release import write_release as write_release_dir
from tasks import NO_PERSISTENCE


@task(name="write-release", **NO_PERSISTENCE)
def write_release(bundle: ReleaseBundle, out_dir: str) -> str:
    """Write the release directory atomically; return its path."""
    return str(write_release_dir(bundle, out_dir))


@task(name="publish-artifacts", **NO_PERSISTENCE)
def publish_artifacts(release_dir: str, dataset: str, ledger_url: str) -> None:
    """A markdown artifact (the report, figures embedded) and a table artifact (ledger
    totals)."""
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
