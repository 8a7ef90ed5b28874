"""The discretised public domain of a schema column, shared by the histogram generators.

Every column has a finite set of public cells (docs/privacy-model.md section 2): its categories
(plus "missing" for a nullable column), or, for a numeric column, bins with public edges
(equal-width bins of the [0, 1]-scaled value, an integer column's bounds split off into
cells of their own, `bound_split_edges`, or for an integer column with `spacing: log`
geometrically widening ones, `log_edges`; an integer column with at most `bins` values gets
one bin per value, a continuous column with a codebook `values` cells of its codebook
values, `codebook_cells`), plus a "missing" cell when nullable. Nothing here reads bounds or
categories from the data: the edges depend only on the schema and `bins` (measurements:
docs/decisions/0014-codebooks.md, docs/decisions/0016-integer-bound-cells-and-log-spacing.md).

`cell_index` maps each encoded row to its cell of a column (each row lies in exactly one cell
of each column, which is what the histogram sensitivities count); `write_cells` maps cells
back to encoded values (a continuous bin draws a value uniform in the bin, or on the
column's measured lattice, `lattice`; an integer bin an integer uniform among the integers
of the bin, a codebook cell one of its codebook values, so decoding never leaves the cell).
`marginal_tvd` is an evaluation metric for tests and benchmarks only; it reads the real table
without privacy, so its output never goes into a release (docs/privacy-model.md section 8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from dprelease.encoding import EncodedColumn, Encoder, nearest_codebook_value, scaled_codebook
from dprelease.generators.lattice import Lattice, lattice_values
from dprelease.schema import ContinuousColumn, IntegerColumn

BOUND_CELLS = 2  # an integer column's bounds split off into cells of their own (bound_split_edges)


@dataclass(frozen=True)
class ColumnCells:
    """The public cells of one column: bin edges (numeric) or levels (categorical)."""

    column: EncodedColumn
    edges: np.ndarray | None  # numeric: bin edges in [0, 1]; None for categorical
    points: np.ndarray | None  # integer per-value bins: the exact scaled values

    @property
    def size(self) -> int:
        if self.edges is None:
            return self.column.width
        return len(self.edges) - 1 + int(self.column.spec.nullable)

    @property
    def wide_integer(self) -> bool:
        """An integer column whose cells hold several integers each (its public bounds span
        more values than it has cells: a count bounded far above most of its rows)."""
        spec = self.column.spec
        return isinstance(spec, IntegerColumn) and self.edges is not None and self.points is None


def public_cells(column: EncodedColumn, bins: int, *, equal_width: bool = False) -> ColumnCells:
    """The cells of a column from its schema spec and the public number of bins; an integer
    column's `spacing` is honoured unless `equal_width` (the evaluation metric's bins)."""
    if column.is_categorical:
        return ColumnCells(column, None, None)
    spec = column.spec
    if isinstance(spec, IntegerColumn) and spec.max - spec.min + 1 <= bins:
        span = spec.max - spec.min
        points = np.arange(span + 1) / span
        midpoints = (points[:-1] + points[1:]) / 2
        return ColumnCells(column, np.concatenate([[0.0], midpoints, [1.0]]), points)
    if isinstance(spec, IntegerColumn) and spec.spacing == "log" and not equal_width:
        return ColumnCells(column, log_edges(spec.max - spec.min, bins), None)
    if isinstance(spec, ContinuousColumn) and spec.values is not None and not equal_width:
        return codebook_cells(column, bins)
    if isinstance(spec, IntegerColumn) and not equal_width:
        return ColumnCells(column, bound_split_edges(spec.max - spec.min, bins), None)
    return ColumnCells(column, np.linspace(0.0, 1.0, bins + 1), None)


def cells_of_size(column: EncodedColumn, size: int) -> ColumnCells | None:
    """The column's public cells with `size` cells ("missing" included), rebuilt from that
    size alone (a measurement records its cells' number, not its bins): at `bins` = size
    less the missing cell, else less the `BOUND_CELLS` an integer column may add too (in
    that order: an integer column of 0..15 measured on its 16 values must not come back as
    14 bins plus its bounds); None when neither has that size."""
    values = size - int(column.spec.nullable)
    for bins in (values, values - BOUND_CELLS):
        if bins >= 1 and (cells := public_cells(column, bins)).size == size:
            return cells
    return None


def bound_split_edges(span: int, bins: int) -> np.ndarray:
    """Scaled edges of `bins` equal-width cells over the integers 0..span (offsets from min),
    with each bound's integer split off into a cell of its own where its equal-width cell
    holds more integers (span > bins): bins + `BOUND_CELLS` cells.

    Integer columns keep their point masses at the bounds: a count's zeros (bounds 0-200 on
    32 equal-width cells of about 6 integers would spread 68 % zeros uniformly over 0-6;
    docs/decisions/0016-integer-bound-cells-and-log-spacing.md) and values top-coded or
    clipped at a bound. The extra edges sit half
    an integer inside each bound, as `log_edges`' do, and are the same at every `bins`, so
    the cells at `bins` nest in those at 2 `bins` (`refinement`). Public: the bounds and
    `bins` only."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    if span <= bins:
        return edges
    half = 0.5 / span
    return np.concatenate([[0.0, half], edges[1:-1], [1.0 - half, 1.0]])


def codebook_cells(column: EncodedColumn, bins: int) -> ColumnCells:
    """Cells of a continuous column with a public codebook (`values`): with at most `bins`
    values, one cell per value, decoded to the value itself; otherwise `bins` cells of
    consecutive values, cell k holding values i_k .. i_{k+1} - 1 with i_k = floor(k n / bins),
    so that the cells at `bins` nest in those at 2 `bins`. Edges lie half-way between
    neighbouring values, so a real value between two codebook values counts as the nearer
    one."""
    assert isinstance(column.spec, ContinuousColumn)  # a continuous column's codebook
    scaled = scaled_codebook(column.spec)
    if len(scaled) <= bins:
        midpoints = (scaled[:-1] + scaled[1:]) / 2
        return ColumnCells(column, np.concatenate([[0.0], midpoints, [1.0]]), scaled)
    starts = (np.arange(1, bins) * len(scaled)) // bins
    midpoints = (scaled[starts - 1] + scaled[starts]) / 2
    return ColumnCells(column, np.concatenate([[0.0], midpoints, [1.0]]), None)


def refinement(fine: ColumnCells, coarse: ColumnCells) -> np.ndarray | None:
    """The coarse cell holding each fine cell, when the fine cells refine the coarse ones
    (every coarse edge is a fine edge, or the fine cells are single integers; "missing" maps
    to "missing"); None otherwise (categories, log-spaced edges that do not nest). Both are
    public cells of the same column, so this is a public map."""
    if fine.edges is None or coarse.edges is None:
        return None
    if fine.points is not None:
        values = fine.points
    elif np.isin(np.round(coarse.edges, 12), np.round(fine.edges, 12)).all():
        values = (fine.edges[:-1] + fine.edges[1:]) / 2
    else:
        return None
    n_bins = len(coarse.edges) - 1
    mapping = np.clip(np.searchsorted(coarse.edges, values, "right") - 1, 0, n_bins - 1)
    if fine.column.spec.nullable:
        mapping = np.concatenate([mapping, [n_bins]])
    return mapping.astype(np.int64)


def log_edges(span: int, bins: int) -> np.ndarray:
    """Scaled edges of `bins` cells over the integers 0..span (offsets from min) whose first
    integers are b_i = max(b_{i-1} + 1, floor((span + 1)^(i / bins))), b_0 = 0: one integer per
    cell while the geometric sequence grows by less than 1, then geometrically wider cells
    (span 200, 16 cells: 0, 1, 2, 3, 4, 5-6, 7-9, 10-13, ..., 144-200). An edge sits half an
    integer below its cell's first integer, so `cell_index` and `_integers_in_cells` put
    every integer in exactly one cell. Needs span + 1 > bins (else one cell per value)."""
    starts = [0]
    for i in range(1, bins):
        starts.append(max(starts[-1] + 1, math.floor((span + 1) ** (i / bins))))
    edges = (np.asarray(starts[1:], dtype=float) - 0.5) / span
    return np.concatenate([[0.0], edges, [1.0]])


def cell_index(cells: ColumnCells, encoded: np.ndarray) -> np.ndarray:
    """The cell (0 .. size - 1) of every encoded row: exactly one cell per row."""
    column = cells.column
    if cells.edges is None:
        return np.argmax(encoded[:, column.start : column.stop], axis=1)
    n_bins = len(cells.edges) - 1
    index = np.clip(
        np.searchsorted(cells.edges, encoded[:, column.value_index], "right") - 1, 0, n_bins - 1
    )
    if column.missing_index is not None:
        index = np.where(encoded[:, column.missing_index] > 0.5, n_bins, index)
    return index


def cell_counts(cells: ColumnCells, encoded: np.ndarray) -> np.ndarray:
    """Counts of every public cell of a column, zeros included."""
    return np.bincount(cell_index(cells, encoded), minlength=cells.size).astype(float)


def write_cells(
    out: np.ndarray,
    cells: ColumnCells,
    chosen: np.ndarray,
    rng: np.random.Generator,
    lattice: Lattice | None = None,
) -> None:
    """Write the encoded values of the chosen cells of one column into `out` (in place); a
    continuous column with a measured `lattice` gets values on it (`lattice_values`)."""
    column = cells.column
    n = len(chosen)
    if cells.edges is None:
        out[np.arange(n), column.start + chosen] = 1.0
        return
    n_bins = len(cells.edges) - 1
    missing = chosen == n_bins
    in_bin = np.minimum(chosen, n_bins - 1)
    if cells.points is not None:
        values = cells.points[in_bin]
    elif isinstance(column.spec, IntegerColumn):
        values = _integers_in_cells(column.spec, cells.edges, in_bin, rng)
    elif lattice is not None:
        values = lattice_values(column, cells.edges, in_bin, lattice, rng, ~missing)
    else:
        low, high = cells.edges[in_bin], cells.edges[in_bin + 1]
        values = low + rng.random(n) * (high - low)
        spec = column.spec
        if isinstance(spec, ContinuousColumn) and spec.values is not None:  # a codebook value
            values = nearest_codebook_value(scaled_codebook(spec), values)
    out[:, column.value_index] = np.where(missing, 0.0, values)
    if column.missing_index is not None:
        out[:, column.missing_index] = missing


def _integers_in_cells(
    spec: IntegerColumn, edges: np.ndarray, in_bin: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Scaled values of integers drawn uniformly among the integers of each chosen bin.

    Bin i holds the scaled values v with edges[i] <= v < edges[i + 1] (the last bin also
    v = 1), i.e. the integers k = lo + round(v * span) with that property: decoding (which
    rounds v * span) then lands in the same bin, never on an integer of a neighbouring bin.
    Equal-width bins over a span of at least `bins` integers hold at least one integer each.
    """
    span = spec.max - spec.min
    first = np.ceil(edges[:-1] * span - 1e-9)
    last = np.ceil(edges[1:] * span - 1e-9) - 1
    last[-1] = span
    last = np.maximum(last, first)
    low, high = first[in_bin], last[in_bin]
    offsets = low + np.floor(rng.random(len(in_bin)) * (high - low + 1))
    return np.minimum(offsets, high) / span


def normalise(weights: np.ndarray) -> np.ndarray:
    """Weights divided by their sum; all-zero weights become uniform."""
    total = weights.sum()
    if total <= 0:
        return np.full(weights.shape, 1.0 / weights.size)
    return weights / total


def marginal_tvd(
    encoder: Encoder,
    real: np.ndarray,
    synthetic: np.ndarray,
    *,
    order: int = 1,
    bins: int = 16,
    weights: np.ndarray | None = None,
    groups: list[tuple[int, ...]] | None = None,
) -> dict[tuple[str, ...], float]:
    """Total variation distance of every `order`-way marginal over the public cells (or of
    the column-index `groups` given), the synthetic rows weighted by `weights` (default 1).

    TVD = 1/2 sum_cells |p_real - p_synthetic|. Evaluation only (tests, benchmarks).
    """
    cells = [public_cells(column, bins, equal_width=True) for column in encoder.columns]
    real_cells = [cell_index(c, real) for c in cells]
    synthetic_cells = [cell_index(c, synthetic) for c in cells]
    out = {}
    for group in groups if groups is not None else combinations(range(len(cells)), order):
        shape = tuple(cells[i].size for i in group)
        p = _joint_shares([real_cells[i] for i in group], shape, None)
        q = _joint_shares([synthetic_cells[i] for i in group], shape, weights)
        out[tuple(cells[i].column.name for i in group)] = 0.5 * float(np.abs(p - q).sum())
    return out


def _joint_shares(
    indices: list[np.ndarray], shape: tuple[int, ...], weights: np.ndarray | None
) -> np.ndarray:
    flat = np.ravel_multi_index(tuple(indices), shape)
    counts = np.bincount(flat, weights=weights, minlength=int(np.prod(shape)))
    return counts / counts.sum()
