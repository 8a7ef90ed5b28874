"""Mechanism descriptions and the tight (pld) accountant against basic composition and closed
forms (dprelease.privacy.mechanisms, dprelease.privacy.accountants)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import comb

from dprelease.privacy.accountants import (
    PLD_DISCRETISATION,
    VIA_CANONICAL,
    VIA_PLD,
    VIA_RDP,
    VIA_ZCDP_CONVERTED,
    compose_history,
    releases_that_fit,
    spent_under_accountant,
)
from dprelease.privacy.accounting import Cap, PlannedSpend, Spend
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

EXAMPLES = [
    Laplace(2.0, 3.0),
    Gaussian(1.5, 0.5),
    PoissonSubsampledGaussian(1.1, 0.01, 300),
    PureEpsilon(0.25, 4),
    ZCDP(0.05),
    ApproxDP(0.5, 1e-7),
]


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


# --- closed forms ---------------------------------------------------------------------------


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
def test_pure_epsilon_composition_matches_the_optimal_composition_theorem(epsilon, k, delta):
    exact = _bisect(lambda e: _pure_composition_delta(epsilon, k, e), delta, k * epsilon)
    items = [PlannedSpend("svt", epsilon, 0.0, description=PureEpsilon(epsilon))] * k
    tight = compose_history(items, Spend(100.0, delta), "pld").tight.epsilon
    # Pessimistic: never below the exact value; discretisation rounds each loss up <= 1e-3.
    assert exact - 1e-9 <= tight <= exact + k * PLD_DISCRETISATION
    same = compose_history(
        [PlannedSpend("s", k * epsilon, 0.0, description=PureEpsilon(epsilon, k))],
        Spend(100.0, delta),
        "pld",
    )
    assert same.tight.epsilon == pytest.approx(tight, abs=1e-12)


def test_pure_epsilon_at_delta_zero_is_the_sum():
    items = [PlannedSpend("em", 0.5, 0.0, description=PureEpsilon(0.5))] * 40
    composition = compose_history(items, Spend(20.0, 0.0), "pld")
    assert composition.spent == Spend(20.0, 0.0) and composition.fits(Spend(20.0, 0.0))
    assert composition.notes == ("a pure-epsilon cap (delta 0): basic composition is exact there",)


def _gaussian_items(mus: list[float]) -> list[PlannedSpend]:
    return [PlannedSpend("gaussian", 0.0, 0.0, description=Gaussian(2.0 / mu, 2.0)) for mu in mus]


def test_gaussian_composition_is_exact_gdp_and_below_zcdp():
    mus = [0.3, 0.5, 0.2, 0.4] * 5
    delta = 1e-6
    mu = math.sqrt(sum(m * m for m in mus))  # Dong, Roth and Su 2019: mu-GDP composes in l2
    exact = _bisect(lambda e: gaussian_delta(1.0 / mu, 1.0, e), delta, 100.0)
    tight = compose_history(_gaussian_items(mus), Spend(100.0, delta), "pld").tight.epsilon
    assert exact - 1e-9 <= tight <= exact + 1e-3
    rho = sum(m * m / 2 for m in mus)  # each Gaussian is (mu^2 / 2)-zCDP (Bun and Steinke)
    zcdp = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    assert tight < zcdp - 0.5


def test_zcdp_history_uses_rdp_and_beats_the_closed_form_conversion():
    items = [PlannedSpend("aim", 1.0, 1e-8, description=ZCDP(0.02))] * 10
    composition = compose_history(items, Spend(100.0, 1e-6), "pld")
    rho, delta = 0.2, 1e-6
    assert composition.methods == (VIA_RDP,) * 10
    # Canonne et al.'s conversion (dp-accounting) is below Bun-Steinke's closed form.
    assert composition.tight.epsilon <= rho + 2 * math.sqrt(rho * math.log(1 / delta))


def test_zcdp_with_approximate_dp_entries_converts_each_zcdp_entry():
    items = [
        PlannedSpend("aim", 1.0, 1e-8, description=ZCDP(0.02)),
        PlannedSpend("generic", 0.5, 1e-8),
    ]
    composition = compose_history(items, Spend(10.0, 1e-6), "pld")
    assert composition.methods == (VIA_ZCDP_CONVERTED, VIA_CANONICAL)
    assert composition.notes == (
        "1 entry is known only by (epsilon, delta) (no typed mechanism): composed as the "
        "canonical (epsilon, delta) pair",
        "zCDP entries converted one by one to (epsilon, delta) and composed in PLD",
    )
    assert composition.tight.epsilon < composition.basic.epsilon


def test_grouped_composition_agrees_with_dp_accountings_pld_accountant():
    """Our grouping + 1e-3 grid against dp-accounting's own accountant on DpEvents at 1e-4."""
    from dp_accounting import dp_event
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

    from dprelease.privacy.accountants import _dp_event

    mechanisms = [
        Laplace(2.0, 1.5),
        Gaussian(3.0, 1.0),
        PoissonSubsampledGaussian(1.2, 0.02, 150),
        Laplace(2.0, 1.5),
    ] * 3
    reference = PLDAccountant(value_discretization_interval=1e-4)
    reference.compose(dp_event.ComposedDpEvent([_dp_event(m) for m in mechanisms]))
    expected = reference.get_epsilon(1e-6)
    items = [PlannedSpend("m", 100.0, 0.5, description=m) for m in mechanisms]
    tight = compose_history(items, Spend(1e6, 1e-6), "pld").tight.epsilon
    assert expected - 1e-3 <= tight <= expected + 0.01 * expected


# --- the property: never above basic composition --------------------------------------------


@st.composite
def entries(draw) -> PlannedSpend:
    kind = draw(st.sampled_from(["laplace", "gaussian", "pure", "approx", "psg"]))
    epsilon = draw(st.floats(0.05, 2.0))
    sensitivity = draw(st.floats(0.5, 10.0))
    if kind == "laplace":
        return PlannedSpend(
            kind, epsilon, 0.0, description=Laplace(sensitivity / epsilon, sensitivity)
        )
    if kind == "gaussian":
        delta = draw(st.floats(1e-9, 1e-6))
        sigma = gaussian_sigma(sensitivity, epsilon, delta)  # exactly (epsilon, delta)-DP
        return PlannedSpend(kind, epsilon, delta, description=Gaussian(sigma, sensitivity))
    if kind == "pure":
        count = draw(st.integers(1, 5))
        return PlannedSpend(kind, epsilon * count, 0.0, description=PureEpsilon(epsilon, count))
    if kind == "approx":
        return PlannedSpend(kind, epsilon, draw(st.floats(0.0, 1e-6)))
    from dprelease.privacy.accountants import _rdp_epsilon

    mechanism = PoissonSubsampledGaussian(
        draw(st.floats(0.8, 3.0)), draw(st.floats(0.001, 0.1)), draw(st.integers(1, 200))
    )
    delta = draw(st.floats(1e-9, 1e-6))
    return PlannedSpend(kind, _rdp_epsilon([mechanism], delta), delta, description=mechanism)


def _terms(item: PlannedSpend) -> int:
    return item.description.count if isinstance(item.description, PureEpsilon) else 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=st.lists(entries(), min_size=1, max_size=5),
    extra=st.sampled_from([0.0, 1e-12, 1e-8, 1e-6]),
)
def test_pld_is_never_above_basic_composition(history, extra):
    """Tolerance: the PLD rounds every privacy loss up to the 1e-3 grid, so k composed
    mechanisms may exceed their exact composition, hence possibly basic, by k * 1e-3. The cap's
    delta is basic's plus `extra`, at least 1e-12 when basic's is positive: each composition
    moves up to 1e-15 of truncated tail mass to +infinity, so exactly basic's delta may leave
    the PLD no finite epsilon (the ledger then charges basic, asserted below)."""
    basic = compose_history(history, Spend(1e9, 0.5), "basic").basic
    exact = compose_history(history, Spend(1e9, basic.delta), "pld")
    assert exact.spent.epsilon <= basic.epsilon and exact.fits(Spend(basic.epsilon, basic.delta))
    if basic.delta > 0:
        extra = max(extra, 1e-12)
    cap = Spend(1e9, basic.delta + extra)
    composition = compose_history(history, cap, "pld")
    if cap.delta == 0:  # pure epsilon: the sum is exact and is what pld charges
        assert composition.tight is None and composition.spent == basic
        return
    tolerance = PLD_DISCRETISATION * sum(_terms(item) for item in history)
    assert composition.tight.epsilon <= basic.epsilon + tolerance
    assert composition.spent.epsilon <= basic.epsilon  # what the ledger charges, exactly
    assert set(composition.methods) <= {VIA_PLD, VIA_CANONICAL}


# --- counting releases and the privacy statement ---------------------------------------------


def test_releases_that_fit_under_basic_and_pld():
    cap = Spend(3.0, 1e-5)
    sigma = gaussian_sigma(1.0, 0.5, 1e-6)
    release = [PlannedSpend("gaussian", 0.5, 1e-6, description=Gaussian(sigma, 1.0))]
    assert releases_that_fit([], release, cap, "basic") == 6
    tight = releases_that_fit([], release, cap, "pld")
    assert tight > 6
    over = compose_history(release * (tight + 1), cap, "pld")
    assert not over.fits(cap) and compose_history(release * tight, cap, "pld").fits(cap)


def test_spent_under_accountant_names_the_accountant():
    sigma = gaussian_sigma(1.0, 0.5, 1e-6)
    entries_ = [PlannedSpend("gaussian", 0.5, 1e-6, description=Gaussian(sigma, 1.0))] * 8
    spent, name = spent_under_accountant(entries_, Cap(3.0, 1e-5, "pld"))
    assert name == "pld" and spent.delta == 1e-5 and spent.epsilon < 3.0
    basic = (Spend(4.0, 8e-6), "basic")
    assert spent_under_accountant(entries_, Spend(3.0, 1e-5), "basic") == basic
    assert spent_under_accountant(entries_, Cap(3.0, 1e-5, "basic")) == basic
    with pytest.raises(ValueError, match=r"Ledger.cap\(dataset\)"):
        spent_under_accountant(entries_, Cap(3.0, 1e-5))
