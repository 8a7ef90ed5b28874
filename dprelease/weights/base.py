"""What every weight estimator shares: the result type, normalisation and input checks.

Importance weights (paper section 2, Eq. 2) are w(x) = p_D(x) / p_G(x) for synthetic rows
x ~ p_G. Every estimator returns unnormalised log weights, one per synthetic row; the release
uses them self-normalised over the synthetic rows (mean weight 1). Self-normalisation is why
the constant log(N_D / N_G) of the classifier odds (paper section 3.2) can be dropped: N_D is
private (docs/privacy-model.md section 1) and a constant shift of every log weight cancels.

Error messages name the matrix and the kind of problem, never values or counts of the real
table (dprelease/errors.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dprelease.errors import InputError

if TYPE_CHECKING:
    from dprelease.privacy.noise import NoiseSource


@dataclass(frozen=True)
class WeightEstimate:
    """Log weights of the synthetic rows and what producing them cost.

    `details` holds public, JSON-serialisable facts only (method, calibration, accountant
    parameters, configuration); never anything computed from the real rows without privacy.
    """

    log_weights: np.ndarray
    epsilon_spent: float
    delta_spent: float
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def weights(self) -> np.ndarray:
        """Self-normalised weights: mean 1 over the synthetic rows."""
        from dprelease.diagnostics.psis.smoothing import normalised_weights

        return normalised_weights(self.log_weights)

    @property
    def log_weight_max(self) -> float | None:
        """A bound on every log weight the method can produce, for any row of the public
        domain, when the method certifies one (`details["log_weight_max"]`); else None."""
        return self.details.get("log_weight_max")


@dataclass(frozen=True)
class Plan:
    """The public calibration of one run, fixed before any real row is read.

    `record` is what the ledger reservation and `WeightEstimate.details` carry; `settings` is
    the method's parsed configuration (may hold non-JSON objects such as a discriminator).
    """

    record: dict[str, Any]
    settings: Any
    epsilon_spent: float = 0.0
    delta_spent: float = 0.0

    def public(self) -> dict[str, Any]:
        return {**self.record, "epsilon_spent": self.epsilon_spent, "delta_spent": self.delta_spent}


def require_epsilon(method: str, epsilon: float | None) -> float:
    if epsilon is None or not (_is_number(epsilon) and epsilon > 0 and math.isfinite(epsilon)):
        raise InputError(
            f"method {method!r} is differentially private and needs a positive finite epsilon"
        )
    return float(epsilon)


def require_delta(method: str, delta: float | None) -> float:
    if delta is None or not (_is_number(delta) and 0 < delta < 1):
        raise InputError(
            f"method {method!r} uses a Gaussian mechanism and needs 0 < delta < 1 "
            "(choose it well below 1 / (number of real rows))"
        )
    return float(delta)


def check_matrix(
    name: str, x: Any, n_features: int | None = None, *, allow_empty: bool = False
) -> np.ndarray:
    """A finite float matrix with every value in [0, 1], non-empty unless `allow_empty` (the
    real rows: under `--on-invalid-rows drop` a table may lose every row, and the release
    must still publish, docs/privacy-model.md section 3).

    The sensitivity bounds (R = sqrt(d + 1), docs/privacy-model.md section 2) rely on the range,
    so values outside it are refused rather than clipped here: encoding clips with the schema.
    """
    if x is None:
        raise InputError(f"{name}: a matrix is required")
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 2 or (arr.shape[0] == 0 and not allow_empty) or arr.shape[1] == 0:
        raise InputError(f"{name}: expected a non-empty 2-D matrix (rows x encoded features)")
    if n_features is not None and arr.shape[1] != n_features:
        raise InputError(
            f"{name}: has a different number of encoded features than the synthetic matrix"
        )
    if not np.isfinite(arr).all():
        raise InputError(f"{name}: contains NaN or infinite values")
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        raise InputError(
            f"{name}: values outside [0, 1]; encode with the schema's public bounds first "
            "(the sensitivity bound assumes every feature lies in [0, 1])"
        )
    return arr


def augment(x: np.ndarray) -> np.ndarray:
    """Append the intercept feature 1 (docs/privacy-model.md section 2): ||x||_2 <= sqrt(d + 1)."""
    return np.hstack([x, np.ones((x.shape[0], 1))])


def check_number(
    name: str, value: Any, *, low: float = 0.0, high: float = math.inf, integer: bool = False
) -> None:
    """Refuse an option unless it is a (integer) number with low < value <= high."""
    kind = int | np.integer if integer else int | float | np.integer | np.floating
    if not (isinstance(value, kind) and not isinstance(value, bool) and low < value <= high):
        what = "an integer" if integer else "a number"
        bound = f"in ({low:g}, {high:g}]" if math.isfinite(high) else f"> {low:g}"
        raise InputError(f"option {name} must be {what} {bound}, got {value!r}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


@dataclass(frozen=True)
class PlanRequest:
    """Public inputs of a plan: never the real rows (the synthetic matrix is public)."""

    method: str
    epsilon: float | None
    delta: float | None
    n_features: int
    n_synthetic: int
    options: dict[str, Any]
    synthetic: np.ndarray | None = None

    def settings(self, cls: type) -> Any:
        """Parse `options` into the method's settings dataclass; unknown names are refused."""
        try:
            return cls(**self.options)
        except TypeError as exc:
            raise InputError(f"method {self.method!r}: {exc}") from None


Fit = Callable[[np.ndarray | None, np.ndarray, Plan, "NoiseSource"], tuple[np.ndarray, dict]]


@dataclass(frozen=True)
class MethodSpec:
    """One weight estimator: a public `plan` and a `fit(real, synthetic, plan, noise)`.

    `budget` is "private" (spends epsilon/delta), "non_private" (benchmark only, the release
    flow refuses it) or "free" (never reads the real rows, or post-processes a DP output).
    `fit` returns the log weights and extra public details. A private method whose noise
    does not come from the `NoiseSource` it is given (DP-SGD draws in Opacus' optimizer)
    must say where it came from in the details' `noise_source`; otherwise `estimate`
    records the `NoiseSource`'s kind. A `chunked` method also takes the real rows as an
    iterable of encoded chunks (the streaming release) and checks each chunk itself.
    `extra` names the optional dependency group (pyproject's extras) the method needs.
    """

    name: str
    budget: Literal["private", "non_private", "free"]
    plan: Callable[[PlanRequest], Plan]
    fit: Fit
    uses_real: bool = True
    chunked: bool = False
    extra: str | None = None
