"""Tests for dprelease.diagnostics.psis.smoothing (PSIS of Vehtari et al. 2024, JMLR 25(72)).

References used here:
* ``ref_gpdfit`` / ``ref_psis``: loop-based transcriptions of loo's R ``gpdfit`` and
  ``do_psis_i`` in plain Python floats (stable ``sorted`` plays R's stable ``sort.int``);
* ArviZ 0.23 ``psislw`` (agrees with loo wherever the tail holds no value tied with the
  cutoff and the cutoff is above ``log(tiny)`` relative to the maximum);
* literal numbers computed once with ``ref_psis`` / ``ref_gpdfit`` (see the comments).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.special import logsumexp

from dprelease.diagnostics import PsisResult, normalised_weights, psis

# the package re-exports the function psis, which shadows the submodule's attribute name
psis_module = importlib.import_module("dprelease.diagnostics.psis.smoothing")
pareto_fit = importlib.import_module("dprelease.diagnostics.psis.pareto_fit")

EPS = sys.float_info.epsilon


# --------------------------------------------------------------------------------------------
# Independent reference: straightforward transcription of loo's gpdfit / do_psis_i.
# --------------------------------------------------------------------------------------------
def ref_gpdfit(x: list[float]) -> tuple[float, float]:
    """loo::gpdfit(x, wip = TRUE, min_grid_pts = 30) for ascending x; NaN where loo is NaN."""
    n = len(x)
    m = 30 + math.isqrt(n)
    xstar = x[math.floor(n / 4 + 0.5) - 1]  # first quartile (R is 1-based)
    if xstar == 0.0:  # loo: theta = -Inf, Inf * 0 = NaN, so k = NaN (reported as Inf)
        return math.nan, math.nan
    theta = [1 / x[n - 1] + (1 - math.sqrt(m / (j - 0.5))) / 3 / xstar for j in range(1, m + 1)]
    loglik = []
    for th in theta:
        k_j = math.fsum(math.log1p(-th * xi) for xi in x) / n
        loglik.append(n * (math.log(-th / k_j) - k_j - 1))
    top = max(loglik)
    lse = top + math.log(math.fsum(math.exp(v - top) for v in loglik))
    weights = [math.exp(v - lse) for v in loglik]
    theta_hat = math.fsum(t * w for t, w in zip(theta, weights, strict=True))
    k = math.fsum(math.log1p(-theta_hat * xi) for xi in x) / n
    sigma = -k / theta_hat
    k = (k * n + 10 * 0.5) / (n + 10)
    return k, sigma


def ref_psis(lw: list[float]) -> tuple[list[float], float]:
    """loo::psis for one vector with r_eff = 1; returns (unnormalised log weights, k_hat)."""
    s = len(lw)
    m = math.ceil(min(0.2 * s, 3 * math.sqrt(s)))
    if m < 5:
        return list(lw), math.inf
    top = max(lw)
    order = sorted(range(s), key=lambda i: (lw[i], i))  # stable ascending sort
    tail_ids = order[s - m :]
    cutoff = lw[order[s - m - 1]] - top
    tail = [lw[i] - top for i in tail_ids]
    if tail[-1] - tail[0] < EPS:  # constant tail: left unsmoothed, reported as -inf (ours)
        return list(lw), -math.inf
    x = [math.exp(t) - math.exp(cutoff) for t in tail]
    k, sigma = ref_gpdfit(x)
    if not (math.isfinite(k) and math.isfinite(sigma) and sigma > 0):
        return list(lw), math.inf
    out = list(lw)
    for z, i in enumerate(tail_ids, start=1):
        p = (z - 0.5) / m
        q = sigma * math.expm1(-k * math.log1p(-p)) / k
        out[i] = min(math.log(math.exp(cutoff) + q), 0.0) + top
    return out, k


def naive_ess(lw: np.ndarray) -> float:
    w = np.exp(lw - lw.max())
    return float(w.sum() ** 2 / (w**2).sum())


def heavy(rng: np.random.Generator, alpha: float, size: int | tuple[int, ...]) -> np.ndarray:
    """Log weights whose weights 1 + Pareto(alpha) have GPD tail shape k = 1/alpha."""
    return np.log1p(rng.pareto(alpha, size))


@pytest.fixture(scope="module")
def arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return pytest.importorskip("arviz")


def _arviz_psislw(arviz, lw: np.ndarray, normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(over="ignore"):  # arviz's _gpdfit overflows harmlessly in exp
        return arviz.psislw(lw.copy(), reff=1.0, normalize=normalize)


# --------------------------------------------------------------------------------------------
# Agreement with the loop-based loo transcription.
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [21, 24, 30, 57, 200, 1000])
@pytest.mark.parametrize("kind", ["normal", "student_t", "pareto"])
def test_matches_loo_transcription(size: int, kind: str) -> None:
    rng = np.random.default_rng(size)
    lw = {
        "normal": rng.standard_normal(size),
        "student_t": rng.standard_t(3, size),
        "pareto": heavy(rng, 0.9, size),
    }[kind]
    expected, k_expected = ref_psis(lw.tolist())
    result = psis(lw)
    assert result.tail_length == math.ceil(min(0.2 * size, 3 * math.sqrt(size)))
    assert math.isfinite(result.k_hat)
    assert result.k_hat == pytest.approx(k_expected, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(result.log_weights, expected, rtol=0, atol=1e-12)
    changed = result.log_weights != lw
    assert 0 < changed.sum() <= result.tail_length


def test_gpdfit_rows_match_transcription() -> None:
    rng = np.random.default_rng(7)
    rows = np.sort(
        np.stack(
            [
                rng.exponential(size=40),  # k = 0
                rng.pareto(2.0, 40),  # k = 0.5
                rng.uniform(size=40),  # k = -1
            ]
        ),
        axis=1,
    )
    k, sigma = pareto_fit.gpdfit(rows)
    for r, row in enumerate(rows):
        k_ref, sigma_ref = ref_gpdfit(row.tolist())
        assert k[r] == pytest.approx(k_ref, rel=1e-12)
        assert sigma[r] == pytest.approx(sigma_ref, rel=1e-12)
    assert k[2] < 0 < k[0] < k[1]


def test_literal_values() -> None:
    # Obtained once with ref_gpdfit / ref_psis above (and identical, to 1e-15, with
    # arviz.psislw from ArviZ 0.23): x = 0.1, 0.2, ..., 1.0 and the log of exact Pareto(1.5)
    # quantiles, lw_i = -log((i - 0.5) / 200) / 1.5 for i = 1..200.
    k, sigma = pareto_fit.gpdfit(np.arange(1.0, 11.0)[None, :] / 10)
    assert k[0] == pytest.approx(-0.1436288872586951, rel=1e-12)
    assert sigma[0] == pytest.approx(0.9128092726263269, rel=1e-12)

    lw = -np.log((np.arange(1, 201) - 0.5) / 200) / 1.5
    result = psis(lw)
    assert result.tail_length == 40
    assert result.k_hat == pytest.approx(0.6170871064667991, rel=1e-12)
    assert result.log_weights[0] == pytest.approx(3.8656061024004416, rel=1e-12)
    assert result.log_weights[39] == pytest.approx(1.0732813865391648, rel=1e-12)
    np.testing.assert_array_equal(result.log_weights[40:], lw[40:])


# --------------------------------------------------------------------------------------------
# Agreement with ArviZ 0.23.
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [100, 1000, 100_000])
@pytest.mark.parametrize("kind", ["normal", "student_t", "pareto_light", "pareto_heavy"])
def test_matches_arviz(arviz, size: int, kind: str) -> None:
    rng = np.random.default_rng(size + len(kind))
    lw = {
        "normal": lambda: 3.0 * rng.standard_normal(size) - 50.0,
        "student_t": lambda: rng.standard_t(4, size),
        "pareto_light": lambda: heavy(rng, 3.0, size),
        "pareto_heavy": lambda: heavy(rng, 0.7, size),
    }[kind]()
    result = psis(lw)
    az_lw, az_k = _arviz_psislw(arviz, lw, normalize=False)
    assert math.isfinite(result.k_hat)
    assert result.k_hat == pytest.approx(float(az_k), rel=0, abs=1e-8)
    # ArviZ returns (lw - max) + max, i.e. unnormalised log weights like loo (issue #2148:
    # its default normalize=True subtracts logsumexp instead; compared below).
    np.testing.assert_allclose(result.log_weights, az_lw, rtol=0, atol=1e-8)
    az_norm, _ = _arviz_psislw(arviz, lw, normalize=True)
    np.testing.assert_allclose(
        result.log_weights - logsumexp(result.log_weights), az_norm, rtol=0, atol=1e-8
    )


def test_matches_arviz_2d(arviz) -> None:
    rng = np.random.default_rng(11)
    lw = np.stack([rng.standard_normal(2000), heavy(rng, 1.2, 2000), rng.standard_t(2, 2000)])
    result = psis(lw)
    az_lw, az_k = _arviz_psislw(arviz, lw, normalize=False)
    np.testing.assert_allclose(result.k_hat, az_k, rtol=0, atol=1e-8)
    np.testing.assert_allclose(result.log_weights, az_lw, rtol=0, atol=1e-8)


def test_arviz_deviation_constant_tail_above_cutoff(arviz) -> None:
    # Documented deviation: when the M tail values are equal but above the cutoff, ArviZ fits
    # a GPD to constant exceedances and rewrites the tail; loo refuses (Inf + warning), we
    # leave the weights unchanged and report -inf.
    rng = np.random.default_rng(3)
    lw = np.concatenate([rng.standard_normal(100) - 5.0, np.zeros(25)])  # S = 125, M = 25
    az_lw, az_k = _arviz_psislw(arviz, lw, normalize=False)
    assert np.isfinite(az_k) and not np.array_equal(az_lw, lw)
    result = psis(lw)
    assert result.k_hat == -math.inf
    np.testing.assert_array_equal(result.log_weights, lw)


# --------------------------------------------------------------------------------------------
# Properties.
# --------------------------------------------------------------------------------------------
log_weight_vectors = hnp.arrays(
    np.float64,
    st.integers(1, 300),
    elements=st.one_of(
        st.floats(-40.0, 40.0, allow_nan=False, allow_infinity=False),
        st.sampled_from([-1.0, 0.0, 0.5, 2.0]),  # frequent exact ties
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(log_weight_vectors)
def test_smoothing_properties(lw: np.ndarray) -> None:
    original = lw.copy()
    result = psis(lw)
    out = result.log_weights
    np.testing.assert_array_equal(lw, original)  # input untouched
    assert out.shape == lw.shape
    assert out.max() <= lw.max()
    size = lw.size
    m = result.tail_length
    changed = out != lw
    assert changed.sum() <= m
    if m >= 5:
        cutoff = np.sort(lw)[size - m - 1]
        below = lw < cutoff
        # bitwise: compare the raw bytes of every entry below the cutoff
        assert out[below].tobytes() == lw[below].tobytes()
        assert np.all(lw[changed] >= cutoff)
        assert np.all(out[changed] >= cutoff)
    else:
        assert not changed.any()
    expected, k_expected = ref_psis(lw.tolist())
    if math.isfinite(k_expected):
        assert result.k_hat == pytest.approx(k_expected, rel=1e-9, abs=1e-9)
    else:
        assert result.k_hat == k_expected
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-9)


# --------------------------------------------------------------------------------------------
# Edge cases.
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_rejects_non_finite(bad: float) -> None:
    lw = np.zeros(50)
    lw[3] = bad
    with pytest.raises(ValueError, match=r"log weights must be finite; found NaN/inf at 3 \("):
        psis(lw)
    lw2 = np.zeros((2, 50))
    lw2[1, 7] = bad
    with pytest.raises(ValueError, match=r"found NaN/inf at \(1, 7\)"):
        psis(lw2)
    with pytest.raises(ValueError, match=r"found NaN/inf at \(0, 7\)"):
        psis(lw2[1:])
    with pytest.raises(ValueError, match="log weights must be finite"):
        normalised_weights(lw)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (2, 2, 2)])
def test_rejects_bad_shapes(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="log weights must"):
        psis(np.zeros(shape))


@pytest.mark.parametrize("size", [1, 2, 10, 20])
def test_too_few_draws(size: int) -> None:
    lw = np.random.default_rng(size).standard_normal(size)
    result = psis(lw)
    assert result.tail_length < 5
    assert result.k_hat == math.inf
    assert result.verdict == "unreliable"
    assert "too few draws" in result.reason
    assert result.log_weights.tobytes() == lw.tobytes()
    assert result.ess == pytest.approx(naive_ess(lw), rel=1e-12)
    assert result.ess == result.ess_raw
    assert result.min_sample_size == math.inf


@pytest.mark.parametrize("size", [21, 22, 23, 24])
def test_smallest_smoothable_sizes(arviz, size: int) -> None:
    lw = heavy(np.random.default_rng(size), 1.0, size)
    result = psis(lw)
    assert result.tail_length == 5
    assert result.reason is None
    az_lw, az_k = _arviz_psislw(arviz, lw, normalize=False)
    assert result.k_hat == pytest.approx(float(az_k), abs=1e-12)
    np.testing.assert_allclose(result.log_weights, az_lw, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_equal", [25, 40])  # tail equal and above / equal to the cutoff
def test_constant_tail(n_equal: int) -> None:
    rng = np.random.default_rng(n_equal)
    lw = np.concatenate([rng.standard_normal(125 - n_equal) - 5.0, np.full(n_equal, 1.5)])
    rng.shuffle(lw)
    result = psis(lw)
    assert result.tail_length == 25
    assert result.k_hat == -math.inf
    assert result.verdict == "good"
    assert "equal" in result.reason
    assert result.log_weights.tobytes() == lw.tobytes()
    assert result.ess == result.ess_raw == pytest.approx(naive_ess(lw), rel=1e-12)
    assert result.min_sample_size == 10.0


def _tied_vector(n_tied_in_tail: int) -> tuple[np.ndarray, np.ndarray]:
    """S = 100 (M = 20): 20 - n_tied_in_tail values above 0, n_tied_in_tail + 2 values tied at
    0.0 (so the cutoff is 0.0 and two tied entries stay in the body) and the rest below -1.

    The tied entries sit at scattered indices; returns (lw, tied indices ascending).
    """
    rng = np.random.default_rng(n_tied_in_tail)
    n_above = 20 - n_tied_in_tail
    n_tied = n_tied_in_tail + 2
    n_low = 100 - n_tied - n_above
    values = np.concatenate(
        [
            -1.0 - rng.exponential(size=n_low),
            np.zeros(n_tied),
            0.5 + rng.exponential(size=n_above),
        ]
    )
    perm = rng.permutation(100)
    lw = np.empty(100)
    lw[perm] = values
    tied = np.sort(perm[n_low : n_low + n_tied])
    return lw, tied


def test_ties_at_cutoff_follow_stable_sort() -> None:
    lw, tied = _tied_vector(n_tied_in_tail=4)
    result = psis(lw)
    assert result.reason is None and math.isfinite(result.k_hat)
    out = result.log_weights
    # The two tied entries with the smallest indices stay in the body, bit-for-bit...
    assert out[tied[:2]].tobytes() == lw[tied[:2]].tobytes()
    # ...the four with the largest indices are smoothed, increasing in index order.
    assert np.all(np.diff(out[tied[2:]]) > 0)
    assert np.all(out[tied[2:]] > 0.0)
    expected, k_expected = ref_psis(lw.tolist())
    assert result.k_hat == pytest.approx(k_expected, rel=1e-12)
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)


def test_ties_filling_the_first_quartile_fail_the_fit() -> None:
    lw, _ = _tied_vector(n_tied_in_tail=6)  # x[1..6] (1-based) = 0 -> anchor x[5] = 0 -> NaN
    result = psis(lw)
    assert result.k_hat == math.inf
    assert result.verdict == "unreliable"
    assert "fit failed" in result.reason
    assert result.log_weights.tobytes() == lw.tobytes()


def test_long_vectors_with_ties_and_adversarial_layout() -> None:
    size = 1 << 17  # pre-filtered selection path; M = 1087
    rng = np.random.default_rng(5)
    tied = rng.standard_normal(size)
    tied[rng.choice(size, 3000, replace=False)] = 3.0  # ties straddling the cutoff
    periodic = rng.standard_normal(size)
    # every 8th entry (the strided subsample) is large: the subsample's bound admits fewer
    # than M + 1 entries, so the selection must fall back to the whole vector
    periodic[::8] = 50.0 + rng.standard_normal(size // 8)
    for lw in (tied, periodic):
        expected, k_expected = ref_psis(lw.tolist())
        result = psis(lw)
        assert result.k_hat == pytest.approx(k_expected, rel=1e-10)
        np.testing.assert_allclose(result.log_weights, expected, rtol=0, atol=1e-10)
        assert result.ess == pytest.approx(naive_ess(result.log_weights), rel=1e-10)
        assert result.ess_raw == pytest.approx(naive_ess(lw), rel=1e-10)


def test_2d_equals_rowwise() -> None:
    rng = np.random.default_rng(9)
    tied, _ = _tied_vector(6)
    rows = np.stack(
        [
            rng.standard_normal(100),
            heavy(rng, 0.8, 100),
            np.concatenate([rng.standard_normal(75), np.zeros(25)]),  # constant tail
            tied,  # failed fit
            rng.uniform(size=100),
        ]
    )
    for lw in (rows, np.stack([heavy(rng, 1.5, 1 << 16), rng.standard_normal(1 << 16)])):
        result = psis(lw)
        assert result.log_weights.shape == lw.shape
        assert isinstance(result.verdict, list) and isinstance(result.reason, list)
        for r in range(lw.shape[0]):
            single = psis(lw[r])
            np.testing.assert_allclose(result.log_weights[r], single.log_weights, rtol=1e-13)
            for name in ("k_hat", "ess", "ess_raw", "min_sample_size"):
                assert getattr(result, name)[r] == pytest.approx(getattr(single, name), rel=1e-13)
            assert result.verdict[r] == single.verdict
            assert result.reason[r] == single.reason
            assert result.threshold == single.threshold
            assert result.tail_length == single.tail_length


def test_blocking_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(10)
    lw = np.concatenate([heavy(rng, 1.0, (40, 300)), rng.standard_normal((40, 300))])
    reference = psis(lw)
    monkeypatch.setattr(psis_module, "_BLOCK_ELEMENTS", 7 * 300)  # 7 rows per block
    monkeypatch.setattr(pareto_fit, "_FIT_ELEMENTS", 1)  # one row per fit block
    monkeypatch.setattr(psis_module, "_CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(psis_module, "_MIN_CHUNK_WIDTH", 37)  # 300 = 8 * 37 + 4: ragged chunk
    blocked = psis(lw)
    np.testing.assert_allclose(blocked.log_weights, reference.log_weights, rtol=1e-13)
    np.testing.assert_allclose(blocked.k_hat, reference.k_hat, rtol=1e-13)
    np.testing.assert_allclose(blocked.ess, reference.ess, rtol=1e-12)
    np.testing.assert_allclose(blocked.ess_raw, reference.ess_raw, rtol=1e-12)
    for r in range(lw.shape[0]):
        assert blocked.ess[r] == pytest.approx(naive_ess(blocked.log_weights[r]), rel=1e-12)


# --------------------------------------------------------------------------------------------
# Diagnostics: threshold, minimum sample size, ESS, verdict.
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1, 21, 50, 100, 1000, 10_000, 100_000])
def test_threshold_formula(size: int) -> None:
    result = psis(np.random.default_rng(size).standard_normal(size))
    expected = -math.inf if size == 1 else min(1 - 1 / math.log10(size), 0.7)
    assert result.threshold == expected
    assert {100: 0.5, 1000: 1 - 1 / 3, 10_000: 0.7, 100_000: 0.7}.get(size, expected) == (
        pytest.approx(expected, rel=1e-15)
    )


def test_min_sample_size_formula() -> None:
    rng = np.random.default_rng(12)
    lw = np.stack(
        [
            np.log(rng.uniform(size=10_000)),  # bounded weights: k < 0
            heavy(rng, 1.6, 10_000),  # 0 < k < 1
            heavy(rng, 0.6, 10_000),  # k > 1
        ]
    )
    result = psis(lw)
    k = result.k_hat
    assert k[0] < 0 < k[1] < 1 < k[2]
    # posterior::ps_min_ss: 10^(1 / (1 - max(0, k))) for k < 1, Inf otherwise
    assert result.min_sample_size[0] == 10.0
    assert result.min_sample_size[1] == 10 ** (1 / (1 - k[1]))
    assert result.min_sample_size[2] == math.inf


def test_verdicts() -> None:
    rng = np.random.default_rng(13)
    lw = np.stack([rng.standard_normal(10_000), heavy(rng, 1.5, 10_000), heavy(rng, 0.8, 10_000)])
    result = psis(lw)
    assert result.threshold == 0.7
    assert result.k_hat[0] <= 0.5 and result.verdict[0] == "good"
    assert 0.5 < result.k_hat[1] <= 0.7 and result.verdict[1] == "ok"
    assert result.k_hat[2] > 0.7 and result.verdict[2] == "unreliable"
    assert result.reason == [None, None, None]
    # with S = 100 the threshold is 0.5, so there is no "ok" band
    small = psis(heavy(np.random.default_rng(2), 0.8, 100))
    assert small.threshold == 0.5 and small.k_hat > 0.5 and small.verdict == "unreliable"


@pytest.mark.parametrize("size", [25, 999, 70_001])
def test_ess_matches_naive_formula(size: int) -> None:
    rng = np.random.default_rng(size)
    lw = np.stack([heavy(rng, 0.9, size), rng.standard_normal(size) * 4 + 700])
    result = psis(lw)
    for r in range(2):
        assert result.ess_raw[r] == pytest.approx(naive_ess(lw[r]), rel=1e-11)
        assert result.ess[r] == pytest.approx(naive_ess(result.log_weights[r]), rel=1e-11)
    assert result.ess[0] != result.ess_raw[0]


# --------------------------------------------------------------------------------------------
# normalised_weights, result object, imports.
# --------------------------------------------------------------------------------------------
def test_normalised_weights() -> None:
    rng = np.random.default_rng(14)
    lw = np.stack([heavy(rng, 1.0, 500) + 800.0, rng.standard_normal(500)])
    w = normalised_weights(lw)
    np.testing.assert_allclose(w.mean(axis=1), 1.0, rtol=1e-13)
    np.testing.assert_allclose(
        w, np.exp(lw - logsumexp(lw, axis=1, keepdims=True)) * 500, rtol=1e-12
    )
    np.testing.assert_allclose(normalised_weights(lw[0]), w[0], rtol=1e-15)
    smoothed = normalised_weights(psis(lw[0]).log_weights)
    assert smoothed.mean() == pytest.approx(1.0, rel=1e-13)
    assert smoothed.max() < w[0].max()


def test_result_object_and_json() -> None:
    rng = np.random.default_rng(15)
    lw = np.stack(
        [rng.standard_normal(300), np.concatenate([rng.standard_normal(200), np.full(100, 9.0)])]
    )
    lw_f32 = lw[0].astype(np.float32)
    one = psis(lw_f32)
    assert one.log_weights.dtype == np.float64
    assert isinstance(one, PsisResult)
    assert isinstance(one.k_hat, float) and isinstance(one.verdict, str)
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.k_hat = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        one.log_weights[0] = 0.0

    d = one.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["n_draws"] == 300 and d["tail_length"] == one.tail_length
    assert d["k_hat"] == one.k_hat and d["verdict"] == one.verdict and d["reason"] is None

    two = psis(lw).to_dict()
    assert json.loads(json.dumps(two)) == two
    assert two["k_hat"][1] == "-inf" and two["verdict"] == ["good", "good"]
    assert two["reason"][0] is None and "equal" in two["reason"][1]
    few = psis(np.zeros(3)).to_dict()
    assert few["k_hat"] == "inf" and few["min_sample_size"] == "inf"
    assert few["threshold"] == pytest.approx(1 - 1 / math.log10(3))


def test_import_is_light() -> None:
    code = (
        "import sys, dprelease.diagnostics\n"
        "heavy = {'arviz', 'matplotlib', 'torch', 'prefect', 'xarray', 'pandas'}\n"
        "loaded = sorted(heavy & {m.split('.')[0] for m in sys.modules})\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
