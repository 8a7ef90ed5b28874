"""The release flow: a DP synthetic release (`dprelease.release.synthetic.pipeline`), each step a
Prefect task (docs/development/architecture.md, "How a release runs")."""

from __future__ import annotations

from prefect import flow

from dprelease.config import SyntheticConfig
from dprelease.orchestration.tasks import ends_cleanly
from dprelease.orchestration.tasks.release import release
from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE


@flow(name="release", persist_result=False, log_prints=False)
@ends_cleanly
def release_flow(
    input_path: str,
    schema_path: str,
    config: SyntheticConfig,
    out_dir: str = "releases",
    ledger_url: str | None = None,
) -> str:
    """Publish one DP synthetic release of `input_path`; return its directory."""
    return release(SYNTHETIC_PIPELINE, input_path, schema_path, config, out_dir, ledger_url)
