"""What every release flow does: the kind's pipeline with each step a Prefect task, then the
Prefect artifacts of the release.

Only DP outputs and public metadata reach the artifacts and the log (docs/privacy-model.md
section 8): the release's report, the ledger totals, the release path and its privacy
statement.
"""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger

from dprelease.privacy.ledger import resolve_ledger_url
from dprelease.release.pipeline import Pipeline, publish
from tasks import prefect_step
from tasks.artifacts import publish_artifacts


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
    directory = publish(
        pipeline, schema_path, config, input_path,
        out_dir=out_dir, ledger_url=ledger, step=prefect_step,
    )  # fmt: skip
    publish_artifacts(str(directory), ledger)
    get_run_logger().info("published %s", directory)
    return str(directory)
