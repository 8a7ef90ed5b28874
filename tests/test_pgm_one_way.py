"""The `pgm` generator's one-way shares (`generators/pgm_one_way.py`): empty tails.

Every noisy histogram here is test noise from a seeded generator, so the assertions are
deterministic."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dprelease.encoding import Encoder
from dprelease.generators import make_generator, pgm
from dprelease.generators.pgm_one_way import (
    denoised_shares,
    empty_tails,
    project_to_simplex,
    simplex_shift,
    smoothed_counts,
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
    true = _skewed()
    rng = np.random.default_rng(0)
    kept_before, kept_after, error_before, error_after = [], [], [], []
    for _ in range(40):
        noisy = true + rng.normal(0, STD, CELLS)
        before = denoised_shares(noisy, 8000.0, STD, CELLS, trim_tails=False)
        after = denoised_shares(noisy, 8000.0, STD, CELLS)
        assert before.sum() == pytest.approx(1.0) and after.sum() == pytest.approx(1.0)
        kept_before.append(before[20:].sum())
        kept_after.append(after[20:].sum())
        error_before.append(np.abs(before - true / 8000).sum() / 2)
        error_after.append(np.abs(after - true / 8000).sum() / 2)
    assert np.mean(kept_before) > 0.015
    assert np.mean(kept_after) < 0.3 * np.mean(kept_before)
    assert np.mean(error_after) < 0.95 * np.mean(error_before)


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


def test_pgm_trims_refined_features_only(seeded_noise, monkeypatch):
    """In `pgm`, a feature on refined cells (20,000 rows: 64 cells) has its empty tails
    trimmed, never the target, and on a few hundred rows (the base 16 cells) no column.
    Seeded test noise."""
    flags = []
    original = pgm.denoised_shares

    def recording(*args, trim_tails=True):
        flags.append(trim_tails)
        return original(*args, trim_tails=trim_tails)

    monkeypatch.setattr(pgm, "denoised_shares", recording)
    bounded = {"type": "continuous", "min": 0, "max": 100}
    schema = Schema.model_validate(
        {
            "dataset": "t",
            "max_rows": 100_000,
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "target": "y",
            "columns": {
                "x": bounded,
                "y": bounded,
                "g": {"type": "categorical", "categories": ["a", "b"]},
            },
        }
    )
    encoder = Encoder(schema)
    rng = np.random.default_rng(4)
    for rows, expected in ((20_000, [True, False, False]), (300, [False, False, False])):
        flags.clear()
        x = rng.exponential(2.0, rows).clip(0, 20)
        real = pd.DataFrame({"x": x, "y": x + rng.exponential(1.0, rows), "g": "a"})
        generator = make_generator("pgm", encoder, 1.0, 1e-6)
        fitted = generator.fit(encoder.encode(real), seeded_noise(5))
        assert flags == expected
        refined = [c.size for c in fitted.state.cells]
        assert refined == ([64, 64, 2] if rows == 20_000 else [16, 16, 2])
