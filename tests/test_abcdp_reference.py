"""ABCDP against exact (non-private) rejection ABC with the same kernel, threshold and draws.

Setting: the first 500 rows of the bundled toy table, m = 500, RFF D = 50 with l = 0.12
(encoded), T = 600 prior draws, c = 5, eps_abc = 0.15; the exact reference accepts draws
7, 50, 146, 267, 342 (its distances are used by the tests only). As epsilon grows the DP
release (through `run_abcdp`: DP count, n_hat-normalised MMD, SVT) must approach the
reference, and at a large epsilon it must BE the reference.
"""

from __future__ import annotations

import ast
import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from release_fixtures import ROOT

from dprelease.config import ABCDPConfig
from dprelease.inference.abcdp.mechanism import plan_abcdp, run_abcdp
from dprelease.inference.abcdp.model import load_model
from dprelease.inference.abcdp.reference import exact_acceptance, exact_rejection_abc
from dprelease.inference.abcdp.svt import lemma42_tail, svt_noise_scale
from dprelease.privacy.noise import NoiseSource
from dprelease.schema import load_schema

N_ROWS, C = 500, 5
MODEL = f"{ROOT}/data/models/toy_mixture.py:DirichletUniformMixture"


@pytest.fixture(scope="module")
def toy():
    config = ABCDPConfig(
        model=MODEL,
        n_samples=C,
        threshold=0.15,
        epsilon=1.0,
        n_draws=600,
        n_sim=N_ROWS,
        n_features=50,
        bandwidth=0.12,
        seed=1,
    )
    plan = plan_abcdp(
        load_schema(f"{ROOT}/data/models/toy_mixture.yaml"),
        load_model(MODEL),
        config,
    )
    table = pd.read_csv(f"{ROOT}/data/models/toy_mixture.csv").head(N_ROWS)
    real = plan.simulator.encoder.encode(table)
    exact = exact_rejection_abc(real, plan)
    return plan, real, exact


def _at(plan, epsilon):
    config = plan.config.model_copy(update={"epsilon": epsilon})
    return dataclasses.replace(plan, config=config)


def test_reference_is_rejection_abc_on_the_releases_draws(toy):
    plan, real, exact = toy
    assert len(exact.accepted) == C and exact.n_consumed == exact.accepted[-1] + 1
    assert exact.accepted == exact_acceptance(exact.distances, 0.15, C)
    assert np.all(exact.distances[list(exact.accepted)] <= 0.15)
    # the DP run tests the same theta_t (the plan's public simulation stream)
    dp = run_abcdp(real, _at(plan, 1.0), NoiseSource())
    shared = min(dp.n_consumed, exact.n_consumed)
    np.testing.assert_array_equal(dp.draws[:shared], exact.draws[:shared])


def test_dp_posterior_approaches_exact_abc_as_epsilon_grows(toy, seeded_noise):
    """Mean over 4 seeded noise replicates of d = mean_j |mean DP_j - mean exact_j| (the
    quantity of Park et al. Theorem 4.3). Tolerances: at epsilon 0.3 (b = 0.042, of the
    order of the MMD spread) the DP posterior is near the prior, d >= half the prior's
    distance to the reference (observed 0.071 of 0.083); each tenfold epsilon at least halves
    d (observed 0.024 at epsilon 3); at epsilon 30 (b = 4e-4, 10x below the smallest
    |rho_t - eps_abc| = 0.0038) d <= 0.005 (observed 0: the same draws)."""
    plan, real, exact = toy
    reference = exact.posterior.mean(axis=0)
    prior = plan.simulator.prior(np.random.default_rng(0), 20_000).mean(axis=0)
    prior_distance = float(np.abs(prior - reference).mean())
    gaps = []
    for epsilon in (0.3, 3.0, 30.0):
        values = []
        for replicate in range(4):
            result = run_abcdp(real, _at(plan, epsilon), seeded_noise(replicate))
            posterior = result.draws[list(result.accepted)]
            values.append(float(np.abs(posterior.mean(axis=0) - reference).mean()))
        gaps.append(float(np.mean(values)))
    assert gaps[0] >= 0.5 * prior_distance, (gaps, prior_distance)
    assert gaps[1] <= 0.5 * gaps[0] and gaps[2] <= 0.5 * gaps[1], gaps
    assert gaps[2] <= 0.005, gaps


def test_at_large_epsilon_the_dp_release_is_the_exact_one(toy):
    """OS-entropy noise; the false-alarm probability is bounded here, from the reference's
    distances, below 1e-6. With L the count noise (scale 1/eps_count) and |L| <= kappa:
    |rho~_t - rho_t| <= ||mean phi(D)|| |L| / n_hat <= delta = kappa / (N - kappa) (||phi|| = 1),
    b <= b_max = (c + 1) / (eps_svt (N - kappa)); draw t is decided as by the reference unless
    the SVT noise flips it, with probability <= G_b_max(|rho_t - eps_abc| - delta)
    (Proposition 4.2). If no draw up to the reference's stop flips, the outputs are equal, so
    P(differ) <= exp(-kappa eps_count) + sum_t G_b_max(|rho_t - eps_abc| - delta)."""
    plan, real, exact = toy
    epsilon = 1000.0
    config = _at(plan, epsilon).config
    kappa = 25.0 / config.epsilon_count
    delta = kappa / (N_ROWS - kappa)
    b_max = svt_noise_scale(C, 1.0 / (N_ROWS - kappa), config.epsilon_svt, config.resample)
    margins = np.abs(exact.distances - config.threshold) - delta
    assert margins.min() > 0
    bound = math.exp(-kappa * config.epsilon_count) + float(lemma42_tail(margins, b_max).sum())
    assert bound < 1e-6, bound
    result = run_abcdp(real, _at(plan, epsilon), NoiseSource())
    assert result.accepted == exact.accepted and result.n_consumed == exact.n_consumed


def test_the_reference_is_not_reachable_from_a_release():
    """No module of a release path imports `reference` (static: every import statement)."""
    package = ROOT / "dprelease"
    roots = [package / "release", package / "cli", package / "orchestration"]
    roots += [
        path
        for path in (package / "inference" / "abcdp").glob("*.py")
        if path.name != "reference.py"
    ]
    files = [p for root in roots for p in ([root] if root.is_file() else root.rglob("*.py"))]
    assert len(files) > 10
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            assert not any(name.endswith("abcdp.reference") for name in names), path
