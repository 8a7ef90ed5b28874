"""The evaluation grid of the main paper's section 4: generator x weight method x epsilon x
seed, each released on the train part of a real table and scored on the held-out test part.

For one cell (generator, epsilon, seed) the generator gets (1 - F) of (epsilon, delta) and is
fitted once; every private weight method then gets F of the budget and weights the same
synthetic sample (so `none` and `discriminator` are scored on a generator that had the
same budget as the others: the comparison isolates the weights). Non-private methods
(`logreg`, `mlp`) are reference points. Each cell accounts its spends in a throwaway
in-memory ledger (never the persistent one). The test part is never seen by any mechanism.

The metrics are computed on real data: results are for choosing a configuration and for
evidence, never for publication.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dprelease import weights as weight_methods
from dprelease.diagnostics import diagnose_weights, normalised_weights
from dprelease.encoding import Encoder
from dprelease.evaluation.metrics import Task, beta_mse, downstream, wasserstein
from dprelease.generators import make_generator
from dprelease.planning import (
    DEFAULT_WEIGHTS_FRACTION,
    default_n_synthetic,
    weights_mechanism,
    weights_options,
)
from dprelease.privacy.accounting import PlannedSpend, Spend, compose
from dprelease.privacy.ledger import IN_MEMORY_URL, Ledger
from dprelease.privacy.noise import NoiseSource
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

    generators: tuple[str, ...] = ("marginals",)
    weights: tuple[str, ...] = DEFAULT_WEIGHT_METHODS
    epsilons: tuple[float, ...] = (1.0, 6.0)
    seeds: int = 10
    delta: float = 1e-5
    test_fraction: float = 0.2
    weights_fraction: float = DEFAULT_WEIGHTS_FRACTION
    n_synthetic: int | None = None
    wst_rows: int = 2000
    generator_options: dict = field(default_factory=dict)

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


def evaluate_cell(
    train: np.ndarray,
    test: np.ndarray,
    schema: Schema,
    grid: EvaluationGrid,
    generator_name: str,
    epsilon: float,
    seed: int,
) -> list[dict]:
    """Release on `train` once per cell and score every weight method on `test`."""
    encoder = Encoder(schema)
    task = task_for(schema, encoder)
    fraction = grid.weights_fraction
    generator = make_generator(
        generator_name,
        encoder,
        (1 - fraction) * epsilon,
        (1 - fraction) * grid.delta,
        **grid.generator_options.get(generator_name, {}),
    )
    methods = [m for m in grid.weights if m != "discriminator" or generator.has_discriminator]
    weights_budget = Spend(fraction * epsilon, fraction * grid.delta)
    planned = list(generator.planned_spends()) + [
        PlannedSpend(weights_mechanism(m), weights_budget.epsilon, weights_budget.delta)
        for m in methods
        if m in weight_methods.PRIVATE_METHODS
    ]
    cell = f"{generator_name}-eps{epsilon:g}-seed{seed}"
    with Ledger(IN_MEMORY_URL) as ledger:
        entry_ids = iter(ledger.reserve(cell, compose(planned), cell, planned))
        started = time.perf_counter()
        for spend in generator.fit(train, NoiseSource()):
            ledger.commit(next(entry_ids), spend)
        fit_seconds = time.perf_counter() - started
        started = time.perf_counter()
        n_synthetic = grid.n_synthetic or default_n_synthetic(schema)
        synthetic = generator.sample(n_synthetic, np.random.default_rng(seed))
        sample_seconds = time.perf_counter() - started
        rows = []
        for method in methods:
            private = method in weight_methods.PRIVATE_METHODS
            options = weights_options(method, {}, encoder)
            if method == "discriminator":
                options["discriminator"] = generator.discriminator
            started = time.perf_counter()
            estimate = weight_methods.estimate(
                method,
                train,
                synthetic,
                epsilon=weights_budget.epsilon if private else None,
                delta=weights_budget.delta if private else None,
                noise=NoiseSource(),
                **options,
            )
            weights_seconds = time.perf_counter() - started
            if private:
                spend = PlannedSpend(
                    weights_mechanism(method), estimate.epsilon_spent, estimate.delta_spent
                )
                ledger.commit(next(entry_ids), spend)
            # as a release diagnoses and smooths them (with a certified bound, if any)
            diagnostics = diagnose_weights(estimate.log_weights, 1.0, estimate.log_weight_max)
            weights = normalised_weights(diagnostics.log_weights)
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
                    "ess_fraction": float(diagnostics.ess) / n_synthetic,
                    "fit_seconds": fit_seconds,
                    "sample_seconds": sample_seconds,
                    "weights_seconds": weights_seconds,
                    "metrics_seconds": time.perf_counter() - started,
                }
            )
    return rows
