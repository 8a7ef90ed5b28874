"""The DP synthetic-data release (the main paper's release kind): its pipeline and bundle.

public schema -> validated real table -> encoded matrix (or chunks) -> generator -> synthetic
rows -> weights -> PSIS -> release (docs/development/architecture.md). `SYNTHETIC` is the
pipeline (`release.pipeline.Pipeline`); the plan is `release.synthetic.plan`.

- `load`: on the chunked path (`SyntheticPlan.streams`) the validation pass also sums the
  generator's exact cell counts (`io.stream.StreamingInput.scan`); they see noise only in
  `run`, after the reservation. Otherwise the whole table is loaded and encoded.
- `run`: fit the generator, sample the synthetic rows (post-processing, seeded by the user's
  seed), estimate the weights (their own share of the budget).
- `bundle`: PSIS of the (tempered) weights, given the method's certified bound on them if any,
  and the release gate (exit 4 unless `allow_unreliable_weights`), after the spends are
  committed since diagnosing needs the DP weights; the synthetic rows decoded and checked
  against the schema; then the files:
  - `synthetic.parquet`: the schema's columns with their types, plus `weight`
    (Pareto-smoothed, self-normalised to mean 1) and `log_weight` (the raw debiased log
    weights);
  - `diagnostics.json`: PSIS diagnostics of the released weights;
  - `report.md` and its figures.
- `check-expectations` (`release.synthetic.expectations`): Great Expectations' validation of
  the synthetic table against the public schema's suite (`expectations.json`), when the gx
  extra is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from dprelease import weights as weight_methods
from dprelease.diagnostics import PsisResult, diagnose_weights, require_reliable
from dprelease.diagnostics.accuracy import collapse, grade, verdict
from dprelease.diagnostics.column_cells import cell_crowding, weak_cells
from dprelease.diagnostics.psis.smoothing import normalised_weights
from dprelease.generators.base import CountsGenerator, FittedGenerator, Measurement
from dprelease.io.stream import Scan, StreamingInput, chunk_rows_for, load_validated
from dprelease.io.validate import decode_synthetic
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.noise import NoiseSource
from dprelease.release.files import DIAGNOSTICS_FILE, SYNTHETIC, SYNTHETIC_FILE
from dprelease.release.pipeline import Pipeline, Source, Step
from dprelease.release.report.synthetic import write_report
from dprelease.release.synthetic.expectations import EXPECTATIONS_CHECK
from dprelease.release.synthetic.plan import SyntheticPlan, plan_release
from dprelease.release.writer import LedgerRecord, ReleaseBundle
from dprelease.weights.calibration.held_margins import held_shift
from dprelease.weights.logistic.stream import STREAMING_WEIGHTS, estimate_streaming


@dataclass(frozen=True)
class StreamedTable:
    """The real table after its validation pass on the chunked path: the source to re-read
    and that pass's exact cell counts and rows. Private: held in memory only, by steps that
    never persist results; the counts see noise only after the reservation."""

    source: StreamingInput
    scan: Scan


RealRows = np.ndarray | StreamedTable


@dataclass(frozen=True)
class SyntheticOutcome:
    """What the mechanisms produced: the generator's spends, the encoded synthetic rows and
    the weights (all DP outputs or their post-processing)."""

    generator_spends: tuple[PlannedSpend, ...]
    measurements: list[Measurement]
    precision: dict[str, dict] | None  # `Generator.precision_of`
    synthetic: np.ndarray
    estimate: weight_methods.WeightEstimate


def fit_generator(plan: SyntheticPlan, data: RealRows, noise: NoiseSource) -> FittedGenerator:
    if isinstance(data, StreamedTable):
        assert isinstance(plan.generator, CountsGenerator)
        return plan.generator.fit_counts(data.scan.counts, noise)
    return plan.generator.fit(data, noise)


def estimate_weights(
    plan: SyntheticPlan,
    data: RealRows,
    synthetic: np.ndarray,
    fitted: FittedGenerator,
    noise: NoiseSource,
) -> weight_methods.WeightEstimate:
    """The weights of the synthetic rows with their share of the budget; on the chunked path
    the real rows are re-read in chunks (or not at all, for `none`)."""
    method = plan.config.weights
    assert method is not None  # resolved (`resolve_defaults`)
    options: dict[str, Any] = dict(plan.weights_settings)
    if method == "discriminator":
        options["discriminator"] = fitted.discriminator
    budget: dict[str, Any] = {
        "epsilon": plan.weights_budget.epsilon or None,
        "delta": plan.weights_budget.delta or None,
        "noise": noise,
    }
    real: Any = data
    if isinstance(data, StreamedTable):
        if method in STREAMING_WEIGHTS:
            return estimate_streaming(
                method,
                data.source,
                plan.encoder,
                synthetic,
                rows=data.scan.rows,
                **budget,
                **options,
            )
        chunked = method in weight_methods.CHUNKED_METHODS
        real = data.source.encoded(plan.encoder) if chunked else None
    return weight_methods.estimate(method, real, synthetic, **budget, **options)


def run_mechanisms(
    plan: SyntheticPlan, data: RealRows, noise: NoiseSource, step: Step
) -> SyntheticOutcome:
    """Fit the generator, sample the synthetic rows, estimate the weights."""
    fitted = step("fit-generator", fit_generator, plan, data, noise)
    rng = np.random.default_rng(plan.config.seed)
    synthetic = step("sample-synthetic", fitted.sample, plan.n_synthetic, rng)
    estimate = step("estimate-weights", estimate_weights, plan, data, synthetic, fitted, noise)
    return SyntheticOutcome(
        fitted.spends, fitted.measurements, fitted.precision, synthetic, estimate
    )


def diagnose(
    plan: SyntheticPlan, estimate: weight_methods.WeightEstimate, synthetic: np.ndarray
) -> PsisResult:
    """PSIS of the (tempered) DP weights, given the method's certified bound on them.

    Calibration weights arrive raked to the generator's one-way margins after their own
    tempering (`weights.calibration.fit`). They are not raked again after the release's
    `--temper` and Pareto smoothing: `weight` must stay the smoothed `log_weight` for
    `dprelease verify`. Smoothing moves only the upper tail; the manifest records the shift
    it leaves (`released_held_margin_shift`)."""
    return diagnose_weights(estimate.log_weights, plan.config.temper, estimate.log_weight_max)


def load_real(plan: SyntheticPlan, source: Source) -> RealRows:
    """The real table: streamed with its counts summed, or loaded and encoded."""
    if plan.streams:
        assert isinstance(plan.generator, CountsGenerator)
        rows = chunk_rows_for(plan.encoder.width)
        stream = StreamingInput(source, plan.schema, plan.config, chunk_rows=rows)
        return StreamedTable(stream, stream.scan(plan.encoder, plan.generator.cell_counts))
    return plan.encoder.encode(load_validated(source, plan.schema, plan.config))


def synthetic_bundle(
    plan: SyntheticPlan, outcome: SyntheticOutcome, record: LedgerRecord
) -> ReleaseBundle:
    """The PSIS gate (exit 4 unless allowed), the decoded synthetic rows with their DP
    weights, and the PSIS diagnostics."""
    diagnostics = diagnose(plan, outcome.estimate, outcome.synthetic)
    require_reliable(diagnostics, plan.config.allow_unreliable_weights)
    configuration = plan.configuration()
    configuration["weights"].update(outcome.estimate.details)
    configuration["weights"]["released_held_margin_shift"] = held_shift(
        diagnostics.log_weights,
        plan.encoder,
        outcome.synthetic,
        outcome.estimate.details.get("held_margins"),
    )
    synthetic = decode_synthetic(plan.encoder, outcome.synthetic)
    log_weights = outcome.estimate.log_weights
    weights = normalised_weights(diagnostics.log_weights)
    accuracy = grade(outcome.measurements, plan.schema.target)
    if outcome.precision is not None:
        accuracy["measured_precision"] = outcome.precision
    rows = collapse(synthetic, plan.schema.public_dict()["columns"])
    rows["cell_crowding"] = cell_crowding(plan.encoder, outcome.synthetic, outcome.measurements)
    rows["weak_cells"] = weak_cells(plan.encoder, outcome.synthetic, outcome.measurements)
    chi2 = (outcome.estimate.details.get("calibration") or {}).get("chi2_weighted_per_df")
    assert isinstance(diagnostics.verdict, str)  # one weight vector: one verdict
    judged = verdict(accuracy, rows, diagnostics.verdict, chi2)
    table = synthetic.assign(
        weight=np.asarray(weights, dtype=float),
        log_weight=np.asarray(log_weights, dtype=float),
    )
    # PSIS grades the weights' tail; flat weights (all equal) correct nothing, whatever it says
    summary = {**diagnostics.to_dict(), "flat": bool(np.ptp(diagnostics.log_weights) == 0)}
    return plan.release_bundle(
        SYNTHETIC,
        record,
        configuration,
        report=partial(
            write_report,
            synthetic=synthetic,
            weights=weights,
            raw_log_weights=log_weights,
            smoothed_log_weights=diagnostics.log_weights,
        ),
        tables={SYNTHETIC_FILE: table},
        json_files={DIAGNOSTICS_FILE: summary},
        manifest_extra={
            "n_synthetic": len(synthetic),
            "diagnostics": summary,
            "accuracy": {**accuracy, "synthetic_rows": rows},
            "verdict": judged,
        },
    )


def actual_spends(plan: SyntheticPlan, outcome: SyntheticOutcome) -> list[PlannedSpend]:
    spends = [*outcome.generator_spends, *plan.actual_weights_spends(outcome.estimate)]
    return plan.ledger_entries(spends)


SYNTHETIC_PIPELINE = Pipeline(
    SYNTHETIC,
    plan_release,
    load_real,
    run_mechanisms,
    actual_spends,
    synthetic_bundle,
    checks=(EXPECTATIONS_CHECK,),
)
