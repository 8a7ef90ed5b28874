"""The one validator of tables against the public schema: the real table, chunk by chunk
(in memory or streamed), and the synthetic table before it is published.

Rules (`check_chunk`, applied to each record batch of the input):
- the column set: every schema column present; extra columns refused unless
  `drop_extra_columns` (`column_set_problems`);
- a value in every non-nullable column; numbers that parse as finite numbers (integers in
  integer columns; an infinite number is invalid, never clipped to a bound); categories in
  the schema's set (values matched as text: strings as they are, integers in decimal);
- numbers outside the bounds are clipped to them (clipping is part of every mechanism,
  docs/privacy-model.md section 2) or, with `on_out_of_bounds="reject"`, make the row invalid;
- with `on_invalid_rows="refuse"` (the default) any invalid row refuses the table; with
  `"drop"` a row with an invalid value (missing where not nullable, unknown category,
  non-number, infinite number, non-integer, out of bounds under `reject`) is dropped on its
  own values alone (never the whole table for one row): a stable transformation
  (McSherry 2009) that adds no privacy cost and makes the release independent of any one row.
  A CSV line that cannot be read as a row is an invalid row too (`dprelease.io.read`).
The rules are vectorised pyarrow/numpy code (a Great Expectations suite cost seconds per
million rows, and the rules are simple enough to state directly).

Every refusal is an `InputError` naming the file, the column and the kind of problem, never
values, row numbers or counts: messages can travel into Prefect states and logs, which must
stay free of real data (docs/privacy-model.md section 8).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dprelease.config import InputPolicy, InvalidRows, OutOfBounds
from dprelease.encoding import Encoder, column_dtypes, in_codebook
from dprelease.errors import InputError
from dprelease.schema import CategoricalColumn, IntegerColumn, Schema

MISSING = "has missing values but the schema does not mark it nullable"
STRICT = InputPolicy(  # for the synthetic table: any broken row is a bug
    on_out_of_bounds=OutOfBounds.reject, on_invalid_rows=InvalidRows.refuse
)


@dataclass
class _Column:
    """One column of a chunk after parsing: values, validity of each row, and problems."""

    values: np.ndarray  # float64 numbers (NaN: missing) or category codes (-1: missing/unknown)
    present: np.ndarray  # the raw value is not missing
    row_ok: np.ndarray  # the row's value is acceptable on its own
    type_problem: str | None = None


def check_chunk(batch, schema: Schema, source: str, policy: InputPolicy) -> pd.DataFrame:  # noqa: ANN001
    """Validate one record batch; return its (kept) rows clipped, in the schema's types."""
    on_invalid_rows, on_out_of_bounds = policy.on_invalid_rows, policy.on_out_of_bounds
    columns = {name: _parse(batch.column(name), spec) for name, spec in schema.columns.items()}
    if on_out_of_bounds == OutOfBounds.reject:
        for name, spec in schema.columns.items():
            if not isinstance(spec, CategoricalColumn):
                with np.errstate(invalid="ignore"):
                    numbers = columns[name].values
                    columns[name].row_ok &= ~((numbers < spec.min) | (numbers > spec.max))
    if on_invalid_rows == InvalidRows.drop:
        keep = np.logical_and.reduce([c.row_ok for c in columns.values()])
        if not keep.all():
            for column in columns.values():
                column.values = column.values[keep]
                column.present = column.present[keep]
    problems = []
    for name, column in columns.items():
        if on_invalid_rows == InvalidRows.refuse and column.type_problem:
            problems.append(f"{source}: column {name!r} {column.type_problem}")
    for name, spec in schema.columns.items():
        column = columns[name]
        if isinstance(spec, CategoricalColumn):
            if not spec.nullable and not column.present.all():
                problems.append(f"{source}: column {name!r} {MISSING}")
            if (column.present & (column.values < 0)).any():
                problems.append(f"{source}: column {name!r} {not_in_categories(spec)}")
            continue
        numbers = column.values
        if not spec.nullable and not column.present.all():  # not NaN: a non-number is present
            problems.append(f"{source}: column {name!r} {MISSING}")
        if on_out_of_bounds == OutOfBounds.reject:
            with np.errstate(invalid="ignore"):
                outside = (numbers < spec.min) | (numbers > spec.max)
            if outside.any():
                problems.append(
                    f"{source}: column {name!r} has values outside the schema's bounds "
                    "(use --on-out-of-bounds clip to clip them)"
                )
    if problems:
        raise InputError("\n".join(problems))
    return clip_to_bounds(_frame(columns, schema), schema)


def _frame(columns: dict[str, _Column], schema: Schema) -> pd.DataFrame:
    data: dict[str, pd.Categorical[str] | np.ndarray] = {}
    for name, spec in schema.columns.items():
        values = columns[name].values
        if isinstance(spec, CategoricalColumn):
            data[name] = pd.Categorical.from_codes(values, categories=pd.Index(spec.categories))
        else:
            data[name] = values
    return pd.DataFrame(data)


def _parse(array, spec) -> _Column:
    """Parse one column of a batch: values, presence, per-row validity, type problem."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(spec, CategoricalColumn):
        codes, present = _category_codes(array, spec)
        return _Column(codes, present, np.where(present, codes >= 0, spec.nullable))
    numbers, present = _numbers(array)
    infinite = np.isinf(numbers)
    numbers = np.where(infinite, np.nan, numbers)  # invalid like a non-number, never clipped
    column = _Column(numbers, present, present | spec.nullable)
    parsed = ~np.isnan(numbers)
    unparsed = present & ~parsed
    column.row_ok &= ~present | parsed
    if (unparsed & ~infinite).any():
        column.type_problem = "has values that are not numbers"
    elif infinite.any():
        column.type_problem = "has values that are not finite numbers"
    elif isinstance(spec, IntegerColumn):
        with np.errstate(invalid="ignore"):
            fractional = present & (numbers % 1 != 0)
        column.row_ok &= ~(fractional & parsed)
        if fractional.any():
            column.type_problem = "has values that are not integers"
    return column


def _numbers(array) -> tuple[np.ndarray, np.ndarray]:
    """float64 values (NaN where missing or unparsable) and the raw "present" mask."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_dictionary(kind):
        array, kind = array.dictionary_decode(), kind.value_type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        numbers = pc.cast(array, pa.float64()).to_numpy(zero_copy_only=False)
        return numbers, ~np.isnan(numbers)
    series = array.to_pandas()
    present = series.notna().to_numpy()
    numbers = pd.to_numeric(series, errors="coerce").astype("float64").to_numpy()
    return numbers, present


def _category_codes(array, spec: CategoricalColumn) -> tuple[np.ndarray, np.ndarray]:
    """Index of each value in the schema's categories (-1: missing or unknown) and presence.

    Labels follow `category_label`: strings as they are, integers in decimal;
    other types (floats, booleans) go through that function itself."""
    import pyarrow as pa
    import pyarrow.compute as pc

    categories = pa.array(spec.categories, type=pa.string())
    if pa.types.is_dictionary(array.type):
        in_dictionary = _category_codes(array.dictionary, spec)[0]
        present = array.is_valid().to_numpy(zero_copy_only=False)
        indices = array.indices.fill_null(0).to_numpy(zero_copy_only=False)
        return np.where(present, in_dictionary[indices], -1), present
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind):
        labels = array if not pa.types.is_integer(kind) else pc.cast(array, pa.string())
        codes = pc.index_in(labels, value_set=categories).fill_null(-1)
        present = array.is_valid().to_numpy(zero_copy_only=False)
        return codes.to_numpy(zero_copy_only=False).astype(np.int64), present
    series = array.to_pandas()
    present = series.notna().to_numpy()
    labels = series.map(category_label, na_action="ignore")
    codes = pd.Categorical(labels, categories=list(spec.categories)).codes.astype(np.int64)
    return codes, present


def column_set_problems(
    names: list[str], schema: Schema, source: str, drop_extra_columns: bool
) -> list[str]:
    """Repeated names (first: a repeated name often takes a schema column's place), missing
    schema columns, and (unless dropped) columns the schema does not have. Schema columns
    are named (they are public); a name that is not a schema column may be a real value (the
    first row of a CSV file without its header line), so such names are counted, never
    shown."""
    known = [name for name in names if name in schema.columns]
    if names and not known:
        return [
            f"{source}: no column name is a schema column ({', '.join(schema.columns)}): the "
            "file may have no header line"
        ]
    problems = []
    counts = Counter(names)
    repeated = [name for name in schema.columns if counts[name] > 1]
    repeated_other = sum(1 for name, n in counts.items() if n > 1 and name not in schema.columns)
    if repeated or repeated_other:
        shown = ", ".join(repeated)
        if repeated_other:
            others = f"{_counted(repeated_other, 'name')} not in the schema"
            shown = f"{shown}; {others}" if shown else others
        problems.append(
            f"{source}: duplicate column names in the header: {shown} (each column needs a "
            "distinct name)"
        )
    missing = [name for name in schema.columns if name not in names]
    if missing:
        problems.append(f"{source}: missing columns required by the schema: {', '.join(missing)}")
    extra = len(names) - len(known)
    if extra and not drop_extra_columns:
        problems.append(
            f"{source}: {_counted(extra, 'column')} not in the schema "
            "(remove them or pass --drop-extra-columns)"
        )
    return problems


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


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


def category_label(value: object) -> str:
    """A value as category text: integers (also integral floats) in decimal."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def decode_synthetic(encoder: Encoder, synthetic: np.ndarray) -> pd.DataFrame:
    """Decode generator output to schema types and check it with the same rules."""
    table = encoder.decode(synthetic)
    check_synthetic(table, encoder.schema)
    return table


def check_synthetic(table: pd.DataFrame, schema: Schema) -> None:
    """The schema's rules on synthetic rows, nothing clipped or dropped; any failure is a
    bug (RuntimeError) and the rows are never published."""
    import pyarrow as pa

    batch = pa.RecordBatch.from_pandas(table[list(schema.columns)], preserve_index=False)
    try:
        check_chunk(batch, schema, "synthetic table", STRICT)
    except InputError as error:
        raise RuntimeError(f"synthetic table fails the schema's rules: {error}") from None
    for name, spec in schema.columns.items():
        codebook = getattr(spec, "values", None)
        if codebook is not None and not in_codebook(table[name].dropna(), codebook).all():
            raise RuntimeError(f"synthetic table fails the schema's rules: {name} off its codebook")
