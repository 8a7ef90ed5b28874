"""One real Prefect server for a whole pytest session, shared by its xdist worker processes.

The server is started the way a curator starts one, `dprelease server start`
(`dprelease.cli.server.start`: detached in a process session of its own, waited for until it
answers), by the first pytest process that needs it, under an exclusive lock on a file in the
pytest run's shared base directory; the others read its API URL from that directory. It is
stopped once, by the process that owns the pytest run (`stop_shared_server`: pytest's xdist
controller, or the only pytest process), with `dprelease.cli.server.stop`.

Its state is a fresh PostgreSQL database when DPRELEASE_TEST_POSTGRES_URL names a server
(CI): four CLI processes releasing at once
(`test_concurrent_releases_publish_exactly_what_the_cap_admits`) now and then lose a flow
run to SQLite's single writer ("database is locked"), and Prefect recommends PostgreSQL for
a server that takes concurrent runs. Otherwise it is SQLite in the server's PREFECT_HOME.
The scheduler loops every 2 s (the deployment test waits for scheduled runs) and the UI is
not served.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
from sqlalchemy.engine import make_url

from dprelease.cli.server import ServerFiles, answers, start, stop

STATE_FILE = "shared-server.json"
SERVER_SETTINGS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",
    "PREFECT_SERVER_UI_ENABLED": "false",
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _admin_url(admin_url: str) -> str:
    return make_url(admin_url).set(drivername="postgresql").render_as_string(hide_password=False)


def create_database(admin_url: str) -> tuple[str, str]:
    """A new, empty database on the server of `admin_url` (a SQLAlchemy URL of any existing
    database); its name and asyncpg URL. A random name keeps concurrent pytest sessions on
    one machine (CI beside a developer's run) apart."""
    name = f"dprelease_prefect_{secrets.token_hex(6)}"
    with psycopg.connect(_admin_url(admin_url), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    url = make_url(admin_url).set(drivername="postgresql+asyncpg", database=name)
    return name, url.render_as_string(hide_password=False)


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(_admin_url(admin_url), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    with (root / "shared-server.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def shared_server(root: Path) -> dict:
    """The pytest run's server under `root` (the run's shared base directory), started on
    first use: its state, `{"api": URL, "home": PREFECT_HOME, "database": name or None}`."""
    state_file = root / STATE_FILE
    with _locked(root):
        if state_file.exists():
            return json.loads(state_file.read_text())
        files = ServerFiles(root / "prefect-server")
        settings = {**SERVER_SETTINGS, "PREFECT_HOME": str(files.home)}
        admin = os.environ.get("DPRELEASE_TEST_POSTGRES_URL")
        database = None
        if admin:
            database, url = create_database(admin)
            settings["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = url
        api, _ = start(files, port=free_port(), timeout=180, settings=settings)
        state = {"api": api, "home": str(files.home), "database": database}
        state_file.write_text(json.dumps(state))
        return state


def stop_shared_server(root: Path) -> None:
    """Stop the pytest run's server under `root`, if one was started, and drop its database;
    raises when it still answers after `stop`."""
    state_file = root / STATE_FILE
    if not state_file.exists():
        return
    state = json.loads(state_file.read_text())
    state_file.unlink()
    files = ServerFiles(Path(state["home"]))
    port = urlsplit(state["api"]).port
    stop(files)
    if state["database"]:
        drop_database(os.environ["DPRELEASE_TEST_POSTGRES_URL"], state["database"])
    if port is not None and answers("127.0.0.1", port):
        raise RuntimeError(f"the pytest run's Prefect server still answers at {state['api']}")
