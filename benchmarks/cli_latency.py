"""Time-to-error of the CLI for each class of user error, next to `dprelease --help` and
`dprelease ledger show` (issue 9).

    python benchmarks/cli_latency.py [--repeats 3] [--with-data-errors]

Every error that needs no data must come back within 2x the time of `ledger show`, before
Prefect's temporary server would start. `--with-data-errors` also times an error found only
while reading the table (an unknown category), which runs the flow and so starts Prefect.
Prints the median wall time of each class over the repeats, with its exit code.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).parent.parent
CLI = [sys.executable, "-m", "dprelease.cli.app"]


def timed(args: list[str], env: dict) -> tuple[float, int]:
    start = time.perf_counter()
    result = subprocess.run([*CLI, *args], env=env, capture_output=True, timeout=600)
    return time.perf_counter() - start, result.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--with-data-errors", action="store_true")
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
    # A ledger entry for `ledger show` to print.
    subprocess.run(
        [*CLI, *release, str(table), "--schema", str(schema)], env=env, capture_output=True
    )
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
    for name, args in cases.items():
        runs = [timed(args, env) for _ in range(options.repeats)]
        rows.append((name, statistics.median(t for t, _ in runs), runs[0][1]))
    reference = dict((name, seconds) for name, seconds, _ in rows)["dprelease ledger show"]
    print(f"{'case':<32}{'exit':>5}{'seconds':>10}{'x ledger show':>15}")
    for name, seconds, code in rows:
        print(f"{name:<32}{code:>5}{seconds:>10.2f}{seconds / reference:>15.2f}")


if __name__ == "__main__":
    main()
