"""Noise sources and calibration from public quantities."""

import inspect
import math

import numpy as np
import pytest
from scipy.stats import norm

from dprelease.privacy.calibration import (
    dpsgd_epsilon,
    dpsgd_noise_multiplier,
    gaussian_delta,
    gaussian_sigma,
    laplace_scale,
)
from dprelease.privacy.noise import NoiseSource


def balle_wang_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """Balle and Wang (2018), Theorem 8, written out independently of dp-accounting."""
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    return norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b)


@pytest.mark.parametrize(
    ("epsilon", "delta", "sensitivity"), [(1.0, 1e-5, 1.0), (0.3, 1e-6, 0.02), (8.0, 1e-3, 5.0)]
)
def test_analytic_gaussian_is_the_smallest_sigma_meeting_delta(epsilon, delta, sensitivity):
    sigma = gaussian_sigma(sensitivity, epsilon, delta)
    assert balle_wang_delta(sigma, sensitivity, epsilon) <= delta * (1 + 1e-9)
    assert balle_wang_delta(sigma * 0.999, sensitivity, epsilon) > delta
    assert gaussian_delta(sigma, sensitivity, epsilon) == pytest.approx(
        balle_wang_delta(sigma, sensitivity, epsilon), rel=1e-6
    )


def test_analytic_gaussian_beats_the_classical_bound():
    epsilon, delta = 0.5, 1e-5
    classical = math.sqrt(2 * math.log(1.25 / delta)) / epsilon
    assert gaussian_sigma(1.0, epsilon, delta) < classical


def test_laplace_scale_and_refusals():
    assert laplace_scale(3.0, 0.5) == 6.0
    with pytest.raises(ValueError, match="epsilon must be a positive"):
        laplace_scale(1.0, 0.0)
    with pytest.raises(ValueError, match="0 < delta < 1"):
        gaussian_sigma(1.0, 1.0, 0.0)


@pytest.mark.parametrize(("epsilon", "rate", "steps"), [(1.0, 0.01, 500), (4.0, 0.05, 200)])
def test_dpsgd_calibration_meets_the_target_within_one_percent(epsilon, rate, steps):
    sigma = dpsgd_noise_multiplier(epsilon, 1e-5, rate, steps)
    reported = dpsgd_epsilon(sigma, 1e-5, rate, steps)
    assert 0.99 * epsilon <= reported <= epsilon
    assert dpsgd_epsilon(sigma * 0.97, 1e-5, rate, steps) > reported


def test_noise_source_takes_no_seed_and_differs_between_instances():
    assert "seed" not in inspect.signature(NoiseSource).parameters
    first, second = NoiseSource(), NoiseSource()
    assert not np.array_equal(first.laplace(1.0, 8), second.laplace(1.0, 8))


@pytest.mark.parametrize("secure", [False, True])
def test_noise_distributions(secure):
    noise = NoiseSource(secure=secure)
    n = 4000
    laplace = noise.laplace(2.0, n)
    gaussian = noise.gaussian(3.0, (n // 2, 2))
    assert gaussian.shape == (n // 2, 2)
    # Var Laplace(b) = 2 b^2 = 8; Var N(0, 9) = 9. Standard error of a sample variance
    # is about sd^2 sqrt(kurtosis_excess + 2)/sqrt(n): 8 * sqrt(5/4000) = 0.28 and
    # 9 * sqrt(2/4000) = 0.2; tolerances are 5 standard errors (false alarm < 1e-6).
    assert abs(laplace.var() - 8.0) < 5 * 0.28
    assert abs(gaussian.var() - 9.0) < 5 * 0.2
    assert abs(laplace.mean()) < 5 * math.sqrt(8 / n)


def test_noise_refuses_bad_scales():
    with pytest.raises(ValueError, match="Laplace scale must be a positive finite number"):
        NoiseSource().laplace(0.0, 3)
    with pytest.raises(ValueError, match="Gaussian standard deviation"):
        NoiseSource().gaussian(float("inf"), 3)
