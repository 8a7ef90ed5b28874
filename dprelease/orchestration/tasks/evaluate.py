"""Prefect tasks of the evaluation flow: thin wrappers over `dprelease.evaluation`.

All of them see real data (or metrics computed on it): no result persistence, no caching,
no retries.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from prefect import task

from dprelease.encoding import Encoder
from dprelease.evaluation.harness import EvaluationGrid, evaluate_cell, split
from dprelease.evaluation.outputs import check_output_directory, toy_figure, write_evaluation
from dprelease.io.stream import load_validated
from dprelease.orchestration.tasks import NO_PERSISTENCE
from dprelease.schema import Schema, load_schema


@task(name="check-evaluation-directory", **NO_PERSISTENCE)
def check_directory(out_dir: str) -> None:
    check_output_directory(out_dir)


@task(name="load-and-split", **NO_PERSISTENCE)
def load_split(
    input_path: str, schema_path: str, test_fraction: float, split_seed: int
) -> tuple[Schema, pd.DataFrame, np.ndarray]:
    """The schema, the validated train part (released by each cell) and the encoded test
    part (scored against)."""
    schema = load_schema(schema_path)
    train, test = split(load_validated(input_path, schema), test_fraction, split_seed)
    return schema, train, Encoder(schema).encode(test)


@task(name="evaluate-cell", **NO_PERSISTENCE)
def cell(
    train: pd.DataFrame,
    test: np.ndarray,
    schema: Schema,
    grid: EvaluationGrid,
    generator: str,
    epsilon: float,
    seed: int,
) -> list[dict]:
    return evaluate_cell(train, test, schema, grid, generator, epsilon, seed)


@task(name="write-evaluation", **NO_PERSISTENCE)
def write(rows: list[dict], out_dir: str, grid: EvaluationGrid, toy: bool) -> str:
    from dataclasses import asdict

    out = write_evaluation(pd.DataFrame(rows), out_dir, asdict(grid))
    if toy:
        toy_figure(out, grid.weights, grid.epsilons[0])
    return str(Path(out))
