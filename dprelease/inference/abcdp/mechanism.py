"""ABCDP: differentially private rejection ABC by the sparse vector technique.

Park, Vinaroz, Jitkrittum, "ABCDP: Approximate Bayesian Computation with Differential
Privacy" (Park et al. 2021); specification `docs/abcdp.md`. A modeler's prior and simulator
(public code, `abcdp.model`) produce public pairs (theta_t, Y_t), t = 1..T; the only step that
touches the real table D, "is rho~(D, Y_t) <= eps_abc?", is answered by the SVT
(`abcdp.svt.svt_below_threshold`), so the cost depends on the number c of released samples,
not on T. The released posterior sample is {theta_t : accepted}.

Privacy (docs/privacy-model.md sections 1, 7, 9; docs/abcdp.md 5.3). The paper normalises the MMD by
the real row count N and calibrates the noise with it (Lemma 4.1, Theorem 4.1); N_D is private
here, so instead:

1. DP count n~ = N_D + Lap(1/eps_count), ledger entry `dp_row_count` (Laplace, sensitivity 1);
   n~ < n_min is refused after the count (the spend stays).
2. rho~(D, Y) = || (1/n_hat) sum_{x in D} phi(x) - (1/m) sum_j phi(y_j) || with n_hat = n~, whose
   add/remove sensitivity is 1/n_hat (the paper's 2/N is for replace-one with N public).
3. SVT at eps_svt = epsilon - eps_count with Delta = 1/n_hat, calibrated per Theorem 4.1 for
   the option: b = (c+1) Delta / eps_svt (no resampling) or 2 c Delta / eps_svt (resampling);
   ledger entry `abcdp_svt` (pure eps_svt-DP).
Total (eps_count + eps_svt, 0)-DP under add/remove-one by adaptive composition. Both entries
are reserved before the data is read and committed in full, whatever the number accepted.

Public inputs only: the prior draws, simulations and random features W come from `seed`
(independent children of one SeedSequence; two more children drive the dry run's probes of
the simulator's calling convention and the report's prior draws); the bandwidth is given or
the median heuristic on simulated data from the prior (never the real rows); m = n_sim or
min(round(n_hat), 10 000), post-processing of the DP count. SVT and count noise come from the
`NoiseSource`, never from the seed. The noisy threshold, the noises and the distances never
leave `svt_below_threshold` / `run_abcdp`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dprelease.config import ABCDPConfig
from dprelease.errors import InputError, require
from dprelease.inference.abcdp.kernel import (
    RandomFourierFeatures,
    RealDistance,
    make_distance,
    median_heuristic,
)
from dprelease.inference.abcdp.model import SimulatorCheck
from dprelease.inference.abcdp.simulator import LoadedModel
from dprelease.inference.abcdp.svt import (
    flip_probability,
    svt_below_threshold,
    svt_noise_scale,
)
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.calibration import laplace_scale
from dprelease.privacy.counting import dp_row_count
from dprelease.privacy.mechanisms import Laplace, PureEpsilon
from dprelease.privacy.noise import NoiseSource
from dprelease.release.files import ABCDP, COUNT_MECHANISM, SVT_MECHANISM, SVT_VARIANTS
from dprelease.schema import Schema

M_MAX = 10_000
SIM_BATCH_ROWS = 250_000  # simulated rows per batch handed to the encoder and the kernel
BANDWIDTH_DRAWS, BANDWIDTH_ROWS = 20, 100  # prior draws x rows of the public median heuristic


@dataclass(frozen=True)
class ABCDPPlan:
    """The public plan: model, encoder, bandwidth, features, the resolved public seed."""

    config: ABCDPConfig
    model: LoadedModel
    simulator: SimulatorCheck
    seed: int
    bandwidth: float
    features: RandomFourierFeatures | None

    def planned_spends(self) -> list[PlannedSpend]:
        """The two ledger entries reserved before the data is read (docs/abcdp.md 7.5)."""
        c = self.config
        count_scale = laplace_scale(1.0, c.epsilon_count)
        return [
            PlannedSpend(
                COUNT_MECHANISM,
                c.epsilon_count,
                0.0,
                {"sensitivity": 1, "noise": "laplace", "scale": count_scale},
                Laplace(scale=count_scale, l1_sensitivity=1.0),
            ),
            PlannedSpend(
                SVT_MECHANISM, c.epsilon_svt, 0.0, self._svt_params(), PureEpsilon(c.epsilon_svt)
            ),
        ]

    def actual_spends(self, result: ABCDPResult) -> list[PlannedSpend]:
        """The same two spends, in full, with the DP-derived scales (docs/abcdp.md 5.3,
        pitfall 7)."""
        count, svt = self.planned_spends()
        params = {
            **svt.params,
            "n_hat": result.n_hat,
            "b": result.noise_scale,
            "threshold_noise_scale": result.noise_scale,
            "query_noise_scale": 2.0 * result.noise_scale,
        }
        return [count, PlannedSpend(svt.mechanism, svt.epsilon, 0.0, params, svt.description)]

    def _svt_params(self) -> dict:
        c = self.config
        return {
            "variant": SVT_VARIANTS[c.resample],
            "c": c.n_samples,
            "resample": c.resample,
            "sensitivity": "1/n_hat",
            "n_draws": c.n_draws,
            "threshold": c.threshold,
            "kernel": c.kernel,
            "n_features": c.n_features if c.kernel == "gaussian_rff" else None,
            "bandwidth": self.bandwidth,
        }

    def configuration(self) -> dict:
        """Public configuration for the manifest (no real-data quantity)."""
        c = self.config
        return {
            "kind": ABCDP,
            "model": self.model.reference,
            "model_sha256": self.model.sha256,
            "parameter_names": list(self.model.parameter_names),
            "columns": list(self.model.columns),
            "n_samples": c.n_samples,
            "threshold": c.threshold,
            "epsilon": c.epsilon,
            "epsilon_count": c.epsilon_count,
            "epsilon_svt": c.epsilon_svt,
            "count_fraction": c.count_fraction,
            "resample": c.resample,
            "svt_variant": SVT_VARIANTS[c.resample],
            "n_draws": c.n_draws,
            "n_sim": c.n_sim,
            "kernel": c.kernel,
            "n_features": c.n_features if c.kernel == "gaussian_rff" else None,
            "bandwidth": self.bandwidth,
            "bandwidth_rule": c.bandwidth if isinstance(c.bandwidth, str) else "given",
            "simulator": self.simulator.mode.to_dict(),
            "n_min": c.n_min,
            "seed": self.seed,
            "secure_noise": c.secure_noise,
            "on_out_of_bounds": c.on_out_of_bounds,
            "on_invalid_rows": c.on_invalid_rows,
            "drop_extra_columns": c.drop_extra_columns,
        }

    def streams(self) -> tuple[np.random.Generator, np.random.Generator, np.random.Generator]:
        """Independent public streams: (prior + simulations, features W, dry run/bandwidth)."""
        return public_stream(self.seed, 0), public_stream(self.seed, 1), public_stream(self.seed, 2)

    def reference_stream(self) -> np.random.Generator:
        """A fourth public stream, for post-processing: prior draws to compare the posterior
        with, and the permutations of that comparison (`summary.py`)."""
        return public_stream(self.seed, REFERENCE_STREAM)


PROBE_STREAM, REFERENCE_STREAM = 3, 4


def public_stream(seed: int, index: int) -> np.random.Generator:
    """Child `index` of the public seed's SeedSequence (children 0-2 are `streams()`; adding
    children does not change them)."""
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(index + 1)[index])


def plan_abcdp(schema: Schema, model: LoadedModel, config: ABCDPConfig) -> ABCDPPlan:
    """Check the model by a dry run from the prior and fix every public quantity.

    Runs before the cap check and before the data is read: a broken model, a column outside
    the schema or out-of-bounds simulations are refused here (exit 2) at no privacy cost.
    """
    if config.kernel == "gaussian_rff":  # the simulated side's features run in torch
        require("torch", "ABCDP kernel 'gaussian_rff'")
    seed = config.seed if config.seed is not None else secrets.randbits(63)
    simulator = SimulatorCheck(model, schema, public_stream(seed, PROBE_STREAM))
    draft = ABCDPPlan(config, model, simulator, seed, 1.0, None)
    _, features_rng, public_rng = draft.streams()
    simulated = simulator.dry_run(public_rng, BANDWIDTH_DRAWS, BANDWIDTH_ROWS)
    if isinstance(config.bandwidth, str):
        bandwidth = median_heuristic(simulated.reshape(-1, simulator.encoder.width), public_rng)
    else:
        bandwidth = float(config.bandwidth)
    features = None
    if config.kernel == "gaussian_rff":
        features = RandomFourierFeatures(
            simulator.encoder.width, config.n_features, bandwidth, features_rng
        )
    return ABCDPPlan(config, model, simulator, seed, bandwidth, features)


@dataclass(frozen=True)
class ABCDPResult:
    """The DP output: accepted draw indices, stop index, and the DP count; nothing secret."""

    parameter_names: tuple[str, ...]
    draws: np.ndarray = field(repr=False)  # theta_t for t < n_consumed: public prior draws
    accepted: tuple[int, ...]
    n_consumed: int
    n_hat: float
    n_sim: int
    noise_scale: float

    @property
    def posterior(self) -> pd.DataFrame:
        """One row per accepted sample: the parameters and the draw index t (docs/abcdp.md 7.6)."""
        index = np.asarray(self.accepted, dtype=np.int64)
        table = pd.DataFrame(self.draws[index], columns=list(self.parameter_names))
        return table.assign(draw_index=index)

    @property
    def draws_table(self) -> pd.DataFrame:
        """theta_t for every consumed draw with its DP indicator."""
        table = pd.DataFrame(self.draws, columns=list(self.parameter_names))
        flags = np.zeros(len(self.draws), dtype=bool)
        flags[list(self.accepted)] = True
        return table.assign(draw_index=np.arange(len(self.draws)), accepted=flags)


def run_abcdp(real_encoded: np.ndarray, plan: ABCDPPlan, noise: NoiseSource) -> ABCDPResult:
    """Count, then SVT over lazily simulated draws (docs/abcdp.md 7.4); the spend must be reserved.

    `real_encoded` are the real rows in the model's sub-schema encoding. Raises InputError
    when the DP count is below n_min (after the count: its spend is kept).
    """
    config = plan.config
    n_hat = dp_row_count(len(real_encoded), config.epsilon_count, noise)
    if n_hat < config.n_min:
        raise InputError(
            f"the DP row count is below n_min={config.n_min}: too few rows for ABCDP "
            "(the count's epsilon is spent)"
        )
    m = config.n_sim or min(int(round(n_hat)), M_MAX)
    distance = make_distance(config.kernel, plan.bandwidth, plan.features, real_encoded, n_hat)
    theta, distance_batches = simulated_distances(plan, distance, m)
    outcome = svt_below_threshold(
        distance_batches,
        config.threshold,
        config.n_samples,
        config.epsilon_svt,
        1.0 / n_hat,
        config.resample,
        noise,
    )
    return ABCDPResult(
        parameter_names=plan.model.parameter_names,
        draws=theta[: outcome.n_consumed],
        accepted=outcome.accepted,
        n_consumed=outcome.n_consumed,
        n_hat=n_hat,
        n_sim=m,
        noise_scale=svt_noise_scale(
            config.n_samples, 1.0 / n_hat, config.epsilon_svt, config.resample
        ),
    )


def simulated_distances(
    plan: ABCDPPlan, distance: RealDistance, m: int
) -> tuple[np.ndarray, Iterator[np.ndarray]]:
    """theta_1..T from the public simulation stream, and rho~(D, Y_t) for them in batches of
    draws, generated lazily in draw order (Y_t simulated only when its batch is requested)."""
    simulation_rng = plan.streams()[0]
    theta = plan.simulator.prior(simulation_rng, plan.config.n_draws)
    batch = max(1, SIM_BATCH_ROWS // m)

    def batches() -> Iterator[np.ndarray]:
        for start in range(0, len(theta), batch):
            simulated = plan.simulator.simulate(theta[start : start + batch], m, simulation_rng)
            yield distance.distances(simulated)

    return theta, batches()


PLAN_MULTIPLES = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # offsets |rho - eps_abc| in units of b


def noise_plan(config: ABCDPConfig, n_rows_guess: float) -> dict:
    """Public planning (no data): the noise at a guessed row count and the flip curve.

    With n_hat = the guess, Delta = 1/n_hat, b per Theorem 4.1; the probability that the DP
    decision differs from the non-private one for a draw at distance |rho - eps_abc| = a is
    G_b(a) (Proposition 4.2).
    """
    b = svt_noise_scale(config.n_samples, 1.0 / n_rows_guess, config.epsilon_svt, config.resample)
    return {
        "n_rows_guess": n_rows_guess,
        "epsilon_count": config.epsilon_count,
        "epsilon_svt": config.epsilon_svt,
        "count_noise_scale": laplace_scale(1.0, config.epsilon_count),
        "sensitivity": 1.0 / n_rows_guess,
        "threshold_noise_scale": b,
        "query_noise_scale": 2.0 * b,
        "variant": SVT_VARIANTS[config.resample],
        "flip_probability": [
            {"offset": k * b, "probability": float(flip_probability(k * b, 0.0, b))}
            for k in PLAN_MULTIPLES
        ],
    }
