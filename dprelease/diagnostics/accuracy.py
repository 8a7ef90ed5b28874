"""What a synthetic release can be trusted for: the accuracy its DP noise allows, whether the
generator collapsed, and one verdict. Computed only from public quantities and DP outputs
(the generator's noisy measurements, the synthetic rows, the weights' diagnostics): nothing
here reads the real table (docs/privacy-model.md section 8).

Expected error of a measured marginal. A generator measures a marginal as noisy counts over
its k public cells (`generators.base.Measurement`: noise of standard deviation s on every
cell, Laplace or Gaussian, and the noisy total N~, a DP estimate of the row count; the real
count is never used). Its shares are the noisy counts over N~, so the total variation
distance of the measured marginal from the real one is about

    E[TVD] ~ (1/2) sum_cells E|Z| / N~ = k E|Z| / (2 N~),
    E|Z| = s / sqrt(2) (Laplace of scale b = s / sqrt 2),  s sqrt(2 / pi) (Gaussian),

capped at 1, the largest TVD. This ignores the clipping of negative counts and the error of
N~ itself; the released marginals are post-processing of the measurements (clipped,
normalised, or fitted by a graphical model), which usually lowers the error, and the real
rows' own sampling variation comes on top. It is an order of magnitude, not a bound: enough
to say when the noise dominates.

Grade (`grade`): "good" when the median expected TVD of the one-way marginals is at most
`GOOD_TVD` (0.05: a twentieth of a column's mass misplaced) and that of the multi-way ones at
most 2 `GOOD_TVD`; "poor" (the noise dominates) when the one-way median exceeds `FAIR_TVD`
(0.15) or the multi-way median 2 `FAIR_TVD`; "fair" in between; "not stated" when the
generator measured no marginals (the DP-GANs).

Coarse relations (`coarse_relations`). The expected TVD grades the noise per measured cell,
not how coarse the cells are: on a few hundred rows a graphical model measures the
relations between columns with every column in two cells (above or below a DP split), and
the synthetic rows' relations come out weaker or are lost to the noise (AER Affairs, 601
rows, epsilon 1, 12 releases: correlation of the count of affairs with the marriage rating
-0.09 synthetic, from +0.03 to -0.19, against -0.28 real). A column is "in two cells"
when it has more than two cells of its own (its one-way measurement) but at most two on its
axis of every multi-way marginal that holds it (the generator's `Measurement.shape`); when
at least half of the columns with more than two cells that enter a multi-way marginal are,
the relations are coarse.

Collapse (`collapse`). A generator can produce few distinct rows whatever its weights' PSIS
diagnostics say (PSIS judges the weights, not the rows): with a continuous column every
synthetic row should be distinct, so fewer than `DISTINCT_CONTINUOUS` (50 %) distinct rows is
a collapse (a collapsed DP-GAN gave 849 distinct rows of 20,000: 4 %); without one, fewer
distinct rows than `COLLAPSE_FRACTION` (1 %) of what the release could hold (its row count,
or the size of the schema's public domain when smaller). Categories of the schema that no
synthetic row has are listed (the generator may have lost them).

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

Verdict (`verdict`): "usable" only when the grade is good, the relations are not coarse, no
column is crowded, no column's mean rests on weak cells, the generator did not collapse and
the weights are reliable and reached what they were fitted to; "not usable" when the noise
dominates or the generator collapsed; "usable with caution" otherwise, with the reasons.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from statistics import median
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from dprelease.generators.base import Measurement
from dprelease.generators.domain import ColumnCells, cell_index, cells_of_size

if TYPE_CHECKING:
    from dprelease.encoding import EncodedColumn, Encoder

GOOD_TVD = 0.05
FAIR_TVD = 0.15
DISTINCT_CONTINUOUS = 0.5
COLLAPSE_FRACTION = 0.01
CROWDED_SHARE = 0.9
CROWDED_FRACTION = 1 / 8
WEAK_SDS = 2.0  # a cell counted below this many noise SDs: the noise alone can fill it
MEAN_SHIFT_LIMIT = 0.25  # standard deviations of the rows outside the weak cells
WEIGHTS_CHI2_LIMIT = 4.0  # weighted chi-square per df above this: the weights missed their target
USABLE, CAUTION, NOT_USABLE = "usable", "usable with caution", "not usable"


def expected_tvd(measurement: Measurement) -> float:
    """The expected TVD of a measured marginal from its noise (module docstring)."""
    if measurement.noise == "laplace":
        mean_abs = measurement.noise_std / math.sqrt(2.0)
    else:
        mean_abs = measurement.noise_std * math.sqrt(2.0 / math.pi)
    if measurement.noisy_total <= 0:
        return 1.0
    return min(1.0, measurement.cells * mean_abs / (2.0 * measurement.noisy_total))


def grade(measurements: Sequence[Measurement]) -> dict:
    """Each measured marginal's expected TVD, their medians (one-way, multi-way) and the
    grade (module docstring)."""
    rows = [
        {"columns": list(m.columns), "cells": m.cells, "expected_tvd": expected_tvd(m)}
        for m in measurements
    ]
    one = [r["expected_tvd"] for r in rows if len(r["columns"]) == 1]
    multi = [r["expected_tvd"] for r in rows if len(r["columns"]) > 1]
    one_median = median(one) if one else None
    multi_median = median(multi) if multi else None
    if not rows:
        label = "not stated"
    elif _within(one_median, FAIR_TVD) and _within(multi_median, 2 * FAIR_TVD):
        good = _within(one_median, GOOD_TVD) and _within(multi_median, 2 * GOOD_TVD)
        label = "good" if good else "fair"
    else:
        label = "poor"
    return {
        "grade": label,
        "one_way_median_expected_tvd": one_median,
        "multi_way_median_expected_tvd": multi_median,
        "relations": coarse_relations(measurements),
        "marginals": rows,
    }


def coarse_relations(measurements: Sequence[Measurement]) -> dict:
    """The columns with more than two cells that every multi-way marginal holding them
    measured in two cells, out of those that some multi-way marginal holds, and whether
    they are at least half (module docstring)."""
    own = {m.columns[0]: m.cells for m in measurements if len(m.columns) == 1}
    finest: dict[str, int] = {}
    for m in measurements:
        if len(m.columns) > 1 and m.shape is not None:
            for column, size in zip(m.columns, m.shape, strict=True):
                finest[column] = max(finest.get(column, 0), size)
    related = [c for c in finest if own.get(c, 0) > 2]
    two = [c for c in related if finest[c] <= 2]
    return {
        "columns_in_two_cells": two,
        "related_columns": len(related),
        "coarse": bool(related) and 2 * len(two) >= len(related),
    }


def _within(value: float | None, limit: float) -> bool:
    return value is None or value <= limit


def collapse(synthetic: pd.DataFrame, columns: dict) -> dict:
    """Distinct synthetic rows, whether the generator collapsed, and the schema categories no
    synthetic row has (module docstring). `columns` is the public schema's columns."""
    n_rows = len(synthetic)
    distinct = len(synthetic[list(columns)].drop_duplicates())
    if any(spec["type"] == "continuous" for spec in columns.values()):
        collapsed = distinct < DISTINCT_CONTINUOUS * n_rows
    else:
        collapsed = distinct < COLLAPSE_FRACTION * min(float(n_rows), public_domain_size(columns))
    missing = {
        name: _absent(synthetic[name], spec["categories"])
        for name, spec in columns.items()
        if spec["type"] == "categorical"
    }
    return {
        "n_synthetic": n_rows,
        "distinct": distinct,
        "collapsed": collapsed,
        "missing_categories": {name: cats for name, cats in missing.items() if cats},
    }


def _absent(column: pd.Series, categories: list) -> list:
    """The categories no value of `column` equals (as text). The column is converted once:
    converting it per category took 5 of the 6.6 s of a release's bundle step on a 105-level
    column of 400,000 synthetic rows (NYC flights)."""
    present = set(column.astype(str).unique())
    return [category for category in categories if category not in present]


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
    """How much of each numeric column's synthetic mean rests on cells the DP noise alone can
    fill (module docstring): the cells of its one-way measurement whose count under the
    synthetic rows' shares, share x noisy total, is below `WEAK_SDS` noise SDs, the share of
    the synthetic rows with a value that lie in them, the column's synthetic mean with and
    without those rows (in its units; None when every cell is weak), and whether they
    `weak_cells_move_mean`: by more than `MEAN_SHIFT_LIMIT` standard deviations of the other
    rows, or every cell is weak. Every examined column gets the same keys whatever the DP
    outcome; columns whose cells cannot be rebuilt from the schema are left out."""
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
        }
    return out


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


def public_domain_size(columns: dict) -> float:
    """Number of possible rows of the schema's columns (public): categories or integer values
    per column (plus one when nullable); a continuous column has infinitely many."""
    size = 1.0
    for spec in columns.values():
        if spec["type"] == "categorical":
            values = float(len(spec["categories"]))
        elif spec["type"] == "integer":
            values = float(spec["max"] - spec["min"] + 1)
        else:
            return math.inf
        size *= values + bool(spec.get("nullable"))
    return size


def verdict(accuracy: dict, rows: dict, weights_verdict: str, weights_chi2: float | None) -> dict:
    """The release's verdict and its reasons, from the accuracy grade, the collapse check,
    the weights' PSIS verdict and how far the weights stayed from their DP target."""
    not_usable, caution = [], []
    if accuracy["grade"] == "poor":
        not_usable.append(
            "the DP noise dominates: the expected error of the measured marginals is above "
            f"{FAIR_TVD:g} (total variation); there are too few real rows for this many "
            "columns and cells at this epsilon"
        )
    elif accuracy["grade"] == "fair":
        caution.append("the DP noise is noticeable in the measured marginals")
    elif accuracy["grade"] == "not stated":
        caution.append("the generator measures no marginals, so their accuracy is not stated")
    relations = accuracy["relations"]
    if relations["coarse"]:
        caution.append(
            f"the relations between columns are coarse: {len(relations['columns_in_two_cells'])} "
            f"of the {relations['related_columns']} columns with more than two cells were "
            "measured with each other in two cells only, so the synthetic rows' relations come "
            "out weaker than the real ones or are lost to the noise; more rows or a larger "
            "epsilon measure them finer"
        )
    if rows["collapsed"]:
        not_usable.append(
            f"the generator collapsed onto {rows['distinct']:,} distinct rows of "
            f"{rows['n_synthetic']:,}"
        )
    if rows["missing_categories"]:
        caution.append("some categories have no synthetic row")
    column_reasons = (
        (crowded(rows), "90 % of the synthetic rows lie in at most an eighth of the column's "
         "cells, inside which values are drawn apart from the other columns, so relations "
         "finer than a cell are lost; bounds closer to where the rows are give finer cells "
         "there"),
        (moved_means(rows), f"synthetic rows in cells whose DP counts are within {WEAK_SDS:g} "
         "noise standard deviations of zero, cells the noise alone can fill, move the "
         "column's mean by more than a quarter of a standard deviation of its other rows: its "
         "mean and its far values are not reliable; bounds closer to where the rows are leave "
         "fewer such cells"),
    )  # fmt: skip
    for names, reason in column_reasons:
        if names:
            caution.append(", ".join(f"`{name}`" for name in names) + f": {reason}")
    if weights_verdict == "unreliable":
        caution.append("PSIS calls the importance weights unreliable")
    if weights_chi2 is not None and weights_chi2 > WEIGHTS_CHI2_LIMIT:
        caution.append(
            f"the weighted rows stay {weights_chi2:.3g} times the noise level (chi-square per "
            "degree of freedom) from the DP tables the weights were fitted to"
        )
    label = NOT_USABLE if not_usable else (CAUTION if caution else USABLE)
    return {"verdict": label, "reasons": not_usable + caution}
