"""Shared fixtures. `SeededNoise` exists only here: production noise is never seeded."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dprelease.privacy.noise import NoiseSource


class SeededNoise(NoiseSource):
    """A reproducible NoiseSource for statistical tests (never used outside tests)."""

    def __init__(self, seed: int) -> None:
        super().__init__(secure=False)
        self._rng = np.random.default_rng(seed)


@pytest.fixture
def seeded_noise():
    """Factory: `seeded_noise(seed)` returns a reproducible noise source."""
    return SeededNoise


@pytest.fixture(scope="session")
def prefect_server():
    """One temporary Prefect server for the whole session; yields its API URL."""
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield PREFECT_API_URL.value()
