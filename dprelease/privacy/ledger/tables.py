"""Storage of the privacy-budget ledger: its two tables, their in-place migration, engines.

Tables: `dprelease_datasets` (one row per dataset: its cap and accountant) and
`dprelease_ledger_entries` (one row per mechanism's spend, with its typed description as
JSON). `add_missing_columns` migrates ledgers created before a column existed (nullable
columns only; see `dprelease.privacy.ledger.ledger`). `make_engine` sets up the locking the ledger
relies on: on SQLite every transaction starts with ``BEGIN IMMEDIATE`` (a database-wide write
lock); PostgreSQL uses row locks (``SELECT ... FOR UPDATE``) taken by the ledger.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
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
    inspect,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import StaticPool

metadata = MetaData()
datasets = Table(
    "dprelease_datasets",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("cap_epsilon", Double, nullable=False),
    Column("cap_delta", Double, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("accountant", String(16), nullable=True),  # NULL: registered before, basic
)
entries = Table(
    "dprelease_ledger_entries",
    metadata,
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
    Column("description", JSON, nullable=True),  # mechanisms.mechanism_to_dict, or NULL
)
ADDED_COLUMNS = (datasets.c.accountant, entries.c.description)


def add_missing_columns(engine: Engine) -> None:
    """Migrate a ledger created before `ADDED_COLUMNS` existed (nullable columns)."""
    for column in ADDED_COLUMNS:
        table = column.table.name
        if column.name in {c["name"] for c in inspect(engine).get_columns(table)}:
            continue
        kind = column.type.compile(dialect=engine.dialect)
        guard = "" if engine.dialect.name == "sqlite" else "IF NOT EXISTS "
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {guard}{column.name} {kind}")
        except SQLAlchemyError:
            # Another process added it at the same moment; fail only if it is still missing.
            if column.name not in {c["name"] for c in inspect(engine).get_columns(table)}:
                raise


def make_engine(url: str) -> Engine:
    """An engine for a ledger URL; SQLite transactions take the write lock when they begin."""
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
    description: dict | None = None  # JSON form of its mechanisms.Mechanism

    def as_dict(self) -> dict:
        return asdict(self)
