import numpy as np
import pytest

from dprelease.diagnostics import diagnose_weights, psis, require_reliable
from dprelease.diagnostics.gate import BOUNDED_WEIGHT_RATIO
from dprelease.errors import UnreliableWeightsError


def test_tempering_scales_the_log_weights_before_psis():
    rng = np.random.default_rng(0)
    log_weights = 2.0 * rng.standard_cauchy(2000)
    tempered = diagnose_weights(log_weights, temper=0.3)
    direct = psis(0.3 * log_weights)
    assert tempered.k_hat == direct.k_hat
    np.testing.assert_array_equal(tempered.log_weights, direct.log_weights)
    assert tempered.k_hat < diagnose_weights(log_weights).k_hat
    with pytest.raises(ValueError, match=r"temper must be in \(0, 1\]"):
        diagnose_weights(log_weights, temper=1.5)


def test_gate_refuses_heavy_tails_unless_allowed():
    rng = np.random.default_rng(1)
    heavy = diagnose_weights(np.log1p(rng.pareto(0.7, 5000)))  # true k = 1/0.7
    assert heavy.verdict == "unreliable"
    with pytest.raises(UnreliableWeightsError, match="above the threshold") as error:
        require_reliable(heavy, allow_unreliable=False)
    assert error.value.exit_code == 4
    require_reliable(heavy, allow_unreliable=True)
    light = diagnose_weights(0.3 * rng.normal(size=5000))
    assert light.verdict == "good"
    require_reliable(light, allow_unreliable=False)


def test_gate_explains_too_few_weights():
    result = diagnose_weights(np.zeros(10))
    with pytest.raises(UnreliableWeightsError, match="too few"):
        require_reliable(result, allow_unreliable=False)


def test_certified_bounded_weights_pass_where_ties_break_the_pareto_fit():
    # 200 rows at 0.5, 300 at 0.4: the tail of 425 is more than a quarter tied with the
    # cutoff, the generalized Pareto fit fails and PSIS alone says unreliable (k-hat = inf).
    log_weights = np.r_[np.zeros(19_500), np.full(200, 0.5), np.full(300, 0.4)]
    plain = diagnose_weights(log_weights)
    assert plain.verdict == "unreliable" and plain.k_hat == np.inf
    bounded = diagnose_weights(log_weights, 1.0, log_weight_max=0.5)
    ratio = np.exp(0.5) / np.mean(np.exp(log_weights))
    assert bounded.verdict == "ok" and f"{ratio:.3g} times the average row" in bounded.reason
    require_reliable(bounded, allow_unreliable=False)
    np.testing.assert_array_equal(bounded.log_weights, log_weights)  # not smoothed
    assert bounded.ess == plain.ess_raw and bounded.k_hat == plain.k_hat  # k-hat reported
    # the bound is on the untempered weights: tempering shrinks the ratio to ratio^t-ish
    assert diagnose_weights(log_weights, 0.5, log_weight_max=0.5).verdict == "ok"
    # a bound allowing rows above BOUNDED_WEIGHT_RATIO times the mean proves nothing
    loose = np.log(BOUNDED_WEIGHT_RATIO * np.mean(np.exp(log_weights))) + 0.01
    assert diagnose_weights(log_weights, 1.0, log_weight_max=loose).verdict == "unreliable"
    # reliable weights are not touched by a bound
    light = 0.3 * np.random.default_rng(2).normal(size=5000)
    with_bound, without = diagnose_weights(light, 1.0, 5.0), diagnose_weights(light)
    assert (
        (with_bound.verdict, with_bound.reason)
        == (without.verdict, without.reason)
        == (
            "good",
            None,
        )
    )
