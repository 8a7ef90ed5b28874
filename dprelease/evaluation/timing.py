"""Timing the steps of a release pipeline (evaluation and benchmarks only).

`StepTimer` is a step runner (`dprelease.release.pipeline.Step`): passed as `step=` to
`publish` or `run_guarded`, it runs each step as `direct` does and records its wall time, CPU
time and the process's peak RSS after it. These durations describe steps that read real data,
so they never go into a release or its logs: the evaluation writes them into its own
not-for-publication outputs, the benchmarks print them.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StepTime:
    """One step: its name, wall seconds, CPU seconds, peak RSS (MB) after it."""

    name: str
    wall: float
    cpu: float
    peak_mb: float


class StepTimer:
    """A step runner that times every step (module docstring)."""

    def __init__(self) -> None:
        self.steps: list[StepTime] = []

    def __call__(self, name: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            self.steps.append(
                StepTime(name, time.perf_counter() - start, time.process_time() - cpu, peak)
            )

    def seconds(self, name: str) -> float:
        """Wall seconds of the step `name` (summed if it ran more than once)."""
        return sum(step.wall for step in self.steps if step.name == name)
