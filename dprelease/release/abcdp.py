"""The ABCDP release (Park et al. 2021; docs/abcdp.md section 7): DP rejection ABC by the sparse
vector technique.

`ABCDP_PIPELINE` (`release.pipeline.Pipeline`):
- `plan`: loads the model (public code, `config.model`), dry-runs it from the prior and fixes
  the bandwidth and random features; the CLI plans before Prefect starts and the flow plans
  again (same seed, same result);
- `load`: the validated table, the model's columns encoded;
- `run`: DP count -> n_hat, m -> observed mean embedding -> simulate (theta_t, Y_t) lazily in
  batches with the public seed and feed the noisy distances to the SVT in draw order (stop
  at c); both spends are committed in full, however many were accepted;
- `bundle`: the accepted theta's with their draw indices (`posterior.parquet`), the consumed
  prior draws with their DP indicators (`draws.parquet`), and the manifest fields (model
  sha256, seed of the public randomness, bandwidth, T, m, stop index, the DP count n_hat
  labelled as such), and the posterior against the prior (`inference/abcdp/summary.py`:
  quantiles, spread ratio, shift, a permutation test against fresh public prior draws;
  post-processing). Never the distances, the noisy threshold, the real row count, or any
  other statistic of the real rows (spec 7.6).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from dprelease.config import ABCDPConfig
from dprelease.inference.abcdp.mechanism import ABCDPPlan, ABCDPResult, plan_abcdp, run_abcdp
from dprelease.inference.abcdp.model import load_model
from dprelease.inference.abcdp.summary import PRIOR_DRAWS, summarise
from dprelease.io.stream import load_validated
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.noise import NoiseSource
from dprelease.release.files import ABCDP, ABCDP_POSTERIOR_FILE, DRAWS_FILE, SVT_VARIANTS
from dprelease.release.pipeline import KindPlan, Pipeline, Source, one_step
from dprelease.release.report.abcdp import write_abcdp_report
from dprelease.release.writer import LedgerRecord, ReleaseBundle
from dprelease.schema import Schema


@dataclass(frozen=True)
class ABCDPReleasePlan(KindPlan):
    """The public plan of one release: the schema, the settings and the ABCDP plan."""

    config: ABCDPConfig
    plan: ABCDPPlan

    @property
    def planned_spends(self) -> list[PlannedSpend]:
        return self.plan.planned_spends()


def plan_abcdp_release(schema: Schema, config: ABCDPConfig) -> ABCDPReleasePlan:
    """Load and dry-run the model, fix the public kernel; InputError (exit 2) on any problem."""
    return ABCDPReleasePlan(schema, config, plan_abcdp(schema, load_model(config.model), config))


def load_real_rows(release: ABCDPReleasePlan, source: Source) -> np.ndarray:
    """Validate the real table against the whole schema; encode the model's columns."""
    table = load_validated(source, release.schema, release.plan.config)
    simulator = release.plan.simulator
    return simulator.encoder.encode(table[list(simulator.schema.columns)])


def run_mechanism(release: ABCDPReleasePlan, real: np.ndarray, noise: NoiseSource) -> ABCDPResult:
    """DP count -> n_hat, m -> simulate in batches -> SVT in draw order, stop at c."""
    return run_abcdp(real, release.plan, noise)


def svt_statement(plan: ABCDPPlan, result: ABCDPResult) -> str:
    """One public sentence describing the mechanism (for the manifest and the report)."""
    c = plan.config
    factor = "2c" if c.resample else "(c + 1)"
    return (
        f"sparse vector technique ({SVT_VARIANTS[c.resample]}, c={c.n_samples}, "
        f"threshold {c.threshold:g} on the MMD scale) at epsilon={c.epsilon_svt:.6g} with "
        f"sensitivity 1/n_hat of the 1/n_hat-normalised MMD, threshold noise Laplace(b), "
        f"distance noise Laplace(2b), b = {factor}/(epsilon n_hat) = {result.noise_scale:.6g}; "
        f"n_hat from a Laplace row count at epsilon={c.epsilon_count:.6g}"
    )


def abcdp_bundle(
    release: ABCDPReleasePlan, result: ABCDPResult, record: LedgerRecord
) -> ReleaseBundle:
    """The release bundle (spec 7.6): DP outputs and public metadata only."""
    plan = release.plan
    posterior = result.posterior
    names = list(plan.model.parameter_names)
    reference_rng = plan.reference_stream()  # public: prior draws and permutations
    prior = plan.simulator.prior(reference_rng, PRIOR_DRAWS)
    summary = summarise(posterior[names].to_numpy(), prior, names, reference_rng)
    manifest_extra = {
        "model": {
            "reference": plan.model.reference,
            "file": plan.model.path.name,
            "class": plan.model.class_name,
            "sha256": plan.model.sha256,
            "parameter_names": list(plan.model.parameter_names),
            "columns": list(plan.model.columns),
        },
        "epsilon": plan.config.epsilon,
        "n_samples": plan.config.n_samples,
        "threshold": plan.config.threshold,
        "resample": plan.config.resample,
        "public_seed": plan.seed,
        "bandwidth": plan.bandwidth,
        "n_draws": plan.config.n_draws,
        "n_sim": result.n_sim,
        "t_stop": result.n_consumed,
        "n_accepted": len(result.accepted),
        "noise_scale": result.noise_scale,
        "dp_row_count": {
            "value": result.n_hat,
            "note": "Laplace count of the rows (a DP output, scale 1/epsilon_count), the "
            "public normaliser n_hat; not the real row count",
        },
        "posterior_mean": {
            name: (float(posterior[name].mean()) if len(posterior) else None)
            for name in plan.model.parameter_names
        },
        "posterior_summary": summary,
        "svt_statement": svt_statement(plan, result),
    }
    return release.release_bundle(
        ABCDP,
        record,
        plan.configuration(),
        report=partial(write_abcdp_report, posterior=posterior, prior=prior),
        tables={ABCDP_POSTERIOR_FILE: posterior, DRAWS_FILE: result.draws_table},
        manifest_extra=manifest_extra,
    )


ABCDP_PIPELINE = Pipeline(
    ABCDP,
    plan_abcdp_release,
    load_real_rows,
    one_step("run-abcdp", run_mechanism),
    lambda release, result: release.plan.actual_spends(result),
    abcdp_bundle,
)  # kind, plan, load, run, actual spends, bundle
