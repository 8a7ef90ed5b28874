"""DP independent marginals: calibration, noise on every public cell, and utility."""

from pathlib import Path

import numpy as np
import pytest
from generator_checks import sampling_is_reproducible

from dprelease.datasets import census_like
from dprelease.encoding import Encoder, column_dtypes
from dprelease.errors import InputError
from dprelease.generators import make_generator
from dprelease.generators.domain import (
    cell_index,
    cells_of_size,
    public_cells,
    refinement,
    write_cells,
)
from dprelease.generators.marginals import IndependentMarginals
from dprelease.privacy.noise import NoiseSource
from dprelease.schema import Schema, load_schema

SCHEMA = load_schema(Path(__file__).parent.parent / "data" / "census.yaml")
ENCODER = Encoder(SCHEMA)


def encoded_census(n: int, seed: int) -> np.ndarray:
    return ENCODER.encode(census_like(n, seed).astype(column_dtypes(SCHEMA)))


class RecordingNoise(NoiseSource):
    """Returns zero noise and records every request (to test which cells get noise)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, float, tuple[int, ...], bool]] = []

    def add_laplace(self, values, scale, *, counts=False):  # noqa: ANN001, ANN201
        self.requests.append(("laplace", scale, np.shape(values), counts))
        return np.asarray(values, dtype=float)


def test_calibration_is_columns_over_epsilon():
    generator = IndependentMarginals(ENCODER, epsilon=2.0)
    (planned,) = generator.planned_spends()
    assert planned.epsilon == 2.0 and planned.delta == 0.0
    assert planned.params["l1_sensitivity"] == len(SCHEMA.columns) == 8
    assert planned.params["laplace_scale"] == 8 / 2.0


def test_public_cells_come_from_the_schema():
    generator = IndependentMarginals(ENCODER, epsilon=1.0, bins=32)
    cells = generator.config()["cells_per_column"]
    # age has 74 integer values > 32 bins: 32 bins + its bounds' own cells; education 21
    # values -> one cell each; capital_gain is nullable: 32 bins + missing; categoricals:
    # their categories.
    assert cells == {
        "age": 34,
        "education": 21,
        "hours": 34,
        "sex": 2,
        "region": 4,
        "wage": 32,
        "capital_gain": 33,
        "high_earner": 2,
    }


def test_an_integer_columns_bounds_get_cells_of_their_own():
    """An integer column with more values than bins: each bound's integer alone in a cell
    (decoding a bound cell gives the bound only, its neighbour never does), the same split at
    every number of bins so the cells nest, the measurement's size rebuilds them, and the
    evaluation metric's equal-width cells and small domains are unchanged."""

    def column(spec):  # noqa: ANN001, ANN202
        schema = Schema.model_validate(
            {
                "dataset": "t",
                "max_rows": 1000,
                "budget": {"epsilon": 1.0, "delta": 1e-6},
                "columns": {"x": spec},
            }
        )
        return Encoder(schema), Encoder(schema).columns[0]

    encoder, visits = column({"type": "integer", "min": 0, "max": 200, "nullable": True})
    cells = public_cells(visits, 16)
    assert cells.size == 16 + 2 + 1  # bins, the two bounds, missing
    rng = np.random.default_rng(0)
    out = np.zeros((4000, encoder.width))
    chosen = np.repeat([0, 1, 16, 17], 1000)
    write_cells(out, cells, chosen, rng)
    decoded = encoder.decode(out)["x"].to_numpy()
    assert set(decoded[:1000]) == {0} and set(decoded[3000:]) == {200}
    assert 0 not in set(decoded[1000:2000]) and 200 not in set(decoded[2000:3000])
    assert decoded[1000:2000].min() == 1 and decoded[2000:3000].max() == 199
    assert (cell_index(cells, out) == chosen).all()  # decoding never leaves the cell
    fine = public_cells(visits, 64)
    assert refinement(fine, cells).tolist()[:2] == [0, 1] and refinement(fine, cells)[-2] == 17
    assert np.array_equal(cells_of_size(visits, cells.size).edges, cells.edges)
    assert public_cells(visits, 10, equal_width=True).size == 11  # the metric's cells
    _, small = column({"type": "integer", "min": 0, "max": 10})
    assert public_cells(small, 16).points is not None  # one cell per value, as before
    _, sixteen = column({"type": "integer", "min": 0, "max": 15})
    assert cells_of_size(sixteen, 16).points is not None  # its 16 values, not 14 bins + 2
    _, seventeen = column({"type": "integer", "min": 0, "max": 16})
    assert public_cells(seventeen, 16).size == 16  # span = bins: no split (0 is alone already)


def test_every_cell_of_every_histogram_gets_noise_even_if_empty():
    generator = IndependentMarginals(ENCODER, epsilon=1.0)
    noise = RecordingNoise()
    one_row = encoded_census(1, seed=0)  # almost every cell is empty
    generator.fit(one_row, noise)
    sizes = list(generator.config()["cells_per_column"].values())
    assert [request[2] for request in noise.requests] == [(size,) for size in sizes]
    assert {request[1] for request in noise.requests} == {generator.scale}
    assert all(request[3] for request in noise.requests)  # counts: integer noise when secure


def test_neighbouring_tables_differ_by_one_cell_per_column():
    """The L1 sensitivity used for calibration (one cell per column) is attained, not exceeded."""
    generator = IndependentMarginals(ENCODER, epsilon=1.0)
    real = encoded_census(500, seed=4)
    rng = np.random.default_rng(0)
    for _ in range(20):
        removed = rng.integers(len(real))
        neighbour = np.delete(real, removed, axis=0)
        full = np.concatenate(generator.cell_counts(real))
        less = np.concatenate(generator.cell_counts(neighbour))
        assert np.abs(full - less).sum() == generator.sensitivity


def test_large_epsilon_recovers_every_marginal(seeded_noise):
    real = encoded_census(20_000, seed=5)
    generator = IndependentMarginals(ENCODER, epsilon=1000.0)
    synthetic = generator.fit(real, seeded_noise(1)).sample(20_000, np.random.default_rng(2))
    real_table, synthetic_table = ENCODER.decode(real), ENCODER.decode(synthetic)
    for name in ("sex", "region", "high_earner", "education"):
        real_share = real_table[name].value_counts(normalize=True)
        synthetic_share = synthetic_table[name].value_counts(normalize=True)
        tvd = 0.5 * real_share.subtract(synthetic_share, fill_value=0).abs().sum()
        assert tvd < 0.03, name
    assert abs(synthetic_table["wage"].mean() / real_table["wage"].mean() - 1) < 0.03
    assert abs(synthetic_table["capital_gain"].isna().mean() - 0.6) < 0.02


def test_sampling_is_reproducible_given_a_seed_and_batched(seeded_noise):
    fitted = IndependentMarginals(ENCODER, 1.0).fit(encoded_census(300, seed=1), seeded_noise(0))
    assert sampling_is_reproducible(fitted, 1000, batch_rows=128)["age"].between(17, 90).all()


def test_fit_before_sample_and_registry_errors():
    # Only a fitted generator samples: the public plan has no sampler and fitting leaves it
    # unchanged.
    generator = IndependentMarginals(ENCODER, epsilon=1.0)
    assert not hasattr(generator, "sample")
    before = dict(vars(generator))
    generator.fit(encoded_census(50, seed=0), NoiseSource())
    assert vars(generator).keys() == before.keys()
    with pytest.raises(InputError, match="unknown generator 'gan9000'"):
        make_generator("gan9000", ENCODER, 1.0, 0.0)
    with pytest.raises(InputError, match="bins must be at least 1"):
        make_generator("marginals", ENCODER, 1.0, 0.0, bins=0)
