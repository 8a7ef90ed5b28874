"""Time-to-error of the CLI for each class of user error, next to `dprelease --help` and
`dprelease ledger show`, and the end-to-end time of a full release of a small table
(the bundled 569-row breast-cancer table) with a running local Prefect server and with
Prefect's temporary server.

    python benchmarks/cli_latency.py [--repeats 3] [--with-data-errors] [--no-temporary-server]

Every error that needs no data must come back within 2x the time of `ledger show`, before
Prefect's temporary server would start. `--with-data-errors` also times an error found only
while reading the table (an unknown category), which runs the flow and so starts Prefect.
The full release runs `--repeats` times against a local server this script starts (its own
PREFECT_HOME and port; the target is at most 5 s), then once without one (Prefect's temporary
server) unless `--no-temporary-server`. Prints the median wall time of each case over its
runs, with its exit code; every release is expected to exit 0, or 5 when its verdict is
"not usable" (the bundled table at epsilon 0.1 is).
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).parent.parent
CLI = [sys.executable, "-m", "dprelease.cli"]  # as the `dprelease` console script


def timed(args: list[str], env: dict) -> tuple[float, int, float]:
    """Wall seconds, exit code and CPU seconds (user + system) of one CLI call; on a shared
    machine the CPU time is the steadier figure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run([*CLI, *args], env=env, capture_output=True, timeout=600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, result.returncode, cpu


@contextmanager
def local_server(home: Path) -> dict:
    """A Prefect server on a free local port with its own PREFECT_HOME; yields the env that
    points the CLI at it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "prefect"), "server", "start", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/api"
    try:
        for _ in range(240):
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError("the Prefect server did not start")
        yield {**env, "PREFECT_API_URL": url}
    finally:
        server.terminate()
        server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--with-data-errors", action="store_true")
    parser.add_argument("--no-temporary-server", action="store_true")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dprelease-latency-"))
    env = {**os.environ, "DPRELEASE_HOME": str(work / "home")}
    table = ROOT / "data" / "breast_cancer.csv"
    schema = ROOT / "data" / "breast_cancer.yaml"
    small_cap = work / "small-cap.yaml"
    spec = yaml.safe_load(schema.read_text())
    spec["budget"]["epsilon"] = 0.5  # a dataset of its own: a cap cannot change
    spec["dataset"] = "breast-cancer-small-cap"
    small_cap.write_text(yaml.safe_dump(spec))
    bad_schema = work / "bad.yaml"
    bad_schema.write_text("dataset: x\nbudget: {epsilon: 1, delta: 0}\ncolumns: {a: {type: x}}\n")
    latin1 = work / "latin1.csv"
    latin1.write_bytes("mean_radius,diagn\xf3sis\n1,2\n".encode("latin-1"))
    extra = work / "extra.csv"
    pd.read_csv(table).assign(patient_id=1).to_csv(extra, index=False)
    unknown = work / "unknown-category.csv"
    pd.read_csv(table).assign(diagnosis="unknown").to_csv(unknown, index=False)
    release = ["release", "--epsilon", "1", "--out", str(work / "releases")]
    full = [
        "release",
        str(table),
        "--schema",
        str(schema),
        "--epsilon",
        "0.1",
        "--out",
        str(work / "releases"),
    ]
    cases = {
        "dprelease --help": ["--help"],
        "dprelease ledger show": ["ledger", "show", "breast-cancer"],
        "missing input file": [*release, str(work / "missing.csv"), "--schema", str(schema)],
        "invalid schema": [*release, str(table), "--schema", str(bad_schema)],
        "unknown generator": [*release, str(table), "--schema", str(schema), "--generator", "x"],
        "non-UTF-8 input": [*release, str(latin1), "--schema", str(schema)],
        "column not in schema": [*release, str(extra), "--schema", str(schema)],
        "cap refuses (exit 3)": [*release, str(table), "--schema", str(small_cap)],
    }
    if options.with_data_errors:
        cases["unknown category (reads data)"] = [*release, str(unknown), "--schema", str(schema)]
    rows = []
    with local_server(work / "prefect-home") as server_env:
        # The first release registers the flow with the server and writes the ledger entry
        # that `ledger show` prints.
        timed(full, {**env, **server_env})
        for name, args in cases.items():
            rows.append(summarise(name, [timed(args, env) for _ in range(options.repeats)]))
        runs = [timed(full, {**env, **server_env}) for _ in range(options.repeats)]
    rows.append(summarise("full release, running server", runs))
    if not options.no_temporary_server:
        alone = {key: value for key, value in env.items() if key != "PREFECT_API_URL"}
        alone["PREFECT_HOME"] = str(work / "prefect-home-temporary")
        rows.append(summarise("full release, temporary server", [timed(full, alone)]))
    reference = dict((name, seconds) for name, seconds, _, _ in rows)["dprelease ledger show"]
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores; medians of {options.repeats} runs")
    print(f"{'case':<32}{'exit':>5}{'seconds':>10}{'cpu s':>8}{'x ledger show':>15}")
    for name, seconds, code, cpu in rows:
        print(f"{name:<32}{code:>5}{seconds:>10.2f}{cpu:>8.2f}{seconds / reference:>15.2f}")


def summarise(name: str, runs: list[tuple[float, int, float]]) -> tuple[str, float, int, float]:
    """The case's median wall time, its worst exit code and its median CPU time."""
    return (
        name,
        statistics.median(wall for wall, _, _ in runs),
        max(code for _, code, _ in runs),
        statistics.median(cpu for _, _, cpu in runs),
    )


if __name__ == "__main__":
    main()
