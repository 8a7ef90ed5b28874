"""What a mechanism plans to spend, and how spends compose (docs/privacy-model.md section 7).

The lifetime cap of a dataset is checked with basic composition: the epsilons add up and
the deltas add up (Dwork and Roth 2014, Theorem 3.16; valid when each release is chosen
after the earlier ones were seen: Rogers, Roth, Ullman and Vadhan 2016), unless the dataset
is registered with the Rényi filter (`dprelease.privacy.accountants`). Sums use `math.fsum`
so the order of entries never changes a decision. A spend fits the cap when its total does
not exceed the cap by more than a relative `CAP_RTOL` (1e-9 of the cap, `at_most`), which
absorbs the rounding of sums such as 0.1 + 0.2 against 0.3 (relative errors near 1e-16) and
nothing of meaning. The tolerance is relative on epsilon and on delta alike: an absolute one
would let a cap's delta of 1e-12 be overspent by 100 % (docs/decisions/0026-accountants.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from dprelease.privacy.mechanisms import (
    ApproxDP,
    Laplace,
    Mechanism,
    PureEpsilon,
    mechanism_from_dict,
)

NEIGHBOURING = "add/remove-one"
CAP_RTOL = 1e-9


def at_most(value: float, limit: float) -> bool:
    """`value <= limit` up to the relative rounding tolerance `CAP_RTOL` (module docstring)."""
    return value <= limit * (1 + CAP_RTOL)


@dataclass(frozen=True)
class Spend:
    """An (epsilon, delta) pair."""

    epsilon: float
    delta: float

    def fits_within(self, cap: Spend) -> bool:
        return at_most(self.epsilon, cap.epsilon) and at_most(self.delta, cap.delta)


@dataclass(frozen=True)
class Cap(Spend):
    """A dataset's lifetime cap and the accountant that enforces it (`basic` or `rdp`; `pld`
    means rdp, see `dprelease.privacy.accountants`). None: the accountant recorded in the
    ledger, or the default one (basic) when the dataset is registered."""

    accountant: str | None = None


@dataclass(frozen=True)
class PlannedSpend:
    """One mechanism's planned cost, with the parameters a tighter accountant would need.

    `description` is the typed mechanism (`dprelease.privacy.mechanisms`) a tight accountant
    composes; None means only (epsilon, delta) is known (then it is `ApproxDP`). A JSON dict
    is parsed. Descriptions whose pure-DP epsilon is known in closed form (Laplace, pure
    epsilon, approximate DP) must not claim more privacy than (epsilon, delta) does.
    """

    mechanism: str
    epsilon: float
    delta: float
    params: dict = field(default_factory=dict)
    description: Mechanism | None = None

    def __post_init__(self) -> None:
        if not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"{self.mechanism}: epsilon must be finite and >= 0")
        if not 0 <= self.delta < 1:
            raise ValueError(f"{self.mechanism}: delta must be in [0, 1)")
        if isinstance(self.description, dict):
            object.__setattr__(self, "description", mechanism_from_dict(self.description))
        _check_consistent(self)

    @property
    def accountable(self) -> Mechanism:
        """The description, or `ApproxDP(epsilon, delta)` when there is none."""
        return self.description or ApproxDP(self.epsilon, self.delta)


def _check_consistent(spend: PlannedSpend) -> None:
    problem = closed_form_violation(spend.description, spend.epsilon, spend.delta)
    if problem is not None:
        raise ValueError(f"{spend.mechanism}: {problem}")


def closed_form_violation(d: Mechanism | None, epsilon: float, delta: float) -> str | None:
    """Why a description whose guarantee has a closed form (Laplace, pure epsilon,
    approximate DP) is less private than the (epsilon, delta) recorded with it; None when it
    is not, or when its guarantee has no closed form (`guarantees.check_guarantee`)."""
    if isinstance(d, Laplace):
        implied = (d.epsilon, 0.0)
    elif isinstance(d, PureEpsilon):
        implied = (d.epsilon * d.count, 0.0)
    elif isinstance(d, ApproxDP):
        implied = (d.epsilon, d.delta)
    else:
        return None
    if not (at_most(implied[0], epsilon) and at_most(implied[1], delta)):
        return (
            f"its description {d} is ({implied[0]:g}, {implied[1]:g})-DP, "
            f"more than the ({epsilon:g}, {delta:g}) it records"
        )
    return None


class Accountable(Protocol):
    """An (epsilon, delta): a ledger entry or a planned spend (with its typed description),
    or a cap."""

    @property
    def epsilon(self) -> float: ...

    @property
    def delta(self) -> float: ...


def compose(spends: Iterable[Accountable]) -> Spend:
    """Basic composition: sum of epsilons, sum of deltas."""
    spends = list(spends)
    return Spend(
        epsilon=math.fsum(spend.epsilon for spend in spends),
        delta=math.fsum(spend.delta for spend in spends),
    )


def default_delta(cap: Accountable, epsilon: float) -> float:
    """A release's delta when none is given: the cap's delta in proportion to the share of the
    cap's epsilon the release spends, `cap.delta * min(1, epsilon / cap.epsilon)`, so epsilon
    and delta run out together (public: the cap and the arguments only; 0 for a pure-epsilon
    cap)."""
    return cap.delta * min(1.0, epsilon / cap.epsilon)


def cap_delta_warning(cap_delta: float, max_rows: int | None) -> str | None:
    """A warning when the cap's delta exceeds 1 / max_rows (None otherwise, or without a public
    max_rows). A mechanism that publishes each row verbatim with probability delta is
    (0, delta)-DP, so a delta of this size allows publishing about delta x max_rows rows
    outright: it is not meaningful protection (Dwork and Roth 2014, section 2.3)."""
    if max_rows is None or cap_delta <= 1 / max_rows:
        return None
    return (
        f"the cap's delta ({cap_delta:g}) exceeds 1 / max_rows ({1 / max_rows:g}): an "
        "(epsilon, delta)-DP mechanism may publish each row verbatim with probability delta, "
        f"about {cap_delta * max_rows:.3g} of the table's up to {max_rows} rows; a delta that "
        "large is not meaningful protection (use one well below 1 / max_rows)"
    )
