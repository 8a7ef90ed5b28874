"""Opening an input table: the one place that turns file problems into `InputError`s.

`open_dataset` gives a pyarrow dataset over a CSV file, a Parquet file or a directory of
Parquet files (one table); `record_batches` reads it `chunk_rows` rows at a time, file by
file, synchronously (the dataset scanner reads ahead without a bound that holds for a slow
consumer); `column_names` reads only the header. CSV columns are read as strings (numbers are
parsed by `dprelease.io.validate`) with pandas' missing-value markers, `PANDAS_NA_VALUES`.

Every error names the file and the kind of problem, never a value, a row number or a count:
pyarrow's own messages may quote values, so they are replaced (docs/privacy-model.md
section 8).
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from dprelease.errors import InputError

CSV_BLOCK_BYTES = 16 << 20  # a CSV block of 16 MiB (then sliced into chunks)
PARQUET_SUFFIXES = {".parquet", ".pq"}
# pandas.read_csv's default missing-value markers (its documentation, `na_values`).
PANDAS_NA_VALUES = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
)  # fmt: skip


IN_MEMORY = "the table in memory"


def source_name(source: str | Path | pd.DataFrame) -> str:
    """How messages name an input: its path, or `IN_MEMORY`."""
    return IN_MEMORY if isinstance(source, pd.DataFrame) else str(source)


def open_dataset(source: str | Path | pd.DataFrame) -> Any:  # -> pyarrow.dataset.Dataset
    """A pyarrow dataset over a CSV file, a Parquet file, a directory of Parquet files, or a
    table already in memory (the evaluation harness's train split)."""
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
    check_csv_header(path)
    header = guard(path, lambda: ds.dataset(str(path), format="csv").schema.names)
    csv_format = ds.CsvFileFormat(convert_options=_csv_options(header))
    return guard(path, lambda: ds.dataset(str(path), format=csv_format))


def column_names(source: str | Path | pd.DataFrame) -> list[str]:
    """The table's column names, read from the header (CSV) or the schema (Parquet) only."""
    return list(open_dataset(source).schema.names)


def check_csv_header(path: Path) -> None:
    """Refuse a CSV header that pyarrow would misread, naming the problem: a duplicated
    column name (pyarrow says only "ArrowInvalid"), or a header that looks `;`- or
    tab-separated (a spreadsheet export in a locale with decimal commas), which would
    otherwise show up as every schema column missing. A UTF-8 byte-order mark (Excel's
    "CSV UTF-8") is accepted: pyarrow skips it, and so does this check (`utf-8-sig`). Only
    the header is read; column names are not values."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as file:
            names = next(csv.reader(file), [])
    except UnicodeDecodeError:
        raise InputError(f"{path}: the file is not UTF-8 encoded text") from None
    except (OSError, csv.Error) as error:
        raise InputError(f"{path}: cannot read the file ({type(error).__name__})") from None
    duplicated = [name for name, count in Counter(names).items() if count > 1]
    if duplicated:
        raise InputError(
            f"{path}: duplicate column names in the header: {', '.join(duplicated)} (each "
            "column needs a distinct name)"
        )
    if len(names) == 1:
        for separator, label in ((";", "`;`"), ("\t", "tab")):
            if separator in names[0]:
                raise InputError(
                    f"{path}: the header looks {label}-separated; dprelease reads "
                    "comma-separated CSV (export the file with commas, or as Parquet)"
                )


def files_of(dataset: Any) -> list[str]:
    """The files behind a dataset (none for a table in memory)."""
    return list(getattr(dataset, "files", []))


def _csv_options(names: list[str], include: list[str] | None = None) -> Any:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    return pacsv.ConvertOptions(
        column_types={name: pa.string() for name in names},
        null_values=list(PANDAS_NA_VALUES),
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
        include_columns=include,
    )


def record_batches(dataset: Any, columns: list[str], chunk_rows: int, source: str) -> Iterator:
    """Record batches of at most `chunk_rows` rows of `columns`, file by file."""
    import pyarrow.csv as pacsv
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    if isinstance(dataset, ds.InMemoryDataset):
        yield from dataset.to_table(columns=columns).to_batches(max_chunksize=chunk_rows)
        return
    for file in dataset.files:
        if isinstance(dataset.format, ds.ParquetFileFormat):
            reader = guard(source, lambda f=file: pq.ParquetFile(f).iter_batches(
                batch_size=chunk_rows, columns=columns))  # fmt: skip
        else:
            reader = guard(source, lambda f=file: pacsv.open_csv(
                f, read_options=pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES),
                convert_options=_csv_options(dataset.schema.names, columns)))  # fmt: skip
        reader = iter(reader)
        while (batch := guard(source, lambda r=reader: next(r, None))) is not None:
            for start in range(0, batch.num_rows, chunk_rows):
                yield batch.slice(start, chunk_rows)


def guard(source: str | Path, read: Callable[[], Any]) -> Any:
    """Run a pyarrow read; its errors (which may quote values) become a clean `InputError`."""
    import pyarrow as pa

    try:
        return read()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, UnicodeDecodeError) as error:
        if "UTF8" in str(error) or "UTF-8" in str(error) or isinstance(error, UnicodeDecodeError):
            raise InputError(f"{source}: the file is not UTF-8 encoded text") from None
        raise InputError(f"{source}: cannot read the file ({type(error).__name__})") from None
