"""Adaptive truncation engines against the exact grid posterior (docs/adaptive-truncation.md C4) and
utility (C5).

Data are N(50, 10) draws (the paper's setting, docs/adaptive-truncation.md 5.1) from fixed seeds;
the DP noise is the explicit `seeded_noise` test source; the SMC generator has a fixed seed. The
full C5 table (20 repetitions per epsilon) and C4 at the spec's larger settings ((1, 1000, 1000) and
(5, 1000, 1000), adaptive and fixed) are in `benchmarks/adaptive_truncation.py`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dprelease.errors import InputError
from dprelease.inference.truncation.design import design_truncation
from dprelease.inference.truncation.engines import NormalPrior
from dprelease.inference.truncation.online import (
    AdaptiveTruncationResult,
    check_engine,
    run_adaptive_truncation,
)
from dprelease.inference.truncation.oracle import oracle_agreement, passes_oracle_check

TRUTH_MU, TRUTH_SIGMA = 50.0, math.sqrt(10.0)
PAPER_PRIOR = NormalPrior()  # mu ~ N(0, 1e4), sigma^2 ~ IG(1, 1)
BOUNDS = (-1000.0, 1000.0)  # wide public bounds: the paper has none
FIXED = (TRUTH_MU - 10 * TRUTH_SIGMA, TRUTH_MU + 10 * TRUTH_SIGMA)  # paper's oracle interval


def _run(
    seeded_noise,
    epsilon: float,
    n: int,
    particles: int,
    seed: int,
    engine: str = "ibis",
    fixed: bool = False,
    score: str = "mu",
) -> AdaptiveTruncationResult:
    values = np.random.default_rng(100 + seed).normal(TRUTH_MU, TRUTH_SIGMA, n)
    return run_adaptive_truncation(
        values,
        n,
        design=design_truncation(epsilon=epsilon, score=score),
        prior=PAPER_PRIOR,
        bounds=BOUNDS,
        epsilon=epsilon,
        noise=seeded_noise(seed),
        rng=np.random.default_rng(seed),
        engine=engine,
        n_particles=particles,
        fixed_interval=FIXED if fixed else None,
    )


def _agreement(result: AdaptiveTruncationResult) -> dict[str, float]:
    return oracle_agreement(result.transcript, result.posterior, PAPER_PRIOR)


@pytest.mark.parametrize(
    "epsilon, n, particles, fixed, score",
    [
        (1.0, 300, 500, False, "mu"),
        (1.0, 300, 500, True, "mu"),
        (5.0, 600, 600, False, "mu"),
        (1.0, 300, 500, False, "det"),
    ],
)
def test_c4_ibis_matches_the_grid_posterior(
    seeded_noise, epsilon: float, n: int, particles: int, fixed: bool, score: str
) -> None:
    result = _run(seeded_noise, epsilon, n, particles, seed=3, fixed=fixed, score=score)
    assert len(result.transcript) == n
    stats = _agreement(result)
    assert passes_oracle_check(stats), stats


@pytest.mark.slow
def test_c4_latent_smc_fails_the_oracle_check_and_releases_refuse_it(seeded_noise) -> None:
    # Paper setting at (eps, n, N) = (1, 300, 500), seeds 1-5, deviation from the oracle in
    # posterior sds of log sigma: latent SMC 0.23, 0.22, 0.31, 0.15, 0.11; IBIS 0.03, 0.01,
    # 0.09, 0.05, 0.11 on the same data and noise. Seed 3 is outside C4's 0.25 tolerance.
    stats = _agreement(_run(seeded_noise, 1.0, 300, 500, seed=3, engine="latent_smc"))
    assert not passes_oracle_check(stats), stats
    with pytest.raises(InputError, match="'latent_smc' is not validated for the normal family"):
        check_engine("normal", "latent_smc")
    check_engine("normal", "ibis")


def test_c5_adaptive_beats_the_fixed_interval_at_epsilon_1(seeded_noise) -> None:
    errors = {False: [], True: []}
    for seed in range(3):
        for fixed in (False, True):
            result = _run(seeded_noise, 1.0, 300, 300, seed=10 + seed, fixed=fixed)
            errors[fixed].append(abs(result.posterior.mean()[0] - TRUTH_MU))
    # Paper setting at n = 300: adaptive error ~0.45, fixed ~2.7 (docs/adaptive-truncation.md 5.2
    # scaled by sqrt(n)).
    assert np.mean(errors[False]) < 0.5 * np.mean(errors[True]), errors


def test_transcript_and_trajectory_are_complete(seeded_noise) -> None:
    result = _run(seeded_noise, 2.0, 120, 200, seed=4)
    transcript = result.transcript
    assert list(transcript.columns) == [
        "t",
        "l",
        "r",
        "noise_scale",
        "y",
        "thompson_mu",
        "thompson_sigma",
    ]
    assert transcript["t"].tolist() == list(range(1, 121))
    np.testing.assert_allclose(transcript["noise_scale"], (transcript.r - transcript.l) / 2.0)
    assert (transcript.l >= BOUNDS[0]).all() and (transcript.r <= BOUNDS[1]).all()
    # Adaptive: the interval is m + [a*, b*] c for the recorded Thompson draw (inside bounds).
    design = result.design
    np.testing.assert_allclose(
        transcript.l, transcript.thompson_mu + design.a * transcript.thompson_sigma
    )
    trajectory = result.trajectory
    assert len(trajectory) == 120
    assert (trajectory.mu_q05 <= trajectory.mu_mean).all()
    assert (trajectory.mu_mean <= trajectory.mu_q95).all()
    assert trajectory.ess.between(1, 200 + 1e-9).all()
    draws = result.posterior_draws(np.random.default_rng(0), 500)
    assert draws.shape == (500, 2) and (draws.sigma > 0).all()
