"""The pytest run's real Prefect server, started by `dprelease server start`, creates scheduled
flow runs from `prefect.yaml`.

SQLAlchemy 2.1 makes Prefect 3.8's scheduler fail every loop ("Can't evaluate bulk DML
statement") and no scheduled run ever appears; this test deploys the project's
`prefect.yaml` on the server the pytest session started as a curator does
(`tests/prefect_server.py`: detached in a process session of its own, scheduler loop 2 s;
stopped by `dprelease server stop` when the run ends) and asserts that the scheduler
service creates runs for every deployment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from dprelease.cli.server import ServerFiles, recorded

ROOT = Path(__file__).parent.parent
PREFECT = [sys.executable, "-m", "prefect"]

pytestmark = pytest.mark.prefect


def wait_for(condition, timeout: float, what: str):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(1.0)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_prefect_yaml_schedules_create_flow_runs(shared_prefect_server, prefect_server):
    api = prefect_server
    running = recorded(ServerFiles(Path(shared_prefect_server["home"])))[0]
    assert running is not None and os.getsid(running.pid) == running.pid  # detached
    env = {**os.environ, "PREFECT_API_URL": api, "DPRELEASE_PROJECT_DIR": str(ROOT)}
    config = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    for pool in {d["work_pool"]["name"] for d in config["deployments"]}:
        subprocess.run(
            [*PREFECT, "work-pool", "create", pool, "--type", "process"],
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
    deployed = subprocess.run(
        [*PREFECT, "--no-prompt", "deploy", "--all"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert deployed.returncode == 0, deployed.stdout[-3000:] + deployed.stderr[-3000:]
    deployments = httpx.post(f"{api}/deployments/filter", json={}, timeout=10).json()
    assert {d["name"] for d in deployments} == {d["name"] for d in config["deployments"]}
    scheduled = {d["name"] for d in config["deployments"] if d.get("schedules")}
    assert scheduled, "prefect.yaml has no scheduled deployment"
    deployments = [d for d in deployments if d["name"] in scheduled]

    def scheduled_per_deployment() -> dict | None:
        runs = httpx.post(
            f"{api}/flow_runs/filter",
            json={"flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}}},
            timeout=10,
        ).json()
        counts = {d["id"]: 0 for d in deployments}
        for run in runs:
            if run.get("deployment_id") in counts:
                counts[run["deployment_id"]] += 1
        return counts if all(counts.values()) else None

    counts = wait_for(
        scheduled_per_deployment, 90, "scheduled flow runs of every scheduled deployment"
    )
    assert min(counts.values()) >= 1
