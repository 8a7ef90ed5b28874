"""Weights that cost no privacy budget: uniform weights and DP-GAN discriminator weights.

`none` returns log weight 0 for every synthetic row (the naive estimator) and never reads
the real rows.

`discriminator` (paper section 3.5, docs/privacy-model.md section 5): a GAN discriminator trained
with DP whose output is D(x) = P(real | x) (sigmoid, BCE loss) gives log w(x) = logit D(x) up
to the constant log(N_D / N_G), removed by self-normalisation. It is post-processing of the
generator's DP output, so it spends nothing, and the real rows are not read. A Wasserstein
critic has no probabilistic output and does not qualify. The option `discriminator` is either
an object with `logit(x)` (preferred: no saturation) or a plain callable returning
P(real | x); both take the encoded synthetic matrix.

Tempering (a DP-GAN's discriminator weights can have a k-hat far above the gate's threshold:
16.9 at epsilon 1; docs/decisions/0021-bounded-weights-and-the-psis-gate.md). As the calibration
weights do (`weights.calibration`), the logits are tempered, w^t, with the largest t in [0, 1]
whose ESS is at least `ess_floor` x N_G (default 0: no ESS floor), then further (t times 0.8 per
step, down to 0.05) while the release's PSIS gate (`diagnostics.gate`) calls them unreliable,
and made flat (uniform weights, the naive estimator) if it still does
(`tilting.temper_weights`). Post-processing of DP outputs: no privacy cost; the details record t
and why weights were made flat. So the default path never spends and then refuses for these
weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dprelease.errors import InputError
from dprelease.weights.base import MethodSpec, Plan, PlanRequest, check_number


@runtime_checkable
class Discriminator(Protocol):
    """A DP-trained discriminator exposing its logit, log(D(x) / (1 - D(x)))."""

    def logit(self, x: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class DiscriminatorSettings:
    """`discriminator` (required, see the module docstring) and `ess_floor` (fraction of N_G
    the tempered weights' ESS must reach; 0: only the PSIS gate tempers them)."""

    discriminator: Any = None
    ess_floor: float = 0.0

    def __post_init__(self) -> None:
        check_number("ess_floor", self.ess_floor, low=-1e-12, high=1.0)
        if not (isinstance(self.discriminator, Discriminator) or callable(self.discriminator)):
            raise InputError(
                "method 'discriminator' needs option discriminator=: an object with "
                "logit(x) or a callable returning P(real | x)"
            )

    @property
    def output(self) -> str:
        return "logit" if isinstance(self.discriminator, Discriminator) else "probability"


def discriminator_logits(settings: DiscriminatorSettings, synthetic: np.ndarray) -> np.ndarray:
    d = settings.discriminator
    if settings.output == "logit":
        logits = np.asarray(d.logit(synthetic), dtype=float).reshape(-1)
    else:
        p = np.asarray(d(synthetic), dtype=float).reshape(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            logits = np.log(p) - np.log1p(-p)
    if logits.shape[0] != synthetic.shape[0]:
        raise InputError("the discriminator must return one value per synthetic row")
    if not np.isfinite(logits).all():
        raise InputError(
            "the discriminator returned probabilities of exactly 0 or 1 (or NaN); expose its "
            "logits with a logit(x) method"
        )
    return logits


def _plan_none(req: PlanRequest) -> Plan:
    req.settings(_NoOptions)
    return Plan({"method": req.method, "non_private": False, "reads_real_data": False}, None)


def _fit_none(real, synthetic, plan, noise) -> tuple[np.ndarray, dict]:
    return np.zeros(synthetic.shape[0]), {}


def _plan_discriminator(req: PlanRequest) -> Plan:
    s: DiscriminatorSettings = req.settings(DiscriminatorSettings)
    record = {
        "method": req.method,
        "non_private": False,
        "reads_real_data": False,
        "post_processing": True,
        "discriminator_output": s.output,
        "ess_floor": s.ess_floor,
    }
    return Plan(record, s)


def _fit_discriminator(real, synthetic, plan: Plan, noise) -> tuple[np.ndarray, dict]:
    """The logits, tempered until the PSIS gate accepts them, else flat (module docstring)."""
    from dprelease.weights.calibration.tilting import temper_weights

    logits = discriminator_logits(plan.settings, synthetic)
    temper = temper_weights(logits, plan.settings.ess_floor, None)
    if temper == 0.0:
        reason = "no tempering gave weights PSIS calls reliable"
        return np.zeros_like(logits), {"temper": 0.0, "flat_reason": reason}
    return temper * logits, {"temper": temper, "flat_reason": None}  # the same keys either way


@dataclass(frozen=True)
class _NoOptions:
    pass


NONE = MethodSpec("none", "free", _plan_none, _fit_none, uses_real=False)
DISCRIMINATOR = MethodSpec(
    "discriminator", "free", _plan_discriminator, _fit_discriminator, uses_real=False
)
