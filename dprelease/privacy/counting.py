"""The DP row count: n~ = N + Lap(1/epsilon).

Adding or removing one row changes the count by 1 (docs/privacy-model.md section 1), so
Laplace noise of scale 1/epsilon makes it epsilon-DP (Dwork et al. 2006). The real N is
private: the noisy count is the only form in which a release may use it (adaptive
truncation's T, ABCDP's normaliser n_hat).
"""

from __future__ import annotations

from dprelease.privacy.calibration import laplace_scale
from dprelease.privacy.noise import NoiseSource


def dp_row_count(n_rows: int, epsilon: float, noise: NoiseSource) -> float:
    """n~ = N + Lap(1/epsilon), sensitivity 1 under add/remove-one."""
    return float(noise.add_laplace(n_rows, laplace_scale(1.0, epsilon), counts=True))
