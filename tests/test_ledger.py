"""The privacy-budget ledger on SQLite and, when DPRELEASE_TEST_POSTGRES_URL is set, on a real
PostgreSQL server (unreachable then means failure, not a skip)."""

from __future__ import annotations

import multiprocessing
import os
import uuid

import pytest
from ledger_race import CAP, reserve_in_process, spend
from sqlalchemy import update

from dprelease.errors import BudgetExceededError, InputError
from dprelease.privacy.accountants import compose_history, releases_that_fit
from dprelease.privacy.accounting import Cap, PlannedSpend, Spend
from dprelease.privacy.calibration import gaussian_sigma
from dprelease.privacy.ledger import ledger as ledger_module
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.privacy.ledger.location import resolve_ledger_url
from dprelease.privacy.ledger.tables import datasets
from dprelease.privacy.ledger.view import ledger_summary_lines
from dprelease.privacy.mechanisms import ZCDP, Gaussian, Laplace, PoissonSubsampledGaussian

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
        with pytest.raises(BudgetExceededError, match="already spent") as refused:
            ledger.check_available(dataset, CAP, [spend(1.5)])
        assert f"does not fit in what remains (`dprelease ledger show {dataset}`)" in str(
            refused.value
        )
        with pytest.raises(BudgetExceededError, match="alone needs more than the dataset's"):
            ledger.check_available(dataset, CAP, [spend(3.5)])
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


def test_the_caps_tolerance_is_relative_on_a_tiny_delta(ledger_url, dataset):
    cap = Spend(1.0, 1e-12)
    with Ledger(ledger_url) as ledger:
        with pytest.raises(BudgetExceededError):
            ledger.reserve(dataset, cap, "a", [spend(0.1, 1.5e-12)])
        ledger.reserve(dataset, cap, "b", [spend(0.1, 0.7e-12)])
        with pytest.raises(BudgetExceededError):
            ledger.reserve(dataset, cap, "c", [spend(0.1, 0.7e-12)])
        ledger.reserve(dataset, cap, "d", [spend(0.1, 0.3e-12)])  # 0.7 + 0.3 rounds to the cap
        assert ledger.spent(dataset).delta == pytest.approx(1e-12, rel=1e-12)


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


def test_unknown_dataset_summary(ledger_url, dataset, monkeypatch):
    """The error names the datasets the ledger does hold (a curator who forgot a name)."""
    with Ledger(ledger_url) as ledger:
        with pytest.raises(InputError, match="has no entries") as unknown:
            ledger.summary("never-released")
        assert dataset not in str(unknown.value)
        ledger.reserve(dataset, CAP, "r1", [spend(0.5)])
        ledger.reserve(f"{dataset}-2", CAP, "r1", [spend(0.5)])
        monkeypatch.setattr(ledger_module, "SHOWN_DATASETS", 10**6)  # a shared ledger: all
        with pytest.raises(InputError, match=f"its datasets: .*'{dataset}'"):
            ledger.summary("never-released")
        with pytest.raises(InputError, match=f"its datasets: .*'{dataset}'"):
            ledger.composition("never-released")
        monkeypatch.setattr(ledger_module, "SHOWN_DATASETS", 1)
        with pytest.raises(InputError, match=r"its datasets: '[^']+' and \d+ more\)"):
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


def test_concurrent_processes_never_overspend(ledger_url, dataset):
    """8 processes each want 0.75 of a cap of 3.0 at the same instant: exactly 4 get it.
    They are forked from a forkserver (a fresh single-threaded process, unlike this one) that
    imported the ledger's modules once; each opens its own connection."""
    Ledger(ledger_url).close()  # tables exist before the race starts
    context = multiprocessing.get_context("forkserver")
    # Heeded when the forkserver starts (its first process). It does not see tests/ (not on
    # its sys.path), so it preloads what `ledger_race` imports.
    context.set_forkserver_preload(
        [
            "dprelease.errors",
            "dprelease.privacy.accounting",
            "dprelease.privacy.ledger.ledger",
            "sqlite3",
            "psycopg",
        ]
    )
    barrier = context.Barrier(8)
    results = context.Queue()
    processes = [
        context.Process(
            target=reserve_in_process, args=(ledger_url, dataset, f"run-{i}", barrier, results)
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


# --- typed descriptions and the tight accountant --------------------------------------------


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


def test_rdp_dataset_admits_more_gaussian_releases_than_basic(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        basic, _ = _count_releases(ledger, f"{dataset}-basic", Cap(3.0, 1e-5, "basic"))
        tight, refusal = _count_releases(ledger, dataset, Cap(3.0, 1e-5, "rdp"))
        composition = ledger.composition(dataset)
    assert basic == 6 and tight > basic
    assert "under rdp composition" in refusal and "the rdp filter needs epsilon=" in refusal
    assert composition.accountant == "rdp"
    assert composition.enforced.epsilon <= 3.0 < composition.basic.epsilon
    assert composition.enforced.delta == 1e-5


def test_a_pld_dataset_is_enforced_with_the_renyi_filter_not_pld(ledger_url, dataset):
    """PLD has no filter proof, so it never admits a release. A dataset registered as pld is
    enforced with rdp and says so; the PLD figure is reported, and it would admit the release
    the filter refuses."""
    cap = Cap(3.0, 1e-5, "pld")
    release = [gaussian_release()]
    with Ledger(ledger_url) as ledger:
        ledger.reserve(dataset, Cap(3.0, 1e-5, "basic"), "r0", release)
        with ledger.engine.begin() as conn:  # a ledger written before: recorded as pld
            recorded = update(datasets).where(datasets.c.name == dataset)
            conn.execute(recorded.values(accountant="pld"))
        count, refusal = _count_releases(ledger, dataset, cap)
        composition = ledger.composition(dataset)
        summary = ledger.summary(dataset)
        assert ledger.cap(dataset).accountant == "pld"
        ledger.check_available(dataset, Cap(3.0, 1e-5, "rdp"), [])  # pld and rdp agree
    assert count + 1 == releases_that_fit([], release, cap, "rdp")
    assert "under rdp composition" in refusal
    assert composition.fits(cap) and composition.accountant == "rdp"
    refused = compose_history(release * (count + 2), cap, "pld", report_pld=True)
    assert not refused.fits(cap) and refused.fixed_in_advance.fits_within(cap)
    assert summary["accountant"] == "rdp" and summary["recorded_accountant"] == "pld"
    assert summary["reported"]["pld"]["valid_for"] == (
        "valid for a sequence of mechanisms fixed in advance"
    )
    assert summary["notes"][0].startswith("recorded accountant pld: PLD composition is not")
    lines = ledger_summary_lines(summary)
    recorded = "accountant: rdp (recorded as pld; every release is checked against the cap"
    assert recorded in lines[0]
    assert any(line.startswith("   pld: epsilon=") and "reported only" in line for line in lines)


def test_accountant_is_recorded_with_the_cap_and_cannot_change(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        ledger.reserve(dataset, Spend(3.0, 1e-5), "r1", [spend(1.0)])
        # docs/privacy-model.md section 7: basic unless a tighter accountant is configured.
        assert ledger.cap(dataset) == Cap(3.0, 1e-5, "basic")  # the default for a new dataset
        ledger.reserve(dataset, Cap(3.0, 1e-5, None), "r2", [spend(0.5)])
        with pytest.raises(InputError, match="accountant cannot change"):
            ledger.reserve(dataset, Cap(3.0, 1e-5, "rdp"), "r3", [spend(0.5)])
        # A new dataset asking for pld is recorded with the accountant that enforces it.
        ledger.reserve(f"{dataset}-b", Cap(3.0, 1e-5, "pld"), "r1", [spend(1.0)])
        assert ledger.cap(f"{dataset}-b").accountant == "rdp"
        ledger.reserve(f"{dataset}-b", Cap(3.0, 1e-5, "pld"), "r2", [spend(1.0)])


def test_descriptions_are_stored_and_commit_keeps_them_honest(ledger_url, dataset):
    laplace = PlannedSpend("laplace", 1.0, 0.0, {}, Laplace(2.0, 2.0))
    with Ledger(ledger_url) as ledger:
        first, generic, third = ledger.reserve(
            dataset, CAP, "r1", [laplace, spend(0.5, 1e-6), laplace]
        )
        ledger.commit(generic, gaussian_release(0.4, 1e-7))  # a generic reservation: refined
        with pytest.raises(RuntimeError, match="ran a different mechanism"):
            ledger.commit(first, PlannedSpend("laplace", 1.0, 0.0, {}, Laplace(1.0, 1.0)))
        # No description keeps the reserved one, which must still hold at the committed
        # values: Laplace(2, 2) is 1-DP, not 0.9-DP.
        with pytest.raises(RuntimeError, match=r"is \(1, 0\)-DP, more than the \(0.9, 0\)"):
            ledger.commit(third, PlannedSpend("laplace", 0.9, 0.0))
        ledger.commit(third, PlannedSpend("laplace", 1.0, 0.0))
        by_id = {entry.id: entry for entry in ledger.entries(dataset)}
    assert by_id[first].description == Laplace(2.0, 2.0).to_dict()
    assert by_id[first].status == "reserved"
    assert by_id[generic].description == gaussian_release(0.4, 1e-7).description.to_dict()
    assert by_id[third].description == Laplace(2.0, 2.0).to_dict()


def test_summary_shows_both_accountants_and_the_releases_that_fit(ledger_url, dataset):
    with Ledger(ledger_url) as ledger:
        for release in ("r1", "r2"):
            ledger.reserve(dataset, Cap(3.0, 1e-5, "rdp"), release, [gaussian_release()])
        summary = ledger.summary(dataset)
    assert summary["accountant"] == summary["recorded_accountant"] == "rdp"
    assert summary["spent"] == {"epsilon": 1.0, "delta": 2e-6}  # the entries' sums, as before
    rdp, basic = summary["by_accountant"]["rdp"], summary["by_accountant"]["basic"]
    assert list(summary["by_accountant"]) == ["rdp", "basic"]
    assert basic == {
        "spent": {"epsilon": 1.0, "delta": 2e-6},
        "remaining": {"epsilon": 2.0, "delta": pytest.approx(8e-6)},
    }
    assert rdp["spent"]["delta"] == 1e-5 and rdp["spent"]["epsilon"] < 2.0
    assert rdp["remaining"] == {"epsilon": 3.0 - rdp["spent"]["epsilon"], "delta": None}
    pld = summary["reported"]["pld"]["spent"]
    assert pld["delta"] == 1e-5 and pld["epsilon"] < rdp["spent"]["epsilon"]
    fits = summary["last_release"]["releases_that_fit"]
    assert fits["basic"] == 4 and fits["rdp"] > 4
    assert {entry["accounted_as"] for entry in summary["entries"]} == {"rdp"}
    lines = ledger_summary_lines(summary)
    assert lines[0].startswith("cap: epsilon=3, delta=1e-05; accountant: rdp (recorded with")
    assert any(
        line.startswith("   rdp: spent epsilon=") and line.endswith("at the cap's delta")
        for line in lines
    )
    assert any(line.startswith(" basic: spent epsilon=1, delta=2e-06") for line in lines)
    assert any(
        line.endswith(
            f"that fit: {fits['rdp']} under rdp, which enforces the cap; basic composition "
            "alone would admit 4"
        )
        for line in lines
    )


def test_the_ledger_totals_artifact_fits_the_prefect_ui(ledger_url, dataset):
    """The Prefect UI shows a table artifact at most 1,400 px wide: four columns, each pair
    of epsilon and delta in one cell, at most 100 characters a row with the headers (about
    1,000 px with the UI's padding); every accountant's spend, remaining and cap shown."""
    from dprelease.orchestration.tasks.artifacts import ledger_totals

    with Ledger(ledger_url) as ledger:
        for release in ("r1", "r2", "r3"):
            spends = [gaussian_release(0.5, 1e-7 / 3)]
            ledger.reserve(dataset, Cap(3.0, 1e-5, "rdp"), release, spends)
        rows = ledger_totals(ledger.summary(dataset))
    assert [row["accountant"] for row in rows] == [
        "rdp (enforces the cap)",
        "basic (sum of the entries)",
        "pld (reported only)",
    ]
    assert all(list(row) == ["accountant", "spent", "remaining", "cap"] for row in rows)
    widths = [max(len(column), *(len(row[column]) for row in rows)) for column in rows[0]]
    assert sum(widths) <= 100, rows
    assert rows[1]["spent"] == "ε 1.5, δ 1e-7" and rows[1]["cap"] == "ε 3, δ 1e-5"
    assert rows[0]["remaining"].endswith("at the cap's δ")


def test_a_ledger_without_description_columns_is_migrated_under_basic(tmp_path):
    """Tables without the accountant and description columns keep working, under basic."""
    import sqlite3
    from datetime import datetime

    stamp = datetime(2026, 1, 1).isoformat(sep=" ")  # a stored time, as SQLite keeps it
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(
            f"""
            CREATE TABLE dprelease_datasets (name VARCHAR(128) PRIMARY KEY,
                cap_epsilon FLOAT NOT NULL, cap_delta FLOAT NOT NULL,
                created_at DATETIME NOT NULL);
            CREATE TABLE dprelease_ledger_entries (id INTEGER PRIMARY KEY AUTOINCREMENT,
                dataset VARCHAR(128) NOT NULL REFERENCES dprelease_datasets (name),
                release_id VARCHAR(64) NOT NULL, mechanism VARCHAR(64) NOT NULL,
                epsilon FLOAT NOT NULL, delta FLOAT NOT NULL, neighbouring VARCHAR(32) NOT NULL,
                params JSON NOT NULL, status VARCHAR(16) NOT NULL,
                reserved_at DATETIME NOT NULL, committed_at DATETIME);
            INSERT INTO dprelease_datasets VALUES ('old', 3.0, 1e-5, '{stamp}');
            INSERT INTO dprelease_ledger_entries VALUES (1, 'old', 'r0', 'laplace', 2.0, 0.0,
                'add/remove-one', '{{}}', 'spent', '{stamp}', NULL);
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


def test_reserve_composes_a_100_entry_history(tmp_path):
    """Worst case: every entry a different mechanism, Rényi curves not cached yet (its speed
    is measured by benchmarks/accounting.py, not here)."""
    from dprelease.privacy import accountants, rdp_filter

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    cap = Cap(1000.0, 1e-3, "rdp")
    planned = [
        PlannedSpend("laplace", 0.05, 0.0, {}, Laplace(20.0 + i / 100, 1.0)) for i in range(100)
    ]
    with Ledger(url) as ledger:
        ledger.reserve("d", cap, "history", planned)
        rdp_filter.rdp_curve.cache_clear()
        ledger.reserve("d", cap, "next", [gaussian_release()])
        composition = accountants.compose_history([*planned, gaussian_release()], cap, "rdp")
    assert composition.methods == ("rdp",) * 101


# --- commits that understate, deltas no cap can hold ----------------------------------------


def test_a_commit_that_understates_its_mechanism_is_refused(ledger_url, dataset):
    """Item 7: replacing a generic reservation with a Gaussian, DP-SGD or zCDP description is
    checked at the committed (epsilon, delta): the mechanism must be that private."""
    with Ledger(ledger_url) as ledger:
        ids = ledger.reserve(dataset, CAP, "r1", [spend(0.7, 1e-6) for _ in range(4)])
        loud = gaussian_sigma(1.0, 2.0, 1e-7)  # a Gaussian that is (2, 1e-7)-DP ...
        understated = PlannedSpend("gaussian", 0.5, 1e-7, {}, Gaussian(loud, 1.0))  # ... as 0.5
        with pytest.raises(RuntimeError, match=r"refusing to commit: gaussian: its mechanism"):
            ledger.commit(ids[0], understated)
        dpsgd = PoissonSubsampledGaussian(0.6, 0.05, 400)  # epsilon 29 at 1e-7
        with pytest.raises(RuntimeError, match="less private than the"):
            ledger.commit(ids[1], PlannedSpend("dpsgd", 0.7, 1e-7, {}, dpsgd))
        with pytest.raises(RuntimeError, match="less private than the"):
            ledger.commit(ids[2], PlannedSpend("aim", 0.5, 1e-7, {}, ZCDP(0.5)))
        ledger.commit(ids[3], gaussian_release(0.5, 1e-7))  # honest: exactly (0.5, 1e-7)-DP
        entries = {entry.id: entry for entry in ledger.entries(dataset)}
    assert [entries[i].status for i in ids] == ["reserved"] * 3 + ["spent"]
    assert entries[ids[3]].description["kind"] == "gaussian"


def test_a_reservation_that_understates_its_mechanism_is_refused(ledger_url, dataset):
    loud = gaussian_sigma(1.0, 2.0, 1e-7)
    understated = PlannedSpend("gaussian", 0.5, 1e-7, {}, Gaussian(loud, 1.0))
    with Ledger(ledger_url) as ledger:
        with pytest.raises(InputError, match="less private than the"):
            ledger.check_available(dataset, CAP, [understated])
        with pytest.raises(InputError, match="less private than the"):
            ledger.reserve(dataset, CAP, "r1", [understated])
        assert ledger.entries(dataset) == []


@pytest.mark.parametrize("accountant", ["basic", "rdp", "pld"])
def test_a_delta_larger_than_the_caps_is_refused_before_anything_is_spent(
    ledger_url, dataset, accountant
):
    """Item 8: `--delta 0.5` put (0.2, 0.1) on the weights against a cap delta of 1e-5, and
    the pld accountant admitted it (its epsilon at 1e-5 fitted). No accountant may: the
    release states delta 0.1."""
    cap = Cap(10.0, 1e-5, accountant)
    weights = gaussian_release(0.2, 0.1)
    with Ledger(ledger_url) as ledger:
        with pytest.raises(BudgetExceededError, match=r"delta=0.1 exceeds the cap's delta=1e-05"):
            ledger.check_available(dataset, cap, [weights])
        with pytest.raises(BudgetExceededError, match="exceeds the cap's delta"):
            ledger.reserve(dataset, cap, "r1", [spend(0.8), weights])
        assert ledger.entries(dataset) == []
        ledger.reserve(dataset, cap, "r2", [spend(0.8), gaussian_release(0.2, 1e-5)])


def test_an_rdp_dataset_takes_generic_spends_against_half_its_delta(ledger_url, dataset):
    """Spends known only by (epsilon, delta > 0) take their deltas from half the cap's delta;
    a commit refining one keeps it generic on an rdp dataset (its charge must not grow)."""
    cap = Cap(3.0, 1e-5, "rdp")
    with Ledger(ledger_url) as ledger:
        (entry,) = ledger.reserve(dataset, cap, "r1", [spend(0.5, 4e-6, "weights")])
        with pytest.raises(BudgetExceededError, match="under rdp composition"):
            ledger.reserve(dataset, cap, "r2", [spend(0.5, 2e-6, "weights")])  # 6e-6 > 5e-6
        ledger.reserve(dataset, cap, "r2", [spend(0.5)])  # pure: no delta needed
        ledger.commit(entry, gaussian_release(0.4, 1e-7))
        committed = ledger.entries(dataset)[0]
    assert committed.status == "spent" and committed.description is None
    assert (committed.epsilon, committed.delta) == (0.4, 1e-7)
