"""One flow run releasing several datasets, each as its own release on the chosen runner.

Every dataset runs the whole release flow (`flows.release.release_flow`) inside one task, so
on Dask (`run_multi_release(dask=...)`, see `flows.evaluate.task_runner`) the datasets are
released in parallel on the workers. Each release checks and reserves its own dataset's
budget in the ledger before its mechanisms see data (docs/privacy-model.md section 7), exactly as a
single release does; the ledger URL is resolved once here so every worker spends against the
same ledger (on a real cluster: a database every worker reaches, e.g. PostgreSQL; an SQLite
file only works when the workers share its filesystem).

A failed dataset fails the flow run after every dataset has finished (the others are
published; a failure after a reservation keeps its spend). What crosses the network on Dask:
the release parameters (paths, budgets: public), and the real table is read by the worker
from its path; only the release directory's path comes back.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, task

from dprelease.errors import InputError
from dprelease.orchestration.flows.evaluate import task_runner
from dprelease.orchestration.tasks import NO_PERSISTENCE, ends_cleanly
from dprelease.privacy.ledger.location import resolve_ledger_url


@task(name="release-dataset", **NO_PERSISTENCE)
def release_dataset(parameters: dict[str, Any]) -> str:
    from dprelease.orchestration.flows.release import release_flow

    return release_flow(**parameters)


@flow(name="multi-release", persist_result=False, log_prints=False)
@ends_cleanly
def multi_release_flow(
    releases: list[dict[str, Any]], out_dir: str = "releases", ledger_url: str | None = None
) -> list[str]:
    """Release every entry of `releases` (keyword arguments of `release_flow`: each needs
    `input_path`, `schema_path` and `config`, a `SyntheticConfig` or its fields); return the
    release directories in order."""
    if not releases:
        raise InputError("multi-release: give at least one dataset to release")
    ledger = resolve_ledger_url(ledger_url)
    futures = [
        release_dataset.submit({"out_dir": out_dir, **parameters, "ledger_url": ledger})
        for parameters in releases
    ]
    for future in futures:
        future.wait()
    return [future.result() for future in futures]


def run_multi_release(dask: str | None = None, **params: Any) -> list[str]:
    """`multi_release_flow(**params)` on threads, a local Dask cluster or a scheduler."""
    return multi_release_flow.with_options(task_runner=task_runner(dask))(**params)
