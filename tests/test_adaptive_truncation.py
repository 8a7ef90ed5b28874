"""Adaptive truncation (docs/adaptive-truncation.md): likelihood, Fisher design, mechanism and
privacy plan.

Checks C1, C2, C3, C6, C7 of /work/docs/adaptive-truncation.md section 5.3.
Fixed seeds everywhere; DP noise comes from the explicit `seeded_noise` test source.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dprelease.errors import InputError
from dprelease.inference.truncation.design import (
    clip_interval,
    design_interval,
    design_truncation,
)
from dprelease.inference.truncation.likelihood import (
    fisher_information,
    fisher_information_mc,
    laplace_logpdf,
    normal_loglik,
)
from dprelease.inference.truncation.online import laplace_release
from dprelease.inference.truncation.privacy import (
    BELOW_MIN_ROWS,
    COUNT_MECHANISM,
    TRUNCATION_MECHANISM,
    plan_truncation,
    resolve_steps,
    select_rows,
    steps_from_count,
)
from dprelease.privacy.counting import dp_row_count
from dprelease.privacy.mechanisms import ApproxDP, PureEpsilon
from dprelease.privacy.noise import NoiseSource
from dprelease.schema import Schema


def test_c1_likelihood_matches_numerical_integral() -> None:
    rng = np.random.default_rng(11)
    for _ in range(100):
        mu, sigma = rng.normal(0, 3), math.exp(rng.normal())
        lo = rng.normal(0, 2)
        hi = lo + math.exp(rng.normal(-1, 1))
        epsilon = math.exp(rng.normal())
        y = rng.normal(lo, 3)
        b = (hi - lo) / epsilon

        def lap(u: float, b: float = b) -> float:
            return math.exp(-abs(u) / b) / (2 * b)

        def inner(x: float, mu: float = mu, sigma: float = sigma, y: float = y) -> float:
            return stats.norm.pdf(x, mu, sigma) * lap(y - x)

        kink = [y] if lo < y < hi else None
        middle, _ = integrate.quad(inner, lo, hi, points=kink, epsabs=0, epsrel=1e-13, limit=500)
        reference = (
            stats.norm.cdf((lo - mu) / sigma) * lap(y - lo)
            + stats.norm.sf((hi - mu) / sigma) * lap(y - hi)
            + middle
        )
        assert normal_loglik(y, lo, hi, b, mu, sigma) == pytest.approx(
            math.log(reference), rel=1e-9, abs=1e-9
        )


def test_likelihood_is_finite_where_naive_products_overflow() -> None:
    # b = 0.012 sigma: sigma^2/(2 b^2) ~ 3500, exp() of it overflows; log space must not.
    values = normal_loglik(np.array([-5.0, 0.0, 0.03, 5.0]), -0.06, 0.06, 0.012, 0.0, 1.0)
    assert np.all(np.isfinite(values))
    # The density integrates to 1 over y (point masses + continuous part).
    y = np.linspace(-2, 2, 400_001)
    density = np.exp(normal_loglik(y, -0.06, 0.06, 0.012, 0.3, 1.0))
    assert integrate.trapezoid(density, y) == pytest.approx(1.0, abs=1e-6)


def test_likelihood_is_exact_for_sigma_far_above_the_noise_scale() -> None:
    """sigma / b up to 1e14 (a heavy-tailed prior on sigma and narrow intervals reach such
    particles): the density stays below its bound 1/(2b) and equals the numerical integral.
    One transcript's release had log density 8196 at sigma = 5.4e7, which captured every
    particle."""
    lo, hi = 31.9996926067596, 32.00684234993525
    b = (hi - lo) / 1.0
    for sigma in (1e3, 1e5, 1e7, 5.4e7, 1e9, 1e11):
        for mu in (88.5, 32.0, -1e4):
            for y in (32.03274145639767, 32.003, 31.99, 35.0):
                value = float(normal_loglik(y, lo, hi, b, mu, sigma))
                assert value <= -math.log(2 * b) + 1e-12, (sigma, mu, y)

                def inner(x: float, mu: float = mu, sigma: float = sigma, y: float = y) -> float:
                    return stats.norm.pdf(x, mu, sigma) * math.exp(-abs(y - x) / b) / (2 * b)

                kink = [y] if lo < y < hi else None
                middle, _ = integrate.quad(inner, lo, hi, points=kink, epsabs=0, epsrel=1e-12)
                reference = (
                    stats.norm.cdf((lo - mu) / sigma) * math.exp(-abs(y - lo) / b) / (2 * b)
                    + stats.norm.sf((hi - mu) / sigma) * math.exp(-abs(y - hi) / b) / (2 * b)
                    + middle
                )
                assert value == pytest.approx(math.log(reference), rel=1e-9, abs=1e-9), (
                    sigma,
                    mu,
                    y,
                )


# Spec section 3.2 table: A -> {epsilon: (F[1,1], F[2,2])}.
FISHER_TABLE = {
    0.06: {1: (0.1089, 0.0000), 2: (0.2839, 0.0003), 5: (0.5616, 0.0023), 10: (0.6388, 0.0102)},
    0.24: {1: (0.1079, 0.0006), 2: (0.2860, 0.0038), 5: (0.5826, 0.0297), 10: (0.6778, 0.0837)},
    0.72: {1: (0.0958, 0.0038), 2: (0.2669, 0.0249), 5: (0.6122, 0.1725), 10: (0.7702, 0.3868)},
    1.20: {1: (0.0757, 0.0062), 2: (0.2217, 0.0411), 5: (0.5832, 0.3007), 10: (0.8043, 0.6975)},
    3.00: {1: (0.0230, 0.0022), 2: (0.0773, 0.0156), 5: (0.2969, 0.1610), 10: (0.5947, 0.6316)},
}


def test_c2_fisher_quadrature_reproduces_the_spec_table() -> None:
    for half_width, row in FISHER_TABLE.items():
        for epsilon, (f_mu, f_sigma) in row.items():
            fisher = fisher_information(-half_width, half_width, epsilon)
            assert fisher[0, 0] == pytest.approx(f_mu, abs=0.002), (half_width, epsilon)
            assert fisher[1, 1] == pytest.approx(f_sigma, abs=0.002), (half_width, epsilon)
            assert abs(fisher[0, 1]) < 1e-6  # symmetric interval: no mu-sigma coupling
            assert fisher[0, 0] < 1.0  # below the non-private information 1/sigma^2


@pytest.mark.parametrize("half_width, epsilon", [(0.54, 5), (0.06, 1), (3.0, 1)])
def test_c2_monte_carlo_fisher_agrees_with_quadrature(half_width: float, epsilon: float) -> None:
    exact = fisher_information(-half_width, half_width, epsilon)[0, 0]
    estimate = fisher_information_mc(
        -half_width, half_width, epsilon, np.random.default_rng(7), n_outer=2000, n_is=10_000
    )[0, 0]
    assert estimate == pytest.approx(exact, rel=0.06)


@pytest.mark.parametrize("epsilon, best", [(1, 0.1089), (2, 0.2860), (5, 0.6122), (10, 0.8043)])
def test_c2_design_is_within_half_a_percent_of_the_optimum(epsilon: int, best: float) -> None:
    design = design_truncation(epsilon=float(epsilon), score="mu")
    assert design.a == -design.b and design.b in design.grid
    assert design.fisher[0, 0] >= best * 0.995
    assert design.to_dict()["b"] == design.b


def test_design_refuses_a_zero_width_grid_and_unknown_names() -> None:
    with pytest.raises(ValueError, match="zero width"):
        design_truncation(epsilon=1.0, grid=(0.0, 0.06))
    with pytest.raises(ValueError, match="unknown score"):
        design_truncation(epsilon=1.0, score="max")
    with pytest.raises(ValueError, match="unknown family"):
        design_truncation(family="poisson")


@pytest.mark.parametrize("m, c", [(50.0, math.sqrt(10.0)), (-3.0, 0.2)])
@pytest.mark.parametrize("a, b", [(-0.72, 0.72), (-1.0, 0.3)])
def test_c3_location_scale_invariance(m: float, c: float, a: float, b: float) -> None:
    base = fisher_information(a, b, 5.0)
    moved = fisher_information(m + a * c, m + b * c, 5.0, mu=m, sigma=c)
    np.testing.assert_allclose(moved * c**2, base, rtol=1e-4, atol=1e-9)


def test_interval_is_intersected_with_the_public_bounds_and_never_empty() -> None:
    design = design_truncation(epsilon=5.0, score="mu")  # [a*, b*] = [-0.72, 0.72]
    assert design_interval(design, 50.0, 2.0, (0.0, 100.0)) == pytest.approx((48.56, 51.44))
    assert design_interval(design, 99.0, 2.0, (0.0, 100.0)) == pytest.approx((97.56, 100.0))
    # Entirely below the bounds: same width, against the lower bound.
    assert design_interval(design, -50.0, 2.0, (0.0, 100.0)) == pytest.approx((0.0, 2.88))
    # Entirely above and wider than the domain: the whole domain.
    assert clip_interval(150.0, 400.0, (0.0, 100.0)) == (0.0, 100.0)
    lower, upper = clip_interval(5.0, 5.0, (0.0, 100.0))
    assert upper - lower == pytest.approx(1e-7) and 0.0 <= lower < upper <= 100.0


def test_c6_release_noise_is_laplace_with_scale_width_over_epsilon(seeded_noise) -> None:
    lower, upper, epsilon = -1.0, 2.0, 1.5
    x = np.random.default_rng(3).normal(0.5, 2.0, 100_000)
    released = laplace_release(x, lower, upper, epsilon, seeded_noise(5))
    residual = released - np.clip(x, lower, upper)
    scale = (upper - lower) / epsilon
    assert stats.kstest(residual, stats.laplace(0, scale).cdf).pvalue > 0.01
    # The reference code's scale/sqrt(2) would give a mean |residual| 29 % too small.
    assert np.mean(np.abs(residual)) == pytest.approx(scale, rel=0.01)


def test_c6_log_likelihood_ratio_of_one_release_is_at_most_epsilon() -> None:
    lower, upper, epsilon = -1.0, 2.0, 0.7
    scale = (upper - lower) / epsilon
    x = np.linspace(lower, upper, 201)
    y = np.linspace(-20, 20, 801)
    log_lap = laplace_logpdf(y[:, None] - x[None, :], scale)
    worst = (log_lap.max(axis=1) - log_lap.min(axis=1)).max()
    assert worst <= epsilon + 1e-12
    assert worst == pytest.approx(epsilon, rel=1e-6)  # attained for y outside [l, r]


def test_c7_row_selection_is_a_uniform_random_subset_in_random_order(seeded_noise) -> None:
    noise = seeded_noise(21)
    first = np.zeros(10)
    for _ in range(2000):
        rows = select_rows(10, 3, noise, "too few")
        assert len(set(rows.tolist())) == 3
        first[rows[0]] += 1
    assert stats.chisquare(first).pvalue > 0.01


def test_c7_selection_comes_from_the_noise_source_not_a_seed() -> None:
    # Two production noise sources (OS entropy) give different selections: nothing a user
    # seed controls enters the permutation (select_rows takes no generator at all).
    first = select_rows(1000, 50, NoiseSource(), "too few")
    second = select_rows(1000, 50, NoiseSource(), "too few")
    assert not np.array_equal(first, second)
    with pytest.raises(InputError, match="^too few$"):
        select_rows(5, 6, NoiseSource(), "too few")


def test_c7_dp_count_exceeds_the_row_count_at_most_at_rate_delta(seeded_noise) -> None:
    count_epsilon, delta, n_rows, draws = 0.5, 1e-3, 1000, 100_000
    noise = seeded_noise(17)
    exceed = sum(
        steps_from_count(dp_row_count(n_rows, count_epsilon, noise), count_epsilon, delta, 10**6)
        > n_rows
        for _ in range(draws)
    )
    # Exact rate delta * exp(-count_epsilon) = 6.07e-4; the bound is delta.
    assert stats.binomtest(exceed, draws, delta, alternative="greater").pvalue > 0.01
    expected = delta * math.exp(-count_epsilon)
    assert stats.binomtest(exceed, draws, expected).pvalue > 0.001


def _schema(**extra) -> Schema:
    return Schema.model_validate(
        {
            "dataset": "demo",
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "columns": {
                "wage": {"type": "continuous", "min": 0, "max": 2000},
                "age": {"type": "integer", "min": 17, "max": 90},
                "region": {"type": "categorical", "categories": ["north", "south"]},
            },
            **extra,
        }
    )


def test_plan_refuses_bad_columns_and_row_counts_with_clear_messages() -> None:
    schema = _schema(min_rows=500)
    with pytest.raises(InputError, match="'salary' is not in the schema"):
        plan_truncation(schema, "salary", 1.0, n_steps=100)
    with pytest.raises(InputError, match="'region' is categorical"):
        plan_truncation(schema, "region", 1.0, n_steps=100)
    with pytest.raises(InputError, match="exceeds the schema's public min_rows 500"):
        plan_truncation(schema, "wage", 1.0, n_steps=501)
    with pytest.raises(InputError, match="needs a public lower bound min_rows"):
        plan_truncation(_schema(), "wage", 1.0, n_steps=100)
    with pytest.raises(InputError, match="needs --delta > 0"):
        plan_truncation(schema, "wage", 1.0, delta=0.0)
    pure_cap = _schema(budget={"epsilon": 10.0, "delta": 0.0})
    with pytest.raises(InputError, match="declare a public min_rows"):
        plan_truncation(pure_cap, "wage", 1.0)


def test_plan_defaults_need_only_the_column_and_epsilon() -> None:
    """min_rows declared: pure epsilon, T = min(min_rows, max_steps); else a DP count with
    delta_T = the cap's delta in proportion to epsilon (1e-5 x 2/10)."""
    pure = plan_truncation(_schema(min_rows=500), "wage", 1.0)
    assert (pure.variant, pure.n_steps, pure.delta) == ("min_rows", 500, 0.0)
    assert plan_truncation(_schema(min_rows=500), "wage", 1.0, max_steps=300).n_steps == 300
    counted = plan_truncation(_schema(), "wage", 2.0)
    assert counted.variant == "dp_count"
    assert counted.delta == pytest.approx(2e-6, rel=1e-12)


def test_schema_min_rows_must_not_exceed_max_rows() -> None:
    with pytest.raises(ValueError, match="min_rows \\(10\\) must not exceed max_rows \\(5\\)"):
        _schema(min_rows=10, max_rows=5)


def test_planned_spends_carry_the_ledger_parameters_and_typed_mechanisms() -> None:
    design = design_truncation(epsilon=2.0, score="mu").to_dict()
    pure = plan_truncation(_schema(min_rows=500), "age", 2.0, n_steps=300)
    (spend,) = pure.planned_spends(design)
    assert (spend.mechanism, spend.epsilon, spend.delta) == (TRUNCATION_MECHANISM, 2.0, 0.0)
    assert spend.description == PureEpsilon(2.0)
    assert spend.params["n_steps"] == 300 and spend.params["bounds"] == [17.0, 90.0]
    assert spend.params["scale_rule"] == "(r_t - l_t)/epsilon" and spend.params["per_row"]
    assert (spend.params["a"], spend.params["b"]) == (-0.24, 0.24)

    # The DP count and the transcript have a joint proof, so ONE entry
    # holds their joint (epsilon + epsilon_count, delta_T).
    counted = plan_truncation(_schema(), "wage", 2.0, delta=1e-6)
    (joint,) = counted.planned_spends(design)
    assert (joint.mechanism, joint.epsilon, joint.delta) == (TRUNCATION_MECHANISM, 2.1, 1e-6)
    assert joint.description == ApproxDP(2.1, 1e-6)
    count = joint.params["count"]
    assert (count["mechanism"], count["epsilon"], count["scale"]) == (COUNT_MECHANISM, 0.1, 10.0)
    assert joint.params["transcript_epsilon"] == 2.0


def test_resolve_steps_refuses_a_table_below_min_rows_without_counts(seeded_noise) -> None:
    plan = plan_truncation(_schema(min_rows=500), "wage", 1.0, n_steps=400)
    assert resolve_steps(plan, 450, seeded_noise(1)) == (400, None)
    with pytest.raises(InputError) as refused:
        resolve_steps(plan, 399, seeded_noise(1))
    assert str(refused.value) == BELOW_MIN_ROWS and "399" not in str(refused.value)


def test_resolve_steps_from_a_dp_count(seeded_noise) -> None:
    plan = plan_truncation(_schema(), "wage", 2.0, delta=1e-6, count_epsilon=1.0, max_steps=800)
    n_steps, noisy = resolve_steps(plan, 5000, seeded_noise(2))
    assert n_steps == 800  # capped at max_steps
    small, noisy = resolve_steps(plan, 300, seeded_noise(2))
    assert small == math.floor(noisy - math.log(1 / 2e-6)) and small < 300
    with pytest.raises(InputError, match="fewer than --min-steps 50"):
        resolve_steps(plan, 40, seeded_noise(2))
