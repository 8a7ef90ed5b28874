"""A release of 1M and 10M real rows in bounded memory: time per stage and peak RSS.

    python benchmarks/scale.py [--sizes 1000000 10000000] [--n-synthetic 1000000]
                               [--scratch /tmp/dprelease-scale]

The census-like tables (`dprelease.datasets.census_like`) are written once, chunk by chunk,
as Parquet files in the scratch directory (never in the repository) and reused. Each size is
released in a fresh child process that runs the release flow's tasks in the flow's order
(`tasks.release`, their `.fn`: the library code without Prefect's orchestration, whose
overhead benchmarks/release.py measures) with the default generator (marginals) and weights
(calibration, its sums streamed over the chunks), an SQLite ledger, and writes the release.
The child reports each stage's wall time and the process's peak RSS (`resource.getrusage`,
ru_maxrss) after the stage.
Targets (issue 13): peak RSS <= 1.5 GB for 10M rows in and 1M out; >= 1M real rows/s in the
read+validate+count stage.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dprelease.planning import DEFAULT_GENERATOR, DEFAULT_WEIGHTS

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
    """One release, stage by stage; prints one JSON line of (stage, seconds, peak RSS MB)."""
    from dprelease.planning import ReleaseConfig
    from dprelease.privacy.ledger import Ledger
    from dprelease.privacy.noise import NoiseSource
    from dprelease.release import new_release_id, write_release
    from dprelease.synthetic_release import synthetic_bundle
    from tasks import release as steps

    stages = []

    def timed(stage, function, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        start, cpu = time.perf_counter(), time.process_time()
        result = function(*args, **kwargs)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        stages.append((stage, time.perf_counter() - start, time.process_time() - cpu, peak))
        return result

    config = ReleaseConfig(
        epsilon=1.0, n_synthetic=n_synthetic, seed=0, allow_unreliable_weights=True
    )
    release = timed("plan", steps.plan.fn, schema_path, config)
    assert steps.streams(release), "the default release must take the chunked path"
    real = timed("read+validate+count", steps.load_real.fn, input_path, release)
    ledger_url = f"sqlite:///{Path(out_dir) / 'ledger.sqlite'}"
    release_id = new_release_id()
    dataset, cap = release.schema.dataset, release.cap
    with Ledger(ledger_url) as ledger:
        ids = timed("reserve", ledger.reserve, dataset, cap, release_id, release.planned_spends)
    noise = NoiseSource()
    spends = timed("fit generator (noise)", steps.fit_generator.fn, release, real, noise)
    synthetic = timed("sample synthetic", steps.sample_synthetic.fn, release)
    estimate = timed(
        "weights (streamed sums)", steps.estimate_weights.fn, release, real, synthetic, noise
    )
    with Ledger(ledger_url) as ledger:
        actual = [*spends, *release.actual_weights_spends(estimate)]
        for entry, spend in zip(ids, actual, strict=True):
            ledger.commit(entry, spend)
        entries = ledger.entries(dataset)
    diagnostics = timed(
        "psis", steps.diagnose.fn, release, estimate.log_weights, estimate.log_weight_max
    )
    table = timed("decode+validate synthetic", steps.decode.fn, release, synthetic)
    configuration = release.configuration()
    configuration["weights"].update(estimate.details)
    bundle = synthetic_bundle(
        dataset=dataset,
        release_id=release_id,
        synthetic=table,
        log_weights=estimate.log_weights,
        smoothed_log_weights=diagnostics.log_weights,
        ledger_entries=entries,
        release_entry_ids=ids,
        cap=cap,
        schema=release.schema.public_dict(),
        configuration=configuration,
        diagnostics=diagnostics.to_dict(),
    )
    timed("write release", write_release, bundle, Path(out_dir) / "releases")
    print(json.dumps(stages))


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
        command = [sys.executable, __file__, "--child", str(data), str(schema),
                   str(args.n_synthetic), str(out)]  # fmt: skip
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if result.returncode != 0:
            print(result.stderr, file=sys.stderr)
            raise SystemExit(f"the release of {rows} rows failed")
        stages = json.loads(result.stdout.strip().splitlines()[-1])
        print(f"\n{rows:,} real rows -> {args.n_synthetic:,} synthetic rows "
              f"({DEFAULT_GENERATOR} + {DEFAULT_WEIGHTS}, streamed)")  # fmt: skip
        print(f"{'stage':<30}{'wall s':>10}{'CPU s':>10}{'peak RSS MB':>14}")
        for stage, seconds, cpu, peak in stages:
            print(f"{stage:<30}{seconds:>10.2f}{cpu:>10.2f}{peak:>14.0f}")
            if stage == "read+validate+count":
                rate, cpu_rate = rows / seconds, rows / cpu
        print(f"{'child process total':<30}{wall:>10.2f}{'':>10}"
              f"{max(p for *_, p in stages):>14.0f}")  # fmt: skip
        print(f"read+validate+count: {rate / 1e6:.2f} M rows/s wall, {cpu_rate / 1e6:.2f} M rows "
              f"per CPU second; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
