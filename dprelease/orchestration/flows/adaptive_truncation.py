"""The adaptive-truncation flow (docs/adaptive-truncation.md section 6.3): a DP posterior of
one column's normal model (`dprelease.release.truncation`), each step a Prefect task."""

from __future__ import annotations

from prefect import flow

from dprelease.config import TruncationConfig
from dprelease.orchestration.tasks import ends_cleanly
from dprelease.orchestration.tasks.release import release
from dprelease.release.truncation import TRUNCATION_PIPELINE


@flow(name="adaptive-truncation", persist_result=False, log_prints=False)
@ends_cleanly
def adaptive_truncation_flow(
    input_path: str,
    schema_path: str,
    config: TruncationConfig,
    out_dir: str = "releases",
    ledger_url: str | None = None,
) -> str:
    """Publish one adaptive-truncation release; return its directory."""
    return release(TRUNCATION_PIPELINE, input_path, schema_path, config, out_dir, ledger_url)
