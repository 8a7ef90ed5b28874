"""What a mechanism plans to spend, and how spends compose (PRIVACY_MODEL.md section 7).

The lifetime cap of a dataset is checked with basic composition: the epsilons add up and
the deltas add up (Dwork and Roth 2014, Theorem 3.16). Sums use `math.fsum` so the order of
entries never changes a decision. A spend fits the cap when its total does not exceed the
cap by more than `CAP_SLACK` (1e-12, absorbing the rounding of e.g. 0.1 + 0.2 against 0.3;
far below any meaningful privacy difference).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

NEIGHBOURING = "add/remove-one"
CAP_SLACK = 1e-12


@dataclass(frozen=True)
class Spend:
    """An (epsilon, delta) pair."""

    epsilon: float
    delta: float

    def fits_within(self, cap: Spend) -> bool:
        return self.epsilon <= cap.epsilon + CAP_SLACK and self.delta <= cap.delta + CAP_SLACK


@dataclass(frozen=True)
class PlannedSpend:
    """One mechanism's planned cost, with the parameters a tighter accountant would need."""

    mechanism: str
    epsilon: float
    delta: float
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"{self.mechanism}: epsilon must be finite and >= 0")
        if not 0 <= self.delta < 1:
            raise ValueError(f"{self.mechanism}: delta must be in [0, 1)")


def compose(spends: Iterable[Spend | PlannedSpend]) -> Spend:
    """Basic composition: sum of epsilons, sum of deltas."""
    spends = list(spends)
    return Spend(
        epsilon=math.fsum(spend.epsilon for spend in spends),
        delta=math.fsum(spend.delta for spend in spends),
    )
