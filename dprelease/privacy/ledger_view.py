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
plan with.
"""

from __future__ import annotations

from collections.abc import Sequence

from dprelease.privacy.accountants import (
    BASIC,
    FIXED_IN_ADVANCE,
    PLD,
    RDP_FILTER,
    compose_history,
    releases_that_fit,
)
from dprelease.privacy.accounting import Cap, Spend, compose
from dprelease.privacy.ledger_tables import LedgerEntry


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
        "entries": [
            entry.as_dict() | {"accounted_as": method}
            for entry, method in zip(entries, composition.methods, strict=True)
        ],
    }


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
        lines.append(f"{name:>6}: {used}; {left}")
    for name, figure in summary.get("reported", {}).items():
        spent = figure["spent"]
        lines.append(
            f"{name:>6}: epsilon={spent['epsilon']:.6g} at the cap's delta={spent['delta']:.6g} "
            f"(reported only: {figure['valid_for']}; never used to admit a release)"
        )
    last = summary.get("last_release")
    if last is not None:
        fits = ", ".join(f"{n} {k}" for n, k in last["releases_that_fit"].items())
        lines.append(
            f"more releases like the last one ({last['release_id']}: "
            f"epsilon={last['epsilon']:.6g}, delta={last['delta']:.6g}) that fit: {fits}"
        )
    lines.extend(f"note: {note}" for note in summary.get("notes", []))
    return lines
