"""What a new user's first table meets (issue 19 item 11): file and settings problems are
named in the user's terms, before any data is read or Prefect starts."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dprelease.cli import support
from dprelease.cli.app import app
from dprelease.config import InputPolicy
from dprelease.datasets import census_like
from dprelease.errors import InputError
from dprelease.io.stream import load_validated, preflight
from dprelease.schema import load_schema

SCHEMA_PATH = Path(__file__).parent.parent / "data" / "census.yaml"
SCHEMA = load_schema(SCHEMA_PATH)


@pytest.fixture
def frame() -> pd.DataFrame:
    return census_like(40, seed=3)


def test_duplicate_column_names_are_named(tmp_path, frame):
    path = tmp_path / "dup.csv"
    text = frame.to_csv(index=False)
    header, rest = text.split("\n", 1)
    path.write_text(header + ",wage\n" + rest.replace("\n", ",1\n"))
    with pytest.raises(InputError, match="duplicate column names in the header: wage"):
        preflight(path, SCHEMA, InputPolicy())


def test_a_utf8_byte_order_mark_is_accepted(tmp_path, frame):
    plain, bom = tmp_path / "plain.csv", tmp_path / "bom.csv"
    frame.to_csv(plain, index=False)
    bom.write_bytes(b"\xef\xbb\xbf" + frame.to_csv(index=False, lineterminator="\r\n").encode())
    preflight(bom, SCHEMA, InputPolicy())
    pd.testing.assert_frame_equal(
        load_validated(str(bom), SCHEMA, InputPolicy()),
        load_validated(str(plain), SCHEMA, InputPolicy()),
    )


@pytest.mark.parametrize(("separator", "said"), [(";", "`;`-separated"), ("\t", "tab-separated")])
def test_a_semicolon_separated_file_is_recognised(tmp_path, frame, separator, said):
    path = tmp_path / "semi.csv"
    frame.to_csv(path, index=False, sep=separator)
    with pytest.raises(InputError, match=said) as error:
        preflight(path, SCHEMA, InputPolicy())
    assert "missing columns" not in str(error.value)


def test_a_column_without_type_is_named_plainly(tmp_path):
    raw = yaml.safe_load(SCHEMA_PATH.read_text())
    del raw["columns"]["age"]["type"]
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError) as error:
        load_schema(path)
    assert "columns.age: needs a type: continuous, integer or categorical" in str(error.value)
    assert "discriminator" not in str(error.value)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["release", "--epsilon", "inf"], "--epsilon must be a positive finite number"),
        (["release", "--epsilon", "1", "--n-synthetic", "0"], "--n-synthetic should be greater"),
        (["evaluate", "--epsilons", "1,inf"], "--epsilon must be a positive finite number"),
        (["evaluate", "--n-synthetic", "0"], "--n-synthetic should be greater"),
    ],
)
def test_settings_are_refused_before_prefect(tmp_path, frame, monkeypatch, command, message):
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    monkeypatch.setattr(support, "run_flow", lambda *a, **k: pytest.fail("Prefect started"))
    result = CliRunner().invoke(app, [*command, str(path), "--schema", str(SCHEMA_PATH)])
    assert result.exit_code == 2, result.output
    assert message in result.output
