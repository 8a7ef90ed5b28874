"""DP independent marginals: the simplest honest generator.

For every schema column, a histogram over its public domain (`domain.public_cells`): the
schema's categories (plus "missing" for a nullable column), or, for a numeric column, bins
with public edges (equal-width bins of the [0, 1]-scaled value; an integer column with at
most `bins` values gets one bin per value), plus a "missing" cell when nullable.

Privacy (docs/privacy-model.md section 6): adding or removing one row changes exactly one cell of
each of the k column histograms by 1, so the vector of all cells has L1 sensitivity k.
Laplace noise of scale k / epsilon on EVERY cell of the public domain, empty cells included,
gives pure epsilon-DP (Dwork et al. 2006). Negative noisy counts are clipped to 0 and each
histogram is normalised (post-processing); a histogram whose noisy counts are all clipped
becomes uniform.

Sampling draws each column independently: a cell (stratified, so that every cell holds its
share of the n rows to within one row, `sampling.stratified_choice`), then (for numeric bins) a
value uniform in the bin. Dependencies between columns are not kept; that is what PrivBayes
and the DP-GANs add.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dprelease.encoding import Encoder
from dprelease.generators.base import CountsGenerator, Measurement
from dprelease.generators.domain import cell_counts, normalise, public_cells, write_cells
from dprelease.generators.sampling import stratified_choice
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.calibration import laplace_scale
from dprelease.privacy.noise import NoiseSource

DEFAULT_BINS = 32


@dataclass(frozen=True)
class Histograms:
    """The fitted state: each column's sampling probabilities and its noisy total."""

    probabilities: list[np.ndarray]
    totals: list[float]


class IndependentMarginals(CountsGenerator):
    """One noisy histogram per column over the public domain (pure epsilon-DP)."""

    name = "marginals"

    def __init__(
        self, encoder: Encoder, epsilon: float, delta: float = 0.0, *, bins: int = DEFAULT_BINS
    ) -> None:
        super().__init__(encoder, epsilon, delta)
        if bins < 1:
            raise ValueError("bins must be at least 1")
        self.bins = bins
        self.cells = [public_cells(column, bins) for column in encoder.columns]
        self.sensitivity = float(len(self.cells))
        self.scale = laplace_scale(self.sensitivity, epsilon)

    def config(self) -> dict:
        return {
            "generator": self.name,
            "bins": self.bins,
            "cells_per_column": {c.column.name: c.size for c in self.cells},
        }

    def planned_spends(self) -> list[PlannedSpend]:
        return [
            self.laplace_spend(
                "laplace-histograms",
                self.epsilon,
                self.scale,
                self.sensitivity,
                cells=int(sum(c.size for c in self.cells)),
            )
        ]

    def cell_counts(self, real: np.ndarray) -> list[np.ndarray]:
        """Exact counts of every public cell of every column (the mechanism's query)."""
        return [cell_counts(cells, real) for cells in self.cells]

    def _fit_counts(
        self, counts: list[np.ndarray], noise: NoiseSource
    ) -> tuple[Histograms, list[PlannedSpend]]:
        """The noisy histogram of every column: its sampling probabilities (negative noisy
        counts clipped, normalised) and its noisy total."""
        noisy = [noise.add_laplace(c, self.scale, counts=True) for c in counts]
        probabilities = [normalise(np.clip(c, 0.0, None)) for c in noisy]
        state = Histograms(probabilities, [float(c.sum()) for c in noisy])
        return state, self.planned_spends()

    def measurements_of(self, state: Histograms) -> list[Measurement]:
        std = self.scale * math.sqrt(2.0)
        return [
            Measurement((cells.column.name,), cells.size, "laplace", std, total)
            for cells, total in zip(self.cells, state.totals, strict=True)
        ]

    def _sample(self, state: Histograms, n: int, rng: np.random.Generator) -> np.ndarray:
        out = np.zeros((n, self.encoder.width))
        for cells, probabilities in zip(self.cells, state.probabilities, strict=True):
            write_cells(out, cells, stratified_choice(probabilities, n, rng), rng)
        return out
