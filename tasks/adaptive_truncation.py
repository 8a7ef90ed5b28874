"""Prefect tasks of the adaptive-truncation flow: thin wrappers over library calls.

`load_column` and `run_mechanism` see real values: like every task here they persist no
result, cache nothing and are never retried (`NO_PERSISTENCE`; a retry would be a new,
unaccounted spend, PRIVACY_MODEL.md section 7). Their return values are kept in memory only.
"""

from __future__ import annotations

import numpy as np
from prefect import task

from dprelease.inference.truncation_release import (
    TruncationConfig,
    TruncationOutcome,
    TruncationRelease,
    check_min_rows,
    plan_truncation_release,
    run_truncation_release,
)
from dprelease.privacy.noise import NoiseSource
from dprelease.schema import load_schema
from dprelease.validation import load_validated
from tasks import NO_PERSISTENCE


@task(name="plan-adaptive-truncation", **NO_PERSISTENCE)
def plan(schema_path: str, config: TruncationConfig) -> TruncationRelease:
    """Public plan: column checks, T rule, design (a*, b*), prior, planned spends."""
    return plan_truncation_release(load_schema(schema_path), config)


@task(name="load-real-column", **NO_PERSISTENCE)
def load_column(input_path: str, release: TruncationRelease) -> np.ndarray:
    """Validate the table against the schema; return the column (clipped to its bounds).

    A table below the schema's min_rows is refused here, before the reservation."""
    config = release.config
    validated = load_validated(
        input_path,
        release.schema,
        on_out_of_bounds=config.on_out_of_bounds,
        on_invalid_rows=config.on_invalid_rows,
        drop_extra_columns=config.drop_extra_columns,
    )
    values = validated.table[config.column].to_numpy(dtype=float)
    check_min_rows(release, len(values))
    return values


@task(name="run-adaptive-truncation", **NO_PERSISTENCE)
def run_mechanism(
    release: TruncationRelease, values: np.ndarray, noise: NoiseSource
) -> TruncationOutcome:
    """[DP count ->] T, random row subset, one Laplace release per row, posterior updates."""
    return run_truncation_release(release, values, noise)
