"""What every release flow does: the kind's pipeline with each step a Prefect task, then the
Prefect artifacts of the release and, last in the run's log, where it is.

Only DP outputs and public metadata reach the artifacts and the log (docs/privacy-model.md
section 8): the release's report, the ledger totals, the release path, the ledger used
(without a password) and the release's privacy statement.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from dprelease.orchestration.tasks import prefect_step
from dprelease.orchestration.tasks.artifacts import publish_artifacts
from dprelease.privacy.ledger.location import resolve_ledger_url, shown_url
from dprelease.release.files import MANIFEST_FILE
from dprelease.release.pipeline import Pipeline, publish_release


def release(
    pipeline: Pipeline[Any, Any, Any, Any],
    input_path: str,
    schema_path: str,
    config: Any,
    out_dir: str,
    ledger_url: str | None,
) -> str:
    """Publish one release of `pipeline`'s kind; return its directory."""
    ledger = resolve_ledger_url(ledger_url)
    directory = publish_release(
        pipeline,
        schema_path,
        config,
        input_path,
        out_dir=out_dir,
        ledger_url=ledger,
        step=prefect_step,
    )
    publish_artifacts(str(directory), ledger)
    manifest = json.loads((Path(directory) / MANIFEST_FILE).read_text())
    get_run_logger().info(
        "published release %s of dataset %r\nrelease directory: %s\nledger: %s\n"
        "privacy statement: %s",
        manifest["release_id"],
        manifest["dataset"],
        Path(directory).resolve(),
        shown_url(ledger),
        manifest["privacy_statement"],
    )
    return str(directory)
