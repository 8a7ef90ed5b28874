"""The persistent privacy-budget ledger (docs/privacy-model.md section 7), on SQLAlchemy.

Protocol of a release:
1. `check_available` (read-only) refuses a plan that cannot fit before the data is read.
2. `reserve` inserts the planned spends in ONE transaction that first locks the dataset's row
   and re-checks the cap with the accountant that enforces it (`basic` or `rdp`, recorded with
   the cap when the dataset is registered; a dataset recorded as `pld` is enforced with `rdp`;
   `dprelease.privacy.accountants`), composing the whole history plus the plan; it fails closed
   with `BudgetExceededError`. Only after it returns may a mechanism see the real data. Both
   steps first refuse a plan whose own delta exceeds the cap's delta: no accountant can ever
   admit it (`ledger.admission.refuse_impossible_delta`); and both check that every typed
   description is (epsilon, delta)-DP at the values it records (`guarantees.check_guarantee`).
3. `commit` records the actual spend (never more than reserved) and the mechanism's final
   parameters once it ran. Its typed description must be the reserved one, or replace a generic
   (epsilon, delta) reservation with a mechanism that is (epsilon, delta)-DP at the committed
   values (checked: `guarantees.check_guarantee`), those values within the reservation; any
   such mechanism is dominated by the reservation, so the checked composition only gets
   tighter. On an rdp dataset a generic reservation with delta > 0 keeps its generic
   description: the Rényi filter admitted it with that charge, which must not grow
   (`rdp_filter`).

Each entry stores its typed mechanism description (`dprelease.privacy.mechanisms`) in the
JSON column `description`, and each dataset its accountant. Ledgers created before these
columns existed are migrated in place (`ALTER TABLE ... ADD COLUMN`, nullable); their
datasets keep basic composition (NULL accountant) and their entries count as generic
(epsilon, delta) mechanisms.
Times: the ledger is public metadata (`ledger show`, a release's
`ledger.parquet`), and a reservation is made after the real table is read, a commit after the
mechanisms ran, so their clock times would time the data steps. Every time the ledger stores
(`reserved_at`, `committed_at`, a dataset's `created_at`) is therefore the UTC date only
(`today`: midnight UTC); the entries' order is their id, and a release's own time is its id,
taken before the data is read (`release.pipeline`).
A reservation is never given back: a run that dies after reserving keeps its spend (it may
have touched the data), and a retry is a new spend.

Locking: on PostgreSQL the dataset row is locked with ``SELECT ... FOR UPDATE``, so
concurrent reservations on one dataset run one after another and never overspend. On SQLite
every transaction starts with ``BEGIN IMMEDIATE`` (a database-wide write lock), which gives the
same guarantee for processes on one machine; a SQLite file on shared network storage is not
safe, use PostgreSQL there. The check under the lock composes Rényi curves (cached per
mechanism): milliseconds for a 100-entry history (benchmarks/accounting.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from dprelease.errors import InputError
from dprelease.privacy.accountants import (
    BASIC,
    DEFAULT_ACCOUNTANT,
    RDP,
    Composition,
    compose_history,
    enforcing,
)
from dprelease.privacy.accounting import (
    NEIGHBOURING,
    Cap,
    PlannedSpend,
    Spend,
    compose,
)
from dprelease.privacy.guarantees import check_guarantee
from dprelease.privacy.ledger import tables
from dprelease.privacy.ledger.admission import accountant_for, check_cap_matches, check_fits
from dprelease.privacy.ledger.tables import LedgerEntry
from dprelease.privacy.mechanisms import KIND_KEY, ApproxDP, mechanism_from_dict

RESERVED = "reserved"
SPENT = "spent"
SHOWN_DATASETS = 20  # an unknown dataset's error names at most this many of the ledger's


class Ledger:
    """Privacy-budget ledger at a SQLAlchemy URL (SQLite file or PostgreSQL)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = tables.make_engine(url)
        try:
            tables.metadata.create_all(self.engine)
        except SQLAlchemyError:
            # Another process created the tables at the same moment; they exist now.
            tables.metadata.create_all(self.engine)
        tables.add_missing_columns(self.engine)

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
            check_cap_matches(dataset, stored_cap, cap)
            accountant = accountant_for(stored_cap, cap)
            check_fits(dataset, cap, accountant, self._history(conn, dataset), planned)

    def reserve(
        self, dataset: str, cap: Spend, release_id: str, planned: Sequence[PlannedSpend]
    ) -> tuple[int, ...]:
        """Atomically check the cap and reserve every planned spend; return the entry ids."""
        if not planned:
            raise ValueError("nothing to reserve")
        self._register(dataset, cap)
        now = today()
        with self.engine.begin() as conn:
            locked = conn.execute(
                select(
                    tables.datasets.c.cap_epsilon,
                    tables.datasets.c.cap_delta,
                    tables.datasets.c.accountant,
                )
                .where(tables.datasets.c.name == dataset)
                .with_for_update()
            ).one()
            stored = Cap(locked.cap_epsilon, locked.cap_delta, locked.accountant or BASIC)
            check_cap_matches(dataset, stored, cap)
            history = self._history(conn, dataset)
            check_fits(dataset, cap, stored.accountant, history, planned)
            ids = []
            for spend in planned:
                result = conn.execute(
                    insert(tables.entries).values(
                        dataset=dataset,
                        release_id=release_id,
                        mechanism=spend.mechanism,
                        epsilon=spend.epsilon,
                        delta=spend.delta,
                        neighbouring=NEIGHBOURING,
                        params=_jsonable(spend.params),
                        status=RESERVED,
                        reserved_at=now,
                        description=_description_json(spend),
                    )
                )
                key = result.inserted_primary_key
                assert key is not None  # an insert has a primary key
                ids.append(int(key[0]))
        return tuple(ids)

    def commit(self, entry_id: int, actual: PlannedSpend) -> None:
        """Record the actual spend of a reserved entry; it may not exceed the reservation, and
        the description it keeps (new or reserved) must be (epsilon, delta)-DP at the committed
        values."""
        with self.engine.begin() as conn:
            row = conn.execute(
                select(
                    tables.entries.c.epsilon,
                    tables.entries.c.delta,
                    tables.entries.c.status,
                    tables.entries.c.mechanism,
                    tables.entries.c.description,
                    tables.entries.c.dataset,
                )
                .where(tables.entries.c.id == entry_id)
                .with_for_update()
            ).one_or_none()
            if row is None or row.status != RESERVED:
                raise RuntimeError(f"ledger entry {entry_id} is not an open reservation")
            if not Spend(actual.epsilon, actual.delta).fits_within(Spend(row.epsilon, row.delta)):
                raise RuntimeError(
                    f"{row.mechanism} spent more than it reserved: refusing to record "
                    f"({actual.epsilon}, {actual.delta}) > ({row.epsilon}, {row.delta})"
                )
            stored = self._stored_cap(conn, row.dataset)
            accountant = enforcing(stored.accountant if stored is not None else None)
            conn.execute(
                update(tables.entries)
                .where(tables.entries.c.id == entry_id)
                .values(
                    epsilon=actual.epsilon,
                    delta=actual.delta,
                    params=_jsonable(actual.params),
                    status=SPENT,
                    committed_at=today(),
                    description=_committed_description(row, actual, accountant),
                )
            )

    def cap(self, dataset: str) -> Cap | None:
        """The dataset's cap with its accountant (None: never registered)."""
        with self.engine.connect() as conn:
            return self._stored_cap(conn, dataset)

    def spent(self, dataset: str) -> Spend:
        """Basic composition of the dataset's entries (see `composition` for its accountant)."""
        with self.engine.connect() as conn:
            return compose(self._history(conn, dataset))

    def composition(self, dataset: str) -> Composition:
        """The dataset's history composed with its enforcing accountant, at its cap's delta
        (with the reported PLD figure for rdp datasets)."""
        with self.engine.connect() as conn:
            cap = self._stored_cap(conn, dataset)
            history = self._history(conn, dataset)
        if cap is None:
            raise self._unknown(dataset)
        return compose_history(history, cap, cap.accountant, report_pld=True)

    def entries(self, dataset: str, *, up_to_id: int | None = None) -> list[LedgerEntry]:
        query = (
            select(tables.entries)
            .where(tables.entries.c.dataset == dataset)
            .order_by(tables.entries.c.id)
        )
        if up_to_id is not None:
            query = query.where(tables.entries.c.id <= up_to_id)
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
        """The JSON of `dprelease ledger show --json` (`ledger.view.summarise`)."""
        from dprelease.privacy.ledger.view import summarise

        cap = self.cap(dataset)
        if cap is None:
            raise self._unknown(dataset)
        return summarise(dataset, cap, self.entries(dataset))

    def datasets(self) -> list[str]:
        """The names of the datasets this ledger holds a cap for (public schema names)."""
        with self.engine.connect() as conn:
            return list(
                conn.scalars(select(tables.datasets.c.name).order_by(tables.datasets.c.name))
            )

    def _unknown(self, dataset: str) -> InputError:
        """The error for a dataset the ledger does not hold, naming the ones it does."""
        held = self.datasets()
        names = ", ".join(repr(name) for name in held[:SHOWN_DATASETS]) or "none yet"
        if len(held) > SHOWN_DATASETS:
            names += f" and {len(held) - SHOWN_DATASETS} more"
        return InputError(
            f"dataset {dataset!r} has no entries in the ledger at {self.url} (its datasets: "
            f"{names})"
        )

    def _register(self, dataset: str, cap: Spend) -> None:
        # A new dataset asking for `pld` is recorded as `rdp`, the accountant that enforces it.
        accountant = enforcing(getattr(cap, "accountant", None) or DEFAULT_ACCOUNTANT)
        try:
            with self.engine.begin() as conn:
                if self._stored_cap(conn, dataset) is None:
                    conn.execute(
                        insert(tables.datasets).values(
                            name=dataset,
                            cap_epsilon=cap.epsilon,
                            cap_delta=cap.delta,
                            created_at=today(),
                            accountant=accountant,
                        )
                    )
        except IntegrityError:
            pass  # registered concurrently by another run; reserve() compares the caps

    @staticmethod
    def _stored_cap(conn: Connection, dataset: str) -> Cap | None:
        row = conn.execute(
            select(
                tables.datasets.c.cap_epsilon,
                tables.datasets.c.cap_delta,
                tables.datasets.c.accountant,
            ).where(tables.datasets.c.name == dataset)
        ).one_or_none()
        return None if row is None else Cap(row[0], row[1], row[2] or BASIC)

    @staticmethod
    def _history(conn: Connection, dataset: str) -> list[Row]:
        """The entries' (epsilon, delta, description) rows, what the accountants compose."""
        return list(
            conn.execute(
                select(
                    tables.entries.c.epsilon, tables.entries.c.delta, tables.entries.c.description
                )
                .where(tables.entries.c.dataset == dataset)
                .order_by(tables.entries.c.id)
            ).all()
        )


def _description_json(spend: PlannedSpend) -> dict | None:
    return None if spend.description is None else spend.description.to_dict()


def _committed_description(row: Row, actual: PlannedSpend, accountant: str) -> dict | None:
    """The description to keep at commit (module docstring, step 3).

    No description in `actual` keeps the reserved one: the reserved mechanism ran, perhaps
    spending less than reserved. A new one must replace a generic reservation. Either way the
    description kept must be (epsilon, delta)-DP at the committed values (`check_guarantee`):
    an entry never records less than its mechanism spends.
    """
    reserved, new = row.description, _description_json(actual)
    changed = new is not None and new != reserved
    if changed and reserved is not None and reserved.get(KIND_KEY) != ApproxDP.kind:
        raise RuntimeError(
            f"{row.mechanism} ran a different mechanism ({new}) than it reserved ({reserved}); "
            "keeping the reservation's description"
        )
    kept = new if changed else reserved
    try:
        check_guarantee(actual, mechanism_from_dict(kept))
    except ValueError as error:
        raise RuntimeError(f"refusing to commit: {error}") from None
    if changed and accountant == RDP and row.delta > 0:
        return reserved  # its charge must not grow (`rdp_filter` module docstring)
    return kept


def _jsonable(params: dict) -> dict:
    return json.loads(json.dumps(params, default=float))


def today() -> datetime:
    """The current UTC date as midnight UTC: the only time the ledger stores (a clock time
    taken after the data was read would time the data steps; module docstring)."""
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()
