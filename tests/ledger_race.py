"""The racing process of `test_ledger.test_concurrent_processes_never_overspend`, in a module
of its own that imports only the ledger: each racer imports it, forked from a forkserver that
has imported the ledger's modules already."""

from __future__ import annotations

from dprelease.errors import BudgetExceededError
from dprelease.privacy.accounting import PlannedSpend, Spend
from dprelease.privacy.ledger.ledger import Ledger

CAP = Spend(3.0, 1e-5)


def spend(epsilon: float, delta: float = 0.0, mechanism: str = "laplace") -> PlannedSpend:
    return PlannedSpend(mechanism, epsilon, delta, {"laplace_scale": 2.0})


def reserve_in_process(url: str, dataset: str, name: str, barrier, results) -> None:  # noqa: ANN001
    """Open the ledger, wait for every racer, then ask for 0.75 of the cap's 3.0."""
    ledger = Ledger(url)
    barrier.wait()
    try:
        ledger.reserve(dataset, CAP, name, [spend(0.5), spend(0.25, 1e-6)])
        results.put((name, "reserved"))
    except BudgetExceededError:
        results.put((name, "refused"))
    finally:
        ledger.close()
