"""Accountants of a dataset's ledger: `basic` and `rdp` enforce the cap; `pld` is reported
(docs/privacy-model.md section 7; measurements: docs/decisions/0026-accountants.md).

The cap check is a privacy filter (each release is planned after the earlier ones were seen),
so only accountants proven for adaptively chosen mechanisms and parameters may admit a
release:

- `basic`: epsilons add up and deltas add up; a filter by Rogers, Roth, Ullman and Vadhan
  2016. The default for a dataset registered without a choice (`DEFAULT_ACCOUNTANT`), as
  docs/privacy-model.md section 7 says.
- `rdp`: the Rényi filter over a fixed grid of orders (`dprelease.privacy.rdp_filter`: the
  theorem of Feldman and Zrnic 2021, the argument for many orders, the curves). It admits many
  more small Gaussian, DP-SGD and zCDP releases than basic (benchmarks/accounting.py), but
  fewer when one release with delta > 0 spends most of the cap: the Rényi-to-DP conversion
  and the split of delta over the orders cost epsilon there. Choose per dataset.
- `pld`: a name a ledger may hold for a dataset. PLD composition has no filter proof, so such
  datasets are enforced with `rdp` (`ENFORCED_BY`), and a schema may say `pld` with that
  meaning. The PLD epsilon of the history at the cap's
  delta is still computed for rdp datasets and REPORTED (`Composition.fixed_in_advance`;
  `ledger show`, manifest, privacy statement), labelled as valid for a sequence of
  mechanisms fixed in advance (`FIXED_IN_ADVANCE`), never to admit a release
  (`dprelease.privacy.pld`).

Entries known only by (epsilon, delta > 0) (`ApproxDP`: no typed mechanism, e.g. the
adaptive truncation with a DP row count, or a reservation whose mechanism is calibrated later)
have no Rényi curve: the Rényi filter reserves half of the cap's delta for them and charges
each its epsilon-part (`rdp_filter`, with the proof). The two filters are never combined with
"either fits": admitting when one OR the other certifies would cost the sum of their deltas
(the argument in `rdp_filter`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dprelease.privacy.accounting import Accountable, Spend, compose
from dprelease.privacy.mechanisms import ApproxDP, Mechanism, mechanism_from_dict
from dprelease.privacy.pld import pld_epsilon
from dprelease.privacy.rdp_filter import FILTER_ORDERS, filter_spend

BASIC = "basic"
RDP = "rdp"
PLD = "pld"
ACCOUNTANTS = (BASIC, RDP, PLD)
DEFAULT_ACCOUNTANT = BASIC
ENFORCED_BY = {BASIC: BASIC, RDP: RDP, PLD: RDP}
MAX_RELEASES_SEARCHED = 100_000
FIXED_IN_ADVANCE = "valid for a sequence of mechanisms fixed in advance"
RDP_FILTER = f"Rényi filter over {len(FILTER_ORDERS)} orders, Feldman and Zrnic 2021"

# How the enforcing accountant accounted an entry (shown by `ledger show`).
VIA_BASIC = "basic"
VIA_RDP = "rdp"
# The reported figure's name when PLD's best bound was the whole history in Rényi DP over
# all orders (zCDP entries, e.g. MST/AIM): it is then no PLD figure and is not called one.
RDP_ALL_ORDERS = "rdp-all-orders"
VIA_RDP_GENERIC = "rdp: (epsilon, delta) only"


@dataclass(frozen=True)
class Composition:
    """A history composed by the accountant that enforces its dataset's cap.

    `basic` is basic composition (the sums). `enforced` is what the enforcing `accountant`
    charges: the sums under basic; under rdp the smallest epsilon the Rényi filter certifies
    at the cap's delta (or the pure sum at delta 0). The history fits a cap iff `enforced`
    does. `fixed_in_advance` is the PLD epsilon at the cap's delta, reported only (rdp
    datasets, on request). `methods` says how each entry was accounted, in input order;
    `notes` explains fallbacks; `fixed_in_advance_by` names the composition that gave the
    reported figure (`pld`, or `RDP_ALL_ORDERS`).
    """

    accountant: str
    basic: Spend
    enforced: Spend
    methods: tuple[str, ...]
    notes: tuple[str, ...] = ()
    fixed_in_advance: Spend | None = None
    fixed_in_advance_by: str = PLD

    def fits(self, cap: Spend) -> bool:
        return self.enforced.fits_within(cap)


def check_accountant(name: str) -> str:
    if name not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {name!r}; choose one of {', '.join(ACCOUNTANTS)}")
    return name


def enforcing(name: str | None) -> str:
    """The accountant that enforces a cap recorded or configured as `name` (None: basic)."""
    return ENFORCED_BY[check_accountant(name or DEFAULT_ACCOUNTANT)]


def description_of(item: Accountable) -> Mechanism:
    """The item's typed description, or `ApproxDP(epsilon, delta)` when it has none."""
    description = getattr(item, "description", None)
    if isinstance(description, dict):
        description = mechanism_from_dict(description)
    return description or ApproxDP(item.epsilon, item.delta)


def compose_history(
    items: Sequence[Accountable],
    cap: Spend,
    accountant: str | None = DEFAULT_ACCOUNTANT,
    *,
    report_pld: bool = False,
) -> Composition:
    """Compose `items` (history plus plan) with the accountant enforcing `accountant`, at the
    cap's delta; with `report_pld`, also the PLD figure (rdp datasets, cap delta > 0)."""
    basic = compose(Spend(item.epsilon, item.delta) for item in items)
    name = enforcing(accountant)
    if name == BASIC or not items:
        return Composition(name, basic, basic, (VIA_BASIC,) * len(items))
    mechanisms = [description_of(item) for item in items]
    reported, notes, by = _reported_pld(mechanisms, cap) if report_pld else (None, (), PLD)
    generic = sum(isinstance(m, ApproxDP) and m.delta > 0 for m in mechanisms)
    if generic:
        notes = (
            f"{generic} entr{'y is' if generic == 1 else 'ies are'} known only by (epsilon, "
            "delta > 0): charged its epsilon-part, its delta against the half of the cap's "
            "delta the Rényi filter reserves for such entries",
            *notes,
        )
    enforced = filter_spend(mechanisms, cap.delta)
    methods = tuple(VIA_RDP_GENERIC if isinstance(m, ApproxDP) else VIA_RDP for m in mechanisms)
    return Composition(name, basic, enforced, methods, notes, reported, by)


def _reported_pld(
    mechanisms: list[Mechanism], cap: Spend
) -> tuple[Spend | None, tuple[str, ...], str]:
    if cap.delta == 0:
        return None, (), PLD
    epsilon, methods, notes = pld_epsilon(mechanisms, cap.delta)
    by = RDP_ALL_ORDERS if all(method == VIA_RDP for method in methods) else PLD
    return Spend(epsilon, cap.delta), tuple(f"{by} ({FIXED_IN_ADVANCE}): {n}" for n in notes), by


def releases_that_fit(
    history: Sequence[Accountable],
    release: Sequence[Accountable],
    cap: Spend,
    accountant: str = DEFAULT_ACCOUNTANT,
) -> int:
    """How many more releases spending exactly `release` the cap admits after `history`:
    the largest k at which `compose_history(history + k copies of release)` fits the cap,
    found by doubling then bisection; each step composes the copies by multiplicity
    (sums for basic, `filter_spend`'s counts for rdp), in time independent of k."""
    if not release:
        return 0
    past, planned = compose(history), compose(release)
    if planned == Spend(0.0, 0.0):
        return MAX_RELEASES_SEARCHED  # spends nothing: no cap ever refuses it
    if enforcing(accountant) == BASIC:

        def fits(k: int) -> bool:
            spend = Spend(past.epsilon + k * planned.epsilon, past.delta + k * planned.delta)
            return spend.fits_within(cap)

    else:
        mechanisms = [description_of(item) for item in [*history, *release]]

        def fits(k: int) -> bool:
            counts = [1] * len(history) + [k] * len(release)
            return filter_spend(mechanisms, cap.delta, counts).fits_within(cap)

    if not fits(1):
        return 0
    low, high = 1, 2
    while fits(high):
        low, high = high, high * 2
        if high > MAX_RELEASES_SEARCHED:
            return MAX_RELEASES_SEARCHED
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low
