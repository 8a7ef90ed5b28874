"""The real table in chunks: read, validate, clip and encode in memory bounded by the chunk.

`StreamingInput` reads a CSV file, a Parquet file or a directory of Parquet files (one table)
with pyarrow (`ParquetFile.iter_batches`, the streaming CSV reader; a pyarrow dataset only
for the schema and the file list: its scanner reads ahead without a bound when the consumer
is slower than the disk), `chunk_rows` rows at a time, and yields each chunk validated,
clipped and encoded, `WORKERS` chunks at a time on threads. Peak memory is bounded by the
chunk size and the schema's domain, never by the row count; every pass re-reads the file
(nothing real is written anywhere).

Validation applies the rules of `dprelease.validation.load_validated` (column set, not-null
unless nullable, a number / an integer in numeric columns, categories in the set, bounds:
clip or reject; `--on-invalid-rows drop` drops a row on its own values with `valid_rows`'
rules) with the same messages, but checks them with vectorised pyarrow/numpy code per chunk
instead of the Great Expectations suite: GX costs seconds per million rows, and the rules are
simple enough to state directly. The GX suite stays the in-memory path's validator and checks
the synthetic table; tests/test_streaming.py asserts that both paths give the same messages
for every bad-input class. Differences, by design:
- a refusal stops at the first chunk that fails and names that chunk's problems (the in-memory
  path names every problem of the table); the rest of the file is not read;
- CSV missing markers are pandas' defaults (`PANDAS_NA_VALUES`), applied by pyarrow.

Messages name the file, the column and the kind of problem, never values, row numbers or
counts (PRIVACY_MODEL.md section 8). The row count of a pass is kept in memory only
(`rows_read`: the empty-table refusal and the logistic solver's warm start), never in a
message, a log line or an output.

Privacy of a multi-pass use (the streaming logistic fit re-reads the table): every pass must
see the same rows, so each pass checks that the files' sizes and modification times are
unchanged and refuses otherwise.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.schema import CategoricalColumn, IntegerColumn, Schema
from dprelease.validation import (
    _category_label,
    _column_set_problems,
    clip_to_bounds,
    not_in_categories,
)

CHUNK_ROWS = 262_144
CSV_BLOCK_BYTES = 16 << 20  # a CSV block of 16 MiB (then sliced into chunks)
WORKERS = 2  # chunks validated and encoded at the same time (threads)
# pandas.read_csv's default missing-value markers (its documentation, `na_values`).
PANDAS_NA_VALUES = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
)  # fmt: skip
MISSING = "has missing values but the schema does not mark it nullable"


@dataclass
class _Column:
    """One column of a chunk after parsing: values, validity of each row, and problems."""

    values: np.ndarray  # float64 numbers (NaN: missing) or category codes (-1: missing/unknown)
    present: np.ndarray  # the raw value is not missing
    row_ok: np.ndarray  # the row's value is acceptable (valid_rows' rule)
    type_problem: str | None = None


@dataclass
class StreamingInput:
    """A real table read chunk by chunk with the validation options of a release."""

    path: str
    schema: Schema
    on_out_of_bounds: str = "clip"
    on_invalid_rows: str = "refuse"
    drop_extra_columns: bool = False
    chunk_rows: int = CHUNK_ROWS
    _fingerprint: tuple | None = field(default=None, init=False, repr=False)
    # Rows kept by the last complete pass: private, in memory only, never logged or published;
    # used only to warm-start the streaming logistic solver (`streaming_logistic`).
    rows_read: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.on_out_of_bounds not in ("clip", "reject"):
            raise InputError(
                f"on_out_of_bounds must be 'clip' or 'reject', not {self.on_out_of_bounds!r}"
            )
        if self.on_invalid_rows not in ("refuse", "drop"):
            raise InputError(
                f"on_invalid_rows must be 'refuse' or 'drop', not {self.on_invalid_rows!r}"
            )
        if self.chunk_rows < 1:
            raise ValueError("chunk_rows must be at least 1")

    def tables(self) -> Iterator[pd.DataFrame]:
        """Validated, clipped chunks in the schema's types (what `load_validated` returns,
        chunk by chunk). Raises `InputError` at the first failing chunk."""
        return self.map(lambda table: table)

    def encoded(self, encoder: Encoder) -> Iterator[np.ndarray]:
        """Non-empty chunks encoded with `encoder` (rows in [0, 1]^d)."""
        for chunk in self.map(encoder.encode):
            if chunk.shape[0]:
                yield chunk

    def scan(self, encoder: Encoder, count: Callable[[np.ndarray], list[np.ndarray]]):
        """One pass: validate every chunk and return the sums of `count(encoded chunk)`."""
        totals = count(np.zeros((0, encoder.width)))  # zeros of the right shapes
        for counts in self.map(lambda table: count(encoder.encode(table))):
            totals = [t + c for t, c in zip(totals, counts, strict=True)]
        return totals

    def map(self, function: Callable[[pd.DataFrame], object]) -> Iterator:
        """`function` of every validated chunk, in file order, computed on `WORKERS` threads
        with at most `WORKERS` chunks in flight (pyarrow and numpy release the GIL). An
        `InputError` surfaces at the first failing chunk in file order; later chunks in
        flight are discarded."""
        from concurrent.futures import ThreadPoolExecutor

        def work(batch) -> tuple[int, object]:  # noqa: ANN001
            table = check_chunk(
                batch, self.schema, self.path, self.on_out_of_bounds, self.on_invalid_rows
            )
            return len(table), function(table)

        dataset = self.open_checked()
        batches = _batches(dataset, list(self.schema.columns), self.chunk_rows, self.path)
        rows = 0
        with ThreadPoolExecutor(WORKERS) as pool:
            flight: deque = deque()
            for batch in batches:
                if batch.num_rows:
                    flight.append(pool.submit(work, batch))
                if len(flight) >= WORKERS:
                    kept, result = flight.popleft().result()
                    rows += kept
                    yield result
            while flight:
                kept, result = flight.popleft().result()
                rows += kept
                yield result
        self.rows_read = rows
        if rows == 0 and self.on_invalid_rows == "refuse":
            raise InputError(
                f"{self.path}: the table has no rows (--on-invalid-rows drop releases it anyway)"
            )

    def open_checked(self):  # -> pyarrow.dataset.Dataset
        """The dataset, after the column-set check and the same-input check of every pass."""
        dataset = open_dataset(self.path)
        columns = pd.DataFrame(columns=dataset.schema.names)
        problems = _column_set_problems(columns, self.schema, self.path, self.drop_extra_columns)
        if problems:
            raise InputError("\n".join(problems))
        fingerprint = tuple(sorted((f, _stat(f)) for f in dataset.files))
        if self._fingerprint is None:
            self._fingerprint = fingerprint
        elif fingerprint != self._fingerprint:
            raise InputError(
                f"{self.path}: the input changed while the release was reading it; every pass "
                "must see the same rows (the spend, if reserved, stays spent)"
            )
        return dataset


@dataclass(frozen=True)
class CountedStream:
    """The release's view of a streamed real table after its validation pass: the source to
    re-read and the exact cell counts of that pass. Private: held in memory by tasks that
    never persist results; the counts see noise only after the ledger reservation."""

    source: StreamingInput
    counts: list[np.ndarray]


def _stat(path: str) -> tuple[int, int]:
    info = Path(path).stat()
    return info.st_size, info.st_mtime_ns


def open_dataset(path: str | Path):  # -> pyarrow.dataset.Dataset
    """A pyarrow dataset over a CSV file, a Parquet file or a directory of Parquet files.

    CSV columns are read as strings (numbers are parsed per chunk like `load_validated`
    parses them) with pandas' missing-value markers."""
    import pyarrow.dataset as ds

    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        if not files or any(p.suffix.lower() not in {".parquet", ".pq"} for p in files):
            raise InputError(f"{path}: a directory input must hold only Parquet files")
        return _guard(path, lambda: ds.dataset([str(p) for p in files], format="parquet"))
    if not path.is_file():
        raise InputError(f"{path}: input file not found")
    suffix = path.suffix.lower()
    if suffix in {".parquet", ".pq"}:
        return _guard(path, lambda: ds.dataset(str(path), format="parquet"))
    if suffix != ".csv":
        raise InputError(f"{path}: unsupported file type {suffix!r}; use .csv or .parquet")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty")

    header = _guard(path, lambda: ds.dataset(str(path), format="csv").schema.names)
    csv_format = ds.CsvFileFormat(convert_options=_csv_options(header))
    return _guard(path, lambda: ds.dataset(str(path), format=csv_format))


def _csv_options(names: list[str], include: list[str] | None = None):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    return pacsv.ConvertOptions(
        column_types={name: pa.string() for name in names},
        null_values=list(PANDAS_NA_VALUES),
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
        include_columns=include,
    )


def _batches(dataset, columns: list[str], chunk_rows: int, source: str) -> Iterator:
    """Record batches of at most `chunk_rows` rows, file by file, read synchronously (the
    dataset scanner reads ahead without a bound that holds for a slow consumer); read
    errors become `InputError`."""
    import pyarrow.csv as pacsv
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    for file in dataset.files:
        if isinstance(dataset.format, ds.ParquetFileFormat):
            reader = _guard(source, lambda f=file: pq.ParquetFile(f).iter_batches(
                batch_size=chunk_rows, columns=columns))  # fmt: skip
        else:
            reader = _guard(source, lambda f=file: pacsv.open_csv(
                f, read_options=pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES),
                convert_options=_csv_options(dataset.schema.names, columns)))  # fmt: skip
        reader = iter(reader)
        while (batch := _guard(source, lambda r=reader: next(r, None))) is not None:
            for start in range(0, batch.num_rows, chunk_rows):
                yield batch.slice(start, chunk_rows)


def _guard(source: str | Path, read: Callable):
    """Run a pyarrow read; its errors (which may quote values) become a clean `InputError`."""
    import pyarrow as pa

    try:
        return read()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, UnicodeDecodeError) as error:
        if "UTF8" in str(error) or "UTF-8" in str(error) or isinstance(error, UnicodeDecodeError):
            raise InputError(f"{source}: the file is not UTF-8 encoded text") from None
        raise InputError(f"{source}: cannot read the file ({type(error).__name__})") from None


def check_chunk(
    batch, schema: Schema, source: str, on_out_of_bounds: str, on_invalid_rows: str
) -> pd.DataFrame:
    """Validate one record batch; return its (kept) rows clipped, in the schema's types."""
    columns = {name: _parse(batch.column(name), spec) for name, spec in schema.columns.items()}
    if on_invalid_rows == "drop":
        keep = np.logical_and.reduce([c.row_ok for c in columns.values()])
        if not keep.all():
            for column in columns.values():
                column.values = column.values[keep]
                column.present = column.present[keep]
    problems = []
    for name, column in columns.items():
        if on_invalid_rows == "refuse" and column.type_problem:
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
        if not spec.nullable and np.isnan(numbers).any():
            problems.append(f"{source}: column {name!r} {MISSING}")
        if on_out_of_bounds == "reject":
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
    data = {}
    for name, spec in schema.columns.items():
        values = columns[name].values
        if isinstance(spec, CategoricalColumn):
            data[name] = pd.Categorical.from_codes(values, categories=list(spec.categories))
        else:
            data[name] = values
    return pd.DataFrame(data)


def _parse(array, spec) -> _Column:
    """Parse one column of a batch with `parse_columns`' and `valid_rows`' rules."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(spec, CategoricalColumn):
        codes, present = _category_codes(array, spec)
        return _Column(codes, present, np.where(present, codes >= 0, spec.nullable))
    numbers, present = _numbers(array)
    column = _Column(numbers, present, present | spec.nullable)
    parsed = ~np.isnan(numbers)
    unparsed = present & ~parsed
    column.row_ok &= ~present | parsed
    if unparsed.any():
        column.type_problem = "has values that are not numbers"
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

    Labels follow `validation._category_label`: strings as they are, integers in decimal;
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
    labels = series.map(_category_label, na_action="ignore")
    codes = pd.Categorical(labels, categories=list(spec.categories)).codes.astype(np.int64)
    return codes, present
