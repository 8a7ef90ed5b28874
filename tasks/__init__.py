"""Thin Prefect wrappers over dprelease's release pipelines: orchestration, never algorithms.

`prefect_step` is the step runner the flows give `dprelease.release.pipeline.publish`: each
step of a release runs as a Prefect task with `NO_PERSISTENCE` (no result persistence, no
caching, no automatic retries: a retry of a task that touched the real data would be a new,
unaccounted spend; docs/privacy-model.md section 7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

NO_PERSISTENCE = {"persist_result": False, "cache_policy": NO_CACHE, "retries": 0}


def prefect_step(name: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run one release step as a Prefect task named `name`."""
    return task(function, name=name, **NO_PERSISTENCE)(*args, **kwargs)
