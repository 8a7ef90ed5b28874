"""The public schema as a Great Expectations Expectation Suite.

Derived from the public schema alone (`Schema.public_dict()`, or the `schema` of a release's
manifest), so the suite is public and may be published. It states the schema's rules about a
table of the schema, with core GX expectations only (any GX installation reads it):

- the column set (`expect_table_columns_to_match_set`, exact) and the schema's column order
  (`expect_table_columns_to_match_ordered_list`);
- per column, in the schema's order: a value in every row unless the column is `nullable`
  (`expect_column_values_to_not_be_null`); an integer type for `integer` columns
  (`expect_column_values_to_be_in_type_list`: numpy and pandas integer dtypes, SQL and Spark
  integer types); the bounds `[min, max]`, inclusive (`expect_column_values_to_be_between`);
  the category set of a `categorical` column and the codebook `values` of a continuous column
  (`expect_column_values_to_be_in_set`).

Each expectation's `meta.schema` names the schema key it comes from and its `notes` what it
means for the real table where dprelease's own validator treats it differently (it clips
numbers outside the bounds by default, rounds a value between two codebook values to the
nearer one, and reads the columns in any order).

GX matches column names regardless of case (`great_expectations.expectations.metrics.util`:
the first batch column whose name is equal after `casefold`), so a schema with two column
names equal but for case is refused (`InputError`): the suite could not tell them apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dprelease.errors import InputError
from dprelease.expectations import require_gx

if TYPE_CHECKING:
    from great_expectations import ExpectationSuite
    from great_expectations.expectations import Expectation

    from dprelease.schema import Schema

INTEGER_TYPES = (
    # numpy and pandas (nullable) integer dtypes
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "Int8Dtype",
    "Int16Dtype",
    "Int32Dtype",
    "Int64Dtype",
    "UInt8Dtype",
    "UInt16Dtype",
    "UInt32Dtype",
    "UInt64Dtype",
    # SQL (SQLAlchemy type names) and Spark
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "ByteType",
    "ShortType",
    "IntegerType",
    "LongType",
)
SUITE_NOTES = (
    "Derived by dprelease from the public schema of dataset {dataset!r} alone: it is public "
    "and may be published. Results of this suite on a release's synthetic table (a DP "
    "output) may be published; results on the real table are validation statistics of the "
    "real data and must stay inside the curator's trust boundary."
)
BOUNDS_NOTE = (
    "On the real table, dprelease clips numbers outside the bounds to them (or, with "
    "--on-out-of-bounds reject, treats their rows as invalid)."
)
CODEBOOK_NOTE = (
    "On the real table, dprelease counts a value between two codebook values as the nearer one."
)
ORDER_NOTE = "dprelease reads the real table's columns in any order."


def suite_name(dataset: str) -> str:
    """The suite's name: `dprelease.<dataset>`."""
    return f"dprelease.{dataset}"


def expectation_suite(schema: Schema | Mapping[str, Any]) -> ExpectationSuite:
    """The public schema as a Great Expectations Expectation Suite: the column set and order,
    a value in every non-nullable column, integer types, bounds, categories and codebook
    values (the module docstring has the details). Derived from the schema alone, the suite
    may be published. This module imports no more of dprelease than `errors` and
    `expectations`, so the verifier uses it too.

    Args:
        schema: A `Schema`, or its public dict (`Schema.public_dict()`, a manifest's
            `schema`).

    Returns:
        A `great_expectations.ExpectationSuite`; `.to_json_dict()` is GX's suite JSON.

    Raises:
        MissingExtraError: Great Expectations is not installed (`pip install
            'dprelease[gx]'`).
        InputError: Two column names differ only in case (GX cannot tell them apart).
    """
    gx = require_gx()
    public = schema.public_dict() if hasattr(schema, "public_dict") else schema
    columns: Mapping[str, Mapping[str, Any]] = public["columns"]
    _refuse_names_equal_but_for_case(list(columns))
    expectations = _table_expectations(gx.expectations, list(columns))
    for name, spec in columns.items():
        expectations += _column_expectations(gx.expectations, name, spec)
    dataset = str(public["dataset"])
    return gx.ExpectationSuite(
        name=suite_name(dataset),
        expectations=expectations,
        meta={"dprelease": {"dataset": dataset, "derived_from": "the public schema"}},
        notes=SUITE_NOTES.format(dataset=dataset),
    )


def suite_json(schema: Schema | Mapping[str, Any]) -> dict:
    """The suite as GX's own JSON (what GX stores in `gx/expectations/<name>.json`)."""
    return expectation_suite(schema).to_json_dict()


def _table_expectations(gxe: Any, names: list[str]) -> list[Expectation]:
    return [
        gxe.ExpectTableColumnsToMatchSet(
            column_set=names, exact_match=True, meta={"schema": "columns"}
        ),
        gxe.ExpectTableColumnsToMatchOrderedList(
            column_list=names, meta={"schema": "columns"}, notes=ORDER_NOTE
        ),
    ]


def _column_expectations(gxe: Any, name: str, spec: Mapping[str, Any]) -> list[Expectation]:
    """The expectations of one column, in the order of the module docstring."""
    key = f"columns.{name}"
    kind = spec["type"]
    expectations: list[Expectation] = []
    if not spec.get("nullable", False):
        expectations.append(
            gxe.ExpectColumnValuesToNotBeNull(column=name, meta={"schema": f"{key}.nullable"})
        )
    if kind == "categorical":
        expectations.append(
            gxe.ExpectColumnValuesToBeInSet(
                column=name,
                value_set=[str(category) for category in spec["categories"]],
                meta={"schema": f"{key}.categories"},
            )
        )
        return expectations
    if kind == "integer":
        expectations.append(
            gxe.ExpectColumnValuesToBeInTypeList(
                column=name, type_list=list(INTEGER_TYPES), meta={"schema": f"{key}.type"}
            )
        )
    number = int if kind == "integer" else float
    expectations.append(
        gxe.ExpectColumnValuesToBeBetween(
            column=name,
            min_value=number(spec["min"]),
            max_value=number(spec["max"]),
            meta={"schema": f"{key}.min, {key}.max"},
            notes=BOUNDS_NOTE,
        )
    )
    if spec.get("values") is not None:
        expectations.append(
            gxe.ExpectColumnValuesToBeInSet(
                column=name,
                value_set=[float(value) for value in spec["values"]],
                meta={"schema": f"{key}.values"},
                notes=CODEBOOK_NOTE,
            )
        )
    return expectations


def _refuse_names_equal_but_for_case(names: list[str]) -> None:
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(name.casefold(), name)
        if other != name:
            raise InputError(
                f"columns {other!r} and {name!r} differ only in case: Great Expectations "
                "matches column names regardless of case, so a suite cannot check them apart"
            )
