"""The interface every synthetic-data generator implements.

A generator is built from the public encoder, its share of the privacy budget and public
options. Its calibration is fixed at construction from public quantities only, so
`planned_spends()` can be reserved in the ledger before `fit` sees the real data
(PRIVACY_MODEL.md section 7). `fit` returns the spends it actually made (never more than
planned); `sample` is post-processing and may be seeded by the user.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Protocol

import numpy as np

from dprelease.encoding import Encoder
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.noise import NoiseSource

SAMPLE_BATCH_ROWS = 100_000


class Discriminator(Protocol):
    """A DP-trained classifier of real (1) versus synthetic (0) rows."""

    def logit(self, encoded: np.ndarray) -> np.ndarray:
        """log P(real | x) - log P(synthetic | x) for each encoded row."""
        ...


class Generator(ABC):
    """Fit under (epsilon, delta) on the encoded real table, then sample encoded rows."""

    name: ClassVar[str]
    has_discriminator: ClassVar[bool] = False
    # Generators that train for many steps accept `progress=True` (a progress bar).
    shows_progress: ClassVar[bool] = False

    def __init__(self, encoder: Encoder, epsilon: float, delta: float) -> None:
        if not epsilon > 0:
            raise ValueError(f"{self.name}: epsilon must be positive")
        self.encoder = encoder
        self.epsilon = epsilon
        self.delta = delta
        self._fitted = False

    @abstractmethod
    def planned_spends(self) -> list[PlannedSpend]:
        """The spends `fit` will make, calibrated from public quantities only."""

    @abstractmethod
    def _fit(self, real: np.ndarray, noise: NoiseSource) -> list[PlannedSpend]:
        """Fit on encoded real rows; return the actual spends."""

    @abstractmethod
    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw n encoded rows (post-processing of the fitted DP state)."""

    def config(self) -> dict:
        """Public configuration for the manifest."""
        return {"generator": self.name}

    @property
    def discriminator(self) -> Discriminator | None:
        """A probabilistic discriminator, for generators that train one (DP-GANs)."""
        return None

    def fit(self, real: np.ndarray, noise: NoiseSource | None = None) -> list[PlannedSpend]:
        if real.ndim != 2 or real.shape[1] != self.encoder.width:
            raise ValueError(f"expected encoded rows with {self.encoder.width} features")
        spends = self._fit(real, noise or NoiseSource())
        self._fitted = True
        return spends

    def sample(
        self, n: int, rng: np.random.Generator, *, batch_rows: int = SAMPLE_BATCH_ROWS
    ) -> np.ndarray:
        """Draw n encoded rows in batches of at most `batch_rows`."""
        if not self._fitted:
            raise RuntimeError(f"{self.name}: fit before sampling")
        if n < 1:
            raise ValueError("the number of synthetic rows must be at least 1")
        batches = [
            self._sample(min(batch_rows, n - start), rng) for start in range(0, n, batch_rows)
        ]
        return np.concatenate(batches, axis=0)
