"""Prefect tasks of the release flow: thin wrappers over library calls.

Tasks that see the real data (`load_real`, `fit_generator`, `estimate_weights`) neither
persist results nor cache, and are never retried automatically: a retry would be a new,
unaccounted spend (PRIVACY_MODEL.md section 7). No task here is retried or cached; the
public ones simply have nothing worth caching.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from dprelease import weights as weight_methods
from dprelease.diagnostics import PsisResult, diagnose_weights, require_reliable
from dprelease.planning import ReleaseConfig, ReleasePlan, plan_release
from dprelease.privacy.accounting import PlannedSpend, Spend, compose
from dprelease.privacy.ledger import Ledger
from dprelease.privacy.noise import NoiseSource
from dprelease.release import ReleaseContent, write_release
from dprelease.schema import load_schema
from dprelease.validation import decode_synthetic, load_validated

NO_PERSISTENCE = {"persist_result": False, "cache_policy": NO_CACHE, "retries": 0}


@task(name="plan-release", **NO_PERSISTENCE)
def plan(schema_path: str, config: ReleaseConfig) -> ReleasePlan:
    return plan_release(load_schema(schema_path), config)


@task(name="check-budget", **NO_PERSISTENCE)
def check_budget(ledger_url: str, release: ReleasePlan) -> None:
    with Ledger(ledger_url) as ledger:
        ledger.check_available(release.schema.dataset, release.cap, release.planned_spends)


@task(name="load-real-table", **NO_PERSISTENCE)
def load_real(input_path: str, release: ReleasePlan) -> np.ndarray:
    validated = load_validated(
        input_path,
        release.schema,
        on_out_of_bounds=release.config.on_out_of_bounds,
        drop_extra_columns=release.config.drop_extra_columns,
    )
    return release.encoder.encode(validated.table)


@task(name="reserve-budget", **NO_PERSISTENCE)
def reserve(ledger_url: str, release: ReleasePlan, release_id: str) -> tuple[int, ...]:
    with Ledger(ledger_url) as ledger:
        return ledger.reserve(
            release.schema.dataset, release.cap, release_id, release.planned_spends
        )


@task(name="fit-generator", **NO_PERSISTENCE)
def fit_generator(release: ReleasePlan, real: np.ndarray, noise: NoiseSource) -> list[PlannedSpend]:
    return release.generator.fit(real, noise)


@task(name="sample-synthetic", **NO_PERSISTENCE)
def sample_synthetic(release: ReleasePlan) -> np.ndarray:
    rng = np.random.default_rng(release.config.seed)
    return release.generator.sample(release.n_synthetic, rng)


@task(name="estimate-weights", **NO_PERSISTENCE)
def estimate_weights(
    release: ReleasePlan, real: np.ndarray, synthetic: np.ndarray, noise: NoiseSource
) -> weight_methods.WeightEstimate:
    options = dict(release.config.weights_options)
    if release.config.weights == "discriminator":
        options["discriminator"] = release.generator.discriminator
    return weight_methods.estimate(
        release.config.weights,
        real,
        synthetic,
        epsilon=release.weights_budget.epsilon or None,
        delta=release.weights_budget.delta or None,
        noise=noise,
        **options,
    )


@task(name="commit-spends", **NO_PERSISTENCE)
def commit_spends(ledger_url: str, entry_ids: tuple[int, ...], actual: list[PlannedSpend]) -> None:
    with Ledger(ledger_url) as ledger:
        for entry_id, spend in zip(entry_ids, actual, strict=True):
            ledger.commit(entry_id, spend)


@task(name="diagnose-weights", **NO_PERSISTENCE)
def diagnose(release: ReleasePlan, log_weights: np.ndarray) -> PsisResult:
    """PSIS of the (tempered) DP weights; refuses unreliable weights unless allowed (exit 4)."""
    result = diagnose_weights(log_weights, release.config.temper)
    require_reliable(result, release.config.allow_unreliable_weights)
    return result


@task(name="decode-and-validate-synthetic", **NO_PERSISTENCE)
def decode(release: ReleasePlan, synthetic: np.ndarray) -> pd.DataFrame:
    return decode_synthetic(release.encoder, synthetic)


@task(name="write-release", **NO_PERSISTENCE)
def write(
    release: ReleasePlan,
    release_id: str,
    out_dir: str,
    ledger_url: str,
    entry_ids: tuple[int, ...],
    table: pd.DataFrame,
    log_weights: np.ndarray,
    diagnostics: PsisResult,
    weights_details: dict,
) -> str:
    with Ledger(ledger_url) as ledger:
        entries = ledger.entries(release.schema.dataset, up_to_id=max(entry_ids))
    configuration = release.configuration()
    configuration["weights"].update(weights_details)
    content = ReleaseContent(
        dataset=release.schema.dataset,
        release_id=release_id,
        synthetic=table,
        log_weights=log_weights,
        smoothed_log_weights=diagnostics.log_weights,
        ledger_entries=entries,
        release_spend=compose(Spend(e.epsilon, e.delta) for e in entries if e.id in entry_ids),
        cap=release.cap,
        schema=release.schema.public_dict(),
        configuration=configuration,
        diagnostics=diagnostics.to_dict(),
    )
    return str(write_release(content, out_dir))


@task(name="publish-artifacts", **NO_PERSISTENCE)
def publish_artifacts(release_dir: str, dataset: str, ledger_url: str) -> None:
    """A markdown artifact (the report) and a table artifact (ledger totals); no real data."""
    key = "".join(c if c.isalnum() else "-" for c in dataset.lower())
    report = (Path(release_dir) / "report.md").read_text()
    create_markdown_artifact(markdown=report, key=f"release-report-{key}")
    with Ledger(ledger_url) as ledger:
        summary = ledger.summary(dataset)
    create_table_artifact(
        table=[
            {
                "budget": "epsilon",
                "spent": summary["spent"]["epsilon"],
                "cap": summary["cap"]["epsilon"],
            },
            {"budget": "delta", "spent": summary["spent"]["delta"], "cap": summary["cap"]["delta"]},
        ],
        key=f"ledger-totals-{key}",
    )
