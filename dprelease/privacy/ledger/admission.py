"""Whether the ledger may admit a release: its cap and accountant match the recorded ones,
its own delta fits the cap's, every typed description is DP at the values it records, and
the dataset's history plus the release fits the cap under the enforcing accountant
(`privacy/ledger/ledger.py`'s module docstring states the protocol these checks serve)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Row

from dprelease.errors import BudgetExceededError, InputError
from dprelease.privacy.accountants import BASIC, compose_history, enforcing
from dprelease.privacy.accounting import Cap, PlannedSpend, Spend, at_most, compose
from dprelease.privacy.guarantees import check_guarantee


def accountant_for(stored: Cap | None, requested: Spend) -> str:
    """The recorded accountant, or the one a new dataset will be registered with."""
    if stored is not None:
        return stored.accountant or BASIC
    return enforcing(getattr(requested, "accountant", None))


def check_cap_matches(dataset: str, stored: Cap | None, requested: Spend) -> None:
    if stored is None:
        return
    if (stored.epsilon, stored.delta) != (requested.epsilon, requested.delta):
        raise InputError(
            f"dataset {dataset!r}: the schema's budget (epsilon={requested.epsilon}, "
            f"delta={requested.delta}) differs from the cap recorded in the ledger "
            f"(epsilon={stored.epsilon}, delta={stored.delta}); a dataset's lifetime cap "
            "cannot change between releases"
        )
    wanted = getattr(requested, "accountant", None)
    if wanted is not None and enforcing(wanted) != enforcing(stored.accountant):
        raise InputError(
            f"dataset {dataset!r}: the schema's budget asks for the {wanted!r} accountant but "
            f"the ledger recorded {stored.accountant!r} when the dataset was registered; a "
            "dataset's accountant cannot change between releases"
        )


def check_fits(
    dataset: str,
    cap: Spend,
    recorded: str | None,
    history: Sequence[Row],
    planned: Sequence[PlannedSpend],
) -> None:
    """Refuse a plan the cap cannot hold, before anything is spent (module docstring)."""
    accountant = enforcing(recorded)
    refuse_impossible_delta(dataset, cap, planned)
    for spend in planned:
        try:
            check_guarantee(spend)
        except ValueError as error:
            raise InputError(str(error)) from None
    total = compose_history([*history, *planned], cap, accountant)
    if not total.fits(cap):
        wanted = compose(planned)
        spent = compose_history(history, cap, accountant).enforced
        tight = (
            ""
            if accountant == BASIC
            else f" (with it, the {accountant} filter needs epsilon={total.enforced.epsilon:g} "
            f"at delta={total.enforced.delta:g})"
        )
        advice = (
            f"this release alone needs more than the dataset's lifetime cap (epsilon="
            f"{cap.epsilon:g}): pass a smaller --epsilon"
            if wanted.epsilon > cap.epsilon
            else f"it does not fit in what remains (`dprelease ledger show {dataset}`): pass a "
            "smaller --epsilon"
        )
        raise BudgetExceededError(
            f"dataset {dataset!r}: this release needs epsilon={wanted.epsilon:g}, "
            f"delta={wanted.delta:g}{tight}, but {spent.epsilon:g} of epsilon={cap.epsilon:g} "
            f"and {spent.delta:g} of delta={cap.delta:g} are already spent under "
            f"{accountant} composition; {advice}; refusing before reading the data"
        )


def refuse_impossible_delta(dataset: str, cap: Spend, planned: Sequence[PlannedSpend]) -> None:
    """A release whose own delta (the sum of its spends' deltas) exceeds the cap's delta can
    never be admitted: under basic composition it alone exceeds the cap, and no accountant may
    charge it less than the delta it records and states."""
    wanted = compose(planned)
    if not at_most(wanted.delta, cap.delta):
        raise BudgetExceededError(
            f"dataset {dataset!r}: this release's delta={wanted.delta:g} exceeds the cap's "
            f"delta={cap.delta:g}; no release may spend more delta than the dataset's lifetime "
            "cap (pass a smaller --delta); refusing before reading the data"
        )
