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

from dprelease.planning import DEFAULT_WEIGHTS, ReleaseConfig
from dprelease.privacy.ledger import resolve_ledger_url
from dprelease.privacy.noise import NoiseSource
from dprelease.release import new_release_id
from tasks import release as steps


@flow(name="release", persist_result=False, log_prints=False)
def release_flow(
    input_path: str,
    schema_path: str,
    epsilon: float,
    delta: float = 0.0,
    out_dir: str = "releases",
    generator: str = "marginals",
    n_synthetic: int | None = None,
    weights: str = DEFAULT_WEIGHTS,
    weights_fraction: float | None = None,
    ledger_url: str | None = None,
    seed: int | None = None,
    on_out_of_bounds: str = "clip",
    drop_extra_columns: bool = False,
    temper: float = 1.0,
    allow_unreliable_weights: bool = False,
    secure_noise: bool = False,
    generator_options: dict | None = None,
    weights_options: dict | None = None,
) -> str:
    """Publish one DP synthetic release; return its directory."""
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
        drop_extra_columns=drop_extra_columns,
        temper=temper,
        allow_unreliable_weights=allow_unreliable_weights,
        secure_noise=secure_noise,
    )
    ledger = resolve_ledger_url(ledger_url, out_dir)
    release = steps.plan(schema_path, config)
    steps.check_budget(ledger, release)
    real = steps.load_real(input_path, release)
    release_id = new_release_id()
    entry_ids = steps.reserve(ledger, release, release_id)
    noise = NoiseSource(secure=secure_noise)
    generator_spends = steps.fit_generator(release, real, noise)
    synthetic = steps.sample_synthetic(release)
    estimate = steps.estimate_weights(release, real, synthetic, noise)
    del real
    actual = [*generator_spends, *release.actual_weights_spends(estimate)]
    steps.commit_spends(ledger, entry_ids, actual)
    diagnostics = steps.diagnose(release, estimate.log_weights)
    table = steps.decode(release, synthetic)
    release_dir = steps.write(
        release,
        release_id,
        out_dir,
        ledger,
        entry_ids,
        table,
        estimate.log_weights,
        diagnostics,
        estimate.details,
    )
    steps.publish_artifacts(release_dir, release.schema.dataset, ledger)
    return release_dir
