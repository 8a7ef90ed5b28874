"""Load the real table and validate it against the public schema.

Steps (`load_validated`):
1. Read CSV (UTF-8; empty cells and pandas' default NA markers are missing values) or
   Parquet.
2. Parse every schema column with its schema type. Numbers that do not parse, or
   non-integers in an integer column, are type errors.
3. Great Expectations (GX Core 1.x, ephemeral context) runs a suite built from the schema
   alone: the column set, not-null unless nullable, numeric values within the bounds,
   categories in the set. Results are requested as ``BOOLEAN_ONLY``: pass/fail per
   expectation, no values, no counts.
4. Rows with an invalid value (a missing value in a non-nullable column, an unknown category,
   a non-number or non-integer in a numeric column) refuse the whole table by default
   (``on_invalid_rows="refuse"``: a curator wants to know). With ``on_invalid_rows="drop"``
   they are dropped instead, and an empty table is accepted: dropping a row depends on that
   row alone, a stable transformation (McSherry 2009) that adds no privacy cost, so it is part
   of the mechanism; then whether a release appears no longer depends on one row. Recommended
   for scheduled deployments.
5. Out-of-bounds numbers are clipped to the bounds (clipping is part of every mechanism,
   PRIVACY_MODEL.md section 2) or refused with ``on_out_of_bounds="reject"``.

Every refusal is an `InputError` that names the file, the column and the kind of problem,
and nothing else: no offending values, no counts. Those messages can travel into Prefect
states and logs, which must stay free of real data (PRIVACY_MODEL.md section 8).

The same suite validates the synthetic table before it is published (`validate_synthetic`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from dprelease.encoding import Encoder, column_dtypes
from dprelease.errors import InputError
from dprelease.schema import CategoricalColumn, IntegerColumn, Schema

OutOfBounds = Literal["clip", "reject"]
InvalidRows = Literal["refuse", "drop"]


@dataclass(frozen=True)
class ExpectationOutcome:
    """Pass/fail of one expectation: safe to persist (no values, no counts)."""

    expectation: str
    column: str | None
    success: bool


@dataclass(frozen=True)
class ValidatedTable:
    """A real table that satisfies the schema, and the pass/fail of every expectation."""

    table: pd.DataFrame
    outcomes: tuple[ExpectationOutcome, ...]


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV or Parquet file; CSV values stay strings until `parse_columns`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: input file not found")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            return pd.read_csv(path, dtype=str, encoding="utf-8", encoding_errors="strict")
        if suffix in {".parquet", ".pq"}:
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pandas()
    except UnicodeDecodeError:
        raise InputError(f"{path}: the file is not UTF-8 encoded text") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, OSError, ValueError) as error:
        raise InputError(f"{path}: cannot read the file ({type(error).__name__})") from None
    raise InputError(f"{path}: unsupported file type {suffix!r}; use .csv or .parquet")


def load_validated(
    path: str | Path,
    schema: Schema,
    *,
    on_out_of_bounds: OutOfBounds = "clip",
    on_invalid_rows: InvalidRows = "refuse",
    drop_extra_columns: bool = False,
) -> ValidatedTable:
    """Read, parse and validate the real table; return it in the schema's column types."""
    if on_out_of_bounds not in ("clip", "reject"):
        raise InputError(f"on_out_of_bounds must be 'clip' or 'reject', not {on_out_of_bounds!r}")
    if on_invalid_rows not in ("refuse", "drop"):
        raise InputError(f"on_invalid_rows must be 'refuse' or 'drop', not {on_invalid_rows!r}")
    source = str(path)
    raw = read_table(path)
    if raw.empty and on_invalid_rows == "refuse":
        raise InputError(
            f"{source}: the table has no rows (--on-invalid-rows drop releases it anyway)"
        )
    problems = _column_set_problems(raw, schema, source, drop_extra_columns)
    if problems:
        raise InputError("\n".join(problems))
    raw = raw[list(schema.columns)]
    if on_invalid_rows == "drop":
        raw = raw[valid_rows(raw, schema)]
    parsed, problems = parse_columns(raw, schema, source)
    outcomes = run_expectations(parsed, schema)
    for outcome in outcomes:
        if outcome.success:
            continue
        if outcome.expectation == "expect_column_values_to_be_between":
            if on_out_of_bounds == "reject":
                problems.append(
                    f"{source}: column {outcome.column!r} has values outside the schema's "
                    "bounds (use --on-out-of-bounds clip to clip them)"
                )
        else:
            problems.append(_describe_failure(source, outcome, schema))
    if problems:
        raise InputError("\n".join(problems))
    return ValidatedTable(clip_to_bounds(parsed, schema), outcomes)


def decode_synthetic(encoder: Encoder, synthetic: np.ndarray) -> pd.DataFrame:
    """Decode generator output to schema types and check it with the schema suite."""
    table = encoder.decode(synthetic)
    validate_synthetic(table, encoder.schema)
    return table


def validate_synthetic(table: pd.DataFrame, schema: Schema) -> tuple[ExpectationOutcome, ...]:
    """Run the schema suite on synthetic rows; any failure is a bug, never published."""
    outcomes = run_expectations(table[list(schema.columns)], schema)
    failed = [outcome for outcome in outcomes if not outcome.success]
    if failed:
        raise RuntimeError(f"synthetic table fails the schema suite: {failed}")
    return outcomes


def _column_set_problems(
    raw: pd.DataFrame, schema: Schema, source: str, drop_extra_columns: bool
) -> list[str]:
    problems = []
    missing = [name for name in schema.columns if name not in raw.columns]
    if missing:
        problems.append(f"{source}: missing columns required by the schema: {', '.join(missing)}")
    extra = [str(name) for name in raw.columns if name not in schema.columns]
    if extra and not drop_extra_columns:
        problems.append(
            f"{source}: columns not in the schema: {', '.join(extra)} "
            "(remove them or pass --drop-extra-columns)"
        )
    return problems


def parse_columns(raw: pd.DataFrame, schema: Schema, source: str) -> tuple[pd.DataFrame, list[str]]:
    """Parse each column with its schema type; return the table and type problems."""
    parsed = {}
    problems = []
    for name, spec in schema.columns.items():
        values = raw[name]
        present = values.notna().to_numpy()
        if isinstance(spec, CategoricalColumn):
            parsed[name] = values.map(_category_label, na_action="ignore").astype(object)
            continue
        numbers = pd.to_numeric(values, errors="coerce").astype("float64")
        if np.any(present & numbers.isna().to_numpy()):
            problems.append(f"{source}: column {name!r} has values that are not numbers")
        elif isinstance(spec, IntegerColumn) and np.any(numbers[present].to_numpy() % 1 != 0):
            problems.append(f"{source}: column {name!r} has values that are not integers")
        parsed[name] = numbers
    return pd.DataFrame(parsed, index=raw.index), problems


def valid_rows(raw: pd.DataFrame, schema: Schema) -> np.ndarray:
    """Per-row validity against the schema, each row judged on its own values only: present
    unless nullable, a known category, a number (an integer for integer columns)."""
    keep = np.ones(len(raw), dtype=bool)
    for name, spec in schema.columns.items():
        values = raw[name]
        present = values.notna().to_numpy()
        ok = present | spec.nullable
        if isinstance(spec, CategoricalColumn):
            labels = values.map(_category_label, na_action="ignore")
            ok &= ~present | labels.isin(spec.categories).to_numpy()
        else:
            numbers = pd.to_numeric(values, errors="coerce").astype("float64").to_numpy()
            ok &= ~present | ~np.isnan(numbers)
            if isinstance(spec, IntegerColumn):
                ok &= ~present | np.isnan(numbers) | (numbers % 1 == 0)
        keep &= ok
    return keep


def _category_label(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def clip_to_bounds(table: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Clip numeric columns to the public bounds and cast to the schema's dtypes."""
    result = {}
    dtypes = column_dtypes(schema)
    for name, spec in schema.columns.items():
        values = table[name]
        if not isinstance(spec, CategoricalColumn):
            values = values.clip(lower=spec.min, upper=spec.max)
        result[name] = values.astype(dtypes[name])
    return pd.DataFrame(result).reset_index(drop=True)


def not_in_categories(spec: CategoricalColumn) -> str:
    """The refusal of unknown categories, naming the schema's (public) labels: values are
    matched as text, so a CSV value 2.0 is not the category "2"."""
    shown = ", ".join(repr(label) for label in spec.categories[:12])
    more = ", ..." if len(spec.categories) > 12 else ""
    return (
        f"has values that are not among the schema's categories ({shown}{more}; values are "
        "matched as text)"
    )


def _describe_failure(source: str, outcome: ExpectationOutcome, schema: Schema) -> str:
    if outcome.expectation == "expect_column_values_to_be_in_set":
        spec = schema.columns[outcome.column]
        return f"{source}: column {outcome.column!r} {not_in_categories(spec)}"
    what = {
        "expect_column_values_to_not_be_null": (
            "has missing values but the schema does not mark it nullable"
        ),
    }.get(outcome.expectation, f"fails {outcome.expectation}")
    return f"{source}: column {outcome.column!r} {what}"


def run_expectations(table: pd.DataFrame, schema: Schema) -> tuple[ExpectationOutcome, ...]:
    """Validate `table` with the GX suite built from `schema`; pass/fail only."""
    batch = _gx_batch_definition().get_batch(batch_parameters={"dataframe": table})
    result = batch.validate(_suite(schema), result_format="BOOLEAN_ONLY")
    return tuple(
        ExpectationOutcome(
            expectation=item.expectation_config.type,
            column=item.expectation_config.kwargs.get("column"),
            success=bool(item.success),
        )
        for item in result.results
    )


def _suite(schema: Schema):  # -> gx.ExpectationSuite
    import great_expectations as gx

    expectations = gx.expectations
    suite = gx.ExpectationSuite(name=f"dprelease-{schema.dataset}")
    for name, spec in schema.columns.items():
        if not spec.nullable:
            suite.add_expectation(expectations.ExpectColumnValuesToNotBeNull(column=name))
        if isinstance(spec, CategoricalColumn):
            suite.add_expectation(
                expectations.ExpectColumnValuesToBeInSet(
                    column=name, value_set=list(spec.categories)
                )
            )
        else:
            suite.add_expectation(
                expectations.ExpectColumnValuesToBeBetween(
                    column=name, min_value=spec.min, max_value=spec.max
                )
            )
    return suite


@cache
def _gx_batch_definition():
    """One ephemeral GX context per process, with a whole-dataframe batch definition."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_pandas("dprelease").add_dataframe_asset("table")
    return asset.add_batch_definition_whole_dataframe("whole-table")
