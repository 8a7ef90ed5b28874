"""Chunked counting on Dask DataFrames, for a real table larger than one machine.

`dask_cell_counts` reads the Parquet input with `dask.dataframe.read_parquet`; each partition
is validated, clipped and encoded by the same code as a chunk of `dprelease.io.stream`
(`io.validate.check_chunk`, `Encoder.encode`), and counted with the generator's own query
(`cell_counts`). The exact per-partition counts are summed by a tree reduction and only the
sum comes back; the noise is then drawn ONCE, on the reduced counts, by the caller
(`IndependentMarginals.fit_counts`), never per partition: per-partition noise would be a
different mechanism (k times the noise variance for k partitions) and is not what the
ledger reserves (docs/decisions/0030-scale-and-latency.md).

What crosses the network (docs/how-to/scale.md): the workers read the files themselves (they need
access to the path), and send exact, private cell counts to the client. Both ends must sit
inside the curator's trust boundary; nothing is written to disk by this code (configure the
workers without spilling). Errors raised on a worker are `InputError`s with the same clean
messages as the one-machine path.

Without a `distributed.Client` the computation runs on Dask's local threads.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from dprelease.config import InvalidRows
from dprelease.encoding import Encoder
from dprelease.errors import InputError, require
from dprelease.io.stream import NO_ROWS, StreamingInput
from dprelease.io.validate import check_chunk

Counts = list[np.ndarray]


def partition_counts(
    frame: pd.DataFrame,
    source: StreamingInput,
    encoder: Encoder,
    count: Callable[[np.ndarray], Counts],
) -> Counts:
    """Validate, clip, encode and count one partition (runs on a worker)."""
    import pyarrow as pa

    batch = pa.RecordBatch.from_pandas(frame[list(source.schema.columns)], preserve_index=False)
    return count(encoder.encode(check_chunk(batch, source.schema, source.name, source.policy)))


def _add(parts: list[Counts]) -> Counts:
    return [np.sum(cells, axis=0) for cells in zip(*parts, strict=True)]


def dask_cell_counts(
    source: StreamingInput, encoder: Encoder, count: Callable[[np.ndarray], Counts]
) -> Counts:
    """Exact counts over every partition of `source` (Parquet), summed by a tree reduction.

    The column set is checked first, on the client; an empty table is refused like the
    one-machine path (the emptiness is read from the summed counts, never reported)."""
    require("dask", "counting on Dask")
    import dask
    import dask.dataframe as dd

    source.open_checked()  # column set, readable Parquet: clean errors before any task
    frame = dd.read_parquet(source.source, columns=list(source.schema.columns))
    parts = [
        dask.delayed(partition_counts)(part, source, encoder, count) for part in frame.to_delayed()
    ]
    empty = count(np.zeros((0, encoder.width)))
    while len(parts) > 1:  # a tree of pairwise sums: the client receives one result
        parts = [dask.delayed(_add)(parts[i : i + 2]) for i in range(0, len(parts), 2)]
    totals = _add([empty, dask.compute(parts[0])[0]]) if parts else empty
    if source.policy.on_invalid_rows == InvalidRows.refuse and totals[0].sum() == 0:
        raise InputError(f"{source.name}: {NO_ROWS}")
    return totals
