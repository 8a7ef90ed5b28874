"""The verifier's budget checks: the ledger against the manifest and the cap, and the privacy
statement against the ledger (`ledger`, `ledger-release-spend`, `ledger-status`,
`ledger-dataset-total`, `cap`, `release-delta`, `within-cap`, `accountant`,
`privacy-statement`; each is described in `verify/release.py`'s module docstring).

For a release whose manifest names the `rdp` accountant (or `pld`, which is enforced with
rdp), the Rényi filter's total is recomputed from the typed
descriptions in `ledger.parquet` with `dprelease.privacy.accountants` (the definition the ledger
enforces with, so the two cannot disagree; it needs numpy, and Opacus for DP-SGD entries).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from pathlib import Path

from dprelease.privacy.accounting import Cap, Spend, at_most, compose
from dprelease.release.files import COMMITTED, LEDGER_FILE
from dprelease.verify.check import Check, read_parquet, spend_of

BASIC = "basic"
RDP = "rdp"
PLD = "pld"
# Relative tolerance of sums that were written as float64 and read back (exact in practice;
# the slack only absorbs a different summation order).
SUM_RTOL = 1e-9
SUM_ATOL = 1e-15
# The statement prints six significant digits.
STATEMENT_RTOL = 5e-6
# A release written before the published status read committed/not committed says "spent".
COMMITTED_STATUSES = (COMMITTED, "spent")
LEDGER_COLUMNS = ("id", "dataset", "release_id", "mechanism", "epsilon", "delta", "status")
_STATEMENT_NUMBER = re.compile(r"\b(epsilon|delta)\s*=\s*([-+0-9.eE]+|inf|nan)")


def ledger_checks(directory: Path, manifest: dict) -> list[Check]:
    rows = read_parquet(directory / LEDGER_FILE).to_pylist()
    missing = [c for c in LEDGER_COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        why = "no entries" if not rows else f"missing columns {', '.join(missing)}"
        return [Check("ledger", False, f"{LEDGER_FILE}: {why}")]
    dataset, neighbouring = manifest["dataset"], manifest.get("neighbouring")
    foreign = [r["id"] for r in rows if r["dataset"] != dataset]
    relations = {r.get("neighbouring") for r in rows} - {neighbouring}
    if foreign:
        checks = [Check("ledger", False, f"entries of another dataset: ids {_ids(foreign)}")]
    elif neighbouring is not None and relations:
        checks = [Check("ledger", False, f"entries under another relation: {sorted(relations)}")]
    else:
        checks = [Check("ledger", True, f"{len(rows)} entries of dataset {dataset}")]

    mine = [r for r in rows if r["release_id"] == manifest["release_id"]]
    stated = spend_of(manifest["release_spend"])
    summed = compose(Spend(r["epsilon"], r["delta"]) for r in mine)
    if not mine:
        checks.append(Check("ledger-release-spend", False, "no entries for this release"))
    else:
        checks.append(_sum_check("ledger-release-spend", summed, stated, f"{len(mine)} entries"))
    uncommitted = [r["id"] for r in mine if r["status"] not in COMMITTED_STATUSES]
    checks.append(
        Check("ledger-status", False, f"entries not committed: ids {_ids(uncommitted)}")
        if uncommitted
        else Check("ledger-status", True, "every entry of this release is committed")
    )
    total = compose(Spend(r["epsilon"], r["delta"]) for r in rows)
    stated_total = spend_of(manifest["dataset_total"])
    checks.append(_sum_check("ledger-dataset-total", total, stated_total, f"{len(rows)} entries"))
    checks += _cap_checks(manifest, total, rows, stated)
    return checks


def _cap_checks(
    manifest: dict, basic_total: Spend, rows: list[dict], release: Spend
) -> list[Check]:
    cap = spend_of(manifest["cap"])
    budget = manifest["schema"].get("budget")
    checks = [
        Check("cap", True, "equals the schema's budget")
        if isinstance(budget, dict) and spend_of(budget) == cap
        else Check("cap", False, "the manifest's cap is not the schema's budget"),
        Check("release-delta", True, f"delta={release.delta:.6g} within the cap's")
        if at_most(release.delta, cap.delta)
        else Check(
            "release-delta",
            False,
            f"this release's delta={release.delta:.6g} exceeds the cap's delta={cap.delta:.6g}",
        ),
    ]
    accountant, stated = _accountant(manifest)
    if accountant == BASIC:
        checks.append(_fits("within-cap", basic_total, cap, "basic composition"))
        return checks
    if accountant not in (RDP, PLD):
        checks.append(Check("accountant", False, f"unknown accountant {accountant!r}"))
        return checks
    from dprelease.privacy.accountants import compose_history

    composition = compose_history(
        [_LedgerRow(r) for r in rows], Cap(cap.epsilon, cap.delta, RDP), RDP
    )
    recomputed = composition.enforced
    if accountant == PLD:
        checks.append(
            Check(
                "accountant",
                True,
                "recorded as pld (not proven for adaptively chosen releases): checked with rdp",
            )
        )
    elif stated is None:
        checks.append(Check("accountant", False, "the rdp accountant states no total"))
    elif _same(stated, recomputed):
        checks.append(Check("accountant", True, "rdp total recomputed from the ledger"))
    else:
        checks.append(
            Check(
                "accountant",
                False,
                f"states rdp {_pair(stated)}, the ledger's entries give {_pair(recomputed)}",
            )
        )
    checks.append(_fits("within-cap", recomputed, cap, "rdp, the Rényi filter"))
    return checks


class _LedgerRow:
    """A `ledger.parquet` row as the accountants read it (description stored as JSON text)."""

    def __init__(self, row: dict) -> None:
        self.epsilon, self.delta = float(row["epsilon"]), float(row["delta"])
        text = row.get("description")
        self.description = json.loads(text) if isinstance(text, str) else text


def _same(a: Spend, b: Spend) -> bool:
    return all(
        math.isclose(x, y, rel_tol=SUM_RTOL, abs_tol=SUM_ATOL)
        for x, y in ((a.epsilon, b.epsilon), (a.delta, b.delta))
    )


def _accountant(manifest: dict) -> tuple[str, Spend | None]:
    """The manifest's accountant name and its stated dataset total (None if not stated)."""
    name = manifest.get("accountant", BASIC)
    total = manifest.get("accountant_total")
    return str(name), None if total is None else spend_of(total)


def statement_check(manifest: dict) -> Check:
    statement = manifest["privacy_statement"]
    try:
        required = [spend_of(manifest[key]) for key in ("release_spend", "dataset_total", "cap")]
        allowed = list(required)
        _, tight = _accountant(manifest)
        reported = manifest.get("fixed_in_advance_total")
        if reported is not None:
            allowed.append(spend_of(reported))
    except ValueError as error:
        return Check("privacy-statement", False, f"malformed spend: {error}")
    if tight is not None:
        allowed.append(tight)
    accountant, _ = _accountant(manifest)
    if accountant not in statement:
        return Check("privacy-statement", False, f"does not name the accountant {accountant!r}")
    stated: dict[str, list[float]] = {"epsilon": [], "delta": []}
    for key, number in _STATEMENT_NUMBER.findall(statement):
        try:
            stated[key].append(float(number))
        except ValueError:
            return Check("privacy-statement", False, f"unreadable number {key}={number}")
    for key in ("epsilon", "delta"):
        values = [getattr(spend, key) for spend in allowed]
        foreign = [x for x in stated[key] if not any(_close(x, v) for v in values)]
        if foreign:
            return Check("privacy-statement", False, f"states {key}={foreign[0]:.6g}, not a spend")
        absent = [
            getattr(s, key)
            for s in required
            if not any(_close(x, getattr(s, key)) for x in stated[key])
        ]
        if absent:
            return Check("privacy-statement", False, f"does not state {key}={absent[0]:.6g}")
    return Check("privacy-statement", True, "states the ledger's spends and the cap")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=STATEMENT_RTOL, abs_tol=1e-300)


def _sum_check(name: str, summed: Spend, stated: Spend, what: str) -> Check:
    close = all(
        math.isclose(a, b, rel_tol=SUM_RTOL, abs_tol=SUM_ATOL)
        for a, b in ((summed.epsilon, stated.epsilon), (summed.delta, stated.delta))
    )
    if close:
        return Check(name, True, f"{what} sum to the manifest's ({_pair(stated)})")
    return Check(name, False, f"{what} sum to {_pair(summed)}, the manifest says {_pair(stated)}")


def _fits(name: str, total: Spend, cap: Spend, how: str) -> Check:
    if total.fits_within(cap):
        return Check(name, True, f"{_pair(total)} within cap {_pair(cap)} ({how})")
    return Check(name, False, f"{_pair(total)} exceeds cap {_pair(cap)} ({how})")


def _pair(spend: Spend) -> str:
    return f"epsilon={spend.epsilon:.6g}, delta={spend.delta:.6g}"


def _ids(ids: Iterable[object]) -> str:
    ids = list(ids)
    shown = ", ".join(str(i) for i in ids[:5])
    return shown + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
