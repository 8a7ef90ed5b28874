"""Building real synthetic releases with the product's release pipeline, without Prefect
(tests of `verify` and `report`), with a seeded (test-only) noise source."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from conftest import SeededNoise

from dprelease.config import SyntheticConfig
from dprelease.datasets import census_like
from dprelease.release.pipeline import publish_release
from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE
from dprelease.schema import Schema
from dprelease.verify.release import verify_release

ROOT = Path(__file__).resolve().parents[1]  # the repository, whatever the working directory
# Three columns: releases of it take about a second with the fast generators.
TINY_SCHEMA = Schema.model_validate(
    {
        "dataset": "tiny",
        "budget": {"epsilon": 50.0, "delta": 1e-4},
        "max_rows": 100,
        "target": "y",
        "columns": {
            "x": {"type": "continuous", "min": 0, "max": 1},
            "k": {"type": "integer", "min": 0, "max": 3},
            "y": {"type": "categorical", "categories": ["a", "b"]},
        },
    }
)


def census_schema(dataset: str = "verify-test", epsilon_cap: float = 3.0) -> Schema:
    raw = yaml.safe_load((ROOT / "data" / "census.yaml").read_text())
    raw.update(dataset=dataset, budget={"epsilon": epsilon_cap, "delta": 1e-5}, max_rows=3000)
    return Schema.model_validate(raw)


def build_release(
    out: Path,
    *,
    schema: Schema | None = None,
    ledger_url: str | None = None,
    epsilon: float = 1.0,
    weights: str = "beta_debiased",
    generator: str | None = None,
    temper: float = 1.0,
    on_invalid_rows: str = "refuse",
    n_real: int = 1537,
    n_synthetic: int = 800,
    seed: int = 0,
) -> Path:
    """One release of the census-like table into `out`; returns its directory."""
    config = SyntheticConfig(
        epsilon=epsilon,
        delta=1e-6,
        weights=weights,
        generator=generator,
        # The paper's weights without the noise gate: tampering tests need weights that vary
        # (the gate may flatten them on this table).
        weights_options={"noise_gate": False} if weights == "beta_debiased" else {},
        n_synthetic=n_synthetic,
        seed=seed,
        temper=temper,
        on_invalid_rows=on_invalid_rows,
        allow_unreliable_weights=True,
    )
    return publish_release(
        SYNTHETIC_PIPELINE,
        schema or census_schema(),
        config,
        census_like(n_real, seed=seed + 100),
        out_dir=out / "releases",
        ledger_url=ledger_url or f"sqlite:///{out / 'ledger.sqlite'}",
        noise=SeededNoise(seed),
    )


def publish_table(out: Path, schema: Schema, config: SyntheticConfig, table) -> tuple[Path, dict]:
    """Publish `table` under `config` into `out` with a throwaway ledger and seeded test noise;
    return the release directory and its manifest."""
    release = publish_release(
        SYNTHETIC_PIPELINE,
        schema,
        config,
        table,
        out_dir=out / "releases",
        ledger_url=f"sqlite:///{out / 'ledger.sqlite'}",
        noise=SeededNoise(0),
    )
    return release, json.loads((release / "manifest.json").read_text())


def failed(directory: Path) -> set[str]:
    return {check.name for check in verify_release(directory).failed}


def manifest_of(directory: Path) -> dict:
    return json.loads((directory / "manifest.json").read_text())


def save_manifest(directory: Path, manifest: dict) -> None:
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2))


def rehash(directory: Path) -> None:
    """What a careless forger does: make the manifest's hashes match the edited files."""
    manifest = manifest_of(directory)
    manifest["files"] = {
        name: hashlib.sha256((directory / name).read_bytes()).hexdigest()
        for name in manifest["files"]
        if (directory / name).exists()
    }
    save_manifest(directory, manifest)


def edit_table(path: Path, edit: Callable) -> None:
    """Rewrite a Parquet file through pandas, keeping its Arrow metadata."""
    table = pq.read_table(path)
    frame = edit(table.to_pandas())
    edited = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), path)
