"""Building real synthetic releases through the library, without Prefect (tests of `verify`
and `report`). The steps are those of `flows/release.py`, with a seeded noise source."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from conftest import SeededNoise

from dprelease import weights as weight_methods
from dprelease.datasets import census_like
from dprelease.diagnostics import diagnose_weights
from dprelease.planning import ReleaseConfig, plan_release, weights_options
from dprelease.privacy.ledger import Ledger
from dprelease.release import new_release_id, write_release
from dprelease.schema import Schema
from dprelease.synthetic_release import synthetic_bundle
from dprelease.validation import decode_synthetic

ROOT = Path(__file__).parent.parent


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
    temper: float = 1.0,
    on_invalid_rows: str = "refuse",
    n_real: int = 1537,
    n_synthetic: int = 800,
    seed: int = 0,
) -> Path:
    """One release of the census-like table into `out`; returns its directory."""
    schema = schema or census_schema()
    ledger_url = ledger_url or f"sqlite:///{out / 'ledger.sqlite'}"
    config = ReleaseConfig(
        epsilon=epsilon,
        delta=1e-6,
        weights=weights,
        # The paper's weights without the noise gate: tampering tests need weights that vary
        # (the gate may flatten them on this table).
        weights_options={"noise_gate": False} if weights == "beta_debiased" else {},
        n_synthetic=n_synthetic,
        seed=seed,
        temper=temper,
        on_invalid_rows=on_invalid_rows,
        allow_unreliable_weights=True,
    )
    plan = plan_release(schema, config)
    real = plan.encoder.encode(census_like(n_real, seed=seed + 100))
    release_id = new_release_id()
    noise = SeededNoise(seed)
    with Ledger(ledger_url) as ledger:
        entry_ids = ledger.reserve(schema.dataset, plan.cap, release_id, plan.planned_spends)
        generator_spends = plan.generator.fit(real, noise)
        synthetic = plan.generator.sample(plan.n_synthetic, np.random.default_rng(seed))
        estimate = weight_methods.estimate(
            plan.config.weights,
            real,
            synthetic,
            epsilon=plan.weights_budget.epsilon or None,
            delta=plan.weights_budget.delta or None,
            noise=noise,
            **weights_options(plan.config.weights, plan.config.weights_options, plan.encoder),
        )
        for entry_id, spend in zip(
            entry_ids, [*generator_spends, *plan.actual_weights_spends(estimate)], strict=True
        ):
            ledger.commit(entry_id, spend)
        entries = ledger.entries(schema.dataset, up_to_id=max(entry_ids))
        cap = ledger.cap(schema.dataset)
    diagnostics = diagnose_weights(estimate.log_weights, temper, estimate.log_weight_max)
    configuration = plan.configuration()
    configuration["weights"].update(estimate.details)
    bundle = synthetic_bundle(
        dataset=schema.dataset,
        release_id=release_id,
        synthetic=decode_synthetic(plan.encoder, synthetic),
        log_weights=estimate.log_weights,
        smoothed_log_weights=diagnostics.log_weights,
        ledger_entries=entries,
        release_entry_ids=entry_ids,
        cap=cap,
        schema=schema.public_dict(),
        configuration=configuration,
        diagnostics=diagnostics.to_dict(),
        invalid_rows=on_invalid_rows,
    )
    return write_release(bundle, out / "releases")
