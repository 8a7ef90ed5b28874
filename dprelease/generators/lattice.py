"""The recorded precision of a continuous column, measured with DP, and decoding onto it.

Continuous columns are often recorded on a grid: whole numbers (diamonds' `table` in
percent, 98 % of its rows; NYC flights' minutes of air time), cents, one decimal. A value
drawn uniformly inside its public cell (`domain.write_cells`) has digits the real values
never have, and where a real point mass sits near an edge of the cell, part of its rows
lands on the far side (the README's "one-way error" section: diamonds' `table` one-way TVD
0.12 in the study's 10 bins, against 0.005 for the training split itself).

Classes. With public span S = max - min, the candidate steps are the powers of ten
10^k, k = floor(log10 S), ..., floor(log10 S) - STEPS + 1 (public: the schema's bounds). A
value's class is the coarsest candidate step of which it is a multiple
(|x / s - round(x / s)| <= TOLERANCE), else "none", the last class. Zero, a multiple of
every step, says nothing about the precision and is in no class: a column of expenditures
with 40 % zeros would otherwise put 40 % of its other values on its coarsest step (RAND
HIE's log expenditures, one of the tuning tables). A row with a nonzero value lies in
exactly one class of each such column (a missing value or a zero in none), so each column's class
histogram has L1 and L2 sensitivity 1, as any one-way histogram; `pgm` measures them with its
other tables (its module docstring, round "lattice").

Decoding (post-processing of the noisy histogram). A synthetic value's class is drawn from
the noisy shares (counts below `kept_threshold` taken as empty), restricted to the
classes with at least one multiple of their step in the value's cell and renormalised; the
value is a multiple of that step uniform among those in the cell, or for "none" uniform in
the cell. The class is drawn independently of the cell (one histogram per column, not one
per cell), so a column whose zeros are its only round values gets round values in its
other cells where a cell holds a multiple of a coarse step; a multiple of a finer step may
also be a multiple of a coarser one (uniform among the multiples, not only the non-coarser
ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from dprelease.encoding import EncodedColumn
from dprelease.schema import ContinuousColumn

STEPS = 7  # candidate steps: 10^k from the span's own decade down six decades
TOLERANCE = 1e-6  # |x / s - round(x / s)| within which x counts as a multiple of s
FALSE_CLASSES = 0.05  # expected number of classes per release kept on noise alone


def has_lattice(column: EncodedColumn) -> bool:
    """Whether a column gets a measured lattice: continuous, without a codebook (an integer
    column is decoded onto the integers, a codebook column onto its values)."""
    spec = column.spec
    return isinstance(spec, ContinuousColumn) and spec.values is None


def candidate_steps(column: EncodedColumn) -> np.ndarray:
    """The column's candidate steps, coarsest first (public: its bounds only)."""
    span = float(column.spec.max - column.spec.min)
    top = math.floor(math.log10(span)) if span > 0 else 0
    return np.array([10.0**k for k in range(top, top - STEPS, -1)])


def raw_values(column: EncodedColumn, encoded: np.ndarray) -> np.ndarray:
    """The column's values on the schema's scale (the encoding is (x - min) / span)."""
    low, high = float(column.spec.min), float(column.spec.max)
    return low + encoded[:, column.value_index] * (high - low)


def class_counts(column: EncodedColumn, encoded: np.ndarray) -> np.ndarray:
    """Exact counts of every class (STEPS steps and "none") over the rows with a nonzero
    value (module docstring)."""
    x = raw_values(column, encoded)
    if column.missing_index is not None:
        x = x[encoded[:, column.missing_index] <= 0.5]
    steps = candidate_steps(column)
    x = x[np.abs(x) > TOLERANCE * steps[-1]]
    counts = np.zeros(STEPS + 1)
    for k, step in enumerate(steps):  # coarsest first, on the rest only
        ratio = x / step
        multiple = np.abs(ratio - np.rint(ratio)) <= TOLERANCE
        counts[k] = np.count_nonzero(multiple)
        x = x[~multiple]
    counts[STEPS] = len(x)
    return counts


@dataclass(frozen=True)
class Lattice:
    """A column's candidate steps (coarsest first) and the DP shares of its classes (one
    per step, then "none")."""

    steps: np.ndarray
    shares: np.ndarray

    @classmethod
    def of(cls, column: EncodedColumn, noisy_counts: np.ndarray, threshold: float) -> Lattice:
        """From a noisy class histogram: counts below `threshold` (`kept_threshold`) are
        taken as empty, the rest normalised; with nothing left, every value in "none"
        (uniform in its cell)."""
        counts = np.asarray(noisy_counts, dtype=float)
        kept = np.where(counts >= threshold, counts, 0.0)
        if kept.sum() <= 0:
            kept = np.eye(STEPS + 1)[STEPS]
        return cls(candidate_steps(column), kept / kept.sum())

    def record(self) -> dict[str, list[float]]:
        """The candidate steps and the shares of their classes, "none" last (post-processing
        of the noisy histogram; a share of 0 is a class below the threshold)."""
        return {"steps": [float(step) for step in self.steps],
                "shares": [round(float(share), 3) for share in self.shares]}  # fmt: skip


def kept_threshold(std: float, columns: int, total: float, *, gaussian: bool) -> float:
    """The noisy count a class needs to be kept (post-processing of public quantities and the
    noisy row count `total`): the count that noise alone exceeds with probability
    `FALSE_CLASSES` / m over the release's m = columns x (STEPS + 1) classes (Bonferroni), so
    that on average 0.05 empty classes per release are kept; Gaussian noise of SD `std`:
    z std with z the normal (1 - 0.05 / m) quantile, Laplace of scale b = std / sqrt(2):
    b ln(m / (2 x 0.05)). Where that is above half the noisy row count, not even a class of
    half the rows could be told from the noise and nothing is kept (infinite): the breast
    cancer demo (455 rows, 30 continuous columns, epsilon 1) has a threshold of about 1,000
    rows, and with a threshold of 2 SDs (about 580) some 5 of its 240 classes were kept on
    noise alone, each putting a whole column's values on a spurious step."""
    m = columns * (STEPS + 1)
    if m == 0:
        return math.inf
    if gaussian:
        threshold = NormalDist().inv_cdf(1.0 - FALSE_CLASSES / m) * std
    else:
        threshold = std / math.sqrt(2.0) * math.log(m / (2.0 * FALSE_CLASSES))
    return threshold if threshold <= total / 2.0 else math.inf


def lattice_values(
    column: EncodedColumn,
    edges: np.ndarray,
    in_bin: np.ndarray,
    lattice: Lattice,
    rng: np.random.Generator,
) -> np.ndarray:
    """Scaled values, one in each chosen cell (`edges`: the column's scaled cell edges),
    on the lattice of a class drawn from `lattice` (module docstring). A value whose scaling
    rounds it out of its cell is drawn uniformly in the cell instead, so decoding never
    leaves the cell."""
    low, span = float(column.spec.min), float(column.spec.max - column.spec.min)
    n_bins = len(edges) - 1
    lows, highs = low + edges[:-1] * span, low + edges[1:] * span
    first = np.ceil(lows[:, None] / lattice.steps - 1e-9)
    last = np.ceil(highs[:, None] / lattice.steps - 1e-9) - 1  # a cell excludes its upper edge
    last[-1] = np.floor(highs[-1] / lattice.steps + 1e-9)  # except the last one
    points = np.maximum(last - first + 1, 0)
    probs = np.hstack([lattice.shares[None, :STEPS] * (points > 0),
                       np.full((n_bins, 1), lattice.shares[STEPS])])  # fmt: skip
    probs[probs.sum(axis=1) == 0, STEPS] = 1.0  # no kept step in the cell: uniform
    cumulative = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
    cumulative[:, -1] = 1.0
    offsets = cumulative + np.arange(n_bins)[:, None]  # row b in (b, b + 1]: one sorted array
    position = np.searchsorted(offsets.ravel(), in_bin + rng.random(len(in_bin)), "right")
    drawn = np.minimum(position - in_bin * (STEPS + 1), STEPS)
    scaled = edges[in_bin] + rng.random(len(in_bin)) * (edges[in_bin + 1] - edges[in_bin])
    on = drawn < STEPS  # the rest: uniform in the cell, as without a lattice
    cell, step = in_bin[on], drawn[on]
    multiple = first[cell, step] + np.floor(rng.random(int(on.sum())) * points[cell, step])
    values = np.minimum(multiple, last[cell, step]) * lattice.steps[step]
    on_lattice = np.clip((values - low) / span, 0.0, 1.0)  # the bounds' own rounding error
    index = np.clip(np.searchsorted(edges, on_lattice, "right") - 1, 0, n_bins - 1)
    inside = index == cell
    scaled[np.flatnonzero(on)[inside]] = on_lattice[inside]
    return scaled
