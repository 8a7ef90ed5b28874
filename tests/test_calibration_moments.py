"""Calibration weights on top of a generator: the target model's DP moments are matched, and
the generator's measured one-way margins are never moved, tempering included.

Tests depending on DP noise are seeded (test noise only, `seeded_noise`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dprelease.encoding import Encoder
from dprelease.generators import make_generator
from dprelease.schema import Schema
from dprelease.weights import estimate
from dprelease.weights.calibration.held_margins import HELD_TOLERANCE, HeldMargins
from dprelease.weights.calibration.method import (
    CalibrationPlan,
    FeatureMap,
    calibrate,
    release_sums,
)
from dprelease.weights.calibration.target_moments import TargetMoments


def toy_schema(target_type: str) -> Schema:
    """x continuous, g categorical and the target y, numeric or categorical."""
    target = (
        {"type": "continuous", "min": 0, "max": 1}
        if target_type == "numeric"
        else {"type": "categorical", "categories": ["no", "yes"]}
    )
    return Schema.model_validate(
        {
            "dataset": "toy",
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "target": "y",
            "columns": {
                "x": {"type": "continuous", "min": 0, "max": 1},
                "g": {"type": "categorical", "categories": ["a", "b", "c"]},
                "y": target,
            },
        }
    )


NUMERIC = Encoder(toy_schema("numeric"))
CATEGORICAL = Encoder(toy_schema("categorical"))


def _numeric_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    """x uniform, g uniform, y = 0.3 + 0.5 (x - 0.5) + 0.1 [g = b] + noise, in [0, 1]."""
    x, g = rng.random(n), rng.integers(0, 3, n)
    y = np.clip(0.3 + 0.5 * (x - 0.5) + 0.1 * (g == 1) + rng.normal(0, 0.05, n), 0, 1)
    out = np.zeros((n, NUMERIC.width))
    out[:, 0], out[np.arange(n), 1 + g], out[:, 4] = x, 1, y
    return out


def _independent(real: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """What a generator of independent one-way margins gives: each column's values of the
    real rows in its own random order (the margins kept, the dependence lost)."""
    out = real.copy()
    for column in NUMERIC.columns:
        out[:, column.start : column.stop] = real[
            rng.permutation(len(real)), column.start : column.stop
        ]
    return out


def _categorical_rows(n: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """y = yes with probability p when x > 0.5 and 1 - p otherwise; share of yes 0.41."""
    x, g = rng.random(n), rng.integers(0, 3, n)
    yes = rng.random(n) < np.where(x > 0.5, p, 0.82 - p)
    out = np.zeros((n, CATEGORICAL.width))
    out[:, 0], out[np.arange(n), 1 + g], out[np.arange(n), 4 + yes] = x, 1, 1
    return out


def _slope(x: np.ndarray, w: np.ndarray) -> float:
    """Weighted least squares of y on (1, x, g = b, g = c): the coefficient of x."""
    design = np.column_stack([np.ones(len(x)), x[:, 0], x[:, 2], x[:, 3]])
    sw = np.sqrt(w)[:, None]
    return float(np.linalg.lstsq(design * sw, x[:, 4] * sw[:, 0], rcond=None)[0][1])


def _calibrated(real: np.ndarray, synthetic: np.ndarray, noise):
    """The moment-and-pairs calibration of `synthetic` to `real` (Gaussian noise of SD 5,
    margins held at 32 cells): (moments, plan, noisy sums, held margins, result)."""
    moments = TargetMoments(NUMERIC, 1.0)
    features = FeatureMap(NUMERIC, 2, None, synthetic, moments)
    fixed = CalibrationPlan("gaussian", 5.0)
    sums = release_sums(features, real, fixed, noise)
    held = HeldMargins(NUMERIC, 32, synthetic)
    result = calibrate(
        sums,
        fixed.noise_variance,
        features.matrix(synthetic),
        features.shapes,
        ess_floor=0.2,
        moments=moments,
        held=held,
    )
    return moments, fixed, sums, held, result


def test_weighted_least_squares_matches_the_dp_moment_targets(seeded_noise):
    rng = np.random.default_rng(0)
    real = _numeric_rows(5_000, rng)
    synthetic = _independent(np.tile(real, (2, 1)), rng)
    moments, fixed, sums, held, result = _calibrated(real, synthetic, seeded_noise(0))
    w = np.exp(result.log_weights - result.log_weights.max())
    # every moment E_w[y z] within 4 noise SDs of its DP target sum / noisy count
    count = sums[0]
    targets = sums[-moments.size :] / count
    weighted = w @ moments.matrix(synthetic).toarray() / w.sum()
    sd = math.sqrt(fixed.noise_variance) * np.sqrt(1 + targets**2) / count
    assert np.all(np.abs(weighted - targets) <= 4 * sd)
    assert result.details["chi2_weighted_per_df"] <= 1.0 + 1e-6  # the discrepancy rule
    # so weighted least squares finds the real slope that the synthetic rows lost
    assert _slope(synthetic, np.ones(len(w))) == pytest.approx(0.0, abs=0.02)
    assert _slope(synthetic, w) == pytest.approx(_slope(real, np.ones(len(real))), abs=0.08)
    assert held.max_shift(result.log_weights) <= HELD_TOLERANCE


def test_numeric_target_schema_through_estimate(seeded_noise):
    rng = np.random.default_rng(1)
    real = _numeric_rows(5_000, rng)
    synthetic = _independent(np.tile(real, (2, 1)), rng)
    est = estimate(
        "calibration",
        real,
        synthetic,
        epsilon=1.0,
        delta=1e-5,
        noise=seeded_noise(1),
        encoder=NUMERIC,
    )
    # moments c y z: z = x and the levels b, c of g (level a is y minus them: held)
    assert est.details["moments"]["count"] == 3
    assert est.details["moments"]["squared_l2_bound"] == 2.0  # m - 1 other columns
    assert est.details["sensitivity"] == pytest.approx(math.sqrt(1 + 2 + 2))
    assert sum(est.details["budget_split"].values()) == pytest.approx(1.0)
    assert est.details["calibration"]["flat_reason"] is None
    assert _slope(synthetic, est.weights) > 0.2  # real 0.5, unweighted 0
    held = HeldMargins(NUMERIC, 32, synthetic)
    assert held.max_shift(est.log_weights) <= HELD_TOLERANCE


def test_tempering_keeps_the_measured_one_way_margins(seeded_noise):
    """The census symptom: tempering moved the target's share. Tempered weights (for the
    ESS floor in the weights) keep every measured one-way margin, so they are never farther
    from the generator's DP measurement than the unweighted rows; without holding, the same
    weights move the target's share."""
    rng = np.random.default_rng(2)
    real = _categorical_rows(5_000, 0.9, rng)
    generator = make_generator("marginals", CATEGORICAL, 1.0, 0.0)
    fitted = generator.fit(real, seeded_noise(2))
    synthetic = fitted.sample(10_000, np.random.default_rng(2))
    measured = fitted.state.probabilities  # the DP one-way histograms

    def fit(**options):  # noqa: ANN003, ANN202
        return estimate(
            "calibration",
            real,
            synthetic,
            epsilon=1.0,
            delta=1e-5,
            noise=seeded_noise(3),
            encoder=CATEGORICAL,
            ess_floor=0.9,
            **options,
        )

    held = HeldMargins(CATEGORICAL, generator.bins, synthetic)
    est = fit()
    assert est.details["calibration"]["temper"] < 1  # the ESS floor tempered them
    assert held.max_shift(est.log_weights) <= HELD_TOLERANCE
    weighted, unweighted = held.weighted_shares(est.log_weights), held.shares
    for w, u, m in zip(weighted, unweighted, measured, strict=True):
        assert 0.5 * np.abs(w - m).sum() <= 0.5 * np.abs(u - m).sum() + HELD_TOLERANCE
    # the interaction is still corrected: P(yes | x > 0.5) moves towards the real 0.9
    high, yes = synthetic[:, 0] > 0.5, synthetic[:, 5] == 1
    w = np.exp(est.log_weights - est.log_weights.max())
    assert np.sum(w * (high & yes)) / np.sum(w * high) > np.mean(yes[high]) + 0.05
    # without holding the margins the tilt and the tempering move the target's share
    loose = fit(hold_margins=False)
    tempered = 0.5 * loose.log_weights
    assert held.max_shift(tempered) > 100 * HELD_TOLERANCE
    assert held.max_shift(loose.log_weights) > 100 * HELD_TOLERANCE


def _held_margins(values: np.ndarray, maximum: int) -> HeldMargins:
    """The held one-way margins (16 public cells) of integer columns c0, c1, ... in
    [0, maximum] holding `values` (one column each)."""
    names = [f"c{j}" for j in range(values.shape[1])]
    schema = Schema.model_validate(
        {
            "dataset": "raking",
            "budget": {"epsilon": 1.0, "delta": 1e-6},
            "columns": {name: {"type": "integer", "min": 0, "max": maximum} for name in names},
        }
    )
    encoder = Encoder(schema)
    return HeldMargins(encoder, 16, encoder.encode(pd.DataFrame(values, columns=names)))


def test_raking_holds_the_margins_of_strongly_dependent_columns():
    """Eight near-copies of one latent value (what a tree-structured generator gives) and
    log weights that lean hard on two of them: raking must restore every one-way share to
    within HELD_TOLERANCE (iterative proportional fitting stalled on such rows: 100 sweeps
    left NMES1988's shares 0.064 off), by per-cell factors only (the raked log weights
    minus the input are a sum of one term per column and cell), keeping the weights'
    dependence (not flat). Public test rows, no DP noise."""
    rng = np.random.default_rng(0)
    latent = rng.integers(0, 16, 20_000)
    values = np.clip(latent[:, None] + rng.integers(-1, 2, (20_000, 8)), 0, 15)
    held = _held_margins(values, 15)
    a, b = values[:, 0], values[:, 5]
    log_weights = 6.0 * ((a > 12) & (b > 13)) - 0.5 * (values[:, 1] - values[:, 2]) ** 2
    assert held.max_shift(log_weights) > 0.05
    raked, growth = held.rake(log_weights)
    assert held.max_shift(raked) <= HELD_TOLERANCE
    change = raked - log_weights
    design = held.matrix().toarray()
    design = np.column_stack([np.ones(len(values)), design])
    fitted = np.linalg.lstsq(design, change, rcond=None)[0]
    assert np.abs(design @ fitted - change).max() < 1e-8
    assert growth >= 0 and np.exp(raked - raked.max()).std() > 0.1


def test_raking_holds_the_margins_when_two_columns_coincide():
    """Two identical columns make the raking dual's Hessian singular (their kept cells are
    the same rows); the damped Newton step still holds every margin. Public rows."""
    rng = np.random.default_rng(1)
    a, c = rng.integers(0, 10, 5_000), rng.integers(0, 10, 5_000)
    held = _held_margins(np.column_stack([a, a, c]), 9)
    raked, _ = held.rake(3.0 * (a > 6) * (c < 3) + 0.4 * a * (c % 2))
    assert held.max_shift(raked) <= HELD_TOLERANCE


def test_raking_holds_the_margins_of_weights_concentrated_on_two_rows():
    """Log weights around -800 with two rows near 0 (what a tilt fitted to noise gives on a
    small table): nearly all the mass is on two rows, the dual is flat in most directions, and
    raking must still restore every share (a line-searched Newton method stalled here at
    shifts of 0.04-0.15). Public rows, no DP noise."""
    rng = np.random.default_rng(0)
    values = rng.integers(0, 16, (5_000, 8))
    values[:2_500] = rng.integers(0, 3, (2_500, 8))
    held = _held_margins(values, 15)
    log_weights = rng.normal(-800, 200, 5_000)
    log_weights[[2_600, 2_700]] = [0.0, -0.5]
    raked, growth = held.rake(log_weights)
    assert held.max_shift(raked) <= HELD_TOLERANCE and np.isfinite(growth)


def test_held_margin_indicators_mark_each_rows_kept_cells():
    """The raking matrix: row i has a one in column offsets[j] + k exactly when column j's
    cell of row i is the k-th kept cell (the reference cell has none), for all rows and for
    a subset of rows; M u, M^T p and M^T diag(p) M computed without M equal its products."""
    rng = np.random.default_rng(4)
    held = _held_margins(rng.integers(0, 40, size=(500, 3)), 40)
    expected = np.zeros((500, held.size))
    for j, kept in enumerate(held.kept):
        for k, cell in enumerate(kept):
            expected[held.index[:, j] == cell, held.offsets[j] + k] = 1.0
    full = held.matrix()
    np.testing.assert_array_equal(full.toarray(), expected)
    rows = np.array([3, 7, 499, 0])
    np.testing.assert_array_equal(held.matrix(rows).toarray(), expected[rows])
    assert expected.sum(axis=1).min() < 3  # some rows sit in a reference cell
    # raking's products, formed without the matrix, equal the matrix's
    u, weights = rng.normal(size=held.size), rng.random(500)
    np.testing.assert_allclose(held.apply(u), expected @ u)
    np.testing.assert_allclose(held.column_sums(weights), expected.T @ weights)
    np.testing.assert_allclose(held.gram(weights), expected.T @ (weights[:, None] * expected))


def test_the_moment_matrix_is_the_same_built_in_chunks(monkeypatch):
    """`TargetMoments.matrix` builds its rows `CHUNK_ROWS` at a time; the result is the whole
    matrix's (a numeric and a categorical target, one row past a chunk boundary)."""
    from scipy import sparse

    import dprelease.weights.calibration.target_moments as target_moments

    rng = np.random.default_rng(1)
    for encoder, rows in (
        (NUMERIC, _numeric_rows(301, rng)),
        (CATEGORICAL, _categorical_rows(301, 0.7, rng)),
    ):
        moments = TargetMoments(encoder, 0.7)
        whole = moments.matrix(rows).toarray()
        monkeypatch.setattr(target_moments, "CHUNK_ROWS", 100)
        chunked = moments.matrix(rows)
        monkeypatch.setattr(target_moments, "CHUNK_ROWS", 50_000)
        assert chunked.shape == whole.shape and isinstance(chunked, sparse.csr_array)
        np.testing.assert_array_equal(chunked.toarray(), whole)
        assert np.abs(whole).sum() > 0


def test_a_tilt_fitted_on_a_subsample_fits_every_row(seeded_noise, monkeypatch):
    """With more synthetic rows than `FIT_ROWS` the tilt is fitted on a public subsample,
    whose own sampling error (about 0.007 on a share of 5,000 rows) is far above the DP
    noise of 20,000 real rows (5 / 20,000). The tilt must fit the DP targets, not that
    error: on every row the weighted chi-square per df is within a few noise units of the
    DP tables (it was 800, with the unweighted rows at 3,900: a tenth of the rows lost the
    dependence of y on x), and the weighted least-squares slope is the real one. (Fitting
    the subsample's error put AER's Fertility, 254k real rows and 1M synthetic, at 37.7 per
    df weighted against 22.3 unweighted.) Seeded test noise."""
    from dprelease.weights.calibration import fit as calibration_fit

    monkeypatch.setattr(calibration_fit, "FIT_ROWS", 5_000)
    rng = np.random.default_rng(2)
    real = _numeric_rows(20_000, rng)
    tiled = np.tile(real, (2, 1))
    shuffled = _independent(tiled, rng)
    synthetic = np.where((rng.random(len(tiled)) < 0.9)[:, None], tiled, shuffled)
    *_, held, result = _calibrated(real, synthetic, seeded_noise(2))
    details = result.details
    assert details["flat_reason"] is None and details["temper"] == 1.0
    assert details["chi2_unweighted_per_df"] > 1000
    assert details["chi2_weighted_per_df"] <= 10
    weights = np.exp(result.log_weights)
    real_slope = _slope(real, np.ones(len(real)))
    assert abs(_slope(synthetic, weights) - real_slope) < 0.5 * abs(
        _slope(synthetic, np.ones(len(weights))) - real_slope
    )
    assert held.max_shift(result.log_weights) <= HELD_TOLERANCE
