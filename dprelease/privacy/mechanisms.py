"""Typed, JSON-serialisable descriptions of DP mechanisms, for the ledger's accountants.

A ledger entry's (epsilon, delta) is all basic composition needs; a tight accountant needs to
know WHICH mechanism ran (docs/privacy-model.md section 7). Each class below describes one
mechanism (or a fixed composition of identical ones) by its public parameters, under
add/remove-one neighbouring (docs/privacy-model.md section 1):

- `Laplace(scale, l1_sensitivity)`: Laplace noise of scale b on a query of L1 sensitivity
  D; pure (D / b)-DP (Dwork et al. 2006).
- `Gaussian(sigma, l2_sensitivity)`: Gaussian noise of standard deviation sigma on a query of
  L2 sensitivity D (Balle and Wang 2018 for its exact privacy curve).
- `PoissonSubsampledGaussian(noise_multiplier, sample_rate, steps)`: DP-SGD, T steps of the
  Gaussian mechanism with sensitivity 1 and std sigma on a Poisson sample of rate q
  (Abadi et al. 2016; Mironov et al. 2019).
- `PureEpsilon(epsilon, count=1)`: `count` adaptively composed epsilon-DP mechanisms of any
  form (exponential mechanism, sparse vector, parallel composition of Laplace releases where
  every row is in one release). Accountants may only use the pure-DP guarantee.
- `ZCDP(rho)`: a rho-zCDP mechanism (Bun and Steinke 2016), e.g. OpenDP's AIM and MST.
- `ApproxDP(epsilon, delta)`: only an (epsilon, delta)-DP guarantee is known.

`mechanism_to_dict` / `mechanism_from_dict` (or each class's `to_dict` / `from_dict`) give
the JSON form stored in the ledger: the field values plus `"kind"`. A record of public
parameters (a weight method's plan) carries it under `DESCRIPTION_KEY`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import ClassVar, Self

KIND_KEY = "kind"
# Where a JSON record of public parameters (e.g. a weight method's plan) carries its description.
DESCRIPTION_KEY = "mechanism_description"


def _positive(owner: str, name: str, value: float) -> None:
    if isinstance(value, bool) or not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{owner}: {name} must be a positive finite number, got {value!r}")


class _Description:
    """Shared JSON round trip of the mechanism dataclasses."""

    kind: ClassVar[str]

    def to_dict(self) -> dict:
        return {KIND_KEY: self.kind, **asdict(self)}  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict) -> Self:
        if data.get(KIND_KEY) != cls.kind:
            raise ValueError(f"not a {cls.kind} description: {data!r}")
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - names - {KIND_KEY}
        if unknown:
            raise ValueError(f"{cls.kind}: unknown fields {sorted(unknown)}")
        return cls(**{name: data[name] for name in names if name in data})


@dataclass(frozen=True)
class Laplace(_Description):
    """Laplace noise of scale `scale` on a query of L1 sensitivity `l1_sensitivity`."""

    kind: ClassVar[str] = "laplace"
    scale: float
    l1_sensitivity: float

    def __post_init__(self) -> None:
        _positive(self.kind, "scale", self.scale)
        _positive(self.kind, "l1_sensitivity", self.l1_sensitivity)

    @property
    def epsilon(self) -> float:
        """Its pure-DP epsilon, D / b."""
        return self.l1_sensitivity / self.scale


@dataclass(frozen=True)
class Gaussian(_Description):
    """Gaussian noise of standard deviation `sigma` on a query of L2 sensitivity D."""

    kind: ClassVar[str] = "gaussian"
    sigma: float
    l2_sensitivity: float

    def __post_init__(self) -> None:
        _positive(self.kind, "sigma", self.sigma)
        _positive(self.kind, "l2_sensitivity", self.l2_sensitivity)


@dataclass(frozen=True)
class PoissonSubsampledGaussian(_Description):
    """DP-SGD: `steps` Gaussian steps (std = noise_multiplier x clip) on Poisson samples."""

    kind: ClassVar[str] = "poisson_subsampled_gaussian"
    noise_multiplier: float
    sample_rate: float
    steps: int

    def __post_init__(self) -> None:
        _positive(self.kind, "noise_multiplier", self.noise_multiplier)
        _positive(self.kind, "sample_rate", self.sample_rate)
        if self.sample_rate > 1:
            raise ValueError(f"{self.kind}: sample_rate must be in (0, 1]")
        if isinstance(self.steps, bool) or int(self.steps) != self.steps or self.steps < 1:
            raise ValueError(f"{self.kind}: steps must be a positive integer")
        object.__setattr__(self, "steps", int(self.steps))


@dataclass(frozen=True)
class PureEpsilon(_Description):
    """`count` adaptively composed mechanisms, each `epsilon`-DP (no other structure used)."""

    kind: ClassVar[str] = "pure_epsilon"
    epsilon: float
    count: int = 1

    def __post_init__(self) -> None:
        _positive(self.kind, "epsilon", self.epsilon)
        if isinstance(self.count, bool) or int(self.count) != self.count or self.count < 1:
            raise ValueError(f"{self.kind}: count must be a positive integer")
        object.__setattr__(self, "count", int(self.count))


@dataclass(frozen=True)
class ZCDP(_Description):
    """A rho-zero-concentrated-DP mechanism: Renyi DP of order a at most rho * a."""

    kind: ClassVar[str] = "zcdp"
    rho: float

    def __post_init__(self) -> None:
        _positive(self.kind, "rho", self.rho)


@dataclass(frozen=True)
class ApproxDP(_Description):
    """Only an (epsilon, delta)-DP guarantee is known (the fallback description)."""

    kind: ClassVar[str] = "approx_dp"
    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        if not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"{self.kind}: epsilon must be finite and >= 0")
        if not 0 <= self.delta < 1:
            raise ValueError(f"{self.kind}: delta must be in [0, 1)")


Mechanism = Laplace | Gaussian | PoissonSubsampledGaussian | PureEpsilon | ZCDP | ApproxDP
KINDS: dict[str, type[Mechanism]] = {
    cls.kind: cls
    for cls in (Laplace, Gaussian, PoissonSubsampledGaussian, PureEpsilon, ZCDP, ApproxDP)
}


def mechanism_to_dict(mechanism: Mechanism) -> dict:
    """The JSON form of a description (its fields plus `kind`)."""
    return mechanism.to_dict()


def mechanism_from_dict(data: dict | None) -> Mechanism | None:
    """Parse a stored description; None stays None (entries written before descriptions)."""
    if data is None:
        return None
    try:
        cls = KINDS[data[KIND_KEY]]
    except (KeyError, TypeError):
        raise ValueError(f"not a mechanism description: {data!r}") from None
    return cls.from_dict(data)
