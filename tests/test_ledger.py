"""The privacy-budget ledger on SQLite and, when DPRELEASE_TEST_POSTGRES_URL is set, on a real
PostgreSQL server (unreachable then means failure, not a skip)."""

from __future__ import annotations

import multiprocessing
import os
import uuid

import pytest

from dprelease.errors import BudgetExceededError, InputError
from dprelease.privacy.accounting import PlannedSpend, Spend
from dprelease.privacy.ledger import Ledger, resolve_ledger_url

POSTGRES_ENV = "DPRELEASE_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    try:
        Ledger(url).close()
    except Exception as error:  # noqa: BLE001
        pytest.fail(f"{POSTGRES_ENV} is set but PostgreSQL is unreachable: {error}")
    return url


@pytest.fixture
def dataset() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


CAP = Spend(3.0, 1e-5)


def spend(epsilon: float, delta: float = 0.0, mechanism: str = "laplace") -> PlannedSpend:
    return PlannedSpend(mechanism, epsilon, delta, {"laplace_scale": 2.0})


def test_reserve_commit_and_totals(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        ids = ledger.reserve(dataset, CAP, "r1", [spend(1.0), spend(0.5, 1e-6, "gaussian")])
        assert len(ids) == 2
        assert ledger.spent(dataset) == Spend(1.5, 1e-6)
        ledger.commit(ids[0], PlannedSpend("laplace", 0.9, 0.0, {"laplace_scale": 2.2}))
        summary = ledger.summary(dataset)
    assert summary["dataset"] == dataset
    assert summary["cap"] == {"epsilon": 3.0, "delta": 1e-5}
    assert summary["spent"] == {"epsilon": pytest.approx(1.4), "delta": 1e-6}
    first, second = summary["entries"]
    assert first["status"] == "spent" and first["epsilon"] == 0.9
    assert first["params"] == {"laplace_scale": 2.2}
    assert first["neighbouring"] == "add/remove-one"
    assert second["status"] == "reserved" and second["committed_at"] is None


def test_cap_refuses_and_leaves_the_ledger_unchanged(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        ledger.reserve(dataset, CAP, "r1", [spend(2.0)])
        before = ledger.summary(dataset)
        with pytest.raises(BudgetExceededError, match="already spent"):
            ledger.check_available(dataset, CAP, [spend(1.5)])
        with pytest.raises(BudgetExceededError, match="needs epsilon=1.5"):
            ledger.reserve(dataset, CAP, "r2", [spend(1.0), spend(0.5)])
        with pytest.raises(BudgetExceededError):
            ledger.reserve(dataset, CAP, "r3", [spend(0.1, 2e-5)])
        assert ledger.summary(dataset) == before
        ledger.reserve(dataset, CAP, "r4", [spend(1.0)])  # exactly up to the cap is allowed
        assert ledger.spent(dataset).epsilon == 3.0


def test_rounding_never_refuses_an_exact_fit(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        cap = Spend(0.3, 0.0)
        for release in ("a", "b", "c"):
            ledger.reserve(dataset, cap, release, [spend(0.1)])
        with pytest.raises(BudgetExceededError):
            ledger.reserve(dataset, cap, "d", [spend(1e-9)])


def test_a_reservation_without_commit_stays_spent(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        ledger.reserve(dataset, CAP, "crashed-run", [spend(2.5)])
    with Ledger(ledger_url) as reopened:
        assert reopened.spent(dataset).epsilon == 2.5
        with pytest.raises(BudgetExceededError):
            reopened.reserve(dataset, CAP, "retry", [spend(2.5)])


def test_commit_never_exceeds_the_reservation(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        (entry,) = ledger.reserve(dataset, CAP, "r1", [spend(1.0)])
        with pytest.raises(RuntimeError, match="spent more than it reserved"):
            ledger.commit(entry, spend(1.1))
        ledger.commit(entry, spend(1.0))
        with pytest.raises(RuntimeError, match="not an open reservation"):
            ledger.commit(entry, spend(1.0))


def test_the_cap_of_a_dataset_cannot_change(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        ledger.reserve(dataset, CAP, "r1", [spend(1.0)])
        with pytest.raises(InputError, match="cannot change between releases"):
            ledger.reserve(dataset, Spend(30.0, 1e-5), "r2", [spend(1.0)])


def test_unknown_dataset_summary(ledger_url):
    with Ledger(ledger_url) as ledger, pytest.raises(InputError, match="has no entries"):
        ledger.summary("never-released")


def test_resolve_ledger_url(monkeypatch, tmp_path):
    monkeypatch.delenv("DPRELEASE_LEDGER_URL", raising=False)
    assert resolve_ledger_url(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/ledger.sqlite"
    monkeypatch.setenv("DPRELEASE_LEDGER_URL", "sqlite:///x.db")
    assert resolve_ledger_url(None, tmp_path) == "sqlite:///x.db"
    assert resolve_ledger_url("postgresql://h/db", tmp_path) == "postgresql://h/db"


def _reserve_in_process(url: str, dataset: str, name: str, barrier, results) -> None:  # noqa: ANN001
    ledger = Ledger(url)
    barrier.wait()
    try:
        ledger.reserve(dataset, CAP, name, [spend(0.5), spend(0.25, 1e-6)])
        results.put((name, "reserved"))
    except BudgetExceededError:
        results.put((name, "refused"))
    finally:
        ledger.close()


def test_concurrent_processes_never_overspend(ledger_url, dataset):
    """8 processes each want 0.75 of a cap of 3.0 at the same instant: exactly 4 get it."""
    Ledger(ledger_url).close()  # tables exist before the race starts
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(8)
    results = context.Queue()
    processes = [
        context.Process(
            target=_reserve_in_process, args=(ledger_url, dataset, f"run-{i}", barrier, results)
        )
        for i in range(8)
    ]
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert sorted(outcomes.values()).count("reserved") == 4
    with Ledger(ledger_url) as ledger:
        spent = ledger.spent(dataset)
        entries = ledger.entries(dataset)
    assert spent.epsilon == pytest.approx(3.0) and spent.epsilon <= CAP.epsilon + 1e-12
    assert spent.delta <= CAP.delta
    reserved = {name for name, outcome in outcomes.items() if outcome == "reserved"}
    assert {entry.release_id for entry in entries} == reserved
