"""What `dprelease ledger show` shows: a dataset's spend under its accountant and under basic
composition side by side, and how many more releases like the last one fit.

`summarise` builds the JSON (`Ledger.summary`, `ledger show --json`); `ledger_summary_lines`
renders its totals as plain lines for the CLI (the entries table is the CLI's). Its `spent`
keeps its meaning, the sums of the entries (basic composition); `by_accountant` holds spent
and remaining under the dataset's accountant and under basic; each entry says how the
accountant composed it (`accounted_as`).

Under `pld` the spend is the epsilon of the whole history at the cap's delta, so its
"remaining epsilon" is the cap's epsilon minus that, at the same delta; privacy loss does not
add up linearly under a tight accountant, so the count of further releases (found by composing
the history with k copies of the last release, `accountants.releases_that_fit`) is the
number to plan with.
"""

from __future__ import annotations

from collections.abc import Sequence

from dprelease.privacy.accountants import BASIC, compose_history, releases_that_fit
from dprelease.privacy.accounting import Cap, Spend, compose
from dprelease.privacy.ledger import LedgerEntry


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
    accountant = cap.accountant or BASIC
    composition = compose_history(entries, cap, accountant)
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
    tight = composition.spent == composition.tight
    by_accountant = {
        accountant: {
            "spent": _pair(composition.spent),
            "remaining": _remaining(cap, composition.spent, tight=tight),
        },
        BASIC: {
            "spent": _pair(composition.basic),
            "remaining": _remaining(cap, composition.basic),
        },
    }
    return {
        "dataset": dataset,
        "cap": {"epsilon": cap.epsilon, "delta": cap.delta},
        "accountant": accountant,
        "spent": _pair(composition.basic),
        "by_accountant": by_accountant,
        "last_release": last_release,
        "notes": list(composition.notes),
        "entries": [
            entry.as_dict() | {"accounted_as": method}
            for entry, method in zip(entries, composition.methods, strict=True)
        ],
    }


def ledger_summary_lines(summary: dict) -> list[str]:
    """The totals of `summarise(...)` as lines of text (no markup)."""
    cap, accountant = summary["cap"], summary["accountant"]
    lines = [
        f"cap: epsilon={cap['epsilon']:.6g}, delta={cap['delta']:.6g}; "
        f"accountant: {accountant} (recorded with the cap)"
    ]
    for name, pair in summary["by_accountant"].items():
        spent, remaining = pair["spent"], pair["remaining"]
        if remaining["delta"] is None:
            left = f"remaining epsilon={remaining['epsilon']:.6g} at that delta"
            used = f"spent epsilon={spent['epsilon']:.6g} at the cap's delta={spent['delta']:.6g}"
        else:
            left = f"remaining epsilon={remaining['epsilon']:.6g}, delta={remaining['delta']:.6g}"
            used = f"spent epsilon={spent['epsilon']:.6g}, delta={spent['delta']:.6g}"
        lines.append(f"{name:>6}: {used}; {left}")
    last = summary.get("last_release")
    if last is not None:
        fits = ", ".join(f"{n} {k}" for n, k in last["releases_that_fit"].items())
        lines.append(
            f"more releases like the last one ({last['release_id']}: "
            f"epsilon={last['epsilon']:.6g}, delta={last['delta']:.6g}) that fit: {fits}"
        )
    lines.extend(f"note: {note}" for note in summary.get("notes", []))
    return lines
