"""ABCDP user models: loading, refusals before any spend (exit 2), encoding."""

from __future__ import annotations

import hashlib
import textwrap

import numpy as np
import pytest
from release_fixtures import ROOT

from dprelease.config import ABCDPConfig, parse_config
from dprelease.errors import InputError
from dprelease.inference.abcdp.mechanism import plan_abcdp
from dprelease.inference.abcdp.model import SimulatorCheck, load_model
from dprelease.schema import load_schema

TOY_MODEL = f"{ROOT}/data/models/toy_mixture.py:DirichletUniformMixture"
TOY_SCHEMA = f"{ROOT}/data/models/toy_mixture.yaml"

GOOD = """
import numpy as np
import pandas as pd

class Model:
    parameter_names = ("mu",)
    columns = ("y",)

    def sample_prior(self, rng, size):
        return rng.uniform(1, 4, size=(size, 1))

    def simulate(self, theta, m, rng):
        y = np.clip(theta[:, [0]] + rng.normal(size=(len(theta), m)) * 0.3, 0, 5)
        return pd.DataFrame({{"y": {values}}})
"""


def _write(tmp_path, body: str, name: str = "model.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return f"{path}:Model"


def _plan(reference: str):
    config = ABCDPConfig(model="", n_samples=2, threshold=0.1, epsilon=1.0, n_draws=10, seed=0)
    return plan_abcdp(load_schema(TOY_SCHEMA), load_model(reference), config)


def test_good_model_is_loaded_with_the_sha256_of_its_file(tmp_path):
    reference = _write(tmp_path, GOOD.format(values="y.ravel()"))
    loaded = load_model(reference)
    assert loaded.sha256 == hashlib.sha256((tmp_path / "model.py").read_bytes()).hexdigest()
    plan = _plan(reference)
    assert plan.bandwidth > 0 and plan.features is not None


@pytest.mark.parametrize(
    "values, message",
    [
        ("y.ravel() + 10", "outside the schema's bounds [0.0, 5.0]"),
        ("y.ravel()[:-1]", "given 3 draws it returned 47 rows, expected 48 (m=16)"),
        ("np.where(y.ravel() > 2, np.nan, y.ravel())", "has missing values"),
        ("1 / 0", "it raised ZeroDivisionError: division by zero"),
    ],
)
def test_bad_simulations_are_refused_by_the_dry_run(tmp_path, values, message):
    reference = _write(tmp_path, GOOD.format(values=values))
    with pytest.raises(InputError) as error:
        _plan(reference)
    assert "model.py:Model" in str(error.value) and message in str(error.value)


def test_wrong_columns_prior_shape_and_unknown_columns_are_refused(tmp_path):
    wrong_columns = GOOD.format(values="y.ravel()").replace('{"y":', '{"z":')
    with pytest.raises(InputError, match=r"returned columns \['z'\], expected \['y'\]"):
        _plan(_write(tmp_path, wrong_columns, "a.py"))
    wrong_shape = GOOD.format(values="y.ravel()").replace("size=(size, 1)", "size=(size, 2)")
    with pytest.raises(InputError, match=r"returned shape \(3, 2\), expected \(3, 1\)"):
        _plan(_write(tmp_path, wrong_shape, "b.py"))
    unknown = GOOD.format(values="y.ravel()").replace('columns = ("y",)', 'columns = ("w",)')
    with pytest.raises(InputError, match="columns not in the schema 'toy-mixture': w"):
        _plan(_write(tmp_path, unknown, "c.py"))


def test_bad_references_are_refused(tmp_path):
    with pytest.raises(InputError, match="path/to/model.py:ClassName"):
        load_model(f"{ROOT}/data/models/toy_mixture.py")
    with pytest.raises(InputError, match="model file not found"):
        load_model(f"{tmp_path}/missing.py:Model")
    with pytest.raises(InputError, match="has no class 'Nope'"):
        load_model(f"{ROOT}/data/models/toy_mixture.py:Nope")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no')\n")
    with pytest.raises(InputError, match="importing the model failed: RuntimeError: no"):
        load_model(f"{broken}:Model")


def test_simulations_are_encoded_like_the_real_rows():
    """The model's output goes through the schema's public encoder (y / 5 here)."""
    check = SimulatorCheck(load_model(TOY_MODEL), load_schema(TOY_SCHEMA))
    rng = np.random.default_rng(0)
    theta = check.prior(rng, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    encoded = check.simulate(theta, 50, np.random.default_rng(1))
    raw = check.loaded.model.simulate(theta, 50, np.random.default_rng(1))
    assert encoded.shape == (3, 50, 1)
    np.testing.assert_allclose(encoded.ravel(), check.encoder.encode(raw).ravel())
    np.testing.assert_allclose(encoded.ravel(), raw["y"].to_numpy() / 5.0)


def test_categorical_labels_must_be_schema_categories(tmp_path):
    body = """
    import numpy as np
    import pandas as pd

    class Model:
        parameter_names = ("p",)
        columns = ("mean_radius", "diagnosis")

        def sample_prior(self, rng, size):
            return rng.uniform(size=(size, 1))

        def simulate(self, theta, m, rng):
            n = len(theta) * m
            return pd.DataFrame({"mean_radius": np.full(n, 10.0), "diagnosis": np.ones(n)})
    """
    config = ABCDPConfig(model="", n_samples=1, threshold=0.1, epsilon=1.0, n_draws=5, seed=0)
    with pytest.raises(InputError, match="'diagnosis' has values outside the schema's categories"):
        plan_abcdp(
            load_schema(ROOT / "data" / "breast_cancer.yaml"),
            load_model(_write(tmp_path, body)),
            config,
        )


def test_invalid_configurations_are_refused():
    with pytest.raises(InputError) as error:
        parse_config(
            ABCDPConfig,
            model="",
            n_samples=20,
            threshold=-1,
            epsilon=0,
            n_draws=10,
            n_features=7,
        )
    text = str(error.value)
    for fragment in ("--n-draws (T) must be", "--threshold", "--epsilon", "--n-features"):
        assert fragment in text
