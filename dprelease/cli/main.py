"""The `dprelease` process: the console script and `python -m dprelease.cli` start here.

A CLI call is a short process that builds a large heap of long-lived objects (Prefect,
pandas, SQLAlchemy, pydantic models) and then exits. CPython's cyclic garbage collector,
tuned for long-running programs, re-scanned that heap about 830 times during one release of
the bundled 569-row table (1.6 s of a 12 s run on the 2-core reference machine) and once more
while the interpreter shut down (about 2 s). `tune_gc` lets generation 0 grow to 50,000
allocations (11 collections per release, 0.6 s) and freezes the heap at exit (`gc.freeze`:
the shutdown collection skips it): the release takes 5.2-5.5 s of CPU against 6.9-7.5 s
without it (`benchmarks/cli_latency.py` prints it; docs/decisions/0030-scale-and-latency.md).
Nothing else changes: cycles are still collected.
"""

from __future__ import annotations

import atexit
import gc

GEN0_THRESHOLD = 50_000


def tune_gc() -> None:
    """Collect less often and skip the collection at interpreter exit (module docstring)."""
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
    atexit.register(gc.freeze)


def main() -> None:
    """Run the `dprelease` command line with the collector tuned before anything is imported."""
    tune_gc()
    from dprelease.cli.app import app

    app()


if __name__ == "__main__":
    main()
