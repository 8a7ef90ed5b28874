"""A release whose generator and weights are both Gaussian mechanisms is one zCDP entry: the
release's rho is split between them, and the ledger charges exactly (epsilon, delta)
(`release.synthetic.plan`, `privacy.zcdp`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dprelease.config import SyntheticConfig
from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.calibration import gaussian_sigma
from dprelease.privacy.mechanisms import ZCDP, Gaussian
from dprelease.privacy.zcdp import composed_in_zcdp, rho_of, zcdp_epsilon, zcdp_rho
from dprelease.release.synthetic.plan import DEFAULT_ZCDP_WEIGHTS_FRACTION, plan_release
from dprelease.schema import load_schema
from dprelease.weights.calibration.method import CalibrationSettings, _gaussian_scale

SCHEMA = load_schema(Path(__file__).parent.parent / "data" / "census.yaml")


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 1e-6), (0.3, 1e-5), (4.0, 1e-9)])
def test_zcdp_epsilon_inverts_zcdp_rho(epsilon, delta):
    rho, spent = zcdp_rho(epsilon, delta)
    assert spent <= epsilon
    assert zcdp_epsilon(rho, delta) == pytest.approx(spent, rel=1e-9)
    assert zcdp_epsilon(1.01 * rho, delta) > epsilon  # rho is the largest that fits


def test_composed_entry_adds_the_rhos_and_records_their_conversion():
    gaussian = Gaussian(sigma=10.0, l2_sensitivity=2.0)
    assert rho_of(gaussian) == pytest.approx(4.0 / 200.0)
    parts = [
        PlannedSpend("a", zcdp_epsilon(0.01, 1e-6), 1e-6, description=ZCDP(0.01)),
        PlannedSpend("b", zcdp_epsilon(0.02, 1e-6), 1e-6, description=gaussian),
    ]
    entry = composed_in_zcdp(parts, 1e-6)
    assert entry.mechanism == "a + b"
    assert entry.description == ZCDP(0.03)
    assert entry.epsilon == pytest.approx(zcdp_epsilon(0.03, 1e-6))
    assert entry.epsilon < 0.8 * (parts[0].epsilon + parts[1].epsilon)  # than adding them
    assert [c["rho"] for c in entry.params["components"]] == pytest.approx([0.01, 0.02])
    with pytest.raises(ValueError, match="not accounted in zCDP"):
        composed_in_zcdp([PlannedSpend("c", 0.1, 0.0)], 1e-6)


def test_default_release_is_one_zcdp_entry_that_spends_exactly_its_budget():
    plan = plan_release(SCHEMA, SyntheticConfig(epsilon=1.0, delta=1e-6))
    (entry,) = plan.planned_spends
    release_rho, _ = zcdp_rho(1.0, 1e-6)
    assert entry.epsilon <= 1.0 and entry.epsilon == pytest.approx(1.0, rel=1e-9)
    assert entry.delta == 1e-6
    assert entry.description.rho == pytest.approx(release_rho, rel=1e-9)
    assert entry.description.rho <= release_rho
    generator, weights = entry.params["components"]
    assert plan.weights_fraction == DEFAULT_ZCDP_WEIGHTS_FRACTION == 0.05
    assert generator["rho"] == pytest.approx(0.95 * release_rho, rel=1e-6)
    assert weights["rho"] == pytest.approx(0.05 * release_rho, rel=1e-9)
    # Each part's own (epsilon, delta) is its rho converted at the release's delta.
    assert weights["epsilon"] == pytest.approx(zcdp_epsilon(weights["rho"], 1e-6), rel=1e-9)
    # More budget than splitting epsilon and delta gives: that split leaves the generator
    # zcdp_rho(0.8, 8e-7) and the weights an analytic Gaussian at (0.2, 2e-7), whose noise
    # the default share keeps (within 5 %).
    assert generator["rho"] > 1.4 * zcdp_rho(0.8, 8e-7)[0]
    split_sigma = gaussian_sigma(plan.weights_plan["sensitivity"], 0.2, 2e-7)
    assert plan.weights_plan["noise_scale"] == pytest.approx(split_sigma, rel=0.05)
    assert plan.configuration()["budget_split"]["rho"] == pytest.approx(release_rho)


@pytest.mark.parametrize(
    "config",
    [
        SyntheticConfig(epsilon=1.0, delta=0.0),  # Laplace: pure epsilon adds exactly
        SyntheticConfig(epsilon=1.0, delta=1e-6, weights="beta_debiased"),
        SyntheticConfig(epsilon=1.0, delta=1e-6, weights_options={"mechanism": "laplace"}),
        SyntheticConfig(epsilon=1.0, delta=1e-6, generator="marginals"),
        SyntheticConfig(epsilon=1.0, delta=1e-6, weights="none"),
    ],
)
def test_other_releases_split_epsilon_and_delta_entry_by_entry(config):
    plan = plan_release(SCHEMA, config)
    assert plan.zcdp_rho is None
    assert " + " not in " ".join(spend.mechanism for spend in plan.planned_spends)
    assert sum(spend.epsilon for spend in plan.planned_spends) == pytest.approx(1.0)


def test_weights_refuse_a_zcdp_budget_beyond_their_epsilon():
    rho, _ = zcdp_rho(0.2, 1e-6)
    assert _gaussian_scale(3.0, 0.2, 1e-6, rho) == pytest.approx(3.0 / (2 * rho) ** 0.5)
    with pytest.raises(InputError, match="more than the weights' budget"):
        _gaussian_scale(3.0, 0.2, 1e-6, 1.1 * rho)
    with pytest.raises(InputError, match="zcdp_rho"):
        CalibrationSettings(encoder=Encoder(SCHEMA), zcdp_rho=-1.0)
