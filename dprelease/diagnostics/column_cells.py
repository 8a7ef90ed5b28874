"""Where the synthetic rows sit in each numeric column's public cells: cells so crowded that
relations finer than a cell are lost, and cells the DP noise alone can fill, on which a mean
or a far tail may rest. Computed from the synthetic rows and the generator's DP
measurements only (docs/privacy-model.md section 8); `diagnostics.accuracy.verdict` names
the columns these checks flag (measurements:
docs/decisions/0024-report-weak-cells-and-far-tails.md).

Crowded cells (`cell_crowding`). The grade says nothing about how wide the cells are where the
rows are: a column whose public bounds are far wider than its rows keeps them in a few of its
equal-width cells, inside which synthetic values are drawn uniformly, so every relation at a
finer scale is lost whatever the noise (delays in minutes bounded by -120 and 1,440 whose rows
sit near 0: 90 % of the rows in 3 of 64 cells of 24 minutes). A numeric column whose cells are
wider than one value is crowded when `CROWDED_SHARE` (90 %) of its synthetic rows with a value
lie in at most `CROWDED_FRACTION` (1/8) of its cells (the cells of its one-way measurement),
counted on the synthetic rows (a DP output).

Weak cells (`weak_cells`). A numeric column bounded far beyond its rows has many empty cells,
and the noise lifts some of them above zero: a few synthetic rows far out, which barely move
the TVD but move the mean (visit counts bounded at 365 whose rows sit near 0). A cell's DP
count is its share of the synthetic rows (all of them, "missing" included) times the
measurement's noisy total N~, so that a nullable column's cells are not inflated by the share
of rows without a value. A cell is strong (`strong_cells`) when its DP count reaches `WEAK_SDS`
(2) noise standard deviations and it lies in the column's body or in a run of such cells whose
sum the noise alone leaves nowhere in the column with probability above 1 % (the Bonferroni
bound z std sqrt(r) of `generators.pgm.one_way.stray_runs` over the column's cells: z = 3.6 for
64 cells); every other cell is weak: whether it holds real rows is not resolved. The noise
lifts an empty cell past 2 SDs with probability 0.023, some one of 30 empty cells with
probability 0.5: the second condition keeps such an isolated cell from counting as strong. The
synthetic mean with and without the rows in weak cells is recorded, and the weak cells move the
mean when they shift it by more than `MEAN_SHIFT_LIMIT` (0.25) standard deviations of the other
rows (or every cell is weak).

Far tails (`weak_cells`, `noisy_tails`). A tail can rest on weak cells without moving the
mean much. A column's far tail rests on noise when at least `TAIL_SHARE` (1 %) of its
synthetic rows with a value lie beyond its strong cells (above the highest or below the
lowest strong cell): its 99th (or 1st) percentile, and every value beyond it, then lies in
cells the noise alone can fill; the threshold is that definition, not a tuned number. A cell
counted strong at 2 SDs alone, on the shares of the rows with a value, misses such tails where
cells the noise lifted near a bound hold up the strong cells; the run condition above names
them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from dprelease.generators.base import Measurement
from dprelease.generators.domain import ColumnCells, cell_index, cells_of_size
from dprelease.generators.pgm.one_way import stray_runs
from dprelease.schema import CategoricalColumn, IntegerColumn

if TYPE_CHECKING:
    from dprelease.encoding import EncodedColumn, Encoder

CROWDED_SHARE = 0.9
CROWDED_FRACTION = 1 / 8
WEAK_SDS = 2.0  # a cell counted below this many noise SDs: the noise alone can fill it
MEAN_SHIFT_LIMIT = 0.25  # standard deviations of the rows outside the weak cells
TAIL_SHARE = 0.01  # rows beyond the strong cells on one side: the 99th (1st) percentile in them
# The other weak cells (`strong_cells`), in the words of the verdict and the report
APART = " or, apart from the column's body, within what the noise alone reaches in any of its cells"


def cell_crowding(
    encoder: Encoder, synthetic: np.ndarray, measurements: Sequence[Measurement]
) -> dict[str, dict]:
    """How the synthetic rows fill each numeric column's cells (module docstring): its cells,
    how few of them hold `CROWDED_SHARE` of the rows with a value, the widest of those in the
    column's units, whether the cell at `min` is one of them, and whether the column is
    `crowded`. Every examined column gets the same keys whatever the DP outcome (a manifest's
    structure must not depend on it). `synthetic`: the encoded synthetic rows. The cells are
    those of each column's one-way measurement; columns whose cells cannot be rebuilt from
    the schema and their number, or with one cell per value, are left out."""
    out = {}
    for column, _, cells, value_cells in _numeric_one_ways(encoder, measurements):
        if cells.points is not None or value_cells < 1 / CROWDED_FRACTION:
            continue
        counts = np.bincount(cell_index(cells, synthetic), minlength=cells.size)[:value_cells]
        order = np.argsort(counts)[::-1]
        total = counts.sum()
        held = int(np.searchsorted(np.cumsum(counts[order]), CROWDED_SHARE * total)) + 1
        held = held if total else 0  # no value in the synthetic rows: nothing crowds
        spec = column.spec
        assert not isinstance(spec, CategoricalColumn) and cells.edges is not None
        widths = np.diff(cells.edges)[order[:held]] * float(spec.max - spec.min)
        out[column.name] = {
            "cells": value_cells,
            "cells_holding_90_percent": held,
            "widest_of_them": float(widths.max()) if held else 0.0,
            "lowest_cell_among_them": bool(0 in order[:held]),
            "crowded": 0 < held <= CROWDED_FRACTION * value_cells,
        }
    return out


def weak_cells(
    encoder: Encoder, synthetic: np.ndarray, measurements: Sequence[Measurement]
) -> dict[str, dict]:
    """How much of each numeric column's synthetic rows rest on cells the DP noise alone can
    fill (module docstring): the cells of its one-way measurement that are not strong
    (`strong_cells`, on each cell's share of the synthetic rows x noisy total), the share of
    the synthetic rows with a value that lie in them, the column's synthetic mean with and
    without those rows (in its units; None when every cell is weak), and whether they
    `weak_cells_move_mean`: by more than `MEAN_SHIFT_LIMIT` standard deviations of the other
    rows, or every cell is weak. Then the far tails (`_far_tails`): the span of its strong
    cells, the shares of its rows with a value below and above it, and whether each share
    reaches `TAIL_SHARE`. Every examined column gets the same keys whatever the DP outcome;
    columns whose cells cannot be rebuilt from the schema are left out."""
    out = {}
    for column, m, cells, value_cells in _numeric_one_ways(encoder, measurements):
        index = cell_index(cells, synthetic)
        with_value = index < value_cells
        counts = np.bincount(index[with_value], minlength=value_cells)
        total = int(counts.sum())
        weak = ~strong_cells(counts * (m.noisy_total / max(index.size, 1)), m.noise_std)
        spec = column.spec
        assert not isinstance(spec, CategoricalColumn)
        low, span = float(spec.min), float(spec.max - spec.min)
        values = low + span * synthetic[with_value, column.value_index]
        strong = ~weak[index[with_value]]
        mean = float(values.mean()) if total else None
        kept = float(values[strong].mean()) if strong.any() else None
        share = float(1.0 - strong.mean()) if total else 0.0
        moves = mean is not None and (
            kept is None or abs(mean - kept) > MEAN_SHIFT_LIMIT * float(values[strong].std())
        )
        out[column.name] = {
            "weak_cells": int(weak.sum()),
            "rows_in_weak_cells": share,
            "mean": mean,
            "mean_without_weak_cells": kept,
            "weak_cells_move_mean": moves,
            **_far_tails(index[with_value], weak, cells, low, span),
        }
    return out


def strong_cells(counts: np.ndarray, std: float) -> np.ndarray:
    """The cells of a column whose counts `counts` (share x noisy total, in order) stand above
    noise of standard deviation `std`: at least `WEAK_SDS` SDs, in a run of such consecutive
    cells that is the column's heaviest (its body) or whose sum reaches the multiple-comparison
    bound z std sqrt(r) of `generators.pgm.one_way.stray_runs` (z = Phi^-1(1 - 0.01 / L) over
    the column's L cells: the noise alone lifts a run that far anywhere in the column with
    probability at most 1 %). A run of r cells of 2 SDs each passes once r >= z^2 / 4 (4
    cells of 64)."""
    strong = counts >= WEAK_SDS * std
    for start, stop in stray_runs(np.where(strong, counts, 0.0), counts, std):
        strong[start:stop] = False
    return strong


def _far_tails(
    index: np.ndarray, weak: np.ndarray, cells: ColumnCells, low: float, span: float
) -> dict:
    """The span of the strong cells in the column's units x = low + span u (from the lower
    edge of the lowest to the upper edge of the highest strong cell; for an integer column
    the smallest and largest integers they hold; None when no cell is strong), the shares of
    the rows `index` (their cells) below and above it, whether each share reaches
    `TAIL_SHARE`, how many cells lie beyond it and whether each cell is one value of the
    column (`points`): where no cell lies beyond the strong ones, or each cell is one value,
    bounds nearer the rows cannot leave fewer weak cells; only more rows or a larger epsilon
    can (the report's advice, `release.report.accuracy`). Scalars only: the manifest's
    structure does not depend on the DP outcome."""
    strong = np.flatnonzero(~weak)
    first = last = None
    below = above = 0.0
    beyond = int(strong[0] + weak.size - 1 - strong[-1]) if strong.size else 0
    if strong.size and index.size:
        assert cells.edges is not None  # a numeric column's cells
        first, last = (low + span * float(cells.edges[k]) for k in (strong[0], strong[-1] + 1))
        spec = cells.column.spec
        if isinstance(spec, IntegerColumn):  # [a, b) holds the integers ceil(a)..ceil(b) - 1
            holds_max = strong[-1] + 2 == len(cells.edges)  # the last cell also holds `max`
            first = float(math.ceil(first - 1e-9))
            last = float(spec.max) if holds_max else float(math.ceil(last - 1e-9) - 1)
        below, above = float(np.mean(index < strong[0])), float(np.mean(index > strong[-1]))
    return {
        "strong_cells_low": first,
        "strong_cells_high": last,
        "rows_below_strong_cells": below,
        "rows_above_strong_cells": above,
        "cells_beyond_strong_cells": beyond,
        "one_value_per_cell": cells.points is not None,
        "lower_tail_on_noise": below >= TAIL_SHARE,
        "upper_tail_on_noise": above >= TAIL_SHARE,
    }


def _numeric_one_ways(
    encoder: Encoder, measurements: Sequence[Measurement]
) -> Iterator[tuple[EncodedColumn, Measurement, ColumnCells, int]]:
    """Each numeric column's one-way measurement whose cells rebuild from the schema and
    their number (`cells_of_size`), with those cells and how many of them hold values (all
    but a nullable column's last, "missing")."""
    columns = {column.name: column for column in encoder.columns}
    for m in measurements:
        column = columns.get(m.columns[0]) if len(m.columns) == 1 else None
        if column is None or column.is_categorical:
            continue
        cells = cells_of_size(column, m.cells)
        if cells is not None:
            yield column, m, cells, m.cells - int(column.spec.nullable)


def crowded(rows: dict) -> list[str]:
    """The crowded columns of a release's `synthetic_rows` record (`cell_crowding`)."""
    return [name for name, record in rows.get("cell_crowding", {}).items() if record["crowded"]]


def moved_means(rows: dict) -> list[str]:
    """The columns of a release's `synthetic_rows` record whose mean rests on weak cells
    (`weak_cells`)."""
    records = rows.get("weak_cells", {}).items()
    return [name for name, record in records if record["weak_cells_move_mean"]]


def noisy_tails(rows: dict) -> list[str]:
    """The columns of a release's `synthetic_rows` record with a far tail on weak cells
    (`weak_cells`) whose mean the weak cells do not already move (`moved_means` names those,
    tails included)."""
    records = rows.get("weak_cells", {}).items()
    return [
        name
        for name, record in records
        if (record.get("lower_tail_on_noise") or record.get("upper_tail_on_noise"))
        and not record["weak_cells_move_mean"]
    ]
