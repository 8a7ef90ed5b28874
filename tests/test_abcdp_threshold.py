"""The public threshold plan of ABCDP (`inference/abcdp/threshold.py`, `dprelease infer
abcdp-plan --model`): two toy models whose MMD distributions are known, the bundled
breast-cancer model against exact rejection ABC on its table, and the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from release_fixtures import ROOT
from typer.testing import CliRunner

from dprelease.cli.app import app
from dprelease.config import ABCDPConfig
from dprelease.inference.abcdp.reference import exact_rejection_abc
from dprelease.inference.abcdp.threshold import (
    acceptance_probability,
    simulated_distances,
    suggest_threshold,
)
from dprelease.release.abcdp import load_real_rows, plan_abcdp_release
from dprelease.schema import load_schema

TOY_MODELS = '''
import numpy as np
import pandas as pd


class PointMass:
    """theta ~ U(0, 1); every simulated row is theta: no Monte Carlo noise."""

    batched = True
    parameter_names = ("theta",)
    columns = ("y",)

    def sample_prior(self, rng, size):
        return rng.uniform(0.0, 1.0, (size, 1))

    def simulate(self, theta, m, rng):
        return pd.DataFrame({"y": np.repeat(np.atleast_2d(theta)[:, 0], m)})


class UniformRows:
    """One parameter value; rows iid U(0, 1): every pair of simulations is at the same law."""

    batched = True
    parameter_names = ("theta",)
    columns = ("y",)

    def sample_prior(self, rng, size):
        return np.full((size, 1), 0.5)

    def simulate(self, theta, m, rng):
        return pd.DataFrame({"y": rng.uniform(0.0, 1.0, len(np.atleast_2d(theta)) * m)})
'''

BANDWIDTH = 0.2


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> tuple[Path, Path]:
    """The toy models' file and a one-column schema, y in [0, 1] (its encoding is y itself)."""
    directory = tmp_path_factory.mktemp("toy-threshold")
    models = directory / "models.py"
    models.write_text(TOY_MODELS)
    schema = directory / "schema.yaml"
    schema.write_text(
        yaml.safe_dump(
            {
                "dataset": "toy-threshold",
                "budget": {"epsilon": 10.0, "delta": 0.0},
                "columns": {"y": {"type": "continuous", "min": 0, "max": 1}},
            }
        )
    )
    return models, schema


def _plan(toy, name: str, **changes):  # noqa: ANN202
    models, schema = toy
    settings = dict(
        n_samples=10,
        threshold=0.1,
        epsilon=1.0,
        n_draws=1000,
        n_features=500,
        bandwidth=BANDWIDTH,
        seed=3,
    )
    config = ABCDPConfig(model=f"{models}:{name}", **{**settings, **changes})
    return plan_abcdp_release(load_schema(schema), config).plan


def _rff_kernel(weights: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """k(x, x + delta) of the features [cos; sin] sqrt(2/D) with frequencies `weights`."""
    return np.cos(np.outer(delta, weights[:, 0])).mean(axis=1)


def test_point_masses_give_a_zero_floor_and_the_known_separation(toy) -> None:
    """Rows all equal to theta ~ U(0, 1): two simulations at one draw are identical (floor 0),
    and at draws theta, theta' the MMD is sqrt(2 - 2 k(theta - theta')), with theta - theta'
    triangular on [-1, 1]; its quantiles follow from the features' frequencies."""
    plan = _plan(toy, "PointMass")
    summary = suggest_threshold(plan, 50)
    assert summary["floor"]["q95"] < 1e-5
    delta = np.linspace(-1.0, 1.0, 40_001)  # a grid far finer than the tolerance
    rho = np.sqrt(np.maximum(2.0 - 2.0 * _rff_kernel(plan.features.weights, delta), 0.0))
    order = np.argsort(rho)
    mass = np.cumsum((1.0 - np.abs(delta))[order])
    mass /= mass[-1]
    exact = {q: rho[order][np.searchsorted(mass, q)] for q in (0.02, 0.05, 0.5)}
    rows = {row["level"]: row["value"] for row in summary["separation"]}
    assert summary["level"] == 0.02  # 2c/T
    for level, value in exact.items():
        assert rows[level] == pytest.approx(value, rel=0.06), level
    assert summary["rule"] == "separation" and summary["suggested"] == rows[0.02]
    # the Gaussian kernel these features approximate: the 2 % quantile of |theta - theta'| is
    # 1 - sqrt(0.98), and rho = sqrt(2 - 2 exp(-d^2 / (2 l^2)))
    d = 1.0 - math.sqrt(0.98)
    gaussian = math.sqrt(2.0 - 2.0 * math.exp(-(d**2) / (2 * BANDWIDTH**2)))
    assert summary["suggested"] == pytest.approx(gaussian, rel=0.08)
    expected = summary["at_suggested"]["expected_exact_passes"]
    assert expected == pytest.approx(2 * 10, rel=0.05)  # about 2c of the T draws pass


def test_the_floor_of_iid_rows_is_the_mmd_of_two_samples(toy) -> None:
    """Rows iid U(0, 1) whatever the draw: for samples of n and m rows,
    E rho^2 = (1 - E k(x, x')) (1/n + 1/m), with E cos(w (x - x')) = 2 (1 - cos w) / w^2 for
    x, x' iid U(0, 1). Every pair of draws has the same law, so the separation does not fall
    below the floor and the floor sets the suggestion."""
    plan = _plan(toy, "UniformRows", n_sim=80)
    floor, matrix = simulated_distances(plan, 40, 80, 200)
    w = plan.features.weights[:, 0]
    expected = (1.0 - np.mean(2.0 * (1.0 - np.cos(w)) / w**2)) * (1 / 40 + 1 / 80)
    assert np.mean(floor**2) == pytest.approx(expected, rel=0.1)
    pairs = matrix[~np.eye(200, dtype=bool)]
    assert np.mean(pairs**2) == pytest.approx(expected, rel=0.05)
    summary = suggest_threshold(plan, 40)
    assert summary["n_sim"] == 80 and summary["rule"] == "floor"
    assert summary["suggested"] == summary["floor"]["q95"]
    assert not summary["separable"]


def test_acceptance_probability_is_the_svt_marginal() -> None:
    """P(rho + Lap(2b) <= threshold + Lap(b)) (Proposition 4.2), by Monte Carlo."""
    rng = np.random.default_rng(0)
    b, threshold, n = 0.02, 0.1, 400_000
    for rho in (0.05, 0.1, 0.13, 0.3):
        simulated = np.mean(rho + rng.laplace(0, 2 * b, n) <= threshold + rng.laplace(0, b, n))
        model = float(acceptance_probability(np.array(rho), threshold, b))
        assert simulated == pytest.approx(model, abs=4 * math.sqrt(model * (1 - model) / n) + 1e-4)


def test_the_suggestion_for_the_bundled_model_lets_exact_abc_accept_c_draws() -> None:
    """Breast cancer, c = 10, T = 10 000, the table's size as the guess: the suggestion is
    above the Monte Carlo floor's 95 % quantile and far below the separation's median, and
    exact (non-private) rejection ABC on the bundled table at that threshold accepts c draws
    among the T, whose share of malignant tumours is pinned far tighter than its U(0, 1)
    prior (the test reads the real table; the plan does not)."""
    schema = load_schema(f"{ROOT}/data/breast_cancer.yaml")
    config = ABCDPConfig(
        model=f"{ROOT}/data/models/breast_cancer_radius.py:RadiusByDiagnosis",
        n_samples=10,
        threshold=1.0,
        epsilon=1.0,
        seed=0,
    )
    summary = suggest_threshold(plan_abcdp_release(schema, config).plan, 569)
    separation = {row["level"]: row["value"] for row in summary["separation"]}
    assert summary["floor"]["q95"] <= summary["suggested"] < 0.5 * separation[0.5]
    suggested = config.model_copy(update={"threshold": summary["suggested"]})
    release = plan_abcdp_release(schema, suggested)
    real = load_real_rows(release, f"{ROOT}/data/breast_cancer.csv")
    exact = exact_rejection_abc(real, release.plan)
    assert len(exact.accepted) == 10
    assert np.std(exact.posterior[:, 0]) < 0.3 * math.sqrt(1 / 12)


def test_plan_command_suggests_a_threshold_from_the_model(toy) -> None:
    models, schema = toy
    common = (
        "infer",
        "abcdp-plan",
        "--epsilon",
        "1",
        "--n-samples",
        "10",
        "--n-hat-guess",
        "50",
        "--model",
        f"{models}:PointMass",
        "--schema",
        str(schema),
        "--n-draws",
        "1000",
        "--bandwidth",
        str(BANDWIDTH),
        "--seed",
        "3",
    )
    result = CliRunner().invoke(app, [*common, "--json", "--threshold", "0.3"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    plan = summary["threshold"]
    assert plan == suggest_threshold(_plan(toy, "PointMass"), 50, 0.3) | {"n_rows_guess": 50.0}
    assert plan["at_threshold"]["threshold"] == 0.3
    text = CliRunner().invoke(app, common)
    assert text.exit_code == 0, text.output
    assert f"suggested --threshold {plan['suggested']:.3g}" in text.stdout
    assert "Monte Carlo floor" in text.stdout
    without_model = CliRunner().invoke(
        app, ["infer", "abcdp-plan", "--epsilon", "1", "--n-samples", "10", "--n-hat-guess", "50"]
    )
    assert "pass --model and --schema for a suggested --threshold" in without_model.stdout
