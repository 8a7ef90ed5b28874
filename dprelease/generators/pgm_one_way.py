"""A column's one-way shares from its noisy histogram (the `pgm` generator's round 1).

Post-processing of DP outputs only: the noisy counts y (every cell plus independent noise of
the public standard deviation `std`), the noisy row total T and the public cells.

The estimate is the member of a small family of estimators g(y) with the least Stein's
unbiased risk estimate (Stein 1981; for a choice among estimators, Li 1986; for thresholds,
Donoho and Johnstone 1995, "SureShrink"):

    SURE(g) = ||g(y) - y||^2 - n std^2 + 2 std^2 sum_i dg_i / dy_i,

unbiased for E||g(y) - mu||^2 (mu the exact counts) under Gaussian noise (the default
release's zCDP mechanism; under Laplace noise it is the same formula, exact for the linear
smoothing and an approximation for the thresholds). Every member first smooths a numeric
column's consecutive cells with the kernel (a, 1 - 2a, a), reflected at the bounds (S_a's rows
sum to 1, a in `SMOOTHING_WEIGHTS`; a "missing" cell is left alone), z = S_a y, then either
- projects z onto the simplex of total T (`project_to_simplex`): g = max(z - tau, 0) with
  sum g = T, whose divergence is sum over the kept cells K of S_ii - (sum_{k in K} S_ki)/|K|
  (the projection onto {sum_K g = T} has Jacobian I - 11^T / |K| on K); or
- soft-thresholds z at t std (t in `THRESHOLDS`) and rescales to T: h = max(z - t std, 0),
  g = T h / H with H = sum h, whose divergence is
  T sum_i (1{h_i > 0} S_ii / H - h_i (sum_{k: h_k > 0} S_ki) / H^2).
T is treated as a constant (it is the median of every column's noisy total, of which this
column's is one).

Why thresholds: the projection keeps every empty cell whose noise rose above tau, and on a
skewed column of a small table those far cells hold a real share of the mass (credit card's
expenditure, 1,055 training rows, noise SD 30 a cell: 2-4 % of the synthetic rows in cells
10-15 of 16 where the real rows have none; its one-way TVD 0.065 against 0.033 for exact
shares in the same cells, 5 seeds). Thresholding is what SURE picks where the counts are
sparse; on a flat histogram of a small table (Boston's columns: counts near the noise level
in most cells) it keeps the projection, where a fixed threshold of 2 SDs doubled the one-way
TVD (0.186 -> 0.353) and a SURE choice of thresholds alone (no projection in the family)
still raised it to 0.216-0.234. Fidelity study (benchmarks/fidelity.py, default release, 15
seeds, against the former smoothing + projection): credit card TVD1/2/3 0.0648/0.131/0.207
-> 0.0623/0.124/0.193 and beta-MSE 1.50 -> 1.17; Boston 0.191/0.400/0.617 ->
0.196/0.398/0.603; the confirmation tables (DoctorVisits, CPS1988, HousePrices) within their
standard errors.
"""

from __future__ import annotations

import math

import numpy as np

# Kernel weights a of the smoother (a, 1 - 2a, a); 0 keeps the noisy counts.
SMOOTHING_WEIGHTS = (0.0, 0.1, 0.2, 0.25, 0.3, 1 / 3)
# Soft thresholds in noise standard deviations (the projection is the family's other member).
THRESHOLDS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)


def project_to_simplex(noisy: np.ndarray, total: float) -> np.ndarray:
    """The nearest (L2) non-negative vector summing to `total`: max(noisy - tau, 0) (Duchi
    et al. 2008). Unlike clipping negative counts, it does not move mass onto the empty cells
    the noise lifted above zero."""
    flat = np.sort(noisy.ravel())[::-1]
    cumulative = np.cumsum(flat) - total
    ranks = np.arange(1, flat.size + 1)
    kept = np.nonzero(flat - cumulative / ranks > 0)[0]
    tau = cumulative[kept[-1]] / (kept[-1] + 1) if kept.size else flat[0] - total
    return np.clip(noisy - tau, 0.0, None)


def smoothing_matrix(n: int, ordinal_cells: int, a: float) -> np.ndarray:
    """S_a: the kernel (a, 1 - 2a, a) on the first `ordinal_cells` cells, reflected at both
    ends (an end cell keeps 1 - a of itself), the identity on the others."""
    matrix = np.eye(n)
    if ordinal_cells < 3 or a == 0:
        return matrix
    m = ordinal_cells
    block = (1 - 2 * a) * np.eye(m) + a * (np.eye(m, k=1) + np.eye(m, k=-1))
    block[0, 0] += a  # the reflected neighbour of the first cell is itself
    block[-1, -1] += a
    matrix[:m, :m] = block
    return matrix


def _projected(z: np.ndarray, smoother: np.ndarray, total: float):
    """The projection of z and its divergence with respect to y (module docstring)."""
    g = project_to_simplex(z, total)
    kept = g > 0
    divergence = float(
        np.diag(smoother)[kept].sum() - smoother[kept][:, kept].sum() / max(kept.sum(), 1)
    )
    return g, divergence


def _thresholded(z: np.ndarray, smoother: np.ndarray, total: float, threshold: float):
    """z soft-thresholded and rescaled to `total`, and its divergence (module docstring);
    None when nothing is left above the threshold."""
    h = np.maximum(z - threshold, 0.0)
    mass = h.sum()
    if mass <= 0:
        return None
    kept = h > 0
    into_kept = smoother[kept].sum(axis=0)  # sum over kept k of S_ki, for every i
    divergence = total * float(
        np.diag(smoother)[kept].sum() / mass - (h * into_kept).sum() / mass**2
    )
    return total * h / mass, divergence


def denoised_shares(
    noisy: np.ndarray, total: float, std: float = 0.0, ordinal_cells: int = 0
) -> np.ndarray:
    """A column's one-way shares from its noisy histogram (module docstring): the member of
    the family (smoothing of the first `ordinal_cells` cells, then projection onto the
    simplex of `total` or a soft threshold) with the least SURE; a categorical column
    (`ordinal_cells` = 0) or `std` = 0 is projected only."""
    noisy = np.asarray(noisy, dtype=float)
    total = max(total, 1.0)
    n = noisy.size
    best = project_to_simplex(noisy, total)
    if std > 0 and ordinal_cells:
        best_risk = math.inf
        for a in SMOOTHING_WEIGHTS:
            smoother = smoothing_matrix(n, ordinal_cells, a)
            z = smoother @ noisy
            members = [_projected(z, smoother, total)]
            members += [_thresholded(z, smoother, total, t * std) for t in THRESHOLDS]
            for member in members:
                if member is None:
                    continue
                g, divergence = member
                risk = float(((g - noisy) ** 2).sum()) - n * std**2 + 2 * std**2 * divergence
                if risk < best_risk:
                    best, best_risk = g, risk
    return best / best.sum() if best.sum() > 0 else np.full(n, 1.0 / n)
