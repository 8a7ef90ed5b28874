"""The release gate on the weights' PSIS diagnostics (supplement A.2 of the main paper).

A large k-hat means the weights have a heavy right tail: a few synthetic rows carry most of
the mass, weighted estimates are unstable, and the generator misses part of the real
distribution. Optional tempering `w^alpha` (0 < alpha <= 1, i.e. `alpha * log w`) shortens
the tail before PSIS at the price of some bias. Both steps are post-processing of DP
weights: they cost no privacy.

Bounded weights. PSIS estimates the tail of a weight distribution from a sample; it cannot
know that a method's weights are bounded. When a method certifies a bound on every log weight
it can produce (`WeightEstimate.log_weight_max`, e.g. the calibration weights, which take one
value per cell of a finite public grid), no row can weigh more than W = exp(bound) / mean(w)
times the average, so ESS >= S / W in every sample ((sum w)^2 / sum w^2 >= sum w / max w) and
the true tail is bounded (Pareto k = -inf). Weights with W <= `BOUNDED_WEIGHT_RATIO` are then
reliable whatever PSIS fitted: their verdict is "ok" with the reason stated, and they are
left unsmoothed (the fitted tail does not describe them; its k-hat is still reported). This
matters for weights with few distinct values: ties in the tail make the generalized Pareto
fit fail (k-hat = inf, as loo reports) or fit a spurious heavy tail, which would refuse
calibration weights with every row at most a few times the mean
(docs/decisions/0021-bounded-weights-and-the-psis-gate.md).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.special import logsumexp

from dprelease.diagnostics.psis.smoothing import PsisResult, psis
from dprelease.errors import UnreliableWeightsError

BOUNDED_WEIGHT_RATIO = 10.0  # no row above 10 average rows: ESS >= 10% of any sample


def diagnose_weights(
    log_weights: np.ndarray, temper: float = 1.0, log_weight_max: float | None = None
) -> PsisResult:
    """PSIS of the tempered log weights `temper * log w`; "ok" instead of "unreliable" when
    `log_weight_max` (a certified bound on every untempered log weight) keeps every row within
    BOUNDED_WEIGHT_RATIO times the mean (module docstring)."""
    if not 0 < temper <= 1:
        raise ValueError(f"temper must be in (0, 1], got {temper}")
    tempered = temper * np.asarray(log_weights, dtype=float)
    result = psis(tempered)
    if result.verdict != "unreliable" or log_weight_max is None:
        return result
    log_mean = logsumexp(tempered) - np.log(tempered.size)
    ratio = float(np.exp(temper * log_weight_max - log_mean))
    if ratio > BOUNDED_WEIGHT_RATIO:
        return result
    why = result.reason or f"k-hat {result.k_hat:.2f} above the threshold {result.threshold:.2f}"
    tempered.setflags(write=False)
    return dataclasses.replace(
        result,
        log_weights=tempered,  # unsmoothed: the Pareto fit does not describe a bounded tail
        ess=result.ess_raw,
        verdict="ok",
        reason=(
            f"bounded by construction: no row can weigh more than {ratio:.3g} times the "
            f"average row, so PSIS's tail estimate does not apply ({why})"
        ),
    )


def require_reliable(result: PsisResult, allow_unreliable: bool) -> None:
    """Refuse to publish (exit 4) weights PSIS calls unreliable, unless explicitly allowed."""
    if result.verdict != "unreliable" or allow_unreliable:
        return
    why = result.reason or (
        f"PSIS k-hat {result.k_hat:.2f} is above the threshold {result.threshold:.2f}"
    )
    raise UnreliableWeightsError(
        f"the importance weights are unreliable ({why}): a few synthetic rows would carry most "
        "of the weight because the generator misses part of the real distribution. Nothing "
        "was published; the spend stays in the ledger. Try more epsilon for the generator or "
        "another generator, temper the weights with --temper, or publish anyway with "
        "--allow-unreliable-weights"
    )
