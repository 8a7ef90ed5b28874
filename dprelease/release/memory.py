"""Whether a synthetic release's plan fits in this machine's memory, decided in the plan.

A release holds its synthetic rows several times over (the generator's encoded matrix, the
weights' features, the decoded table, the report's and the writer's copies), so its peak
memory grows with the public synthetic size N_G and the schema's shape. `peak_bytes`
estimates it from public quantities only (N_G, the schema's column count and encoded width;
never the real table, whose size is private):

    BASE_BYTES + N_G * (BYTES_PER_FEATURE * encoded width + BYTES_PER_COLUMN * columns)

Measured as the growth of the process's peak RSS (`/usr/bin/time -v`, maximum resident set)
between N_G = 20,000 and N_G = 400,000 (200,000 for the last two) of a whole release through
`release.pipeline.publish` (epsilon 1), per synthetic row:

    census-like (8 columns, width 14),   pgm + calibration          628 B
    census-like,                         privbayes + calibration    758 B
    census-like,                         marginals + none           390 B
    census-like,                         dpgan + none               933 B
    breast cancer (31 columns, width 32), pgm + calibration       2,990 B
    one 300-category column (3 columns, width 303), pgm + calib.  5,039 B

A least-squares fit of the three pgm rows gives 15.8 B per encoded feature and 78 B per
column; the constants below round these up (20 and 100) so that the estimate covers every row
of the table (1,080 B for the census-like schema, 3,740 B for breast cancer, 6,360 B for the
wide one).
`BASE_BYTES` covers the libraries and the fixed part of a run (310-620 MB peak at 20,000 rows,
the torch generators the most). The real table is not counted: streaming plans read it in
chunks, and the others' share is private.

`available_bytes` is what the machine can give: /proc/meminfo's MemAvailable, else the
physical memory (`os.sysconf`). `check_fits` refuses (InputError) a plan whose estimate
exceeds it, saying what to do: a smaller `--n-synthetic`.
"""

from __future__ import annotations

import os
from pathlib import Path

from dprelease.errors import InputError

BYTES_PER_FEATURE = 20  # per synthetic row and encoded feature (module docstring)
BYTES_PER_COLUMN = 100  # per synthetic row and schema column
BASE_BYTES = 1 << 30  # the libraries and the fixed part of a run
MEMINFO = Path("/proc/meminfo")


def bytes_per_row(width: int, columns: int) -> int:
    """The estimated memory of one synthetic row (module docstring)."""
    return BYTES_PER_FEATURE * width + BYTES_PER_COLUMN * columns


def peak_bytes(n_synthetic: int, width: int, columns: int) -> int:
    """The estimated peak memory of a release of `n_synthetic` rows (module docstring)."""
    return BASE_BYTES + n_synthetic * bytes_per_row(width, columns)


def available_bytes() -> int | None:
    """The memory this machine can give a new process: MemAvailable, else the physical
    memory; None when neither is known."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB"


def _round_down(n: int) -> int:
    """`n` rounded down to three significant digits."""
    step = 10 ** max(0, len(str(n)) - 3)
    return n // step * step


def check_fits(n_synthetic: int, width: int, columns: int) -> None:
    """Refuse (InputError) `n_synthetic` rows whose estimated peak memory exceeds what the
    machine has available."""
    available = available_bytes()
    if available is None:
        return
    need = peak_bytes(n_synthetic, width, columns)
    if need <= available:
        return
    per_row = bytes_per_row(width, columns)
    most = _round_down(max(0, (available - BASE_BYTES) // per_row))
    raise InputError(
        f"{n_synthetic:,} synthetic rows need about {_gb(need)} of memory (an estimate: "
        f"{per_row:,} bytes a row for {columns} columns, {width} encoded features, plus "
        f"{_gb(BASE_BYTES)}), more than the {_gb(available)} available on this machine: pass "
        f"a smaller --n-synthetic (at most about {most:,} here)"
    )
