import numpy as np
import pandas as pd
import pytest
from release_fixtures import ROOT

from dprelease.datasets import census_like
from dprelease.encoding import MISSING_LEVEL, Encoder, column_dtypes
from dprelease.schema import Schema

SCHEMA = Schema.model_validate(
    {
        "dataset": "enc",
        "budget": {"epsilon": 1, "delta": 0},
        "columns": {
            "x": {"type": "continuous", "min": -2.0, "max": 6.0},
            "n": {"type": "integer", "min": 0, "max": 10, "nullable": True},
            "c": {"type": "categorical", "categories": ["a", "b", "c"], "nullable": True},
            "d": {"type": "categorical", "categories": ["u", "v"]},
        },
    }
)


def typed(frame: pd.DataFrame, schema: Schema = SCHEMA) -> pd.DataFrame:
    return frame.astype(column_dtypes(schema))


def test_layout_and_feature_names():
    encoder = Encoder(SCHEMA)
    assert encoder.width == 1 + 2 + 4 + 2
    assert encoder.feature_names == [
        "x",
        "n:missing",
        "n",
        "c=a",
        "c=b",
        "c=c",
        f"c={MISSING_LEVEL}",
        "d=u",
        "d=v",
    ]


def test_encoding_uses_public_bounds_exactly():
    table = typed(
        pd.DataFrame(
            {"x": [-2.0, 6.0, 0.0], "n": [0, None, 5], "c": ["b", None, "a"], "d": ["v", "u", "u"]}
        )
    )
    matrix = Encoder(SCHEMA).encode(table)
    expected = np.array(
        [
            [0.0, 0, 0.0, 0, 1, 0, 0, 0, 1],
            [1.0, 1, 0.0, 0, 0, 0, 1, 1, 0],
            [0.25, 0, 0.5, 1, 0, 0, 0, 1, 0],
        ]
    )
    np.testing.assert_array_equal(matrix, expected)


def test_roundtrip_is_exact_on_a_census_table():
    from dprelease.schema import load_schema

    schema = load_schema(f"{ROOT}/data/census.yaml")
    table = typed(census_like(2000, seed=3), schema)
    encoder = Encoder(schema)
    matrix = encoder.encode(table)
    assert matrix.min() >= 0 and matrix.max() <= 1
    back = encoder.decode(matrix)
    for name in ("age", "education", "hours", "sex", "region", "high_earner"):
        pd.testing.assert_series_equal(back[name], table[name], check_names=False)
    np.testing.assert_allclose(back["wage"], table["wage"], rtol=0, atol=1e-9)
    assert back["capital_gain"].isna().equals(table["capital_gain"].isna())
    np.testing.assert_allclose(
        back["capital_gain"].dropna(), table["capital_gain"].dropna(), rtol=0, atol=1e-9
    )
    assert dict(back.dtypes) == dict(table.dtypes)


def test_decode_maps_any_matrix_to_valid_schema_values():
    encoder = Encoder(SCHEMA)
    matrix = np.array(
        [
            [1.7, 0.2, 0.46, 0.1, 0.7, 0.2, 0.0, 0.4, 0.6],
            [-0.3, 0.9, 0.3, 0.1, 0.2, 0.3, 0.9, 0.6, 0.4],
        ]
    )
    table = encoder.decode(matrix)
    assert table["x"].tolist() == [6.0, -2.0]  # clipped to the bounds
    assert table["n"].iloc[0] == 5  # 0.46 * 10 = 4.6 rounds to 5
    assert table["n"].isna().tolist() == [False, True]
    assert table["c"].tolist()[0] == "b"
    assert pd.isna(table["c"].iloc[1])  # the missing level wins the argmax
    assert table["d"].tolist() == ["v", "u"]


def test_encode_refuses_values_the_schema_does_not_allow():
    encoder = Encoder(SCHEMA)
    table = typed(pd.DataFrame({"x": [7.0], "n": [1], "c": ["a"], "d": ["u"]}))
    with pytest.raises(ValueError, match="outside its bounds"):
        encoder.encode(table)


def test_decode_checks_the_width():
    with pytest.raises(ValueError, match="9 columns"):
        Encoder(SCHEMA).decode(np.zeros((2, 4)))


@pytest.mark.parametrize("before", [26, 140])
def test_one_hot_lands_in_its_column_past_the_127th_encoded_column(before):
    """pandas' category codes are int8 up to 127 levels; added to a column's start they
    wrapped past 127 (NYC flights: the last three of 105 destinations, from position 26,
    were written into another column's slot and their rows counted nowhere), and a
    categorical column starting past 127 raised OverflowError."""
    levels = [f"d{i:03d}" for i in range(105)]
    columns = {f"x{i}": {"type": "continuous", "min": 0, "max": 1} for i in range(before)}
    columns["dest"] = {"type": "categorical", "categories": levels, "nullable": True}
    schema = Schema.model_validate(
        {"dataset": "wide", "budget": {"epsilon": 1, "delta": 0}, "columns": columns}
    )
    encoder = Encoder(schema)
    table = pd.DataFrame({f"x{i}": np.full(106, 0.5) for i in range(before)})
    table["dest"] = pd.Series([*levels, None], dtype="object")
    encoded = encoder.encode(table)
    dest = encoder.columns[-1]
    assert dest.start == before
    np.testing.assert_array_equal(encoded[:, dest.start : dest.stop], np.eye(106))
    np.testing.assert_array_equal(encoded[:, :before], 0.5)  # no one-hot spilled into them
    decoded = encoder.decode(encoded)
    assert decoded["dest"].astype(object).iloc[:105].tolist() == levels
    assert pd.isna(decoded["dest"].iloc[105])
