"""PLD composition of a ledger history: REPORTED only, valid for a sequence of mechanisms fixed
in advance, never used to admit a release (docs/privacy-model.md section 7; why in
`dprelease.privacy.rdp_filter`).

The history is composed numerically with privacy loss distributions (dp-accounting; Koskela et
al. 2020, Doroshenko et al. 2022) and the epsilon at the cap's delta is reported next to the
enforcing accountant's figure, as what the same mechanisms would cost had they all been fixed
before the first release. Every entry contributes a dominating pair (Zhu, Dong and Wang 2022):

- Laplace(b, D): the Laplace PLD at parameter b / D; Gaussian(s, D): the Gaussian PLD at s / D;
  Poisson-subsampled Gaussian (sigma, q, T): the subsampled Gaussian PLD, both the add and the
  remove direction (add/remove-one, docs/privacy-model.md section 1), self-composed T times.
- Pure epsilon (and any entry with only an (epsilon, delta) guarantee: `ApproxDP`, or an
  entry written before descriptions existed): the canonical pair of (epsilon, delta)-DP
  (Kairouz, Oh and Viswanath 2015), which dominates every (epsilon, delta)-DP mechanism.
- zCDP(rho) has no dominating pair PLD can use. Two routes are computed and the smaller
  epsilon taken: (a) each zCDP entry enters the PLD as the canonical pair of its own
  (epsilon_i, delta_i) guarantee, epsilon_i from rho at delta_i = delta_cap / (2 n_zcdp)
  (Canonne, Kamath and Steinke 2020, Proposition 12, via dp-accounting); (b) when every
  entry has a Renyi-DP curve, the whole history composed in RDP (Mironov 2017) and converted
  at the cap's delta.

The PLD is pessimistic (`pessimistic_estimate=True`: discretisation rounds privacy losses up,
truncated tails go to the +infinity atom). Identical mechanisms are grouped and self-composed
with one FFT power, groups are composed in a fixed order, single-mechanism PLDs are cached per
process, `PLD_DISCRETISATION` = 1e-3 (a 12-mechanism history is within 1% of dp-accounting's
own PLD accountant at 1e-4, tests/test_accounting.py).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from dprelease.privacy.calibration import RDP_ORDERS
from dprelease.privacy.mechanisms import (
    ZCDP,
    ApproxDP,
    Gaussian,
    Laplace,
    Mechanism,
    PoissonSubsampledGaussian,
    PureEpsilon,
)

if TYPE_CHECKING:
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

PLD_DISCRETISATION = 1e-3
# How an entry entered the reported PLD composition.
VIA_PLD = "pld"
VIA_CANONICAL = "pld: (epsilon, delta) canonical pair"
VIA_ZCDP_CONVERTED = "pld: zCDP converted to (epsilon, delta)"
VIA_RDP = "rdp"


def pld_epsilon(
    mechanisms: Sequence[Mechanism], delta: float
) -> tuple[float, tuple[str, ...], tuple[str, ...]]:
    """(epsilon at `delta` > 0, how each entry was composed, notes) of the PLD composition."""
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
    per_entry = delta / (2 * len(zcdp))
    converted = [
        ApproxDP(_zcdp_epsilon(m.rho, per_entry), per_entry) if isinstance(m, ZCDP) else m
        for m in mechanisms
    ]
    pld_methods = tuple(
        VIA_ZCDP_CONVERTED if isinstance(m, ZCDP) else (VIA_CANONICAL if _canonical(m) else VIA_PLD)
        for m in mechanisms
    )
    note = "zCDP entries converted one by one to (epsilon, delta) and composed in PLD"
    candidates = [(_pld_epsilon(_pld_terms(converted), delta), pld_methods, (*notes, note))]
    if all(not isinstance(m, ApproxDP) or m.delta == 0 for m in mechanisms):
        note = "zCDP entries present: the whole history composed in Renyi DP"
        candidates.append(
            (rdp_epsilon(mechanisms, delta), (VIA_RDP,) * len(mechanisms), (*notes, note))
        )
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


def dp_event(mechanism: Mechanism):  # noqa: ANN201 (dp_accounting is imported lazily)
    """The mechanism as a dp-accounting event (for its RDP and PLD accountants)."""
    from dp_accounting import dp_event as events

    if isinstance(mechanism, Laplace):
        return events.LaplaceDpEvent(mechanism.scale / mechanism.l1_sensitivity)
    if isinstance(mechanism, Gaussian):
        return events.GaussianDpEvent(mechanism.sigma / mechanism.l2_sensitivity)
    if isinstance(mechanism, PoissonSubsampledGaussian):
        step = events.PoissonSampledDpEvent(
            mechanism.sample_rate, events.GaussianDpEvent(mechanism.noise_multiplier)
        )
        return events.SelfComposedDpEvent(step, mechanism.steps)
    if isinstance(mechanism, ZCDP):
        return events.ZCDpEvent(mechanism.rho)
    if isinstance(mechanism, PureEpsilon):  # epsilon-DP => (epsilon^2 / 2)-zCDP
        return events.SelfComposedDpEvent(
            events.ZCDpEvent(mechanism.epsilon**2 / 2), mechanism.count
        )
    if isinstance(mechanism, ApproxDP) and mechanism.delta == 0:
        return events.ZCDpEvent(mechanism.epsilon**2 / 2)
    raise ValueError(f"no Renyi-DP curve for {mechanism!r}")


def rdp_epsilon(mechanisms: Sequence[Mechanism], delta: float) -> float:
    """Epsilon at `delta` of the mechanisms composed in RDP over `RDP_ORDERS` (dp-accounting);
    for a sequence fixed in advance (the filter is `rdp_filter`)."""
    from dp_accounting import dp_event as events
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant(orders=list(RDP_ORDERS))
    accountant.compose(events.ComposedDpEvent([dp_event(m) for m in mechanisms]))
    return float(accountant.get_epsilon(delta))


@functools.lru_cache(maxsize=1024)
def _zcdp_epsilon(rho: float, delta: float) -> float:
    return rdp_epsilon([ZCDP(rho)], delta)


def clear_caches() -> None:
    """Forget the cached single-mechanism PLDs (benchmarks time a cold start with it)."""
    _single_pld.cache_clear()
    _repeated_pld.cache_clear()
    _zcdp_epsilon.cache_clear()
