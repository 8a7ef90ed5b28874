"""Shared fixtures. `SeededNoise` exists only here: production noise is never seeded."""

from __future__ import annotations

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
