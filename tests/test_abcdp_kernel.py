"""ABCDP distance: checks C1 (MMD) and C2 (sensitivity) of docs/abcdp.md section 6.6."""

from __future__ import annotations

import numpy as np
import pytest

from dprelease.errors import InputError
from dprelease.inference.abcdp.kernel import (
    ExactGaussianDistance,
    RandomFourierFeatures,
    RFFDistance,
    exact_gaussian_mmd,
    median_heuristic,
    mmd_biased,
)

TOY_BANDWIDTH = 0.12  # the paper's l^2 = 0.36 on y in [0, 5], i.e. 0.6 / 5 on the encoded scale


def _toy_rows(theta, n, rng):
    """Encoded toy rows (y / 5) from the mixture of uniforms, without the model file."""
    component = rng.choice(5, size=n, p=theta)
    return ((component + rng.random(n)) / 5.0)[:, None]


def test_rff_mmd_equals_gram_formula_of_its_kernel_and_features_have_unit_norm():
    rng = np.random.default_rng(0)
    for _ in range(20):
        d = int(rng.integers(1, 5))
        features = RandomFourierFeatures(d, 40, float(rng.uniform(0.1, 2.0)), rng)
        x = rng.random((int(rng.integers(1, 30)), d))
        y = rng.random((int(rng.integers(1, 30)), d))
        phi_x, phi_y = features(x), features(y)
        np.testing.assert_allclose(np.linalg.norm(phi_x, axis=1), 1.0, atol=1e-12)
        gram = (phi_x @ phi_x.T).mean() + (phi_y @ phi_y.T).mean() - 2 * (phi_x @ phi_y.T).mean()
        assert abs(mmd_biased(x, y, features) - np.sqrt(max(gram, 0.0))) < 1e-10


def test_rff_approximates_the_exact_gaussian_mmd_on_toy_data():
    rng = np.random.default_rng(1)
    real = _toy_rows([0.25, 0.04, 0.33, 0.04, 0.34], 1000, rng)
    features = RandomFourierFeatures(1, 10_000, TOY_BANDWIDTH, rng)
    for theta in ([0.2] * 5, [0.25, 0.04, 0.33, 0.04, 0.34], [0.6, 0.1, 0.1, 0.1, 0.1]):
        simulated = _toy_rows(theta, 1000, rng)
        exact = exact_gaussian_mmd(real, simulated, TOY_BANDWIDTH)
        assert abs(mmd_biased(real, simulated, features) - exact) < 0.02


def test_batched_distances_match_the_float64_definitions():
    rng = np.random.default_rng(2)
    real = rng.random((300, 3))
    batch = rng.random((4, 200, 3))
    features = RandomFourierFeatures(3, 100, 0.5, rng)
    rff = RFFDistance(features, real, n_hat=300.0).distances(batch)
    expected = [mmd_biased(real, simulated, features) for simulated in batch]
    np.testing.assert_allclose(rff, expected, atol=2e-6)  # float32 on the simulated side
    exact = ExactGaussianDistance(0.5, real, n_hat=300.0).distances(batch)
    np.testing.assert_allclose(
        exact, [exact_gaussian_mmd(real, simulated, 0.5) for simulated in batch], atol=1e-12
    )


def test_add_remove_sensitivity_is_one_over_n_hat():
    """C2: |rho~(D + x*, Y) - rho~(D, Y)| <= 1/n_hat for a fixed n_hat, both kernels."""
    rng = np.random.default_rng(3)
    worst = 0.0
    for trial in range(1000):
        d = int(rng.integers(1, 4))
        real = rng.random((int(rng.integers(1, 51)), d))
        extra = rng.random((1, d))
        simulated = rng.random((1, int(rng.integers(1, 51)), d))
        n_hat = float(rng.uniform(1.0, 60.0))
        features = RandomFourierFeatures(d, 20, float(rng.uniform(0.05, 1.0)), rng)
        if trial % 10 == 0:
            before = ExactGaussianDistance(0.3, real, n_hat).distances(simulated)[0]
            after = ExactGaussianDistance(0.3, np.vstack([real, extra]), n_hat).distances(
                simulated
            )[0]
        else:
            before = RFFDistance(features, real, n_hat).distances(simulated)[0]
            after = RFFDistance(features, np.vstack([real, extra]), n_hat).distances(simulated)[0]
        gap = abs(after - before) * n_hat
        assert gap <= 1.0 + 1e-12 * n_hat
        worst = max(worst, gap)
    assert worst > 0.5  # the bound is not vacuous: some pairs come close to it


def test_replace_one_sensitivity_with_the_papers_normalisation():
    """C2, paper Lemma 4.1: |D| = |D'| = N, replace one row: |rho(D) - rho(D')| <= 2/N."""
    rng = np.random.default_rng(4)
    for _ in range(300):
        n = int(rng.integers(1, 51))
        real = rng.random((n, 2))
        neighbour = real.copy()
        neighbour[-1] = rng.random(2)
        simulated = rng.random((int(rng.integers(1, 51)), 2))
        features = RandomFourierFeatures(2, 20, float(rng.uniform(0.05, 1.0)), rng)
        gap = abs(
            mmd_biased(real, simulated, features) - mmd_biased(neighbour, simulated, features)
        )
        assert gap <= 2.0 / n + 1e-12


def test_median_heuristic_and_bad_feature_counts():
    rng = np.random.default_rng(5)
    rows = rng.random((500, 1))
    # median |U - U'| of two uniforms is 1 - 1/sqrt(2) ~= 0.293
    assert median_heuristic(rows, rng) == pytest.approx(1 - 2**-0.5, abs=0.03)
    with pytest.raises(InputError, match="bandwidth 0"):
        median_heuristic(np.zeros((10, 2)), rng)
    with pytest.raises(InputError, match="even"):
        RandomFourierFeatures(1, 7, 1.0, rng)
