"""Prefect tasks of the release flow: thin wrappers over library calls.

Tasks that see the real data (`load_real`, `fit_generator`, `estimate_weights`) neither
persist results nor cache, and are never retried automatically: a retry would be a new,
unaccounted spend (PRIVACY_MODEL.md section 7). No task here is retried or cached; the
public ones simply have nothing worth caching.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from prefect import task

from dprelease import weights as weight_methods
from dprelease.diagnostics import PsisResult, diagnose_weights, require_reliable
from dprelease.planning import ReleaseConfig, ReleasePlan, plan_release, weights_options
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.noise import NoiseSource
from dprelease.schema import load_schema
from dprelease.streaming import CountedStream, StreamingInput
from dprelease.streaming_logistic import STREAMING_WEIGHTS, estimate_streaming
from dprelease.validation import decode_synthetic, load_validated
from tasks import NO_PERSISTENCE


@task(name="plan-release", **NO_PERSISTENCE)
def plan(schema_path: str, config: ReleaseConfig) -> ReleasePlan:
    return plan_release(load_schema(schema_path), config)


def streams(release: ReleasePlan) -> bool:
    """The chunked path (`dprelease.streaming`, memory bounded by the chunk, not the rows)
    serves generators fitted from summed cell counts with weights that read the real rows
    through `streaming_logistic`, in chunks (`calibration`) or not at all; other
    combinations load the table."""
    return hasattr(release.generator, "fit_counts") and release.config.weights in (
        *STREAMING_WEIGHTS,
        *weight_methods.CHUNKED_METHODS,
        "none",
    )


@task(name="load-real-table", **NO_PERSISTENCE)
def load_real(input_path: str, release: ReleasePlan) -> np.ndarray | CountedStream:
    """Validate the real table (before the reservation: bad input spends nothing). On the
    chunked path the same pass sums the generator's exact cell counts; they see noise only
    in `fit_generator`, after the reservation."""
    if streams(release):
        source = StreamingInput(
            input_path,
            release.schema,
            on_out_of_bounds=release.config.on_out_of_bounds,
            on_invalid_rows=release.config.on_invalid_rows,
            drop_extra_columns=release.config.drop_extra_columns,
        )
        return CountedStream(source, source.scan(release.encoder, release.generator.cell_counts))
    validated = load_validated(
        input_path,
        release.schema,
        on_out_of_bounds=release.config.on_out_of_bounds,
        on_invalid_rows=release.config.on_invalid_rows,
        drop_extra_columns=release.config.drop_extra_columns,
    )
    return release.encoder.encode(validated.table)


@task(name="fit-generator", **NO_PERSISTENCE)
def fit_generator(
    release: ReleasePlan, real: np.ndarray | CountedStream, noise: NoiseSource
) -> list[PlannedSpend]:
    if isinstance(real, CountedStream):
        return release.generator.fit_counts(real.counts, noise)
    return release.generator.fit(real, noise)


@task(name="sample-synthetic", **NO_PERSISTENCE)
def sample_synthetic(release: ReleasePlan) -> np.ndarray:
    rng = np.random.default_rng(release.config.seed)
    return release.generator.sample(release.n_synthetic, rng)


@task(name="estimate-weights", **NO_PERSISTENCE)
def estimate_weights(
    release: ReleasePlan,
    real: np.ndarray | CountedStream,
    synthetic: np.ndarray,
    noise: NoiseSource,
) -> weight_methods.WeightEstimate:
    options = weights_options(
        release.config.weights, release.config.weights_options, release.encoder
    )
    if release.config.weights == "discriminator":
        options["discriminator"] = release.generator.discriminator
    if isinstance(real, CountedStream):
        if release.config.weights in STREAMING_WEIGHTS:
            return estimate_streaming(
                release.config.weights,
                real.source,
                release.encoder,
                synthetic,
                epsilon=release.weights_budget.epsilon or None,
                delta=release.weights_budget.delta or None,
                noise=noise,
                **options,
            )
        # chunked methods read the encoded chunks; `none` does not read the real rows
        chunked = release.config.weights in weight_methods.CHUNKED_METHODS
        real = real.source.encoded(release.encoder) if chunked else None
    return weight_methods.estimate(
        release.config.weights,
        real,
        synthetic,
        epsilon=release.weights_budget.epsilon or None,
        delta=release.weights_budget.delta or None,
        noise=noise,
        **options,
    )


@task(name="diagnose-weights", **NO_PERSISTENCE)
def diagnose(
    release: ReleasePlan, log_weights: np.ndarray, log_weight_max: float | None = None
) -> PsisResult:
    """PSIS of the (tempered) DP weights, given the method's certified bound on them if any;
    refuses unreliable weights unless allowed (exit 4)."""
    result = diagnose_weights(log_weights, release.config.temper, log_weight_max)
    require_reliable(result, release.config.allow_unreliable_weights)
    return result


@task(name="decode-and-validate-synthetic", **NO_PERSISTENCE)
def decode(release: ReleasePlan, synthetic: np.ndarray) -> pd.DataFrame:
    return decode_synthetic(release.encoder, synthetic)
