"""The evaluation grid of the main paper's section 4: generator x weight method x epsilon x
seed, each released on the train part of a real table and scored on the held-out test part.

Every (generator, weight method, epsilon, seed) is one release through the product's release
pipeline (`release.pipeline.run_guarded`): the budget is split as a release splits it (a
private weight method gets the fraction F, the generator the rest; `none` and
`discriminator` leave the whole budget to the generator), so each row scores what a curator
would publish with that configuration. Non-private methods (`logreg`, `mlp`) are reference
points (`plan_release(..., evaluation=True)`; a release refuses them). Each cell accounts its
spends in a throwaway ledger in a temporary directory (never the persistent one). The test
part is never seen by any mechanism.

The metrics are computed on real data: results are for choosing a configuration and for
evidence, never for publication.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease import weights as weight_methods
from dprelease.config import SyntheticConfig
from dprelease.diagnostics import PsisResult, normalised_weights
from dprelease.encoding import Encoder
from dprelease.errors import require
from dprelease.evaluation.metrics import Task, beta_mse, downstream, wasserstein
from dprelease.evaluation.timing import StepTimer
from dprelease.generators import GENERATORS
from dprelease.privacy.noise import NoiseSource
from dprelease.release.pipeline import run_guarded
from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE, diagnose
from dprelease.release.synthetic.plan import (
    BUDGET_FREE_WEIGHTS,
    DEFAULT_GENERATOR,
    plan_release,
)
from dprelease.schema import CategoricalColumn, Schema

NOT_FOR_PUBLICATION = (
    "Computed on the real table (train/test split): evaluation evidence only, not for "
    "publication and not differentially private."
)
DEFAULT_WEIGHT_METHODS = (
    "none",
    "logreg",
    "beta_noised",
    "beta_debiased",
    "calibration",
    "mlp",
    "dp_mlp",
)


@dataclass(frozen=True)
class EvaluationGrid:
    """What to evaluate; all of it public configuration."""

    generators: tuple[str, ...] = (DEFAULT_GENERATOR,)
    weights: tuple[str, ...] = DEFAULT_WEIGHT_METHODS
    epsilons: tuple[float, ...] = (1.0, 6.0)
    seeds: int = 10
    delta: float | None = None  # None: each release's default from the schema's cap
    test_fraction: float = 0.2
    weights_fraction: float | None = None  # None: the release's default
    n_synthetic: int | None = None
    wst_rows: int = 2000
    generator_options: dict = field(default_factory=dict)

    def require_extras(self) -> None:
        """InputError naming the extra to install when the evaluation's metrics, a chosen
        generator or a chosen weight method need an optional dependency that is missing."""
        require("evaluate", "dprelease evaluate (its Wasserstein metric)")
        for name in self.generators:
            if name in GENERATORS:  # unknown names are refused by the release's plan
                GENERATORS[name].require_extra()
        for method in self.weights:
            weight_methods.require_extra(method)

    def preload(self) -> None:
        """Import every chosen generator's lazily imported modules in this thread, before
        the cells fit in several threads (`Generator.lazy_imports`)."""
        for name in self.generators:
            GENERATORS[name].preload()

    def cells(self) -> list[tuple[str, float, int]]:
        return [
            (generator, epsilon, seed)
            for generator in self.generators
            for epsilon in self.epsilons
            for seed in range(self.seeds)
        ]


def split(
    table: pd.DataFrame, test_fraction: float, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A seeded random train/test split of the real rows."""
    if not 0 < test_fraction < 1:
        raise ValueError("test_fraction must be strictly between 0 and 1")
    order = np.random.default_rng(seed).permutation(len(table))
    n_test = max(1, int(round(test_fraction * len(table))))
    return (
        table.iloc[order[n_test:]].reset_index(drop=True),
        table.iloc[order[:n_test]].reset_index(drop=True),
    )


def task_for(schema: Schema, encoder: Encoder) -> Task:
    """The supervised task on the schema's target (its last column when none is named)."""
    name = schema.target or list(schema.columns)[-1]
    (column,) = [c for c in encoder.columns if c.name == name]
    kind = "classification" if isinstance(column.spec, CategoricalColumn) else "regression"
    return Task(kind, slice(column.start, column.stop))


def release_once(
    train: pd.DataFrame,
    schema: Schema,
    config: SyntheticConfig,
    *,
    ledger_url: str,
    step: StepTimer | None = None,
) -> tuple[np.ndarray, np.ndarray, PsisResult]:
    """One synthetic release of `train` through the product's pipeline (`run_guarded`, the
    ledger at `ledger_url`): the encoded synthetic rows, their normalised weights as a
    release diagnoses and smooths them (with a certified bound, if any), and the
    diagnostics."""
    plan = plan_release(schema, config, evaluation=True)
    outcome, _ = run_guarded(
        SYNTHETIC_PIPELINE,
        plan,
        train,
        ledger_url=ledger_url,
        noise=NoiseSource(),
        step=step or StepTimer(),
    )
    diagnostics = diagnose(plan, outcome.estimate, outcome.synthetic)
    return outcome.synthetic, normalised_weights(diagnostics.log_weights), diagnostics


def evaluate_cell(
    train: pd.DataFrame,
    test: np.ndarray,
    schema: Schema,
    grid: EvaluationGrid,
    generator_name: str,
    epsilon: float,
    seed: int,
) -> list[dict]:
    """One release of `train` per weight method through the product's release pipeline
    (`release.pipeline.run_guarded`), each scored on `test`. The methods' releases are
    alternatives to compare, not a sequence to publish, so each gets its own throwaway
    ledger and is checked against the schema's cap alone (on one shared ledger, five weight
    methods at epsilon 1 exhausted a cap of 4)."""
    encoder = Encoder(schema)
    task = task_for(schema, encoder)
    options = grid.generator_options.get(generator_name, {})
    has_discriminator = GENERATORS[generator_name].has_discriminator
    methods = [m for m in grid.weights if m != "discriminator" or has_discriminator]
    rows = []
    for method in methods:
        free = method in BUDGET_FREE_WEIGHTS
        config = SyntheticConfig(
            epsilon=epsilon,
            delta=grid.delta,
            generator=generator_name,
            generator_options=options,
            weights=method,
            weights_fraction=None if free else grid.weights_fraction,
            n_synthetic=grid.n_synthetic,
            seed=seed,
        )
        timer = StepTimer()
        with tempfile.TemporaryDirectory(prefix="dprelease-evaluation-") as directory:
            ledger_url = f"sqlite:///{Path(directory) / 'ledger.sqlite'}"
            synthetic, weights, diagnostics = release_once(
                train, schema, config, ledger_url=ledger_url, step=timer
            )
        started = time.perf_counter()
        rng = np.random.default_rng(seed)
        rows.append(
            {
                "generator": generator_name,
                "weights": method,
                "private": method not in weight_methods.NON_PRIVATE_METHODS,
                "epsilon": epsilon,
                "seed": seed,
                "wst": wasserstein(synthetic, weights, test, max_rows=grid.wst_rows, rng=rng),
                "beta_mse": beta_mse(synthetic, weights, test, task),
                "downstream": downstream(synthetic, weights, test, task, seed=seed),
                "downstream_metric": "roc_auc" if task.kind == "classification" else "mse",
                "k_hat": float(diagnostics.k_hat),
                "ess_fraction": float(diagnostics.ess) / len(synthetic),
                "fit_seconds": timer.seconds("fit-generator"),
                "sample_seconds": timer.seconds("sample-synthetic"),
                "weights_seconds": timer.seconds("estimate-weights"),
                "metrics_seconds": time.perf_counter() - started,
            }
        )
    return rows
