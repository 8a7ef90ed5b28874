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
    zeros = np.zeros(8)
    assert not np.array_equal(first.add_laplace(zeros, 1.0), second.add_laplace(zeros, 1.0))


@pytest.mark.parametrize("secure", [False, True])
def test_noise_distributions(secure):
    noise = NoiseSource(secure=secure)
    n = 4000
    laplace = noise.add_laplace(np.full(n, 5.0), 2.0) - 5.0
    gaussian = noise.add_gaussian(np.full((n // 2, 2), -3.0), 3.0) + 3.0
    assert gaussian.shape == (n // 2, 2)
    # Var Laplace(b) = 2 b^2 = 8; Var N(0, 9) = 9. Standard error of a sample variance
    # is about sd^2 sqrt(kurtosis_excess + 2)/sqrt(n): 8 * sqrt(5/4000) = 0.28 and
    # 9 * sqrt(2/4000) = 0.2; tolerances are 5 standard errors (false alarm < 1e-6).
    assert abs(laplace.var() - 8.0) < 5 * 0.28
    assert abs(gaussian.var() - 9.0) < 5 * 0.2
    assert abs(laplace.mean()) < 5 * math.sqrt(8 / n)


def test_secure_noise_is_applied_to_the_value_not_added_to_its_float_grid():
    """Noise drawn on zeros and added in floating point keeps the grid of
    the true value: from x = 0.3, fl(0.3 + z) below 0.1 (down to -0.2) is always a multiple of
    2^-55, while from x = 0.1 about a quarter of those outputs are not, so seeing one proves
    x != 0.3. OpenDP's measurement applied to 0.3 itself reaches them (about half of its
    outputs there, 5.6 % of all draws): the event does not separate the two values.
    False alarm: no such output in 2,000 draws has probability (1 - 0.056)^2000 < 1e-49."""
    noise = NoiseSource(secure=True)
    n = 2000

    def off_grid(y: np.ndarray) -> int:
        below = y[(y < 0.1) & (y > -0.2)]
        return int(np.sum(np.ldexp(below, 55) != np.round(np.ldexp(below, 55))))

    drawn_on_zeros = noise.add_laplace(np.zeros(n), 1.0)
    assert off_grid(0.3 + drawn_on_zeros) == 0 < off_grid(0.1 + drawn_on_zeros)  # the attack
    assert off_grid(noise.add_laplace(np.full(n, 0.3), 1.0)) > 0
    assert off_grid(noise.add_gaussian(np.full(n, 0.3), 1.0)) > 0


@pytest.mark.parametrize("secure", [False, True])
def test_counts_get_integer_noise_in_secure_mode(secure):
    noise = NoiseSource(secure=secure)
    counts = np.arange(200, dtype=float).reshape(20, 10)
    for noisy in (
        noise.add_laplace(counts, 2.5, counts=True),
        noise.add_gaussian(counts, 2.5, counts=True),
    ):
        assert noisy.shape == counts.shape and not np.array_equal(noisy, counts)
        # Secure: integers. Default: float noise (P(an integer) = 0).
        assert np.array_equal(noisy, np.round(noisy)) == secure
    with pytest.raises(ValueError, match="integer-valued counts"):
        noise.add_laplace(np.array([1.5]), 1.0, counts=True)


@pytest.mark.parametrize("secure", [False, True])
def test_noisy_max_picks_a_clear_winner_and_permutations_are_uniform(secure):
    """A score 1000 above the others at epsilon 1, sensitivity 1: another index wins with
    probability below e^-250 (exponential or Gumbel noise of scale 2)."""
    noise = NoiseSource(secure=secure)
    assert noise.noisy_max(np.array([3.0, 1003.0, 0.0]), 1.0, 1.0) == 1
    order = noise.permutation(50)
    assert sorted(order) == list(range(50))


def test_the_noise_call_sites_apply_the_noise_to_their_values():
    """Every histogram of the marginals generator is noised by the noise source as counts."""
    from dprelease.encoding import Encoder
    from dprelease.generators.marginals import IndependentMarginals
    from dprelease.schema import Schema

    calls = []

    class Recording(NoiseSource):
        def add_laplace(self, values, scale, *, counts=False):  # noqa: ANN001, ANN201
            noisy = super().add_laplace(values, scale, counts=counts)
            calls.append((counts, noisy))
            return noisy

    schema = Schema.model_validate(
        {
            "dataset": "toy",
            "budget": {"epsilon": 1.0, "delta": 0.0},
            "columns": {
                "a": {"type": "categorical", "categories": ["x", "y", "z"]},
                "b": {"type": "integer", "min": 0, "max": 3},
            },
        }
    )
    encoder = Encoder(schema)
    generator = IndependentMarginals(encoder, 1.0)
    generator.fit_counts(
        [np.array([3.0, 0.0, 1.0]), np.array([1.0, 1.0, 2.0, 0.0])], Recording(secure=True)
    )
    assert [counts for counts, _ in calls] == [True, True]
    assert all(np.array_equal(noisy, np.round(noisy)) for _, noisy in calls)


def test_noise_refuses_bad_scales():
    with pytest.raises(ValueError, match="Laplace scale must be a positive finite number"):
        NoiseSource().add_laplace(np.zeros(3), 0.0)
    with pytest.raises(ValueError, match="Gaussian standard deviation"):
        NoiseSource().add_gaussian(np.zeros(3), float("inf"))
    with pytest.raises(ValueError, match="finite values only"):
        NoiseSource(secure=True).add_laplace(np.array([np.nan]), 1.0)
