"""A temporary Prefect server whose database is a fresh PostgreSQL database.

Prefect's own test harness (`prefect.testing.utilities.prefect_test_harness`) keeps the
server's state in SQLite. There, four CLI processes releasing at once
(`test_concurrent_releases_publish_exactly_what_the_cap_admits`) now and then lose one flow
run to "sqlite3.OperationalError: database is locked": SQLite lets one writer in at a time,
and a transaction that read before another one wrote cannot upgrade to a write (its busy
timeout does not help then). Prefect recommends PostgreSQL for a server that takes
concurrent runs; CI has one (DPRELEASE_TEST_POSTGRES_URL), so the pytest session's server
uses it.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import psycopg
from sqlalchemy.engine import make_url


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new, empty database on the server of `admin_url` (a SQLAlchemy URL of any existing
    database), dropped on exit; yields its asyncpg URL. A random name keeps concurrent
    pytest sessions on one machine (CI beside a developer's run) apart."""
    url = make_url(admin_url)
    name = f"dprelease_prefect_{secrets.token_hex(6)}"
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(drivername="postgresql+asyncpg", database=name).render_as_string(
            hide_password=False
        )
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def prefect_server_on_postgres(admin_url: str, startup_timeout: int = 120) -> Iterator[str]:
    """Prefect's test harness with its database on PostgreSQL: a server subprocess on a free
    port, PREFECT_API_URL pointed at it for this process (and, through the environment, for
    the CLI processes tests start); yields the API URL. Log and event workers are drained
    before the server stops, as Prefect's harness does, so that no late log line meets a
    closed server."""
    import prefect.settings
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.server.database.dependencies import temporary_database_interface

    with ExitStack() as stack:
        database_url = stack.enter_context(fresh_database(admin_url))
        stack.enter_context(temporary_database_interface())
        stack.enter_context(
            prefect.settings.temporary_settings(
                updates={prefect.settings.PREFECT_SERVER_DATABASE_CONNECTION_URL: database_url}
            )
        )
        server = SubprocessASGIServer(port=free_port())
        server.start(timeout=startup_timeout)
        stack.callback(server.stop)
        stack.enter_context(
            prefect.settings.temporary_settings(
                updates={prefect.settings.PREFECT_API_URL: server.api_url}
            )
        )
        yield server.api_url
        APILogWorker.drain_all()
        EventsWorker.drain_all()
