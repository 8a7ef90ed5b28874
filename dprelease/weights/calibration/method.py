"""DP calibration weights: noisy two-way tables, raked to the synthetic margins, matched by
exponential tilting.

The moment-matching dual of the paper's logistic weights (Ghalebikesabi et al. 2022, section
3.3: a log-linear density ratio log w(x) = b^T phi(x)). The weights correct what a marginal
generator misses (its dependence between columns), leave what it already measured well (its
one-way margins) as it is, and never make an estimate worse by default
(docs/decisions/0017-calibration-weights.md).

Feature map phi (`features`; public, fixed from the schema and the
synthetic rows before the real rows are read). Every column is cut into coarse cells: a
numeric column at the quantiles of its SYNTHETIC values into `bins` cells (a DP output, so
public), plus a "missing" cell when nullable; a categorical column by its levels. The pairs
are (target, column) for every other column when the schema names a `target` (the analyst's
model), else every pair of columns.
phi(x) holds the constant 1 and, for every pair, the indicator of x's joint cell. Each row
activates exactly k = 1 + (number of pairs) indicators whatever the cut points, so
||phi(x)||_2 = sqrt(k) and ||phi(x)||_1 = k for every x: a public constant. When the
schema names a target, phi(x) also holds the target model's moments t(x) = c y z (target x
each feature; `target_moments`) with public bounds ||t||_2^2 <= M2 and
||t||_1 <= M1 from the schema, so that weighted least squares on the synthetic rows solves
the DP sufficient statistics' normal equations.

Mechanism (the only step that reads the real rows). S = sum over real rows of phi(x_i), plus
noise on every coordinate: Gaussian N(0, sigma^2), sigma from the analytic Gaussian mechanism
(Balle and Wang 2018) for L2 sensitivity sqrt(k + M2), when the weights' delta > 0; Laplace
of scale (k + M1) / epsilon (L1 sensitivity k + M1) for pure epsilon. The budget split
between the pair tables and the moments is public: their shares k / (k + M2) and
M2 / (k + M2) of the squared sensitivity (`budget_split` in the record; c =
`moment_scale` sets it). Adding or removing one row changes S by exactly
phi(x) (docs/privacy-model.md section 1), so S is (epsilon, delta)-DP (resp. epsilon-DP). The noisy
count is the constant feature's coordinate S_0; no count is calibrated from, or published as,
the real N_D. The real rows may arrive as one matrix or as chunks (the streaming release).

Everything after S is post-processing of S and the public synthetic rows x_1..x_N (N = N_G;
`fit`):
- the generator's one-way margins over its public cells (`margin_bins`, the generator's
  bins) are held: equality constraints of the tilt, and raking back to them after every
  tempering, here and in the release (`held_margins`): the weighted one-way
  shares equal the unweighted ones within `HELD_TOLERANCE`, so no measured one-way margin
  is farther from the generator's DP measurement than the unweighted rows (tempering alone
  can move a target's share by several points);
- the moments' targets S_t / S_0, with the same delta-method variance as the tables;
- noisy two-way tables T = S_pair / S_0, each raked (iterative proportional fitting; Deming
  and Stephan 1940) to the one-way margins of the synthetic rows: the margins stay those the
  generator measured (with most of the budget), only the dependence is corrected. Raking
  from a table with negative noisy cells starts from the cells clipped at a tiny positive
  floor. Targets m = the raked tables; noise variance v_j = s^2 (1 + m_j^2) / S_0^2 (delta
  method for a ratio; s^2 = sigma^2 or 2 b^2, known); degrees of freedom df = sum over pairs
  of (r - 1)(c - 1) for the r x c cells the synthetic rows occupy (raking fixes the margins);
- the tilt p_i(b) proportional to exp(b^T phi(x_i)) minimising the ridge-penalised max-entropy
  dual F(b) = log sum_i exp(b^T phi_i) - b^T m + (lam / 2) b^T V b (`tilting`), with
  lam by the discrepancy principle (Morozov): the largest lam whose residual is at the noise
  level, chi2(lam) = r^T V^{-1} r = df. Fitting below the noise would fit the DP noise;
- "never worse by default" safeguards, all from DP quantities: flat weights when the
  unweighted synthetic rows already match the raked tables, chi2(inf) <= df + `chi2_slack`
  sqrt(2 df) (a DP chi-square near its degrees of freedom), or when the noisy count is below
  `MIN_NOISE_UNITS` noise standard deviations; then the weights are tempered, w^t with the
  largest t in [0, 1] whose effective sample size (sum w)^2 / sum w^2 is at least
  `ess_floor` x N_G. The weights take one value per cell of a finite grid, so they are
  bounded: `log_weight_bound` certifies the largest log weight any row of the domain can get
  (`log_weight_max` in the details), and the release's PSIS gate (`diagnostics.gate`) passes
  weights whose bound keeps every row within 10 times the mean even where ties in the tail
  break the Pareto fit, so a default release does not stop at the gate after its spend is
  committed (docs/decisions/0021-bounded-weights-and-the-psis-gate.md). Where the bound
  is looser, the weights are tempered further (t times 0.8 per step, down to t = 0.05)
  while the gate calls them unreliable, and made flat if it still does, or if the weighted
  rows end up no nearer the raked tables than the unweighted ones. Features constant
  over the synthetic rows cannot be tilted and are left out of the fit and the chi-square.
The details (the same keys whatever the DP outcome, None where a step did not run) record
what the weights were calibrated to (the pairs) and how far the unweighted
and weighted synthetic data are from the raked tables in units of the noise (chi-square per
degree of freedom), and advise releasing more synthetic rows when N_G is below
`ROWS_GUIDANCE` x the noisy count (weights on few synthetic rows collapse the ESS).

Defaults (`bins` = 2, pairs with the target, ESS floor 0.7, `MIN_NOISE_UNITS` = 3) are chosen
on public benchmark tables (`benchmarks/fidelity.py --tables diabetes breast randhie`), never
on the table being released: at `MIN_NOISE_UNITS` = 10 the weights stay flat on 350- and
455-row tables where 3 cuts the target model's error, an ESS floor of 0.7 improves every
table and epsilon on both metrics where 0.5 and 0.85 do not, and raking keeps the weights from
worsening the two-way TVD of a large table (measurements:
docs/decisions/0017-calibration-weights.md).

Hand-written (no library solves this exact regularised dual with a discrepancy rule).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dprelease.errors import InputError
from dprelease.privacy.accounting import NEIGHBOURING
from dprelease.privacy.calibration import gaussian_sigma, laplace_scale
from dprelease.privacy.mechanisms import DESCRIPTION_KEY, Gaussian, Laplace
from dprelease.privacy.noise import NoiseSource
from dprelease.privacy.zcdp import zcdp_epsilon
from dprelease.weights.base import (
    MethodSpec,
    Plan,
    PlanRequest,
    check_matrix,
    check_number,
    require_epsilon,
)
from dprelease.weights.calibration.features import (
    FeatureMap,
    active_features,
    column_pairs,
    target_position,
)
from dprelease.weights.calibration.fit import (
    DEFAULT_CHI2_SLACK,
    DEFAULT_ESS_FLOOR,
    DETAIL_KEYS,
    Calibration,
    calibrate,
    rake,
    raked_targets,
)
from dprelease.weights.calibration.held_margins import HeldMargins
from dprelease.weights.calibration.target_moments import CHUNK_ROWS, TargetMoments

__all__ = [
    "CALIBRATION",
    "DEFAULT_ESS_FLOOR",
    "DETAIL_KEYS",
    "Calibration",
    "CalibrationSettings",
    "FeatureMap",
    "active_features",
    "calibrate",
    "rake",
    "raked_targets",
    "release_sums",
]

DEFAULT_BINS = 2
DEFAULT_MARGIN_BINS = 32  # the marginals generator's default bins (the release passes its own)
# The tilt holds the one-way margins over at most this many equal-width bins (coarser than
# the generator's cells), raking then holds the generator's own cells; 8 bins give a lower
# target-model error than 32 (docs/decisions/0017-calibration-weights.md).
TILT_MARGIN_BINS = 8
DEFAULT_MOMENT_SCALE = 1.0


@dataclass(frozen=True)
class CalibrationSettings:
    """Public options: `encoder` (the schema's `Encoder`; the release flow passes it),
    `bins` (coarse cells per numeric column), `pairs` ("target": target x column, "all":
    every pair; None: "target" when the schema names a target, else "all"), `ess_floor`
    (fraction of N_G), `chi2_slack` (standard deviations of the chi-square above df under
    which the weights stay flat), `mechanism` (None: Gaussian when delta > 0, else Laplace),
    `moments` (also match the target's moments, `target_moments`, when the
    schema names a target), `moment_scale` (c: the moments' share of the budget),
    `hold_margins` and `margin_bins` (hold the one-way margins over the generator's public
    cells, `held_margins`; the release passes its generator's bins), `zcdp_rho`
    (Gaussian only: calibrate sigma = sensitivity / sqrt(2 rho) for rho-zCDP, which is
    (epsilon, delta)-DP at the conversion's epsilon <= the budget's; the release passes it
    when its generator is accounted in zCDP too, so that the two compose by adding rhos)."""

    def target_moments(self) -> TargetMoments | None:
        """The moment map when the settings ask for one and the schema allows it."""
        if not self.moments or target_position(self.encoder) is None:
            return None
        moments = TargetMoments(self.encoder, self.moment_scale)
        return moments if moments.size else None

    encoder: Any = None
    bins: int = DEFAULT_BINS
    pairs: str | None = None
    ess_floor: float = DEFAULT_ESS_FLOOR
    chi2_slack: float = DEFAULT_CHI2_SLACK
    mechanism: str | None = None
    moments: bool = True
    moment_scale: float = DEFAULT_MOMENT_SCALE
    hold_margins: bool = True
    margin_bins: int = DEFAULT_MARGIN_BINS
    zcdp_rho: float | None = None

    def __post_init__(self) -> None:
        from dprelease.encoding import Encoder

        if not isinstance(self.encoder, Encoder):
            raise InputError(
                "method 'calibration' needs option encoder=: the schema's Encoder (its "
                "columns and target define the public feature map)"
            )
        check_number("bins", self.bins, low=1, high=1000, integer=True)
        if self.pairs not in (None, "target", "all"):
            raise InputError(f"pairs must be 'target' or 'all', got {self.pairs!r}")
        if self.pairs == "target" and target_position(self.encoder) is None:
            raise InputError("pairs='target' needs a schema with a `target` column")
        check_number("ess_floor", self.ess_floor, high=1.0)
        check_number("chi2_slack", self.chi2_slack, low=-1e-12, high=1e6)
        check_number("moment_scale", self.moment_scale, high=1e6)
        check_number("margin_bins", self.margin_bins, low=0, high=10_000, integer=True)
        if self.mechanism not in (None, "gaussian", "laplace"):
            raise InputError(f"mechanism must be 'gaussian' or 'laplace', got {self.mechanism!r}")
        if self.zcdp_rho is not None:
            check_number("zcdp_rho", self.zcdp_rho, high=1e6)


@dataclass(frozen=True)
class CalibrationPlan:
    """The mechanism of the noisy sums, fixed before the real rows are read."""

    mechanism: str
    scale: float  # sigma (Gaussian) or b (Laplace)

    @property
    def noise_variance(self) -> float:
        return self.scale**2 if self.mechanism == "gaussian" else 2 * self.scale**2


def _plan(req: PlanRequest) -> Plan:
    s: CalibrationSettings = req.settings(CalibrationSettings)
    epsilon = require_epsilon(req.method, req.epsilon)
    delta = req.delta or 0.0
    mechanism = s.mechanism or ("gaussian" if delta > 0 else "laplace")
    if mechanism == "gaussian" and not 0 < delta < 1:
        raise InputError(
            "method 'calibration' with the Gaussian mechanism needs 0 < delta < 1; give the "
            "release a delta or choose mechanism='laplace' (pure epsilon)"
        )
    if s.zcdp_rho is not None and mechanism != "gaussian":
        raise InputError("option zcdp_rho is a budget of the Gaussian mechanism only")
    active = active_features(s.encoder, s.pairs)
    moments = s.target_moments()
    squared = 0.0 if moments is None else moments.squared_sensitivity
    names = [column.name for column in s.encoder.columns]
    if mechanism == "gaussian":
        sensitivity = math.sqrt(active + squared)
        scale = _gaussian_scale(sensitivity, epsilon, delta, s.zcdp_rho)
        description: Gaussian | Laplace = Gaussian(scale, sensitivity)
    else:
        sensitivity = float(active + (0.0 if moments is None else moments.l1_sensitivity))
        scale = laplace_scale(sensitivity, epsilon)
        description = Laplace(scale, sensitivity)
        delta = 0.0
    record = {
        "method": req.method,
        "non_private": False,
        "mechanism": mechanism,
        "noise_scale": scale,
        "zcdp_rho": s.zcdp_rho,
        "sensitivity": sensitivity,
        "sensitivity_norm": "l2" if mechanism == "gaussian" else "l1",
        "neighbouring": NEIGHBOURING,
        "query": "sums of phi(x) over the real rows (count = the constant feature)",
        "features": {
            "active_per_row": active,
            "bins": s.bins,
            "pairs": [[names[a], names[b]] for a, b in column_pairs(s.encoder, s.pairs)],
            "edges": "quantiles of the synthetic sample (public)",
        },
        "moments": None
        if moments is None
        else {
            "query": "sums of c y z over the real rows (target x each feature)",
            "count": moments.size,
            "scale_c": moments.scale,
            "squared_l2_bound": moments.squared_sensitivity,
            "l1_bound": moments.l1_sensitivity,
        },
        "budget_split": _budget_split(mechanism, active, moments),
        "held_margins": {
            "bins": s.margin_bins,
            "held": s.hold_margins,
            "how": "equality constraints in the tilt, then raking after tempering",
        },
        "targets": "noisy two-way tables raked to the synthetic one-way margins",
        "regularisation": "ridge on the dual, lambda by the discrepancy principle",
        "ess_floor": s.ess_floor,
        "chi2_slack": s.chi2_slack,
        DESCRIPTION_KEY: description.to_dict(),
    }
    fixed = CalibrationPlan(mechanism, scale)
    return Plan(record, (s, fixed), epsilon_spent=epsilon, delta_spent=delta)


def _gaussian_scale(sensitivity: float, epsilon: float, delta: float, rho: float | None) -> float:
    """sigma of the noisy sums: the analytic Gaussian at (epsilon, delta), or with a zCDP
    budget sensitivity / sqrt(2 rho), refused unless rho-zCDP is within (epsilon, delta)."""
    if rho is None:
        return gaussian_sigma(sensitivity, epsilon, delta)
    converted = zcdp_epsilon(rho, delta)
    if converted > epsilon:  # the release passes epsilon = zcdp_epsilon(rho, delta) itself
        raise InputError(
            f"zcdp_rho={rho:g} is ({converted:g}, {delta:g})-DP, more than the weights' "
            f"budget ({epsilon:g}, {delta:g})"
        )
    return sensitivity / math.sqrt(2.0 * rho)


def _budget_split(mechanism: str, active: int, moments: TargetMoments | None) -> dict:
    """The public split of the weights' one mechanism between its blocks: each block's
    share of the squared L2 (Gaussian) or the L1 (Laplace) sensitivity (one noise scale for
    the whole vector, so a block's share is what it costs of the budget)."""
    if moments is None:
        return {"pair_tables": 1.0, "moments": 0.0}
    extra = moments.squared_sensitivity if mechanism == "gaussian" else moments.l1_sensitivity
    total = active + extra
    return {"pair_tables": active / total, "moments": extra / total}


def release_sums(
    features: FeatureMap,
    real: np.ndarray | Iterable[np.ndarray],
    plan: CalibrationPlan,
    noise: NoiseSource,
) -> np.ndarray:
    """The mechanism: sum of phi over the real rows plus noise (the only read of real rows).

    `real` is the encoded real matrix or an iterable of encoded chunks (the streaming path);
    each chunk is checked against the schema's width."""
    chunks = (
        (real[start : start + CHUNK_ROWS] for start in range(0, real.shape[0], CHUNK_ROWS))
        if isinstance(real, np.ndarray)
        else real
    )
    width = features.encoder.width
    sums = np.zeros(features.size)
    for chunk in chunks:
        sums += features.matrix(check_matrix("real", chunk, width)).sum(axis=0)
    # One mechanism on the whole vector: iid noise of the planned scale on every coordinate,
    # drawn for the counts (rounded: post-processing) and the moments separately.
    cells = features.size - features.moment_size
    add = noise.add_gaussian if plan.mechanism == "gaussian" else noise.add_laplace
    noisy = add(sums[:cells], plan.scale, counts=True)
    if features.moment_size == 0:
        return noisy
    return np.concatenate([noisy, add(sums[cells:], plan.scale)])


def _fit(
    real: np.ndarray | Iterable[np.ndarray] | None,
    synthetic: np.ndarray,
    plan: Plan,
    noise: NoiseSource,
) -> tuple[np.ndarray, dict]:
    settings, fixed = plan.settings
    assert real is not None
    moments = settings.target_moments()
    features = FeatureMap(settings.encoder, settings.bins, settings.pairs, synthetic, moments)
    held = held_tilt = None
    if settings.hold_margins:
        held = HeldMargins(settings.encoder, settings.margin_bins, synthetic)
        coarse = settings.margin_bins // max(1, math.ceil(settings.margin_bins / TILT_MARGIN_BINS))
        if settings.margin_bins % coarse == 0 and coarse < settings.margin_bins:
            held_tilt = HeldMargins(settings.encoder, coarse, synthetic)
    noisy_sums = release_sums(features, real, fixed, noise)
    result = calibrate(
        noisy_sums,
        fixed.noise_variance,
        features.matrix(synthetic),
        features.shapes,
        ess_floor=settings.ess_floor,
        chi2_slack=settings.chi2_slack,
        moments=moments,
        held=held,
        held_tilt=held_tilt,
    )
    return result.log_weights, {
        "calibration": result.details,
        "log_weight_max": result.log_weight_max,
    }


CALIBRATION = MethodSpec("calibration", "private", _plan, _fit, chunked=True)
