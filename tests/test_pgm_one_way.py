"""The `pgm` generator's one-way shares (`generators/pgm/one_way.py`): empty tails, stray
runs.

Every noisy histogram here is test noise from a seeded generator, so the assertions are
deterministic."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dprelease.encoding import Encoder
from dprelease.generators import make_generator
from dprelease.generators.pgm import generator as pgm
from dprelease.generators.pgm.one_way import (
    denoised_shares,
    empty_tails,
    project_to_simplex,
    simplex_shift,
    smoothed_counts,
    stray_runs,
)
from dprelease.schema import Schema

STD = 24.0  # one-way noise SD of a 9k-row table's default release at epsilon 1
CELLS = 64


def _skewed() -> np.ndarray:
    """A sales-like column: 8,000 rows in the first 20 of 64 cells, the rest empty."""
    body = 8000 * np.exp(-np.arange(20) / 2.5)
    return np.concatenate([body / body.sum() * 8000, np.zeros(CELLS - 20)])


def test_projection_shift_is_the_one_the_projection_subtracts():
    rng = np.random.default_rng(1)
    noisy = rng.normal(50, 30, 40)
    shift = simplex_shift(noisy, 1500.0)
    projected = project_to_simplex(noisy, 1500.0)
    assert projected.sum() == pytest.approx(1500.0)
    assert np.allclose(projected, np.clip(noisy - shift, 0, None))


def test_a_long_empty_tail_loses_the_noise_the_projection_kept():
    """Without trimming, the noise lifts about 1.8 % of the rows into the 44 empty cells
    (far from every real row: a skewed column's mean moves by much more than that); with
    it, a quarter of that is left, and the shares are closer to the truth (40 seeded
    histograms)."""
    kept_before, kept_after, error_before, error_after = _with_and_without(
        _skewed(), 20, {"trim_tails": False}, {}, seed=0
    )
    assert np.mean(kept_before) > 0.015
    assert np.mean(kept_after) < 0.3 * np.mean(kept_before)
    assert np.mean(error_after) < 0.95 * np.mean(error_before)


def _with_and_without(
    true: np.ndarray, far: int, before: dict, after: dict, *, seed: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    """40 seeded noisy histograms of `true`, denoised with the options `before` and `after`:
    each one's shares from cell `far` on, and its TVD from the truth."""
    rng = np.random.default_rng(seed)
    total = float(true.sum())
    far_before, far_after, error_before, error_after = [], [], [], []
    for _ in range(40):
        noisy = true + rng.normal(0, STD, true.size)
        shares = [
            denoised_shares(noisy, total, STD, true.size, **options) for options in (before, after)
        ]
        assert all(s.sum() == pytest.approx(1.0) for s in shares)
        far_before.append(shares[0][far:].sum())
        far_after.append(shares[1][far:].sum())
        error_before.append(np.abs(shares[0] - true / total).sum() / 2)
        error_after.append(np.abs(shares[1] - true / total).sum() / 2)
    return far_before, far_after, error_before, error_after


def test_real_rows_in_the_tail_and_short_runs_are_kept():
    """A tail holding a few rows per cell over many cells is not trimmed (its noisy sum is
    far above the noise), nor is a column whose cells are all well above the noise, nor a
    run of a few empty cells (keeping them costs less than the rows they might hold)."""
    rng = np.random.default_rng(2)
    spread = np.full(CELLS, 8000.0 / CELLS)
    short = np.concatenate([np.full(60, 8000.0 / 60), np.zeros(4)])
    tail = _skewed()
    tail[20:] = 15.0  # 660 rows, under one noise SD per cell
    for true in (spread, short, tail):
        for _ in range(20):
            noisy = true + rng.normal(0, STD, CELLS)
            shift = simplex_shift(smoothed_counts(noisy, STD), 8000.0)
            assert empty_tails(noisy, STD, shift) == (0, 0)


def test_pure_noise_is_not_trimmed_to_nothing():
    """Where both runs together would cover every cell (no row stands out), nothing is
    trimmed, and a histogram of one cell or without noise is never trimmed."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        noisy = rng.normal(0, STD, 16)
        low, high = empty_tails(noisy, STD, simplex_shift(noisy, 100.0))
        assert low + high < 16
    assert empty_tails(np.array([5.0]), STD, 0.0) == (0, 0)
    assert empty_tails(np.array([100.0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 0.0, 0.0) == (0, 0)


def _count() -> np.ndarray:
    """A count target's histogram: 4,000 rows in the first 6 of 34 cells (a zero, then
    decaying), the other 28 empty."""
    return np.concatenate([[1500.0, 1400, 700, 280, 90, 30], np.zeros(28)])


def test_stray_runs_far_from_a_counts_body_are_dropped():
    """The noise leaves about 1.7 % of a count's rows in cells far beyond every real row;
    with the stray runs dropped a seventh of that is left (runs joined to the body stay),
    and the one-way shares are closer to the truth (40 seeded histograms)."""
    far_before, far_after, error_before, error_after = _with_and_without(
        _count(), 8, {"trim_tails": False}, {"trim_tails": False, "drop_strays": True}, seed=5
    )
    assert np.mean(far_before) > 0.01
    assert np.mean(far_after) < 0.2 * np.mean(far_before)
    assert np.mean(error_after) < 0.8 * np.mean(error_before)


def test_a_real_cluster_apart_from_the_body_is_not_a_stray():
    """A separated cluster holding well over z noise SDs of rows (a heap at a top code) is
    kept, a pair of cells below that dropped (z = 3.02 for 8 cells at `STRAY_LEVEL` 1 %);
    a single run (the body alone) or no noise drops nothing."""
    shares = np.array([0.5, 0.3, 0.0, 0.0, 0.1, 0.0, 0.05, 0.05])
    noisy = np.array([500.0, 300.0, -10.0, 5.0, 100.0, -3.0, 30.0, 30.0])
    assert stray_runs(shares, noisy, 20.0) == [(6, 8)]  # 60 < 3.02 x 20 x sqrt(2) = 85; 100 > 60
    assert stray_runs(shares, noisy, 10.0) == []  # 60 > 43, 100 > 30: both real
    assert stray_runs(np.array([0.5, 0.5, 0.0]), np.array([50.0, 50.0, 1.0]), 20.0) == []
    assert stray_runs(shares, noisy, 0.0) == []


def _schema(target: dict) -> Schema:
    bounded = {"type": "continuous", "min": 0, "max": 100}
    return Schema.model_validate(
        {
            "dataset": "t",
            "max_rows": 100_000,
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "target": "y",
            "columns": {
                "x": bounded,
                "y": target,
                "g": {"type": "categorical", "categories": ["a", "b"]},
            },
        }
    )


def test_pgm_trims_refined_features_only(seeded_noise, monkeypatch):
    """In `pgm`, a feature on refined cells (20,000 rows: 64 cells) has its empty tails
    trimmed, never the target, and on a few hundred rows (the base 16 cells) no column;
    stray runs are dropped from an integer target wider than its cells only (a count bounded
    at 200, not one of 0-9 with a cell per value, nor a continuous target). Seeded test
    noise."""
    trims, strays = [], []
    original = pgm.denoised_shares

    def recording(*args, trim_tails=True, drop_strays=False):
        trims.append(trim_tails)
        strays.append(drop_strays)
        return original(*args, trim_tails=trim_tails, drop_strays=drop_strays)

    monkeypatch.setattr(pgm, "denoised_shares", recording)
    encoder = Encoder(_schema({"type": "continuous", "min": 0, "max": 100}))
    rng = np.random.default_rng(4)
    for rows, expected in ((20_000, [True, False, False]), (300, [False, False, False])):
        trims.clear()
        strays.clear()
        x = rng.exponential(2.0, rows).clip(0, 20)
        real = pd.DataFrame({"x": x, "y": x + rng.exponential(1.0, rows), "g": "a"})
        generator = make_generator("pgm", encoder, 1.0, 1e-6)
        fitted = generator.fit(encoder.encode(real), seeded_noise(5))
        assert trims == expected
        assert strays == [False, False, False]
        refined = [c.size for c in fitted.state.cells]
        assert refined == ([64, 64, 2] if rows == 20_000 else [16, 16, 2])
    for top, expected in ((200, [False, True, False]), (9, [False, False, False])):
        counts = Encoder(_schema({"type": "integer", "min": 0, "max": top}))
        strays.clear()
        real = pd.DataFrame(
            {
                "x": rng.exponential(2.0, 300).clip(0, 20),
                "y": rng.geometric(0.5, 300).clip(1, 10) - 1,
                "g": "a",
            }
        )
        make_generator("pgm", counts, 1.0, 1e-6).fit(counts.encode(real), seeded_noise(6))
        assert strays == expected
