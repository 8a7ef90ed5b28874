"""The ABCDP flow (docs/abcdp.md section 7.4): DP rejection ABC by the sparse vector
technique (`dprelease.release.abcdp`), each step a Prefect task."""

from __future__ import annotations

from prefect import flow

from dprelease.config import ABCDPConfig
from dprelease.orchestration.tasks import ends_cleanly
from dprelease.orchestration.tasks.release import release
from dprelease.release.abcdp import ABCDP_PIPELINE


@flow(name="abcdp", persist_result=False, log_prints=False)
@ends_cleanly
def abcdp_flow(
    input_path: str,
    schema_path: str,
    config: ABCDPConfig,
    out_dir: str = "releases",
    ledger_url: str | None = None,
) -> str:
    """Publish one ABCDP posterior release; return its directory."""
    return release(ABCDP_PIPELINE, input_path, schema_path, config, out_dir, ledger_url)
