"""The accuracy statement of a synthetic release: expected error of a noisy marginal, the
grade, the verdict (dprelease.diagnostics.accuracy)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from release_fixtures import ROOT

from dprelease.diagnostics.accuracy import (
    CAUTION,
    NOT_USABLE,
    USABLE,
    coarse_relations,
    expected_tvd,
    grade,
    verdict,
)
from dprelease.diagnostics.column_cells import (
    cell_crowding,
    crowded,
    moved_means,
    noisy_tails,
    weak_cells,
)
from dprelease.encoding import Encoder
from dprelease.generators.base import Measurement
from dprelease.schema import Schema


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_expected_tvd_matches_simulated_noise(kind):
    """The formula k E|Z| / (2 N) against the TVD of simulated noisy counts (no clipping:
    every cell holds many rows). Seeded: deterministic."""
    rng = np.random.default_rng(0)
    counts = np.full(20, 500.0)  # N = 10,000 rows in 20 cells
    std = 30.0
    if kind == "laplace":
        noisy = counts + rng.laplace(0.0, std / math.sqrt(2.0), (4000, 20))
    else:
        noisy = counts + rng.normal(0.0, std, (4000, 20))
    simulated = 0.5 * np.abs(noisy / noisy.sum(axis=1, keepdims=True) - counts / 1e4).sum(axis=1)
    stated = expected_tvd(Measurement(("a",), 20, kind, std, 10_000.0))
    assert stated == pytest.approx(simulated.mean(), rel=0.05)


def test_expected_tvd_is_capped_and_a_non_positive_total_means_noise_only():
    assert expected_tvd(Measurement(("a",), 32, "laplace", 55.0, 569.0)) == 1.0
    assert expected_tvd(Measurement(("a",), 2, "gaussian", 1.0, -3.0)) == 1.0


def one_way(tvd_std: float, total: float = 10_000.0) -> Measurement:
    return Measurement(("a",), 10, "gaussian", tvd_std, total)


def test_grade_from_the_medians():
    def std_for(tvd: float) -> float:  # the Gaussian std giving this expected TVD (10 cells)
        return tvd * 2 * 10_000.0 / (10 * math.sqrt(2 / math.pi))

    assert grade([one_way(std_for(0.01)), one_way(std_for(0.04))])["grade"] == "good"
    assert grade([one_way(std_for(0.10))])["grade"] == "fair"
    assert grade([one_way(std_for(0.40))])["grade"] == "poor"
    pair = Measurement(("a", "b"), 10, "gaussian", std_for(0.5), 10_000.0)
    assert grade([one_way(std_for(0.01)), pair])["grade"] == "poor"  # multi-way median 0.5
    assert grade([])["grade"] == "not stated"


def test_the_demo_release_is_graded_poor():
    """The bundled demo: 31 columns at epsilon 0.8 with the marginals generator (Laplace scale
    31 / 0.8 on 32 cells per column) on a table of 569 rows: the noise dominates."""
    std = 31 / 0.8 * math.sqrt(2)
    columns = [Measurement((f"c{i}",), 32, "laplace", std, 569.0) for i in range(31)]
    assert grade(columns)["grade"] == "poor"


def _encoder(columns: dict) -> Encoder:
    """The encoder of a schema with these columns (the checks here read no other key)."""
    return Encoder(
        Schema.model_validate(
            {
                "dataset": "t",
                "max_rows": 10_000,
                "budget": {"epsilon": 1.0, "delta": 1e-6},
                "columns": columns,
            }
        )
    )


ROWS = {
    "n_synthetic": 20_000,
    "distinct": 20_000,
    "collapsed": False,
    "missing_categories": {},
    "cell_crowding": {},
}


def test_verdict_is_usable_only_when_everything_holds():
    good = grade([one_way(1.0)])
    assert verdict(good, ROWS, "good", 1.1) == {"verdict": USABLE, "reasons": []}
    assert verdict(good, ROWS, "unreliable", None)["verdict"] == CAUTION
    # weights 870 times the noise level from their target (a census-sized deployment)
    far = verdict(good, ROWS, "good", 870.0)
    assert far["verdict"] == CAUTION and "870 times the noise level" in far["reasons"][0]
    collapsed = {**ROWS, "distinct": 849, "collapsed": True}
    assert verdict(good, collapsed, "good", None)["verdict"] == NOT_USABLE
    noisy = grade([one_way(1e5)])
    judged = verdict(noisy, ROWS, "good", None)
    assert judged["verdict"] == NOT_USABLE and "noise dominates" in judged["reasons"][0]
    assert verdict(grade([]), ROWS, "good", None)["verdict"] == CAUTION


def _measured(shape: tuple[int, ...]) -> list[Measurement]:
    """One-way a and b (16 cells), c (binary), and an (a, b, c) table of `shape`."""
    own = [
        Measurement((name,), size, "gaussian", 1.0, 10_000.0)
        for name, size in (("a", 16), ("b", 16), ("c", 2))
    ]
    table = Measurement(("a", "b", "c"), math.prod(shape), "gaussian", 1.0, 10_000.0, shape)
    return [*own, table]


def test_relations_are_coarse_when_most_columns_enter_them_in_two_cells():
    """A column with more than two cells of its own that every multi-way marginal holds in
    two cells; coarse when they are at least half of such columns (a binary column in two
    cells is exact and does not count)."""
    coarse = coarse_relations(_measured((2, 2, 2)))
    assert coarse == {
        "columns_in_two_cells": ["a", "b"],
        "related_columns": 2,
        "coarse": True,
        "cells_with_target": [],
    }
    assert coarse_relations(_measured((4, 2, 2)))["coarse"]  # half of them
    assert not coarse_relations(_measured((4, 4, 2)))["coarse"]
    unstated = _measured((2, 2, 2))[:3] + [Measurement(("a", "b"), 4, "gaussian", 1.0, 1e4)]
    assert not coarse_relations(unstated)["coarse"]  # no shape: nothing to judge
    judged = verdict(grade(_measured((2, 2, 2))), ROWS, "good", None)
    assert judged["verdict"] == CAUTION
    assert "relations between columns are coarse: 2 of the 2" in judged["reasons"][0]
    assert verdict(grade(_measured((4, 4, 2))), ROWS, "good", None)["verdict"] == USABLE


@pytest.mark.parametrize("rows, coarse", [(400, True), (30_000, False)])
def test_pgm_states_coarse_relations_on_few_rows_only(rows, coarse, seeded_noise):
    """`pgm` measures every relation in 2 x 2 cells on a few hundred rows at epsilon 1 and
    finer on 30,000 rows: the accuracy statement says so from its measurements' shapes."""
    from dprelease.datasets import census_like
    from dprelease.generators import make_generator
    from dprelease.schema import load_schema

    encoder = Encoder(load_schema(f"{ROOT}/data/census.yaml"))
    generator = make_generator("pgm", encoder, 1.0, 1e-6)
    fitted = generator.fit(encoder.encode(census_like(rows, seed=3)), seeded_noise(2))
    assert all(math.prod(m.shape) == m.cells for m in fitted.measurements)
    relations = grade(fitted.measurements)["relations"]
    assert relations["coarse"] is coarse
    assert relations["related_columns"] >= 4


def test_crowded_columns_are_numeric_columns_with_their_rows_in_a_few_wide_cells():
    """Delays bounded by -120 and 1,440 minutes but mostly within an hour of 0: 90 % of the
    rows in at most 8 of 64 cells (24.4 minutes each); a spread column, a column with one
    cell per value and a categorical one are not crowded; missing values do not count."""
    encoder = _encoder(
        {
            "delay": {"type": "integer", "min": -120, "max": 1440, "nullable": True},
            "spread": {"type": "continuous", "min": 0, "max": 100},
            "few": {"type": "integer", "min": 0, "max": 5},
            "kind": {"type": "categorical", "categories": ["a", "b"]},
            "visits": {"type": "integer", "min": 0, "max": 200},
        }
    )
    rng = np.random.default_rng(0)
    n = 5_000
    delay = np.clip(np.round(rng.normal(5, 20, n)), -120, 1440)
    frame = pd.DataFrame(
        {
            "delay": pd.array(np.where(rng.random(n) < 0.3, None, delay), dtype="Int64"),
            "spread": rng.uniform(0, 100, n),
            "few": rng.integers(0, 6, n),
            "kind": rng.choice(["a", "b"], n),
            "visits": rng.geometric(0.5, n) - 1,
        }
    )
    encoded = encoder.encode(frame)
    one_way = [
        Measurement(("delay",), 67, "gaussian", 1.0, n),
        Measurement(("spread",), 64, "gaussian", 1.0, n),
        Measurement(("few",), 6, "gaussian", 1.0, n),
        Measurement(("kind",), 2, "gaussian", 1.0, n),
    ]
    crowding = cell_crowding(encoder, encoded, one_way)
    assert list(crowding) == ["delay", "spread"]  # numeric columns with wide cells only
    assert all(set(r) == set(crowding["delay"]) for r in crowding.values())  # the same keys
    assert crowded({"cell_crowding": crowding}) == ["delay"]
    delay = crowding["delay"]
    assert delay["cells"] == 66 and 2 <= delay["cells_holding_90_percent"] <= 8  # 64 + bounds
    assert delay["widest_of_them"] == pytest.approx(1560 / 64)
    assert delay["lowest_cell_among_them"] is False  # around 5 minutes, not -120
    assert crowding["spread"]["cells_holding_90_percent"] >= 50  # 90 % of 64 cells
    visits = cell_crowding(encoder, encoded, [Measurement(("visits",), 18, "gaussian", 1.0, n)])
    assert visits["visits"]["cells_holding_90_percent"] == 2  # {0} (half the rows), then 1-12
    assert visits["visits"]["lowest_cell_among_them"] and visits["visits"]["crowded"]
    # the same rows on 16 cells of 97.5 minutes: 90 % in one, still crowded (1 <= 2)
    coarse = cell_crowding(encoder, encoded, [Measurement(("delay",), 19, "gaussian", 1.0, n)])
    assert coarse["delay"]["cells_holding_90_percent"] == 1 and coarse["delay"]["crowded"]
    # cells the schema cannot rebuild from their number (0-5 has 6 values) are left out
    assert cell_crowding(encoder, encoded, [Measurement(("few",), 40, "gaussian", 1.0, n)]) == {}
    # a column with no value in the synthetic rows: the same keys, not crowded
    empty = encoded.copy()
    empty[:, encoder.columns[0].missing_index] = 1.0
    none = cell_crowding(encoder, empty, one_way[:1])["delay"]
    assert set(none) == set(delay) and none["cells_holding_90_percent"] == 0
    assert not none["crowded"]
    judged = verdict(grade(one_way), {**ROWS, "cell_crowding": crowding}, "good", None)
    assert judged["verdict"] == CAUTION
    assert judged["reasons"] == [
        "`delay`: 90 % of the synthetic rows lie in at most an eighth of the column's cells, "
        "inside which values are drawn apart from the other columns, so relations finer than "
        "a cell are lost; bounds closer to where the rows are give finer cells there"
    ]


def test_weak_cells_name_a_mean_that_rests_on_cells_the_noise_can_fill():
    """A count with a few synthetic rows far out, in a cell whose count under the synthetic
    shares is below 2 noise SDs: its mean with and without them, and the verdict names it;
    the same rows under little noise, or a column without such rows, are not named."""
    encoder = _encoder(
        {
            "visits": {"type": "integer", "min": 0, "max": 200, "nullable": True},
            "spread": {"type": "continuous", "min": 0, "max": 100},
        }
    )
    n = 10_000  # 95 % zeros, 4.5 % in 1-12 (one cell), 0.5 % at 150 (another)
    visits = np.repeat([0, 6, 150], [9_500, 450, 50])
    spread = np.linspace(0.0, 100.0, n)
    encoded = encoder.encode(
        pd.DataFrame({"visits": pd.array(visits, dtype="Int64"), "spread": spread})
    )
    total = 5_000.0  # the 150s' cell holds 25 rows under the synthetic shares

    def check(std: float) -> dict:
        measurements = [
            Measurement(("visits",), 19, "gaussian", std, total),
            Measurement(("spread",), 16, "gaussian", std, total),
        ]
        return weak_cells(encoder, encoded, measurements)

    noisy = check(20.0)  # 2 SDs = 40 > 25: weak
    assert list(noisy) == ["visits", "spread"]
    assert all(set(record) == set(noisy["visits"]) for record in noisy.values())
    record = noisy["visits"]
    assert record["weak_cells"] == 16  # the 150s' cell and the 15 empty ones
    assert record["rows_in_weak_cells"] == pytest.approx(0.005)
    assert record["mean"] == pytest.approx(visits.mean(), rel=1e-6)
    assert record["mean_without_weak_cells"] == pytest.approx(visits[:9_950].mean(), rel=1e-6)
    assert record["weak_cells_move_mean"]
    assert not noisy["spread"]["weak_cells_move_mean"]  # 625 rows a cell: none weak
    assert noisy["spread"]["weak_cells"] == 0
    assert moved_means({"weak_cells": noisy}) == ["visits"]
    quiet = check(1.0)["visits"]  # 25 rows > 2 SDs: the far cell is resolved
    assert quiet["mean_without_weak_cells"] == pytest.approx(quiet["mean"])
    assert not quiet["weak_cells_move_mean"]
    drowned = check(10_000.0)  # every cell weak: nothing to compare with, named
    assert drowned["visits"]["mean_without_weak_cells"] is None
    assert drowned["visits"]["weak_cells_move_mean"]
    empty = encoded.copy()  # no value in the synthetic rows: the same keys, nothing named
    empty[:, encoder.columns[0].missing_index] = 1.0
    none = weak_cells(encoder, empty, [Measurement(("visits",), 19, "gaussian", 20.0, total)])
    assert set(none["visits"]) == set(record) and none["visits"]["mean"] is None
    assert not none["visits"]["weak_cells_move_mean"]
    judged = verdict(grade([one_way(1.0)]), {**ROWS, "weak_cells": noisy}, "good", None)
    assert judged["verdict"] == CAUTION
    assert judged["reasons"] == [
        "`visits`: synthetic rows in cells whose DP counts are within 2 noise standard "
        "deviations of zero or, apart from the column's body, within what the noise alone "
        "reaches in any of its cells, cells the noise alone can fill, move the column's mean "
        "by more than a quarter of a standard deviation of its other rows: its mean and its "
        "far values are not reliable"
    ]


def test_a_far_tail_on_weak_cells_is_named_where_the_mean_check_is_silent():
    """SLID's wages (module docstring of `column_cells`): a tail of synthetic rows far above
    the rest, in cells whose counts are under 2 noise SDs, too thin to move the mean by a
    quarter SD. With 1.5 % of the rows there the 99th percentile lies in them: named, with
    the strong cells' span and the share beyond; with 0.5 % it does not: not named."""
    encoder = _encoder({"wages": {"type": "continuous", "min": 0, "max": 100}})

    def record(tail_rows: int, std: float = 20.0) -> dict:
        body = np.linspace(0.5, 49.5, 10_000 - tail_rows)  # 8 cells of 6.25, ~1,230 rows each
        tail = np.linspace(81.0, 99.0, tail_rows)  # 3 cells far above
        encoded = encoder.encode(pd.DataFrame({"wages": np.concatenate([body, tail])}))
        measurement = Measurement(("wages",), 16, "gaussian", std, 5_000.0)
        return weak_cells(encoder, encoded, [measurement])

    thick = record(150)  # 25 rows a tail cell under the noisy total: below 2 SDs (40)
    wages = thick["wages"]
    assert not wages["weak_cells_move_mean"]  # 0.07 SD
    assert (wages["strong_cells_low"], wages["strong_cells_high"]) == (0.0, 50.0)  # 8 of 6.25
    assert wages["rows_above_strong_cells"] == pytest.approx(0.015)
    assert wages["rows_below_strong_cells"] == 0.0
    assert wages["upper_tail_on_noise"] and not wages["lower_tail_on_noise"]
    assert wages["cells_beyond_strong_cells"] == 8  # 50-100: bounds nearer the rows would help
    assert not wages["one_value_per_cell"]
    assert noisy_tails({"weak_cells": thick}) == ["wages"]
    judged = verdict(grade([one_way(1.0)]), {**ROWS, "weak_cells": thick}, "good", None)
    assert judged["verdict"] == CAUTION
    assert judged["reasons"] == [
        "`wages`: 1% or more of the synthetic rows lie beyond the cells whose DP counts are 2 "
        "noise standard deviations above zero and, apart from the column's body, above what "
        "the noise alone reaches in any of its cells, in cells the noise alone can fill: the "
        "column's 1st or 99th percentile and its far values are not reliable"
    ]
    thin = record(50)["wages"]  # 0.5 %: the 99th percentile is in the strong cells
    assert thin["rows_above_strong_cells"] == pytest.approx(0.005)
    assert not thin["upper_tail_on_noise"]
    assert not record(150, std=1.0)["wages"]["upper_tail_on_noise"]  # resolved by the noise
    counts = _encoder({"visits": {"type": "integer", "min": 0, "max": 63}})

    def integer_record(visits: np.ndarray, std: float, total: float) -> dict:
        encoded = counts.encode(pd.DataFrame({"visits": visits}))
        return weak_cells(counts, encoded, [Measurement(("visits",), 16, "gaussian", std, total)])[
            "visits"
        ]

    visits = np.concatenate([np.repeat(np.arange(20), 490), np.full(150, 60)])  # 1.5 % at 60
    span = integer_record(visits, 50.0, 5_000.0)
    assert (span["strong_cells_low"], span["strong_cells_high"]) == (0.0, 22.0)  # 0, 1-4 .. 18-22
    assert span["upper_tail_on_noise"]
    spread = np.concatenate([np.repeat(np.arange(64), 150), [63] * 400])  # every cell strong
    assert integer_record(spread, 1.0, 10_000.0)["strong_cells_high"] == 63.0  # max's cell
    assert integer_record(spread, 1.0, 10_000.0)["cells_beyond_strong_cells"] == 0
    flags = _encoder({"flag": {"type": "integer", "min": 0, "max": 1}})  # a cell per value
    rare = flags.encode(pd.DataFrame({"flag": np.repeat([0, 1], [9_700, 300])}))
    flag = weak_cells(flags, rare, [Measurement(("flag",), 2, "gaussian", 200.0, 10_000.0)])
    assert flag["flag"]["cells_beyond_strong_cells"] == 1  # its 1s: weak, but not a bound's fault
    assert flag["flag"]["one_value_per_cell"]
    drowned = record(150, std=10_000.0)  # every cell weak: the mean check names it instead
    assert drowned["wages"]["strong_cells_high"] is None
    assert set(drowned["wages"]) == set(wages)  # the same keys whatever the DP outcome
    assert noisy_tails({"weak_cells": drowned}) == []
    assert moved_means({"weak_cells": drowned}) == ["wages"]


def test_a_noise_lifted_cell_apart_from_the_body_leaves_the_tail_named():
    """SLID's wages at epsilon 1: a thin tail above the body in cells under 2 noise SDs, and
    one cell near the bound that the noise lifted to 2.5 SDs. That cell, alone apart from the
    body, is below the multiple-comparison bound over the column's 16 cells (3.23 SDs), so it
    is weak: the strong cells end at the body, 2.5 % of the rows lie above them, and the
    verdict names the tail. A far cell at 4 SDs, or two neighbouring cells at 2.5 SDs each,
    stand above what the noise alone reaches: strong."""
    encoder = _encoder({"wages": {"type": "continuous", "min": 0, "max": 100}})
    std, total = 20.0, 5_000.0  # 10,000 synthetic rows: a cell's DP count is half its rows

    def record(far: dict[float, int]) -> dict:
        values = [
            np.linspace(0.5, 49.5, 10_000 - 150 - sum(far.values())),
            np.linspace(51.0, 86.0, 150),
        ]  # 25 rows a cell in 50-87.5: 0.6 SDs
        values += [np.full(rows, at) for at, rows in far.items()]
        encoded = encoder.encode(pd.DataFrame({"wages": np.concatenate(values)}))
        measurement = Measurement(("wages",), 16, "gaussian", std, total)
        return weak_cells(encoder, encoded, [measurement])

    lifted = record({97.0: 100})  # 50 in the cell's DP count: 2.5 SDs
    wages = lifted["wages"]
    assert wages["strong_cells_high"] == 50.0
    assert wages["rows_above_strong_cells"] == pytest.approx(0.025)
    assert wages["upper_tail_on_noise"] and not wages["weak_cells_move_mean"]
    assert noisy_tails({"weak_cells": lifted}) == ["wages"]
    judged = verdict(grade([one_way(1.0)]), {**ROWS, "weak_cells": lifted}, "good", None)
    assert judged["verdict"] == CAUTION and judged["reasons"][0].startswith("`wages`: 1%")
    assert record({97.0: 160})["wages"]["strong_cells_high"] == 100.0  # 4 SDs: strong
    pair = record({90.0: 100, 95.0: 100})["wages"]  # 2.5 SDs each, neighbours: 5 SDs together
    assert pair["strong_cells_high"] == 100.0 and not pair["upper_tail_on_noise"]


def test_a_nullable_columns_cells_count_every_synthetic_row():
    """A cell's DP count is its share of all the synthetic rows times the noisy total, which
    counts the rows without a value too: with half the rows missing, the two cells above the
    body hold 60 of the 10,000 rows, 1.5 noise SDs each (3 SDs each on the shares of the rows
    with a value), so they are weak and the 1.2 % of the values in them are a tail on noise."""
    encoder = _encoder({"wages": {"type": "continuous", "min": 0, "max": 100, "nullable": True}})
    values = np.concatenate(
        [
            np.linspace(0.5, 49.5, 4_940),
            np.full(30, 51.0),
            np.full(30, 57.0),
            np.full(5_000, np.nan),
        ]
    )
    encoded = encoder.encode(pd.DataFrame({"wages": values}))
    measurement = Measurement(("wages",), 17, "gaussian", 20.0, 10_000.0)  # 16 + "missing"
    wages = weak_cells(encoder, encoded, [measurement])["wages"]
    assert wages["strong_cells_high"] == 50.0
    assert wages["rows_above_strong_cells"] == pytest.approx(0.012)
    assert wages["upper_tail_on_noise"]
