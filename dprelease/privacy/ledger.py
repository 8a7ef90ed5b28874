"""The persistent privacy-budget ledger (PRIVACY_MODEL.md section 7), on SQLAlchemy.

Protocol of a release:
1. `check_available` (read-only) refuses a plan that cannot fit before the data is read.
2. `reserve` inserts the planned spends in ONE transaction that first locks the dataset's
   row and re-checks the cap under basic composition; it fails closed with
   `BudgetExceededError`. Only after it returns may a mechanism see the real data.
3. `commit` records the actual spend (never more than reserved) and the mechanism's final
   parameters once it ran.
A reservation is never given back: a run that dies after reserving keeps its spend (it may
have touched the data), and a retry is a new spend.

Locking: on PostgreSQL the dataset row is locked with ``SELECT ... FOR UPDATE``, so
concurrent reservations on one dataset run one after another and never overspend. On SQLite
every transaction starts with ``BEGIN IMMEDIATE`` (a database-wide write lock), which gives the
same guarantee for processes on one machine; a SQLite file on shared network storage is not
safe, use PostgreSQL there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Double,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from dprelease.errors import BudgetExceededError, InputError
from dprelease.privacy.accounting import NEIGHBOURING, PlannedSpend, Spend, compose

RESERVED = "reserved"
SPENT = "spent"

_metadata = MetaData()
_datasets = Table(
    "dprelease_datasets",
    _metadata,
    Column("name", String(128), primary_key=True),
    Column("cap_epsilon", Double, nullable=False),
    Column("cap_delta", Double, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
_entries = Table(
    "dprelease_ledger_entries",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "dataset", String(128), ForeignKey("dprelease_datasets.name"), nullable=False, index=True
    ),
    Column("release_id", String(64), nullable=False),
    Column("mechanism", String(64), nullable=False),
    Column("epsilon", Double, nullable=False),
    Column("delta", Double, nullable=False),
    Column("neighbouring", String(32), nullable=False),
    Column("params", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("reserved_at", DateTime(timezone=True), nullable=False),
    Column("committed_at", DateTime(timezone=True), nullable=True),
)


@dataclass(frozen=True)
class LedgerEntry:
    """One mechanism's spend on one dataset."""

    id: int
    dataset: str
    release_id: str
    mechanism: str
    epsilon: float
    delta: float
    neighbouring: str
    params: dict
    status: str
    reserved_at: str
    committed_at: str | None

    def as_dict(self) -> dict:
        return asdict(self)


class Ledger:
    """Privacy-budget ledger at a SQLAlchemy URL (SQLite file or PostgreSQL)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = _make_engine(url)
        try:
            _metadata.create_all(self.engine)
        except SQLAlchemyError:
            # Another process created the tables at the same moment; they exist now.
            _metadata.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def check_available(self, dataset: str, cap: Spend, planned: Sequence[PlannedSpend]) -> None:
        """Refuse (without writing) a plan that would exceed the cap right now."""
        with self.engine.begin() as conn:
            stored_cap = self._stored_cap(conn, dataset)
            _check_cap_matches(dataset, stored_cap, cap)
            _check_fits(dataset, cap, self._spent(conn, dataset), planned)

    def reserve(
        self, dataset: str, cap: Spend, release_id: str, planned: Sequence[PlannedSpend]
    ) -> tuple[int, ...]:
        """Atomically check the cap and reserve every planned spend; return the entry ids."""
        if not planned:
            raise ValueError("nothing to reserve")
        self._register(dataset, cap)
        now = datetime.now(UTC)
        with self.engine.begin() as conn:
            locked = conn.execute(
                select(_datasets.c.cap_epsilon, _datasets.c.cap_delta)
                .where(_datasets.c.name == dataset)
                .with_for_update()
            ).one()
            _check_cap_matches(dataset, Spend(*locked), cap)
            _check_fits(dataset, cap, self._spent(conn, dataset), planned)
            ids = []
            for spend in planned:
                result = conn.execute(
                    insert(_entries).values(
                        dataset=dataset,
                        release_id=release_id,
                        mechanism=spend.mechanism,
                        epsilon=spend.epsilon,
                        delta=spend.delta,
                        neighbouring=NEIGHBOURING,
                        params=_jsonable(spend.params),
                        status=RESERVED,
                        reserved_at=now,
                    )
                )
                ids.append(int(result.inserted_primary_key[0]))
        return tuple(ids)

    def commit(self, entry_id: int, actual: PlannedSpend) -> None:
        """Record the actual spend of a reserved entry; it may not exceed the reservation."""
        with self.engine.begin() as conn:
            row = conn.execute(
                select(
                    _entries.c.epsilon, _entries.c.delta, _entries.c.status, _entries.c.mechanism
                )
                .where(_entries.c.id == entry_id)
                .with_for_update()
            ).one_or_none()
            if row is None or row.status != RESERVED:
                raise RuntimeError(f"ledger entry {entry_id} is not an open reservation")
            if not Spend(actual.epsilon, actual.delta).fits_within(Spend(row.epsilon, row.delta)):
                raise RuntimeError(
                    f"{row.mechanism} spent more than it reserved: refusing to record "
                    f"({actual.epsilon}, {actual.delta}) > ({row.epsilon}, {row.delta})"
                )
            conn.execute(
                update(_entries)
                .where(_entries.c.id == entry_id)
                .values(
                    epsilon=actual.epsilon,
                    delta=actual.delta,
                    params=_jsonable(actual.params),
                    status=SPENT,
                    committed_at=datetime.now(UTC),
                )
            )

    def cap(self, dataset: str) -> Spend | None:
        with self.engine.connect() as conn:
            return self._stored_cap(conn, dataset)

    def spent(self, dataset: str) -> Spend:
        with self.engine.connect() as conn:
            return self._spent(conn, dataset)

    def entries(self, dataset: str, *, up_to_id: int | None = None) -> list[LedgerEntry]:
        query = select(_entries).where(_entries.c.dataset == dataset).order_by(_entries.c.id)
        if up_to_id is not None:
            query = query.where(_entries.c.id <= up_to_id)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            LedgerEntry(
                **{
                    **row,
                    "params": dict(row["params"]),
                    "reserved_at": _iso(row["reserved_at"]),
                    "committed_at": _iso(row["committed_at"]),
                }
            )
            for row in rows
        ]

    def summary(self, dataset: str) -> dict:
        """The JSON of `dprelease ledger show --json`."""
        cap = self.cap(dataset)
        if cap is None:
            raise InputError(f"dataset {dataset!r} has no entries in the ledger at {self.url}")
        spent = self.spent(dataset)
        return {
            "dataset": dataset,
            "cap": {"epsilon": cap.epsilon, "delta": cap.delta},
            "spent": {"epsilon": spent.epsilon, "delta": spent.delta},
            "entries": [entry.as_dict() for entry in self.entries(dataset)],
        }

    def _register(self, dataset: str, cap: Spend) -> None:
        try:
            with self.engine.begin() as conn:
                if self._stored_cap(conn, dataset) is None:
                    conn.execute(
                        insert(_datasets).values(
                            name=dataset,
                            cap_epsilon=cap.epsilon,
                            cap_delta=cap.delta,
                            created_at=datetime.now(UTC),
                        )
                    )
        except IntegrityError:
            pass  # registered concurrently by another run; reserve() compares the caps

    @staticmethod
    def _stored_cap(conn: Connection, dataset: str) -> Spend | None:
        row = conn.execute(
            select(_datasets.c.cap_epsilon, _datasets.c.cap_delta).where(
                _datasets.c.name == dataset
            )
        ).one_or_none()
        return None if row is None else Spend(*row)

    @staticmethod
    def _spent(conn: Connection, dataset: str) -> Spend:
        rows = conn.execute(
            select(_entries.c.epsilon, _entries.c.delta).where(_entries.c.dataset == dataset)
        ).all()
        return compose(Spend(*row) for row in rows)


def _check_cap_matches(dataset: str, stored: Spend | None, requested: Spend) -> None:
    if stored is not None and stored != requested:
        raise InputError(
            f"dataset {dataset!r}: the schema's budget (epsilon={requested.epsilon}, "
            f"delta={requested.delta}) differs from the cap recorded in the ledger "
            f"(epsilon={stored.epsilon}, delta={stored.delta}); a dataset's lifetime cap "
            "cannot change between releases"
        )


def _check_fits(dataset: str, cap: Spend, spent: Spend, planned: Sequence[PlannedSpend]) -> None:
    total = compose([spent, *planned])
    if not total.fits_within(cap):
        wanted = compose(planned)
        raise BudgetExceededError(
            f"dataset {dataset!r}: this release needs epsilon={wanted.epsilon:g}, "
            f"delta={wanted.delta:g}, but {spent.epsilon:g} of epsilon={cap.epsilon:g} and "
            f"{spent.delta:g} of delta={cap.delta:g} are already spent; refusing before "
            "reading the data"
        )


def _make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 120})
    else:  # in memory (throwaway ledgers of evaluations): one shared connection
        engine = create_engine(url, connect_args={"check_same_thread": False}, poolclass=StaticPool)

    @event.listens_for(engine, "connect")
    def _manual_transactions(dbapi_connection, _record) -> None:  # noqa: ANN001
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _write_lock(connection) -> None:  # noqa: ANN001
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _jsonable(params: dict) -> dict:
    return json.loads(json.dumps(params, default=float))


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()


LEDGER_URL_ENV = "DPRELEASE_LEDGER_URL"


IN_MEMORY_URL = "sqlite://"


def resolve_ledger_url(ledger_url: str | None, out_dir: str | Path) -> str:
    """--ledger, else $DPRELEASE_LEDGER_URL, else the SQLite file `OUT/ledger.sqlite`."""
    return (
        ledger_url
        or os.environ.get(LEDGER_URL_ENV)
        or f"sqlite:///{Path(out_dir).resolve() / 'ledger.sqlite'}"
    )
