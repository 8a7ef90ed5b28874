"""The recorded precision of a continuous column, measured with DP, and decoding onto it.

Continuous columns are often recorded on a grid: whole numbers (diamonds' `table` in
percent, 98 % of its rows; NYC flights' minutes of air time), cents, one decimal. A value
drawn uniformly inside its public cell (`domain.write_cells`) has digits the real values
never have, and where a real point mass sits near an edge of the cell, part of its rows
lands on the far side: decoding, not noise, is most of the large tables' one-way error
(docs/decisions/0013-decoding-inside-a-cell.md; the lattice's measurements:
docs/decisions/0015-measured-lattice.md).

Classes. With public span S = max - min, the candidate steps are the powers of ten 10^k, k =
floor(log10 S), ..., floor(log10 S) - STEPS + 1 (public: the schema's bounds). A nonzero
value's class is the coarsest candidate step of which it is a multiple
(|x/s - round(x/s)| <= TOLERANCE, or within single precision, below), else "none"; a zero
(|x| within TOLERANCE of the finest step) is in the class "zero", a point mass of its own: a
multiple of every step, it says nothing about the precision (counted on the coarsest step, a
column with 40 % zeros would put its other values on that step too), and columns of amounts
are often zero-inflated (an hourly precipitation with 93 % zeros, the rest in hundredths,
would otherwise be decoded uniformly among 0, 0.01, 0.02 and 0.03 in its first cell). A row
with a value lies in exactly one class of each such column (a missing value in none), so each
column's class histogram (STEPS steps, "none", "zero") has L1 and L2 sensitivity 1, as any
one-way histogram; `pgm` measures them with its other tables (its module docstring, round
"lattice").

Single precision. Tables kept in single precision (Stata's `float`, the storage of many
public economics tables) hold a decimal such as 13.17 as 13.170000076293944 once read as a
double: off the nearest multiple of 0.001 by up to half a unit in the last place of a
float32, 2^-24 |x|, far more than TOLERANCE steps. Within e = SINGLE_PRECISION |x| (2^-23, a
float32's machine epsilon) of a multiple of s, a value counts as that multiple when the step
is at least ten such e wide (s >= 10 e: finer steps cannot be told from the float32
rounding, and a double with many digits, 57.123456789, stays off the 1e-5 step). Without the
rule no step stands out for a single-precision column of incomes in thousands (3.5 % of its
values on 0.001 by the strict rule), and its synthetic values get seven decimals. The rule is
fixed, public and applied to each row alone.

Decoding (post-processing of the noisy histogram and of the synthetic rows' cells). In the
cell holding 0, a synthetic value is 0 with probability min(1, z / p0), z the zero class's
noisy count over all the classes' (kept above `ZERO_MARGIN` times the threshold, else 0) and
p0 the share of the synthetic rows (with a value) in that cell. Otherwise its
class is drawn from the noisy shares of the steps and "none" (counts below `kept_threshold`
taken as empty), restricted to the steps with at least one nonzero multiple in the value's
cell and renormalised; the value is a nonzero multiple of that step uniform among those in the
cell, or for "none" uniform in the cell. The class is drawn independently of the cell (one
histogram per column, not one per cell), so a column whose round values all sit in one region
gets round values in its other cells where a cell holds a multiple of a coarse step; a
multiple of a finer step may also be a multiple of a coarser one (uniform among the
multiples, not only the non-coarser ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from dprelease.encoding import EncodedColumn
from dprelease.schema import ContinuousColumn

STEPS = 7  # candidate steps: 10^k from the span's own decade down six decades
NONE, ZERO = STEPS, STEPS + 1  # the classes after the steps: off every step, exactly zero
CLASSES = STEPS + 2
# The zero class is kept at twice the threshold: kept at the threshold, a class is kept when
# its noise is high, and its share is the decoded share of zeros (250 zeros in 1,056 rows
# against a threshold of about 340 come out as 31-38 % zeros in some seeded fits and none in
# others); at twice it the noise is at most about 15 % of it.
ZERO_MARGIN = 2.0
TOLERANCE = 1e-6  # |x / s - round(x / s)| within which x counts as a multiple of s
SINGLE_PRECISION = 2.0**-23  # float32 rounding of x: within this times |x| (module docstring)
FALSE_CLASSES = 0.05  # expected number of classes per release kept on noise alone


def has_lattice(column: EncodedColumn) -> bool:
    """Whether a column gets a measured lattice: continuous, without a codebook (an integer
    column is decoded onto the integers, a codebook column onto its values)."""
    spec = column.spec
    return isinstance(spec, ContinuousColumn) and spec.values is None


def candidate_steps(column: EncodedColumn) -> np.ndarray:
    """The column's candidate steps, coarsest first (public: its bounds only)."""
    spec = column.spec
    assert isinstance(spec, ContinuousColumn)
    span = float(spec.max - spec.min)
    top = math.floor(math.log10(span)) if span > 0 else 0
    return np.array([10.0**k for k in range(top, top - STEPS, -1)])


def raw_values(column: EncodedColumn, encoded: np.ndarray) -> np.ndarray:
    """The column's values on the schema's scale (the encoding is (x - min) / span)."""
    spec = column.spec
    assert isinstance(spec, ContinuousColumn)
    low, high = float(spec.min), float(spec.max)
    return low + encoded[:, column.value_index] * (high - low)


def class_counts(column: EncodedColumn, encoded: np.ndarray) -> np.ndarray:
    """Exact counts of every class (STEPS steps, "none", "zero") over the rows with a value
    (module docstring)."""
    x = raw_values(column, encoded)
    if column.missing_index is not None:
        x = x[encoded[:, column.missing_index] <= 0.5]
    steps = candidate_steps(column)
    zero = np.abs(x) <= TOLERANCE * steps[-1]
    counts = np.zeros(CLASSES)
    counts[ZERO] = np.count_nonzero(zero)
    x = x[~zero]
    for k, step in enumerate(steps):  # coarsest first, on the rest only
        multiple = _multiple(x, step)
        counts[k] = np.count_nonzero(multiple)
        x = x[~multiple]
    counts[NONE] = len(x)
    return counts


def _multiple(x: np.ndarray, step: float) -> np.ndarray:
    """Whether each x is a multiple of `step`: within TOLERANCE steps, or within a float32's
    rounding e = SINGLE_PRECISION |x| where the step is at least 10 e (module docstring)."""
    off = np.abs(x - step * np.rint(x / step))
    single = SINGLE_PRECISION * np.abs(x)
    return (off <= TOLERANCE * step) | ((off <= single) & (10 * single <= step))


@dataclass(frozen=True)
class Lattice:
    """A column's candidate steps (coarsest first), the DP shares of its nonzero values'
    classes (one per step, then "none") and the DP share of its values that are zero."""

    steps: np.ndarray
    shares: np.ndarray
    zero: float = 0.0

    @classmethod
    def of(cls, column: EncodedColumn, noisy_counts: np.ndarray, threshold: float) -> Lattice:
        """From a noisy class histogram (`class_counts`): step and "none" counts below
        `threshold` (`kept_threshold`) are taken as empty, the rest normalised (with nothing
        left, every value in "none": uniform in its cell); the zero class is kept above
        `ZERO_MARGIN` times the threshold, as its count over all the classes' (module
        docstring, `ZERO_MARGIN`)."""
        counts = np.asarray(noisy_counts, dtype=float)
        kept = np.where(counts[: NONE + 1] >= threshold, counts[: NONE + 1], 0.0)
        if kept.sum() <= 0:
            kept = np.eye(NONE + 1)[NONE]
        zero = 0.0
        if counts[ZERO] >= ZERO_MARGIN * threshold:
            zero = min(1.0, float(counts[ZERO] / max(counts.sum(), counts[ZERO])))
        return cls(candidate_steps(column), kept / kept.sum(), zero)

    def record(self) -> dict[str, list[float] | float]:
        """The candidate steps, the shares of their classes with "none" last, and the share
        of zeros (post-processing of the noisy histogram; a share of 0 is a class below the
        threshold)."""
        return {
            "steps": [float(step) for step in self.steps],
            "shares": [round(float(share), 3) for share in self.shares],
            "zero_share": round(self.zero, 3),
        }


def kept_threshold(std: float, columns: int, total: float, *, gaussian: bool) -> float:
    """The noisy count a class needs to be kept (post-processing of public quantities and the
    noisy row count `total`): the count that noise alone exceeds with probability
    `FALSE_CLASSES` / m over the release's m = columns x CLASSES classes (Bonferroni), so
    that on average 0.05 empty classes per release are kept; Gaussian noise of SD `std`:
    z std with z the normal (1 - 0.05 / m) quantile, Laplace of scale b = std / sqrt(2):
    b ln(m / (2 x 0.05)). Where that is above half the noisy row count, not even a class of
    half the rows could be told from the noise and nothing is kept (infinite): the breast
    cancer demo (455 rows, 30 continuous columns, epsilon 1) has a threshold of about 1,000
    rows, and with a threshold of 2 SDs (about 580) some 5 of its 240 classes were kept on
    noise alone, each putting a whole column's values on a spurious step."""
    m = columns * CLASSES
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
    present: np.ndarray | None = None,
) -> np.ndarray:
    """Scaled values, one in each chosen cell (`edges`: the column's scaled cell edges),
    zero or on the lattice of a class drawn from `lattice` (module docstring); `present`
    marks the rows with a value (all by default: the others are written as missing). A value
    whose scaling rounds it out of its cell is drawn uniformly in the cell instead, so
    decoding never leaves the cell."""
    spec = column.spec
    assert isinstance(spec, ContinuousColumn)
    low, span = float(spec.min), float(spec.max - spec.min)
    n_bins = len(edges) - 1
    lows, highs = low + edges[:-1] * span, low + edges[1:] * span
    first = np.ceil(lows[:, None] / lattice.steps - 1e-9)
    last = np.ceil(highs[:, None] / lattice.steps - 1e-9) - 1  # a cell excludes its upper edge
    last[-1] = np.floor(highs[-1] / lattice.steps + 1e-9)  # except the last one
    holds_zero = (first <= 0) & (last >= 0)  # zero is drawn in its own class only
    points = np.maximum(last - first + 1, 0) - holds_zero
    probs = np.hstack(
        [lattice.shares[None, :STEPS] * (points > 0), np.full((n_bins, 1), lattice.shares[NONE])]
    )
    probs[probs.sum(axis=1) == 0, NONE] = 1.0  # no kept step in the cell: uniform
    cumulative = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
    cumulative[:, -1] = 1.0
    offsets = cumulative + np.arange(n_bins)[:, None]  # row b in (b, b + 1]: one sorted array
    position = np.searchsorted(offsets.ravel(), in_bin + rng.random(len(in_bin)), "right")
    drawn = np.minimum(position - in_bin * (STEPS + 1), NONE)
    scaled = edges[in_bin] + rng.random(len(in_bin)) * (edges[in_bin + 1] - edges[in_bin])
    on = drawn < STEPS  # the rest: uniform in the cell, as without a lattice
    cell, step = in_bin[on], drawn[on]
    multiple = first[cell, step] + np.floor(rng.random(int(on.sum())) * points[cell, step])
    multiple += holds_zero[cell, step] & (multiple >= 0)  # skip zero
    values = np.minimum(multiple, last[cell, step]) * lattice.steps[step]
    on_lattice = np.clip((values - low) / span, 0.0, 1.0)  # the bounds' own rounding error
    index = np.clip(np.searchsorted(edges, on_lattice, "right") - 1, 0, n_bins - 1)
    inside = index == cell
    scaled[np.flatnonzero(on)[inside]] = on_lattice[inside]
    _draw_zeros(scaled, edges, in_bin, lattice.zero, -low / span, rng, present)
    return scaled


def _draw_zeros(
    scaled: np.ndarray,
    edges: np.ndarray,
    in_bin: np.ndarray,
    share: float,
    zero: float,
    rng: np.random.Generator,
    present: np.ndarray | None,
) -> None:
    """Set the rows of the cell holding the scaled zero `zero` to it with probability
    min(1, share / p0), p0 that cell's share of the `present` rows (module docstring)."""
    if share <= 0 or not 0.0 <= zero <= 1.0:
        return
    n_bins = len(edges) - 1
    cell = min(int(np.searchsorted(edges, zero, "right")) - 1, n_bins - 1)
    present = np.ones(len(in_bin), dtype=bool) if present is None else present
    in_cell = (in_bin == cell) & present
    if not in_cell.any():
        return
    probability = min(1.0, share / (in_cell.sum() / max(int(present.sum()), 1)))
    scaled[in_cell & (rng.random(len(in_bin)) < probability)] = zero
