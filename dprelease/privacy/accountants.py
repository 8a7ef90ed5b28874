"""Accountants of a dataset's ledger: `basic` and `pld` (PRIVACY_MODEL.md section 7).

`basic`: epsilons add up and deltas add up (Dwork and Roth 2014, Theorem 3.16).

`pld`: the dataset's whole history is composed numerically with privacy loss distributions
(dp-accounting; Koskela et al. 2020, Doroshenko et al. 2022) and the cap check asks for the
epsilon at the cap's delta. Every entry contributes a *dominating pair* (Zhu, Dong and Wang
2022, Definition 7), and dominating pairs compose under ADAPTIVE composition, in any
interleaving (their Theorem 10), which is what a ledger history is:

- Laplace(b, D): the Laplace PLD at parameter b / D; Gaussian(s, D): the Gaussian PLD at
  s / D; Poisson-subsampled Gaussian (sigma, q, T): the subsampled Gaussian PLD, both the add
  and the remove direction (add/remove-one, PRIVACY_MODEL.md section 1), self-composed T times.
- Pure epsilon (and any entry with only an (epsilon, delta) guarantee: `ApproxDP`, or an
  entry written before descriptions existed): the canonical pair of (epsilon, delta)-DP
  (randomized response with an atom of mass delta at +infinity; Kairouz, Oh and Viswanath
  2015, Theorem 4), which dominates EVERY (epsilon, delta)-DP mechanism, so it is a sound
  stand-in for mechanisms of unknown form (exponential mechanism, sparse vector, ...). This is
  this accountant's "basic fallback for that entry": it never uses more than the entry's own
  (epsilon, delta) and composes them optimally.
- zCDP(rho) has no dominating pair PLD can use. Two sound routes are computed and the smaller
  epsilon taken: (a) each zCDP entry enters the PLD as the canonical pair of its own
  (epsilon_i, delta_i) guarantee, epsilon_i from rho at delta_i = delta_cap / (2 n_zcdp)
  (Canonne, Kamath and Steinke 2020, Proposition 12, via dp-accounting); (b) when every
  entry has a Renyi-DP curve (Laplace, Gaussian, subsampled Gaussian, zCDP, and pure epsilon
  as (epsilon^2 / 2)-zCDP, Bun and Steinke 2016, Proposition 3.3), the whole history is
  composed in RDP (Mironov 2017, Proposition 1, adaptive) and converted at the cap's delta.
  Grouping the zCDP entries into one RDP block composed with a PLD block is NOT done: the two
  blocks interleave adaptively and no theorem we rely on splits them.

The PLD is pessimistic (`pessimistic_estimate=True`: discretisation rounds privacy losses
up, truncated tails go to the +infinity atom), so its epsilon is an upper bound. Finally the
answer is the minimum of the tight epsilon and basic composition when basic's delta fits the
cap's delta: both are valid guarantees for the same history, so their minimum is too, and
`pld` therefore never refuses a plan that `basic` admits.

Speed (the check runs inside the reservation lock): identical mechanisms are grouped and
self-composed with one FFT power (`self_compose`), groups are composed in a fixed order (so
the order of entries never changes a decision), single-mechanism PLDs are cached per process
and built from an unlocked read before the lock is taken, and `PLD_DISCRETISATION` = 1e-3
(benchmarks/accounting.py, 100-entry histories on a loaded 2-core machine: 0.07-0.14 s of
composition under the lock, 0.5 s cold for 100 distinct mechanisms; a 12-mechanism history
is within 1% of dp-accounting's own PLD accountant at 1e-4, tests/test_accounting.py).

Default `basic` (`DEFAULT_ACCOUNTANT`, for datasets registered without a choice), as
PRIVACY_MODEL.md section 7 states ("basic composition unless a tighter accountant is
configured"); a curator configures `pld` in the schema (`budget: {..., accountant: pld}`; the
bundled schemas do). `pld` never admits less than basic (minimum above; property test in
tests/test_accounting.py), and at a cap of (6, 1e-6) with epsilon 1 per release it admits 41
instead of 6 DP-SGD (dpgan) synthetic releases, 36 instead of 6 AIM/MST ones and 8 instead of
6 PrivBayes ones, the same 6 for pure-epsilon kinds (marginals, adaptive truncation, ABCDP:
at 6 compositions and delta 1e-6 no accountant gains), at a cost of a tenth of a second
inside the lock.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dprelease.privacy.accounting import CAP_SLACK, Spend, compose
from dprelease.privacy.calibration import RDP_ORDERS
from dprelease.privacy.mechanisms import (
    ZCDP,
    ApproxDP,
    Gaussian,
    Laplace,
    Mechanism,
    PoissonSubsampledGaussian,
    PureEpsilon,
    mechanism_from_dict,
)

if TYPE_CHECKING:
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

BASIC = "basic"
PLD = "pld"
ACCOUNTANTS = (BASIC, PLD)
DEFAULT_ACCOUNTANT = BASIC
PLD_DISCRETISATION = 1e-3
MAX_RELEASES_SEARCHED = 100_000

# How an entry was accounted (shown by `ledger show`).
VIA_PLD = "pld"
VIA_CANONICAL = "pld: (epsilon, delta) canonical pair"
VIA_ZCDP_CONVERTED = "pld: zCDP converted to (epsilon, delta)"
VIA_RDP = "rdp"
VIA_BASIC = "basic"


class Accountable(Protocol):
    """A ledger entry or a planned spend: its (epsilon, delta) and typed description."""

    epsilon: float
    delta: float


@dataclass(frozen=True)
class Composition:
    """A history composed by one accountant, evaluated against a cap.

    `basic` is basic composition; `tight` (pld only) the epsilon at the cap's delta. The
    history fits a cap when either fits (both are valid guarantees). `spent` is the pair to
    report: `tight` when it beats basic by more than the PLD's resolution
    `PLD_DISCRETISATION` (or basic's delta is over the cap's), else `basic`. `methods` says how
    each entry was accounted, in input order; `notes` explains fallbacks.
    """

    accountant: str
    basic: Spend
    tight: Spend | None
    methods: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def fits(self, cap: Spend) -> bool:
        return self.basic.fits_within(cap) or (
            self.tight is not None and self.tight.fits_within(cap)
        )

    @property
    def spent(self) -> Spend:
        tight, basic = self.tight, self.basic
        if tight is None or (
            basic.delta <= tight.delta + CAP_SLACK
            and basic.epsilon <= tight.epsilon + PLD_DISCRETISATION
        ):
            return basic
        return tight


def check_accountant(name: str) -> str:
    if name not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {name!r}; choose one of {', '.join(ACCOUNTANTS)}")
    return name


def description_of(item: Accountable) -> Mechanism:
    """The item's typed description, or `ApproxDP(epsilon, delta)` when it has none."""
    description = getattr(item, "description", None)
    if isinstance(description, dict):
        description = mechanism_from_dict(description)
    return description or ApproxDP(item.epsilon, item.delta)


def compose_history(
    items: Sequence[Accountable], cap: Spend, accountant: str = DEFAULT_ACCOUNTANT
) -> Composition:
    """Compose `items` (history plus plan) with `accountant`, evaluated at the cap's delta."""
    basic = compose(Spend(item.epsilon, item.delta) for item in items)
    if check_accountant(accountant) == BASIC or not items:
        return Composition(accountant, basic, None, (VIA_BASIC,) * len(items))
    if cap.delta == 0:
        # (epsilon, 0)-DP bounds the worst-case privacy loss, and worst cases of composed
        # mechanisms add up: the sum is exact. (The PLD's truncated tails, mass <= 1e-15 at
        # +infinity, would even make it infinite at delta 0.)
        note = "a pure-epsilon cap (delta 0): basic composition is exact there"
        return Composition(accountant, basic, None, (VIA_BASIC,) * len(items), (note,))
    mechanisms = [description_of(item) for item in items]
    epsilon, methods, notes = _tight_epsilon(mechanisms, cap.delta)
    return Composition(accountant, basic, Spend(epsilon, cap.delta), methods, notes)


def releases_that_fit(
    history: Sequence[Accountable],
    release: Sequence[Accountable],
    cap: Spend,
    accountant: str = DEFAULT_ACCOUNTANT,
) -> int:
    """How many more releases spending exactly `release` the cap admits after `history`."""
    if not release:
        return 0
    if compose(release) == Spend(0.0, 0.0):
        return MAX_RELEASES_SEARCHED  # spends nothing: no cap ever refuses it

    def fits(k: int) -> bool:
        return compose_history([*history, *(list(release) * k)], cap, accountant).fits(cap)

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


# --- the tight accountant -----------------------------------------------------------------


def _tight_epsilon(
    mechanisms: Sequence[Mechanism], delta: float
) -> tuple[float, tuple[str, ...], tuple[str, ...]]:
    zcdp = [m for m in mechanisms if isinstance(m, ZCDP)]
    generic = sum(isinstance(m, ApproxDP) for m in mechanisms)
    notes: tuple[str, ...] = ()
    if generic:
        notes = (
            f"{generic} entr{'y is' if generic == 1 else 'ies are'} known only by (epsilon, "
            "delta) (no typed mechanism): composed as the canonical (epsilon, delta) pair",
        )
    if not zcdp:
        methods = tuple(VIA_CANONICAL if _canonical(m) else VIA_PLD for m in mechanisms)
        return _pld_epsilon(_pld_terms(mechanisms), delta), methods, notes
    candidates = []
    if delta > 0:
        per_entry = delta / (2 * len(zcdp))
        converted = [
            ApproxDP(_zcdp_epsilon(m.rho, per_entry), per_entry) if isinstance(m, ZCDP) else m
            for m in mechanisms
        ]
        pld_methods = tuple(
            VIA_ZCDP_CONVERTED
            if isinstance(m, ZCDP)
            else (VIA_CANONICAL if _canonical(m) else VIA_PLD)
            for m in mechanisms
        )
        note = "zCDP entries converted one by one to (epsilon, delta) and composed in PLD"
        candidates.append((_pld_epsilon(_pld_terms(converted), delta), pld_methods, (*notes, note)))
    if all(_has_rdp(m) for m in mechanisms):
        note = "zCDP entries present: the whole history composed in Renyi DP"
        candidates.append(
            (_rdp_epsilon(mechanisms, delta), (VIA_RDP,) * len(mechanisms), (*notes, note))
        )
    if not candidates:
        note = (
            "zCDP entries with (epsilon, delta>0)-only entries at a cap delta of 0: no tight "
            "route applies, basic composition is used"
        )
        return math.inf, (VIA_BASIC,) * len(mechanisms), (*notes, note)
    return min(candidates, key=lambda candidate: candidate[0])


def _canonical(mechanism: Mechanism) -> bool:
    return isinstance(mechanism, PureEpsilon | ApproxDP)


PldKey = tuple[str, float, float]


def _pld_terms(mechanisms: Iterable[Mechanism]) -> Counter[PldKey]:
    """How many times each normalised single-mechanism PLD composes."""
    terms: Counter[PldKey] = Counter()
    for m in mechanisms:
        if isinstance(m, Laplace):
            terms[("laplace", m.scale / m.l1_sensitivity, 1.0)] += 1
        elif isinstance(m, Gaussian):
            terms[("gaussian", m.sigma / m.l2_sensitivity, 1.0)] += 1
        elif isinstance(m, PoissonSubsampledGaussian):
            terms[("subsampled_gaussian", m.noise_multiplier, m.sample_rate)] += m.steps
        elif isinstance(m, PureEpsilon):
            terms[("canonical", m.epsilon, 0.0)] += m.count
        elif isinstance(m, ApproxDP):
            terms[("canonical", m.epsilon, m.delta)] += 1
        else:
            raise ValueError(f"PLD cannot represent {m!r}")
    return terms


def _pld_epsilon(terms: Counter[PldKey], delta: float) -> float:
    composed = None
    for key in sorted(terms):
        pld = _repeated_pld(key, terms[key])
        composed = pld if composed is None else composed.compose(pld)
    assert composed is not None
    return float(composed.get_epsilon_for_delta(delta))


@functools.lru_cache(maxsize=1024)
def _repeated_pld(key: PldKey, count: int) -> PrivacyLossDistribution:
    single = _single_pld(key)
    return single if count == 1 else single.self_compose(count)


@functools.lru_cache(maxsize=1024)
def _single_pld(key: PldKey) -> PrivacyLossDistribution:
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    kind, a, b = key
    if kind == "laplace":
        return pld.from_laplace_mechanism(a, value_discretization_interval=PLD_DISCRETISATION)
    if kind == "gaussian":
        return pld.from_gaussian_mechanism(a, value_discretization_interval=PLD_DISCRETISATION)
    if kind == "subsampled_gaussian":
        return pld.from_gaussian_mechanism(
            a, sampling_prob=b, value_discretization_interval=PLD_DISCRETISATION
        )
    return pld.from_privacy_parameters(
        common.DifferentialPrivacyParameters(a, b),
        value_discretization_interval=PLD_DISCRETISATION,
    )


# --- Renyi DP ------------------------------------------------------------------------------


def _has_rdp(mechanism: Mechanism) -> bool:
    return not isinstance(mechanism, ApproxDP) or mechanism.delta == 0


def _dp_event(mechanism: Mechanism):  # noqa: ANN202 (dp_accounting is imported lazily)
    from dp_accounting import dp_event

    if isinstance(mechanism, Laplace):
        return dp_event.LaplaceDpEvent(mechanism.scale / mechanism.l1_sensitivity)
    if isinstance(mechanism, Gaussian):
        return dp_event.GaussianDpEvent(mechanism.sigma / mechanism.l2_sensitivity)
    if isinstance(mechanism, PoissonSubsampledGaussian):
        step = dp_event.PoissonSampledDpEvent(
            mechanism.sample_rate, dp_event.GaussianDpEvent(mechanism.noise_multiplier)
        )
        return dp_event.SelfComposedDpEvent(step, mechanism.steps)
    if isinstance(mechanism, ZCDP):
        return dp_event.ZCDpEvent(mechanism.rho)
    if isinstance(mechanism, PureEpsilon):  # epsilon-DP => (epsilon^2 / 2)-zCDP
        return dp_event.SelfComposedDpEvent(
            dp_event.ZCDpEvent(mechanism.epsilon**2 / 2), mechanism.count
        )
    if isinstance(mechanism, ApproxDP) and mechanism.delta == 0:
        return dp_event.ZCDpEvent(mechanism.epsilon**2 / 2)
    raise ValueError(f"no Renyi-DP curve for {mechanism!r}")


def _rdp_epsilon(mechanisms: Sequence[Mechanism], delta: float) -> float:
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant(orders=list(RDP_ORDERS))
    accountant.compose(dp_event.ComposedDpEvent([_dp_event(m) for m in mechanisms]))
    return float(accountant.get_epsilon(delta))


@functools.lru_cache(maxsize=1024)
def _zcdp_epsilon(rho: float, delta: float) -> float:
    return _rdp_epsilon([ZCDP(rho)], delta)


def spent_under_accountant(
    entries: Sequence[Accountable], cap: Spend, accountant: str | None = None
) -> tuple[Spend, str]:
    """(spend of `entries` under the dataset's accountant, its name), for privacy statements.

    The accountant is `accountant`, else the one `cap` carries: pass the cap as `Ledger.cap`
    returns it (the recorded accountant; a schema's cap may leave it unset). Under pld the
    spend is the epsilon at the cap's delta, or basic's pair when not meaningfully larger
    (`Composition.spent`).
    """
    name = accountant or getattr(cap, "accountant", None)
    if name is None:
        raise ValueError("which accountant? pass the dataset's cap from Ledger.cap(dataset)")
    return compose_history(entries, cap, check_accountant(name)).spent, name
