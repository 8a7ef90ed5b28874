"""The evaluation flow: the paper's utility study on a real table (README "Evaluation").

Cells (generator x epsilon x seed) run as parallel Prefect tasks; their rows are gathered
into results.parquet, summary.md and figures under `out_dir` (never a release directory).
"""

from __future__ import annotations

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from dprelease.evaluation.harness import DEFAULT_WEIGHT_METHODS, EvaluationGrid
from tasks import evaluate as steps


@flow(name="evaluate", persist_result=False, task_runner=ThreadPoolTaskRunner(max_workers=2))
def evaluation_flow(
    input_path: str,
    schema_path: str,
    out_dir: str = "evaluations",
    test_fraction: float = 0.2,
    generators: list[str] | None = None,
    weights: list[str] | None = None,
    epsilons: list[float] | None = None,
    seeds: int = 10,
    delta: float = 1e-5,
    n_synthetic: int | None = None,
    split_seed: int = 0,
    toy_figure: bool = True,
) -> str:
    """Run the grid and write the evaluation; return its directory."""
    grid = EvaluationGrid(
        generators=tuple(generators or ("marginals",)),
        weights=tuple(weights or DEFAULT_WEIGHT_METHODS),
        epsilons=tuple(epsilons or (1.0, 6.0)),
        seeds=seeds,
        delta=delta,
        test_fraction=test_fraction,
        n_synthetic=n_synthetic,
    )
    steps.check_directory(out_dir)
    schema, train, test = steps.load_split(input_path, schema_path, test_fraction, split_seed)
    futures = [
        steps.cell.submit(train, test, schema, grid, generator, epsilon, seed)
        for generator, epsilon, seed in grid.cells()
    ]
    rows = [row for future in futures for row in future.result()]
    return steps.write(rows, out_dir, grid, toy_figure)
