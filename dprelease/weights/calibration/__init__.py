"""The default importance weights, calibration weights (`calibrate`).

- `method`: the plan of the noise, the DP sums and the weights they give;
- `features`: the feature map of the calibrated tables and moments;
- `held_margins`: the one-way margins the weights hold (raking);
- `target_moments`: the target model's DP moments;
- `tilting`: the exponential tilt of the synthetic rows to the targets;
- `fit`: choosing the tilt's ridge by the discrepancy principle.
"""

from dprelease.weights.calibration.fit import calibrate
from dprelease.weights.calibration.method import CALIBRATION, CalibrationPlan

__all__ = ["CALIBRATION", "CalibrationPlan", "calibrate"]
