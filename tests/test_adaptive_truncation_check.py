"""The posterior predictive model check of an adaptive-truncation release
(`dprelease.inference.truncation.check`; docs/adaptive-truncation.md 6.6).

All noise is seeded (test noise, `seeded_noise`), so each assertion is deterministic: it cannot
fail by chance, and it fails if the check's statistics or the replicates break.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dprelease.inference.truncation.check import ALARM, censored_moments, model_check
from dprelease.inference.truncation.engines import NormalPrior
from dprelease.inference.truncation.online import laplace_release
from dprelease.inference.truncation.oracle import grid_posterior

POSITIONS = (10.0, 15.0, 20.0, 30.0, 45.0)  # public interval centres, 300 releases each
EPSILON = 2.0


def _transcript(values: np.ndarray, noise) -> pd.DataFrame:  # noqa: ANN001
    centres = np.repeat(POSITIONS, len(values) // len(POSITIONS))
    lo, hi = centres - 0.5, centres + 0.5
    y = np.array(
        [laplace_release(x, a, b, EPSILON, noise) for x, a, b in zip(values, lo, hi, strict=True)]
    ).ravel()
    return pd.DataFrame(
        {
            "t": np.arange(1, len(y) + 1),
            "l": lo,
            "r": hi,
            "noise_scale": (hi - lo) / EPSILON,
            "y": y,
        }
    )


def _posterior_draws(transcript: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """4000 draws of the exact grid posterior (flat-ish prior) of the normal model."""
    grid = grid_posterior(
        transcript,
        NormalPrior(25.0, 1e4, 0.5, 0.5),
        np.linspace(5, 45, 41),
        np.linspace(np.log(2.0), np.log(60.0), 41),
    )
    rng = np.random.default_rng(0)
    cells = rng.choice(grid.mass.size, size=4000, p=grid.mass.ravel())
    i, j = np.unravel_index(cells, grid.mass.shape)
    return grid.mu_grid[i], np.exp(grid.log_sigma_grid[j])


def test_censored_moments_match_simulation() -> None:
    x = np.random.default_rng(1).normal(3.0, 2.0, 400_000)
    mean, var = censored_moments(np.array([1.0]), np.array([4.5]), 3.0, 2.0)
    clamped = np.clip(x, 1.0, 4.5)
    assert mean[0] == pytest.approx(clamped.mean(), abs=3e-3)
    assert var[0] == pytest.approx(clamped.var(), rel=3e-3)


def test_check_passes_a_normal_column_and_warns_on_a_lumpy_one(seeded_noise) -> None:
    rng = np.random.default_rng(2)
    normal = rng.normal(22.0, 12.0, 1500)
    # 60 % of the rows at 12 (as years of education), the rest around 30: a normal model
    # cannot match the share above 15 and above 20 (both 0.4) with the shares above 10 and 30.
    lumpy = np.where(rng.random(1500) < 0.6, 12.0, rng.normal(30.0, 3.0, 1500))
    fitted = {}
    for name, values in (("normal", normal), ("lumpy", lumpy)):
        transcript = _transcript(values, seeded_noise(3))
        fitted[name] = model_check(transcript, *_posterior_draws(transcript), -0.78, -0.72)
    # Seeded p-values: normal 0.47 (location 0.23), lumpy 8e-16.
    assert fitted["normal"].fits and fitted["normal"].p_value > 0.1
    assert not fitted["lumpy"].fits and fitted["lumpy"].p_value < ALARM
    verdict = fitted["lumpy"].verdict
    assert verdict.startswith("WARNING: the normal model does not describe this column")
    assert "midpoint of the column's 23 % and 77 % quantiles" in verdict
    assert len(fitted["lumpy"].bins) == 5
