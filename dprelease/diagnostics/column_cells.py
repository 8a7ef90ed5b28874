"""Where the synthetic rows sit in each numeric column's public cells: cells so crowded that
relations finer than a cell are lost, and cells the DP noise alone can fill, on which a mean
or a far tail may rest. Computed from the synthetic rows and the generator's DP
measurements only (docs/privacy-model.md section 8); `diagnostics.accuracy.verdict` names
the columns these checks flag.

Crowded cells (`cell_crowding`). The grade says nothing about how wide the cells are where
the rows are: a column whose public bounds are far wider than its rows keeps them in a few
of its equal-width cells, inside which synthetic values are drawn uniformly, so every
relation at a finer scale is lost whatever the noise (NYC flights 2013, 336,776 rows,
delays bounded by -120 and 1,440 minutes: 90 % of the rows in 3 of 64 cells of 24 minutes,
and the correlation of departure and arrival delay 0.45 synthetic against 0.92 real). A
numeric column whose cells are wider than one value is crowded when `CROWDED_SHARE` (90 %)
of its synthetic rows with a value lie in at most `CROWDED_FRACTION` (1/8) of its cells (the
cells of its one-way measurement), counted on the synthetic rows (a DP output).

Weak cells (`weak_cells`). A numeric column bounded far beyond its rows has many empty
cells, and the noise lifts some of them above zero: a few synthetic rows far out, which
barely move the TVD but move the mean (COUNT's rwm5yr, 19,609 person-years, doctor and
hospital visits bounded at 365, epsilon 1: the synthetic mean of hospital visits 1.1-1.6
against 0.14 real, of doctor visits 4.7-6.5 against 3.2). A cell of a column's one-way
measurement is weak when its count under the synthetic rows' shares (share x the noisy total
N~, DP outputs) is below `WEAK_SDS` (2) noise standard deviations: the noise alone lifts an
empty cell that far with probability 0.023, so whether such a cell holds real rows is not
resolved. The synthetic mean with and without the rows in weak cells is recorded, and the
weak cells move the mean when they shift it by more than `MEAN_SHIFT_LIMIT` (0.25) standard
deviations of the other rows (or every cell is weak). Without them rwm5yr's means are
0.24-0.25 and 2.9-3.2. Measured on default releases at epsilon 1 (3 splits each of the
fidelity study's twelve tables, `benchmarks/fidelity_tables.py`; 246 numeric columns over
the releases): the check fired on 108, of which 47 % had a synthetic mean more than 0.2 real
standard deviations from the real one, against 4 % of the other 138; never on diamonds,
CPS1988 or ISLR Wage, on 6 of rwm5yr's 18 (its two visit counts), on most columns of the
few-hundred-row tables (Boston, credit card, HousePrices), where most cells are weak.
Limiting it to columns with at most a tenth of their rows in weak cells fired on 40 (70 %
more than 0.2 SD off) but missed 13 % of the others, one 1.7 SD off (RecreationDemand's
expenditures).

Far tails (`weak_cells`, `noisy_tails`). A tail can rest on weak cells without moving the
mean much: carData's SLID (7,425 rows), hourly wages bounded at 100 against a real maximum of
49.9: 1-4 % of the synthetic wages lay above the last strong cell and the synthetic 99th
percentile was 3.7-4.3 real SDs above the real one, yet the weak cells moved the mean by
0.18 SD, under `MEAN_SHIFT_LIMIT`. A column's far tail rests on noise when at least
`TAIL_SHARE` (1 %) of its synthetic rows with a value lie beyond its strong cells (above the
highest or below the lowest cell that is not weak): its 99th (or 1st) percentile, and every
value beyond it, then lies in cells the noise alone can fill; the threshold is that
definition, not a tuned number. Measured on default releases at epsilon 1 (twelfth session:
3 splits each of 15 study tables and SLID, 381 numeric columns): the mean check named 196;
the tail check named 60 of the other 185, whose flagged percentile was a median 0.91 real
SDs from the real one (45 % more than 1 SD), against 0.03 for the 125 named by neither
(13 % more than 1 SD: a far cell the noise lifted past 2 SDs counts as strong, SLID's wages
once 6.4 SD; a tail the generator lost rather than invented, DoctorVisits' visits 2.5 SD
low; rare 0/1 indicators). It never named a column of diamonds, and CPS1988's log wage once
in three (99th percentile 0.3 SD high).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from dprelease.generators.base import Measurement
from dprelease.generators.domain import ColumnCells, cell_index, cells_of_size
from dprelease.schema import IntegerColumn

if TYPE_CHECKING:
    from dprelease.encoding import EncodedColumn, Encoder

CROWDED_SHARE = 0.9
CROWDED_FRACTION = 1 / 8
WEAK_SDS = 2.0  # a cell counted below this many noise SDs: the noise alone can fill it
MEAN_SHIFT_LIMIT = 0.25  # standard deviations of the rows outside the weak cells
TAIL_SHARE = 0.01  # rows beyond the strong cells on one side: the 99th (1st) percentile in them


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
        widths = np.diff(cells.edges)[order[:held]] * float(column.spec.max - column.spec.min)
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
    fill (module docstring): the cells of its one-way measurement whose count under the
    synthetic rows' shares, share x noisy total, is below `WEAK_SDS` noise SDs, the share of
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
        weak = counts * (m.noisy_total / max(total, 1)) < WEAK_SDS * m.noise_std
        low, span = float(column.spec.min), float(column.spec.max - column.spec.min)
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
    return [name for name, record in records
            if (record.get("lower_tail_on_noise") or record.get("upper_tail_on_noise"))
            and not record["weak_cells_move_mean"]]  # fmt: skip
