"""Thin Prefect wrappers over dprelease's release pipelines: orchestration, never algorithms.

`prefect_step` is the step runner the flows give `dprelease.release.pipeline.publish_release`: each
step of a release runs as a Prefect task with `NO_PERSISTENCE` (no result persistence, no
caching, no automatic retries: a retry of a task that touched the real data would be a new,
unaccounted spend; docs/privacy-model.md section 7).

`ends_cleanly` wraps every flow function so that a failed run persists nothing and logs its
error once. Prefect writes a failed flow's exception to its result storage (a pickle under
PREFECT_HOME/storage) whatever the flow's `persist_result` (Prefect 3.8's flow engine calls
`exception_to_failed_state(..., write_result=True)`), and logs its traceback a second time
after the failed task has logged it. A flow that *returns* a `Failed` state holding the
exception is stored as returned values are: not at all under `persist_result=False`; a caller
in this process (the CLI) still gets the exception raised from the flow call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypedDict, TypeVar

from prefect import task
from prefect.cache_policies import NO_CACHE, CachePolicy

from dprelease.errors import DPReleaseError


class TaskOptions(TypedDict):
    """The task options every dprelease task gets (`NO_PERSISTENCE`)."""

    persist_result: bool
    cache_policy: CachePolicy
    retries: int


NO_PERSISTENCE: TaskOptions = {"persist_result": False, "cache_policy": NO_CACHE, "retries": 0}
_LOGGED_BY_TASK = "_dprelease_logged_by_task"
Function = TypeVar("Function", bound=Callable[..., Any])


def prefect_step(name: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run one release step as a Prefect task named `name`."""
    try:
        return task(name=name, **NO_PERSISTENCE)(function)(*args, **kwargs)
    except Exception as error:
        setattr(error, _LOGGED_BY_TASK, True)  # the task run's log holds its traceback
        raise


def ends_cleanly(flow_function: Function) -> Function:
    """Make a flow function return `Failed(data=error)` instead of raising (see the module
    docstring): the run's state message is the error's one line; its traceback is logged
    once, by the failed task, or here when the error did not come from a task. An expected
    error (`DPReleaseError`: bad input, a refused budget, unreliable weights) is one line."""

    @functools.wraps(flow_function)
    def run(*args: Any, **kwargs: Any) -> Any:
        from prefect import get_run_logger
        from prefect.states import Failed

        try:
            return flow_function(*args, **kwargs)
        except Exception as error:
            expected = isinstance(error, DPReleaseError)
            message = str(error) if expected else f"{type(error).__name__}: {error}"
            traced = not expected and not getattr(error, _LOGGED_BY_TASK, False)
            get_run_logger().error("failed: %s", message, exc_info=error if traced else None)
            return Failed(message=message, data=error)

    # Prefect reads the parameters from the signature and resolves string annotations in the
    # wrapper's module: give it the flow function's signature, resolved in its own module.
    run.__signature__ = inspect.signature(flow_function, eval_str=True)  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]
