"""The adaptive-truncation release (Yildirim 2023; docs/adaptive-truncation.md section 6): a DP
posterior of one column's normal model from one Laplace release per processed row.

`TRUNCATION_PIPELINE` (`release.pipeline.Pipeline`):
- `plan`: everything public (column type, how T is fixed, the engine, the prior, the
  Fisher-information design (a*, b*)) and the spends;
- `load`: the validated column, clipped to its bounds (of a nullable column, the values
  present: the posterior is of its non-missing values); a table below the schema's
  `min_rows` is refused here, before any spend;
- `run`: [DP row count ->] T, a uniformly random subset of T rows in random order, one
  Laplace release per row, posterior updates (`inference.truncation`);
- `bundle`: the transcript (every interval, noise scale and released value), posterior draws,
  the trajectory, the design, the posterior predictive model check of the released values
  (`inference.truncation.check`, post-processing) and the report; never the real row count,
  the clamped or raw values, the permutation or the noise draws.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from dprelease.config import PRIOR_KEYS, TruncationConfig
from dprelease.errors import InputError
from dprelease.inference.truncation.check import model_check
from dprelease.inference.truncation.design import TruncationDesign, design_truncation
from dprelease.inference.truncation.engines import NormalPrior
from dprelease.inference.truncation.online import (
    AdaptiveTruncationResult,
    check_engine,
    run_adaptive_truncation,
)
from dprelease.inference.truncation.privacy import (
    BELOW_MIN_ROWS,
    MISSING_VALUES,
    TruncationPlan,
    guarantee_conditions,
    plan_truncation,
    privacy_statement,
    resolve_steps,
)
from dprelease.io.stream import load_validated
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.noise import NoiseSource
from dprelease.release.files import (
    DESIGN_FILE,
    TRAJECTORY_FILE,
    TRANSCRIPT_FILE,
    TRUNCATION,
    TRUNCATION_MECHANISM,
    TRUNCATION_POSTERIOR_FILE,
)
from dprelease.release.pipeline import KindPlan, Pipeline, Source, one_step
from dprelease.release.report.truncation import write_truncation_report
from dprelease.release.writer import LedgerRecord, ReleaseBundle
from dprelease.schema import Schema

POSTERIOR_DRAWS = 4000


@dataclass(frozen=True)
class TruncationReleasePlan(KindPlan):
    """The public plan: schema, settings, privacy plan, design and prior; no data."""

    config: TruncationConfig
    privacy: TruncationPlan
    design: TruncationDesign
    prior: NormalPrior
    planned_spends: list[PlannedSpend]

    def actual_spends(self, n_steps: int) -> list[PlannedSpend]:
        """The planned spends with T filled in (what the ledger commits)."""
        return [
            replace(s, params={**s.params, "n_steps": n_steps})
            if s.mechanism == TRUNCATION_MECHANISM
            else s
            for s in self.planned_spends
        ]

    def configuration(self) -> dict:
        """Public configuration recorded in the manifest."""
        return {
            **self.config.model_dump(mode="json"),
            "prior": self.prior.to_dict(),
            "t_from": self.privacy.variant,
            "delta_T": self.privacy.delta,
            "count_epsilon": self.privacy.count_epsilon or None,
        }


def parse_prior(text: str | None) -> dict | None:
    """`mu_mean=..,mu_var=..,sigma2_shape=..,sigma2_scale=..` (all four) -> dict."""
    if text is None:
        return None
    values = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in PRIOR_KEYS:
            raise InputError(f"--prior: expected {'=..,'.join(PRIOR_KEYS)}=.., got {item!r}")
        try:
            values[key] = float(value)
        except ValueError:
            raise InputError(f"--prior: {key} must be a number, got {value!r}") from None
    if set(values) != set(PRIOR_KEYS):
        raise InputError(f"--prior needs all of {', '.join(PRIOR_KEYS)}")
    return values


def plan_truncation_release(schema: Schema, config: TruncationConfig) -> TruncationReleasePlan:
    """Check the public inputs (InputError, exit 2) and compute the design and the spends."""
    privacy = plan_truncation(
        schema,
        config.column,
        config.epsilon,
        delta=config.delta,
        n_steps=config.n_steps,
        count_epsilon=config.count_epsilon,
        max_steps=config.max_steps,
        min_steps=config.min_steps,
    )
    try:
        check_engine(config.family, config.engine)
        design = design_truncation(config.family, float(config.epsilon), config.score)
    except ValueError as error:
        raise InputError(str(error)) from None
    if config.prior is None:
        prior = NormalPrior.from_bounds(*privacy.bounds)
    else:
        try:
            prior = NormalPrior(**config.prior)
        except (TypeError, ValueError) as error:
            raise InputError(f"--prior: {error}") from None
    spends = privacy.planned_spends(design.to_dict())
    return TruncationReleasePlan(schema, config, privacy, design, prior, spends)


@dataclass(frozen=True)
class TruncationOutcome:
    """A run's DP outputs: the result, T, and the DP row count (variant "dp_count")."""

    result: AdaptiveTruncationResult
    n_steps: int
    dp_row_count: float | None


def load_column(plan: TruncationReleasePlan, source: Source) -> np.ndarray:
    """The column's validated values, clipped to its bounds; of a nullable column only the
    values present (the rows with a missing value never reach the mechanism, and the DP
    count that fixes T counts the rows returned here). Variant "min_rows": a table below the
    schema's min_rows is refused BEFORE the reservation (spec 4.3); the message carries no
    count."""
    table = load_validated(source, plan.schema, plan.config)
    values = table[plan.config.column].to_numpy(dtype=float)
    privacy = plan.privacy
    if privacy.nullable:
        values = values[~np.isnan(values)]
    below = privacy.n_steps is not None and len(values) < privacy.n_steps
    if privacy.variant == "min_rows" and below:
        raise InputError(BELOW_MIN_ROWS)
    return values


def run_truncation(
    plan: TruncationReleasePlan, values: np.ndarray, noise: NoiseSource
) -> TruncationOutcome:
    """Fix T (DP count if needed) and run the mechanism; only after the reservation."""
    n_steps, noisy = resolve_steps(plan.privacy, len(values), noise)
    config = plan.config
    result = run_adaptive_truncation(
        values,
        n_steps,
        design=plan.design,
        prior=plan.prior,
        bounds=plan.privacy.bounds,
        epsilon=config.epsilon,
        noise=noise,
        rng=np.random.default_rng(config.seed),
        engine=config.engine,
        n_particles=config.particles,
    )
    return TruncationOutcome(result, n_steps, noisy)


def truncation_bundle(
    plan: TruncationReleasePlan, outcome: TruncationOutcome, record: LedgerRecord
) -> ReleaseBundle:
    """The release bundle (spec 6.5): DP outputs and public metadata only."""
    result = outcome.result
    draws = result.posterior_draws(np.random.default_rng(plan.config.seed), POSTERIOR_DRAWS)
    design = result.design.to_dict()
    check = model_check(
        result.transcript,
        draws.mu.to_numpy(),
        draws.sigma.to_numpy(),
        result.design.a,
        result.design.b,
    )
    manifest_extra = {
        "column": plan.config.column,
        "family": plan.config.family,
        "engine": result.engine,
        "epsilon": plan.config.epsilon,
        "n_steps": outcome.n_steps,
        "t_from": plan.privacy.variant,
        "design": design,
        "posterior_summary": result.posterior.summary(),
        "model_check": check.to_dict(),
        "resample_moves": result.resample_moves,
        "truncation_statement": privacy_statement(plan.privacy, outcome.n_steps),
        "on_invalid_rows": plan.config.on_invalid_rows,
    }
    if plan.privacy.nullable:
        manifest_extra["missing_values"] = MISSING_VALUES
    if outcome.dp_row_count is not None:
        counted = "rows with a value in the column" if plan.privacy.nullable else "rows"
        manifest_extra["dp_row_count"] = {
            "value": outcome.dp_row_count,
            "note": f"Laplace count of the {counted} (a DP output, scale 1/count_epsilon), not "
            "the real row count",
        }
    return plan.release_bundle(
        TRUNCATION,
        record,
        plan.configuration(),
        report=partial(
            write_truncation_report, transcript=result.transcript, trajectory=result.trajectory
        ),
        tables={
            TRANSCRIPT_FILE: result.transcript,
            TRUNCATION_POSTERIOR_FILE: draws,
            TRAJECTORY_FILE: result.trajectory,
        },
        json_files={DESIGN_FILE: design},
        manifest_extra=manifest_extra,
        conditions=guarantee_conditions(plan.privacy),
    )


TRUNCATION_PIPELINE = Pipeline(
    TRUNCATION,
    plan_truncation_release,
    load_column,
    one_step("run-adaptive-truncation", run_truncation),
    lambda plan, outcome: plan.actual_spends(outcome.n_steps),
    truncation_bundle,
)  # kind, plan, load, run, actual spends, bundle
