import numpy as np
import pytest

from dprelease.diagnostics import diagnose_weights, psis, require_reliable
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
