"""PrivBayes: noise on every cell of every table, sensitivities, structure, utility, refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from generator_checks import sampling_is_reproducible

from dprelease.datasets import census_like
from dprelease.encoding import Encoder, column_dtypes
from dprelease.errors import InputError
from dprelease.generators import make_generator
from dprelease.generators.domain import cell_index, marginal_tvd
from dprelease.generators.privbayes import SCORE_SENSITIVITY, PrivBayes
from dprelease.privacy.accounting import compose
from dprelease.schema import Schema, load_schema

SCHEMA = load_schema(Path(__file__).parent.parent / "data" / "census.yaml")
ENCODER = Encoder(SCHEMA)
XOR_COLUMNS = ("x1", "x2", "y", "z1", "z2")


def encoded_census(n: int, seed: int) -> np.ndarray:
    return ENCODER.encode(census_like(n, seed).astype(column_dtypes(SCHEMA)))


@pytest.fixture
def recording_noise(seeded_noise):
    """Factory of seeded noise sources that record the scale and shape of every request."""

    class RecordingNoise(seeded_noise):
        def __init__(self, seed: int) -> None:
            super().__init__(seed)
            self.requests: list[tuple[float, tuple[int, ...]]] = []
            self.selections: list[tuple[float, float]] = []

        def add_laplace(self, values, scale, *, counts=False):  # noqa: ANN001, ANN201
            assert counts  # the tables are counts: integer noise in secure mode
            self.requests.append((scale, np.shape(values)))
            return super().add_laplace(values, scale, counts=counts)

        def noisy_max(self, scores, epsilon, sensitivity):  # noqa: ANN001, ANN201
            self.selections.append((epsilon, sensitivity))
            return super().noisy_max(scores, epsilon, sensitivity)

    return RecordingNoise


def xor_table(n: int, seed: int) -> tuple[Encoder, np.ndarray]:
    """y = x1 xor x2, flipped with probability 0.05; z1, z2 independent noise columns."""
    schema = Schema.model_validate(
        {
            "dataset": "xor",
            "budget": {"epsilon": 100.0, "delta": 0.0},
            "columns": {
                name: {"type": "categorical", "categories": ["0", "1"]} for name in XOR_COLUMNS
            },
        }
    )
    rng = np.random.default_rng(seed)
    x1, x2, z1, z2 = (rng.integers(0, 2, n) for _ in range(4))
    y = (x1 ^ x2) ^ (rng.random(n) < 0.05)
    frame = pd.DataFrame({"x1": x1, "x2": x2, "y": y, "z1": z1, "z2": z2}).astype(str)
    encoder = Encoder(schema)
    return encoder, encoder.encode(frame.astype(column_dtypes(schema)))


@pytest.mark.parametrize("degree", [1, 2])
def test_every_cell_of_every_table_gets_noise_at_the_planned_scale(recording_noise, degree):
    generator = PrivBayes(ENCODER, epsilon=1.0, degree=degree)
    noise = recording_noise(0)
    network = generator.fit(encoded_census(3, seed=0), noise).state  # almost all cells empty
    sizes = generator.config()["cells_per_column"]
    names = list(sizes)
    # Structure first: one selection per node after the first; then the tables.
    tables = noise.requests
    expected = [tuple(sizes[names[a]] for a in table.attrs) for table in network.tables]
    assert [shape for _, shape in tables] == expected
    assert {scale for scale, _ in tables} == {generator.table_scale}
    # The tables are the joint of the first k + 1 nodes, then each later child with parents.
    order = [names.index(child) for child, _ in generator.named(network)]
    assert network.tables[0].attrs == tuple(order[: degree + 1])
    later = generator.named(network)[degree + 1 :]
    for table, (child, parents) in zip(network.tables[1:], later, strict=True):
        assert [names[a] for a in table.attrs] == [child, *parents]
    assert len(noise.requests) == generator.n_tables
    d = len(generator.cells)
    assert noise.selections == [(generator.structure_epsilon / (d - 1), SCORE_SENSITIVITY)] * (
        d - 1
    )


def test_calibration_is_public_and_pure():
    generator = PrivBayes(ENCODER, epsilon=2.0, degree=2, structure_fraction=0.3)
    structure, tables = generator.planned_spends()
    d = len(SCHEMA.columns)
    assert structure.mechanism == "exponential-mechanism"
    assert structure.epsilon == pytest.approx(0.6) and structure.delta == 0.0
    assert structure.params["sensitivity"] == SCORE_SENSITIVITY == 2.0
    assert structure.params["epsilon_per_selection"] == pytest.approx(0.6 / (d - 1))
    # d - k tables, each row adds one to one cell of each: L1 sensitivity d - k.
    assert tables.params["l1_sensitivity"] == d - 2
    assert tables.params["laplace_scale"] == pytest.approx((d - 2) / 1.4)
    assert compose([structure, tables]).epsilon == pytest.approx(2.0)
    assert tables.delta == 0.0


def test_score_and_table_sensitivities_hold_for_neighbours(seeded_noise):
    """Add/remove one row: every score moves by <= 2, all tables' counts by exactly d - k."""
    generator = PrivBayes(ENCODER, epsilon=1.0)
    real = encoded_census(300, seed=3)
    network = generator.fit(real, seeded_noise(1)).state
    rng = np.random.default_rng(4)
    cells = np.stack([cell_index(c, real) for c in generator.cells], axis=1)
    for _ in range(10):
        neighbour = np.delete(cells, rng.integers(len(cells)), axis=0)
        for child, parents in [(0, (1, 2)), (5, (7,)), (6, (4, 3))]:
            change = generator._score(child, parents, cells) - generator._score(
                child, parents, neighbour
            )
            assert abs(change) <= SCORE_SENSITIVITY
        l1 = sum(
            np.abs(generator._counts(t.attrs, cells) - generator._counts(t.attrs, neighbour)).sum()
            for t in network.tables
        )
        assert l1 == generator.n_tables


def test_recovers_the_xor_dependency_at_large_epsilon(seeded_noise):
    encoder, real = xor_table(4000, seed=1)
    for seed in range(3):
        generator = PrivBayes(encoder, epsilon=50.0, degree=2)
        fitted = generator.fit(real, seeded_noise(seed))
        network = generator.named(fitted.state)
        families = [{child, *parents} for child, parents in network]
        assert {"x1", "x2", "y"} in families, network
    table = encoder.decode(fitted.sample(4000, np.random.default_rng(0)))
    xor = (table["x1"].astype(int) ^ table["x2"].astype(int)) == table["y"].astype(int)
    assert xor.mean() > 0.9


def test_census_utility_at_epsilon_10(seeded_noise):
    """Max 1-way TVD (16 public bins), n = 5,000: 0.017 - 0.032 over 20 noise draws; bound 0.08."""
    real = encoded_census(5000, seed=7)
    generator = make_generator("privbayes", ENCODER, 10.0, 0.0)
    synthetic = generator.fit(real, seeded_noise(3)).sample(5000, np.random.default_rng(1))
    assert max(marginal_tvd(ENCODER, real, synthetic).values()) < 0.08


def test_sampling_is_reproducible_and_valid(seeded_noise):
    fitted = PrivBayes(ENCODER, epsilon=1.0).fit(encoded_census(500, seed=2), seeded_noise(0))
    table = sampling_is_reproducible(fitted, 700, batch_rows=256)
    assert set(table["region"].dropna()) <= set(SCHEMA.columns["region"].categories)


def test_small_schema_learns_no_structure_and_spends_all_on_the_joint(recording_noise):
    encoder, real = xor_table(200, seed=0)
    generator = PrivBayes(encoder, epsilon=1.0, degree=4)
    (only,) = generator.planned_spends()
    assert only.mechanism == "laplace-histograms" and only.epsilon == 1.0
    noise = recording_noise(0)
    generator.fit(real, noise)
    assert noise.requests == [(1.0, (2, 2, 2, 2, 2))]


def test_refuses_a_table_above_the_cell_limit_before_seeing_data():
    with pytest.raises(InputError, match=r"privbayes: .* more than max_cells=1,000"):
        make_generator("privbayes", ENCODER, 1.0, 0.0, degree=2, max_cells=1000)
    with pytest.raises(InputError, match="structure_fraction must be in"):
        make_generator("privbayes", ENCODER, 1.0, 0.0, structure_fraction=1.0)
