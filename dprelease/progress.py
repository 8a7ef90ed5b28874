"""Progress of a long stage (DP-SGD steps, mbi model fits) on stderr, fit for where it goes.

On a terminal: a tqdm bar. Otherwise (stderr redirected to a file, a scheduled run's log, a
pipe) a bar's `\\r` redraws pile up (58 KB for one DP-GAN run;
docs/decisions/0030-scale-and-latency.md), so a stage prints one line when it starts and one
when it ends instead. The lines say only the stage's public plan (its name, its planned number
of steps), never anything about the data.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol


class Progress(Protocol):
    """What a stage calls: `update` after each unit of work, `close` at the end."""

    def update(self, n: int = 1) -> Any: ...

    def close(self) -> None: ...


class _Silent:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


class _StageLines:
    """One line when the stage starts, one when it ends (no `\\r`, no per-step output)."""

    def __init__(self, label: str, unit: str, total: int | None) -> None:
        self._label = label
        planned = f" ({total} {unit}s)" if total is not None else ""
        print(f"{label}: started{planned}", file=sys.stderr, flush=True)
        self._closed = False

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            print(f"{self._label}: done", file=sys.stderr, flush=True)


def stage_progress(label: str, unit: str, *, enabled: bool, total: int | None = None) -> Progress:
    """A tqdm bar when `enabled` and stderr is a terminal; stage lines when `enabled` and it
    is not; nothing otherwise."""
    if not enabled:
        return _Silent()
    if sys.stderr.isatty():
        from tqdm import tqdm

        return tqdm(total=total, desc=label, unit=unit)
    return _StageLines(label, unit, total)
