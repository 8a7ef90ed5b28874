"""The known-weights toy example (paper section 4.1, Figure 1), for tests and benchmarks.

Synthetic rows are uniform on [0, 1]^d, real rows uniform on {x : x_1 + x_2 < 1} (the other
features uniform in both), so the true weight is 2 on that triangle and 0 outside, and uniform
weights put half of the mass on it.
"""

from __future__ import annotations

import numpy as np


def triangle_example(
    n_real: int, n_synthetic: int, rng: np.random.Generator, n_features: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """(real, synthetic) encoded matrices of the toy example."""
    synthetic = rng.uniform(size=(n_synthetic, n_features))
    real = np.empty((0, n_features))
    while real.shape[0] < n_real:
        draw = rng.uniform(size=(2 * n_real, n_features))
        real = np.vstack([real, draw[in_triangle(draw)]])
    return real[:n_real], synthetic


def in_triangle(x: np.ndarray) -> np.ndarray:
    return x[:, 0] + x[:, 1] < 1.0


def triangle_mass(weights: np.ndarray, synthetic: np.ndarray) -> float:
    """Share of the total weight on the triangle (true weights: 1, uniform: about 0.5)."""
    return float(weights[in_triangle(synthetic)].sum() / weights.sum())
