"""The public feature map of the calibration weights (`method`): coarse cells
of every column and the one-hot joint cell of each pair of columns.

Cut points of numeric columns are quantiles of the SYNTHETIC rows (a DP output, so public);
categorical columns use their schema levels; a nullable numeric column has its own
"missing" cell. Each row activates exactly one indicator per pair (plus the constant), so
||phi(x)||_2^2 = ||phi(x)||_1 = 1 + (number of pairs) for every x: the sensitivity is a
public constant of the schema.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import sparse


class FeatureMap:
    """phi: the constant, then the one-hot joint cell of every pair of columns."""

    def __init__(
        self,
        encoder: Any,
        bins: int,
        pairs: str | None,
        synthetic: np.ndarray,
        moments: Any = None,
    ) -> None:
        self.encoder = encoder
        self.moments = moments  # `TargetMoments`: their columns follow the pair tables
        self.columns = list(encoder.columns)
        self.edges = [
            None if column.is_categorical else _quantile_edges(synthetic, column, bins)
            for column in self.columns
        ]
        self.sizes = [self._size(position) for position in range(len(self.columns))]
        self.pairs = column_pairs(encoder, pairs)

    def _size(self, position: int) -> int:
        column, edges = self.columns[position], self.edges[position]
        if edges is None:
            return column.width
        return len(edges) + 1 + int(column.missing_index is not None)

    def cells(self, x: np.ndarray) -> np.ndarray:
        """The coarse cell of every row in every column (rows x columns, ints)."""
        out = np.empty((x.shape[0], len(self.columns)), dtype=np.int64)
        for position, (column, edges) in enumerate(zip(self.columns, self.edges, strict=True)):
            if edges is None:
                out[:, position] = np.argmax(x[:, column.start : column.stop], axis=1)
                continue
            index = np.searchsorted(edges, x[:, column.value_index], side="right")
            if column.missing_index is not None:
                index = np.where(x[:, column.missing_index] > 0.5, len(edges) + 1, index)
            out[:, position] = index
        return out

    @property
    def moment_size(self) -> int:
        return 0 if self.moments is None else self.moments.size

    @property
    def size(self) -> int:
        """Coordinates of phi: the constant, every pair's cells, the moments."""
        return 1 + sum(math.prod(shape) for shape in self.shapes) + self.moment_size

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The cell counts (rows, columns) of every pair's two-way table, in phi's order."""
        return [(self.sizes[a], self.sizes[b]) for a, b in self.pairs]

    def matrix(self, x: np.ndarray) -> sparse.csr_array:
        """phi(x) for every row: [1, one-hot blocks...] (rows x features, sparse: k ones
        per row)."""
        cells = self.cells(x)
        columns, offset = [np.zeros(x.shape[0], dtype=np.int64)], 1
        for (a, b), shape in zip(self.pairs, self.shapes, strict=True):
            columns.append(offset + np.ravel_multi_index((cells[:, a], cells[:, b]), shape))
            offset += math.prod(shape)
        indices = np.stack(columns, axis=1).ravel()
        indptr = np.arange(0, indices.size + 1, len(columns))
        data = np.ones(indices.size)
        phi = sparse.csr_array((data, indices, indptr), shape=(x.shape[0], offset))
        if self.moments is None:
            return phi
        return sparse.hstack([phi, self.moments.matrix(x)], format="csr")


def target_position(encoder: Any) -> int | None:
    target = encoder.schema.target
    names = [column.name for column in encoder.columns]
    return names.index(target) if target in names else None


def column_pairs(encoder: Any, pairs: str | None) -> list[tuple[int, int]]:
    """The pairs of column positions phi covers (module docstring)."""
    target = target_position(encoder)
    m = len(encoder.columns)
    if pairs == "all" or target is None:
        return [(a, b) for a in range(m) for b in range(a + 1, m)]
    return [(target, p) for p in range(m) if p != target]


def active_features(encoder: Any, pairs: str | None) -> int:
    """k: how many coordinates of phi(x) are 1 for every x (the constant, one per pair)."""
    return 1 + len(column_pairs(encoder, pairs))


def _quantile_edges(synthetic: np.ndarray, column: Any, bins: int) -> np.ndarray:
    """Interior cut points at the quantiles of the synthetic values (public), duplicates
    removed; missing values (own cell) are left out."""
    values = synthetic[:, column.value_index]
    if column.missing_index is not None:
        values = values[synthetic[:, column.missing_index] < 0.5]
    if bins <= 1 or values.size == 0:
        return np.array([])
    return np.unique(np.quantile(values, np.arange(1, bins) / bins))


def log_weight_bound(b: np.ndarray, tilted: np.ndarray, shapes: list[tuple[int, int]]) -> float:
    """max over all rows x of b^T phi(x): phi(x) has exactly one 1 in each pair's table, so
    the bound is the sum over pairs of the largest coefficient among the pair's cells, where
    cells left out of the fit (`tilted` lists those in it) have coefficient 0."""
    full = np.zeros(sum(r * c for r, c in shapes))
    full[tilted] = b
    edges = np.cumsum([r * c for r, c in shapes])[:-1]
    return float(sum(block.max() for block in np.split(full, edges)))
