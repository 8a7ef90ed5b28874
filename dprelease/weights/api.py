"""`estimate` and `plan`: one calibration path from public quantities to the fitted weights."""

from __future__ import annotations

from typing import Any

import numpy as np

from dprelease.errors import InputError, require
from dprelease.privacy.noise import NoiseSource
from dprelease.weights.base import (
    MethodSpec,
    PlanRequest,
    WeightEstimate,
    check_matrix,
    check_number,
)
from dprelease.weights.calibration.method import CALIBRATION
from dprelease.weights.free import DISCRIMINATOR, NONE
from dprelease.weights.logistic.method import BETA_DEBIASED, BETA_NOISED, LOGREG, WEIGHT_NOISED
from dprelease.weights.neural import DP_MLP, MLP

_SPECS = (
    NONE,
    LOGREG,
    BETA_NOISED,
    BETA_DEBIASED,
    WEIGHT_NOISED,
    MLP,
    DP_MLP,
    DISCRIMINATOR,
    CALIBRATION,
)
_REGISTRY: dict[str, MethodSpec] = {spec.name: spec for spec in _SPECS}
METHODS = tuple(_REGISTRY)
PRIVATE_METHODS = tuple(name for name, s in _REGISTRY.items() if s.budget == "private")
NON_PRIVATE_METHODS = tuple(name for name, s in _REGISTRY.items() if s.budget == "non_private")
CHUNKED_METHODS = tuple(name for name, s in _REGISTRY.items() if s.chunked)
# Methods whose public feature map needs the schema's `Encoder` (option encoder=).
ENCODER_METHODS = (CALIBRATION.name,)


def _spec(method: str) -> MethodSpec:
    try:
        spec = _REGISTRY[method]
    except (KeyError, TypeError):
        raise InputError(f"unknown weight method {method!r}; choose one of {METHODS}") from None
    require_extra(method)
    return spec


def require_extra(method: str) -> None:
    """InputError naming the extra to install when the method's optional dependency is
    missing (nothing for unknown methods and those that need none)."""
    spec = _REGISTRY.get(method)
    if spec is not None and spec.extra is not None:
        require(spec.extra, f"weight method {method!r}")


def _request(
    spec: MethodSpec,
    epsilon: float | None,
    delta: float | None,
    n_features: int,
    n_synthetic: int,
    options: dict[str, Any],
    synthetic: np.ndarray | None,
) -> PlanRequest:
    if spec.budget != "private":
        epsilon = delta = None
    return PlanRequest(spec.name, epsilon, delta, n_features, n_synthetic, options, synthetic)


def plan(
    method: str,
    epsilon: float | None,
    delta: float | None,
    n_features: int,
    n_synthetic: int,
    **options: Any,
) -> dict[str, Any]:
    """The public calibration of `estimate(method, ...)`, computed before any data is read.

    Returns the mechanism, noise scale, sensitivity, accountant parameters, configuration and
    the planned `epsilon_spent` / `delta_spent`, for the ledger reservation. Refusals
    (missing budget, Laplace correction undefined, bad options) are raised here. For
    `weight_noised` pass the public synthetic matrix as `synthetic=` (its sensitivity is
    computed on the synthetic design).
    """
    spec = _spec(method)
    check_number("n_features", n_features, integer=True, high=1e9)
    check_number("n_synthetic", n_synthetic, integer=True, high=1e12)
    synthetic = options.pop("synthetic", None)
    if synthetic is not None:
        synthetic = check_matrix("synthetic", synthetic, n_features)
        if synthetic.shape[0] != n_synthetic:
            raise InputError("synthetic: row count differs from n_synthetic")
    req = _request(spec, epsilon, delta, n_features, n_synthetic, options, synthetic)
    return spec.plan(req).public()


def estimate(
    method: str,
    real: Any,
    synthetic: Any,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    noise: NoiseSource | None = None,
    **options: Any,
) -> WeightEstimate:
    """Importance weights of the synthetic rows, debiased where applicable.

    `real` and `synthetic` are encoded matrices in [0, 1] (rows x features, no intercept);
    a chunked method (`calibration`) also takes `real` as an iterable of encoded chunks.
    The plan (calibration) is computed first from public quantities only, exactly as `plan`
    computes it; then the real rows are checked and the method fits. Non-private methods and
    the free ones ignore epsilon and delta and spend nothing.
    """
    spec = _spec(method)
    x_syn = check_matrix("synthetic", synthetic)
    req = _request(spec, epsilon, delta, x_syn.shape[1], x_syn.shape[0], options, x_syn)
    fixed = spec.plan(req)
    if not spec.uses_real:
        x_real = None
    elif spec.chunked and not isinstance(real, np.ndarray):
        x_real = real  # chunks, checked one by one as the method reads them
    else:
        x_real = check_matrix("real", real, x_syn.shape[1], allow_empty=True)
    noise = noise if noise is not None else NoiseSource()
    log_weights, extra = spec.fit(x_real, x_syn, fixed, noise)
    details = {**fixed.public(), **extra}
    if spec.budget == "private" and "noise_source" not in extra:
        details["noise_source"] = noise.kind  # the method drew its noise from `noise`
    return WeightEstimate(
        np.asarray(log_weights, dtype=float), fixed.epsilon_spent, fixed.delta_spent, details
    )
