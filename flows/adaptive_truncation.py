"""The adaptive-truncation flow (spec 002 section 6.3): a DP posterior of one column's
normal model from one Laplace release per processed row.

Order (as the release flow): public plan (design (a*, b*), how T is fixed, spends) -> cap
check (exit 3, data unread) -> load + validate (exit 2; a table below the schema's min_rows
is refused here, before any spend) -> reserve every spend -> [DP row count -> T] -> run ->
commit -> write the release -> artifacts. A failure after the reservation keeps the spend.
"""

from __future__ import annotations

from prefect import flow

from dprelease.errors import spend_kept
from dprelease.inference.truncation_release import TruncationConfig, truncation_bundle
from dprelease.privacy.ledger import resolve_ledger_url
from dprelease.privacy.noise import NoiseSource
from dprelease.release import new_release_id
from tasks import adaptive_truncation as steps
from tasks import ledger as budget
from tasks import publish


@flow(name="adaptive-truncation", persist_result=False, log_prints=False)
def adaptive_truncation_flow(
    input_path: str,
    schema_path: str,
    column: str,
    epsilon: float,
    delta: float | None = None,
    n_steps: int | None = None,
    count_epsilon: float | None = None,
    max_steps: int = 10_000,
    min_steps: int = 50,
    family: str = "normal",
    score: str = "mu",
    engine: str = "ibis",
    particles: int = 1000,
    prior: dict | None = None,
    out_dir: str = "releases",
    ledger_url: str | None = None,
    seed: int | None = None,
    secure_noise: bool = False,
    on_out_of_bounds: str = "clip",
    on_invalid_rows: str = "refuse",
    drop_extra_columns: bool = False,
) -> str:
    """Publish one adaptive-truncation release; return its directory."""
    config = TruncationConfig(
        column=column, epsilon=epsilon, delta=delta, n_steps=n_steps,
        count_epsilon=count_epsilon, max_steps=max_steps, min_steps=min_steps, family=family,
        score=score, engine=engine, particles=particles, prior=prior, seed=seed,
        secure_noise=secure_noise, on_out_of_bounds=on_out_of_bounds,
        on_invalid_rows=on_invalid_rows, drop_extra_columns=drop_extra_columns,
    )  # fmt: skip
    ledger = resolve_ledger_url(ledger_url)
    release = steps.plan(schema_path, config)
    dataset, cap, planned = release.schema.dataset, release.cap, release.planned_spends
    budget.check_budget(ledger, dataset, cap, planned)
    values = steps.load_column(input_path, release)
    release_id = new_release_id()
    entry_ids = budget.reserve(ledger, dataset, cap, release_id, planned)
    with spend_kept():
        outcome = steps.run_mechanism(release, values, NoiseSource(secure=secure_noise))
        del values
        budget.commit_spends(ledger, entry_ids, release.actual_spends(outcome.n_steps))
        entries, recorded_cap = budget.ledger_record(ledger, dataset, max(entry_ids))
        bundle = truncation_bundle(
            release,
            outcome,
            release_id=release_id,
            ledger_entries=entries,
            release_entry_ids=entry_ids,
            cap=recorded_cap,
        )
    release_dir = publish.write_release(bundle, out_dir)
    publish.publish_artifacts(release_dir, dataset, ledger)
    return release_dir
