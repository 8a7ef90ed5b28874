"""Does a release's or an error's text mention a real row count or a real value?

A plain substring test (`"4321" in text`) fails at random: about 130 four-digit windows of a
release change from run to run (full-precision DP floats such as k-hat, sha256 hashes, the
release id and its timestamp), so about one release in 80 contains any given four digits by
chance. `mentions_count` matches the count only as a number of its own, `shown_values` a
value only as a token of its own.
"""

from __future__ import annotations

import re
from pathlib import Path


def mentions_count(text: str, n: int) -> bool:
    """True if `n` appears as a number of its own: "4321", "4321.0", "n=4321", "4,321 rows";
    not as digits inside another number (0.43219, 14321, 4321.5), a hash or an id."""
    plain = rf"(?<![\w.]){n}(?!\w|\.\d*[1-9])"
    grouped = rf"(?<![\w.,]){n:,}(?![\w,]|\.\d*[1-9])"
    return re.search(plain, text) is not None or re.search(grouped, text) is not None


def shown_values(text: str, values: tuple[str, ...]) -> list[str]:
    """The `values` that appear in `text` as tokens of their own (not inside another number
    or word: "61" is not shown by "a61f" or "0.615")."""
    return [
        value
        for value in values
        if re.search(rf"(?<![\w.]){re.escape(value)}(?!\w|\.\d)", text) is not None
    ]


def exception_text(error: BaseException) -> str:
    """Every message an exception carries: its own and those of the exceptions chained to it
    (`__cause__`, `__context__`, even when suppressed), which a traceback or a serialised
    exception may show."""
    seen: list[BaseException] = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return "\n".join(f"{type(e).__name__}: {e}" for e in seen)


# The first line of a CSV file without its header line: a census-like row whose values appear
# nowhere else, one of them twice (a duplicated header name).
HEADERLESS_FIRST_ROW = ("61", "19", "47", "female", "midwest", "8765.4321", "8765.4321", "yes")


def write_headerless_csv(path: Path) -> tuple[str, ...]:
    """A census-like CSV file without its header line; returns the first row's values, which
    no message may show."""
    from dprelease.datasets import census_like

    rows = census_like(30, seed=8).to_csv(index=False, header=False)
    path.write_text(",".join(HEADERLESS_FIRST_ROW) + "\n" + rows)
    return HEADERLESS_FIRST_ROW
