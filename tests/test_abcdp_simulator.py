"""ABCDP user simulators written per draw or batched: declared, or detected by the dry run
(rule in dprelease/inference/abcdp/simulator.py), including the ambiguous cases."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from release_fixtures import ROOT
from typer.testing import CliRunner

from dprelease.cli.app import app
from dprelease.config import ABCDPConfig
from dprelease.errors import InputError
from dprelease.inference.abcdp.mechanism import plan_abcdp
from dprelease.inference.abcdp.model import SimulatorCheck, load_model
from dprelease.schema import load_schema

SCHEMA = f"{ROOT}/data/models/toy_mixture.yaml"
HEADER = """
import numpy as np
import pandas as pd

class Model:
    parameter_names = ("mu", "sd")
    columns = ("y",)
    {declaration}

    def sample_prior(self, rng, size):
        return np.column_stack([rng.uniform(1, 4, size), rng.uniform(0.1, 0.5, size)])

    def simulate(self, theta, m, rng):
"""
# Ways people write simulate; each must end in `return pd.DataFrame({"y": y})`.
PER_DRAW_UNPACK = """
        mu, sd = theta
        y = np.clip(mu + sd * rng.standard_normal(m), 0, 5)
"""
PER_DRAW_FIRST = """
        mu, sd = np.ravel(theta)[:2]  # given a batch: only the first draw's m rows
        y = np.clip(mu + sd * rng.standard_normal(m), 0, 5)
"""
PER_DRAW_M_MAJOR = """
        mu, sd = np.asarray(theta).T  # given a batch: (m, B), m-major: blocks would mix draws
        y = np.clip(mu + sd * rng.standard_normal((m, 1)), 0, 5).ravel()
"""
BATCHED_ATLEAST_2D = """
        theta = np.atleast_2d(theta)  # one draw works too: both conventions are right
        y = np.clip(theta[:, [0]] + theta[:, [1]] * rng.standard_normal((len(theta), m)), 0, 5)
        y = y.ravel()
"""
BATCHED_VARIABLE_RNG = """
        # refuses one draw; its generator use depends on theta (Poisson), so the block order
        # cannot be confirmed by re-simulating with the same seed
        k = rng.poisson(theta[:, [1]] * 10, size=(len(theta), m))
        y = np.clip(theta[:, [0]] + 0.01 * k + 0.1 * rng.standard_normal((len(theta), m)), 0, 5)
        y = y.ravel()
"""
NEITHER = """
        y = np.full(7, 1.0)
"""


def _model(tmp_path, body: str, declaration: str = "") -> str:
    source = (
        HEADER.format(declaration=declaration) + body + '        return pd.DataFrame({"y": y})\n'
    )
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(source))
    return f"{path}:Model"


def _check(reference: str) -> SimulatorCheck:
    return SimulatorCheck(load_model(reference), load_schema(SCHEMA), np.random.default_rng(3))


def _blocks_are_per_draw(check: SimulatorCheck, m: int = 40) -> bool:
    """check.simulate(theta) equals calling simulate once per draw with the same generator."""
    theta = check.prior(np.random.default_rng(0), 4)
    encoded = check.simulate(theta, m, np.random.default_rng(9))
    rng = np.random.default_rng(9)
    model = check.loaded.model
    one_by_one = [model.simulate(row, m, rng)["y"].to_numpy() / 5.0 for row in theta]
    return np.allclose(encoded[:, :, 0], np.vstack(one_by_one))


@pytest.mark.parametrize(
    "body",
    [PER_DRAW_UNPACK, PER_DRAW_FIRST, PER_DRAW_M_MAJOR],
    ids=["unpack", "first-draw-of-a-batch", "m-major-broadcast"],
)
def test_per_draw_simulators_are_detected_and_called_once_per_draw(tmp_path, body):
    check = _check(_model(tmp_path, body))
    assert (check.mode.name, check.mode.rule) == (
        "per-draw",
        "detected: one draw of shape (p,) gives m rows",
    )
    assert _blocks_are_per_draw(check)


def test_m_major_broadcasting_would_mix_draws_as_a_batch(tmp_path):
    """The dangerous case: the batch call returns B*m rows, but in the wrong order."""
    check = _check(_model(tmp_path, PER_DRAW_M_MAJOR))
    theta = check.prior(np.random.default_rng(0), 3)
    frame = check.loaded.model.simulate(theta, 1000, np.random.default_rng(1))
    assert len(frame) == 3000  # a row count check alone would accept it as batched
    as_batch = frame["y"].to_numpy().reshape(3, 1000).mean(axis=1)
    assert np.abs(as_batch - theta[:, 0]).max() > 0.5  # its blocks are not the draws' rows
    assert check.mode.name == "per-draw"


def test_batched_simulator_that_also_takes_one_draw_is_called_in_batches(tmp_path):
    check = _check(_model(tmp_path, BATCHED_ATLEAST_2D))
    assert (check.mode.name, check.mode.rule) == (
        "batched",
        "detected: a batch of draws gives m rows per draw",
    )
    calls = []
    original = check.loaded.model.simulate
    check.loaded.model.simulate = lambda theta, m, rng: (
        calls.append(theta.shape) or original(theta, m, rng)
    )
    check.simulate(check.prior(np.random.default_rng(0), 6), 20, np.random.default_rng(1))
    assert calls == [(6, 2)]


def test_batched_simulator_refusing_one_draw_is_batched_even_when_order_is_unconfirmed(tmp_path):
    check = _check(_model(tmp_path, BATCHED_VARIABLE_RNG))
    assert (check.mode.name, check.mode.rule) == (
        "batched",
        "detected: a batch of draws gives m rows per draw, one draw is refused",
    )


def test_declaration_wins_over_detection(tmp_path):
    declared = _check(_model(tmp_path, BATCHED_ATLEAST_2D, "batched = False"))
    assert (declared.mode.name, declared.mode.rule) == ("per-draw", "declared `batched = False`")
    assert _blocks_are_per_draw(declared)
    config = ABCDPConfig(model="", n_samples=2, threshold=0.1, epsilon=1.0, n_draws=10, seed=0)
    wrong = _model(tmp_path, PER_DRAW_FIRST, "batched = True")
    with pytest.raises(InputError) as error:
        plan_abcdp(load_schema(SCHEMA), load_model(wrong), config)
    message = str(error.value)
    assert "simulate(theta of 20 draws, m=100) returned 100 rows, expected 2000" in message
    assert "should declare `batched = False`" in message and "\n" not in message
    with pytest.raises(InputError, match="`batched` must be True .* or False .*, not 'yes'"):
        _check(_model(tmp_path, PER_DRAW_UNPACK, "batched = 'yes'"))


def test_a_simulator_of_neither_kind_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError) as error:
        _check(_model(tmp_path, NEITHER))
    message = str(error.value)
    assert message.endswith(
        "must return m rows for one draw (theta of shape (p,)) or B*m rows for a batch (theta "
        "of shape (B, p)); given one draw it returned 7 rows, expected 16, given 3 draws it "
        "returned 7 rows, expected 48 (m=16)"
    )
    assert "\n" not in message


def test_simulate_gets_a_copy_of_the_draws(tmp_path):
    body = PER_DRAW_UNPACK + "        theta[:] = -1.0\n"
    check = _check(_model(tmp_path, body))
    theta = check.prior(np.random.default_rng(0), 3)
    before = theta.copy()
    check.simulate(theta, 10, np.random.default_rng(1))
    np.testing.assert_array_equal(theta, before)


def test_the_plan_records_the_mode_and_keeps_the_bundled_models_streams():
    """Bundled models declare `batched = True`: no probe; the dry run's stream is untouched,
    so a seed gives the bandwidth of a dry run without probes (0.9459... at seed 0)."""
    config = ABCDPConfig(model="", n_samples=10, threshold=0.07, epsilon=1.0, seed=0)
    schema = load_schema(f"{ROOT}/data/breast_cancer.yaml")
    models = f"{ROOT}/data/models/breast_cancer_radius.py"
    batched = plan_abcdp(schema, load_model(f"{models}:RadiusByDiagnosis"), config)
    per_draw = plan_abcdp(schema, load_model(f"{models}:RadiusByDiagnosisPerDraw"), config)
    assert batched.configuration()["simulator"] == {
        "mode": "batched",
        "rule": "declared `batched = True`",
    }
    assert per_draw.configuration()["simulator"]["mode"] == "per-draw"
    assert batched.bandwidth == pytest.approx(0.9459289549427916, rel=1e-12)


def test_the_interface_is_documented_in_the_help():
    result = CliRunner().invoke(app, ["infer", "abcdp", "--help"], terminal_width=200)
    text = " ".join(result.output.split())
    assert "one draw" in text and "batched = True" in text and "batched = False" in text
