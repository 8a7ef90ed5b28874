"""The public cells the `pgm` generator counts and fits on: a column's base cells
(`domain.public_cells` at the generator's bins), the finer cells it is counted on when they
nest in the base ones (bins x `FINER[0]`), and the cells a fit runs on, chosen from the noisy
count. Public quantities and post-processing only: the cells depend on the schema, the bins
and a DP count, never on the data.

Resolution. A numeric column whose public cells at 32 and 64 bins nest in its 16
(`domain.refinement`: equal-width bins, integers, log-spaced edges that happen to nest) is
counted at 64 bins; after the count, the fit runs on the finest of 64 and 32 bins at which
an average one-way cell holds `SIGNAL_TO_NOISE` (3) noise standard deviations under the noisy
count (N >= 3 sigma_1 b), else on the base 16 bins, the counted tables summed onto them
(`Resolution.coarsen`; post-processing of exact counts before any noise, so every table is
measured once, at its chosen cells, with the planned noise). On few rows finer cells only
spread the noise; where the rows support them, the 16 bins' width is most of the one-way
error. Of the rule's threshold: credit card at 32 bins would hold 1.3 noise SDs per cell,
diamonds at 64 holds 29 (measurements: docs/decisions/0005-pgm-one-way-resolution.md; the
model round's resolution and the target's groups:
docs/decisions/0006-pgm-model-resolution-and-target-groups.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dprelease.generators.domain import ColumnCells, public_cells, refinement
from dprelease.generators.pgm.model import coarsen, coarsening, consecutive_groups

FINER = (4, 2)  # finer one-way cells: bins x 4, bins x 2, where the noisy count supports them
SIGNAL_TO_NOISE = 3.0  # noise SDs an average cell of a measured table should hold
MIN_GROUPS, MAX_GROUPS = 2, 16  # a column's coarse cells in the model round
# At most this many target groups in the selection and model rounds: 16 leave too few
# feature cells on large tables, 4 measure the target too coarsely for its model
# (docs/decisions/0006-pgm-model-resolution-and-target-groups.md).
TARGET_GROUPS = 8


@dataclass(frozen=True)
class Resolution:
    """The cells a fit works on: each column's cells, the map from its counted cells onto
    them, and the target's coarse groups on them."""

    cells: list[ColumnCells]
    from_counted: list[np.ndarray]
    target_groups: np.ndarray | None

    def coarsen(self, table: np.ndarray, axes: dict[int, int]) -> np.ndarray:
        """A counted table summed onto this resolution's cells: `axes` maps a table axis to
        its column."""
        for axis, column in axes.items():
            mapping = self.from_counted[column]
            if mapping.size != mapping.max() + 1:
                table = coarsen(table, axis, mapping)
        return table


@dataclass(frozen=True)
class CountedCells:
    """Every column's base cells, the cells it is counted on (the finest that nest in the
    base ones, else the base ones) and the map from those onto the base cells."""

    bins: int
    base: list[ColumnCells]
    counted: list[ColumnCells]
    to_base: list[np.ndarray]

    @classmethod
    def of(cls, base: list[ColumnCells], bins: int) -> CountedCells:
        counted, to_base = [], []
        for cells in base:
            finest = public_cells(cells.column, bins * FINER[0])
            mapping = refinement(finest, cells)
            if mapping is None or finest.size == cells.size:
                finest, mapping = cells, np.arange(cells.size)
            counted.append(finest)
            to_base.append(mapping)
        return cls(bins, base, counted, to_base)

    def refined(self) -> dict[str, int]:
        """The columns counted on finer cells than their base ones, and how many."""
        return {
            c.column.name: c.size
            for c, b in zip(self.counted, self.base, strict=True)
            if c is not b
        }

    def resolution(
        self, factor: int, target: int | None, target_groups: np.ndarray | None
    ) -> Resolution:
        """The cells at bins x `factor` (1 or a `FINER` factor) of every refinable column,
        the base cells of the others, and the target's base groups lifted onto them."""
        cells, maps = [], []
        for base, counted in zip(self.base, self.counted, strict=True):
            chosen = base if counted is base else public_cells(base.column, self.bins * factor)
            if chosen.size == counted.size:
                chosen, mapping = counted, np.arange(counted.size)
            else:
                refines = refinement(counted, chosen)
                assert refines is not None  # counted cells refine every resolution's cells
                mapping = refines
            cells.append(chosen)
            maps.append(mapping)
        lifted = None
        if target is not None and target_groups is not None:
            to_base = refinement(cells[target], self.base[target])
            if to_base is None:  # categories: the base cells themselves
                to_base = np.arange(self.base[target].size)
            lifted = target_groups[to_base]
        return Resolution(cells, maps, lifted)


def model_feature_groups(
    total: float, std: float, y_size: int, cells: ColumnCells, shares: np.ndarray
) -> np.ndarray:
    """A feature's fine-to-coarse map for the model round (`pgm` module docstring, round 3):
    b = clip(floor(sqrt(N / (3 sigma m_y))), 2, 16) groups of nearly equal mass under its DP
    one-way shares, so that an average cell of a (m_y, b, b) table holds `SIGNAL_TO_NOISE`
    noise SDs (N the noisy total, sigma the round's noise SD; post-processing)."""
    per_cell = total / (SIGNAL_TO_NOISE * std * y_size)
    groups = int(np.clip(math.floor(math.sqrt(max(per_cell, 0.0))), MIN_GROUPS, MAX_GROUPS))
    return coarsening(cells, groups, shares)


def model_target_groups(
    total: float, std: float, group_shares: np.ndarray, nullable: bool
) -> np.ndarray:
    """The target's groups in the selection and model rounds as a map from its counted
    groups (shares `group_shares`, the last one "missing" when `nullable`; `pgm` module
    docstring, round 3): m_y = clip(floor(N / (3 sigma 2^2)), 2, `TARGET_GROUPS`) groups of
    nearly equal DP mass (fewer where one counted group holds more than 1 / m_y of it), so
    that a table with 2 x 2 feature cells holds `SIGNAL_TO_NOISE` noise SDs per average cell
    and a skewed target's groups sit where its rows are (a count target with 80 % zeros
    and 15 % ones: {0}, {1}, {2+}, where equal widths had merged 0 and 1; post-processing)."""
    groups = math.floor(total / (SIGNAL_TO_NOISE * std * MIN_GROUPS**2))
    groups = int(np.clip(groups, MIN_GROUPS, TARGET_GROUPS))
    return consecutive_groups(group_shares.size, groups, group_shares, missing=nullable)
