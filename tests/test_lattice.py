"""A continuous column's recorded precision (`generators.lattice`): classes counted exactly
once per row, decoding onto the measured lattice never leaving a cell, and `pgm` releasing
whole numbers where the real values are whole numbers."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import dprelease.generators.pgm.generator as pgm
from dprelease.encoding import Encoder
from dprelease.generators import make_generator
from dprelease.generators.domain import cell_index, marginal_tvd, public_cells, write_cells
from dprelease.generators.lattice import (
    CLASSES,
    NONE,
    STEPS,
    Lattice,
    candidate_steps,
    class_counts,
    kept_threshold,
)
from dprelease.schema import Schema


def _schema(nullable: bool = False) -> Schema:
    return Schema.model_validate(
        {
            "dataset": "lattice",
            "max_rows": 100_000,
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "target": "price",
            "columns": {
                "table": {"type": "continuous", "min": 40, "max": 100, "nullable": nullable},
                "depth": {"type": "continuous", "min": 40, "max": 80},
                "price": {"type": "continuous", "min": 0, "max": 20_000},
            },
        }
    )


def _table(rows: int, seed: int) -> pd.DataFrame:
    """Diamonds-like: `table` whole numbers around 57 with point masses on 58 (an edge of the
    study's 10 bins over 40-100), `depth` in tenths, `price` whole dollars tied to `table`."""
    rng = np.random.default_rng(seed)
    table = np.clip(np.rint(rng.normal(57.5, 2.2, rows)), 40, 100)
    depth = np.clip(np.round(rng.normal(61.7, 1.4, rows), 1), 40, 80)
    price = np.clip(np.rint(rng.lognormal(7.8, 1.0, rows) + 40 * (table - 57)), 0, 20_000)
    return pd.DataFrame({"table": table, "depth": depth, "price": price})


def test_each_value_counts_once_in_the_coarsest_step_it_is_a_multiple_of():
    encoder = Encoder(_schema(nullable=True))
    column = encoder.columns[0]
    assert candidate_steps(column).tolist() == [10.0**k for k in range(1, 1 - STEPS, -1)]
    frame = pd.DataFrame(
        {
            "table": [60.0, 58.0, 57.5, 57.25, 57.123456789, None],
            "depth": [60.0] * 6,
            "price": [1.0] * 6,
        }
    )
    counts = class_counts(column, encoder.encode(frame))
    # 60 -> 10, 58 -> 1, 57.5 -> 0.1, 57.25 -> 0.01, 57.123456789 -> none; missing: no class
    assert counts.tolist() == [1, 1, 1, 1, 0, 0, 0, 1, 0]
    assert counts.sum() == 5  # sensitivity 1: one class per row with a value
    prices = encoder.encode(
        pd.DataFrame({"table": [50.0] * 4, "depth": [60.0] * 4, "price": [0.0, 0.0, 12.5, 300.0]})
    )
    # zero, a multiple of every step, is its own class (last); 300 -> 100, 12.5 -> 0.1 (steps
    # 1e4 .. 0.01)
    assert class_counts(encoder.columns[2], prices).tolist() == [0, 0, 1, 0, 0, 1, 0, 0, 2]


def test_decimals_stored_in_single_precision_count_on_their_step():
    """A table kept as float32 (Stata's `float`) reads 13.17 as 13.170000076293944: off the
    0.01 step by far more than TOLERANCE steps, within a float32's rounding of it. Such values
    count on their decimal step; a double with many digits stays "none" (the step 1e-5 is
    finer than ten float32 roundings of 57)."""
    encoder = Encoder(_schema())
    column = encoder.columns[1]  # depth, 40-80: steps 10 .. 1e-5
    stored = np.array([61.7, 57.25, 62.123, 60.0], dtype=np.float32).astype(float)
    assert stored[0] != 61.7  # 61.70000076293945
    frame = pd.DataFrame(
        {"table": [60.0] * 5, "depth": [*stored, 57.123456789], "price": [1.0] * 5}
    )
    # 61.7 -> 0.1, 57.25 -> 0.01, 62.123 -> 0.001, 60 -> 10, 57.123456789 -> none
    assert class_counts(column, encoder.encode(frame)).tolist() == [1, 0, 1, 1, 1, 0, 0, 1, 0]


def _decoded_with_one_class(bins: int, klass: int, rows: int, seed: int):
    """`table` decoded from random cells with every value in class `klass`: the cells,
    the chosen cells, the encoded rows and the decoded values."""
    encoder = Encoder(_schema())
    column = encoder.columns[0]
    cells = public_cells(column, bins)
    rng = np.random.default_rng(seed)
    chosen = rng.integers(0, cells.size, rows)
    out = np.zeros((rows, encoder.width))
    shares = np.zeros(STEPS + 1)
    shares[klass] = 1.0
    write_cells(out, cells, chosen, rng, Lattice(candidate_steps(column), shares))
    return cells, chosen, out, encoder.decode(out)["table"].to_numpy()


def test_decoding_puts_every_value_on_its_class_step_inside_its_chosen_cell():
    cells, chosen, out, values = _decoded_with_one_class(64, 1, 50_000, 0)  # whole numbers
    assert (cell_index(cells, out) == chosen).all()
    whole = values == np.rint(values)
    # a cell of 0.9375 may hold no whole number: its rows fall back to "none" (uniform)
    holds = np.floor(40 + (cells.edges[1:] * 60) - 1e-9) >= np.ceil(40 + cells.edges[:-1] * 60)
    assert whole[holds[chosen]].all()
    assert not whole[~holds[chosen]].all()
    assert values.max() <= 100 and values.min() >= 40


def test_a_none_share_of_one_decodes_uniformly_as_before():
    cells, chosen, out, values = _decoded_with_one_class(16, NONE, 20_000, 1)
    assert (cell_index(cells, out) == chosen).all()
    assert np.mean(values == np.round(values, 2)) < 0.01


def test_pgm_releases_whole_numbers_where_the_real_values_are_and_fits_the_edges(
    seeded_noise, monkeypatch
):
    encoder = Encoder(_schema())
    real, held_out = encoder.encode(_table(20_000, 2)), encoder.encode(_table(20_000, 3))
    released, precision = {}, {}
    for label, lattice in (("lattice", True), ("uniform", False)):
        if not lattice:
            monkeypatch.setattr(pgm, "has_lattice", lambda column: False)
        generator = make_generator("pgm", encoder, 10.0, 1e-5)
        assert ("lattice" in generator.shares) is lattice
        fitted = generator.fit(real, seeded_noise(4))
        released[label] = fitted.sample(20_000, np.random.default_rng(5))
        precision[label] = fitted.precision
    frame = encoder.decode(released["lattice"])
    assert (frame["table"] == np.rint(frame["table"])).mean() > 0.95
    assert (frame["price"] == np.rint(frame["price"])).mean() > 0.95
    assert (frame["depth"] == np.round(frame["depth"], 1)).mean() > 0.95
    tvd = {
        label: marginal_tvd(encoder, held_out, rows, bins=10)[("table",)]
        for label, rows in released.items()
    }
    assert tvd["lattice"] < 0.03
    assert tvd["uniform"] > 3 * tvd["lattice"]
    # the manifest's measured precision: every lattice column's steps and the DP shares of
    # its values on each ("none" last); every value on a step (`table`'s 50s and 60s are
    # multiples of 10, the rest of 1)
    assert set(precision["lattice"]) == {"table", "depth", "price"}
    coarsest = {}
    for name, record in precision["lattice"].items():
        assert len(record["shares"]) == len(record["steps"]) + 1 == STEPS + 1
        assert record["shares"][-1] < 0.05 and record["zero_share"] == 0.0
        coarsest[name] = record["steps"][int(np.argmax(record["shares"]))]
    assert coarsest == {"table": 1.0, "depth": 0.1, "price": 1.0}
    assert precision["uniform"] == {}


def _precip_schema() -> Schema:
    return Schema.model_validate(
        {
            "dataset": "precip",
            "max_rows": 100_000,
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "columns": {"precip": {"type": "continuous", "min": 0, "max": 2, "nullable": True}},
        }
    )


def test_zeros_are_drawn_as_often_as_the_zero_class_says_and_never_as_a_step_multiple():
    """A zero-inflated column (NYC's hourly precipitation: 93 % zeros, the rest in
    hundredths) keeps its point mass at zero: in the cell holding 0, a value is 0 with
    probability share / p0 (p0 that cell's share of the rows with a value); the other values
    are nonzero multiples of their step. Without zeros, a cell whose only multiple of the
    step is 0 decodes uniformly instead (NYC's visibility: 0.06 and 0.12 became 0)."""
    encoder = Encoder(_precip_schema())
    column = encoder.columns[0]
    cells = public_cells(column, 64)
    rng = np.random.default_rng(7)
    # half the rows with a value in the first cell [0, 0.03125), a tenth missing
    chosen = np.concatenate(
        [np.zeros(9_000, int), rng.integers(1, 64, 9_000), np.full(2_000, cells.size - 1)]
    )
    shares = np.zeros(STEPS + 1)
    shares[candidate_steps(column).tolist().index(0.01)] = 1.0
    out = np.zeros((len(chosen), encoder.width))
    write_cells(out, cells, chosen, rng, Lattice(candidate_steps(column), shares, zero=0.3))
    values = encoder.decode(out)["precip"].to_numpy()
    first = values[:9_000]
    assert abs(np.mean(first == 0.0) - 0.3 / 0.5) < 0.02  # 9,000 of 18,000 with a value
    assert (values[9_000:18_000] != 0.0).all()  # no zero outside the cell holding it
    assert np.isnan(values[18_000:]).all()
    hundredths = first[first != 0.0]
    assert np.isin(np.round(hundredths, 9), [0.01, 0.02, 0.03]).all()
    # no zero class: the first cell's only multiple of 1 is 0, so it decodes uniformly
    shares = np.zeros(STEPS + 1)
    shares[0] = 1.0  # step 1
    out = np.zeros((9_000, encoder.width))
    write_cells(out, cells, np.zeros(9_000, int), rng, Lattice(candidate_steps(column), shares))
    values = encoder.decode(out)["precip"].to_numpy()
    assert (values > 0.0).all() and len(np.unique(values)) > 8_000


def test_pgm_keeps_a_zero_inflated_columns_zeros(seeded_noise):
    encoder = Encoder(_precip_schema())
    rng = np.random.default_rng(8)
    rows = 30_000
    precip = np.where(rng.random(rows) < 0.93, 0.0, np.round(rng.exponential(0.1, rows), 2))
    real = encoder.encode(pd.DataFrame({"precip": np.clip(precip, 0, 2)}))
    fitted = make_generator("pgm", encoder, 10.0, 1e-5).fit(real, seeded_noise(9))
    synthetic = encoder.decode(fitted.sample(30_000, np.random.default_rng(10)))["precip"]
    assert abs((synthetic == 0.0).mean() - (precip == 0.0).mean()) < 0.02  # was 0.24
    assert fitted.precision["precip"]["zero_share"] == pytest.approx(0.93, abs=0.02)


@pytest.mark.parametrize("bounds", [(0.1, 0.7), (6.981, 28.11), (-3.3, 0.3)])
def test_lattice_values_at_awkward_bounds_stay_in_zero_one_and_in_their_cells(bounds):
    low, high = bounds
    schema = Schema.model_validate(
        {
            "dataset": "bounds",
            "max_rows": 1000,
            "budget": {"epsilon": 1.0, "delta": 1e-6},
            "columns": {"x": {"type": "continuous", "min": low, "max": high}},
        }
    )
    encoder = Encoder(schema)
    column = encoder.columns[0]
    rng = np.random.default_rng(2)
    for bins in (16, 64):
        cells = public_cells(column, bins)
        chosen = np.repeat(np.arange(cells.size), 500)
        for k in range(STEPS + 1):  # every class alone, the bounds' lattice points included
            shares = np.zeros(STEPS + 1)
            shares[k] = 1.0
            for zero in (0.0, 0.5):  # and with zeros, where the bounds hold 0
                out = np.zeros((len(chosen), encoder.width))
                lattice = Lattice(candidate_steps(column), shares, zero)
                write_cells(out, cells, chosen, rng, lattice)
                assert out.min() >= 0.0 and out.max() <= 1.0
                assert (cell_index(cells, out) == chosen).all()


def test_classes_within_the_noise_are_dropped_and_all_noise_decodes_uniformly():
    column = Encoder(_schema()).columns[0]
    kept = Lattice.of(column, np.array([-50, 5000, 150, 250, 0, 0, 0, 190.0, 750]), 200.0)
    assert kept.shares.tolist() == pytest.approx([0, 5000 / 5250, 0, 250 / 5250, 0, 0, 0, 0])
    assert kept.zero == pytest.approx(750 / 6290)  # of all the classes' counts
    # zeros are kept at twice the threshold (`ZERO_MARGIN`): 390 < 400
    noise_only = Lattice.of(column, np.array([120, -80, 60, 150, 30, 199, -10, 40.0, 390]), 200.0)
    assert noise_only.shares.tolist() == [0, 0, 0, 0, 0, 0, 0, 1] and noise_only.zero == 0.0


@pytest.mark.parametrize("gaussian", [True, False])
def test_the_threshold_keeps_about_one_noise_class_in_twenty_releases(gaussian):
    columns, std = 30, 100.0
    threshold = kept_threshold(std, columns, 1e6, gaussian=gaussian)
    # seeded test noise: pure-noise classes of 20,000 releases, about 1,000 of them above the
    # threshold (0.05 / 270 per class: Bonferroni's bound holds with equality), SD about 3 %
    rng = np.random.default_rng(0)
    draws = 20_000 * columns * CLASSES
    noise = rng.normal(0, std, draws) if gaussian else rng.laplace(0, std / np.sqrt(2), draws)
    rate = np.mean(noise >= threshold) * columns * CLASSES
    assert 0.045 < rate < 0.055
    # where not even half the rows could be told from the noise, nothing is kept
    assert kept_threshold(std, columns, 2 * threshold * 0.99, gaussian=gaussian) == math.inf
    assert kept_threshold(std, columns, 2 * threshold * 1.01, gaussian=gaussian) == threshold


@pytest.mark.parametrize("with_continuous", [True, False])
def test_the_one_way_pooling_keeps_the_one_way_noise_with_or_without_a_lattice(
    seeded_noise, monkeypatch, with_continuous
):
    """The pooled one-way shares weigh round 1 by its own noise variance: a release without
    continuous columns once pooled with variance 0 (NaN shares, RuntimeWarnings), one with
    them with the lattice round's."""
    encoder = Encoder(_schema())
    if not with_continuous:
        monkeypatch.setattr(pgm, "has_lattice", lambda column: False)
    generator = make_generator("pgm", encoder, 1.0, 1e-5)
    seen = []
    pooled = pgm.pooled_one_way
    monkeypatch.setattr(
        pgm,
        "pooled_one_way",
        lambda *a: seen.append(a[1]) or pooled(*a),  # noqa: B023
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = generator.fit(encoder.encode(_table(3_000, 6)), seeded_noise(7))
    assert seen == [generator.noise_std["one-way"] ** 2]
    assert all(np.isfinite(shares).all() for shares in fitted.state.one_way)
