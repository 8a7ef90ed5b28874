"""The chunked logistic fit is certified like the in-memory one and gives the same weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dprelease import weights
from dprelease.datasets import census_like
from dprelease.encoding import Encoder
from dprelease.io.stream import StreamingInput, load_validated
from dprelease.schema import load_schema
from dprelease.weights.logistic.solver import fit_coefficients, gradient_bound, objective_gradient
from dprelease.weights.logistic.stream import (
    block_sums,
    estimate_streaming,
    fit_coefficients_streaming,
)

SCHEMA = load_schema(Path(__file__).parent.parent / "data" / "census.yaml")
ENCODER = Encoder(SCHEMA)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    path = tmp_path_factory.mktemp("streaming-weights") / "census.parquet"
    census_like(3000, seed=11).to_parquet(path, index=False)
    real = ENCODER.encode(load_validated(path, SCHEMA))
    rng = np.random.default_rng(2)
    synthetic = ENCODER.encode(census_like(800, seed=12).sample(frac=1.0, random_state=1))
    synthetic[:, ENCODER.columns[0].value_index] = rng.random(800)  # age: a real difference
    return path, real, synthetic


def test_block_sums_are_the_exact_derivatives(tables):
    _, real, synthetic = tables
    beta = np.random.default_rng(0).normal(size=ENCODER.width + 1) * 0.1
    halves = [(real[:1000], 1.0, 1.0), (real[1000:], 1.0, 1.0), (synthetic, -1.0, 1.0)]
    value, gradient, _ = block_sums(halves, beta, 0.03, 800.0)
    x = np.vstack([np.c_[real, np.ones(len(real))], np.c_[synthetic, np.ones(len(synthetic))]])
    signs = np.r_[np.ones(len(real)), -np.ones(len(synthetic))]
    np.testing.assert_allclose(
        gradient, objective_gradient(x, signs, beta, 0.03, 800.0), rtol=1e-12, atol=1e-14
    )
    assert value > 0


def test_streamed_fit_meets_the_certificate_and_matches_in_memory(tables):
    path, real, synthetic = tables
    lam, n0 = 0.02, float(len(synthetic))
    g_max = gradient_bound(ENCODER.width, n0)
    source = StreamingInput(str(path), SCHEMA, chunk_rows=700)
    streamed = fit_coefficients_streaming(
        lambda: source.encoded(ENCODER), synthetic, lam, n0, g_max
    )
    _, gradient, _ = block_sums([(real, 1.0, 1.0), (synthetic, -1.0, 1.0)], streamed, lam, n0)
    assert np.linalg.norm(gradient) <= g_max
    in_memory = fit_coefficients(real, synthetic, lam, n0, g_max)
    # Both are within g_max / lam of the exact minimiser (strong convexity).
    assert np.linalg.norm(streamed - in_memory) <= 2 * g_max / lam


@pytest.mark.parametrize("method", ["beta_debiased", "weight_noised"])
def test_streamed_estimate_equals_the_in_memory_estimate(tables, method, seeded_noise):
    path, real, synthetic = tables
    source = StreamingInput(str(path), SCHEMA, chunk_rows=1000)
    rows = sum(len(chunk) for chunk in source.tables())  # the validation pass's row count
    budget = {"epsilon": 1.0, "delta": 1e-5}
    streamed = estimate_streaming(
        method, source, ENCODER, synthetic, noise=seeded_noise(4), rows=rows, **budget
    )
    in_memory = weights.estimate(method, real, synthetic, noise=seeded_noise(4), **budget)
    np.testing.assert_allclose(streamed.log_weights, in_memory.log_weights, atol=1e-6)
    assert (streamed.epsilon_spent, streamed.delta_spent) == (
        in_memory.epsilon_spent,
        in_memory.delta_spent,
    )
    streamed_details = {k: v for k, v in streamed.details.items() if k != "real_rows"}
    # The noise gate's statistic is computed from coefficients equal to solver precision.
    gates = [d.pop("noise_gate", {}) for d in (streamed_details, dict(in_memory.details))]
    in_memory_details = {k: v for k, v in in_memory.details.items() if k != "noise_gate"}
    assert streamed_details == in_memory_details
    assert gates[0].keys() == gates[1].keys()
    for key in gates[0]:
        assert gates[0][key] == pytest.approx(gates[1][key], rel=1e-6)


def test_methods_without_a_streaming_fit_are_refused(tables, seeded_noise):
    path, _, synthetic = tables
    with pytest.raises(ValueError, match="no streaming fit"):
        estimate_streaming(
            "dp_mlp",
            StreamingInput(str(path), SCHEMA),
            ENCODER,
            synthetic,
            epsilon=1.0,
            delta=1e-5,
            noise=seeded_noise(0),
        )
