"""Prefect tasks over the privacy ledger, shared by every release flow.

They are thin wrappers over `dprelease.privacy.ledger.Ledger`. None persists a result, caches
or retries: a retried reservation would be a new spend (PRIVACY_MODEL.md section 7).
"""

from __future__ import annotations

from collections.abc import Sequence

from prefect import task

from dprelease.privacy.accounting import Cap, PlannedSpend, Spend
from dprelease.privacy.ledger import Ledger, LedgerEntry
from tasks import NO_PERSISTENCE


@task(name="check-budget", **NO_PERSISTENCE)
def check_budget(
    ledger_url: str, dataset: str, cap: Spend, planned: Sequence[PlannedSpend]
) -> None:
    """Refuse (exit 3) a plan the cap cannot hold, before the real table is read."""
    with Ledger(ledger_url) as ledger:
        ledger.check_available(dataset, cap, planned)


@task(name="reserve-budget", **NO_PERSISTENCE)
def reserve(
    ledger_url: str, dataset: str, cap: Spend, release_id: str, planned: Sequence[PlannedSpend]
) -> tuple[int, ...]:
    """Atomically check the cap and reserve every planned spend; return the entry ids."""
    with Ledger(ledger_url) as ledger:
        return ledger.reserve(dataset, cap, release_id, planned)


@task(name="commit-spends", **NO_PERSISTENCE)
def commit_spends(
    ledger_url: str, entry_ids: Sequence[int], actual: Sequence[PlannedSpend]
) -> None:
    """Record what each reserved mechanism actually spent."""
    with Ledger(ledger_url) as ledger:
        for entry_id, spend in zip(entry_ids, actual, strict=True):
            ledger.commit(entry_id, spend)


@task(name="ledger-record", **NO_PERSISTENCE)
def ledger_record(ledger_url: str, dataset: str, up_to_id: int) -> tuple[list[LedgerEntry], Cap]:
    """What a release carries from the ledger, read in one connection: the dataset's entries
    up to and including `up_to_id`, and its cap as recorded (with its accountant)."""
    with Ledger(ledger_url) as ledger:
        entries, cap = ledger.entries(dataset, up_to_id=up_to_id), ledger.cap(dataset)
    if cap is None:
        raise RuntimeError(f"dataset {dataset!r} has no cap in the ledger after a reservation")
    return entries, cap
