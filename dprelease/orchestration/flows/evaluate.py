"""The evaluation flow: the paper's utility study on a real table
(docs/user-guide/generators.md, "Choosing on your own table").

Cells (generator x epsilon x seed) run as parallel Prefect tasks; their rows are gathered
into results.parquet, summary.md and figures under `out_dir` (never a release directory).

Task runner (`run_evaluation(dask=...)`, CLI `--dask`): `None` runs the cells on threads in
this process; `"local"` on a `distributed.LocalCluster` of 2 worker processes started for the
run; any other value is the address of a running Dask scheduler (`tcp://host:8786`), through
prefect-dask's `DaskTaskRunner`. On Dask, every cell's inputs (the encoded train and test
parts of the real table) are sent to a worker and its metric rows come back: the workers must
sit inside the curator's trust boundary (docs/how-to/scale.md). Nothing is persisted by the engine:
the flow and its tasks persist no results and cache nothing (`tasks.NO_PERSISTENCE`), and the
local cluster's workers never spill to disk (`NO_SPILL`).
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from dprelease.errors import require
from dprelease.evaluation.harness import DEFAULT_WEIGHT_METHODS, EvaluationGrid
from dprelease.orchestration.tasks import ends_cleanly
from dprelease.orchestration.tasks import evaluate as steps

LOCAL = "local"
LOCAL_WORKERS = 2
# Dask configuration of the local cluster's workers (nannies pass it on): never write task
# data to the worker's disk.
NO_SPILL = {"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False}


def task_runner(dask: str | None = None):  # -> prefect.task_runners.TaskRunner
    """Threads (None), a local Dask cluster ("local") or a Dask scheduler's address."""
    if not dask:
        return ThreadPoolTaskRunner(max_workers=2)
    require("dask", "a Dask task runner")
    from prefect_dask import DaskTaskRunner

    if dask == LOCAL:
        import dask as dask_module

        dask_module.config.set(NO_SPILL)  # this process's config: its local workers inherit it
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": LOCAL_WORKERS,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
            }
        )
    return DaskTaskRunner(address=dask)


@flow(name="evaluate", persist_result=False, task_runner=ThreadPoolTaskRunner(max_workers=2))
@ends_cleanly
def evaluation_flow(
    input_path: str,
    schema_path: str,
    out_dir: str = "evaluations",
    test_fraction: float = 0.2,
    generators: list[str] | None = None,
    weights: list[str] | None = None,
    epsilons: list[float] | None = None,
    seeds: int = 10,
    delta: float | None = None,
    n_synthetic: int | None = None,
    split_seed: int = 0,
    toy_figure: bool = True,
) -> str:
    """Run the grid and write the evaluation; return its directory."""
    grid = EvaluationGrid(
        generators=tuple(generators or EvaluationGrid.generators),
        weights=tuple(weights or DEFAULT_WEIGHT_METHODS),
        epsilons=tuple(epsilons or (1.0, 6.0)),
        seeds=seeds,
        delta=delta,
        test_fraction=test_fraction,
        n_synthetic=n_synthetic,
    )
    grid.require_extras()
    steps.check_directory(out_dir)
    schema, train, test = steps.load_split(input_path, schema_path, test_fraction, split_seed)
    grid.preload()
    futures = [
        steps.cell.submit(train, test, schema, grid, generator, epsilon, seed)
        for generator, epsilon, seed in grid.cells()
    ]
    rows = [row for future in futures for row in future.result()]
    return steps.write(rows, out_dir, grid, toy_figure)


def run_evaluation(dask: str | None = None, **params: Any) -> str:
    """`evaluation_flow(**params)` on the task runner chosen by `dask` (see `task_runner`)."""
    return evaluation_flow.with_options(task_runner=task_runner(dask))(**params)
