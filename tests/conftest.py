"""Shared fixtures. `SeededNoise` exists only here: production noise is never seeded."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

# Every pytest process (two under `make test`, one per core) and every process it starts runs
# its numeric libraries on one thread. OpenBLAS, OpenMP and XLA otherwise start a thread per
# core in each process, and the oversubscribed threads spin: a 200 x 200 eigh took 0.39 s of
# CPU instead of 0.0075 s, gradient boosting 8.9 s instead of 0.3 s. Set before numpy, torch
# and jax load; `threadpool_limits` covers a library a plugin loaded earlier.
os.environ.update(
    {
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    }
)

import absl.logging  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from prefect_server import shared_server, stop_shared_server  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

threadpool_limits(1)

from dprelease.privacy.noise import NoiseSource  # noqa: E402

# absl (imported by dp-accounting) binds its log handler to whatever sys.stderr is at import
# time; a test that first imports it under a temporary stream (pytest's or CliRunner's)
# leaves a handler on a closed file. Bind it to the real stderr once, for the pytest session.
absl.logging.get_absl_handler().python_handler.stream = sys.__stderr__


class SeededNoise(NoiseSource):
    """A reproducible NoiseSource for statistical tests (never used outside tests)."""

    def __init__(self, seed: int) -> None:
        super().__init__(secure=False)
        self._rng = np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def isolated_ledger_home(tmp_path_factory, monkeypatch):
    """Every test gets its own default ledger location: no test reads or spends the budget
    in the developer's real per-user ledger."""
    monkeypatch.setenv("DPRELEASE_HOME", str(tmp_path_factory.mktemp("dprelease-home")))
    monkeypatch.delenv("DPRELEASE_LEDGER_URL", raising=False)


@pytest.fixture
def seeded_noise():
    """Factory: `seeded_noise(seed)` returns a reproducible noise source."""
    return SeededNoise


def _run_root(config: pytest.Config) -> Path:
    """The base directory every pytest process of this run shares (xdist gives each
    worker a directory of its own inside the controller's)."""
    base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    return base.parent if hasattr(config, "workerinput") else base


@pytest.fixture(scope="session")
def shared_prefect_server(request) -> dict:
    """The pytest run's one real Prefect server (`prefect_server.shared_server`, started by
    `dprelease server start` on first use and shared by the xdist workers): its API URL,
    PREFECT_HOME and PostgreSQL database."""
    return shared_server(_run_root(request.config))


@pytest.fixture(scope="session")
def prefect_server(shared_prefect_server):
    """The pytest run's Prefect server as this process's PREFECT_API_URL (and, through the
    environment tests pass on, the CLI processes tests start); yields the API URL. Log and
    event workers are drained before the run ends, as Prefect's harness does, so that no
    late log line meets a stopped server."""
    import prefect.settings
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    api = shared_prefect_server["api"]
    with prefect.settings.temporary_settings(updates={prefect.settings.PREFECT_API_URL: api}):
        yield api
        APILogWorker.drain_all()
        EventsWorker.drain_all()


_EARLY_START: list[threading.Thread] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist (`make test`), the controller starts the shared Prefect server in the
    background at once, while the workers start and collect: it takes 15-25 s here, and the
    first tests of both workers need it."""
    config = session.config
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        thread = threading.Thread(target=shared_server, args=(_run_root(config),))
        thread.start()
        _EARLY_START.append(thread)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The process that owns the pytest run (the xdist controller, or the only process) stops
    the shared Prefect server once every worker is done."""
    if not hasattr(session.config, "workerinput"):
        for thread in _EARLY_START:
            thread.join()
        stop_shared_server(_run_root(session.config))
