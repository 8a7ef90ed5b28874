"""Noise calibration from public quantities only (docs/privacy-model.md sections 3, 4, 6).

- Laplace: scale = Delta_1 / epsilon gives pure epsilon-DP (Dwork et al. 2006).
- Gaussian: the analytic Gaussian mechanism (Balle and Wang 2018, Theorem 8): the smallest
  sigma with Phi(D/(2s) - e s/D) - exp(e) Phi(-D/(2s) - e s/D) <= delta. dp-accounting's
  `GaussianPrivacyLoss.from_privacy_guarantee` solves exactly this condition.
- DP-SGD: the noise multiplier for the Poisson-subsampled Gaussian mechanism with rate q over
  T steps, from Opacus' RDP accountant; `dpsgd_epsilon` reports with the same accountant, so
  calibration and reporting cannot disagree.
All are under add/remove-one neighbouring (dp-accounting's REMOVE adjacency is the
add/remove relation; Opacus' accountants assume it too).
"""

from __future__ import annotations

import math

from dprelease.errors import require

DPSGD_ACCOUNTANT = "rdp"
DPSGD_ACCOUNTING = "DP-SGD accounting (Opacus' RDP accountant)"
# Opacus' default orders stop at 63, where small-epsilon, many-step runs still want larger
# ones (Opacus then warns that the bound is loose); these orders extend them.
RDP_ORDERS = tuple(
    [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)) + [80, 128, 256, 512, 1024]
)


def laplace_scale(l1_sensitivity: float, epsilon: float) -> float:
    """Scale b of Laplace noise that makes a query with this L1 sensitivity epsilon-DP."""
    _check_epsilon(epsilon)
    if not l1_sensitivity > 0:
        raise ValueError("L1 sensitivity must be positive")
    return l1_sensitivity / epsilon


def gaussian_sigma(l2_sensitivity: float, epsilon: float, delta: float) -> float:
    """Analytic-Gaussian sigma for (epsilon, delta)-DP at this L2 sensitivity."""
    from dp_accounting.pld import common, privacy_loss_mechanism

    _check_epsilon(epsilon)
    if not 0 < delta < 1:
        raise ValueError("the Gaussian mechanism needs 0 < delta < 1")
    if not l2_sensitivity > 0:
        raise ValueError("L2 sensitivity must be positive")
    loss = privacy_loss_mechanism.GaussianPrivacyLoss.from_privacy_guarantee(
        common.DifferentialPrivacyParameters(epsilon, delta), sensitivity=l2_sensitivity
    )
    return float(loss.standard_deviation)


def gaussian_delta(sigma: float, l2_sensitivity: float, epsilon: float) -> float:
    """The exact delta of the Gaussian mechanism at epsilon (Balle and Wang 2018, Thm 8)."""
    from dp_accounting.pld import privacy_loss_mechanism

    loss = privacy_loss_mechanism.GaussianPrivacyLoss(sigma, sensitivity=l2_sensitivity)
    return float(loss.get_delta_for_epsilon(epsilon))


def dpsgd_noise_multiplier(
    epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    *,
    relative_tolerance: float = 0.005,
) -> float:
    """Smallest noise multiplier whose epsilon is in [(1 - tol) epsilon, epsilon]."""
    require("torch", DPSGD_ACCOUNTING)
    from opacus.accountants.utils import get_noise_multiplier

    _check_epsilon(epsilon)
    _check_dpsgd(delta, sample_rate, steps)
    return float(
        get_noise_multiplier(
            target_epsilon=epsilon,
            target_delta=delta,
            sample_rate=sample_rate,
            steps=steps,
            accountant=DPSGD_ACCOUNTANT,
            epsilon_tolerance=relative_tolerance * epsilon,
            alphas=RDP_ORDERS,
        )
    )


def dpsgd_epsilon(noise_multiplier: float, delta: float, sample_rate: float, steps: int) -> float:
    """Epsilon of T Poisson-subsampled Gaussian steps, from the calibrating accountant."""
    require("torch", DPSGD_ACCOUNTING)
    from opacus.accountants import create_accountant

    _check_dpsgd(delta, sample_rate, steps)
    accountant = create_accountant(DPSGD_ACCOUNTANT)
    accountant.history = [(noise_multiplier, sample_rate, steps)]
    return float(accountant.get_epsilon(delta=delta, alphas=RDP_ORDERS))


def _check_epsilon(epsilon: float) -> None:
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")


def _check_dpsgd(delta: float, sample_rate: float, steps: int) -> None:
    if not 0 < delta < 1:
        raise ValueError("DP-SGD needs 0 < delta < 1")
    if not 0 < sample_rate <= 1:
        raise ValueError("the sampling rate must be in (0, 1]")
    if steps < 1:
        raise ValueError("DP-SGD needs at least one step")
