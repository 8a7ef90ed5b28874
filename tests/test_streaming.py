"""Reading in chunks (any chunk size) gives what reading the whole table gives, on every
input class: the same table, or the same refusal."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
import yaml
from leak_checks import exception_text

from dprelease.config import InputPolicy
from dprelease.datasets import census_like
from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.generators.marginals import IndependentMarginals
from dprelease.io.stream import StreamingInput, load_validated
from dprelease.schema import load_schema

SCHEMA = load_schema(Path(__file__).parent.parent / "data" / "census.yaml")
REFUSE = InputPolicy(on_invalid_rows="refuse")
ENCODER = Encoder(SCHEMA)
CHUNK = 64  # several chunks per test table


def write(frame: pd.DataFrame, tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"table.{kind}"
    if kind == "csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return path


def base(n: int = 300) -> pd.DataFrame:
    frame = census_like(n, seed=3).astype(str)
    return frame.replace({"nan": ""})


def both(path: Path | pd.DataFrame, **options) -> tuple[object, object]:
    """(in-memory outcome, streaming outcome): a table or the InputError message (under
    `refuse` unless `options` say otherwise)."""
    options = {"on_invalid_rows": "refuse", **options}
    outcomes = []
    source = path if isinstance(path, pd.DataFrame) else str(path)
    for load in (
        lambda: load_validated(path, SCHEMA, InputPolicy(**options)),
        lambda: pd.concat(
            list(StreamingInput(source, SCHEMA, InputPolicy(**options), CHUNK).tables()),
            ignore_index=True,
        ),
    ):
        try:
            outcomes.append(load())
        except InputError as error:
            outcomes.append(str(error))
    return outcomes[0], outcomes[1]


def set_at(column: str, value: str, rows=(5, 200)):  # noqa: ANN201
    def edit(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        frame.loc[list(rows), column] = value
        return frame

    return edit


BAD = {
    "unknown category": (set_at("region", "atlantis"), {}),
    "missing non-nullable": (set_at("sex", ""), {}),
    "missing numeric": (set_at("hours", ""), {}),
    "not a number": (set_at("wage", "lots"), {}),
    "not an integer": (set_at("age", "41.5"), {}),
    "out of bounds, reject": (set_at("age", "123"), {"on_out_of_bounds": "reject"}),
    "out of bounds, clip": (set_at("wage", "987654.5"), {}),
    "nullable missing is fine": (set_at("capital_gain", ""), {}),
    "extra column": (lambda f: f.assign(ssn="x"), {}),
    "extra column dropped": (lambda f: f.assign(ssn="x"), {"drop_extra_columns": True}),
    "missing columns": (lambda f: f.drop(columns=["hours", "sex"]), {}),
    "several problems": (lambda f: set_at("wage", "lots")(set_at("region", "x")(f)), {}),
    "no rows": (lambda f: f.iloc[:0], {}),
}


# Every case on CSV; on Parquet (string columns: the same parsing code after the read) a few.
CASES = [(case, "csv") for case in sorted(BAD)] + [
    (case, "parquet") for case in ("not a number", "missing columns", "several problems")
]


@pytest.mark.parametrize(("case", "kind"), CASES)
def test_streaming_and_in_memory_agree(case, kind, tmp_path):
    edit, options = BAD[case]
    path = write(edit(base()), tmp_path, kind)
    in_memory, streamed = both(path, **options)
    if isinstance(in_memory, str):
        assert streamed == in_memory
        assert "atlantis" not in streamed and "lots" not in streamed
    else:
        pd.testing.assert_frame_equal(streamed, in_memory)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_drop_mode_drops_the_same_rows(kind, tmp_path):
    frame = base()
    for column, value, row in [
        ("region", "atlantis", 3),
        ("sex", "", 70),
        ("wage", "lots", 130),
        ("age", "41.5", 131),
        ("hours", "", 299),
    ]:
        frame.loc[row, column] = value
    path = write(frame, tmp_path, kind)
    in_memory, streamed = both(path, on_invalid_rows="drop")
    assert len(in_memory) == 295
    pd.testing.assert_frame_equal(streamed, in_memory)
    everything_bad = write(frame.assign(sex="?"), tmp_path, kind)
    in_memory, streamed = both(everything_bad, on_invalid_rows="drop")
    assert len(streamed) == 0 and len(in_memory) == 0


def _field(position: int, edit):  # noqa: ANN001, ANN202
    """A CSV line's edit: `edit` applied to its field at `position`."""

    def line(text: bytes) -> bytes:
        fields = text.split(b",")
        fields[position] = edit(fields[position])
        return b",".join(fields)

    return line


def _byte(byte: bytes):  # noqa: ANN202
    return lambda value: value[:1] + byte + value[1:]


# A line that does not read as a row of the header's columns, and what `refuse` says of it.
FIELDS = "the file has lines with more or fewer fields than its header"
NOT_UTF8 = "the file is not UTF-8 encoded text"
BROKEN_LINES = {
    "a field too many": (lambda line: line + b",7", FIELDS),
    "a field too few": (lambda line: line[: line.rindex(b",")], FIELDS),
    "an unclosed quote": (
        _field(3, lambda value: b'"' + value),
        "the file has lines whose quoted value is not closed on the same line",
    ),
    "invalid UTF-8 in a category": (_field(4, _byte(b"\xe9")), NOT_UTF8),
    "invalid UTF-8 in a number": (_field(5, _byte(b"\xff")), NOT_UTF8),
    "invalid UTF-8 and a field too many": (
        lambda line: _field(4, _byte(b"\xe9"))(line) + b",7",
        NOT_UTF8,
    ),
}


def write_lines(frame: pd.DataFrame, broken: dict[int, str], path: Path, newline: bytes) -> Path:
    """`frame` as CSV with the data lines of the rows in `broken` broken as named; the line
    after each broken one quotes its region (a quote an unclosed one would pair with)."""
    lines = frame.to_csv(index=False).encode().splitlines()
    for row in broken:
        lines[row + 2] = _field(4, lambda value: b'"' + value + b'"')(lines[row + 2])
    for row, case in broken.items():
        lines[row + 1] = BROKEN_LINES[case][0](lines[row + 1])
    path.write_bytes(newline.join(lines) + newline)
    return path


def block_cuts(data: bytes, block_bytes: int) -> tuple[bool, bool]:
    """Whether reading `data` in blocks of `block_bytes` ends a block inside a line, and one
    between a CR and its LF."""
    ends = range(block_bytes, len(data), block_bytes)
    inside = any(data[end - 1 : end] not in (b"\n", b"\r") for end in ends)
    return inside, any(data[end - 1 : end + 1] == b"\r\n" for end in ends)


@pytest.mark.parametrize("small_blocks", [False, True], ids=["one-block", "small-blocks"])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_drop_mode_drops_exactly_the_lines_that_do_not_parse(
    newline, small_blocks, tmp_path, monkeypatch
):
    frame = base(60)
    broken = dict(zip([5, 14, 23, 32, 41, 58], sorted(BROKEN_LINES), strict=True))
    path = write_lines(frame, broken, tmp_path / "broken.csv", newline)
    if small_blocks:  # blocks end inside lines and, with CR LF, between a CR and its LF
        data = path.read_bytes()
        crlf = newline == b"\r\n"
        size = next(s for s in itertools.count(97) if block_cuts(data, s) >= (True, crlf))
        monkeypatch.setattr("dprelease.io.read.CSV_BLOCK_BYTES", size)
    in_memory, streamed = both(path, on_invalid_rows="drop")
    expected = load_validated(frame.drop(index=list(broken)), SCHEMA)
    pd.testing.assert_frame_equal(in_memory, expected)
    pd.testing.assert_frame_equal(streamed, expected)


@pytest.mark.parametrize("case", sorted(BROKEN_LINES))
def test_a_line_that_does_not_parse_refuses_the_table_in_one_clean_line(case, tmp_path):
    path = write_lines(base(), {137: case}, tmp_path / "broken.csv", b"\n")
    hint = " (--on-invalid-rows drop drops such lines)"
    for read in (
        lambda: load_validated(path, SCHEMA, REFUSE),
        lambda: list(StreamingInput(str(path), SCHEMA, REFUSE, chunk_rows=CHUNK).tables()),
    ):
        with pytest.raises(InputError) as error:
            read()
        assert str(error.value) == f"{path}: {BROKEN_LINES[case][1]}{hint}"
        assert exception_text(error.value) == f"InputError: {error.value}"  # nothing chained


def test_a_line_is_judged_by_its_quotes_as_pyarrow_reads_them():
    """`_closed` says whether pyarrow's parser ends a line inside a quoted value (it would
    carry the quote into the next lines): every line of up to 6 characters of a, comma and
    quote, read before a line of its own that survives exactly when the quote is closed."""
    from dprelease.io.read import _closed

    options = pacsv.ConvertOptions(column_types={"h1": pa.binary(), "h2": pa.binary()})
    skip = pacsv.ParseOptions(invalid_row_handler=lambda row: "skip")
    for size in range(7):
        for chars in itertools.product(b'a,"', repeat=size):
            line = bytes(chars) + b"\n"
            data = pa.py_buffer(b"h1,h2\n" + line + b"ZZ,ZZ\n")
            rows = pacsv.read_csv(data, parse_options=skip, convert_options=options).to_pylist()
            assert ({"h1": b"ZZ", "h2": b"ZZ"} in rows) == _closed(line), line


@pytest.mark.parametrize("kind", ["csv", "parquet", "memory"])
def test_infinite_numbers_are_invalid_values_never_clipped(kind, tmp_path):
    frame = census_like(300, seed=3).astype({"hours": float})  # an integer column as floats
    frame.loc[[5, 200], "wage"] = [np.inf, -np.inf]  # "inf", "-inf" in CSV
    frame.loc[6, "hours"] = np.inf
    source = frame if kind == "memory" else write(frame, tmp_path, kind)
    name = "the table in memory" if kind == "memory" else source
    refused = "\n".join(
        f"{name}: column {column!r} has values that are not finite numbers"
        for column in ("hours", "wage")
    )
    expected = load_validated(frame.drop(index=[5, 6, 200]), SCHEMA)
    for policy in ({}, {"on_out_of_bounds": "reject"}):
        assert both(source, **policy) == (refused, refused)
        for kept in both(source, on_invalid_rows="drop", **policy):
            pd.testing.assert_frame_equal(kept, expected)


def test_typed_parquet_and_a_directory_of_parquet_files(tmp_path):
    frame = census_like(500, seed=4)
    frame["region"] = frame["region"].astype("category")  # read back as a dictionary column
    directory = tmp_path / "parts"
    directory.mkdir()
    for i, part in enumerate(np.array_split(np.arange(500), 3)):
        frame.iloc[part].to_parquet(directory / f"part-{i}.parquet", index=False)
    whole = tmp_path / "whole.parquet"
    frame.to_parquet(whole, index=False)
    expected = load_validated(whole, SCHEMA)
    streamed = pd.concat(
        list(StreamingInput(str(directory), SCHEMA, chunk_rows=CHUNK).tables()), ignore_index=True
    )
    pd.testing.assert_frame_equal(streamed, expected)


def test_unreadable_inputs_are_refused_cleanly(tmp_path):
    latin1 = tmp_path / "latin1.csv"
    base(20).assign(region="m\xe9xico").to_csv(latin1, index=False, encoding="latin-1")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 this is not parquet")
    blank = tmp_path / "blank.csv"
    blank.write_text("")
    for path, message in [
        (latin1, "not UTF-8"),
        (broken, "cannot read the file"),
        (blank, "the file is empty"),
        (tmp_path / "absent.csv", "input file not found"),
    ]:
        with pytest.raises(InputError, match=message):
            list(StreamingInput(str(path), SCHEMA, REFUSE).tables())
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "a.csv").write_text("x\n1\n")
    with pytest.raises(InputError, match="only Parquet files"):
        list(StreamingInput(str(mixed), SCHEMA).tables())


def test_the_first_bad_chunk_stops_the_read(tmp_path):
    frame = base(1000)
    frame.loc[10, "region"] = "atlantis"
    path = write(frame, tmp_path, "parquet")
    refuse = InputPolicy(on_invalid_rows="refuse")
    chunks = StreamingInput(str(path), SCHEMA, refuse, chunk_rows=100).tables()
    with pytest.raises(InputError, match="not among the schema's categories"):
        next(chunks)


def test_a_changed_input_is_refused_on_the_next_pass(tmp_path):
    path = write(base(), tmp_path, "parquet")
    source = StreamingInput(str(path), SCHEMA, chunk_rows=CHUNK)
    list(source.tables())
    write(base(301), tmp_path, "parquet")
    with pytest.raises(InputError, match="changed while the release was reading it"):
        list(source.tables())


def test_summed_chunk_counts_feed_the_same_noisy_fit(tmp_path, seeded_noise):
    frame = census_like(1000, seed=5)
    path = write(frame, tmp_path, "parquet")
    real = ENCODER.encode(load_validated(path, SCHEMA))
    in_memory = IndependentMarginals(ENCODER, 1.0)
    streamed = IndependentMarginals(ENCODER, 1.0)
    counts = StreamingInput(str(path), SCHEMA, chunk_rows=97).scan(ENCODER, streamed.cell_counts)
    counts = counts.counts
    for exact, summed in zip(in_memory.cell_counts(real), counts, strict=True):
        np.testing.assert_array_equal(summed, exact)
    fitted = in_memory.fit(real, seeded_noise(7))
    fitted_streamed = streamed.fit_counts(counts, seeded_noise(7))
    for p, q in zip(fitted.state.probabilities, fitted_streamed.state.probabilities, strict=True):
        np.testing.assert_array_equal(p, q)
    rng = np.random.default_rng(0)
    assert fitted_streamed.sample(5, rng).shape == (5, ENCODER.width)
    with pytest.raises(ValueError, match="do not match the generator's public cells"):
        streamed.fit_counts(counts[:-1], seeded_noise(7))


def test_wide_encodings_read_smaller_chunks(tmp_path):
    """An encoded chunk stays within CHUNK_BYTES: narrow schemas keep CHUNK_ROWS, a 134-wide
    one-hot encoding (NYC flights) reads about 62,000 rows at a time; the release streams with
    that size."""
    from dprelease.config import SyntheticConfig
    from dprelease.io.stream import CHUNK_BYTES, CHUNK_ROWS, chunk_rows_for
    from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE, load_real

    assert chunk_rows_for(Encoder(SCHEMA).width) == CHUNK_ROWS
    assert 8 * 134 * chunk_rows_for(134) <= CHUNK_BYTES < 8 * 134 * (chunk_rows_for(134) + 1)
    assert chunk_rows_for(10**9) == 1
    wide = yaml.safe_load((Path(__file__).parent.parent / "data" / "census.yaml").read_text())
    codes = [f"c{i}" for i in range(40)]
    wide["columns"]["code"] = {"type": "categorical", "categories": codes}
    (tmp_path / "wide.yaml").write_text(yaml.safe_dump(wide))
    table = census_like(50, seed=0).assign(code="c7")
    table.to_csv(tmp_path / "wide.csv", index=False)
    schema = load_schema(tmp_path / "wide.yaml")
    plan = SYNTHETIC_PIPELINE.plan(schema, SyntheticConfig(epsilon=1.0, delta=1e-6))
    assert plan.streams and chunk_rows_for(plan.encoder.width) < CHUNK_ROWS
    stream = load_real(plan, str(tmp_path / "wide.csv")).source
    assert stream.chunk_rows == chunk_rows_for(plan.encoder.width)
