"""Mechanism descriptions, the Rényi filter that enforces rdp caps (dprelease.privacy.rdp_filter)
and the PLD figures that are only reported (dprelease.privacy.pld), against basic composition
and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import comb

from dprelease.privacy.accountants import (
    VIA_RDP,
    VIA_RDP_GENERIC,
    compose_history,
    enforcing,
    releases_that_fit,
)
from dprelease.privacy.accounting import Cap, PlannedSpend, Spend, cap_delta_warning
from dprelease.privacy.calibration import gaussian_delta, gaussian_sigma
from dprelease.privacy.mechanisms import (
    ZCDP,
    ApproxDP,
    Gaussian,
    Laplace,
    PoissonSubsampledGaussian,
    PureEpsilon,
    mechanism_from_dict,
)
from dprelease.privacy.pld import (
    PLD_DISCRETISATION,
    VIA_CANONICAL,
    VIA_PLD,
    VIA_ZCDP_CONVERTED,
    dp_event,
    pld_epsilon,
    rdp_epsilon,
)
from dprelease.privacy.pld import VIA_RDP as PLD_VIA_RDP
from dprelease.privacy.rdp_filter import (
    FILTER_ORDERS,
    conversion_offsets,
    filter_spend,
    rdp_curve,
)

EXAMPLES = [
    Laplace(2.0, 3.0),
    Gaussian(1.5, 0.5),
    PoissonSubsampledGaussian(1.1, 0.01, 300),
    PureEpsilon(0.25, 4),
    ZCDP(0.05),
    ApproxDP(0.5, 1e-7),
]
ORDERS = np.asarray(FILTER_ORDERS)


@pytest.mark.parametrize("mechanism", EXAMPLES, ids=lambda m: m.kind)
def test_descriptions_round_trip_through_json(mechanism):
    data = mechanism.to_dict()
    assert data["kind"] == mechanism.kind
    assert mechanism_from_dict(data) == mechanism
    assert mechanism_from_dict(None) is None


def test_invalid_descriptions_are_refused():
    with pytest.raises(ValueError, match="scale must be a positive finite"):
        Laplace(0.0, 1.0)
    with pytest.raises(ValueError, match="sample_rate must be in"):
        PoissonSubsampledGaussian(1.0, 1.5, 10)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        PoissonSubsampledGaussian(1.0, 0.5, 2.5)
    with pytest.raises(ValueError, match="unknown fields"):
        mechanism_from_dict({"kind": "laplace", "scale": 1.0, "l1_sensitivity": 1.0, "x": 1})
    with pytest.raises(ValueError, match="not a mechanism description"):
        mechanism_from_dict({"kind": "nope"})


def test_planned_spend_stays_backward_compatible_and_checks_its_description():
    old = PlannedSpend("laplace", 1.0, 0.0, {"laplace_scale": 2.0})
    assert old.description is None and old.accountable == ApproxDP(1.0, 0.0)
    parsed = PlannedSpend(
        "laplace", 0.5, 0.0, {}, {"kind": "laplace", "scale": 2.0, "l1_sensitivity": 1.0}
    )
    assert parsed.description == Laplace(2.0, 1.0)
    with pytest.raises(ValueError, match=r"is \(1, 0\)-DP, more than the \(0.5, 0\)"):
        PlannedSpend("laplace", 0.5, 0.0, {}, Laplace(1.0, 1.0))
    with pytest.raises(ValueError, match="more than"):
        PlannedSpend("svt", 1.0, 0.0, description=PureEpsilon(0.5, 3))


# --- the Rényi filter (the rdp accountant) --------------------------------------------------


def test_renyi_curves_match_the_libraries_and_the_closed_forms():
    from dp_accounting.rdp.rdp_privacy_accountant import _laplace_rdp
    from opacus.accountants.analysis.rdp import compute_rdp

    laplace = rdp_curve(Laplace(1.25, 1.0))
    assert laplace == pytest.approx([_laplace_rdp(0.8, a) for a in FILTER_ORDERS], rel=1e-12)
    dpsgd = rdp_curve(PoissonSubsampledGaussian(1.1, 0.01, 300))
    expected = compute_rdp(q=0.01, noise_multiplier=1.1, steps=300, orders=list(FILTER_ORDERS))
    assert dpsgd == pytest.approx(list(expected), rel=1e-12)
    assert rdp_curve(Gaussian(2.0, 1.0)) == pytest.approx(list(ORDERS / 8))
    assert rdp_curve(ZCDP(0.1)) == pytest.approx(list(0.1 * ORDERS))
    # Randomized response bounds every epsilon-DP mechanism: below epsilon and below the
    # zCDP bound alpha epsilon^2 / 2, above the Laplace curve at the same epsilon.
    pure = np.asarray(rdp_curve(PureEpsilon(0.8, 2))) / 2
    assert np.all(pure <= 0.8) and np.all(pure <= ORDERS * 0.8**2 / 2)
    assert np.all(pure >= np.asarray(laplace) - 1e-12)
    assert rdp_curve(ApproxDP(0.8, 0.0)) == pytest.approx(list(pure))


def _certifying_orders(mechanisms, epsilon: float, delta: float) -> np.ndarray:
    composed = sum(np.asarray(rdp_curve(m)) for m in mechanisms)
    return ORDERS[composed <= epsilon - conversion_offsets(delta)]


def test_the_filter_checks_the_whole_composed_curve_at_every_order():
    """The order that certifies the cap moves as releases arrive, and the decision is taken on
    the composed curve of the whole history at each order: a pure Laplace history is certified
    by high orders (and the pure sum); a Gaussian after it rules those out but a middle order
    still certifies the whole; a third release leaves no order, and the filter stops."""
    cap = Cap(6.0, 1e-6, "rdp")
    laplace = PlannedSpend("laplace", 4.0, 0.0, description=Laplace(0.25, 1.0))
    sigma = 4.0
    gaussian = PlannedSpend(
        "gaussian", 1.0, gaussian_delta(sigma, 1.0, 1.0), description=Gaussian(sigma, 1.0)
    )
    steps = [[laplace], [laplace, gaussian], [laplace, gaussian, gaussian]]
    certifying = [set(_certifying_orders([i.description for i in h], 6.0, 1e-6)) for h in steps]
    assert 256.0 in certifying[0] and min(certifying[0]) == 8.0
    assert 256.0 not in certifying[1] and certifying[1] == {10.0, 12.0, 16.0, 20.0, 32.0}
    assert certifying[2] == {12.0, 16.0, 20.0}
    four = [laplace, gaussian, gaussian, gaussian]
    assert _certifying_orders([i.description for i in four], 6.0, 1e-6).size == 0
    for history in steps:
        assert compose_history(history, cap, "rdp").fits(cap)
    refused = compose_history(four, cap, "rdp")
    assert not refused.fits(cap) and refused.enforced.epsilon > 6.0
    # Each part alone fits with room to spare: only the whole curve decides.
    assert compose_history([gaussian] * 3, cap, "rdp").enforced.epsilon < 3.0
    assert releases_that_fit([laplace], [gaussian], cap, "rdp") == 2


@st.composite
def curve_entries(draw) -> PlannedSpend:
    kind = draw(st.sampled_from(["laplace", "gaussian", "pure", "psg", "zcdp"]))
    scale = draw(st.floats(0.3, 20.0))
    if kind == "laplace":
        return PlannedSpend(kind, 1 / scale, 0.0, description=Laplace(scale, 1.0))
    if kind == "gaussian":
        return PlannedSpend(kind, 50.0, 0.5, description=Gaussian(scale, 1.0))
    if kind == "pure":
        return PlannedSpend(kind, 1 / scale, 0.0, description=PureEpsilon(1 / scale))
    if kind == "zcdp":
        return PlannedSpend(kind, 50.0, 0.5, description=ZCDP(1 / scale**2))
    mechanism = PoissonSubsampledGaussian(0.8 + scale / 10, draw(st.floats(0.001, 0.1)), 50)
    return PlannedSpend(kind, 50.0, 0.5, description=mechanism)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=st.lists(curve_entries(), min_size=1, max_size=8),
    epsilon=st.floats(0.5, 20.0),
    delta=st.sampled_from([1e-9, 1e-6, 1e-3]),
)
def test_the_filter_admits_exactly_when_an_order_or_the_pure_sum_certifies(history, epsilon, delta):
    """The decision is: some order alpha has sum of curves <= B_alpha at delta / 16, or every
    entry is pure and the epsilons sum to at most the cap's. And the filter stops: once a
    history is refused, no longer history (a prefix of it admitted) is ever admitted."""
    cap = Cap(epsilon, delta, "rdp")
    mechanisms = [item.description for item in history]
    pure = all(isinstance(m, Laplace | PureEpsilon) for m in mechanisms)
    pure_sum = math.fsum(i.epsilon for i in history)
    expected = _certifying_orders(mechanisms, epsilon, delta).size > 0 or (
        pure and pure_sum <= epsilon + 1e-12
    )
    assert compose_history(history, cap, "rdp").fits(cap) == expected
    verdicts = [compose_history(history[:k], cap, "rdp").fits(cap) for k in range(1, 9)]
    assert verdicts == sorted(verdicts, reverse=True)  # admitted ..., then refused forever


def test_the_filter_is_never_below_the_exact_privacy_of_gaussians():
    """Soundness check against an exact answer: k Gaussian releases compose exactly to the
    Gaussian at mu = sqrt(sum mu_i^2) (Dong, Roth and Su 2019); the filter's epsilon at delta
    is never below it (here 1.5 above: the Rényi conversion and the split of delta over the
    16 orders, log(16) / (alpha - 1) at the certifying order)."""
    mus = [0.3, 0.5, 0.2, 0.4] * 5
    delta = 1e-6
    mu = math.sqrt(sum(m * m for m in mus))
    exact = _bisect(lambda e: gaussian_delta(1.0 / mu, 1.0, e), delta, 100.0)
    mechanisms = [Gaussian(2.0 / m, 2.0) for m in mus]
    ours = filter_spend(mechanisms, delta)
    assert ours.delta == delta and exact <= ours.epsilon <= exact + 2.0
    # The natural filter (every order against the whole delta) would claim less, unproven.
    composed = sum(np.asarray(rdp_curve(m)) for m in mechanisms)
    natural = np.min(composed + np.log1p(-1 / ORDERS) - np.log(ORDERS * delta) / (ORDERS - 1))
    assert natural < ours.epsilon


def test_pure_histories_get_basic_composition_and_generic_entries_take_half_the_delta():
    """Pure entries compose exactly as basic does (the order infinity). Entries known only by
    (epsilon, delta > 0) are charged their epsilon-part plus log(1 / (1 - delta)) and take
    their deltas from delta_A = delta / 2 (rdp_filter's proof)."""
    cap = Cap(6.0, 1e-6, "rdp")
    pure = [PlannedSpend("svt", 1.0, 0.0, description=PureEpsilon(1.0))] * 6
    composition = compose_history(pure, cap, "rdp")
    assert composition.enforced == Spend(6.0, 0.0) and composition.fits(cap)
    assert composition.methods == (VIA_RDP,) * 6
    generic = PlannedSpend("truncation", 1.0, 1e-7)  # known only by (epsilon, delta > 0)
    mixed = compose_history([*pure[:3], generic], cap, "rdp")
    assert mixed.enforced == Spend(4.0 - math.log1p(-1e-7), 1e-7) and mixed.fits(cap)
    assert mixed.methods == (VIA_RDP,) * 3 + (VIA_RDP_GENERIC,)
    assert mixed.notes[0].startswith("1 entry is known only by (epsilon, delta > 0)")
    # delta_A = 5e-7 holds five of them; basic composition would take six (delta 6e-7).
    assert releases_that_fit([], [generic], cap, "rdp") == 5
    assert releases_that_fit([], [generic], cap, "basic") == 6
    assert not compose_history([generic] * 6, cap, "rdp").fits(cap)
    assert not compose_history([generic], Cap(6.0, 0.0, "rdp"), "rdp").fits(Cap(6.0, 0.0))


def test_pld_is_enforced_with_rdp_and_reported_only():
    """A pld dataset is enforced with the Rényi filter; the PLD figure is computed and
    reported, labelled, and it would admit releases the filter refuses."""
    assert enforcing("pld") == enforcing("rdp") == "rdp" and enforcing(None) == "basic"
    cap = Cap(3.0, 1e-5, "pld")
    sigma = gaussian_sigma(1.0, 0.5, 1e-6)
    release = [PlannedSpend("gaussian", 0.5, 1e-6, description=Gaussian(sigma, 1.0))]
    admitted = releases_that_fit([], release, cap, "pld")
    assert admitted == releases_that_fit([], release, cap, "rdp") > 6
    over = compose_history(release * (admitted + 1), cap, "pld", report_pld=True)
    assert not over.fits(cap)
    assert over.fixed_in_advance.fits_within(cap)  # PLD alone would have admitted it
    assert compose_history(release, cap, "pld").fixed_in_advance is None  # on request only


def test_releases_that_fit_under_basic_and_rdp():
    cap = Spend(3.0, 1e-5)
    sigma = gaussian_sigma(1.0, 0.5, 1e-6)
    release = [PlannedSpend("gaussian", 0.5, 1e-6, description=Gaussian(sigma, 1.0))]
    assert releases_that_fit([], release, cap, "basic") == 6
    tight = releases_that_fit([], release, cap, "rdp")
    assert tight > 6
    over = compose_history(release * (tight + 1), cap, "rdp")
    assert not over.fits(cap) and compose_history(release * tight, cap, "rdp").fits(cap)


def test_cap_delta_warning_when_delta_exceeds_one_over_max_rows():
    assert cap_delta_warning(1e-5, 10_000) is None and cap_delta_warning(1e-3, None) is None
    warning = cap_delta_warning(1e-3, 100_000)
    assert "exceeds 1 / max_rows (1e-05)" in warning and "about 100 of the table's" in warning
    assert "delta=" not in warning and "epsilon=" not in warning  # the statement's grammar


# --- PLD (reported only): closed forms -----------------------------------------------------


def _pure_composition_delta(epsilon: float, k: int, target: float) -> float:
    """Exact delta at `target` of k epsilon-DP mechanisms (Kairouz et al. 2015, optimal)."""
    p = math.exp(epsilon) / (1 + math.exp(epsilon))
    q = 1 - p
    return sum(
        comb(k, i) * max(0.0, p ** (k - i) * q**i - math.exp(target) * p**i * q ** (k - i))
        for i in range(k + 1)
    )


def _bisect(delta_at, delta: float, high: float) -> float:
    low = 0.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (low, middle) if delta_at(middle) <= delta else (middle, high)
    return high


@pytest.mark.parametrize(
    ("epsilon", "k", "delta"), [(0.1, 30, 1e-6), (0.5, 12, 1e-5), (1.0, 6, 1e-6)]
)
def test_pld_of_pure_epsilon_matches_the_optimal_composition_theorem(epsilon, k, delta):
    exact = _bisect(lambda e: _pure_composition_delta(epsilon, k, e), delta, k * epsilon)
    tight, methods, _ = pld_epsilon([PureEpsilon(epsilon)] * k, delta)
    # Pessimistic: never below the exact value; discretisation rounds each loss up <= 1e-3.
    assert exact - 1e-9 <= tight <= exact + k * PLD_DISCRETISATION
    assert methods == (VIA_CANONICAL,) * k
    same, _, _ = pld_epsilon([PureEpsilon(epsilon, k)], delta)
    assert same == pytest.approx(tight, abs=1e-12)


def test_pld_of_gaussians_is_exact_gdp_and_below_zcdp():
    mus = [0.3, 0.5, 0.2, 0.4] * 5
    delta = 1e-6
    mu = math.sqrt(sum(m * m for m in mus))  # Dong, Roth and Su 2019: mu-GDP composes in l2
    exact = _bisect(lambda e: gaussian_delta(1.0 / mu, 1.0, e), delta, 100.0)
    tight, methods, _ = pld_epsilon([Gaussian(2.0 / m, 2.0) for m in mus], delta)
    assert exact - 1e-9 <= tight <= exact + 1e-3 and set(methods) == {VIA_PLD}
    rho = sum(m * m / 2 for m in mus)  # each Gaussian is (mu^2 / 2)-zCDP (Bun and Steinke)
    assert tight < rho + 2 * math.sqrt(rho * math.log(1 / delta)) - 0.5


def test_pld_of_zcdp_uses_rdp_or_converts_each_zcdp_entry():
    tight, methods, _ = pld_epsilon([ZCDP(0.02)] * 10, 1e-6)
    rho, delta = 0.2, 1e-6
    assert methods == (PLD_VIA_RDP,) * 10
    assert tight <= rho + 2 * math.sqrt(rho * math.log(1 / delta))
    mixed, methods, notes = pld_epsilon([ZCDP(0.02), ApproxDP(0.5, 1e-8)], 1e-6)
    assert methods == (VIA_ZCDP_CONVERTED, VIA_CANONICAL)
    assert notes[-1] == "zCDP entries converted one by one to (epsilon, delta) and composed in PLD"


def test_grouped_pld_agrees_with_dp_accountings_pld_accountant():
    """Our grouping + 1e-3 grid against dp-accounting's own accountant on DpEvents at 1e-4."""
    from dp_accounting import dp_event as events
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

    mechanisms = [
        Laplace(2.0, 1.5),
        Gaussian(3.0, 1.0),
        PoissonSubsampledGaussian(1.2, 0.02, 150),
        Laplace(2.0, 1.5),
    ] * 3
    reference = PLDAccountant(value_discretization_interval=1e-4)
    reference.compose(events.ComposedDpEvent([dp_event(m) for m in mechanisms]))
    expected = reference.get_epsilon(1e-6)
    tight, _, _ = pld_epsilon(mechanisms, 1e-6)
    assert expected - 1e-3 <= tight <= expected + 0.01 * expected


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mechanisms=st.lists(
        st.sampled_from([Laplace(2.0, 1.0), Gaussian(3.0, 1.0), PureEpsilon(0.3, 2)]),
        min_size=1,
        max_size=5,
    )
)
def test_reported_pld_is_never_above_the_filters_figure(mechanisms):
    """PLD composes optimally for a sequence fixed in advance, so the figure it reports is
    never above the Rényi filter's, up to its 1e-3 grid per composed loss."""
    delta = 1e-6
    tight, _, _ = pld_epsilon(mechanisms, delta)
    terms = sum(m.count if isinstance(m, PureEpsilon) else 1 for m in mechanisms)
    assert tight <= filter_spend(mechanisms, delta).epsilon + PLD_DISCRETISATION * terms
    assert tight <= rdp_epsilon(mechanisms, delta) + PLD_DISCRETISATION * terms
