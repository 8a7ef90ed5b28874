"""ABCDP privacy: checks C3 (calibration), C4 (exact privacy of AboveThreshold) and C5 (flip
probability) of docs/abcdp.md section 6.6, and the DP count."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dprelease.inference.abcdp.svt import (
    flip_probability,
    lemma42_density,
    lemma42_tail,
    svt_below_threshold,
    svt_noise_scale,
)
from dprelease.privacy.counting import dp_row_count
from dprelease.privacy.noise import NoiseSource


class RecordingNoise(NoiseSource):
    """Seeded noise that records every (scale, noise drawn) the mechanism asks for."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self._rng = np.random.default_rng(seed)
        self.calls: list[tuple[float, np.ndarray]] = []

    def add_laplace(self, values, scale, *, counts=False):  # noqa: ANN001, ANN201
        values = np.asarray(values, dtype=float)
        drawn = self._rng.laplace(0.0, scale, values.shape)
        self.calls.append((scale, np.atleast_1d(drawn).copy()))
        return values + drawn


def _svt(distances, threshold, c, epsilon, sensitivity, resample, noise, batch=None):
    distances = np.asarray(distances, dtype=float)
    batch = batch or len(distances)
    batches = (distances[i : i + batch] for i in range(0, len(distances), batch))
    return svt_below_threshold(batches, threshold, c, epsilon, sensitivity, resample, noise)


# ---------------------------------------------------------------- C3: calibration
@pytest.mark.parametrize("resample", [False, True])
def test_noise_scales_follow_theorem_4_1(resample):
    c, delta, epsilon = 7, 1 / 250, 0.8
    b = svt_noise_scale(c, delta, epsilon, resample)
    assert b == pytest.approx((2 * c if resample else c + 1) * delta / epsilon, rel=1e-15)
    assert svt_noise_scale(1, delta, epsilon, False) == svt_noise_scale(1, delta, epsilon, True)


def test_threshold_noise_is_laplace_b_and_query_noise_laplace_2b():
    """KS tests over 10^5 draws each, from the instrumented noise source."""
    c, delta, epsilon, n = 100_000, 1e-3, 1.0, 100_000
    noise = RecordingNoise(0)
    # resample=True and every query accepted: one fresh threshold per query.
    outcome = _svt(np.full(n, -1e9), 0.1, c, epsilon, delta, True, noise, batch=50)
    assert outcome.accepted == tuple(range(n)) and outcome.n_consumed == n
    b = svt_noise_scale(c, delta, epsilon, True)
    threshold = np.concatenate([v for s, v in noise.calls if len(v) == 1])
    queries = np.concatenate([v for s, v in noise.calls if len(v) > 1])
    assert {s for s, v in noise.calls if len(v) == 1} == {b}
    assert {s for s, v in noise.calls if len(v) > 1} == {2 * b}
    assert len(threshold) == n + 1 and len(queries) == n
    assert stats.kstest(threshold, "laplace", args=(0, b)).pvalue > 1e-3
    assert stats.kstest(queries, "laplace", args=(0, 2 * b)).pvalue > 1e-3
    # the wrong scale is rejected by the same test (the test has power)
    assert stats.kstest(queries, "laplace", args=(0, b)).pvalue < 1e-6


def test_without_resampling_the_threshold_is_drawn_once_and_the_loop_stops_at_c():
    noise = RecordingNoise(1)
    outcome = _svt(np.full(1000, -1e9), 0.1, 5, 1.0, 1e-3, False, noise, batch=100)
    assert outcome.accepted == (0, 1, 2, 3, 4) and outcome.n_consumed == 5
    assert [len(v) for _, v in noise.calls] == [1, 100]  # one threshold, one query batch


def test_lazy_batches_are_not_requested_after_the_stop():
    requested = []

    def batches():
        for start in range(0, 100, 10):
            requested.append(start)
            yield np.full(10, -1e9)

    outcome = svt_below_threshold(batches(), 0.1, 12, 1.0, 1e-3, True, RecordingNoise(2))
    assert outcome.n_consumed == 12 and requested == [0, 10]


def test_nothing_accepted_consumes_every_draw():
    outcome = _svt(np.full(50, 1e9), 0.1, 3, 1.0, 1e-3, False, RecordingNoise(3), batch=7)
    assert outcome.accepted == () and outcome.n_consumed == 50


# ---------------------------------------------------------------- C4: exact privacy
def _laplace_cdf(x, scale):
    x = np.asarray(x, dtype=float)
    return np.where(
        x < 0, 0.5 * np.exp(np.minimum(x, 0) / scale), 1 - 0.5 * np.exp(-np.maximum(x, 0) / scale)
    )


def _output_distribution(q, threshold, b_threshold, b_query):
    """Exact P(first acceptance at k), k = 0..K-1, and P(none), of AboveThreshold (c = 1,
    "below" direction): 1-D integrals over the threshold noise m (docs/abcdp.md C4),

        P(first at k) = int Lap(m; b) prod_{t<k} P(nu_t > eps_abc + m - q_t)
                                      P(nu_k <= eps_abc + m - q_k) dm,

    by 32-point Gauss-Legendre on pieces of width <= b_threshold between the kinks (the
    integrand is smooth on each piece), over m in +-40 scales (the rest is < e^-40 relative;
    products below 1e-200 are set to 0 to keep subnormal floats out)."""
    q = np.asarray(q, dtype=float)
    kinks = q - threshold
    span = 40.0 * max(b_threshold, b_query)
    lower, upper = min(kinks.min(), 0.0) - span, max(kinks.max(), 0.0) + span
    grid = np.arange(lower, upper, b_threshold)
    edges = np.unique(np.concatenate([grid, kinks, [0.0, upper]]))
    nodes, weights = np.polynomial.legendre.leggauss(32)
    half = np.diff(edges)[:, None] / 2
    m = ((edges[:-1, None] + edges[1:, None]) / 2 + half * nodes[None, :]).ravel()
    w = (half * weights[None, :]).ravel() * np.exp(-np.abs(m) / b_threshold) / (2 * b_threshold)
    accept = _laplace_cdf(threshold + m[:, None] - q[None, :], b_query)  # P(nu_t <= ...)
    survive = np.cumprod(np.hstack([np.ones((len(m), 1)), 1 - accept]), axis=1)
    survive[survive < 1e-200] = 0.0
    probabilities = [w @ (survive[:, k] * accept[:, k]) for k in range(len(q))]
    probabilities.append(w @ survive[:, len(q)])
    return np.array(probabilities)


def _query_pairs(rng, n_pairs, k_len, delta):
    for index in range(n_pairs):
        q = rng.uniform(0.0, 6 * delta, k_len)
        if index % 2 == 0:  # adversarial: q' = q + Delta before k, q - Delta at k
            k = index // 2 % k_len
            shift = np.zeros(k_len)
            shift[:k] = delta
            shift[k] = -delta
        else:
            shift = rng.uniform(-delta, delta, k_len)
        yield q, q + shift


def _max_log_ratio(b_threshold, b_query, n_pairs, rng, delta, threshold=3e-3):
    worst = -np.inf
    for q, q_prime in _query_pairs(rng, n_pairs, 6, delta):
        p = _output_distribution(q, threshold, b_threshold, b_query)
        p_prime = _output_distribution(q_prime, threshold, b_threshold, b_query)
        assert p.sum() == pytest.approx(1.0, abs=1e-8)
        worst = max(worst, float(np.max(np.abs(np.log(p) - np.log(p_prime)))))
    return worst


def _scales_the_implementation_uses(c, delta, epsilon):
    noise = RecordingNoise(4)
    _svt(np.full(6, 1e9), 0.0, c, epsilon, delta, False, noise)
    (threshold_scale, _), (query_scale, _) = noise.calls
    return threshold_scale, query_scale


def test_above_threshold_is_exactly_epsilon_dp():
    """C4: every output probability ratio over 200 neighbouring query pairs <= e^eps."""
    delta, epsilon = 1e-3, 1.0
    b_threshold, b_query = _scales_the_implementation_uses(1, delta, epsilon)
    assert (b_threshold, b_query) == (2 * delta / epsilon, 4 * delta / epsilon)
    worst = _max_log_ratio(b_threshold, b_query, 200, np.random.default_rng(5), delta)
    assert math.exp(worst) <= math.exp(epsilon) * (1 + 1e-6)
    assert worst > 0.5 * epsilon  # the adversarial pairs come close to the bound


def test_query_noise_at_scale_b_breaks_the_guarantee():
    """C4 with the classic bug (query noise Lap(b) instead of Lap(2b)): the check fails."""
    delta, epsilon = 1e-3, 1.0
    b_threshold, _ = _scales_the_implementation_uses(1, delta, epsilon)
    worst = _max_log_ratio(b_threshold, b_threshold, 200, np.random.default_rng(5), delta)
    assert math.exp(worst) > math.exp(epsilon) * (1 + 1e-3)


def test_exact_distribution_matches_the_implementation():
    """The integrals of C4 describe what svt_below_threshold does (chi-square, 20 000 runs)."""
    delta, epsilon, threshold = 1e-3, 1.0, 3e-3
    rng = np.random.default_rng(6)
    q = rng.uniform(0.0, 6 * delta, 6)
    expected = _output_distribution(q, threshold, 2 * delta / epsilon, 4 * delta / epsilon)
    noise = RecordingNoise(7)
    counts = np.zeros(7)
    for _ in range(20_000):
        outcome = _svt(q, threshold, 1, epsilon, delta, False, noise)
        counts[outcome.accepted[0] if outcome.accepted else 6] += 1
        noise.calls.clear()
    assert stats.chisquare(counts, expected * counts.sum()).pvalue > 1e-3


# ---------------------------------------------------------------- C5: flip probability
def test_lemma_4_2_density_and_tail():
    for b in (0.02, 0.2, 0.3):
        total = sum(
            integrate.quad(lemma42_density, lo, hi, args=(b,))[0]
            for lo, hi in ((-np.inf, 0.0), (0.0, np.inf))
        )
        assert total == pytest.approx(1.0, abs=1e-8)
        assert lemma42_tail(0.0, b) == pytest.approx(0.5, abs=1e-15)
    # docs/abcdp.md section 4 [verified] values
    assert lemma42_tail(0.1, 0.02) == pytest.approx(0.0536, abs=5e-5)
    assert lemma42_tail(0.3, 0.02) == pytest.approx(3.687e-4, rel=1e-3)
    assert lemma42_tail(0.1, 0.2) == pytest.approx(0.4181, abs=5e-5)
    assert lemma42_tail(0.3, 0.2) == pytest.approx(0.2777, abs=5e-5)
    rng = np.random.default_rng(8)
    z = rng.laplace(0, 0.3, 1_000_000) - rng.laplace(0, 0.6, 1_000_000)
    for a in (0.1, 0.5):
        assert abs(np.mean(z > a) - float(lemma42_tail(a, 0.3))) < 0.002
    assert float(lemma42_tail(0.1, 0.3)) == pytest.approx(0.44490, abs=5e-5)
    assert float(lemma42_tail(0.5, 0.3)) == pytest.approx(0.2583, abs=5e-5)


def test_empirical_flip_rate_after_a_refresh_matches_proposition_4_2():
    """RESAMPLE = True; the query right after an acceptance sees a fresh threshold."""
    delta, epsilon, eps_abc, runs = 1e-3, 1.0, 0.05, 8_000
    b = svt_noise_scale(2, delta, epsilon, True)
    noise = RecordingNoise(9)
    for rho in (0.035, 0.05, 0.06):
        accepted = 0
        for _ in range(runs):
            outcome = _svt([-1e9, rho], eps_abc, 2, epsilon, delta, True, noise)
            accepted += 1 in outcome.accepted
        noise.calls.clear()
        flips = (runs - accepted) if rho <= eps_abc else accepted
        expected = float(flip_probability(rho, eps_abc, b))
        sd = math.sqrt(expected * (1 - expected) / runs)
        assert abs(flips / runs - expected) <= 3 * sd


# ---------------------------------------------------------------- DP count
def test_dp_row_count_is_laplace_with_scale_one_over_epsilon():
    noise = RecordingNoise(10)
    values = np.array([dp_row_count(1000, 0.05, noise) for _ in range(20_000)])
    assert {scale for scale, _ in noise.calls} == {20.0}
    assert stats.kstest(values - 1000, "laplace", args=(0, 20.0)).pvalue > 1e-3
