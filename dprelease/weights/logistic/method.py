"""Logistic-regression importance weights (paper section 3.3; supplement A.1, B.1-B.4).

Classifier (docs/privacy-model.md section 3): real rows y = 1, synthetic rows y = 0, features in
[0, 1] augmented with an intercept 1 so every x has ||x||_2 <= R = sqrt(d + 1), and

    J(beta) = (1/n0) sum_i log(1 + exp(-y_i' beta^T x_i)) + (lam/2) ||beta||^2,  y' = 2y - 1,

with public n0 (default N_G, the synthetic row count) and public lam. The paper normalises by
the private N_D; a public n0 keeps every calibration free of N_D. The non-private log weight
is log w_hat(x) = beta_hat^T x (+ log(N_G/N_D), dropped: self-normalisation cancels it).

Sensitivity (Chaudhuri et al. 2011, Lemma 7): J is lam-strongly convex and adding or removing
one row changes it by a term whose gradient has norm at most R/n0 (|d/dz log(1+e^-z)| <= 1), so
the exact minimisers of neighbouring datasets satisfy ||beta - beta'||_2 <= R/(n0 lam). The
fit is only approximate, so it is certified (`logistic.solver`): it returns coefficients with
||grad J|| <= g_max, a public tolerance fixed before the data is read, and every calibration
uses Delta_2 = R/(n0 lam) + 2 g_max / lam (strong convexity: each fit is within g_max / lam of
its exact minimiser). The details record g_max and the certified Delta_2, never the gradient
norm reached on the real rows. docs/privacy-model.md section 3 states the exact-minimiser Delta_2;
the added term is what makes it hold for the coefficients actually computed.

Mechanisms on the coefficients, beta_tilde = beta_hat + zeta:
- Laplace (pure epsilon): zeta_j iid Laplace(0, rho), rho = sqrt(d + 1) Delta_2 / epsilon.
  The paper (section 3.3) and Ji & Elkan (2013, Algorithm 1) use rho = Delta_2 / epsilon per
  coordinate. The Laplace mechanism is calibrated to the L1 sensitivity, and the L2 bound only
  gives ||beta - beta'||_1 <= sqrt(d + 1) Delta_2 (a difference of L2 norm Delta_2 along
  (1, ..., 1) has that L1 norm); with rho = Delta_2 / epsilon the privacy loss
  ||beta - beta'||_1 / rho is then only bounded by sqrt(d + 1) epsilon, so that calibration is
  not epsilon-DP and is not shipped (docs/privacy-model.md section 3).
- Gaussian ((epsilon, delta)): zeta ~ N(0, sigma^2 I), sigma from the analytic Gaussian
  mechanism (Balle and Wang 2018) for Delta_2.

BetaNoised (Ji & Elkan 2013) releases log w(x) = beta_tilde^T x, biased (Proposition 1):
E[exp(zeta^T x)] != 1. BetaDebiased (Proposition 2, Eq. 5) multiplies by
b(x) = 1 / E[exp(zeta^T x)] = prod_j 1 / M(x_j), with M the noise's moment generating function:
Laplace b(x) = prod_j (1 - rho^2 x_j^2) (only when rho |x_j| < 1; with the intercept this means
rho < 1, refused otherwise), Gaussian b(x) = exp(-sigma^2 ||x||^2 / 2) (supplement B.2.1-B.2.2).
The unnormalised estimate I_N(h | w*) = (1/N) sum_i w*(x_i) h(x_i) is then unbiased for
I_N(h | w_hat) and has no larger variance (B.2.4). Debiasing is post-processing of beta_tilde
and the public synthetic rows (B.2.3). With Laplace noise the debiased weights have finite
variance only when rho < 1/2 (E[exp(2 zeta_j x_j)] needs 2 rho x_j < 1); `plan` records it.

WeightNoised (supplement A.1, Theorem 2, Corollaries 1-2): noise on the N_G released log
weights beta_hat^T x_i instead. Their L1 sensitivity is Delta_2 sum_i ||x_i||_2 and their L2
sensitivity Delta_2 ||X||_2 (spectral norm of the augmented synthetic design, public because
the synthetic rows are a DP output); eta_i has E[exp(eta_i)] = 1: Laplace location log(1 - s^2)
and scale s (refused when s >= 1), Gaussian mean -s^2/2. The paper's Corollary 1 scales the
noise with the private N_D and composes N_S per-weight releases (N_S epsilon in total); the
vector sensitivities above use public quantities only and are never larger than that
composition (sum_i ||x_i|| <= N_G R). The noise grows with N_G: only usable for small N_G.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dprelease.errors import InputError
from dprelease.privacy.accounting import NEIGHBOURING
from dprelease.privacy.calibration import gaussian_sigma, laplace_scale
from dprelease.privacy.mechanisms import DESCRIPTION_KEY, Gaussian, Laplace
from dprelease.privacy.noise import NoiseSource
from dprelease.weights.base import (
    MethodSpec,
    Plan,
    PlanRequest,
    augment,
    check_number,
    require_delta,
    require_epsilon,
)
from dprelease.weights.logistic.noise import gated_log_weights, log_mgf, perturb_log_weights
from dprelease.weights.logistic.solver import (
    SOLVER,
    SOLVER_TOL,
    coefficient_sensitivity,
    fit_coefficients,
    gradient_bound,
)

MECHANISMS = ("laplace", "gaussian")
# Defaults, chosen on the toy example (synthetic uniform on [0, 1]^2, real uniform on the
# triangle x1 + x2 < 1, and a 20-feature variant), scored by the total variation between the
# normalised weights and the true ones:
# - lam = max(0.01, 4 c (d + 1) / (n0 epsilon)), c = 1 + 2e-6 the certification's factor
#   (Delta_2 = c R / (n0 lam), `logistic.solver`): 0.01 is best or near it with few features
#   (the misspecified linear logit prefers a soft boundary; smaller lam only adds noise,
#   larger lam flattens the weights), and the second term keeps the Laplace scale
#   rho = c (d + 1) / (n0 lam epsilon) <= 1/4 (never refused, finite-variance weights) and the
#   Gaussian noise on a log weight, sigma ||x|| <= sigma R, of order 1. Non-private logreg
#   uses 0.01.
# - mechanism "gaussian": the per-coordinate noise SD is sqrt(2 (d + 1)) Delta_2 / epsilon for
#   Laplace against ~3.7 Delta_2 / epsilon for the analytic Gaussian at delta = 1e-5, so
#   Gaussian wins from d + 1 > ~7 on, and its b(x) always exists.
# Measurements: docs/decisions/0022-logistic-and-neural-weights.md.
DEFAULT_LAMBDA = 0.01
LAMBDA_NOISE_FACTOR = 4.0
DEFAULT_MECHANISM = "gaussian"


@dataclass(frozen=True)
class LogisticSettings:
    """Public configuration of the L2-logistic fit: `lam` (None: `default_lambda`) and `n0`
    (None: N_G)."""

    lam: float | None = None
    n0: float | None = None

    def __post_init__(self) -> None:
        if self.lam is not None:
            check_number("lam", self.lam, high=1e12)
        if self.n0 is not None:
            check_number("n0", self.n0, high=1e15)


@dataclass(frozen=True)
class NoisedLogisticSettings(LogisticSettings):
    """Adds the noise mechanism, "laplace" (pure epsilon) or "gaussian" ((epsilon, delta)),
    and `noise_gate` (None: on for beta_debiased, off for the paper's biased beta_noised; see
    `noise_gate`)."""

    mechanism: str = DEFAULT_MECHANISM
    noise_gate: bool | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mechanism not in MECHANISMS:
            raise InputError(f"mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")


@dataclass(frozen=True)
class Calibration:
    """A noise mechanism fixed from public quantities: scale is rho (Laplace) or sigma."""

    mechanism: str
    scale: float
    sensitivity: float
    epsilon: float
    delta: float

    def record(self) -> dict:
        norm = "l1" if self.mechanism == "laplace" else "l2"
        return {
            "mechanism": self.mechanism,
            "noise_scale": self.scale,
            "noise_scale_kind": "laplace_scale" if norm == "l1" else "gaussian_std",
            "sensitivity": self.sensitivity,
            "sensitivity_norm": norm,
            "neighbouring": NEIGHBOURING,
            DESCRIPTION_KEY: (
                Laplace(self.scale, self.sensitivity)
                if norm == "l1"
                else Gaussian(self.scale, self.sensitivity)
            ).to_dict(),
        }


def default_lambda(n_features: int, n0: float, epsilon: float | None) -> float:
    """max(0.01, 4 c (d + 1) / (n0 epsilon)), c = Delta_2 n0 lam / R the certification's
    factor; 0.01 without a budget (see DEFAULT_LAMBDA)."""
    if epsilon is None:
        return DEFAULT_LAMBDA
    certified = coefficient_sensitivity(n_features, n0, 1.0) * n0 / math.sqrt(n_features + 1)
    return max(DEFAULT_LAMBDA, LAMBDA_NOISE_FACTOR * certified * (n_features + 1) / (n0 * epsilon))


def log_weight_sensitivities(x_aug: np.ndarray, delta_2: float) -> tuple[float, float]:
    """(L1, L2) sensitivity of the vector (beta_hat^T x_i)_i: Delta_2 (sum_i ||x_i||, ||X||_2).

    |x_i^T (beta - beta')| <= ||x_i|| Delta_2 row by row, and ||X (beta - beta')||_2 <=
    ||X||_2 Delta_2 with the spectral norm (supplement A.1).
    """
    l1 = delta_2 * float(np.linalg.norm(x_aug, axis=1).sum())
    l2 = delta_2 * float(np.linalg.norm(x_aug, 2))
    return l1, l2


def calibrate(
    method: str, mechanism: str, epsilon: float | None, delta: float | None, l1: float, l2: float
) -> Calibration:
    """Laplace scale for the L1 sensitivity, or analytic-Gaussian sigma for the L2 one."""
    eps = require_epsilon(method, epsilon)
    if mechanism == "laplace":
        return Calibration(mechanism, laplace_scale(l1, eps), l1, eps, 0.0)
    dlt = require_delta(method, delta)
    return Calibration(mechanism, gaussian_sigma(l2, eps, dlt), l2, eps, dlt)


# --- the four methods -------------------------------------------------------------------


@dataclass(frozen=True)
class _Resolved:
    """What `fit` needs from the plan: the objective's constants and the noise, if any."""

    lam: float
    n0: float
    g_max: float
    calibration: Calibration | None = None
    debias: bool = False
    gate: bool = False


def _fit_record(
    req: PlanRequest, settings: LogisticSettings, epsilon: float | None
) -> tuple[dict, float]:
    n0 = float(settings.n0 or req.n_synthetic)
    lam = float(settings.lam or default_lambda(req.n_features, n0, epsilon))
    g_max = gradient_bound(req.n_features, n0)
    delta_2 = coefficient_sensitivity(req.n_features, n0, lam, g_max)
    record = {
        "method": req.method,
        "lambda": lam,
        "n0": n0,
        "n_features": int(req.n_features),
        "radius": math.sqrt(req.n_features + 1),
        "coefficient_l2_sensitivity": delta_2,
        "coefficient_l2_sensitivity_kind": "certified: R/(n0 lambda) + 2 g_max/lambda",
        "gradient_norm_bound": g_max,
        "solver": SOLVER,
        "solver_tol": SOLVER_TOL,
    }
    return record, delta_2


def _plan_logreg(req: PlanRequest) -> Plan:
    s: LogisticSettings = req.settings(LogisticSettings)
    record, _ = _fit_record(req, s, None)
    return Plan(
        {**record, "non_private": True},
        _Resolved(record["lambda"], record["n0"], record["gradient_norm_bound"]),
    )


def _plan_coefficient_noise(req: PlanRequest, *, debias: bool) -> Plan:
    s: NoisedLogisticSettings = req.settings(NoisedLogisticSettings)
    record, delta_2 = _fit_record(req, s, require_epsilon(req.method, req.epsilon))
    l1 = math.sqrt(req.n_features + 1) * delta_2
    cal = calibrate(req.method, s.mechanism, req.epsilon, req.delta, l1, delta_2)
    if cal.mechanism == "laplace":
        if debias and cal.scale >= 1.0:
            raise InputError(
                f"{req.method} with Laplace noise: the coefficient noise scale rho = "
                f"{cal.scale:.4g} is >= 1, so the bias correction prod_j (1 - rho^2 x_j^2) is "
                "undefined; increase epsilon, increase lam, or use mechanism='gaussian'"
            )
        record["weight_variance_finite"] = bool(cal.scale < 0.5)
    gate = debias if s.noise_gate is None else s.noise_gate
    fields = {"debiased": debias, "noise_on": "coefficients", "noise_gate_enabled": gate}
    return _private_plan(record, cal, fields, debias=debias, gate=gate)


def _plan_weight_noise(req: PlanRequest) -> Plan:
    s: NoisedLogisticSettings = req.settings(NoisedLogisticSettings)
    if req.synthetic is None:
        raise InputError(
            "weight_noised is calibrated on the public synthetic design matrix: pass synthetic="
        )
    record, delta_2 = _fit_record(req, s, require_epsilon(req.method, req.epsilon))
    l1, l2 = log_weight_sensitivities(augment(req.synthetic), delta_2)
    cal = calibrate(req.method, s.mechanism, req.epsilon, req.delta, l1, l2)
    if cal.mechanism == "laplace" and cal.scale >= 1.0:
        raise InputError(
            f"weight_noised with Laplace noise: the log-weight noise scale s = {cal.scale:.4g} "
            "is >= 1, so no location makes E[exp(eta)] = 1; increase epsilon or lam, release "
            "fewer synthetic rows, or use beta_debiased"
        )
    fields = {
        "debiased": True,
        "noise_on": "log_weights",
        "log_weight_l1_sensitivity": l1,
        "log_weight_l2_sensitivity": l2,
        "noise_location": -float(log_mgf(cal.mechanism, cal.scale, 1.0)),
    }
    return _private_plan(record, cal, fields)


def _private_plan(record: dict, cal: Calibration, fields: dict, **resolved: bool) -> Plan:
    """A private method's plan: its record with the noise calibration and `fields`, the
    resolved settings (`debias`, `gate`) and the calibrated spend."""
    record.update(cal.record(), non_private=False, **fields)
    constants = (record["lambda"], record["n0"], record["gradient_norm_bound"])
    return Plan(record, _Resolved(*constants, cal, **resolved), cal.epsilon, cal.delta)


def _fit_logreg(real, synthetic, plan: Plan, noise: NoiseSource) -> tuple[np.ndarray, dict]:
    r: _Resolved = plan.settings
    return augment(synthetic) @ fit_coefficients(real, synthetic, r.lam, r.n0, r.g_max), {}


def _fit_coefficient_noise(real, synthetic, plan: Plan, noise: NoiseSource):
    r: _Resolved = plan.settings
    beta_hat = fit_coefficients(real, synthetic, r.lam, r.n0, r.g_max)
    cal = r.calibration
    assert cal is not None  # a private method's plan is calibrated
    return gated_log_weights(
        beta_hat,
        augment(synthetic),
        cal.mechanism,
        cal.scale,
        noise,
        debias=r.debias,
        gate=r.gate,
    )


def _fit_weight_noise(real, synthetic, plan: Plan, noise: NoiseSource):
    r: _Resolved = plan.settings
    log_w_hat = augment(synthetic) @ fit_coefficients(real, synthetic, r.lam, r.n0, r.g_max)
    cal = r.calibration
    assert cal is not None  # a private method's plan is calibrated
    return perturb_log_weights(log_w_hat, cal.mechanism, cal.scale, noise), {}


LOGREG = MethodSpec("logreg", "non_private", _plan_logreg, _fit_logreg)
BETA_NOISED = MethodSpec(
    "beta_noised",
    "private",
    lambda req: _plan_coefficient_noise(req, debias=False),
    _fit_coefficient_noise,
)
BETA_DEBIASED = MethodSpec(
    "beta_debiased",
    "private",
    lambda req: _plan_coefficient_noise(req, debias=True),
    _fit_coefficient_noise,
)
WEIGHT_NOISED = MethodSpec("weight_noised", "private", _plan_weight_noise, _fit_weight_noise)
