"""A release of 1M and 10M real rows in bounded memory: time per stage and peak RSS.

    python benchmarks/scale.py [--sizes 1000000 10000000] [--n-synthetic 1000000]
                               [--scratch /tmp/dprelease-scale]

The census-like tables (`dprelease.datasets.census_like`) are written once, chunk by chunk,
as Parquet files in the scratch directory (never in the repository) and reused. Each size is
released in a fresh child process by the product's release pipeline
(`dprelease.release.pipeline.publish`, without Prefect's orchestration, whose overhead
benchmarks/release.py measures) with the default generator and weights (the real table
streamed in chunks), an SQLite ledger, and writes the release. The child reports each
pipeline step's wall and CPU time and the process's peak RSS after it
(`dprelease.evaluation.timing.StepTimer`).
Targets (docs/decisions/0030-scale-and-latency.md): peak RSS <= 1.5 GB for 10M rows in and 1M
out; >= 1M real rows/s in the read+validate+count stage.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import astuple
from pathlib import Path

from dprelease.release.synthetic.plan import DEFAULT_GENERATOR, DEFAULT_WEIGHTS

ROOT = Path(__file__).parent.parent
GENERATE_ROWS = 500_000


def generate(path: Path, rows: int) -> None:
    """Write `rows` census-like rows to `path` in chunks (bounded memory), once."""
    if path.exists():
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dprelease.datasets import census_like

    partial = path.with_suffix(".partial")
    writer = None
    for seed, start in enumerate(range(0, rows, GENERATE_ROWS)):
        table = pa.Table.from_pandas(
            census_like(min(GENERATE_ROWS, rows - start), seed=seed), preserve_index=False
        )
        writer = writer or pq.ParquetWriter(partial, table.schema)
        writer.write_table(table)
    writer.close()
    partial.rename(path)


def scale_schema(scratch: Path, rows: int) -> Path:
    """data/census.yaml with the public max_rows raised to the table's size."""
    import yaml

    schema = yaml.safe_load((ROOT / "data" / "census.yaml").read_text())
    schema["max_rows"] = rows
    path = scratch / f"census-{rows}.yaml"
    path.write_text(yaml.safe_dump(schema))
    return path


def child(input_path: str, schema_path: str, n_synthetic: int, out_dir: str) -> None:
    """One release through the product's pipeline; prints one JSON line of its steps (name,
    wall seconds, CPU seconds, peak RSS MB)."""
    from dprelease.config import SyntheticConfig
    from dprelease.evaluation.timing import StepTimer
    from dprelease.release.pipeline import publish_release
    from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE
    from dprelease.release.synthetic.plan import plan_release
    from dprelease.schema import load_schema

    config = SyntheticConfig(
        epsilon=1.0, n_synthetic=n_synthetic, seed=0, allow_unreliable_weights=True
    )
    assert plan_release(load_schema(schema_path), config).streams, "the default must stream"
    timer = StepTimer()
    ledger_url = f"sqlite:///{Path(out_dir) / 'ledger.sqlite'}"
    publish_release(
        SYNTHETIC_PIPELINE,
        schema_path,
        config,
        input_path,
        out_dir=Path(out_dir) / "releases",
        ledger_url=ledger_url,
        step=timer,
    )
    print(json.dumps([astuple(step) for step in timer.steps]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--n-synthetic", type=int, default=1_000_000)
    scratch = Path(tempfile.gettempdir()) / "dprelease-scale"
    parser.add_argument("--scratch", type=Path, default=scratch)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), args.child[3])
        return
    args.scratch.mkdir(parents=True, exist_ok=True)
    for rows in args.sizes:
        data = args.scratch / f"census-{rows}.parquet"
        start = time.perf_counter()
        generate(data, rows)
        print(f"table of {rows:,} rows: {data} ({time.perf_counter() - start:.1f} s)", flush=True)
        out = Path(tempfile.mkdtemp(prefix="release-", dir=args.scratch))
        schema = scale_schema(args.scratch, rows)
        command = [
            sys.executable,
            __file__,
            "--child",
            str(data),
            str(schema),
            str(args.n_synthetic),
            str(out),
        ]
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if result.returncode != 0:
            print(result.stderr, file=sys.stderr)
            raise SystemExit(f"the release of {rows} rows failed")
        stages = json.loads(result.stdout.strip().splitlines()[-1])
        print(
            f"\n{rows:,} real rows -> {args.n_synthetic:,} synthetic rows "
            f"({DEFAULT_GENERATOR} + {DEFAULT_WEIGHTS}, streamed)"
        )
        print(f"{'stage':<30}{'wall s':>10}{'CPU s':>10}{'peak RSS MB':>14}")
        for stage, seconds, cpu, peak in stages:
            print(f"{stage:<30}{seconds:>10.2f}{cpu:>10.2f}{peak:>14.0f}")
            if stage == "load-real-table":
                rate, cpu_rate = rows / seconds, rows / cpu
        print(
            f"{'child process total':<30}{wall:>10.2f}{'':>10}{max(p for *_, p in stages):>14.0f}"
        )
        print(
            f"load (read+validate+count): {rate / 1e6:.2f} M rows/s wall, "
            f"{cpu_rate / 1e6:.2f} M rows per CPU second; load average "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
            flush=True,
        )


if __name__ == "__main__":
    main()
