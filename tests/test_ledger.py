"""The privacy-budget ledger on SQLite and, when DPRELEASE_TEST_POSTGRES_URL is set, on a real
PostgreSQL server (unreachable then means failure, not a skip)."""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid

import pytest

from dprelease.errors import BudgetExceededError, InputError
from dprelease.privacy.accounting import Cap, PlannedSpend, Spend
from dprelease.privacy.calibration import gaussian_sigma
from dprelease.privacy.ledger import Ledger, resolve_ledger_url
from dprelease.privacy.ledger_view import ledger_summary_lines
from dprelease.privacy.mechanisms import Gaussian, Laplace

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
    """The default ledger is per installation: never under --out or the working directory."""
    for name in ("DPRELEASE_LEDGER_URL", "DPRELEASE_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    expected = f"sqlite:///{(tmp_path / 'home').resolve()}/.local/share/dprelease/ledger.sqlite"
    assert resolve_ledger_url() == expected
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    xdg = (tmp_path / "xdg").resolve()
    assert resolve_ledger_url() == f"sqlite:///{xdg}/dprelease/ledger.sqlite"
    monkeypatch.setenv("DPRELEASE_HOME", str(tmp_path / "dp"))
    assert resolve_ledger_url() == f"sqlite:///{(tmp_path / 'dp').resolve()}/ledger.sqlite"
    monkeypatch.setenv("DPRELEASE_LEDGER_URL", "sqlite:///x.db")
    assert resolve_ledger_url(None) == "sqlite:///x.db"
    assert resolve_ledger_url("postgresql://h/db") == "postgresql://h/db"


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


# --- typed descriptions and the tight accountant (issue 10) ---------------------------------


def gaussian_release(epsilon: float = 0.5, delta: float = 1e-6) -> PlannedSpend:
    sigma = gaussian_sigma(1.0, epsilon, delta)
    return PlannedSpend("gaussian", epsilon, delta, {}, Gaussian(sigma, 1.0))


def _count_releases(ledger: Ledger, dataset: str, cap: Spend) -> tuple[int, str]:
    for count in range(100):
        try:
            ledger.reserve(dataset, cap, f"r{count}", [gaussian_release()])
        except BudgetExceededError as refusal:
            return count, str(refusal)
    raise AssertionError("the cap never refused")


def test_pld_dataset_admits_more_gaussian_releases_than_basic(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        basic, _ = _count_releases(ledger, f"{dataset}-basic", Cap(3.0, 1e-5, "basic"))
        tight, refusal = _count_releases(ledger, dataset, Cap(3.0, 1e-5, "pld"))
        composition = ledger.composition(dataset)
    assert basic == 6 and tight > basic
    assert "under pld composition" in refusal and "pld composition gives epsilon=" in refusal
    assert composition.tight.epsilon <= 3.0 < composition.basic.epsilon
    assert composition.tight.delta == 1e-5


def test_accountant_is_recorded_with_the_cap_and_cannot_change(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        ledger.reserve(dataset, Spend(3.0, 1e-5), "r1", [spend(1.0)])
        # PRIVACY_MODEL.md section 7: basic unless a tighter accountant is configured.
        assert ledger.cap(dataset) == Cap(3.0, 1e-5, "basic")  # the default for a new dataset
        ledger.reserve(dataset, Cap(3.0, 1e-5, None), "r2", [spend(0.5)])
        with pytest.raises(InputError, match="accountant cannot change"):
            ledger.reserve(dataset, Cap(3.0, 1e-5, "pld"), "r3", [spend(0.5)])
        ledger.reserve(f"{dataset}-b", Cap(3.0, 1e-5, "pld"), "r1", [spend(1.0)])
        assert ledger.cap(f"{dataset}-b").accountant == "pld"


def test_descriptions_are_stored_and_commit_keeps_them_honest(ledger_url, dataset):
    laplace = PlannedSpend("laplace", 1.0, 0.0, {}, Laplace(2.0, 2.0))
    with Ledger(ledger_url) as ledger:
        first, generic, third = ledger.reserve(
            dataset, CAP, "r1", [laplace, spend(0.5, 1e-6), laplace]
        )
        ledger.commit(generic, gaussian_release(0.4, 1e-7))  # a generic reservation: refined
        with pytest.raises(RuntimeError, match="ran a different mechanism"):
            ledger.commit(first, PlannedSpend("laplace", 1.0, 0.0, {}, Laplace(1.0, 1.0)))
        ledger.commit(third, PlannedSpend("laplace", 0.9, 0.0))  # no description: keep it
        by_id = {entry.id: entry for entry in ledger.entries(dataset)}
    assert by_id[first].description == Laplace(2.0, 2.0).to_dict()
    assert by_id[first].status == "reserved"
    assert by_id[generic].description == gaussian_release(0.4, 1e-7).description.to_dict()
    assert by_id[third].description == Laplace(2.0, 2.0).to_dict()


def test_summary_shows_both_accountants_and_the_releases_that_fit(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        for release in ("r1", "r2"):
            ledger.reserve(dataset, Cap(3.0, 1e-5, "pld"), release, [gaussian_release()])
        summary = ledger.summary(dataset)
    assert summary["accountant"] == "pld"
    assert summary["spent"] == {"epsilon": 1.0, "delta": 2e-6}  # the entries' sums, as before
    pld, basic = summary["by_accountant"]["pld"], summary["by_accountant"]["basic"]
    assert list(summary["by_accountant"]) == ["pld", "basic"]
    assert basic == {
        "spent": {"epsilon": 1.0, "delta": 2e-6},
        "remaining": {"epsilon": 2.0, "delta": pytest.approx(8e-6)},
    }
    assert pld["spent"]["delta"] == 1e-5 and pld["spent"]["epsilon"] < 1.0
    assert pld["remaining"] == {"epsilon": 3.0 - pld["spent"]["epsilon"], "delta": None}
    fits = summary["last_release"]["releases_that_fit"]
    assert fits["basic"] == 4 and fits["pld"] > 4
    assert {entry["accounted_as"] for entry in summary["entries"]} == {"pld"}
    lines = ledger_summary_lines(summary)
    assert lines[0].startswith("cap: epsilon=3, delta=1e-05; accountant: pld")
    assert any(
        line.startswith("   pld: spent epsilon=") and line.endswith("at that delta")
        for line in lines
    )
    assert any(line.startswith(" basic: spent epsilon=1, delta=2e-06") for line in lines)
    assert lines[-1].endswith(f"that fit: pld {fits['pld']}, basic 4")


def test_a_ledger_from_before_descriptions_is_migrated(tmp_path):
    """Old tables (no accountant, no description column) keep working, under basic."""
    import sqlite3

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE dprelease_datasets (name VARCHAR(128) PRIMARY KEY,
                cap_epsilon FLOAT NOT NULL, cap_delta FLOAT NOT NULL,
                created_at DATETIME NOT NULL);
            CREATE TABLE dprelease_ledger_entries (id INTEGER PRIMARY KEY AUTOINCREMENT,
                dataset VARCHAR(128) NOT NULL REFERENCES dprelease_datasets (name),
                release_id VARCHAR(64) NOT NULL, mechanism VARCHAR(64) NOT NULL,
                epsilon FLOAT NOT NULL, delta FLOAT NOT NULL, neighbouring VARCHAR(32) NOT NULL,
                params JSON NOT NULL, status VARCHAR(16) NOT NULL,
                reserved_at DATETIME NOT NULL, committed_at DATETIME);
            INSERT INTO dprelease_datasets VALUES ('old', 3.0, 1e-5, '2026-01-01 00:00:00');
            INSERT INTO dprelease_ledger_entries VALUES (1, 'old', 'r0', 'laplace', 2.0, 0.0,
                'add/remove-one', '{}', 'spent', '2026-01-01 00:00:00', NULL);
            """
        )
    with Ledger(f"sqlite:///{path}") as ledger:
        assert ledger.cap("old") == Cap(3.0, 1e-5, "basic")
        (entry,) = ledger.entries("old")
        assert entry.description is None and entry.epsilon == 2.0
        with pytest.raises(BudgetExceededError, match="under basic composition"):
            ledger.reserve("old", Spend(3.0, 1e-5), "r1", [gaussian_release(1.5, 1e-7)])
        ledger.reserve("old", Spend(3.0, 1e-5), "r1", [gaussian_release(1.0, 1e-7)])
        assert ledger.spent("old") == Spend(3.0, 1e-7)
        summary = ledger.summary("old")
    assert list(summary["by_accountant"]) == ["basic"]
    assert summary["last_release"]["releases_that_fit"] == {"basic": 0}
    assert [entry["accounted_as"] for entry in summary["entries"]] == ["basic", "basic"]
    with Ledger(f"sqlite:///{path}") as reopened:  # migrating twice is harmless
        assert reopened.entries("old")[-1].description["kind"] == "gaussian"


def test_reserve_with_a_100_entry_history_is_fast(tmp_path):
    """Worst case: every entry a different mechanism, PLDs not cached yet. Under the lock only
    the composition of cached PLDs runs (benchmarks/accounting.py: ~0.03 s); generous bounds
    for a loaded machine."""
    from dprelease.privacy import accountants

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    cap = Cap(1000.0, 1e-3, "pld")
    planned = [
        PlannedSpend("laplace", 0.05, 0.0, {}, Laplace(20.0 + i / 100, 1.0)) for i in range(100)
    ]
    with Ledger(url) as ledger:
        ledger.reserve("d", cap, "history", planned)
        accountants._single_pld.cache_clear()
        accountants._repeated_pld.cache_clear()
        started = time.perf_counter()
        ledger.reserve("d", cap, "next", [gaussian_release()])
        whole = time.perf_counter() - started
        started = time.perf_counter()
        composition = accountants.compose_history([*planned, gaussian_release()], cap, "pld")
        locked = time.perf_counter() - started
    assert whole < 2.0 and locked < 0.5
    assert composition.methods == ("pld",) * 101
