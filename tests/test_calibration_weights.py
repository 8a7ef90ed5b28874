"""DP calibration weights: the tilt's math, the noise calibration, the discrepancy rule, the
safeguards, and that only the noisy sums depend on the real rows."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse
from scipy.special import softmax
from test_calibration_moments import toy_schema

from dprelease.diagnostics import psis
from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.privacy.calibration import gaussian_sigma, laplace_scale
from dprelease.weights import estimate, plan
from dprelease.weights.calibration import tilting
from dprelease.weights.calibration.features import log_weight_bound
from dprelease.weights.calibration.method import (
    DEFAULT_ESS_FLOOR,
    DETAIL_KEYS,
    FeatureMap,
    active_features,
    calibrate,
    rake,
    raked_targets,
    release_sums,
)
from dprelease.weights.calibration.target_moments import TargetMoments
from dprelease.weights.calibration.tilting import (
    PSIS_TEMPER_STEP,
    chi_square,
    discrepancy_lambda,
    distinct_rows,
    ess,
    temper_for_ess,
    temper_for_psis,
    tilt,
    tilted_means,
)

SCHEMA = toy_schema("categorical")
ENCODER = Encoder(SCHEMA)


def _rows(n: int, p_yes_given_high_x: float, rng: np.random.Generator) -> np.ndarray:
    """x uniform, g uniform, y = yes with probability p when x > 0.5, 1 - p otherwise."""
    x = rng.random(n)
    g = rng.integers(0, 3, n)
    p = np.where(x > 0.5, p_yes_given_high_x, 1 - p_yes_given_high_x)
    y = (rng.random(n) < p).astype(int)
    out = np.zeros((n, ENCODER.width))
    out[:, 0] = x
    out[np.arange(n), 1 + g] = 1
    out[np.arange(n), 4 + y] = 1
    return out


def test_exact_tilt_on_two_points():
    # phi = (1, 0) and (1, 1): matching mean 0.75 of the indicator needs p = (1/4, 3/4),
    # i.e. b = log 3, when lam -> 0.
    phi = np.array([[0.0], [1.0]])
    b = tilt(phi, np.array([0.75]), np.array([1.0]), 1e-12, np.zeros(1))
    assert b[0] == pytest.approx(math.log(3), abs=1e-5)
    np.testing.assert_allclose(softmax(phi @ b), [0.25, 0.75], atol=1e-6)
    # With the ridge the optimum satisfies m - mu(b) = lam V b exactly (first-order condition).
    lam, v = 0.5, 0.2
    b = tilt(phi, np.array([0.75]), np.array([v]), lam, np.zeros(1))
    mu = softmax(phi @ b) @ phi
    assert 0.75 - mu[0] == pytest.approx(lam * v * b[0], abs=1e-7)
    assert 0.5 < mu[0] < 0.75


def test_feature_map_has_constant_norm():
    rng = np.random.default_rng(0)
    synthetic = _rows(500, 0.8, rng)
    features = FeatureMap(ENCODER, 4, None, synthetic)
    k = active_features(ENCODER, None)
    assert k == 1 + 2  # constant, two target pairs (y, x) and (y, g)
    assert features.shapes == [(2, 4), (2, 3)]  # y's levels x (x's 4 quantile cells, g's levels)
    phi = features.matrix(_rows(300, 0.3, rng))
    assert phi.shape == (300, 1 + 8 + 6)
    np.testing.assert_array_equal(phi.sum(axis=1), k)  # 0/1 entries: ||phi||_1 = ||phi||_2^2
    np.testing.assert_array_equal(np.unique(phi.toarray()), [0.0, 1.0])
    assert active_features(ENCODER, "all") == 1 + 3  # every pair of the three columns
    with pytest.raises(InputError, match="pairs must be"):
        plan("calibration", 0.5, 1e-6, ENCODER.width, 1000, encoder=ENCODER, pairs="some")


def test_noise_calibration_from_public_quantities():
    # the constant and the pairs, plus the moment y_no x (one numeric column x: ||t||^2 <= 1)
    k = active_features(ENCODER, None) + 1
    gauss = plan("calibration", 0.5, 1e-6, ENCODER.width, 1000, encoder=ENCODER)
    assert gauss["mechanism"] == "gaussian"
    assert gauss["sensitivity"] == pytest.approx(math.sqrt(k))
    assert gauss["noise_scale"] == pytest.approx(gaussian_sigma(math.sqrt(k), 0.5, 1e-6))
    assert gauss["mechanism_description"] == {
        "kind": "gaussian",
        "sigma": gauss["noise_scale"],
        "l2_sensitivity": math.sqrt(k),
    }
    assert (gauss["epsilon_spent"], gauss["delta_spent"]) == (0.5, 1e-6)
    pure = plan("calibration", 0.5, None, ENCODER.width, 1000, encoder=ENCODER)
    assert pure["mechanism"] == "laplace"
    assert pure["noise_scale"] == pytest.approx(laplace_scale(k, 0.5)) == 2 * k
    assert gauss["budget_split"]["moments"] == pytest.approx(1 / k)
    assert pure["delta_spent"] == 0.0
    with pytest.raises(InputError, match="needs 0 < delta < 1"):
        plan("calibration", 0.5, None, ENCODER.width, 1000, encoder=ENCODER, mechanism="gaussian")
    with pytest.raises(InputError, match="needs option encoder="):
        plan("calibration", 0.5, 1e-6, ENCODER.width, 1000)


def test_noisy_sums_have_the_planned_noise(seeded_noise):
    rng = np.random.default_rng(1)
    real, synthetic = _rows(200, 0.9, rng), _rows(200, 0.5, rng)
    features = FeatureMap(ENCODER, 4, None, synthetic)
    p = plan("calibration", 1.0, 1e-5, ENCODER.width, 200, encoder=ENCODER)
    from dprelease.weights.calibration.method import CalibrationPlan

    fixed = CalibrationPlan("gaussian", p["noise_scale"])
    exact = features.matrix(real).sum(axis=0)
    draws = np.array([release_sums(features, real, fixed, seeded_noise(s)) for s in range(400)])
    residual = (draws - exact).ravel()
    # chunks give the same sums as the matrix (the streaming path)
    chunks = [real[:70], real[70:]]
    via_chunks = release_sums(features, iter(chunks), fixed, seeded_noise(0))
    np.testing.assert_allclose(via_chunks, release_sums(features, real, fixed, seeded_noise(0)))
    with pytest.raises(InputError, match="real"):
        release_sums(features, iter([real[:, :3]]), fixed, seeded_noise(0))
    # 400 x 15 draws of N(0, sigma^2): the sample SD is within 3% of sigma (SE ~ 0.8%).
    assert residual.std() == pytest.approx(p["noise_scale"], rel=0.03)
    assert abs(residual.mean()) < 4 * p["noise_scale"] / math.sqrt(residual.size)


def test_discrepancy_rule_stops_at_the_noise_level():
    rng = np.random.default_rng(2)
    phi = rng.random((2000, 5))
    truth = softmax(phi @ np.array([1.0, -1.0, 0.5, 0.0, 2.0])) @ phi
    variance = np.full(5, 1e-4)
    means = truth + rng.normal(0, 1e-2, 5)
    lam, b = discrepancy_lambda(phi, means, variance, target=5.0)
    chi2 = chi_square(means, variance, softmax(phi @ b) @ phi)
    assert chi2 == pytest.approx(5.0, rel=0.02)  # at the noise level, not below it
    # a larger lambda leaves more residual, a smaller one fits below the noise
    assert (
        chi_square(means, variance, softmax(phi @ tilt(phi, means, variance, 10 * lam, b)) @ phi)
        > 5.0
    )
    assert (
        chi_square(means, variance, softmax(phi @ tilt(phi, means, variance, lam / 10, b)) @ phi)
        < 5.0
    )


FlightsCase = tuple[sparse.csr_array, np.ndarray, np.ndarray, int]


@pytest.fixture(scope="module")
def flights_case() -> FlightsCase:
    case = np.load(Path(__file__).parent / "data" / "flights_tilt_held.npz")
    phi = sparse.csr_array((case["data"], case["indices"], case["indptr"]), shape=case["shape"])
    return phi, case["means"], case["variance"], int(case["held"])


def _counted_discrepancy_search(
    flights_case: FlightsCase, monkeypatch: pytest.MonkeyPatch
) -> tuple[float, np.ndarray, int]:
    """`discrepancy_lambda` on the flights case: its lambda, tilt and the Hessians formed."""
    phi, means, variance, held = flights_case
    formed: list[int] = []
    factor_and_solve = tilting.LaggedHessian._factor_and_solve

    def counted(self, hessian: np.ndarray, rhs: np.ndarray) -> np.ndarray:  # noqa: ANN001
        formed.append(1)
        return factor_and_solve(self, hessian, rhs)

    monkeypatch.setattr(tilting.LaggedHessian, "_factor_and_solve", counted)
    target = float(means.size - held)
    lam, b = discrepancy_lambda(phi, means, variance, target=target, held=held)
    return lam, b, len(formed)


@pytest.fixture(scope="module")
def flights_search(flights_case: FlightsCase) -> tuple[float, np.ndarray, int]:
    """The search with `LaggedHessian`'s CG steps (one fit, asserted on by two tests)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return _counted_discrepancy_search(flights_case, monkeypatch)


def test_discrepancy_rule_does_not_stall_where_the_targets_are_out_of_reach(
    flights_case: FlightsCase, flights_search: tuple[float, np.ndarray, int]
):
    """A weights fit of NYC flights (300 of its 50,000 fit rows, the features that vary
    there: 254 pair and moment coordinates with their noisy targets, 107 held margin cells),
    with targets no tilt reaches. Solving the lowest lambda first, from 0, Newton stalls there
    (chi2 1e8 against 4.6e5 for flat weights), that chi2 becomes the floor, and a tilt
    warm-started from the stalled one fits 200 times worse than no tilt at all
    (docs/decisions/0019-tilt-solver.md). The continuation from the flat end returns a tilt
    that fits better than flat weights and is the optimum at its lambda (gradient zero)."""
    phi, means, variance, held = flights_case
    free = slice(0, means.size - held)
    lam, b, _ = flights_search

    def chi2(coefficients: np.ndarray) -> float:
        return chi_square(means[free], variance[free], tilted_means(phi, coefficients)[free])

    assert chi2(b) < 0.5 * chi2(np.zeros(phi.shape[1]))
    gradient = tilted_means(phi, b) - means + lam * variance * b
    assert np.abs(gradient).max() < 1e-6


def test_newton_steps_by_preconditioned_cg_reach_the_same_tilt_with_fewer_hessians(
    flights_case: FlightsCase,
    flights_search: tuple[float, np.ndarray, int],
    monkeypatch: pytest.MonkeyPatch,
):
    """The discrepancy search on the NYC flights fit (above) with every Newton step solved
    directly (the Hessian formed each time) and with `LaggedHessian`'s CG: the same lambda
    and tilt, from a fraction of the Hessians."""
    phi = flights_case[0]
    lam, b, with_cg = flights_search
    monkeypatch.setattr(tilting, "cg", lambda *args, **kwargs: (None, 1))  # CG never converges
    lam_direct, b_direct, direct = _counted_discrepancy_search(flights_case, monkeypatch)
    assert lam == pytest.approx(lam_direct, rel=1e-9)
    np.testing.assert_allclose(phi @ b, phi @ b_direct, atol=1e-6)
    assert with_cg * 4 <= direct


def test_flat_when_synthetic_matches_within_noise():
    rng = np.random.default_rng(3)
    synthetic = _rows(5000, 0.8, rng)
    features = FeatureMap(ENCODER, 4, None, synthetic)
    phi = features.matrix(synthetic)
    sigma = 50.0
    sums = 10_000 * phi.mean(axis=0) + rng.normal(0, sigma, phi.shape[1])
    result = calibrate(sums, sigma**2, phi, features.shapes)
    np.testing.assert_array_equal(result.log_weights, 0.0)
    assert "within the noise" in result.details["flat_reason"]
    assert result.details["degrees_of_freedom"] == (2 - 1) * (4 - 1) + (2 - 1) * (3 - 1)
    # a tiny noisy count (within the noise) also gives flat weights
    tiny = calibrate(np.r_[30.0, sums[1:] / 300], sigma**2, phi, features.shapes)
    np.testing.assert_array_equal(tiny.log_weights, 0.0)
    # Every outcome records the same keys (the fitted one below too): readers need no key
    # checks, and a manifest's structure does not depend on a DP outcome.
    for details in (result.details, tiny.details):
        assert tuple(details) == DETAIL_KEYS and details["lambda"] is None


def test_tempering_until_psis_calls_the_weights_reliable():
    rng = np.random.default_rng(11)
    # log w of Pareto(1/k) draws: w^t is Pareto with shape k t, so k-hat falls with t.
    log_weights = rng.exponential(1.5, 20_000)
    unbounded = np.inf  # no certified bound: PSIS alone decides
    assert psis(log_weights).verdict == "unreliable"
    t = temper_for_psis(log_weights, 1.0, unbounded)
    assert 0 < t < 1 and psis(t * log_weights).verdict != "unreliable"
    assert psis(t / PSIS_TEMPER_STEP * log_weights).verdict == "unreliable"
    # reliable weights are left alone; a lower starting temper (the ESS floor's) is kept
    assert temper_for_psis(log_weights, t, unbounded) == t
    assert temper_for_psis(rng.normal(0, 0.3, 20_000), 0.9, unbounded) == 0.9
    # too heavy for any tempering above MIN_TEMPER: flat (0)
    assert temper_for_psis(1e9 * rng.standard_cauchy(20_000), 1.0, unbounded) == 0.0
    # too few rows for a Pareto fit even when flat: tempering cannot help, left unchanged
    assert temper_for_psis(rng.exponential(5.0, 15), 1.0, unbounded) == 1.0
    # a certified bound within BOUNDED_WEIGHT_RATIO of the mean needs no tempering
    tied = np.r_[np.zeros(19_500), np.full(200, 0.5), np.full(300, 0.4)]
    assert psis(tied).verdict == "unreliable"
    assert temper_for_psis(tied, 1.0, 0.5) == 1.0


def test_log_weight_bound_is_the_largest_log_weight_of_any_row():
    # two pairs: a 2 x 2 table (cells 0-3) and a 1 x 3 table (cells 4-6); cell 2 not fitted
    tilted = np.array([0, 1, 3, 4, 5, 6])
    b = np.array([-1.0, -2.0, -0.5, 0.3, 0.7, -0.2])
    # pair 1: max(-1, -2, 0 (cell 2, coefficient 0), -0.5) = 0; pair 2: 0.7
    assert log_weight_bound(b, tilted, [(2, 2), (1, 3)]) == pytest.approx(0.7)
    full = np.insert(b, 2, 0.0)  # every cell's coefficient; one cell of each pair per row
    every_row = [full[i] + full[j] for i in range(4) for j in range(4, 7)]
    assert max(every_row) == pytest.approx(0.7)


def test_weights_fix_a_missing_interaction_and_respect_the_ess_floor(seeded_noise):
    rng = np.random.default_rng(4)
    real = _rows(20_000, 0.9, rng)  # y depends on x
    synthetic = _rows(20_000, 0.5, rng)  # generator missed it
    high, yes = synthetic[:, 0] > 0.5, synthetic[:, 5] == 1

    def fit(**options):  # noqa: ANN003, ANN202
        est = estimate(
            "calibration",
            real,
            synthetic,
            epsilon=1.0,
            delta=1e-5,
            noise=seeded_noise(0),
            encoder=ENCODER,
            **options,
        )
        w = est.weights
        return est, np.sum(w * (high & yes)) / np.sum(w * high)

    # With a floor of half the rows the tilt reaches the real conditional share.
    loose, share = fit(ess_floor=0.5)
    assert share == pytest.approx(0.9, abs=0.03)  # unweighted: 0.5
    assert loose.details["calibration"]["chi2_unweighted_per_df"] > 100
    assert loose.details["calibration"]["ess_fraction"] >= 0.5 - 1e-9
    # The default floor (0.7) tempers the same tilt to exactly that ESS: part of the way.
    tempered, share = fit()
    details = tempered.details["calibration"]
    assert DEFAULT_ESS_FLOOR == 0.7 and details["temper"] < 1
    assert tuple(details) == DETAIL_KEYS and details["flat_reason"] is None  # as when flat
    # the certified bound holds for every synthetic row
    assert tempered.log_weight_max is not None
    assert tempered.log_weights.max() <= tempered.log_weight_max + 1e-12
    assert ess(tempered.log_weights) == pytest.approx(0.7 * synthetic.shape[0], rel=1e-3)
    assert 0.6 < share < 0.9


def test_temper_reaches_the_floor_exactly():
    log_weights = np.random.default_rng(5).normal(0, 3, 1000)
    t = temper_for_ess(log_weights, 0.5)
    assert 0 < t < 1
    assert ess(t * log_weights) == pytest.approx(500, rel=1e-3)
    assert temper_for_ess(0.01 * log_weights, 0.5) == 1.0


def test_only_the_noisy_sums_read_the_real_rows(seeded_noise, monkeypatch):
    """Two real tables whose noisy sums coincide give identical weights: the rest is
    post-processing of the sums and the public synthetic rows."""
    rng = np.random.default_rng(6)
    synthetic = _rows(3000, 0.5, rng)
    real_a, real_b = _rows(5000, 0.9, rng), _rows(5000, 0.1, rng)
    fixed_sums = np.r_[
        5000.0,
        FeatureMap(ENCODER, 2, None, synthetic, TargetMoments(ENCODER, 1.0))
        .matrix(real_a)
        .sum(axis=0)[1:],
    ]
    import dprelease.weights.calibration.method as calibration

    seen = []

    def fake_release(features, real, plan, noise):
        seen.append(real.shape)
        return fixed_sums

    monkeypatch.setattr(calibration, "release_sums", fake_release)
    a = estimate("calibration", real_a, synthetic, epsilon=1.0, delta=1e-5, encoder=ENCODER)
    b = estimate("calibration", real_b, synthetic, epsilon=1.0, delta=1e-5, encoder=ENCODER)
    np.testing.assert_array_equal(a.log_weights, b.log_weights)
    assert seen == [real_a.shape, real_b.shape]
    assert np.ptp(a.log_weights) > 0


def test_raking_keeps_the_synthetic_margins_and_the_noisy_dependence():
    # A noisy 2 x 2 table with odds ratio 9, raked to margins (0.3, 0.7) x (0.5, 0.5): the
    # result has exactly those margins and keeps the odds ratio (IPF preserves cross ratios).
    noisy = np.array([[0.3, 0.1], [0.15, 0.45]])
    raked = rake(noisy, np.array([0.3, 0.7]), np.array([0.5, 0.5]))
    np.testing.assert_allclose(raked.sum(axis=1), [0.3, 0.7], atol=1e-10)
    np.testing.assert_allclose(raked.sum(axis=0), [0.5, 0.5], atol=1e-10)
    odds = raked[0, 0] * raked[1, 1] / (raked[0, 1] * raked[1, 0])
    assert odds == pytest.approx(9.0, rel=1e-9)
    # a negative noisy cell is clipped to a tiny floor, and an empty margin stays empty
    clipped = rake(np.array([[0.5, -0.1], [0.2, 0.4]]), np.array([0.5, 0.5]), np.array([1.0, 0]))
    np.testing.assert_allclose(clipped, [[0.5, 0.0], [0.5, 0.0]], atol=1e-9)
    # raked_targets: per pair, sums / noisy count raked; df = (r - 1)(c - 1) per pair
    synthetic_means = np.array([0.25, 0.25, 0.25, 0.25])
    sums = np.r_[100.0, 100 * noisy.ravel()]
    targets, df = raked_targets(sums, [(2, 2)], synthetic_means)
    np.testing.assert_allclose(targets, rake(noisy, np.r_[0.5, 0.5], np.r_[0.5, 0.5]).ravel())
    assert df == 1


def test_the_tilt_of_distinct_rows_with_counts_is_the_tilt_of_all_rows():
    rng = np.random.default_rng(7)
    synthetic = _rows(3000, 0.5, rng)
    phi = FeatureMap(ENCODER, 2, None, synthetic).matrix(synthetic)
    compact, counts, row_of = distinct_rows(phi)
    assert compact.shape[0] <= 2 * 2 * 3 and counts.sum() == 3000  # y x (x half) x g cells
    np.testing.assert_array_equal(compact.toarray()[row_of], phi.toarray())
    full, small = phi[:, 1:], compact[:, 1:]
    means = tilted_means(full, rng.normal(0, 0.5, full.shape[1]))
    variance = np.full(full.shape[1], 1e-3)
    b_all = tilt(full, means, variance, 0.3, np.zeros(full.shape[1]))
    b_distinct = tilt(small, means, variance, 0.3, np.zeros(full.shape[1]), counts)
    np.testing.assert_allclose(b_distinct, b_all, atol=1e-8)
    np.testing.assert_allclose(tilted_means(small, b_distinct, counts), tilted_means(full, b_all))
