"""DP-CGAN (Torkzadehmahani et al. 2019): the DP-GAN of `gan.py` conditioned on the schema's
categorical target.

The label distribution is DP too: a histogram of the target over its public categories
(empty ones included) with Laplace noise of scale 1 / epsilon_label (one row changes one
count by 1: L1 sensitivity 1), clipped and normalised; fake batches and synthetic rows draw
labels from it. epsilon_label = `label_fraction` * epsilon (default 0.1: at epsilon = 1 the
scale is 10 counts, small against any table a GAN can learn from, while DP-SGD keeps 90% of
the budget; docs/decisions/0023-other-generators-defaults.md); DP-SGD gets the rest and the
whole delta. Two ledger entries, composed basically.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dprelease.encoding import EncodedColumn, Encoder
from dprelease.errors import InputError
from dprelease.generators.domain import cell_counts, normalise, public_cells
from dprelease.generators.gan.dpgan import DPGAN
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.calibration import laplace_scale
from dprelease.privacy.noise import NoiseSource

DEFAULT_LABEL_FRACTION = 0.1


class DPCGAN(DPGAN):
    """Conditional DP-GAN on the schema's categorical target, with a DP label histogram."""

    name = "dpcgan"

    def __init__(
        self,
        encoder: Encoder,
        epsilon: float,
        delta: float = 0.0,
        *,
        label_fraction: float = DEFAULT_LABEL_FRACTION,
        **options: Any,
    ):
        if not 0 < label_fraction < 1:
            raise ValueError("label_fraction must be in (0, 1)")
        self.label_fraction = label_fraction
        super().__init__(encoder, epsilon, delta, **options)
        assert self.target is not None
        self.label_scale = laplace_scale(1.0, self.label_epsilon)

    def _condition_column(self) -> EncodedColumn:
        target = self.encoder.schema.target
        columns = {column.name: column for column in self.encoder.columns}
        if target is None or not columns[target].is_categorical:
            raise InputError(
                f"{self.name} conditions on the schema's target, which must be a categorical "
                f"column (target: {target!r}); set a categorical target or use dpgan"
            )
        return columns[target]

    def public_options(self) -> dict[str, Any]:
        return {**super().public_options(), "label_fraction": self.label_fraction}

    def _label_spends(self) -> list[PlannedSpend]:
        assert self.target is not None
        return [
            self.laplace_spend(
                "laplace-histogram",
                self.label_epsilon,
                self.label_scale,
                1.0,
                column=self.target.name,
                cells=self.target.width,
            )
        ]

    def _noisy_labels(self, real: np.ndarray, noise: NoiseSource) -> np.ndarray:
        assert self.target is not None
        counts = cell_counts(public_cells(self.target, 1), real)
        return normalise(np.clip(noise.add_laplace(counts, self.label_scale, counts=True), 0, None))
