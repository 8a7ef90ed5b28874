"""The target model's moments in the calibration weights: t(x) = c * y (x) z.

For the analyst's target model (least squares on a numeric target, logistic regression on a
categorical one) the weighted fit on the synthetic rows depends on the weighted moments
E_w[z z^T] and E_w[y z], with z the encoded features of the other columns. The generator
measures the first (one- and two-way marginals); the calibration weights also match the
second to DP sums of the real rows, so that weighted least squares on the synthetic rows
solves the DP sufficient statistics' normal equations (sufficient statistics perturbation,
Vu and Slavkovic 2009; Wang 2018, "Revisiting differentially private linear regression",
section 3).

- Numeric target: y = the [0, 1]-scaled target (0 when missing), z = the other columns'
  encoded features but the first level of each categorical one: t(x) = c y z. Each other
  column's block has squared norm and L1 norm at most 1 (a one-hot level, a scaled value, or
  a nullable column's missing indicator with its value 0), so ||t(x)||_2^2 <= c^2 (m - 1)
  and ||t(x)||_1 <= c (m - 1) for m columns in the schema.
- Categorical target with L levels: y = its first L - 1 one-hot levels, z = the scaled
  values of the other numeric columns: t(x) = c vec(y z^T), ||t||_2^2 <= c^2 q,
  ||t||_1 <= c q for q numeric other columns.
Left out, because the calibration already holds them (`held_margins`, the pair
tables): products with a categorical column's levels when the target is categorical (cells
of the pair tables), and every linear combination that the one-way margins fix (y times
the constant, the sum over a categorical column's levels, the sum over the target's
levels). Noisy targets for those would conflict with the held margins: a direction no tilt
can fit, which drives the tilt to its smallest ridge (docs/decisions/0017-calibration-weights.md).
Both bounds are public functions of the schema. `c` (option `moment_scale`) sets the share
of the weights' budget the moments get against the pair tables (docs: `CalibrationSettings`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

CHUNK_ROWS = 50_000  # rows per chunk of a dense feature block (also the real rows' sums)


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
        else:  # a categorical column's first level: y minus the others (y's margin is held)
            blocks = [
                list(range(column.start + column.is_categorical, column.stop)) for column in others
            ]
        self.features = np.array(sum(blocks, []), dtype=np.int64)
        self.scale = float(scale)
        # a categorical target's last level: the feature minus the others (held margin)
        self.levels = self.target.width - 1 if self.categorical else 1
        self.z_size = self.features.size
        self.size = self.levels * self.z_size
        self.norm_units = len(others)

    @property
    def squared_sensitivity(self) -> float:
        """sup ||t(x)||_2^2 over the public domain."""
        return self.scale**2 * self.norm_units

    @property
    def l1_sensitivity(self) -> float:
        """sup ||t(x)||_1 over the public domain."""
        return self.scale * self.norm_units

    def _y(self, x: np.ndarray) -> np.ndarray:
        if self.categorical:
            return x[:, self.target.start : self.target.stop - 1]
        return x[:, [self.target.value_index]]

    def matrix(self, x: np.ndarray) -> sparse.csr_array:
        """t(x) for every row (rows x size), level-major: [y_1 z, y_2 z, ...]; built
        `CHUNK_ROWS` rows at a time (the dense products of 400,000 rows of a 105-level
        column would take 420 MB at once; docs/decisions/0030-scale-and-latency.md)."""
        chunks = [
            self._chunk(x[start : start + CHUNK_ROWS])
            for start in range(0, max(len(x), 1), CHUNK_ROWS)
        ]
        if len(chunks) == 1:
            return chunks[0]
        return sparse.vstack(chunks, format="csr")

    def _chunk(self, x: np.ndarray) -> sparse.csr_array:
        y, z = self._y(x), x[:, self.features]
        dense = (self.scale * y[:, :, None] * z[:, None, :]).reshape(x.shape[0], self.size)
        return sparse.csr_array(dense)

    def log_bound(self, b: np.ndarray) -> float:
        """An upper bound on b^T t(x) over the public domain: y in [0, 1] (numeric) or one
        level (categorical) and every entry of z in [0, 1], so c times the largest (over
        levels) sum of the positive coefficients."""
        blocks = b.reshape(self.levels, self.z_size)
        best = np.maximum(blocks, 0.0)
        return float(self.scale * max(0.0, best.sum(axis=1).max()))
