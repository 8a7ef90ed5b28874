"""Prefect tasks of the ABCDP flow: thin wrappers over library calls.

`load_real` and `run_mechanism` see the real rows: like every task here they persist no
result, cache nothing and are never retried (`NO_PERSISTENCE`; a retry would be a new,
unaccounted spend, PRIVACY_MODEL.md section 7). Their return values stay in memory; the
distances and the SVT's noisy threshold never leave `run_abcdp`.
"""

from __future__ import annotations

import numpy as np
from prefect import task

from dprelease.inference.abcdp import ABCDPConfig, ABCDPResult, run_abcdp
from dprelease.inference.abcdp_release import ABCDPRelease, load_real_rows, plan_abcdp_release
from dprelease.privacy.noise import NoiseSource
from dprelease.schema import load_schema
from tasks import NO_PERSISTENCE


@task(name="plan-abcdp", **NO_PERSISTENCE)
def plan(schema_path: str, model_reference: str, config: ABCDPConfig) -> ABCDPRelease:
    """Public plan: model import and dry run from the prior, bandwidth, features, spends."""
    return plan_abcdp_release(load_schema(schema_path), model_reference, config)


@task(name="load-real-table", **NO_PERSISTENCE)
def load_real(input_path: str, release: ABCDPRelease) -> np.ndarray:
    """Validate the table against the schema; encode the model's columns."""
    return load_real_rows(input_path, release)


@task(name="run-abcdp", **NO_PERSISTENCE)
def run_mechanism(release: ABCDPRelease, real: np.ndarray, noise: NoiseSource) -> ABCDPResult:
    """DP count -> n_hat, m -> simulate in batches -> SVT in draw order, stop at c."""
    return run_abcdp(real, release.plan, noise)
