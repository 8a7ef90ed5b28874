"""Sampling from the `pgm` tree and the `marginals` histograms: stratified (systematic)
draws keep every row's distribution and put the model's shares, not a multinomial sampling
error, into the synthetic table.

The random generators here drive sampling (post-processing), not DP noise; they are seeded so
that the tests are deterministic."""

from __future__ import annotations

import numpy as np
from release_fixtures import ROOT

from dprelease.datasets import census_like
from dprelease.encoding import Encoder
from dprelease.generators import make_generator
from dprelease.generators.domain import cell_index
from dprelease.generators.pgm.model import sample_cells
from dprelease.generators.sampling import draw_rows, systematic_uniforms
from dprelease.schema import load_schema


def test_systematic_uniforms_are_one_offset_and_even_steps_in_a_random_order_per_key():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 5, size=10_000)
    uniforms = systematic_uniforms(keys, rng)
    assert uniforms.min() >= 0.0 and uniforms.max() < 1.0
    for key in range(5):
        values = uniforms[keys == key]
        m = len(values)
        steps = np.sort(values) * m - np.arange(m)  # (u + i) / m * m - i = u, one u per key
        assert np.ptp(steps) < 1e-9 and 0.0 <= steps[0] < 1.0
        # the order within the key is random, not the rows' order
        assert abs(np.corrcoef(np.arange(m), values)[0, 1]) < 0.1


def test_stratified_draws_hold_each_conditions_share_to_one_row_and_keep_each_rows_law():
    rng = np.random.default_rng(1)
    p = np.array([[0.5, 0.3, 0.2, 0.0], [0.05, 0.05, 0.1, 0.8]])
    keys = rng.integers(0, 2, size=20_001)
    cells = draw_rows(p[keys], systematic_uniforms(keys, rng))
    for key in (0, 1):
        counts = np.bincount(cells[keys == key], minlength=4)
        assert np.all(np.abs(counts - (keys == key).sum() * p[key]) < 1.0)
    # a multinomial draw misses the shares by about sqrt(m p (1 - p)), 35 rows here
    # each row on its own is still a draw from its key's distribution
    first = np.array(
        [draw_rows(p[:1], systematic_uniforms(np.zeros(7, int), rng)[:1])[0] for _ in range(20_000)]
    )
    frequencies = np.bincount(first, minlength=4) / len(first)
    assert np.all(np.abs(frequencies - p[0]) < 4 * np.sqrt(p[0] * (1 - p[0]) / len(first)) + 1e-12)


def test_pgm_samples_carry_the_models_target_shares_and_conditionals(seeded_noise):
    encoder = Encoder(load_schema(f"{ROOT}/data/census.yaml"))
    generator = make_generator("pgm", encoder, 1.0, 1e-6)
    model = generator.fit(encoder.encode(census_like(5_000, seed=1)), seeded_noise(3)).state
    n = 20_000
    chosen = sample_cells(model, n, np.random.default_rng(2))
    y_shares = model.one_way[model.target]
    y_counts = np.bincount(chosen[model.target], minlength=len(y_shares))
    assert np.all(np.abs(y_counts - n * y_shares) < 1.0)
    y_coarse = model.target_groups[chosen[model.target]]
    for node in model.nodes:
        parent = 0 if node.parent is None else node.parent_groups[chosen[node.parent]]
        coarse = node.groups[chosen[node.column]]
        parents = node.table.shape[1]
        condition = y_coarse * parents + parent
        for key in np.unique(condition):
            rows = condition == key
            expected = rows.sum() * node.table[key // parents, key % parents]
            counts = np.bincount(coarse[rows], minlength=node.table.shape[2])
            assert np.all(np.abs(counts - expected) < 1.0 + 1e-9)


def test_marginals_samples_hold_each_histograms_shares_to_one_row(seeded_noise):
    encoder = Encoder(load_schema(f"{ROOT}/data/census.yaml"))
    generator = make_generator("marginals", encoder, 1.0, 0.0)
    state = generator.fit(encoder.encode(census_like(2_000, seed=1)), seeded_noise(3)).state
    n = 20_000
    synthetic = generator._sample(state, n, np.random.default_rng(4))
    for cells, probabilities in zip(generator.cells, state.probabilities, strict=True):
        counts = np.bincount(cell_index(cells, synthetic), minlength=cells.size)
        assert np.all(np.abs(counts - n * probabilities) < 1.0 + 1e-9), cells.column.name
