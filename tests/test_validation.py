"""Loading and validating the real table, and checking synthetic rows, with the one validator."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dprelease.config import InputPolicy
from dprelease.datasets import census_like
from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.io.stream import load_validated
from dprelease.io.validate import check_synthetic
from dprelease.schema import load_schema

SCHEMA = load_schema(Path(__file__).parent.parent / "data" / "census.yaml")
REFUSE = InputPolicy(on_invalid_rows="refuse")  # the CLI's default: every message is read


@pytest.fixture
def census_csv(tmp_path) -> Path:
    path = tmp_path / "census.csv"
    census_like(300, seed=1).to_csv(path, index=False)
    return path


def edited(path: Path, tmp_path: Path, edit) -> Path:  # noqa: ANN001
    frame = pd.read_csv(path, dtype=str)
    frame = edit(frame)
    out = tmp_path / "edited.csv"
    frame.to_csv(out, index=False)
    return out


def test_valid_table_loads_with_schema_types(census_csv):
    table = load_validated(census_csv, SCHEMA, REFUSE)
    assert list(table.columns) == list(SCHEMA.columns)
    assert str(table["age"].dtype) == "int64"
    assert str(table["wage"].dtype) == "float64"
    assert list(table["region"].cat.categories) == list(SCHEMA.columns["region"].categories)
    assert table["capital_gain"].isna().any()
    pd.testing.assert_frame_equal(
        table, load_validated(table, SCHEMA, REFUSE)
    )  # the same, in memory


def test_parquet_input(census_csv, tmp_path):
    path = tmp_path / "census.parquet"
    census_like(300, seed=1).to_parquet(path)
    parquet = load_validated(path, SCHEMA, REFUSE)
    csv = load_validated(census_csv, SCHEMA, REFUSE)
    pd.testing.assert_frame_equal(parquet, csv)


def set_value(column: str, value: str):  # noqa: ANN201
    def edit(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[3, column] = value
        return frame

    return edit


def test_out_of_bounds_values_are_clipped_by_default(census_csv, tmp_path):
    path = edited(census_csv, tmp_path, set_value("wage", "987654.5"))
    table = load_validated(path, SCHEMA, REFUSE)
    assert table["wage"].iloc[3] == 20000.0
    assert table["wage"].max() <= 20000.0


def test_out_of_bounds_rejected_on_request(census_csv, tmp_path):
    path = edited(census_csv, tmp_path, set_value("age", "123"))
    with pytest.raises(InputError) as error:
        load_validated(
            path, SCHEMA, InputPolicy(on_out_of_bounds="reject", on_invalid_rows="refuse")
        )
    message = str(error.value)
    assert str(path) in message and "'age'" in message and "outside the schema's bounds" in message
    assert "123" not in message


@pytest.mark.parametrize(
    ("edit", "column", "problem", "secret"),
    [
        (
            set_value("region", "atlantis"),
            "region",
            "not among the schema's categories",
            "atlantis",
        ),
        (set_value("sex", ""), "sex", "does not mark it nullable", None),
        (set_value("wage", "lots"), "wage", "not numbers", "lots"),
        (set_value("age", "41.5"), "age", "not integers", "41.5"),
    ],
)
def test_bad_values_are_named_without_values(census_csv, tmp_path, edit, column, problem, secret):
    path = edited(census_csv, tmp_path, edit)
    with pytest.raises(InputError) as error:
        load_validated(path, SCHEMA, REFUSE)
    message = str(error.value)
    assert str(path) in message
    assert f"column {column!r}" in message
    assert problem in message
    if secret:
        assert secret not in message
    assert message.count("\n") == 0  # one problem, not another one it implies


@pytest.mark.parametrize("text", ["inf", "Infinity", "-inf", "+Inf", "1e999"])
@pytest.mark.parametrize("column", ["wage", "age"])
def test_a_non_finite_number_is_an_invalid_value(census_csv, tmp_path, text, column):
    path = edited(census_csv, tmp_path, set_value(column, text))
    refused = f"{path}: column {column!r} has values that are not finite numbers"
    for policy in (REFUSE, InputPolicy(on_out_of_bounds="reject", on_invalid_rows="refuse")):
        with pytest.raises(InputError) as error:
            load_validated(path, SCHEMA, policy)
        assert str(error.value) == refused
    kept = load_validated(path, SCHEMA, InputPolicy(on_invalid_rows="drop"))
    expected = load_validated(census_csv, SCHEMA, REFUSE).drop(index=3).reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, expected)  # dropped, never clipped to a bound


def test_extra_and_missing_columns(census_csv, tmp_path):
    extra = edited(census_csv, tmp_path, lambda f: f.assign(ssn="x"))
    with pytest.raises(InputError, match="1 column not in the schema .*--drop-extra-columns") as e:
        load_validated(extra, SCHEMA, REFUSE)
    assert "ssn" not in str(e.value)  # a name that is not a schema column may be a value
    dropped = load_validated(
        extra, SCHEMA, InputPolicy(on_invalid_rows="refuse", drop_extra_columns=True)
    )
    assert list(dropped.columns) == list(SCHEMA.columns)
    missing = edited(census_csv, tmp_path, lambda f: f.drop(columns=["hours", "sex"]))
    with pytest.raises(InputError, match="missing columns required by the schema: hours, sex"):
        load_validated(missing, SCHEMA, REFUSE)


def test_unreadable_inputs(tmp_path):
    header_only = tmp_path / "empty.csv"
    header_only.write_text(",".join(SCHEMA.columns) + "\n")
    with pytest.raises(InputError, match="has no rows"):
        load_validated(header_only, SCHEMA, REFUSE)
    blank = tmp_path / "blank.csv"
    blank.write_text("")
    with pytest.raises(InputError, match="the file is empty"):
        load_validated(blank, SCHEMA, REFUSE)
    latin1 = tmp_path / "latin1.csv"
    frame = census_like(5, seed=1).assign(region="m\xe9xico")
    frame.to_csv(latin1, index=False, encoding="latin-1")
    with pytest.raises(InputError, match="not UTF-8"):
        load_validated(latin1, SCHEMA, REFUSE)
    latin1_header = tmp_path / "latin1_header.csv"
    latin1_header.write_bytes("\xe2ge,region\n30,south\n".encode("latin-1"))
    with pytest.raises(InputError, match="the header line is not UTF-8"):
        load_validated(latin1_header, SCHEMA, InputPolicy(on_invalid_rows="drop"))
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(InputError, match="cannot read the file"):
        load_validated(broken, SCHEMA, REFUSE)
    with pytest.raises(InputError, match="unsupported file type '.xlsx'"):
        other = tmp_path / "table.xlsx"
        other.write_text("x")
        load_validated(other, SCHEMA, REFUSE)
    with pytest.raises(InputError, match="input file not found"):
        load_validated(tmp_path / "absent.csv", SCHEMA, REFUSE)


def test_synthetic_rows_pass_the_same_rules():
    encoder = Encoder(SCHEMA)
    rng = np.random.default_rng(0)
    table = encoder.decode(rng.random((50, encoder.width)) * 1.4 - 0.2)
    check_synthetic(table, SCHEMA)  # raises on any failure


def test_synthetic_rows_that_break_the_schema_are_never_published():
    table = Encoder(SCHEMA).decode(np.zeros((5, Encoder(SCHEMA).width)))
    table["wage"] = 1e9
    with pytest.raises(RuntimeError, match="fails the schema's rules.*'wage'.*outside"):
        check_synthetic(table, SCHEMA)
