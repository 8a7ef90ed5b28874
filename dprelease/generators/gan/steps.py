"""The default number of DP-SGD steps of the DP-GANs' discriminator, from public quantities."""

from __future__ import annotations

from dprelease.privacy.calibration import dpsgd_noise_multiplier

DEFAULT_MAX_STEPS = 2000
DEFAULT_MIN_STEPS = 50
NOISE_PER_STEP_TARGET = 0.04  # sigma / (2L), see `default_steps`


def default_steps(epsilon: float, delta: float, sample_rate: float, batch_size: int) -> int:
    """T: DEFAULT_MAX_STEPS, or fewer so that the noise on D's averaged gradient stays small.

    One DP-SGD step of D adds N(0, sigma^2 C^2 I) to a sum over an expected 2L rows and
    divides by 2L, so the noise per averaged-gradient coordinate is sigma C / (2L). For a
    fixed (epsilon, delta, q), sigma grows about like sqrt(T) in the noisy regime (Abadi et
    al. 2016, Theorem 1: sigma ~ q sqrt(T log(1/delta)) / epsilon). The default is the largest
    T <= DEFAULT_MAX_STEPS with sigma / (2L) <= NOISE_PER_STEP_TARGET by that scaling from one
    accountant call at DEFAULT_MAX_STEPS, and at least DEFAULT_MIN_STEPS. Every input is public
    (the budget, q from the schema's max_rows or the options, L); T is then fixed and sigma
    calibrated for it exactly, so the scaling only chooses T and never affects the privacy.

    On a 1,000-row mixed-type table at epsilon 1 (sigma / 2L = 0.091 at T = 2,000) the
    generator collapses onto a few distinct rows, and at 0.035-0.050 it does not; the target
    0.04 leaves a margin below the collapse and keeps T = 2,000 whenever the table is large
    against L (q = 256 / 30,000 at epsilon 1: 0.0034 per step). Measurements:
    docs/decisions/0023-other-generators-defaults.md (`benchmarks/gan_discriminator_weights.py`
    repeats them).
    """
    sigma = dpsgd_noise_multiplier(epsilon, delta, sample_rate, DEFAULT_MAX_STEPS)
    noise = sigma / (2 * batch_size)
    if noise <= NOISE_PER_STEP_TARGET:
        return DEFAULT_MAX_STEPS
    scaled = int(DEFAULT_MAX_STEPS * (NOISE_PER_STEP_TARGET / noise) ** 2)
    return max(DEFAULT_MIN_STEPS, scaled)
