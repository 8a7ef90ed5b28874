"""Time each stage of a release of the census-like table (about 30,000 rows) and the
overhead Prefect adds: `python benchmarks/release.py [--rows 30000] [--weights beta_debiased]`.

Stages are timed by calling the library directly (as the flow's tasks do); then the same
release runs through the Prefect flow on a temporary server, and the difference is the
orchestration overhead. The server's start-up is reported separately.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from dprelease import weights as weight_methods
from dprelease.datasets import census_like
from dprelease.diagnostics import psis
from dprelease.planning import ReleaseConfig, plan_release
from dprelease.privacy.ledger import Ledger
from dprelease.privacy.noise import NoiseSource
from dprelease.release import new_release_id, write_release
from dprelease.schema import load_schema
from dprelease.synthetic_release import synthetic_bundle
from dprelease.validation import decode_synthetic, load_validated, read_table

ROOT = Path(__file__).parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--weights", default="beta_debiased")
    parser.add_argument("--n-synthetic", type=int, default=30_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dprelease-bench-"))
    data = work / "census.csv"
    census_like(args.rows, seed=0).to_csv(data, index=False)
    schema = load_schema(ROOT / "data" / "census.yaml")
    config = ReleaseConfig(
        epsilon=1.0, delta=1e-6, weights=args.weights, n_synthetic=args.n_synthetic, seed=0
    )
    times: dict[str, float] = {}

    def timed(stage: str, function, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        start = time.perf_counter()
        result = function(*a, **k)
        times[stage] = time.perf_counter() - start
        return result

    load_validated(data, schema)  # warm up GX (its import takes seconds) outside the timings
    plan = timed("plan", plan_release, schema, config)
    timed("load", read_table, data)
    validated = timed("load+validate", load_validated, data, schema)
    real = timed("encode", plan.encoder.encode, validated.table)
    noise = NoiseSource()
    ledger_url = f"sqlite:///{work / 'ledger.sqlite'}"
    release_id = new_release_id()
    with Ledger(ledger_url) as ledger:
        ids = timed(
            "reserve", ledger.reserve, schema.dataset, plan.cap, release_id, plan.planned_spends
        )
    generator_spends = timed("fit", plan.generator.fit, real, noise)
    synthetic = timed("sample", plan.generator.sample, plan.n_synthetic, np.random.default_rng(0))
    estimate = timed(
        "weights",
        weight_methods.estimate,
        args.weights,
        real,
        synthetic,
        epsilon=plan.weights_budget.epsilon,
        delta=plan.weights_budget.delta,
        noise=noise,
    )
    with Ledger(ledger_url) as ledger:
        for entry, spend in zip(
            ids, [*generator_spends, *plan.actual_weights_spends(estimate)], strict=True
        ):
            ledger.commit(entry, spend)
        entries = ledger.entries(schema.dataset)
        cap = ledger.cap(schema.dataset)
    diagnostics = timed("psis", psis, estimate.log_weights)
    table = timed("decode+validate synthetic", decode_synthetic, plan.encoder, synthetic)
    bundle = synthetic_bundle(
        dataset=schema.dataset,
        release_id=release_id,
        synthetic=table,
        log_weights=estimate.log_weights,
        smoothed_log_weights=diagnostics.log_weights,
        ledger_entries=entries,
        release_entry_ids=ids,
        cap=cap,
        schema=schema.public_dict(),
        configuration=plan.configuration(),
        diagnostics=diagnostics.to_dict(),
    )
    timed("write", write_release, bundle, work / "releases")
    library_total = sum(v for k, v in times.items() if k != "load")

    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    from prefect.testing.utilities import prefect_test_harness

    from flows.release import release_flow

    start = time.perf_counter()
    with prefect_test_harness(server_startup_timeout=120):
        server_start = time.perf_counter() - start
        flow_times = []
        for _ in range(2):
            start = time.perf_counter()
            release_flow(
                input_path=str(data),
                schema_path=str(ROOT / "data" / "census.yaml"),
                epsilon=1.0,
                delta=1e-6,
                out_dir=str(work / "flow-releases"),
                weights=args.weights,
                n_synthetic=args.n_synthetic,
                seed=0,
                allow_unreliable_weights=True,
            )
            flow_times.append(time.perf_counter() - start)

    print(
        f"release of {args.rows} real rows -> {args.n_synthetic} synthetic rows "
        f"(generator marginals, weights {args.weights})"
    )
    print(f"{'stage':<28}{'seconds':>10}")
    for stage, seconds in times.items():
        print(f"{stage:<28}{seconds:>10.3f}")
    print(f"{'library total':<28}{library_total:>10.3f}")
    print(f"{'flow (first run)':<28}{flow_times[0]:>10.3f}")
    print(f"{'flow (second run)':<28}{flow_times[1]:>10.3f}")
    print(f"{'Prefect overhead (2nd run)':<28}{flow_times[1] - library_total:>10.3f}")
    print(f"{'Prefect server start-up':<28}{server_start:>10.3f}")


if __name__ == "__main__":
    main()
