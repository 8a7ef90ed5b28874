"""Shared fixtures. `SeededNoise` exists only here: production noise is never seeded."""

from __future__ import annotations

import os
import sys

import absl.logging
import numpy as np
import pytest

from dprelease.privacy.noise import NoiseSource

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


@pytest.fixture(scope="session")
def prefect_server():
    """One temporary Prefect server per pytest process (`make test` runs two); yields its API
    URL. Its database is a fresh PostgreSQL database when DPRELEASE_TEST_POSTGRES_URL names a
    server (CI), so that concurrent flow runs never meet SQLite's single writer
    (`prefect_postgres`); otherwise Prefect's own SQLite test harness."""
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    postgres = os.environ.get("DPRELEASE_TEST_POSTGRES_URL")
    if postgres:
        from prefect_postgres import prefect_server_on_postgres

        with prefect_server_on_postgres(postgres) as api_url:
            yield api_url
        return
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield PREFECT_API_URL.value()
