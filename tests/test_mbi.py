"""AIM and MST generators from OpenDP: rho calibration, ledger spends, decoding, seeded
synthesis, and no artificial dependence between sibling columns (method="sample")."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.generators import GENERATORS, make_generator
from dprelease.privacy.mechanisms import ZCDP
from dprelease.privacy.zcdp import CONVERSION, zcdp_rho
from dprelease.schema import Schema

SCHEMA = Schema.model_validate(
    {
        "dataset": "toy",
        "budget": {"epsilon": 100.0, "delta": 1e-3},
        "columns": {
            "a": {"type": "categorical", "categories": ["p", "q", "r"]},
            "b": {"type": "integer", "min": 0, "max": 2},
            "c": {"type": "continuous", "min": -1, "max": 1},
        },
    }
)
ENCODER = Encoder(SCHEMA)


def _real(n: int, rng: np.random.Generator) -> np.ndarray:
    """b depends on a (b = a's index in 80 % of the rows); c is independent of both."""
    import pandas as pd

    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < 0.8, a, rng.integers(0, 3, n))
    c = np.clip(rng.normal(0.0, 0.4, n), -1, 1)
    frame = pd.DataFrame({"a": np.array(["p", "q", "r"])[a], "b": b, "c": c})
    return ENCODER.encode(frame)


def test_rho_is_opendps_conversion():
    import opendp.prelude as dp

    rho, spent = zcdp_rho(1.0, 1e-6)
    assert spent <= 1.0 and spent == pytest.approx(1.0, rel=1e-6)
    # Check against OpenDP's own profile of a rho-zCDP Gaussian.
    dp.enable_features("contrib")
    gaussian = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), (2 * rho) ** -0.5
    )
    assert gaussian.map(1.0) == pytest.approx(rho, rel=1e-12)
    profile = dp.c.make_zCDP_to_approxDP(gaussian).map(1.0)
    assert profile.epsilon(1e-6) == pytest.approx(spent, rel=1e-9)
    # Tighter than the textbook bound rho + 2 sqrt(rho log(1/delta)) = 1.
    assert rho > (np.sqrt(np.log(1e6) + 1.0) - np.sqrt(np.log(1e6))) ** 2


def test_planned_spend_records_rho_before_any_data():
    generator = make_generator("mst", ENCODER, 0.9, 9e-6)
    (spend,) = generator.planned_spends()
    rho, spent = zcdp_rho(0.9, 9e-6)
    assert spend.mechanism == "zcdp-mst"
    assert (spend.epsilon, spend.delta) == (spent, 9e-6)
    assert spend.params["rho"] == rho and spend.params["conversion"] == CONVERSION
    assert spend.description == ZCDP(rho)
    assert set(GENERATORS) >= {"aim", "mst"}
    aim = make_generator("aim", ENCODER, 0.9, 9e-6, rounds=3, degree=2)
    assert aim.planned_spends()[0].mechanism == "zcdp-aim"
    assert aim.config()["rounds"] == 3


@pytest.mark.parametrize("name", ["aim", "mst"])
def test_pure_epsilon_is_refused_with_a_reason(name):
    with pytest.raises(InputError, match="not pure epsilon-DP: give the release a delta > 0"):
        make_generator(name, ENCODER, 1.0, 0.0)


def test_mst_fit_sample_decode_and_no_artificial_dependence():
    rng = np.random.default_rng(0)
    real = _real(4000, rng)
    # Three cells (and OpenDP's null key) per column: every marginal of a kind has one shape,
    # so JAX compiles each of mirror descent's operations once.
    generator = make_generator("mst", ENCODER, 50.0, 1e-5, iters=100, bins=3)
    fitted = generator.fit(real)
    assert list(fitted.spends) == generator.planned_spends()
    # the accuracy statement's cells per column (OpenDP's keys with their null cell)
    assert all(np.prod(m.shape) == m.cells for m in fitted.measurements)
    synthetic = fitted.sample(20_000, np.random.default_rng(1))
    again = fitted.sample(20_000, np.random.default_rng(1))
    np.testing.assert_array_equal(synthetic, again)  # the seed fixes synthesis only
    assert not np.array_equal(synthetic, fitted.sample(20_000, np.random.default_rng(2)))
    table = ENCODER.decode(synthetic)
    assert set(table["a"].astype(str)) <= {"p", "q", "r"}
    assert table["b"].between(0, 2).all() and table["c"].between(-1, 1).all()
    # c is continuous: values spread inside its bins (uniform within-bin decoding)
    assert table["c"].nunique() > 1000
    # the dependence on a is kept (P(b = a) is 0.87 in the real rows, 1/3 without the edge) ...
    a = table["a"].astype(str).to_numpy()
    assert (table["b"].to_numpy() == np.searchsorted(["p", "q", "r"], a)).mean() > 0.7
    # ... and c (independent of a and b) gets no artificial monotone link to them: mbi's
    # method="round" draws columns that share a parent from one rank and links them (rank
    # correlation of b and c 0.30 here).
    codes = (a == "q").astype(float)
    for other in (table["b"], codes):
        rank_correlation, _ = spearmanr(other, table["c"])
        assert abs(rank_correlation) < 0.05, rank_correlation
