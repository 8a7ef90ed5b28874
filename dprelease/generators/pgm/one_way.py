"""A column's one-way shares from its noisy histogram (the `pgm` generator's round 1).

Post-processing of DP outputs only: the noisy counts y (every cell plus independent noise of
the public standard deviation `std`), the noisy row total T and the public cells. A numeric
column's consecutive cells are smoothed with the kernel (a, 1 - 2a, a), a chosen by Stein's
unbiased risk estimate (`smoothed_counts`), a feature's empty tails are set to zero where its
cells were refined (`empty_tails`), the counts are projected onto the simplex of total T
(`project_to_simplex`), and a count target's stray runs far from its body are set to zero
(`stray_runs`).

Smoothing. SURE needs only the noisy counts and the public noise SD; a = 0 wins where
neighbouring cells differ by more than the noise. Soft or hard thresholds and empirical-Bayes
shares were measured against it and made an estimate worse on a tuning table
(docs/decisions/0007-pgm-one-way-smoothing.md).

Empty tails. A skewed column whose public bounds reach far beyond its rows (sales counts
bounded at 20,000 whose rows sit below 9,000, in 64 cells) has dozens of empty cells, and the
projection keeps the noise that lifted each above tau, so the synthetic rows spill beyond the
largest real value and the synthetic mean sits above the real one. Such runs are set to zero
only on refined cells (64 or 32: the noisy count holds 3 noise SDs per average cell, so a run
thin enough to trim is far thinner than the column's average cell), never on the base 16
cells of a small table (where the rule cuts real tails) and never on the target (its tail
carries the target model; docs/decisions/0008-pgm-empty-tails.md).

Stray runs of a count target (`stray_runs`). The noise lifts a few of a column's empty far
cells above the projection's shift; each keeps a handful of rows far from every real one. On
a count target bounded far above its rows these are outliers of the target model. Where the
target is an integer column whose cells hold several integers each
(`ColumnCells.wide_integer`), its runs of positive cells apart from its body whose noisy sum
is below z noise SDs are set to zero, z about 3.4: the Bonferroni z of the 1 % level over the
column's cells (`STRAY_LEVEL`). The rule is not applied to continuous targets, to counts with
a cell per value or to features, where it made the target model worse; the report names the
columns whose mean rests on noise-lifted cells instead (`diagnostics.accuracy.weak_cells`;
measurements: docs/decisions/0009-pgm-stray-runs-of-a-count-target.md).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

# Kernel weights a of the one-way smoother (a, 1 - 2a, a); 0 keeps the noisy counts.
SMOOTHING_WEIGHTS = (0.0, 0.1, 0.2, 0.25, 0.3, 1 / 3)
# Noise SDs of a run's sum by which the rows it keeps must exceed the rows it may hold
# (`empty_tails`); margins of 1.5 and 2 trim too rarely to move a skewed column's mean
# (docs/decisions/0008-pgm-empty-tails.md).
TRIM_MARGIN = 1.0
# The chance that the noise alone leaves a stray run anywhere among a column's empty cells
# (`stray_runs`: a Bonferroni bound over its cells).
STRAY_LEVEL = 0.01


def simplex_shift(noisy: np.ndarray, total: float) -> float:
    """The shift tau of the nearest (L2) non-negative vector summing to `total`,
    max(noisy - tau, 0) (Duchi et al. 2008)."""
    flat = np.sort(noisy.ravel())[::-1]
    cumulative = np.cumsum(flat) - total
    ranks = np.arange(1, flat.size + 1)
    kept = np.nonzero(flat - cumulative / ranks > 0)[0]
    return float(cumulative[kept[-1]] / (kept[-1] + 1) if kept.size else flat[0] - total)


def project_to_simplex(noisy: np.ndarray, total: float) -> np.ndarray:
    """The nearest (L2) non-negative vector summing to `total`: max(noisy - tau, 0) (Duchi
    et al. 2008). Unlike clipping negative counts, it does not move mass onto the empty cells
    the noise lifted above zero."""
    return np.clip(noisy - simplex_shift(noisy, total), 0.0, None)


def empty_tails(noisy: np.ndarray, std: float, shift: float) -> tuple[int, int]:
    """How many cells at the low and at the high end of an ordinal column's noisy histogram
    to set to zero (post-processing: the noisy counts, the public noise SD and the
    projection's shift tau).

    A run of k empty cells at an end keeps k g rows after the projection, g = E[(e - tau)+]
    for the noise e: std (phi(a) - a (1 - Phi(a))) for Gaussian noise, a = tau / std (0.40
    std at a = 0; Laplace noise of the same SD keeps 0.35 std there, and the Gaussian's g is
    used for both). g is that of the unsmoothed counts: where the smoother averaged
    neighbours (noise SD 0.58 std at a = 1/3) the projection keeps fewer rows, so the rule
    trims somewhat more often than this balance says; the margin was chosen by measurement
    (`TRIM_MARGIN`). Setting the run to zero loses its real rows instead, estimated by
    max(S_k, 0) for the run's noisy sum S_k. Among the runs whose loss is below the rows they
    keep by `TRIM_MARGIN` noise SDs of their sum, max(S_k, 0) + TRIM_MARGIN std sqrt(k) < k g,
    the one with the largest k g - max(S_k, 0) is set to zero (the longest qualifying run
    instead cut into the body of a skewed column: the maximum over k of a noisy sum dips
    below the bound somewhere). With a = 0 a run needs at least 7 cells. Where the two runs
    would leave no cell, nothing is trimmed."""
    n = noisy.size
    if std <= 0 or n < 2:
        return 0, 0
    a, normal = shift / std, NormalDist()
    spurious = std * (normal.pdf(a) - a * (1.0 - normal.cdf(a)))
    lengths = np.arange(1, n)

    def run(counts: np.ndarray) -> int:
        real = np.maximum(np.cumsum(counts)[:-1], 0.0)
        gain = np.where(
            real + TRIM_MARGIN * std * np.sqrt(lengths) < lengths * spurious,
            lengths * spurious - real,
            0.0,
        )
        return int(lengths[np.argmax(gain)]) if gain.max() > 0 else 0

    low, high = run(noisy), run(noisy[::-1])
    return (0, 0) if low + high >= n else (low, high)


def stray_runs(shares: np.ndarray, noisy: np.ndarray, std: float) -> list[tuple[int, int]]:
    """The runs of consecutive cells with a positive share, other than the heaviest run (the
    body), whose noisy counts sum to less than z noise SDs of that sum: a run of r cells is a
    stray when sum(noisy) < z std sqrt(r), z = Phi^-1(1 - `STRAY_LEVEL` / L) for the L
    cells (3.26 for 18 cells, 3.44 for 34, 3.61 for 66), so that the noise of an empty cell
    passes it with probability `STRAY_LEVEL` / L and the noise alone leaves a stray
    anywhere among the cells with probability at most `STRAY_LEVEL` (Bonferroni). A real
    cluster of r cells survives once it holds about z std sqrt(r) rows. (start, stop)
    pairs; post-processing of the noisy counts, the shares and the public SD."""
    positive = np.concatenate([[0], (shares > 0).astype(np.int8), [0]])
    changes = np.flatnonzero(np.diff(positive))
    runs = list(zip(changes[::2].tolist(), changes[1::2].tolist(), strict=True))
    if len(runs) < 2 or std <= 0:
        return []
    z = NormalDist().inv_cdf(1.0 - STRAY_LEVEL / shares.size)
    body = max(runs, key=lambda run: shares[run[0] : run[1]].sum())
    return [
        (start, stop)
        for start, stop in runs
        if (start, stop) != body and noisy[start:stop].sum() < z * std * math.sqrt(stop - start)
    ]


def smoothed_counts(noisy: np.ndarray, std: float) -> np.ndarray:
    """Noisy counts of an ordinal column's consecutive cells smoothed by the kernel
    (a, 1 - 2a, a), reflected at the bounds (S's rows sum to 1, so the total is kept), with
    a among `SMOOTHING_WEIGHTS` minimising Stein's unbiased risk estimate of a linear
    smoother (Stein 1981; Li 1986): SURE(a) = ||y - S_a y||^2 - n std^2 + 2 std^2 tr(S_a),
    unbiased for E||S_a y - mu||^2 under independent noise of variance std^2 (Gaussian or
    Laplace). It needs only the noisy counts and the public noise std (post-processing).
    a = 0 wins when neighbouring cells differ by more than the noise
    (docs/decisions/0007-pgm-one-way-smoothing.md)."""
    n = noisy.size
    if n < 3 or std <= 0:
        return noisy
    left = np.concatenate([noisy[:1], noisy[:-1]])  # each cell's neighbours, reflected
    right = np.concatenate([noisy[1:], noisy[-1:]])
    best, best_risk = noisy, math.inf
    for a in SMOOTHING_WEIGHTS:
        fit = (1 - 2 * a) * noisy + a * (left + right)
        trace = n * (1 - 2 * a) + 2 * a  # the two edge cells keep 1 - a of themselves
        risk = float(((noisy - fit) ** 2).sum()) + std**2 * (2 * trace - n)
        if risk < best_risk:
            best, best_risk = fit, risk
    return best


def denoised_shares(
    noisy: np.ndarray,
    total: float,
    std: float = 0.0,
    ordinal_cells: int = 0,
    *,
    trim_tails: bool = True,
    drop_strays: bool = False,
) -> np.ndarray:
    """A column's one-way shares from its noisy histogram: the first `ordinal_cells` cells (a
    numeric column's bins, in order; not its "missing" cell) smoothed (`smoothed_counts`),
    their empty tails set to zero (`empty_tails`), the rest projected onto the simplex of
    the noisy total, and with `drop_strays` the stray runs among the ordinal cells set to
    zero (`stray_runs`, on the unsmoothed counts) and the shares renormalised
    (post-processing)."""
    total = max(total, 1.0)
    kept = np.ones(noisy.size, dtype=bool)
    raw = noisy
    if ordinal_cells:
        ordinal = noisy[:ordinal_cells]
        noisy = np.concatenate([smoothed_counts(ordinal, std), noisy[ordinal_cells:]])
        trimmed = empty_tails(ordinal, std, simplex_shift(noisy, total)) if trim_tails else None
        low, high = trimmed or (0, 0)
        kept[:low] = False
        kept[ordinal_cells - high : ordinal_cells] = False
    shares = np.zeros(noisy.size)
    shares[kept] = project_to_simplex(noisy[kept], total)
    if ordinal_cells and drop_strays:
        for start, stop in stray_runs(shares[:ordinal_cells], raw[:ordinal_cells], std):
            shares[start:stop] = 0.0
    return shares / shares.sum() if shares.sum() > 0 else np.full(shares.size, 1.0 / shares.size)
