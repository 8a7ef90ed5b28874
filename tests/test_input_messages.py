"""What a new user's first table meets: file and settings problems are named in the user's
terms, before any data is read or Prefect starts."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from leak_checks import exception_text, shown_values, write_headerless_csv
from typer.testing import CliRunner

from dprelease.cli import support
from dprelease.cli.app import app
from dprelease.config import InputPolicy
from dprelease.datasets import census_like
from dprelease.errors import InputError
from dprelease.io.stream import StreamingInput, load_validated, preflight
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


@pytest.mark.parametrize(
    "policy",
    [InputPolicy(), InputPolicy(on_invalid_rows="drop", drop_extra_columns=True)],
    ids=["refuse", "drop"],
)
def test_a_headerless_csv_error_names_no_value(tmp_path, policy):
    path = tmp_path / "headerless.csv"
    values = write_headerless_csv(path)
    for read in (
        lambda: preflight(path, SCHEMA, policy),
        lambda: load_validated(path, SCHEMA, policy),
        lambda: list(StreamingInput(str(path), SCHEMA, policy, chunk_rows=7).tables()),
    ):
        with pytest.raises(InputError) as error:
            read()
        message = str(error.value)
        assert message == (
            f"{path}: no column name is a schema column (age, education, hours, sex, region, "
            "wage, capital_gain, high_earner): the file may have no header line"
        )
        assert shown_values(exception_text(error.value).replace(str(path), ""), values) == []


def test_duplicate_names_are_named_only_when_schema_columns(tmp_path, frame):
    path = tmp_path / "dup.csv"
    text = frame.assign(wage2=1.0, ssn="a", phone="b", ssn2="c").to_csv(index=False)
    header, rest = text.split("\n", 1)
    header = header.replace("wage2", "wage").replace("ssn2", "ssn")  # wage, ssn twice
    path.write_text(header + "\n" + rest)
    for policy in (InputPolicy(), InputPolicy(drop_extra_columns=True)):
        with pytest.raises(InputError) as error:
            preflight(path, SCHEMA, policy)
        lines = str(error.value).split("\n")
        assert lines[0] == (
            f"{path}: duplicate column names in the header: wage; 1 name not in the schema "
            "(each column needs a distinct name)"
        )
        extra = f"{path}: 3 columns not in the schema (remove them or pass --drop-extra-columns)"
        assert lines[1:] == ([] if policy.drop_extra_columns else [extra])
        assert "ssn" not in exception_text(error.value) and "phone" not in str(error.value)


def test_preflight_reads_only_the_header_line(tmp_path, frame):
    """A data line that is not UTF-8 is an invalid row (dropped under `drop`), not a reason
    to refuse the file before the run; a header line that is not UTF-8 is refused there."""
    path = tmp_path / "table.csv"
    lines = frame.to_csv(index=False).encode().split(b"\n")
    lines[3] = lines[3].replace(b",", b"\xe9,", 1)
    path.write_bytes(b"\n".join(lines))
    for policy in (InputPolicy(), InputPolicy(on_invalid_rows="drop")):
        preflight(path, SCHEMA, policy)
    kept = load_validated(path, SCHEMA, InputPolicy(on_invalid_rows="drop"))
    pd.testing.assert_frame_equal(kept, load_validated(frame.drop(index=2), SCHEMA))
    path.write_bytes(b"\xe2" + path.read_bytes())
    with pytest.raises(InputError, match="the header line is not UTF-8 encoded text"):
        preflight(path, SCHEMA, InputPolicy(on_invalid_rows="drop"))


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
