"""The noise gate of the coefficient-noise weights: flat weights when the DP coefficients
carry no signal detectable above their own noise ("never worse by default";
docs/decisions/0022-logistic-and-neural-weights.md)."""

from __future__ import annotations

import math

import numpy as np

NOISE_GATE_SDS = 2.0
# Per-coordinate variance of zeta_j^2 / Var(zeta_j) under pure noise: 2 for a Gaussian
# (chi-square), 5 for a Laplace (E z^4 = 24 rho^4, Var z = 2 rho^2).
_SQUARE_VARIANCE = {"gaussian": 2.0, "laplace": 5.0}


def noise_gate(beta_tilde: np.ndarray, mechanism: str, scale: float) -> dict:
    """Are the noisy slope coefficients distinguishable from the DP noise alone?

    Post-processing of the DP coefficients (no privacy cost; hand-written, no library does
    this test). Under beta = 0 for the d slopes (the intercept, last, is dropped: the weights
    are self-normalised), T = sum_j beta_tilde_j^2 / Var(zeta_j) has mean d and variance
    d * Var(zeta^2)/Var(zeta)^2 (2d for Gaussian noise, a chi-square; 5d for Laplace). When
    T <= d + NOISE_GATE_SDS * sd the coefficients carry no detectable signal, so the log
    weights beta_tilde^T x would be (almost) pure noise: a random tilt that makes weighted
    estimates worse, not better (debiasing fixes E[w], not this variance). The
    weights are then flat. This is the "never worse by default" rule for the paper's
    estimator; `noise_gate=False` gives the paper's weights unchanged.
    """
    slopes = np.asarray(beta_tilde[:-1], dtype=float)
    d = slopes.shape[0]
    variance = scale**2 if mechanism == "gaussian" else 2.0 * scale**2
    statistic = float(np.sum(slopes**2) / variance)
    threshold = d + NOISE_GATE_SDS * math.sqrt(_SQUARE_VARIANCE[mechanism] * d)
    return {
        "statistic": statistic,
        "degrees_of_freedom": d,
        "threshold": threshold,
        "flat": bool(statistic <= threshold),
    }
