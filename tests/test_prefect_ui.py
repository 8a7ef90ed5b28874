"""What a curator sees in the Prefect UI: the run's log ends with the release path, the ledger
and the privacy statement; the artifacts show the real path, readable ledger totals under the
enforcing accountant, and a description; a failed run logs its traceback at most once and
stores no exception under PREFECT_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from leak_checks import exception_text, shown_values, write_headerless_csv

from dprelease.config import SyntheticConfig
from dprelease.datasets import census_like
from dprelease.errors import InputError
from dprelease.expectations import gx_installed

ROOT = Path(__file__).parent.parent
pytestmark = pytest.mark.prefect


def schema_file(tmp_path: Path, dataset: str) -> Path:
    schema = yaml.safe_load((ROOT / "data" / "census.yaml").read_text())
    schema.update(dataset=dataset, max_rows=2000)
    schema["budget"] = {"epsilon": 3.0, "delta": 1e-5, "accountant": "rdp"}
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(schema, sort_keys=False))
    return path


def run_logs(flow_run_id) -> list[str]:  # noqa: ANN001
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()
    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )
    return [log.message for log in logs]


def stored_files() -> set[Path]:
    from prefect.settings import PREFECT_HOME, PREFECT_LOCAL_STORAGE_PATH

    roots = {Path(PREFECT_LOCAL_STORAGE_PATH.value()), Path(PREFECT_HOME.value()) / "storage"}
    return {path for root in roots if root.exists() for path in root.rglob("*")}


def test_a_release_is_findable_in_the_ui(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    from dprelease.orchestration.flows.release import release_flow

    table = tmp_path / "census.csv"
    census_like(600, seed=2).to_csv(table, index=False)
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    state = release_flow(
        str(table),
        str(schema_file(tmp_path, "ui-test")),
        SyntheticConfig(epsilon=0.5, allow_unreliable_weights=True),
        out_dir=str(tmp_path / "out"),
        ledger_url=ledger,
        return_state=True,
    )
    directory = Path(state.result()).resolve()
    flow_run_id = state.state_details.flow_run_id
    logs = run_logs(flow_run_id)
    assert logs[-1].startswith("Finished in state Completed")  # Prefect's own last line
    last = logs[-2]
    assert f"release directory: {directory}" in last
    assert f"ledger: {ledger}" in last and "privacy statement: (epsilon, delta)-DP" in last
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    by_key = {artifact.key: artifact for artifact in artifacts}
    checked = {"expectations-ui-test"} if gx_installed() else set()
    assert set(by_key) == {"release-report-ui-test", "ledger-totals-ui-test", *checked}
    assert all(artifact.description for artifact in artifacts)
    report = by_key["release-report-ui-test"].data
    assert "path/to/" not in report and f"dprelease verify {directory.as_posix()}" in report
    rows = by_key["ledger-totals-ui-test"].data
    rows = yaml.safe_load(rows) if isinstance(rows, str) else rows
    assert [row["accountant"] for row in rows] == [  # zCDP (pgm)
        "rdp (enforces the cap)",
        "basic (sum of the entries)",
        "rdp-all-orders (reported only)",
    ]
    for row in rows:  # rounded for people: no float noise such as 1.6666666666666668e-07
        for column in ("spent", "cap"):
            assert len(row[column]) <= 24, row
    if checked:  # Great Expectations' result on the synthetic table, one row per expectation
        rows = by_key["expectations-ui-test"].data
        rows = yaml.safe_load(rows) if isinstance(rows, str) else rows
        assert {row["result"] for row in rows} == {"ok"}
        bounded = {r["column"] for r in rows if r["expectation"].endswith("_to_be_between")}
        assert bounded == {"age", "education", "hours", "wage", "capital_gain"}
        assert "may be published" in by_key["expectations-ui-test"].description
        assert "## Great Expectations" in report


def test_a_failed_run_logs_once_and_stores_nothing(prefect_server, tmp_path):
    from dprelease.orchestration.flows.release import release_flow

    table = tmp_path / "census.csv"
    frame = census_like(300, seed=2)
    frame.loc[5, "region"] = "atlantis"  # found only while reading the data
    frame.to_csv(table, index=False)
    before = stored_files()
    state = release_flow(
        str(table),
        str(schema_file(tmp_path, "ui-fail")),
        SyntheticConfig(epsilon=0.5, on_invalid_rows="refuse"),
        out_dir=str(tmp_path / "out"),
        ledger_url=f"sqlite:///{tmp_path / 'l.sqlite'}",
        return_state=True,
    )
    assert state.is_failed() and "atlantis" not in (state.message or "")
    with pytest.raises(InputError):  # a caller in this process gets the error itself
        state.result()
    assert stored_files() == before
    logs = run_logs(state.state_details.flow_run_id)
    assert sum("Traceback" in message for message in logs) <= 1, logs
    assert any(message.startswith("failed: ") for message in logs)


def test_a_headerless_csv_leaves_no_value_in_the_run_state_or_logs(prefect_server, tmp_path):
    from dprelease.orchestration.flows.release import release_flow

    table = tmp_path / "headerless.csv"
    values = write_headerless_csv(table)
    state = release_flow(
        str(table),
        str(schema_file(tmp_path, "ui-headerless")),
        SyntheticConfig(epsilon=0.5, on_invalid_rows="drop", drop_extra_columns=True),
        out_dir=str(tmp_path / "out"),
        ledger_url=f"sqlite:///{tmp_path / 'l.sqlite'}",
        return_state=True,
    )
    assert state.is_failed() and "may have no header line" in (state.message or "")
    with pytest.raises(InputError) as error:
        state.result()
    logs = run_logs(state.state_details.flow_run_id)
    # Values of three characters or more: Prefect's log lines carry times and ids by chance.
    secrets = tuple(value for value in values if len(value) > 2)
    for text in (state.message or "", exception_text(error.value), *logs):
        assert shown_values(text.replace(str(tmp_path), ""), secrets) == [], text
