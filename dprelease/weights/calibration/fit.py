"""Post-processing of the calibration weights' noisy sums (`method`, whose
module docstring states the method): raked pair tables, the target's moments, the tilt
within the family that holds the generator's one-way margins, and tempering followed by
raking back to those margins (`held_margins`).

Moments (`target_moments`): targets m = noisy sums / noisy count, with the same
delta-method variance as the pair tables; each moment that varies over the synthetic rows
adds one degree of freedom (the moments leave out every combination the held margins fix).
Held margins: the tilt's equality constraints (no ridge, not in chi2) over coarse cells
(`TILT_MARGIN_BINS`, coarser than the generator's), then raking to the generator's cells after
tempering, so the released weights' one-way shares equal the unweighted synthetic shares
(`held_margin_shift` in the details, at most `HELD_TOLERANCE`).
With moments or held margins the rows are all distinct (continuous moments), so the tilt is
fitted on at most `FIT_ROWS` synthetic rows (a fixed public subsample: post-processing) and
applied to every row; raking then holds the margins on all of them. The targets are raked to
every row's margins and the unweighted chi-square is every row's; the subsample's own
sampling error is taken out of its targets (`_subsample_tilt`;
docs/decisions/0020-weights-on-many-synthetic-rows.md).
Never worse: weights whose chi-square on every row, after tempering and raking, is not below
the unweighted rows' are made flat ("the weights moved the synthetic rows away from the
noisy tables").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse
from scipy.special import softmax

from dprelease.weights.calibration.features import log_weight_bound
from dprelease.weights.calibration.held_margins import HeldMargins
from dprelease.weights.calibration.target_moments import TargetMoments
from dprelease.weights.calibration.tilting import (
    as_sparse,
    chi_square,
    discrepancy_lambda,
    distinct_rows,
    ess,
    temper_weights,
    tempered,
)

DEFAULT_ESS_FLOOR = 0.7
DEFAULT_CHI2_SLACK = 2.0
MIN_NOISE_UNITS = 3.0  # flat weights unless the noisy count exceeds this many noise SDs
ROWS_GUIDANCE = 5.0
RAKING_SWEEPS = 200
RAKING_TOLERANCE = 1e-12
FIT_ROWS = 50_000
# Every outcome records these keys (None where the step did not run), so the manifest's
# structure never depends on a DP outcome.
DETAIL_KEYS = (
    "flat_reason",
    "guidance",
    "degrees_of_freedom",
    "chi2_unweighted_per_df",
    "chi2_weighted_per_df",
    "lambda",
    "temper",
    "ess_fraction",
    "held_margin_shift",
)


def rake(table: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Iterative proportional fitting of a (noisy) two-way table of shares to the given row
    and column margins (both summing to 1); cells start clipped at a tiny positive floor so
    that negative noisy cells carry no sign into the fit. Cells in an empty margin stay 0."""
    fitted = np.maximum(table, 1e-9)
    fitted = fitted * (rows[:, None] > 0) * (columns[None, :] > 0)
    for _ in range(RAKING_SWEEPS):
        fitted *= _ratio(rows, fitted.sum(axis=1))[:, None]
        fitted *= _ratio(columns, fitted.sum(axis=0))[None, :]
        if np.abs(fitted.sum(axis=1) - rows).max() <= RAKING_TOLERANCE:
            break
    return fitted


def _ratio(target: np.ndarray, current: np.ndarray) -> np.ndarray:
    return np.divide(target, current, out=np.zeros_like(target), where=current > 0)


@dataclass(frozen=True)
class Calibration:
    """The post-processed result: log weights, public facts about the fit, and a bound on
    every log weight the tilt gives any row of the public domain (`log_weight_max`)."""

    log_weights: np.ndarray
    details: dict
    log_weight_max: float = 0.0


def raked_targets(
    noisy_sums: np.ndarray, shapes: list[tuple[int, int]], synthetic_means: np.ndarray
) -> tuple[np.ndarray, int]:
    """Every pair's noisy table (sums / noisy count) raked to the synthetic margins, and the
    degrees of freedom sum (r - 1)(c - 1) over the cells the synthetic rows occupy."""
    count = float(noisy_sums[0])
    targets = np.empty(synthetic_means.size)
    df, offset = 0, 0
    for shape in shapes:
        cells = slice(offset, offset + math.prod(shape))
        synthetic = synthetic_means[cells].reshape(shape)
        rows, columns = synthetic.sum(axis=1), synthetic.sum(axis=0)
        noisy = noisy_sums[1:][cells].reshape(shape) / count
        targets[cells] = rake(noisy, rows, columns).ravel()
        df += max(int((rows > 0).sum()) - 1, 0) * max(int((columns > 0).sum()) - 1, 0)
        offset = cells.stop
    return targets, df


def calibrate(
    noisy_sums: np.ndarray,
    noise_variance: float,
    phi_synthetic: np.ndarray | sparse.sparray,
    shapes: list[tuple[int, int]],
    *,
    ess_floor: float = DEFAULT_ESS_FLOOR,
    chi2_slack: float = DEFAULT_CHI2_SLACK,
    moments: TargetMoments | None = None,
    held: HeldMargins | None = None,
    held_tilt: HeldMargins | None = None,
) -> Calibration:
    """Post-processing: tilt the synthetic rows towards the raked noisy tables and the
    target's noisy moments, holding the one-way margins (module docstrings).

    `noisy_sums[0]` is the constant feature (the noisy count); `phi_synthetic` the public
    feature matrix of the synthetic rows with the constant in column 0, then the pairs'
    tables of `shapes`, each flattened row-major, then the `moments.size` moments.
    `held` are the margins raked to after tempering; `held_tilt` (default `held`) the
    margins the tilt holds as equality constraints, on coarser cells.
    """
    held_tilt = held_tilt or held
    phi_all = as_sparse(phi_synthetic)
    n_synthetic = phi_all.shape[0]
    n_moments = 0 if moments is None else moments.size
    if moments is None and held is None:
        phi, counts, row_of = distinct_rows(phi_all)
    else:
        fit_rows = _fit_rows(n_synthetic)
        phi, counts, row_of = phi_all[fit_rows], np.ones(fit_rows.size), None
    phi = phi[:, 1:]  # the constant: no tilt
    count = float(noisy_sums[0])
    flat = np.zeros(n_synthetic)
    details: dict[str, Any] = dict.fromkeys(DETAIL_KEYS)
    if count <= MIN_NOISE_UNITS * math.sqrt(noise_variance):
        return Calibration(flat, details | {"flat_reason": "noisy count within the noise"})
    if ROWS_GUIDANCE * count > n_synthetic:
        details["guidance"] = (
            f"fewer than {ROWS_GUIDANCE:g}x as many synthetic rows as (noisy) real rows: "
            "release more synthetic rows (a free, public choice) for the weights to help"
        )
    n_fit = float(counts.sum())
    fit_means = counts @ phi / n_fit
    synthetic_means = fit_means if n_fit == n_synthetic else phi_all.sum(axis=0)[1:] / n_synthetic
    n_pair = synthetic_means.size - n_moments
    pair_means, df = raked_targets(noisy_sums[: 1 + n_pair], shapes, synthetic_means[:n_pair])
    means = np.concatenate([pair_means, noisy_sums[1 + n_pair :] / count])
    variance = noise_variance * (1.0 + means**2) / count**2
    second_moments = counts @ phi.multiply(phi) / n_fit
    tilted = np.flatnonzero(second_moments - synthetic_means**2 > 1e-12)
    if moments is not None:
        df += int((tilted >= n_pair).sum())
    phi, means, variance = phi[:, tilted], means[tilted], variance[tilted]
    details["degrees_of_freedom"] = df
    if df == 0:
        return Calibration(flat, details | {"flat_reason": "no pair varies"})
    chi2_flat = chi_square(means, variance, synthetic_means[tilted])
    details["chi2_unweighted_per_df"] = chi2_flat / df
    if chi2_flat <= df + chi2_slack * math.sqrt(2 * df):
        return _flat(
            flat,
            details,
            chi2_flat / df,
            held,
            "synthetic data matches the noisy tables within the noise",
        )
    n_held, held_kept = 0, np.array([], dtype=np.int64)
    if held_tilt is not None:
        held_phi = held_tilt.matrix(fit_rows)
        held_means = counts @ held_phi / n_fit
        held_kept = np.flatnonzero((held_means > 0) & (held_means < 1))
        n_held = held_kept.size
        phi = sparse.hstack([phi, held_phi[:, held_kept]], format="csr")
        means = np.concatenate([means, held_means[held_kept]])
        variance = np.concatenate([variance, np.zeros(n_held)])
    if row_of is not None:
        lam, b = discrepancy_lambda(
            phi, means, variance, target=float(df), counts=counts, held=n_held
        )
        log_weights = (phi @ b)[row_of]
    else:
        lam, b, log_weights = _subsample_tilt(
            phi,
            phi_all,
            means,
            variance,
            fit_means - synthetic_means,
            tilted,
            df,
            held_tilt,
            held_kept,
        )
    bound = _log_bound(b, tilted, held_kept, shapes, n_pair, moments, held_tilt)
    rake = None if held is None else held.rake
    temper = temper_weights(log_weights, ess_floor, bound, rake)
    details["lambda"] = lam
    if temper == 0.0:
        return _flat(
            flat, details, chi2_flat / df, held, "no tempering gave weights PSIS calls reliable"
        )
    log_weights, growth = tempered(log_weights, temper, rake)
    weighted = (softmax(log_weights) @ phi_all)[1 + tilted]
    chi2_weighted = chi_square(means[: tilted.size], variance[: tilted.size], weighted)
    if chi2_weighted >= chi2_flat:  # weights that move the rows away from the tables: none
        return _flat(
            flat,
            details,
            chi2_flat / df,
            held,
            "the weights moved the synthetic rows away from the noisy tables",
        )
    details |= {
        "temper": temper,
        "chi2_weighted_per_df": chi2_weighted / df,
        "ess_fraction": ess(log_weights) / n_synthetic,
        "held_margin_shift": None if held is None else held.max_shift(log_weights),
    }
    return Calibration(log_weights, details, temper * bound + growth)


def _flat(
    flat: np.ndarray,
    details: dict[str, Any],
    chi2_per_df: float,
    held: HeldMargins | None,
    reason: str,
) -> Calibration:
    """Flat weights after the chi-square was computed: the reason, the unweighted chi-square
    as the weighted one, and no shift of the held margins."""
    return Calibration(
        flat,
        details
        | {
            "flat_reason": reason,
            "chi2_weighted_per_df": chi2_per_df,
            "held_margin_shift": 0.0 if held is not None else None,
        },
    )


def _subsample_tilt(
    phi: sparse.csr_array,
    phi_all: sparse.csr_array,
    means: np.ndarray,
    variance: np.ndarray,
    sampling_error: np.ndarray,
    tilted: np.ndarray,
    df: int,
    held_tilt: HeldMargins | None,
    held_kept: np.ndarray,
) -> tuple[float, np.ndarray, np.ndarray]:
    """The tilt fitted on the rows `phi` (all, or a public subsample) and its log weights on
    every row, (lam, b, log weights).

    A subsample's means differ from every row's by its sampling error e, which can be many
    DP noise SDs (on 254k real rows a share's noise SD is 1.6e-4, the 50,000-row subsample's
    sampling SD 2.2e-3), and a tilt fitted there fits e too. The tilt is therefore fitted to
    the targets shifted by e (first order in the tilt). A large tilt leaves the first-order
    regime, so where the shifted fit is not at the noise level on every row (chi-square
    above df + 2 sqrt(2 df)) the unshifted fit is made too, and the one nearer the targets
    on every row is kept; the second fit only where needed, since it doubles the weights'
    time (docs/decisions/0020-weights-on-many-synthetic-rows.md)."""
    targets = means[: tilted.size]

    def fit(shift: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, float]:
        shifted = means + np.concatenate([shift, np.zeros(means.size - tilted.size)])
        lam, b = discrepancy_lambda(phi, shifted, variance, target=float(df), held=held_kept.size)
        log_weights = _tilt_all(phi_all, tilted, b, held_tilt, held_kept)
        weighted = (softmax(log_weights) @ phi_all)[1 + tilted]
        return lam, b, log_weights, chi_square(targets, variance[: tilted.size], weighted)

    shifted = fit(sampling_error[tilted])
    noise_level = df + DEFAULT_CHI2_SLACK * math.sqrt(2 * df)
    if not np.any(sampling_error[tilted]) or shifted[3] <= noise_level:
        return shifted[:3]  # every row was fitted, or the first order held
    return min([shifted, fit(np.zeros(tilted.size))], key=lambda f: f[3])[:3]


def _tilt_all(
    phi_all: sparse.csr_array,
    tilted: np.ndarray,
    b: np.ndarray,
    held_tilt: HeldMargins | None,
    held_kept: np.ndarray,
) -> np.ndarray:
    """The tilt's log weights b^T phi of every synthetic row, its coefficients spread over
    the full feature matrix and the held cells (no column-sliced copy of a 1M-row matrix)."""
    coefficients = np.zeros(phi_all.shape[1])
    coefficients[1 + tilted] = b[: tilted.size]
    log_weights = phi_all @ coefficients
    if held_tilt is not None:
        held = np.zeros(held_tilt.size)
        held[held_kept] = b[tilted.size :]
        log_weights += held_tilt.apply(held)
    return log_weights


def _fit_rows(n: int) -> np.ndarray:
    """The synthetic rows the tilt is fitted on: all, or a fixed public subsample of
    `FIT_ROWS` (post-processing of public rows; no DP noise, so a fixed seed is allowed)."""
    if n <= FIT_ROWS:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, FIT_ROWS, replace=False))


def _log_bound(
    b: np.ndarray,
    tilted: np.ndarray,
    held_kept: np.ndarray,
    shapes: list[tuple[int, int]],
    n_pair: int,
    moments: TargetMoments | None,
    held: HeldMargins | None,
) -> float:
    """max over the public domain of the tilt's log weight: pair cells, moments and held
    cells bounded separately (each block's own bound; coefficients left out are 0)."""
    pair_part = tilted < n_pair
    bound = log_weight_bound(b[: pair_part.sum()], tilted[pair_part], shapes)
    if moments is not None:
        coefficients = np.zeros(moments.size)
        coefficients[tilted[~pair_part] - n_pair] = b[pair_part.sum() : tilted.size]
        bound += moments.log_bound(coefficients)
    if held is not None:
        coefficients = np.zeros(held.size)
        coefficients[held_kept] = b[tilted.size :]
        bound += held.log_bound(coefficients)
    return bound
