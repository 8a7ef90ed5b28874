"""What `dprelease ledger show` shows: a dataset's spend under the accountant that enforces its
cap and under basic composition side by side, the PLD figure for rdp datasets (reported only),
and how many more releases like the last one fit.

`summarise` builds the JSON (`Ledger.summary`, `ledger show --json`); `ledger_summary_lines`
renders its totals as plain lines for the CLI (the entries table is the CLI's). Its `spent`
keeps its meaning, the sums of the entries (basic composition); `accountant` is the enforcing
accountant and `recorded_accountant` the name the ledger holds (a dataset recorded as `pld` is
enforced with `rdp`); `by_accountant` holds spent and remaining under the enforcing accountant
and under basic; `reported` the PLD figure, labelled as valid for a sequence of mechanisms
fixed in advance (never used to admit a release); each entry says how the enforcing
accountant composed it (`accounted_as`).

Under `rdp` the spend is the smallest epsilon the Rényi filter certifies at the cap's delta,
so its "remaining epsilon" is the cap's epsilon minus that, at the same delta; privacy loss
does not add up linearly there, so the count of further releases (found by composing the
history with k copies of the last release, `accountants.releases_that_fit`) is the number to
plan with. The entries' sum (basic composition) is then a looser bound, not what the cap is
checked against: it may exceed the cap's epsilon without any overspend.

`plain_summary` (the summary's `plain_summary`, the last line of `ledger show`, and the
`budget:` line after a release) says this in words a curator can pass on to the data owner:
what the cap means under the enforcing accountant, what is spent and left under it, how many
more releases like the last one fit, and, under rdp, why the entries' sum may exceed the cap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dprelease.privacy.accountants import (
    BASIC,
    FIXED_IN_ADVANCE,
    PLD,
    RDP,
    RDP_FILTER,
    compose_history,
    description_of,
    releases_that_fit,
)
from dprelease.privacy.accounting import Cap, Spend, compose
from dprelease.privacy.ledger.tables import LedgerEntry
from dprelease.privacy.rdp_filter import APPROX_SHARE, approx_delta


def _pair(spend: Spend) -> dict:
    return {"epsilon": spend.epsilon, "delta": spend.delta}


def _remaining(cap: Spend, spent: Spend, tight: bool = False) -> dict:
    """What is left; under a tight spend (epsilon at the cap's delta) delta is not used up
    additively, so its remaining delta is None."""
    return {
        "epsilon": max(0.0, cap.epsilon - spent.epsilon),
        "delta": None if tight else max(0.0, cap.delta - spent.delta),
    }


def summarise(dataset: str, cap: Cap, entries: Sequence[LedgerEntry]) -> dict:
    """The JSON summary of a dataset's ledger (see the module docstring)."""
    recorded = cap.accountant or BASIC
    composition = compose_history(entries, cap, recorded, report_pld=True)
    accountant = composition.accountant
    accountants = [accountant] if accountant == BASIC else [accountant, BASIC]
    last_release = None
    if entries:
        last_id = entries[-1].release_id
        last = [entry for entry in entries if entry.release_id == last_id]
        last_release = {
            "release_id": last_id,
            **_pair(compose(Spend(e.epsilon, e.delta) for e in last)),
            "releases_that_fit": {
                name: releases_that_fit(entries, last, cap, name) for name in accountants
            },
        }
    by_accountant = {
        accountant: {
            "spent": _pair(composition.enforced),
            "remaining": _remaining(cap, composition.enforced, tight=accountant != BASIC),
        },
        BASIC: {
            "spent": _pair(composition.basic),
            "remaining": _remaining(cap, composition.basic),
        },
    }
    notes = list(composition.notes)
    if recorded == PLD:
        notes.insert(
            0,
            "recorded accountant pld: PLD composition is not proven for releases chosen after "
            f"earlier ones were seen, so this dataset is enforced with rdp ({RDP_FILTER})",
        )
    reported = composition.fixed_in_advance
    generic_delta = math.fsum(approx_delta(description_of(e)) for e in entries)
    words = plain_summary(
        dataset,
        cap,
        accountant,
        composition.enforced,
        composition.basic,
        last_release,
        generic_delta,
    )
    return {
        "dataset": dataset,
        "cap": {"epsilon": cap.epsilon, "delta": cap.delta},
        "accountant": accountant,
        "recorded_accountant": recorded,
        "spent": _pair(composition.basic),
        "by_accountant": by_accountant,
        "reported": {}
        if reported is None
        else {
            composition.fixed_in_advance_by: {
                "spent": _pair(reported),
                "valid_for": FIXED_IN_ADVANCE,
            }
        },
        "last_release": last_release,
        "notes": notes,
        "plain_summary": words,
        "entries": [
            entry.as_dict() | {"accounted_as": method}
            for entry, method in zip(entries, composition.methods, strict=True)
        ],
    }


def _g(x: float) -> str:
    return f"{x:.3g}"


def _more(last_release: dict | None, accountant: str) -> str:
    """How many more releases like the last one the enforcing accountant admits."""
    if last_release is None:
        return ""
    k = last_release["releases_that_fit"][accountant]
    each = f"epsilon {_g(last_release['epsilon'])}, delta {_g(last_release['delta'])}"
    if k == 0:
        return f", too little for another release like the last one ({each})"
    releases = "release" if k == 1 else "releases"
    return f", room for {k} more {releases} like the last one ({each} each)"


def plain_summary(
    dataset: str,
    cap: Spend,
    accountant: str,
    enforced: Spend,
    basic: Spend,
    last_release: dict | None,
    generic_delta: float = 0.0,
) -> str:
    """The dataset's budget in plain words (module docstring): ledger metadata only. Under
    rdp, entries known only by (epsilon, delta > 0) draw their deltas from the share of the
    cap's delta the filter reserves for them (`rdp_filter.APPROX_SHARE`); when they have
    drawn any, the summary says how much of that share is used, since it may be what limits
    further releases."""
    limit = f"epsilon {_g(cap.epsilon)}, delta {_g(cap.delta)}"
    left = _remaining(cap, enforced, tight=accountant != BASIC)
    more = _more(last_release, accountant)
    if accountant == BASIC:
        return (
            f"The privacy cap of dataset {dataset!r} ({limit}) is enforced by basic "
            "composition (the epsilons and deltas of its releases add up); it has spent "
            f"epsilon {_g(enforced.epsilon)} and delta {_g(enforced.delta)} of it, so epsilon "
            f"{_g(left['epsilon'])} and delta {_g(left['delta'])} remain{more}."
        )
    name = "the Rényi filter" if accountant == RDP else f"the {accountant} accountant"
    over = basic.epsilon > cap.epsilon or basic.delta > cap.delta
    summed = (
        ", more than the cap: that is expected, not an overspend"
        if over
        else "; those sums may come to exceed the cap, which is expected, not an overspend"
    )
    share = APPROX_SHARE * cap.delta
    generic = (
        f" Releases known only by their (epsilon, delta) draw their deltas from the "
        f"{_g(share)} of the cap's delta the filter keeps for them: {_g(generic_delta)} of "
        "it is used, which may be what limits further releases."
        if generic_delta > 0
        else ""
    )
    return (
        f"The privacy cap of dataset {dataset!r} ({limit}) is enforced by {name} "
        f"({accountant} accountant), under which it has spent the equivalent of epsilon "
        f"{_g(enforced.epsilon)} of {_g(cap.epsilon)} at delta {_g(cap.delta)}, so epsilon "
        f"{_g(left['epsilon'])} remains{more}. Its releases' epsilons and deltas add up to "
        f"{_g(basic.epsilon)} and {_g(basic.delta)} (basic composition){summed}, because "
        f"{name} composes the releases' noise more tightly than adding them up, and the cap "
        f"is checked against its figure.{generic}"
    )


def ledger_summary_lines(summary: dict) -> list[str]:
    """The totals of `summarise(...)` as lines of text (no markup)."""
    cap, accountant = summary["cap"], summary["accountant"]
    recorded = summary.get("recorded_accountant", accountant)
    how = "recorded with the cap" if recorded == accountant else f"recorded as {recorded}"
    lines = [
        f"cap: epsilon={cap['epsilon']:.6g}, delta={cap['delta']:.6g}; "
        f"accountant: {accountant} ({how}; every release is checked against the cap with it)"
    ]
    for name, pair in summary["by_accountant"].items():
        spent, remaining = pair["spent"], pair["remaining"]
        if remaining["delta"] is None:
            left = f"remaining epsilon={remaining['epsilon']:.6g} at the cap's delta"
            used = f"spent epsilon={spent['epsilon']:.6g} at delta={spent['delta']:.6g}"
        else:
            left = f"remaining epsilon={remaining['epsilon']:.6g}, delta={remaining['delta']:.6g}"
            used = f"spent epsilon={spent['epsilon']:.6g}, delta={spent['delta']:.6g}"
        if name != accountant:  # the looser sum beside the enforcing figure: no "remaining"
            left = f"the entries' sum, not checked against the cap ({accountant} is tighter)"
        lines.append(f"{name:>6}: {used}; {left}")
    enforced = summary["by_accountant"][accountant]["spent"]["epsilon"]
    for name, figure in summary.get("reported", {}).items():
        spent = figure["spent"]
        looser = (
            f"; looser than {accountant}'s figure here, so it adds nothing"
            if spent["epsilon"] >= enforced
            else ""
        )
        lines.append(
            f"{name:>6}: epsilon={spent['epsilon']:.6g} at the cap's delta={spent['delta']:.6g} "
            f"(reported only: {figure['valid_for']}; never used to admit a release{looser})"
        )
    last = summary.get("last_release")
    if last is not None:
        fits = last["releases_that_fit"]
        others = "".join(
            f"; {n} composition alone would admit {k}" for n, k in fits.items() if n != accountant
        )
        lines.append(
            f"more releases like the last one ({last['release_id']}: "
            f"epsilon={last['epsilon']:.6g}, delta={last['delta']:.6g}) that fit: "
            f"{fits[accountant]} under {accountant}, which enforces the cap{others}"
        )
    lines.extend(f"note: {note}" for note in summary.get("notes", []))
    if "plain_summary" in summary:
        lines.append(f"in plain words: {summary['plain_summary']}")
    return lines
