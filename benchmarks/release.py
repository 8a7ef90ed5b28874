"""Time each step of a release of the census-like table (about 30,000 rows) and the
overhead Prefect adds: `python benchmarks/release.py [--rows 30000] [--weights METHOD]`.

The steps are those of the product's release pipeline (`dprelease.release.pipeline.publish`)
timed by `StepTimer`; then the same release runs twice through the Prefect flow on a
temporary server, and the difference is the orchestration overhead. The server's start-up is
reported separately.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from dprelease.config import SyntheticConfig
from dprelease.datasets import census_like
from dprelease.evaluation.timing import StepTimer
from dprelease.release.pipeline import publish_release
from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE

ROOT = Path(__file__).parent.parent
SCHEMA = ROOT / "data" / "census.yaml"


def library_release(
    work: Path, rows: int, weights: str | None, n_synthetic: int
) -> tuple[Path, SyntheticConfig, Path, StepTimer]:
    """One release of a `rows`-row census-like table through the product's pipeline, each step
    timed; returns (release directory, config, input file, timer). tests/test_benchmarks.py
    runs it small and verifies the release."""
    data = work / "census.csv"
    census_like(rows, seed=0).to_csv(data, index=False)
    config = SyntheticConfig(
        epsilon=1.0, delta=1e-6, weights=weights, n_synthetic=n_synthetic, seed=0
    )
    timer = StepTimer()
    release_dir = publish_release(
        SYNTHETIC_PIPELINE,
        SCHEMA,
        config,
        str(data),
        out_dir=work / "releases",
        ledger_url=f"sqlite:///{work / 'ledger.sqlite'}",
        step=timer,
    )
    return Path(release_dir), config, data, timer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--weights", default=None, help="weight method (default: the default)")
    parser.add_argument("--n-synthetic", type=int, default=30_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dprelease-bench-"))
    _, config, data, timer = library_release(work, args.rows, args.weights, args.n_synthetic)
    library_total = sum(step.wall for step in timer.steps)

    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    from prefect.testing.utilities import prefect_test_harness

    from dprelease.orchestration.flows.release import release_flow

    start = time.perf_counter()
    with prefect_test_harness(server_startup_timeout=120):
        server_start = time.perf_counter() - start
        flow_times = []
        for _ in range(2):
            start = time.perf_counter()
            release_flow(
                input_path=str(data),
                schema_path=str(SCHEMA),
                config=config,
                out_dir=str(work / "flow-releases"),
                ledger_url=f"sqlite:///{work / 'flow-ledger.sqlite'}",
            )
            flow_times.append(time.perf_counter() - start)

    print(
        f"release of {args.rows} real rows -> {args.n_synthetic} synthetic rows "
        f"(generator {config.generator or 'default'}, weights {args.weights or 'default'})"
    )
    print(f"{'step':<28}{'seconds':>10}{'CPU s':>10}")
    for step in timer.steps:
        print(f"{step.name:<28}{step.wall:>10.3f}{step.cpu:>10.3f}")
    print(f"{'library total':<28}{library_total:>10.3f}")
    print(f"{'flow (first run)':<28}{flow_times[0]:>10.3f}")
    print(f"{'flow (second run)':<28}{flow_times[1]:>10.3f}")
    print(f"{'Prefect overhead (2nd run)':<28}{flow_times[1] - library_total:>10.3f}")
    print(f"{'Prefect server start-up':<28}{server_start:>10.3f}")


if __name__ == "__main__":
    main()
