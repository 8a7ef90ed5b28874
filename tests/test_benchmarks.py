"""The benchmarks run the product's pipeline: a small `benchmarks/release.py` release passes
the PSIS gate and `dprelease verify`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from dprelease.verify.release import verify_release

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


def _load_benchmark(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_release_benchmark_publishes_a_release_that_passes_the_gate_and_verifies(tmp_path):
    bench = _load_benchmark("release")
    release_dir, _, _, timer = bench.library_release(
        tmp_path, rows=1_500, weights=None, n_synthetic=2_000
    )
    diagnostics = json.loads((release_dir / "diagnostics.json").read_text())
    assert diagnostics["verdict"] in {"good", "ok"}
    assert verify_release(release_dir).passed
    steps = {step.name for step in timer.steps}
    assert {"reserve-budget", "commit-spends", "write-release"} <= steps
