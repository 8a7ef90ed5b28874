"""DP independent marginals: the simplest honest generator.

For every schema column, a histogram over its public domain: the schema's categories (plus
"missing" for a nullable column), or, for a numeric column, bins with public edges
(equal-width bins of the [0, 1]-scaled value; an integer column with at most `bins`
values gets one bin per value), plus a "missing" cell when nullable.

Privacy (PRIVACY_MODEL.md section 6): adding or removing one row changes exactly one cell of
each of the k column histograms by 1, so the vector of all cells has L1 sensitivity k.
Laplace noise of scale k / epsilon on EVERY cell of the public domain, empty cells included,
gives pure epsilon-DP (Dwork et al. 2006). Negative noisy counts are clipped to 0 and each
histogram is normalised (post-processing); a histogram whose noisy counts are all clipped
becomes uniform.

Sampling draws each column independently: a cell, then (for numeric bins) a value uniform in
the bin. Dependencies between columns are not kept; that is what PrivBayes and the DP-GANs add.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dprelease.encoding import EncodedColumn, Encoder
from dprelease.generators.base import Generator
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.calibration import laplace_scale
from dprelease.privacy.noise import NoiseSource
from dprelease.schema import IntegerColumn

DEFAULT_BINS = 32


@dataclass(frozen=True)
class _Cells:
    """The public cells of one column: bin edges (numeric) or levels (categorical)."""

    column: EncodedColumn
    edges: np.ndarray | None  # numeric: bin edges in [0, 1]; None for categorical
    points: np.ndarray | None  # integer per-value bins: the exact scaled values

    @property
    def size(self) -> int:
        if self.edges is None:
            return self.column.width
        return len(self.edges) - 1 + int(self.column.spec.nullable)


class IndependentMarginals(Generator):
    """One noisy histogram per column over the public domain (pure epsilon-DP)."""

    name = "marginals"

    def __init__(
        self, encoder: Encoder, epsilon: float, delta: float = 0.0, *, bins: int = DEFAULT_BINS
    ) -> None:
        super().__init__(encoder, epsilon, delta)
        if bins < 1:
            raise ValueError("bins must be at least 1")
        self.bins = bins
        self.cells = [_public_cells(column, bins) for column in encoder.columns]
        self.sensitivity = float(len(self.cells))
        self.scale = laplace_scale(self.sensitivity, epsilon)
        self.probabilities: list[np.ndarray] = []

    def config(self) -> dict:
        return {
            "generator": self.name,
            "bins": self.bins,
            "cells_per_column": {c.column.name: c.size for c in self.cells},
        }

    def planned_spends(self) -> list[PlannedSpend]:
        return [
            PlannedSpend(
                mechanism="laplace-histograms",
                epsilon=self.epsilon,
                delta=0.0,
                params={
                    "component": "generator",
                    "generator": self.name,
                    "laplace_scale": self.scale,
                    "l1_sensitivity": self.sensitivity,
                    "cells": int(sum(c.size for c in self.cells)),
                },
            )
        ]

    def cell_counts(self, real: np.ndarray) -> list[np.ndarray]:
        """Exact counts of every public cell of every column (the mechanism's query)."""
        return [_cell_counts(cells, real) for cells in self.cells]

    def _fit(self, real: np.ndarray, noise: NoiseSource) -> list[PlannedSpend]:
        self.probabilities = [
            _normalise(np.clip(counts + noise.laplace(self.scale, counts.shape), 0.0, None))
            for counts in self.cell_counts(real)
        ]
        return self.planned_spends()

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        out = np.zeros((n, self.encoder.width))
        for cells, probabilities in zip(self.cells, self.probabilities, strict=True):
            chosen = rng.choice(cells.size, size=n, p=probabilities)
            column = cells.column
            if cells.edges is None:
                out[np.arange(n), column.start + chosen] = 1.0
                continue
            n_bins = len(cells.edges) - 1
            missing = chosen == n_bins
            in_bin = np.minimum(chosen, n_bins - 1)
            if cells.points is not None:
                values = cells.points[in_bin]
            else:
                low, high = cells.edges[in_bin], cells.edges[in_bin + 1]
                values = low + rng.random(n) * (high - low)
            out[:, column.value_index] = np.where(missing, 0.0, values)
            if column.missing_index is not None:
                out[:, column.missing_index] = missing
        return out


def _public_cells(column: EncodedColumn, bins: int) -> _Cells:
    if column.is_categorical:
        return _Cells(column, None, None)
    spec = column.spec
    if isinstance(spec, IntegerColumn) and spec.max - spec.min + 1 <= bins:
        span = spec.max - spec.min
        points = np.arange(span + 1) / span
        midpoints = (points[:-1] + points[1:]) / 2
        return _Cells(column, np.concatenate([[0.0], midpoints, [1.0]]), points)
    return _Cells(column, np.linspace(0.0, 1.0, bins + 1), None)


def _cell_counts(cells: _Cells, real: np.ndarray) -> np.ndarray:
    """Counts of every public cell (zeros included): one cell per row per column."""
    column = cells.column
    if cells.edges is None:
        return real[:, column.start : column.stop].sum(axis=0)
    n_bins = len(cells.edges) - 1
    index = np.clip(
        np.searchsorted(cells.edges, real[:, column.value_index], "right") - 1, 0, n_bins - 1
    )
    if column.missing_index is not None:
        index = np.where(real[:, column.missing_index] > 0.5, n_bins, index)
    return np.bincount(index, minlength=cells.size).astype(float)


def _normalise(weights: np.ndarray) -> np.ndarray:
    total = weights.sum()
    if total <= 0:
        return np.full(len(weights), 1.0 / len(weights))
    return weights / total
