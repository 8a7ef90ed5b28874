"""Does a release's text mention a real row count?

A plain substring test (`"4321" in text`) fails at random: about 130 four-digit windows of a
release change from run to run (full-precision DP floats such as k-hat, sha256 hashes, the
release id and its timestamp), so about one release in 80 contains any given four digits by
chance. `mentions_count` matches the count only as a number of its own.
"""

from __future__ import annotations

import re


def mentions_count(text: str, n: int) -> bool:
    """True if `n` appears as a number of its own: "4321", "4321.0", "n=4321", "4,321 rows";
    not as digits inside another number (0.43219, 14321, 4321.5), a hash or an id."""
    plain = rf"(?<![\w.]){n}(?!\w|\.\d*[1-9])"
    grouped = rf"(?<![\w.,]){n:,}(?![\w,]|\.\d*[1-9])"
    return re.search(plain, text) is not None or re.search(grouped, text) is not None
