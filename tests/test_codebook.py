"""A continuous column with a public codebook (`values`): its cells follow the codebook and
every synthetic value is a codebook value, so coded columns decode exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from release_fixtures import edit_table, failed, publish_table, rehash

import dprelease.generators.pgm.generator as pgm
from dprelease.config import SyntheticConfig
from dprelease.encoding import Encoder
from dprelease.generators import make_generator
from dprelease.generators.domain import (
    cell_index,
    marginal_tvd,
    public_cells,
    refinement,
    write_cells,
)
from dprelease.io.validate import check_synthetic
from dprelease.schema import Schema

AGES = [17.5, 22, 27, 32, 37, 42, 47, 52, 57]  # AER's Affairs codes its ages this way


def _schema(values: list[float] | None, target: str | None = "affair") -> Schema:
    age = {"type": "continuous", "min": 15, "max": 60}
    if values is not None:
        age["values"] = values
    return Schema.model_validate(
        {
            "dataset": "coded",
            "max_rows": 100_000,
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "target": target,
            "columns": {"age": age, "affair": {"type": "categorical", "categories": ["no", "yes"]}},
        }
    )


def _coded_table(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    shares = np.array([2, 10, 18, 16, 13, 12, 9, 8, 12], dtype=float)
    age = rng.choice(AGES, size=rows, p=shares / shares.sum())
    affair = np.where(rng.random(rows) < 0.1 + 0.01 * (age - 17.5), "yes", "no")
    return pd.DataFrame({"age": age, "affair": affair})


def test_codebook_cells_give_each_value_a_cell_and_decode_to_it():
    column = Encoder(_schema(AGES)).columns[0]
    cells = public_cells(column, 16)
    assert cells.size == len(AGES)
    out = np.zeros((len(AGES), 2 + 1))
    write_cells(out, cells, np.arange(len(AGES)), np.random.default_rng(0))
    np.testing.assert_allclose(out[:, 0] * 45 + 15, AGES)
    # a real value between two codebook values counts as the nearer one
    between = (np.array([[19.0], [20.0], [44.0], [45.0]]) - 15) / 45
    assert cell_index(cells, between).tolist() == [0, 1, 5, 6]
    # the evaluation metric's equal-width bins ignore the codebook
    assert public_cells(column, 10, equal_width=True).size == 10


def test_a_long_codebook_groups_consecutive_values_into_nested_cells():
    values = [float(v) for v in np.sort(np.random.default_rng(1).uniform(15, 60, 40))]
    column = Encoder(_schema(values)).columns[0]
    fine, half, base = (public_cells(column, b) for b in (64, 32, 16))
    assert (fine.size, half.size, base.size) == (40, 32, 16)
    for coarse in (half, base):
        mapping = refinement(fine, coarse)
        assert mapping is not None and np.all(np.diff(mapping) >= 0)
    assert refinement(half, base) is not None  # floor(k n / b) boundaries nest
    chosen = np.random.default_rng(2).integers(0, base.size, 5_000)
    out = np.zeros((len(chosen), 3))
    write_cells(out, base, chosen, np.random.default_rng(3))
    decoded = out[:, 0] * 45 + 15
    assert np.isin(np.round(decoded, 9), np.round(values, 9)).all()
    assert np.array_equal(cell_index(base, out), chosen)  # never outside its cell


def test_decode_snaps_a_coded_column_to_its_codebook():
    encoder = Encoder(_schema(AGES))
    matrix = np.zeros((3, encoder.width))
    matrix[:, 0] = (np.array([19.0, 20.0, 59.0]) - 15) / 45
    assert encoder.decode(matrix)["age"].tolist() == [17.5, 22.0, 57.0]


def test_synthetic_rows_off_the_codebook_are_a_bug_never_published():
    table = pd.DataFrame({"age": [17.5, 20.0], "affair": ["no", "yes"]})
    with pytest.raises(RuntimeError, match="age off its codebook"):
        check_synthetic(table, _schema(AGES))
    check_synthetic(table.iloc[:1], _schema(AGES))


def test_pgm_decodes_a_coded_column_exactly(seeded_noise, monkeypatch):
    real = _coded_table(20_000, seed=4)
    held_out = _coded_table(20_000, seed=5)
    tvd = {}
    arms = (("codebook", AGES), ("bounds, lattice", None), ("bounds, uniform", None))
    for label, values in arms:
        if label == "bounds, uniform":  # without the measured lattice (`generators.lattice`)
            monkeypatch.setattr(pgm, "has_lattice", lambda column: False)
        encoder = Encoder(_schema(values))
        generator = make_generator("pgm", encoder, 10.0, 1e-6)
        fitted = generator.fit(encoder.encode(real), seeded_noise(6))
        synthetic = fitted.sample(20_000, np.random.default_rng(7))
        if values is not None:
            assert set(encoder.decode(synthetic)["age"]) <= set(AGES)
        # the study's metric: 10 equal-width bins, with 42 on an edge (15 + 6 x 4.5)
        tvd[label] = marginal_tvd(encoder, encoder.encode(held_out), synthetic, bins=10)[("age",)]
    assert tvd["codebook"] < 0.02
    # these codes are whole numbers and halves: the measured lattice finds them too
    assert tvd["bounds, lattice"] < 0.02
    assert tvd["bounds, uniform"] > 2 * tvd["codebook"]


def test_a_release_of_a_coded_column_verifies_and_an_off_codebook_value_fails(tmp_path):
    config = SyntheticConfig(epsilon=2.0, delta=1e-6, n_synthetic=2_000, seed=0)
    directory, _ = publish_table(tmp_path, _schema(AGES), config, _coded_table(1_000, seed=8))
    assert not failed(directory)
    report = (directory / "report.md").read_text()
    assert "Coded columns (`age`): the schema's codebook" in report

    def off_codebook(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[0, "age"] = 20.0  # within the bounds, between two codes
        return frame

    edit_table(directory / "synthetic.parquet", off_codebook)
    rehash(directory)
    assert failed(directory) == {"synthetic-bounds"}
