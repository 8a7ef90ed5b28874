"""The ABCDP flow (spec abcdp.md 7.4): DP rejection ABC by the sparse vector technique.

Order (as the release flow): public plan (model import and dry run from the prior, bandwidth
from simulated data, random features, spends) -> cap check (exit 3, data unread) -> load +
validate + encode (exit 2, nothing spent) -> reserve `dp_row_count` and `abcdp_svt` -> DP
count -> n_hat, m -> observed mean embedding -> simulate (theta_t, Y_t) lazily in batches with
the public seed and feed rho~ to the SVT in draw order (stop at c) -> commit both spends in
full, however many were accepted -> write the release -> artifacts. A failure after the
reservation keeps the spend (`spend_kept`).
"""

from __future__ import annotations

from prefect import flow

from dprelease.errors import spend_kept
from dprelease.inference.abcdp import MEDIAN_PRIOR, ABCDPConfig
from dprelease.inference.abcdp_release import abcdp_bundle
from dprelease.privacy.ledger import resolve_ledger_url
from dprelease.privacy.noise import NoiseSource
from dprelease.release import new_release_id
from tasks import abcdp as steps
from tasks import ledger as budget
from tasks import publish


@flow(name="abcdp", persist_result=False, log_prints=False)
def abcdp_flow(
    input_path: str,
    schema_path: str,
    model: str,
    epsilon: float,
    n_samples: int,
    threshold: float,
    resample: bool = False,
    n_draws: int = 10_000,
    n_sim: int | None = None,
    kernel: str = "gaussian_rff",
    n_features: int = 500,
    bandwidth: float | str = MEDIAN_PRIOR,
    count_fraction: float = 0.05,
    n_min: int = 20,
    out_dir: str = "releases",
    ledger_url: str | None = None,
    seed: int | None = None,
    secure_noise: bool = False,
    on_out_of_bounds: str = "clip",
    on_invalid_rows: str = "refuse",
    drop_extra_columns: bool = False,
) -> str:
    """Publish one ABCDP posterior release; return its directory."""
    config = ABCDPConfig(
        n_samples=n_samples, threshold=threshold, epsilon=epsilon,
        count_fraction=count_fraction, resample=resample, n_draws=n_draws, n_sim=n_sim,
        kernel=kernel, n_features=n_features, bandwidth=bandwidth, n_min=n_min, seed=seed,
        secure_noise=secure_noise, on_out_of_bounds=on_out_of_bounds,
        on_invalid_rows=on_invalid_rows, drop_extra_columns=drop_extra_columns,
    )  # fmt: skip
    ledger = resolve_ledger_url(ledger_url)
    release = steps.plan(schema_path, model, config)
    dataset, cap, planned = release.dataset, release.cap, release.plan.planned_spends()
    budget.check_budget(ledger, dataset, cap, planned)
    real = steps.load_real(input_path, release)
    release_id = new_release_id()
    entry_ids = budget.reserve(ledger, dataset, cap, release_id, planned)
    with spend_kept():
        result = steps.run_mechanism(release, real, NoiseSource(secure=secure_noise))
        del real
        budget.commit_spends(ledger, entry_ids, release.plan.actual_spends(result))
        entries, recorded_cap = budget.ledger_record(ledger, dataset, max(entry_ids))
        bundle = abcdp_bundle(
            release,
            result,
            release_id=release_id,
            ledger_entries=entries,
            release_entry_ids=entry_ids,
            cap=recorded_cap,
        )
    release_dir = publish.write_release(bundle, out_dir)
    publish.publish_artifacts(release_dir, dataset, ledger)
    return release_dir
