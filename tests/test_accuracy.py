"""The accuracy statement of a synthetic release: expected error of a noisy marginal, the
grade, the verdict (dprelease.diagnostics.accuracy)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dprelease.diagnostics.accuracy import (
    CAUTION,
    NOT_USABLE,
    USABLE,
    expected_tvd,
    grade,
    verdict,
)
from dprelease.generators.base import Measurement


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_expected_tvd_matches_simulated_noise(kind):
    """The formula k E|Z| / (2 N) against the TVD of simulated noisy counts (no clipping:
    every cell holds many rows). Seeded: deterministic."""
    rng = np.random.default_rng(0)
    counts = np.full(20, 500.0)  # N = 10,000 rows in 20 cells
    std = 30.0
    if kind == "laplace":
        noisy = counts + rng.laplace(0.0, std / math.sqrt(2.0), (4000, 20))
    else:
        noisy = counts + rng.normal(0.0, std, (4000, 20))
    simulated = 0.5 * np.abs(noisy / noisy.sum(axis=1, keepdims=True) - counts / 1e4).sum(axis=1)
    stated = expected_tvd(Measurement(("a",), 20, kind, std, 10_000.0))
    assert stated == pytest.approx(simulated.mean(), rel=0.05)


def test_expected_tvd_is_capped_and_a_non_positive_total_means_noise_only():
    assert expected_tvd(Measurement(("a",), 32, "laplace", 55.0, 569.0)) == 1.0
    assert expected_tvd(Measurement(("a",), 2, "gaussian", 1.0, -3.0)) == 1.0


def one_way(tvd_std: float, total: float = 10_000.0) -> Measurement:
    return Measurement(("a",), 10, "gaussian", tvd_std, total)


def test_grade_from_the_medians():
    def std_for(tvd: float) -> float:  # the Gaussian std giving this expected TVD (10 cells)
        return tvd * 2 * 10_000.0 / (10 * math.sqrt(2 / math.pi))

    assert grade([one_way(std_for(0.01)), one_way(std_for(0.04))])["grade"] == "good"
    assert grade([one_way(std_for(0.10))])["grade"] == "fair"
    assert grade([one_way(std_for(0.40))])["grade"] == "poor"
    pair = Measurement(("a", "b"), 10, "gaussian", std_for(0.5), 10_000.0)
    assert grade([one_way(std_for(0.01)), pair])["grade"] == "poor"  # multi-way median 0.5
    assert grade([])["grade"] == "not stated"


def test_the_demo_release_is_graded_poor():
    """The issue's demo: 31 columns at epsilon 0.8 with the marginals generator (Laplace scale
    31 / 0.8 on 32 cells per column) on a table of 569 rows: the noise dominates."""
    std = 31 / 0.8 * math.sqrt(2)
    columns = [Measurement((f"c{i}",), 32, "laplace", std, 569.0) for i in range(31)]
    assert grade(columns)["grade"] == "poor"


ROWS = {"n_synthetic": 20_000, "distinct": 20_000, "collapsed": False, "missing_categories": {}}


def test_verdict_is_usable_only_when_everything_holds():
    good = grade([one_way(1.0)])
    assert verdict(good, ROWS, "good", 1.1) == {"verdict": USABLE, "reasons": []}
    assert verdict(good, ROWS, "unreliable", None)["verdict"] == CAUTION
    # the census deployment of issue 18: weights 870 times the noise level from their target
    far = verdict(good, ROWS, "good", 870.0)
    assert far["verdict"] == CAUTION and "870 times the noise level" in far["reasons"][0]
    collapsed = {**ROWS, "distinct": 849, "collapsed": True}
    assert verdict(good, collapsed, "good", None)["verdict"] == NOT_USABLE
    noisy = grade([one_way(1e5)])
    judged = verdict(noisy, ROWS, "good", None)
    assert judged["verdict"] == NOT_USABLE and "noise dominates" in judged["reasons"][0]
    assert verdict(grade([]), ROWS, "good", None)["verdict"] == CAUTION
