"""Does a typed description keep the (epsilon, delta) its ledger entry records?

A ledger entry records (epsilon, delta) (what basic composition sums and what every statement
prints) and, separately, the typed mechanism that ran (what the Rényi filter composes). The two
must agree: an entry whose mechanism is LESS private than its recorded (epsilon, delta) would
be undercounted by basic composition, and a commit that swaps a generic reservation for such
a mechanism would be spending more than it reserved. `check_guarantee`
refuses both; the ledger calls it on every planned spend and on every description a commit
introduces.

Each check computes the mechanism's own privacy at the recorded values, exactly or as a valid
upper bound (never a lower one), with the method that calibrated it:
- Laplace(b, D), PureEpsilon, ApproxDP: closed forms (`accounting.closed_form_violation`, also
  checked when a `PlannedSpend` is built).
- Gaussian(sigma, D): the exact delta at the recorded epsilon (Balle and Wang 2018, Theorem 8;
  `calibration.gaussian_delta`), at most the recorded delta.
- PoissonSubsampledGaussian: the epsilon at the recorded delta from Opacus' RDP accountant, the
  one that calibrated DP-SGD (`calibration.dpsgd_epsilon`), at most the recorded epsilon.
- ZCDP(rho): the epsilon at the recorded delta from the conversion of Canonne, Kamath and
  Steinke 2020 (Proposition 12) minimised over the order (OpenDP's conversion, which AIM and
  MST record, is the same one: equal to 1e-15 on the generators' values), at most the
  recorded epsilon.
Tolerances (relative 1e-6 on delta, 1e-9 on epsilon) absorb the root-finding of the
calibrations (analytic Gaussian: within 2e-7 of the target delta), nothing larger.
"""

from __future__ import annotations

import math

from dprelease.privacy.accounting import PlannedSpend, closed_form_violation
from dprelease.privacy.calibration import dpsgd_epsilon, gaussian_delta
from dprelease.privacy.mechanisms import ZCDP, Gaussian, Mechanism, PoissonSubsampledGaussian

DELTA_RTOL = 1e-6
EPSILON_RTOL = 1e-9


def check_guarantee(spend: PlannedSpend, description: Mechanism | None = None) -> None:
    """Raise ValueError unless `description` (default: the spend's own) is (epsilon, delta)-DP
    at the spend's recorded values (see the module docstring)."""
    d = spend.description if description is None else description
    epsilon, delta = spend.epsilon, spend.delta
    problem = closed_form_violation(d, epsilon, delta)
    if problem is not None:
        raise ValueError(f"{spend.mechanism}: {problem}")
    if isinstance(d, Gaussian):
        actual = gaussian_delta(d.sigma, d.l2_sensitivity, epsilon) if delta > 0 else 1.0
        holds = actual <= delta * (1 + DELTA_RTOL)
        claim = f"delta={actual:.6g} at epsilon={epsilon:g}"
    elif isinstance(d, PoissonSubsampledGaussian | ZCDP):
        actual = _epsilon_at(d, delta) if delta > 0 else math.inf
        holds = actual <= epsilon * (1 + EPSILON_RTOL)
        claim = f"epsilon={actual:.6g} at delta={delta:g}"
    else:
        return  # closed forms (above) or no description
    if not holds:
        raise ValueError(
            f"{spend.mechanism}: its mechanism {d} has {claim}, less private than the "
            f"(epsilon={epsilon:g}, delta={delta:g}) it records"
        )


def _epsilon_at(mechanism: PoissonSubsampledGaussian | ZCDP, delta: float) -> float:
    if isinstance(mechanism, PoissonSubsampledGaussian):
        return dpsgd_epsilon(
            mechanism.noise_multiplier, delta, mechanism.sample_rate, mechanism.steps
        )
    return zcdp_epsilon(mechanism.rho, delta)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """min over alpha > 1 of rho alpha + log(1 - 1/alpha) - log(alpha delta) / (alpha - 1)
    (Canonne et al. 2020, Proposition 12); bounded scalar minimisation over the order."""
    from scipy.optimize import minimize_scalar

    def epsilon(alpha: float) -> float:
        return rho * alpha + math.log1p(-1 / alpha) - math.log(alpha * delta) / (alpha - 1)

    result = minimize_scalar(
        epsilon, bounds=(1 + 1e-6, 1e7), method="bounded", options={"xatol": 1e-10}
    )
    return float(result.fun)
