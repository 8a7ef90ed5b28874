"""The release gate on the weights' PSIS diagnostics (supplement A.2 of the main paper).

A large k-hat means the weights have a heavy right tail: a few synthetic rows carry most of
the mass, weighted estimates are unstable, and the generator misses part of the real
distribution. Optional tempering `w^alpha` (0 < alpha <= 1, i.e. `alpha * log w`) shortens
the tail before PSIS at the price of some bias. Both steps are post-processing of DP
weights: they cost no privacy.
"""

from __future__ import annotations

import numpy as np

from dprelease.diagnostics.psis import PsisResult, psis
from dprelease.errors import UnreliableWeightsError


def diagnose_weights(log_weights: np.ndarray, temper: float = 1.0) -> PsisResult:
    """PSIS of the tempered log weights `temper * log w`."""
    if not 0 < temper <= 1:
        raise ValueError(f"temper must be in (0, 1], got {temper}")
    return psis(temper * np.asarray(log_weights, dtype=float))


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
