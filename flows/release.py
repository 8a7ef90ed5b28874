"""The release flow: public schema -> validated real table -> encoded matrix -> generator ->
synthetic rows -> weights -> PSIS -> release (README "How a release runs").

Order matters for privacy (PRIVACY_MODEL.md section 7): the plan is calibrated from public
quantities; the cap is checked before the real table is read (exit 3 without reading it);
the table is validated (bad input: exit 2, nothing written); the planned spends are reserved
atomically; only then do mechanisms see the data. A failure after the reservation keeps the
spend. The PSIS gate (exit 4) runs after the spend, since diagnosing needs the DP weights.
"""

from __future__ import annotations

from prefect import flow

from dprelease.errors import spend_kept
from dprelease.planning import ReleaseConfig
from dprelease.privacy.ledger import resolve_ledger_url
from dprelease.privacy.noise import NoiseSource
from dprelease.release import new_release_id
from dprelease.synthetic_release import synthetic_bundle
from tasks import ledger as budget
from tasks import publish
from tasks import release as steps


@flow(name="release", persist_result=False, log_prints=False)
def release_flow(
    input_path: str,
    schema_path: str,
    epsilon: float,
    delta: float | None = None,
    out_dir: str = "releases",
    generator: str | None = None,
    n_synthetic: int | None = None,
    weights: str | None = None,
    weights_fraction: float | None = None,
    ledger_url: str | None = None,
    seed: int | None = None,
    on_out_of_bounds: str = "clip",
    on_invalid_rows: str = "refuse",
    drop_extra_columns: bool = False,
    temper: float = 1.0,
    allow_unreliable_weights: bool = False,
    secure_noise: bool = False,
    generator_options: dict | None = None,
    weights_options: dict | None = None,
) -> str:
    """Publish one DP synthetic release; return its directory. `delta`, `generator` and
    `weights` left at None take the documented defaults (dprelease.planning)."""
    config = ReleaseConfig(
        epsilon=epsilon,
        delta=delta,
        generator=generator,
        generator_options=generator_options or {},
        weights=weights,
        weights_fraction=weights_fraction,
        weights_options=weights_options or {},
        n_synthetic=n_synthetic,
        seed=seed,
        on_out_of_bounds=on_out_of_bounds,
        on_invalid_rows=on_invalid_rows,
        drop_extra_columns=drop_extra_columns,
        temper=temper,
        allow_unreliable_weights=allow_unreliable_weights,
        secure_noise=secure_noise,
    )
    ledger = resolve_ledger_url(ledger_url)
    release = steps.plan(schema_path, config)
    dataset, cap, planned = release.schema.dataset, release.cap, release.planned_spends
    budget.check_budget(ledger, dataset, cap, planned)
    real = steps.load_real(input_path, release)
    release_id = new_release_id()
    entry_ids = budget.reserve(ledger, dataset, cap, release_id, planned)
    with spend_kept():
        noise = NoiseSource(secure=secure_noise)
        generator_spends = steps.fit_generator(release, real, noise)
        synthetic = steps.sample_synthetic(release)
        estimate = steps.estimate_weights(release, real, synthetic, noise)
        del real
        budget.commit_spends(
            ledger, entry_ids, [*generator_spends, *release.actual_weights_spends(estimate)]
        )
        diagnostics = steps.diagnose(release, estimate.log_weights, estimate.log_weight_max)
        table = steps.decode(release, synthetic)
        configuration = release.configuration()
        configuration["weights"].update(estimate.details)
        entries, recorded_cap = budget.ledger_record(ledger, dataset, max(entry_ids))
        bundle = synthetic_bundle(
            dataset=dataset,
            release_id=release_id,
            synthetic=table,
            log_weights=estimate.log_weights,
            smoothed_log_weights=diagnostics.log_weights,
            ledger_entries=entries,
            release_entry_ids=entry_ids,
            cap=recorded_cap,
            schema=release.schema.public_dict(),
            configuration=configuration,
            diagnostics=diagnostics.to_dict(),
            invalid_rows=on_invalid_rows,
        )
    release_dir = publish.write_release(bundle, out_dir)
    publish.publish_artifacts(release_dir, dataset, ledger)
    return release_dir
