"""The weights package: method lists, free methods, light import."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dprelease.errors import InputError
from dprelease.weights import (
    METHODS,
    NON_PRIVATE_METHODS,
    PRIVATE_METHODS,
    WeightEstimate,
    estimate,
    plan,
)


class LogitDiscriminator:
    """Test double of a DP GAN discriminator exposing logits."""

    def logit(self, x: np.ndarray) -> np.ndarray:
        return 3.0 * x[:, 0] - 1.0


def test_method_lists():
    assert PRIVATE_METHODS == (
        "beta_noised",
        "beta_debiased",
        "weight_noised",
        "dp_mlp",
        "calibration",
    )
    assert NON_PRIVATE_METHODS == ("logreg", "mlp")
    assert set(METHODS) == {*PRIVATE_METHODS, *NON_PRIVATE_METHODS, "none", "discriminator"}


def test_none_is_uniform_and_free():
    synthetic = np.random.default_rng(0).uniform(size=(10, 3))
    est = estimate("none", None, synthetic, epsilon=1.0)
    assert isinstance(est, WeightEstimate)
    np.testing.assert_array_equal(est.log_weights, np.zeros(10))
    np.testing.assert_allclose(est.weights, np.ones(10))
    assert (est.epsilon_spent, est.delta_spent) == (0.0, 0.0)


def test_discriminator_weights_are_its_logits():
    synthetic = np.random.default_rng(0).uniform(size=(50, 2))
    est = estimate("discriminator", None, synthetic, discriminator=LogitDiscriminator())
    np.testing.assert_allclose(est.log_weights, 3.0 * synthetic[:, 0] - 1.0)
    assert (est.epsilon_spent, est.delta_spent) == (0.0, 0.0)
    assert est.details["post_processing"] is True

    def probability(x):  # a sigmoid discriminator: P(real | x)
        return 1 / (1 + np.exp(-(3.0 * x[:, 0] - 1.0)))

    same = estimate("discriminator", None, synthetic, discriminator=probability)
    np.testing.assert_allclose(same.log_weights, est.log_weights, atol=1e-9)
    assert same.details["discriminator_output"] == "probability"
    with pytest.raises(InputError, match="exactly 0 or 1"):
        estimate("discriminator", None, synthetic, discriminator=lambda x: np.ones(len(x)))
    with pytest.raises(InputError, match="needs option discriminator"):
        estimate("discriminator", None, synthetic)


def test_plan_of_free_and_non_private_methods_spends_nothing():
    for method in ("none", "logreg", "mlp"):
        p = plan(method, 1.0, 1e-5, 3, 100)
        assert (p["epsilon_spent"], p["delta_spent"]) == (0.0, 0.0)


def test_import_does_not_load_heavy_dependencies():
    code = (
        "import sys, dprelease.weights; "
        "print([m for m in ('torch', 'opacus', 'sklearn', 'prefect') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_discriminator_weights_are_tempered_until_psis_accepts_them():
    """A discriminator with a heavy-tailed logit (k-hat far above 0.7, as
    a DP-GAN's at epsilon 1) gives weights the release's PSIS gate accepts (tempered, or flat
    as a last resort), so the release does not stop after its spend."""
    from dprelease.diagnostics import diagnose_weights
    from dprelease.diagnostics.psis.smoothing import psis

    rows = np.random.default_rng(0).uniform(size=(2000, 2))

    def heavy(x):  # noqa: ANN001, ANN202
        return 40.0 * x[:, 0] ** 8  # a few rows near x = 1 carry all the weight

    assert psis(heavy(rows)).verdict == "unreliable"
    est = estimate(
        "discriminator", None, rows, discriminator=type("D", (), {"logit": staticmethod(heavy)})()
    )
    assert diagnose_weights(est.log_weights).verdict != "unreliable"
    assert 0 <= est.details["temper"] < 1
    assert np.ptp(est.log_weights) > 0 or est.details["flat_reason"]
