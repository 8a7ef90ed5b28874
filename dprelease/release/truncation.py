"""An adaptive-truncation release: public configuration and plan, run, bundle (spec 6).

`plan_truncation_release(schema, config)` checks everything public (column type, how T is
fixed, the engine, the prior) and computes the design; the CLI calls it before Prefect starts
and the flow calls it again. `run_truncation_release` sees the real column (after the
reservation); `truncation_bundle` turns the result into a `ReleaseBundle` for the generic
writer. The release holds the transcript, posterior draws, trajectory and design, never the
real row count, the clamped or raw values, the permutation or the noise draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.errors import InputError
from dprelease.inference.adaptive_truncation import (
    AdaptiveTruncationResult,
    check_engine,
    run_adaptive_truncation,
)
from dprelease.inference.truncation_design import TruncationDesign, design_truncation
from dprelease.inference.truncation_engines import NormalPrior
from dprelease.inference.truncation_privacy import (
    BELOW_MIN_ROWS,
    TRUNCATION_MECHANISM,
    TruncationPlan,
    plan_truncation,
    privacy_statement,
    resolve_steps,
)
from dprelease.privacy.accounting import Cap, PlannedSpend
from dprelease.privacy.ledger import LedgerEntry
from dprelease.privacy.noise import NoiseSource
from dprelease.release import ReleaseBundle
from dprelease.schema import Schema
from dprelease.verify_adaptive_truncation import (
    DESIGN_FILE,
    KIND,
    POSTERIOR_FILE,
    TRAJECTORY_FILE,
    TRANSCRIPT_FILE,
)

POSTERIOR_DRAWS = 4000
PRIOR_KEYS = ("mu_mean", "mu_var", "sigma2_shape", "sigma2_scale")


@dataclass(frozen=True)
class TruncationConfig:
    """Public configuration of one adaptive-truncation release (CLI options, spec 6.2)."""

    column: str
    epsilon: float
    delta: float | None = None
    n_steps: int | None = None
    count_epsilon: float | None = None
    max_steps: int = 10_000
    min_steps: int = 50
    family: str = "normal"
    score: str = "mu"
    engine: str = "ibis"
    particles: int = 1000
    prior: dict | None = None  # keys PRIOR_KEYS; None: the default prior from the bounds
    seed: int | None = None  # post-processing only (Thompson draws, SMC, posterior draws)
    secure_noise: bool = False
    on_out_of_bounds: str = "clip"
    on_invalid_rows: str = "refuse"
    drop_extra_columns: bool = False


@dataclass(frozen=True)
class TruncationRelease:
    """The public plan: schema, privacy plan, design and prior; all computed without data."""

    schema: Schema
    config: TruncationConfig
    plan: TruncationPlan
    design: TruncationDesign
    prior: NormalPrior
    planned_spends: list[PlannedSpend] = field(default_factory=list)

    @property
    def cap(self) -> Cap:
        """The schema's cap (what the ledger checks before the data is read)."""
        return self.schema.budget.cap

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
            **asdict(self.config),
            "prior": self.prior.to_dict(),
            "t_from": self.plan.variant,
            "delta_T": self.plan.delta,
            "count_epsilon": self.plan.count_epsilon or None,
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


def plan_truncation_release(schema: Schema, config: TruncationConfig) -> TruncationRelease:
    """Check the public inputs (InputError, exit 2) and compute the design and the spends."""
    plan = plan_truncation(
        schema, config.column, config.epsilon, delta=config.delta, n_steps=config.n_steps,
        count_epsilon=config.count_epsilon, max_steps=config.max_steps,
        min_steps=config.min_steps,
    )  # fmt: skip
    if schema.columns[config.column].nullable:
        raise InputError(
            f"column {config.column!r} is nullable; adaptive truncation needs a value in every "
            "row (use a column the schema marks not nullable)"
        )
    try:
        check_engine(config.family, config.engine)
        design = design_truncation(config.family, float(config.epsilon), config.score)
    except ValueError as error:
        raise InputError(str(error)) from None
    if config.particles < 10:
        raise InputError("--particles must be at least 10")
    if config.prior is None:
        prior = NormalPrior.from_bounds(*plan.bounds)
    else:
        try:
            prior = NormalPrior(**config.prior)
        except (TypeError, ValueError) as error:
            raise InputError(f"--prior: {error}") from None
    spends = plan.planned_spends(design.to_dict())
    return TruncationRelease(schema, config, plan, design, prior, spends)


@dataclass(frozen=True)
class TruncationOutcome:
    """A run's DP outputs: the result, T, and the DP row count (variant "dp_count")."""

    result: AdaptiveTruncationResult
    n_steps: int
    dp_row_count: float | None


def check_min_rows(release: TruncationRelease, n_rows: int) -> None:
    """Variant "min_rows": refuse a table below the schema's min_rows BEFORE the reservation
    (spec 4.3); the message carries no count."""
    plan = release.plan
    if plan.variant == "min_rows" and plan.n_steps is not None and n_rows < plan.n_steps:
        raise InputError(BELOW_MIN_ROWS)


def run_truncation_release(
    release: TruncationRelease, values: np.ndarray, noise: NoiseSource
) -> TruncationOutcome:
    """Fix T (DP count if needed) and run the mechanism; only after the reservation."""
    n_steps, noisy = resolve_steps(release.plan, len(values), noise)
    config = release.config
    result = run_adaptive_truncation(
        values, n_steps, design=release.design, prior=release.prior,
        bounds=release.plan.bounds, epsilon=config.epsilon, noise=noise,
        rng=np.random.default_rng(config.seed), engine=config.engine,
        n_particles=config.particles,
    )  # fmt: skip
    return TruncationOutcome(result, n_steps, noisy)


def truncation_bundle(
    release: TruncationRelease,
    outcome: TruncationOutcome,
    *,
    release_id: str,
    ledger_entries: Sequence[LedgerEntry],
    release_entry_ids: Sequence[int],
    cap: Cap,
) -> ReleaseBundle:
    """The release bundle (spec 6.5): DP outputs and public metadata only. `cap` is the
    dataset's cap as the ledger records it (with its accountant, `Ledger.cap`)."""
    result = outcome.result
    draws = result.posterior_draws(np.random.default_rng(release.config.seed), POSTERIOR_DRAWS)
    design = result.design.to_dict()
    summary = result.posterior.summary()
    manifest_extra = {
        "column": release.config.column,
        "family": release.config.family,
        "engine": result.engine,
        "epsilon": release.config.epsilon,
        "n_steps": outcome.n_steps,
        "t_from": release.plan.variant,
        "design": design,
        "posterior_summary": summary,
        "resample_moves": result.resample_moves,
        "truncation_statement": privacy_statement(release.plan, outcome.n_steps),
        "on_invalid_rows": release.config.on_invalid_rows,
    }
    if outcome.dp_row_count is not None:
        manifest_extra["dp_row_count"] = {
            "value": outcome.dp_row_count,
            "note": "Laplace count of the rows (a DP output, scale 1/count_epsilon), not the "
            "real row count",
        }
    return ReleaseBundle(
        kind=KIND,
        dataset=release.schema.dataset,
        release_id=release_id,
        ledger_entries=ledger_entries,
        release_entry_ids=release_entry_ids,
        cap=cap,
        schema=release.schema.public_dict(),
        configuration=release.configuration(),
        report=partial(
            write_truncation_report, transcript=result.transcript, trajectory=result.trajectory
        ),
        tables={
            TRANSCRIPT_FILE: result.transcript,
            POSTERIOR_FILE: draws,
            TRAJECTORY_FILE: result.trajectory,
        },
        json_files={DESIGN_FILE: design},
        manifest_extra=manifest_extra,
        invalid_rows=release.config.on_invalid_rows,
    )


FIGURE_TRAJECTORY = "trajectory.png"


def trajectory_figure(transcript: pd.DataFrame, trajectory: pd.DataFrame):  # noqa: ANN201
    """Posterior mean and 5-95 % band of mu and sigma per step, with the intervals [l_t, r_t]
    (the paper's Figure 2 without the particle clouds). matplotlib is imported here."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.fill_between(trajectory.t, trajectory.mu_q05, trajectory.mu_q95, alpha=0.3,
                     label="5-95 % posterior")  # fmt: skip
    top.plot(trajectory.t, trajectory.mu_mean, color="red", lw=1, label="posterior mean")
    top.plot(transcript.t, transcript.l, color="0.4", lw=0.5, label="interval [l_t, r_t]")
    top.plot(transcript.t, transcript.r, color="0.4", lw=0.5)
    centre, spread = trajectory.mu_mean.iloc[-1], max(trajectory.mu_sd.iloc[-1], 1e-12)
    top.set_ylim(centre - 40 * spread, centre + 40 * spread)
    top.set_ylabel("mu")
    top.legend(fontsize=7, loc="upper right")
    bottom.fill_between(trajectory.t, trajectory.sigma_q05, trajectory.sigma_q95, alpha=0.3)
    bottom.plot(trajectory.t, trajectory.sigma_mean, color="red", lw=1)
    bottom.set_yscale("log")
    bottom.set_ylabel("sigma")
    bottom.set_xlabel("t (rows processed)")
    figure.tight_layout()
    return figure


def write_truncation_report(
    directory: Path, manifest: dict, transcript: pd.DataFrame, trajectory: pd.DataFrame
) -> None:
    """report.md and trajectory.png (the `report` callable of the bundle)."""
    import matplotlib.pyplot as plt

    from dprelease.report_common import (
        budget_section,
        header_section,
        human,
        privacy_section,
        verification_section,
        write_markdown,
    )

    figure = trajectory_figure(transcript, trajectory)
    figure.savefig(directory / FIGURE_TRAJECTORY, dpi=100)
    plt.close(figure)
    s, design = manifest["posterior_summary"], manifest["design"]
    column, n_steps = manifest["column"], manifest["n_steps"]
    lines = [
        *header_section(manifest, "Adaptive-truncation posterior release"),
        *privacy_section(manifest),
        f"- Mechanism: {manifest['truncation_statement']}.",
        "",
        "## Posterior of the column's normal model",
        "",
        f"Column `{column}` modelled as N(mu, sigma^2); {n_steps} rows processed, each "
        "released once as its value clamped to [l_t, r_t] plus Laplace noise of scale "
        f"(r_t - l_t)/{human(manifest['epsilon'])}. Engine `{manifest['engine']}` "
        "(SMC on (mu, sigma) with the exact likelihood of the released values).",
        "",
        "| parameter | posterior mean | sd | 5 % | 95 % |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in ("mu", "sigma"):
        lines.append(
            f"| {name} | {human(s[f'{name}_mean'])} | {human(s[f'{name}_sd'])} "
            f"| {human(s[f'{name}_q05'])} | {human(s[f'{name}_q95'])} |"
        )
    lines += [
        "",
        f"Intervals: m + [{design['a']}, {design['b']}] c for (m, c) a Thompson draw from the "
        "current posterior (Fisher-information design, score "
        f"`{design['score']}`), intersected with the schema bounds.",
        "",
        f"![posterior trajectory]({FIGURE_TRAJECTORY})",
        "",
    ]
    if "dp_row_count" in manifest:
        lines += [
            f"T was fixed from a DP row count ({human(manifest['dp_row_count']['value'])}, a "
            "Laplace-noised count, not the real number of rows).",
            "",
        ]
    lines += [*budget_section(directory, manifest), *verification_section(manifest)]
    write_markdown(directory, lines)
