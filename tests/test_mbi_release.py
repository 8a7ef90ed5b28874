"""An MST release with calibration weights through the Prefect flow: the ledger
records rho with the (epsilon, delta) it converts to, and the weights' Gaussian spend."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from leak_checks import mentions_count

from dprelease.config import SyntheticConfig
from dprelease.datasets import census_like
from dprelease.privacy.zcdp import zcdp_rho
from dprelease.release.synthetic.plan import plan_release
from dprelease.schema import load_schema

ROOT = Path(__file__).parent.parent
N_REAL = 1733
COLUMNS = ("sex", "region", "high_earner")

pytestmark = pytest.mark.prefect


def test_mst_release_with_calibration_weights(prefect_server, tmp_path):
    schema = yaml.safe_load((ROOT / "data" / "census.yaml").read_text())
    # three of the census' categorical columns: what is checked is the accounting, and every
    # further clique (or marginal shape) costs OpenDP's MST seconds of JAX compilation
    schema["columns"] = {name: schema["columns"][name] for name in COLUMNS}
    data = tmp_path / "census.csv"
    census_like(N_REAL, seed=5)[list(COLUMNS)].to_csv(data, index=False)
    schema |= {"dataset": "mbi-test", "budget": {"epsilon": 3.0, "delta": 1e-5}}
    schema["max_rows"] = 4000
    schema_path = tmp_path / "schema.yaml"
    schema_path.write_text(yaml.safe_dump(schema, sort_keys=False))
    from dprelease.orchestration.flows.release import release_flow

    config = SyntheticConfig(
        epsilon=1.0,
        delta=1e-6,
        generator="mst",
        generator_options={"iters": 30},
        weights="calibration",
        n_synthetic=4000,
        seed=1,
        allow_unreliable_weights=True,
    )
    release_dir = Path(
        release_flow(
            input_path=str(data),
            schema_path=str(schema_path),
            config=config,
            out_dir=str(tmp_path / "out"),
        )
    )

    plan = plan_release(load_schema(schema_path), config)
    (generator_spend,) = plan.generator_spends
    rho, epsilon = zcdp_rho(plan.generator.epsilon, plan.generator.delta)
    assert generator_spend.params["rho"] == pytest.approx(rho, rel=1e-12)
    ledger = pq.read_table(release_dir / "ledger.parquet").to_pandas()
    # MST's and the weights' Gaussian mechanisms compose in zCDP: one entry at the release's
    # (epsilon, delta), its rho the sum of theirs (release.synthetic.plan).
    (entry,) = ledger.itertuples()
    assert entry.mechanism == "zcdp-mst + weights:calibration"
    assert entry.epsilon <= config.epsilon and entry.epsilon == pytest.approx(1.0, rel=1e-6)
    assert entry.delta == pytest.approx(config.delta)
    params = json.loads(entry.params)
    parts = {c["mechanism"]: c for c in params["components"]}
    assert parts["zcdp-mst"]["rho"] == pytest.approx(rho, rel=1e-12)
    assert parts["zcdp-mst"]["epsilon"] == pytest.approx(epsilon, rel=1e-12)
    assert params["rho"] == pytest.approx(rho + parts["weights:calibration"]["rho"], rel=1e-12)
    assert params["rho"] <= zcdp_rho(config.epsilon, config.delta)[0]

    frame = pq.read_table(release_dir / "synthetic.parquet").to_pandas()
    assert len(frame) == 4000
    manifest = json.loads((release_dir / "manifest.json").read_text())
    assert manifest["configuration"]["generator"]["generator"] == "mst"
    for path in release_dir.iterdir():
        if path.suffix in {".json", ".md"}:
            assert not mentions_count(path.read_text(), N_REAL), path.name
