"""The noise of the private logistic weights and its debiasing (paper Eq. 4-5, Proposition 2,
Theorem 2 with Corollaries 1-2; supplement B.2): noisy coefficients, the bias correction
log b(x), and noise added to the log weights themselves. The calibration of the scale from
public quantities is in `logistic.py`.
"""

from __future__ import annotations

import numpy as np

from dprelease.privacy.noise import NoiseSource
from dprelease.weights.logistic.gate import noise_gate


def log_mgf(mechanism: str, scale: float, t: np.ndarray | float) -> np.ndarray:
    """log E[exp(t z)] of one noise coordinate z: -log(1 - s^2 t^2) (Laplace), s^2 t^2 / 2."""
    t = np.asarray(t, dtype=float)
    if mechanism == "gaussian":
        return 0.5 * (scale * t) ** 2
    if np.any(scale * np.abs(t) >= 1.0):
        raise ValueError("the Laplace moment generating function needs scale * |t| < 1")
    return -np.log1p(-((scale * t) ** 2))


def log_bias_correction(x_aug: np.ndarray, mechanism: str, scale: float) -> np.ndarray:
    """log b(x) = -log E[exp(zeta^T x)] = -sum_j log M(x_j) (Proposition 2, B.2.1-B.2.2)."""
    return -log_mgf(mechanism, scale, x_aug).sum(axis=1)


def add_noise(noise: NoiseSource, mechanism: str, values: np.ndarray, scale: float) -> np.ndarray:
    """values + the calibrated noise, applied by the noise source to the values."""
    if mechanism == "laplace":
        return noise.add_laplace(values, scale)
    return noise.add_gaussian(values, scale)


def noisy_coefficients(
    beta_hat: np.ndarray, mechanism: str, scale: float, noise: NoiseSource
) -> np.ndarray:
    """beta_tilde = beta_hat + zeta, one draw of the calibrated noise (Eq. 4)."""
    return add_noise(noise, mechanism, beta_hat, scale)


def coefficient_log_weights(
    beta_tilde: np.ndarray, x_aug: np.ndarray, mechanism: str, scale: float, *, debias: bool
) -> np.ndarray:
    """log w = beta_tilde^T x, plus log b(x) when `debias` (Eq. 5, Proposition 2)."""
    log_w = x_aug @ beta_tilde
    if debias:
        log_w = log_w + log_bias_correction(x_aug, mechanism, scale)
    return log_w


def gated_log_weights(
    beta_hat: np.ndarray,
    x_aug: np.ndarray,
    mechanism: str,
    scale: float,
    noise: NoiseSource,
    *,
    debias: bool,
    gate: bool,
) -> tuple[np.ndarray, dict]:
    """The released log weights of the coefficient-noise methods and their details: one draw
    of zeta, then the paper's log weights beta_tilde^T x, plus log b(x) when `debias`
    (Eq. 4-5, Proposition 2); or flat ones when `gate` and `noise_gate` finds no signal."""
    beta_tilde = noisy_coefficients(beta_hat, mechanism, scale, noise)
    extra = {"noise_gate": noise_gate(beta_tilde, mechanism, scale)} if gate else {}
    if gate and extra["noise_gate"]["flat"]:
        return np.zeros(x_aug.shape[0]), extra
    return coefficient_log_weights(beta_tilde, x_aug, mechanism, scale, debias=debias), extra


def perturb_log_weights(
    log_weights: np.ndarray, mechanism: str, scale: float, noise: NoiseSource
) -> np.ndarray:
    """log w_i + eta_i with E[exp(eta_i)] = 1: eta = z - log M(1) (Theorem 2, Cor. 1-2); the
    noise z is added to the log weights, the location -log M(1) after (post-processing)."""
    return add_noise(noise, mechanism, log_weights, scale) - log_mgf(mechanism, scale, 1.0)
