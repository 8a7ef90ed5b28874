from pathlib import Path

import pytest

from dprelease.errors import InputError
from dprelease.schema import CategoricalColumn, IntegerColumn, load_schema

DATA = Path(__file__).parent.parent / "data"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "schema.yaml"
    path.write_text(text)
    return path


BASE = """
dataset: cps1988
budget: {epsilon: 6.0, delta: 1.0e-6}
columns:
"""


def test_a_schema_of_every_column_type_loads_with_coded_categories_as_strings(tmp_path):
    schema = load_schema(
        write(
            tmp_path,
            """
dataset: cps1988
description: free text
max_rows: 100000
budget: {epsilon: 6.0, delta: 1.0e-6}
target: wage
columns:
  wage: {type: continuous, min: 0, max: 20000}
  education: {type: integer, min: 0, max: 20}
  region: {type: categorical, categories: [northeast, midwest, south, west]}
  smsa: {type: categorical, categories: ["no", "yes"], nullable: true}
  code: {type: categorical, categories: [1, 2, 3]}
""",
        )
    )
    assert schema.dataset == "cps1988"
    assert schema.max_rows == 100000
    assert schema.budget.epsilon == 6.0 and schema.budget.delta == 1e-6
    assert isinstance(schema.columns["education"], IntegerColumn)
    assert schema.columns["smsa"].nullable is True
    assert isinstance(schema.columns["code"], CategoricalColumn)
    assert schema.columns["code"].categories == ("1", "2", "3")
    assert list(schema.columns) == ["wage", "education", "region", "smsa", "code"]


@pytest.mark.parametrize("name", ["breast_cancer.yaml", "census.yaml"])
def test_bundled_schemas_load(name):
    assert load_schema(DATA / name).columns


@pytest.mark.parametrize(
    ("columns", "key", "message"),
    [
        ("  wage: {type: continuous, min: 5, max: 5}", "columns.wage", "must be smaller than max"),
        ("  wage: {type: number, min: 0, max: 1}", "columns.wage", "type"),
        ("  wage: {type: continuous, min: 0}", "columns.wage.max", "Field required"),
        (
            "  smsa: {type: categorical, categories: [no, yes]}",
            "columns.smsa.categories",
            "quote it",
        ),
        ("  smsa: {type: categorical, categories: [a, a]}", "columns.smsa.categories", "distinct"),
        ("  smsa: {type: categorical, categories: []}", "columns.smsa.categories", "at least 1"),
        ("  wage: {type: continuous, min: 0, max: 1, colour: red}", "columns.wage.colour", "Extra"),
        ("  age: {type: continuous, min: 0, max: 9, values: [3]}", "columns.age", "at least two"),
        ("  age: {type: continuous, min: 0, max: 9, values: [3, 2]}", "columns.age", "increasing"),
        ("  age: {type: continuous, min: 0, max: 9, values: [3, 12]}", "columns.age", "within"),
        ("  age: {type: integer, min: 0, max: 9, values: [3, 4]}", "columns.age.values", "Extra"),
    ],
)
def test_schema_errors_name_the_key(tmp_path, columns, key, message):
    with pytest.raises(InputError) as error:
        load_schema(write(tmp_path, BASE + columns + "\n"))
    assert f"{key}:" in str(error.value)
    assert message in str(error.value)


@pytest.mark.parametrize(("given", "named"), [("money", "'money'"), ("[1, 2]", "'[1, 2]'")])
def test_an_unknown_column_type_is_named_with_the_allowed_ones(tmp_path, given, named):
    with pytest.raises(InputError) as error:
        load_schema(write(tmp_path, BASE + f"  amount: {{type: {given}, min: 0, max: 1}}\n"))
    assert f"columns.amount: type {named} is not one of: continuous, integer, categorical" in (
        str(error.value)
    )
    assert "discriminator" not in str(error.value) and "tag" not in str(error.value)


def test_an_integer_written_in_exponent_form_is_explained_with_its_full_form(tmp_path):
    text = BASE.replace("columns:", "max_rows: 1e9\ncolumns:") + (
        "  a: {type: integer, min: 0, max: 1e3}\n  b: {type: integer, min: 0, max: 15e-1}\n"
    )
    with pytest.raises(InputError) as error:
        load_schema(write(tmp_path, text))
    lines = str(error.value).splitlines()[1:]
    assert lines == [
        "  max_rows: YAML reads 1e9 as text, not as a number: write it as 1000000000",
        "  columns.a.max: YAML reads 1e3 as text, not as a number: write it as 1000",
        "  columns.b.max: YAML reads 15e-1 as text, not as a number: an integer is required",
    ]
    text = (
        BASE.replace("columns:", "max_rows: 1.0e+9\ncolumns:")
        + "  a: {type: integer, min: 0, max: 1}\n"
    )
    assert load_schema(write(tmp_path, text)).max_rows == 10**9  # YAML's float form is a number


def test_target_must_be_a_column(tmp_path):
    text = (
        BASE.replace("columns:", "target: nope\ncolumns:")
        + "  a: {type: integer, min: 0, max: 3}\n"
    )
    with pytest.raises(InputError, match="target 'nope' is not one of the columns"):
        load_schema(write(tmp_path, text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dataset: x\ncolumns:\n  a: {type: integer, min: 0, max: 1}\n", "budget: Field required"),
        (BASE.replace("cps1988", "../evil") + "  a: {type: integer, min: 0, max: 1}\n", "dataset:"),
        (
            BASE.replace("epsilon: 6.0", "epsilon: -1") + "  a: {type: integer, min: 0, max: 1}\n",
            "budget.epsilon:",
        ),
        (
            BASE.replace("delta: 1.0e-6", "delta: 1.5") + "  a: {type: integer, min: 0, max: 1}\n",
            "budget.delta:",
        ),
        ("- just\n- a list\n", "must be a YAML mapping"),
        ("dataset: [unclosed\n", "not a readable YAML file"),
    ],
)
def test_schema_file_errors(tmp_path, text, message):
    with pytest.raises(InputError, match=message.replace(".", r"\.").replace("(", r"\(")):
        load_schema(write(tmp_path, text))


def test_missing_schema_file(tmp_path):
    with pytest.raises(InputError, match="schema file not found"):
        load_schema(tmp_path / "absent.yaml")
