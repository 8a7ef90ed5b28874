"""The target model's moments in the calibration weights (issue 18): t(x) = c * y (x) z.

For the analyst's target model (least squares on a numeric target, logistic regression on a
categorical one) the weighted fit on the synthetic rows depends on the weighted moments
E_w[z z^T] and E_w[y z], with z the encoded features of the other columns. The generator
measures the first (one- and two-way marginals); the calibration weights also match the
second to DP sums of the real rows, so that weighted least squares on the synthetic rows
solves the DP sufficient statistics' normal equations (sufficient statistics perturbation,
Vu and Slavkovic 2009; Wang 2018, "Revisiting differentially private linear regression",
section 3).

- Numeric target: y = the [0, 1]-scaled target (0 when missing), z = (the other columns'
  encoded features, 1): t(x) = c y z. Each other column's encoded block has squared norm and
  L1 norm at most 1 (a one-hot level, a scaled value, or a nullable column's missing
  indicator with its value 0), so ||t(x)||_2^2 <= c^2 m and ||t(x)||_1 <= c m for m columns
  in the schema (m - 1 others plus the constant).
- Categorical target: y = its one-hot levels, z = the scaled values of the other numeric
  columns (products with a categorical column's levels are cells of the pair tables, and
  with the constant the target's one-way margin, which the calibration holds):
  t(x) = c vec(y z^T), ||t||_2^2 <= c^2 q, ||t||_1 <= c q for q numeric other columns.
Both bounds are public functions of the schema. `c` (option `moment_scale`) sets the share
of the weights' budget the moments get against the pair tables (docs: `CalibrationSettings`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse


class TargetMoments:
    """t(x) = c y (x) z for the schema's target (module docstring)."""

    def __init__(self, encoder: Any, scale: float) -> None:
        target = encoder.schema.target
        self.target = next(column for column in encoder.columns if column.name == target)
        others = [column for column in encoder.columns if column is not self.target]
        self.categorical = self.target.is_categorical
        if self.categorical:  # the pair tables already hold y x (categorical column)
            others = [column for column in others if not column.is_categorical]
            blocks = [[column.value_index] for column in others]
        else:
            blocks = [list(range(column.start, column.stop)) for column in others]
        self.features = np.array(sum(blocks, []), dtype=np.int64)
        self.scale = float(scale)
        self.levels = self.target.width if self.categorical else 1
        self.z_size = self.features.size + int(not self.categorical)
        self.size = self.levels * self.z_size
        self.norm_units = len(others) + int(not self.categorical)

    @property
    def squared_sensitivity(self) -> float:
        """sup ||t(x)||_2^2 over the public domain."""
        return self.scale**2 * self.norm_units

    @property
    def l1_sensitivity(self) -> float:
        """sup ||t(x)||_1 over the public domain."""
        return self.scale * self.norm_units

    def _z(self, x: np.ndarray) -> np.ndarray:
        z = x[:, self.features]
        return z if self.categorical else np.hstack([z, np.ones((x.shape[0], 1))])

    def _y(self, x: np.ndarray) -> np.ndarray:
        if self.categorical:
            return x[:, self.target.start : self.target.stop]
        return x[:, [self.target.value_index]]

    def matrix(self, x: np.ndarray) -> sparse.csr_array:
        """t(x) for every row (rows x size), level-major: [y_1 z, y_2 z, ...]."""
        y, z = self._y(x), self._z(x)
        dense = (self.scale * y[:, :, None] * z[:, None, :]).reshape(x.shape[0], self.size)
        return sparse.csr_array(dense)

    def log_bound(self, b: np.ndarray) -> float:
        """An upper bound on b^T t(x) over the public domain: y in [0, 1] (numeric) or one
        level (categorical) and every entry of z in [0, 1], so c times the largest (over
        levels) sum of the positive coefficients."""
        blocks = b.reshape(self.levels, self.z_size)
        best = np.maximum(blocks, 0.0)
        return float(self.scale * max(0.0, best.sum(axis=1).max()))
