"""MLP weights: the toy example, DP-SGD accounting, public calibration, randomness."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dprelease.errors import InputError
from dprelease.privacy.calibration import dpsgd_epsilon
from dprelease.weights import estimate, plan
from dprelease.weights.toy import triangle_example, triangle_mass

EPSILON, DELTA = 8.0, 1e-5


@pytest.fixture(scope="module")
def toy():
    return triangle_example(2000, 2000, np.random.default_rng(7))


@pytest.fixture(scope="module")
def trained(toy):
    real, synthetic = toy
    return {
        "mlp": estimate("mlp", real, synthetic, seed=0),
        "dp_mlp": estimate("dp_mlp", real, synthetic, epsilon=EPSILON, delta=DELTA, seed=0),
    }


def test_neural_weights_find_the_triangle(toy, trained):
    _, synthetic = toy
    mass = {name: triangle_mass(est.weights, synthetic) for name, est in trained.items()}
    assert mass["mlp"] > 0.9
    assert mass["dp_mlp"] > 0.9
    assert abs(mass["dp_mlp"] - mass["mlp"]) < 0.05


def test_dp_mlp_accounting(trained):
    d = trained["dp_mlp"].details
    sigma, q, steps = d["noise_multiplier"], d["sample_rate"], d["steps"]
    # public schedule: q = L / (2 N_G), T = ceil(epochs / q)
    assert q == 256 / 4000
    assert steps == math.ceil(20 / q)
    # reported epsilon: within 1% of the target, never above; it is what is spent
    assert 0.99 * EPSILON <= d["epsilon_reported"] <= EPSILON
    assert trained["dp_mlp"].epsilon_spent == d["epsilon_reported"]
    assert trained["dp_mlp"].delta_spent == DELTA
    assert d["epsilon_reported"] == dpsgd_epsilon(sigma, DELTA, q, steps)
    # Opacus ran exactly the calibrated mechanism: T steps of (sigma, q), C and L as planned
    assert d["opacus_history"] == [[sigma, q, steps]]
    assert d["opacus_noise_multiplier"] == sigma
    assert d["opacus_sample_rate"] == q
    assert d["opacus_max_grad_norm"] == d["max_grad_norm"] == 1.0
    assert d["opacus_expected_batch_size"] == d["expected_lot_size"] == 256
    assert d["opacus_epsilon"] == pytest.approx(d["epsilon_reported"], rel=1e-9)
    json.dumps(d)


def test_calibration_is_public_and_planned_before_training(toy, seeded_noise):
    real, synthetic = toy
    options = {"epsilon": 1.0, "delta": DELTA, "steps": 25, "sample_rate": 0.05}
    expected = plan("dp_mlp", n_features=2, n_synthetic=len(synthetic), **options)
    details = [
        estimate("dp_mlp", r, synthetic, noise=seeded_noise(0), **options).details
        for r in (real, real[:300])
    ]
    assert details[0] == details[1]  # nothing depends on the real rows
    assert {k: details[0][k] for k in expected} == expected
    assert expected["steps"] == 25 and expected["sample_rate"] == 0.05


def test_dp_noise_never_follows_the_user_seed(toy):
    real, synthetic = toy
    runs = [
        estimate("dp_mlp", real, synthetic, epsilon=1.0, delta=DELTA, steps=20, seed=3)
        for _ in range(2)
    ]
    assert not np.allclose(runs[0].log_weights, runs[1].log_weights)
    # the non-private benchmark is reproducible from its seed
    mlp = [estimate("mlp", real, synthetic, steps=20, seed=3) for _ in range(2)]
    np.testing.assert_array_equal(mlp[0].log_weights, mlp[1].log_weights)
    assert (mlp[0].epsilon_spent, mlp[0].details["non_private"]) == (0.0, True)


def test_refusals(toy):
    real, synthetic = toy
    with pytest.raises(InputError, match="positive finite epsilon"):
        estimate("dp_mlp", real, synthetic, delta=DELTA)
    with pytest.raises(InputError, match="delta"):
        estimate("dp_mlp", real, synthetic, epsilon=1.0)
    with pytest.raises(InputError, match="sample_rate"):
        plan("dp_mlp", 1.0, DELTA, 2, 2000, sample_rate=1.5)
    with pytest.raises(InputError, match=r"outside \[0, 1\]"):
        estimate("dp_mlp", real * 2, synthetic, epsilon=1.0, delta=DELTA, steps=5)
    with pytest.raises(InputError, match="unexpected keyword"):
        plan("mlp", None, None, 2, 2000, max_grad_norm=1.0)


@pytest.mark.parametrize("secure", [False, True])
def test_dp_mlp_records_the_noise_it_really_drew(toy, secure):
    """DP-SGD noise comes from Opacus' optimizer (secure mode on request), never from the
    NoiseSource (OpenDP in secure mode): the details say so."""
    from opacus.optimizers import DPOptimizer

    from dprelease.privacy.noise import NoiseSource

    real, synthetic = toy
    modes, draws = [], []
    original = DPOptimizer.__init__

    def spy(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        modes.append(kwargs["secure_mode"])
        original(self, *args, **kwargs)

    class Recording(NoiseSource):
        def add_gaussian(self, values, sigma, *, counts=False):  # noqa: ANN001, ANN201
            draws.append(np.shape(values))
            return super().add_gaussian(values, sigma, counts=counts)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DPOptimizer, "__init__", spy)
        d = estimate(
            "dp_mlp",
            real,
            synthetic,
            epsilon=1.0,
            delta=DELTA,
            steps=3,
            sample_rate=0.05,
            noise=Recording(secure=secure),
        ).details
    assert modes == [secure] and draws == []
    mode = "secure-mode " if secure else ""
    assert d["noise_source"] == (
        f"opacus DPOptimizer {mode}gaussian, torch generator seeded from OS entropy"
    )
    assert "opendp" not in d["noise_source"] and d["secure_noise"] is secure
