"""`pgm`'s within-cell coupling of ordered features to the target (`pgm.latent`): the latent
correlation estimate, the scored stratified draw, and the slope a coarse model keeps."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dprelease.encoding import Encoder
from dprelease.generators import make_generator
from dprelease.generators.pgm.latent import latent_correlation, local_correlations
from dprelease.generators.pgm.model import refine
from dprelease.generators.sampling import systematic_uniforms
from dprelease.schema import Schema


def _cut(values: np.ndarray, cells: int) -> np.ndarray:
    """Equal-mass cells of a sample (test data only)."""
    edges = np.quantile(values, np.arange(1, cells) / cells)
    return np.searchsorted(edges, values, side="right")


@pytest.mark.parametrize("rho", [-0.6, 0.0, 0.5, 0.9])
@pytest.mark.parametrize(("y_cells", "x_cells"), [(8, 2), (4, 4), (2, 3)])
def test_latent_correlation_recovers_the_copula_from_coarse_cells(rho, y_cells, x_cells):
    """Monotone maps of a bivariate normal, cut into a few cells: the estimate is the
    latent rho, where the correlation of the cells' ranks is far below it (0.9 at 8 x 2
    cells: about 0.63)."""
    rng = np.random.default_rng(7)  # test data, not DP noise
    z = rng.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], size=400_000)
    y, x = np.exp(z[:, 0]), z[:, 1] ** 3
    table = np.zeros((y_cells, x_cells))
    np.add.at(table, (_cut(y, y_cells), _cut(x, x_cells)), 1.0)
    assert latent_correlation(table) == pytest.approx(rho, abs=0.02)
    assert latent_correlation(table.T) == pytest.approx(rho, abs=0.02)


def test_local_correlations_follow_a_relation_that_turns():
    """Wage rises, then falls with experience: each cell's window has its own direction
    (one rho for the whole column coupled the falling part the wrong way)."""
    rng = np.random.default_rng(8)  # test data, not DP noise
    x = rng.uniform(0, 40, 200_000)
    y = -((x - 20) ** 2) / 40 + rng.normal(0, 1.5, x.size)
    table = np.zeros((6, 8))
    np.add.at(table, (_cut(y, 6), _cut(x, 8)), 1.0)
    rho = local_correlations(table)
    assert rho.shape == (8,)
    assert (rho[:2] > 0.4).all() and (rho[-2:] < -0.4).all()
    assert abs(latent_correlation(table)) < 0.1  # the whole column: no direction
    assert np.allclose(local_correlations(table[:, :2]), latent_correlation(table[:, :2]))


def test_latent_correlation_of_a_table_with_one_occupied_row_is_zero():
    assert latent_correlation(np.array([[5.0, 3.0], [0.0, 0.0]])) == 0.0
    assert latent_correlation(np.zeros((3, 3))) == 0.0


def test_scores_order_the_stratified_uniforms_within_each_key():
    rng = np.random.default_rng(0)
    keys = np.repeat([2, 0, 1], [50, 7, 300])
    scores = rng.standard_normal(keys.size)
    uniforms = systematic_uniforms(keys, np.random.default_rng(1), scores)
    for key in (0, 1, 2):
        u, s = uniforms[keys == key], scores[keys == key]
        gaps = np.diff(np.sort(u))
        assert np.allclose(gaps, 1.0 / u.size)  # still (v + i) / m, i = 0..m-1
        assert (np.argsort(u) == np.argsort(s)).all()  # in the scores' order


def test_scored_refinement_keeps_every_coarse_cells_fine_counts():
    """Ranking decides which rows get which fine cells, not how many: per coarse cell each
    fine cell gets floor or ceil of m times its share, with scores as without."""
    rng = np.random.default_rng(3)
    groups = np.array([0, 0, 0, 1, 1, 2])
    shares = np.array([0.1, 0.2, 0.1, 0.3, 0.1, 0.2])
    coarse = rng.integers(0, 3, 5_000)
    for scores in (None, rng.standard_normal(coarse.size)):
        fine = refine(coarse, groups, shares, np.random.default_rng(4), scores)
        assert (groups[fine] == coarse).all()
        for g in range(3):
            m = int((coarse == g).sum())
            inside = shares * (groups == g)
            expected = m * inside / inside.sum()
            counts = np.bincount(fine[coarse == g], minlength=shares.size)
            assert (np.abs(counts - expected) < 1.0 + 1e-9).all()


def test_a_coarse_model_keeps_the_slope_of_the_target_on_a_feature(seeded_noise):
    """1,500 rows at epsilon 1: the model measures the feature in 2-4 cells. Refined
    independently inside them, the synthetic slope of y on x keeps only the coarse cells'
    part; coupled, it is near the real one, and the one-way shares are the same."""
    rng = np.random.default_rng(11)  # test data, not DP noise
    n = 1_500
    x = rng.uniform(0, 100, n)
    real = pd.DataFrame(
        {
            "y": np.clip(x + rng.normal(0, 20, n), -50, 150),
            "x": x,
            "noise": rng.uniform(0, 1, n),
            "group": rng.choice(["a", "b", "c"], n),
        }
    )
    schema = Schema.model_validate(
        {
            "dataset": "t",
            "max_rows": 100_000,
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "target": "y",
            "columns": {
                "y": {"type": "continuous", "min": -50, "max": 150},
                "x": {"type": "continuous", "min": 0, "max": 100},
                "noise": {"type": "continuous", "min": 0, "max": 1},
                "group": {"type": "categorical", "categories": ["a", "b", "c"]},
            },
        }
    )
    encoder = Encoder(schema)
    generator = make_generator("pgm", encoder, 1.0, 1e-6)
    fitted = generator.fit(encoder.encode(real), seeded_noise(2))
    state = fitted.state
    x_node = next(node for node in state.nodes if node.column == 1)
    assert state.resolutions[1] <= 4 and (x_node.latent_correlations > 0.6).all()
    assert next(node for node in state.nodes if node.column == 3).latent_correlations is None
    independent = replace(
        state, nodes=[replace(node, latent_correlations=None) for node in state.nodes]
    )

    def slope(model) -> tuple[float, np.ndarray]:
        rows = encoder.decode(replace(fitted, state=model).sample(40_000, np.random.default_rng(5)))
        shares = np.histogram(rows["x"], bins=16, range=(0, 100))[0] / len(rows)
        return float(np.polyfit(rows["x"], rows["y"], 1)[0]), shares

    real_slope = float(np.polyfit(real["x"], real["y"], 1)[0])
    coupled, coupled_shares = slope(state)
    alone, alone_shares = slope(independent)
    assert alone < 0.85 * real_slope
    assert abs(coupled - real_slope) < 0.1 * real_slope
    assert np.abs(coupled_shares - alone_shares).max() < 0.002
