"""The real table in chunks: read, validate, clip and encode in memory bounded by the chunk.

`StreamingInput` reads a CSV file, a Parquet file or a directory of Parquet files (one table;
`dprelease.io.read`) `chunk_rows` rows at a time and yields each chunk validated and clipped
by `dprelease.io.validate` (the one validator), `WORKERS` chunks at a time on threads. Peak
memory is bounded by the chunk size and the schema's domain, never by the row count; every
pass re-reads the file (nothing real is written anywhere). A refusal stops at the first
chunk that fails and names that chunk's problems; the rest of the file is not read.
`load_validated` is the same reading in memory: every chunk, concatenated (the generators and
weights that need the whole table).

Privacy of a multi-pass use (the streaming logistic fit re-reads the table): every pass must
see the same rows, so each pass checks that the files' sizes and modification times are the
ones seen when the input was opened and refuses otherwise. The number of rows a pass kept is
private: `scan` returns it in memory to its caller (the empty-table refusal, the logistic
solver's warm start), never in a message, a log line or an output. Measurements of memory and
throughput: docs/decisions/0030-scale-and-latency.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dprelease.config import InputPolicy, InvalidRows
from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.io.read import column_names, files_of, open_dataset, record_batches, source_name
from dprelease.io.validate import check_chunk, clip_to_bounds, column_set_problems
from dprelease.schema import Schema

CHUNK_ROWS = 262_144
CHUNK_BYTES = 64 * 2**20  # one encoded chunk at most (float64); WORKERS of them in flight
WORKERS = 2  # chunks validated and encoded at the same time (threads)
Counts = list[np.ndarray]
NO_ROWS = "the table has no rows (--on-invalid-rows drop releases it anyway)"
DEFAULT_POLICY = InputPolicy()


def chunk_rows_for(width: int) -> int:
    """Rows per chunk for an encoding `width` columns wide: CHUNK_ROWS, fewer when an encoded
    chunk would pass CHUNK_BYTES. A one-hot-wide table would hold WORKERS chunks of
    262,144 x 134 float64 values in flight (880 MB at the scan for 8 MB of counts); narrow
    ones (the census-like table, 14 wide) keep the full chunk
    (docs/decisions/0030-scale-and-latency.md)."""
    return max(1, min(CHUNK_ROWS, CHUNK_BYTES // (8 * max(width, 1))))


@dataclass(frozen=True)
class Scan:
    """One pass's exact counts and the number of rows it kept (both private, in memory)."""

    counts: Counts
    rows: int


@dataclass(frozen=True)
class StreamingInput:
    """A real table read chunk by chunk with the input policy of a release."""

    source: str | Path | pd.DataFrame
    schema: Schema
    policy: InputPolicy = DEFAULT_POLICY
    chunk_rows: int = CHUNK_ROWS
    _fingerprint: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.chunk_rows < 1:
            raise ValueError("chunk_rows must be at least 1")
        object.__setattr__(self, "_fingerprint", _fingerprint(self._open()))

    @property
    def name(self) -> str:
        """The input as messages name it (its path)."""
        return source_name(self.source)

    def tables(self) -> Iterator[pd.DataFrame]:
        """Validated, clipped chunks in the schema's types. Raises `InputError` at the first
        failing chunk."""
        return self.map(lambda table: table)

    def encoded(self, encoder: Encoder) -> Generator[np.ndarray, None, None]:
        """Non-empty chunks encoded with `encoder` (rows in [0, 1]^d)."""
        for chunk in self.map(encoder.encode):
            if chunk.shape[0]:
                yield chunk

    def scan(self, encoder: Encoder, count: Callable[[np.ndarray], Counts]) -> Scan:
        """One pass: validate every chunk; the sums of `count(encoded chunk)` and the rows."""
        totals = count(np.zeros((0, encoder.width)))  # zeros of the right shapes
        rows = 0
        for kept, counts in self.map(lambda table: (len(table), count(encoder.encode(table)))):
            totals = [t + c for t, c in zip(totals, counts, strict=True)]
            rows += kept
        return Scan(totals, rows)

    def map(self, function: Callable[[pd.DataFrame], Any]) -> Iterator:
        """`function` of every validated chunk, in file order, computed on `WORKERS` threads
        with at most `WORKERS` chunks in flight (pyarrow and numpy release the GIL). An
        `InputError` surfaces at the first failing chunk in file order; later chunks in
        flight are discarded. An empty table is refused under `refuse`."""
        from concurrent.futures import ThreadPoolExecutor

        def work(batch: Any) -> tuple[int, Any]:
            table = check_chunk(batch, self.schema, self.name, self.policy)
            return len(table), function(table)

        batches = record_batches(
            self.open_checked(),
            list(self.schema.columns),
            self.chunk_rows,
            self.name,
            drop_invalid_lines=self.policy.on_invalid_rows == InvalidRows.drop,
        )
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
        if rows == 0 and self.policy.on_invalid_rows == InvalidRows.refuse:
            raise InputError(f"{self.name}: {NO_ROWS}")

    def open_checked(self) -> Any:  # -> pyarrow.dataset.Dataset
        """The dataset, after the same-input check of every pass."""
        dataset = self._open()
        if _fingerprint(dataset) != self._fingerprint:
            raise InputError(
                f"{self.name}: the input changed while the release was reading it; every pass "
                "must see the same rows (the spend, if reserved, stays spent)"
            )
        return dataset

    def _open(self) -> Any:
        dataset = open_dataset(self.source)
        problems = column_set_problems(
            dataset.schema.names, self.schema, self.name, self.policy.drop_extra_columns
        )
        if problems:
            raise InputError("\n".join(problems))
        return dataset


def _fingerprint(dataset: Any) -> tuple:
    def stat(path: str) -> tuple[int, int]:
        info = Path(path).stat()
        return info.st_size, info.st_mtime_ns

    return tuple(sorted((f, stat(f)) for f in files_of(dataset)))


def load_validated(
    source: str | Path | pd.DataFrame, schema: Schema, policy: InputPolicy = DEFAULT_POLICY
) -> pd.DataFrame:
    """The whole real table, validated and clipped, in the schema's column types."""
    chunks = list(StreamingInput(source, schema, policy).tables())
    if not chunks:
        return clip_to_bounds(pd.DataFrame({name: [] for name in schema.columns}), schema)
    return pd.concat(chunks, ignore_index=True)


def preflight(path: str | Path, schema: Schema, policy: InputPolicy) -> None:
    """What can be checked about an input without reading its values: the file exists and is
    readable, its type is supported, a CSV header line is UTF-8 and parses, and the column
    set fits (only the header line of a CSV file is read)."""
    problems = column_set_problems(column_names(path), schema, str(path), policy.drop_extra_columns)
    if problems:
        raise InputError("\n".join(problems))
