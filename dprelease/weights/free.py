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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dprelease.errors import InputError
from dprelease.weights.base import MethodSpec, Plan, PlanRequest


@runtime_checkable
class Discriminator(Protocol):
    """A DP-trained discriminator exposing its logit, log(D(x) / (1 - D(x)))."""

    def logit(self, x: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class DiscriminatorSettings:
    discriminator: Any = None

    def __post_init__(self) -> None:
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
    }
    return Plan(record, s)


def _fit_discriminator(real, synthetic, plan: Plan, noise) -> tuple[np.ndarray, dict]:
    return discriminator_logits(plan.settings, synthetic), {}


@dataclass(frozen=True)
class _NoOptions:
    pass


NONE = MethodSpec("none", "free", _plan_none, _fit_none, uses_real=False)
DISCRIMINATOR = MethodSpec(
    "discriminator", "free", _plan_discriminator, _fit_discriminator, uses_real=False
)
