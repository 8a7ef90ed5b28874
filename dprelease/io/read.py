"""Opening an input table: the one place that turns file problems into `InputError`s.

`open_dataset` gives a pyarrow dataset over a CSV file, a Parquet file or a directory of
Parquet files (one table); `record_batches` reads it `chunk_rows` rows at a time, file by
file, synchronously (the dataset scanner reads ahead without a bound that holds for a slow
consumer); `column_names` reads only the header. CSV columns are read as strings (numbers are
parsed by `dprelease.io.validate`) with pandas' missing-value markers, `PANDAS_NA_VALUES`.

A CSV row is one line: a quoted value may hold commas and doubled quotes, not a line break.
The header line is parsed on its own (`check_csv_header`) and left out of the data lines,
which are read in blocks of whole lines (`_line_blocks`). A line that cannot be read as a
row of the header's columns is an invalid row: bytes that are not UTF-8 (`_utf8_lines`), a
field too many or too few (pyarrow's `invalid_row_handler`), or a quote still open at the
line's end, which pyarrow would carry on into the next lines (`_rows` sees it and reads the
block again without such lines, `_closed`). With `drop_invalid_lines` such a line is dropped
on its own text alone, never taking another line with it; otherwise the table is refused.
The text of these lines is neither logged nor kept.

Every error names the file and the kind of problem, never a value, a row number or a count:
pyarrow's own messages may quote values, so they are replaced (docs/privacy-model.md
section 8). The header is named only through the schema (`io.validate.column_set_problems`).
"""

from __future__ import annotations

import csv
import itertools
import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from dprelease.errors import InputError

CSV_BLOCK_BYTES = 16 << 20  # a CSV block of 16 MiB (then sliced into chunks)
PARQUET_SUFFIXES = {".parquet", ".pq"}
# pandas.read_csv's default missing-value markers (its documentation, `na_values`).
PANDAS_NA_VALUES = (
    "",
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "-NaN",
    "-nan",
    "1.#IND",
    "1.#QNAN",
    "<NA>",
    "N/A",
    "NA",
    "NULL",
    "NaN",
    "None",
    "n/a",
    "nan",
    "null",
)
NOT_UTF8 = "the file is not UTF-8 encoded text"
FIELD_COUNT = "the file has lines with more or fewer fields than its header"
OPEN_QUOTE = "the file has lines whose quoted value is not closed on the same line"
DROPPED_UNDER_DROP = " (--on-invalid-rows drop drops such lines)"
_LINE_BREAK = re.compile(rb"\r\n?|\n")
# One field as pyarrow's CSV parser reads it: quoted (doubled quotes inside; after the closing
# quote, text up to the next comma) or not (a quote inside it is text). Possessive, as the
# parser never backtracks. A line matches iff the parser ends it outside a quoted value.
_FIELD = rb'(?:"(?:[^"]|"")*+"[^,]*+|[^",][^,]*+|)'
_QUOTES_CLOSED = re.compile(rb"%s(?:,%s)*+" % (_FIELD, _FIELD))


IN_MEMORY = "the table in memory"


def source_name(source: str | Path | pd.DataFrame) -> str:
    """How messages name an input: its path, or `IN_MEMORY`."""
    return IN_MEMORY if isinstance(source, pd.DataFrame) else str(source)


def open_dataset(source: str | Path | pd.DataFrame) -> Any:  # -> pyarrow.dataset.Dataset
    """A pyarrow dataset over a CSV file, a Parquet file, a directory of Parquet files, or a
    table already in memory (the evaluation harness's train split). A CSV file's dataset
    carries the header's names (read here, not by pyarrow: no data line is read)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    if isinstance(source, pd.DataFrame):
        table = guard(IN_MEMORY, lambda: pa.Table.from_pandas(source, preserve_index=False))
        return ds.dataset(table)
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        if not files or any(p.suffix.lower() not in PARQUET_SUFFIXES for p in files):
            raise InputError(f"{path}: a directory input must hold only Parquet files")
        return guard(path, lambda: ds.dataset([str(p) for p in files], format="parquet"))
    if not path.is_file():
        raise InputError(f"{path}: input file not found")
    suffix = path.suffix.lower()
    if suffix in PARQUET_SUFFIXES:
        return guard(path, lambda: ds.dataset(str(path), format="parquet"))
    if suffix != ".csv":
        raise InputError(f"{path}: unsupported file type {suffix!r}; use .csv or .parquet")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty")
    header = pa.schema([(name, pa.string()) for name in check_csv_header(path)])
    return guard(path, lambda: ds.dataset(str(path), schema=header, format="csv"))


def column_names(source: str | Path | pd.DataFrame) -> list[str]:
    """The table's column names, read from the header (CSV) or the schema (Parquet) only."""
    return list(open_dataset(source).schema.names)


def check_csv_header(path: Path) -> list[str]:
    """The names in a CSV file's first line, refusing a header line that is not UTF-8 text
    or does not parse on its own, and one that looks `;`- or tab-separated (a spreadsheet
    export in a locale with decimal commas), which would otherwise show up as every schema
    column missing. A UTF-8 byte-order mark (Excel's "CSV UTF-8") is accepted
    (`utf-8-sig`). Only the first line is read; errors are raised outside `except` blocks,
    so that no decoder's message (which quotes bytes) is chained to them."""
    try:
        with path.open("rb") as file:
            line = _first_line(file)
        names = next(csv.reader([line.decode("utf-8-sig")], strict=True), [])
        problem = None
    except UnicodeDecodeError:
        problem = "the header line is not UTF-8 encoded text"
    except csv.Error:
        problem = "the header line does not parse as CSV"
    except OSError as error:
        problem = f"cannot read the file ({type(error).__name__})"
    if problem:
        raise InputError(f"{path}: {problem}")
    if len(names) == 1:
        for separator, label in ((";", "`;`"), ("\t", "tab")):
            if separator in names[0]:
                raise InputError(
                    f"{path}: the header looks {label}-separated; dprelease reads "
                    "comma-separated CSV (export the file with commas, or as Parquet)"
                )
    return names


def _first_line(file: Any) -> bytes:
    """The bytes of a binary file's first line, without its line break."""
    line = b""
    while block := file.read(1 << 16):
        if found := _LINE_BREAK.search(block):
            return line + block[: found.start()]
        line += block
    return line


def files_of(dataset: Any) -> list[str]:
    """The files behind a dataset (none for a table in memory)."""
    return list(getattr(dataset, "files", []))


def record_batches(
    dataset: Any, columns: list[str], chunk_rows: int, source: str, drop_invalid_lines: bool
) -> Iterator:
    """Record batches of at most `chunk_rows` rows of `columns`, file by file. A CSV line
    that cannot be read as a row is dropped with `drop_invalid_lines`, else refused."""
    import pyarrow.dataset as ds

    if isinstance(dataset, ds.InMemoryDataset):
        yield from dataset.to_table(columns=columns).to_batches(max_chunksize=chunk_rows)
        return
    for file in dataset.files:
        if isinstance(dataset.format, ds.ParquetFileFormat):
            reader = guard(source, partial(_parquet_batches, file, columns, chunk_rows))
        else:
            reader = _csv_batches(file, dataset.schema.names, columns, source, drop_invalid_lines)
        reader = iter(reader)
        while (batch := guard(source, partial(next, reader, None))) is not None:
            for start in range(0, batch.num_rows, chunk_rows):
                yield batch.slice(start, chunk_rows)


def _parquet_batches(file: str, columns: list[str], batch_size: int) -> Iterator:
    """The record batches of `columns` in one Parquet file."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(file).iter_batches(batch_size=batch_size, columns=columns)


def _csv_batches(
    path: str, names: list[str], columns: list[str], source: str, drop_invalid_lines: bool
) -> Iterator:
    """The rows of `columns` in a CSV file's data lines, block by block (module docstring)."""
    problems: set[str] = set()
    for block in _line_blocks(path):
        table = _rows(_utf8_lines(block, problems), names, problems)
        if problems and not drop_invalid_lines:
            lines = [f"{source}: {problem}{DROPPED_UNDER_DROP}" for problem in sorted(problems)]
            raise InputError("\n".join(lines))
        yield from table.select(columns).to_batches()


def _line_blocks(path: str) -> Iterator[bytes]:
    """The data lines of a CSV file in blocks of about `CSV_BLOCK_BYTES` whole lines, without
    the header line."""
    with open(path, "rb") as file:
        rest, header = b"", True
        while True:
            raw = file.read(CSV_BLOCK_BYTES)
            data = rest + raw
            end = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1 if raw else len(data)
            block, rest = data[:end], data[end:]
            if header and block:
                found = _LINE_BREAK.search(block)
                block, header = block[found.end() :] if found else b"", False
            if block:
                yield block
            if not raw:
                return


def _utf8_lines(block: bytes, problems: set[str]) -> bytes:
    """The lines of `block` that are UTF-8 text (the others noted in `problems`)."""
    if _is_utf8(block):
        return block
    problems.add(NOT_UTF8)
    return b"".join(line for line in block.splitlines(keepends=True) if _is_utf8(line))


def _rows(block: bytes, names: list[str], problems: set[str]) -> Any:  # -> pyarrow.Table
    """The rows of whole UTF-8 lines, one per line, the lines that are not rows left out: a
    line with a field too many or too few, and a line whose quote stays open at its end,
    which pyarrow carries on into the next lines: the block is then read again without such
    lines (`_closed`)."""
    table, found = _read_lines(block, names)
    if OPEN_QUOTE in found:
        lines = block.splitlines(keepends=True)
        table, found = _read_lines(b"".join(line for line in lines if _closed(line)), names)
        found.add(OPEN_QUOTE)
    problems.update(found)
    return table


def _read_lines(block: bytes, names: list[str]) -> tuple[Any, set[str]]:
    """pyarrow's reading of whole UTF-8 lines, rows with a field too many or too few left
    out, and the problems seen: `OPEN_QUOTE` when a row ran on past a line break (a value, or
    a left-out row's text, holds one)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    found: set[str] = set()
    if not block:  # every line left out (pyarrow refuses an empty buffer)
        return pa.table({name: pa.array([], pa.string()) for name in names}), found

    def invalid_row(row: Any) -> Literal["skip"]:  # the row's text is neither logged nor kept
        found.add(OPEN_QUOTE if "\n" in row.text or "\r" in row.text else FIELD_COUNT)
        return "skip"

    table = pacsv.read_csv(
        pa.py_buffer(block),  # type: ignore[arg-type]  # a Buffer is read too; stubs omit it
        read_options=pacsv.ReadOptions(column_names=names),
        parse_options=pacsv.ParseOptions(invalid_row_handler=invalid_row),
        convert_options=pacsv.ConvertOptions(
            column_types={name: pa.string() for name in names},
            null_values=list(PANDAS_NA_VALUES),
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
        ),
    )
    if b'"' in block and OPEN_QUOTE not in found:  # only a quoted value holds a line break
        for column, line_break in itertools.product(table.columns, ("\n", "\r")):
            if pc.any(pc.match_substring(column, line_break)).as_py():
                found.add(OPEN_QUOTE)
                break
    return table, found


def _closed(line: bytes) -> bool:
    """Whether pyarrow's parser ends `line` (with its line break) outside a quoted value."""
    return _QUOTES_CLOSED.fullmatch(line) is not None


def _is_utf8(text: bytes) -> bool:
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def guard(source: str | Path, read: Callable[[], Any]) -> Any:
    """Run a pyarrow read; its errors (which may quote values) become a clean `InputError`."""
    import pyarrow as pa

    try:
        return read()
    except UnicodeDecodeError:
        problem = NOT_UTF8
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as error:
        utf8 = "UTF8" in str(error) or "UTF-8" in str(error)
        problem = NOT_UTF8 if utf8 else f"cannot read the file ({type(error).__name__})"
    raise InputError(f"{source}: {problem}")  # outside `except`: no chained pyarrow message
