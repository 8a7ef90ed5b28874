"""Sources of differential-privacy noise.

PRIVACY_MODEL.md section 9: DP noise is drawn from an unpredictable source (OS entropy) and
never from a user seed; a user seed may fix only post-processing and synthetic sampling.
`NoiseSource()` therefore takes no seed. Its default sampler is numpy's PCG64 seeded from
128 bits of OS entropy (`numpy.random.SeedSequence()` without arguments reads
`secrets.randbits`). `NoiseSource(secure=True)` draws with OpenDP's samplers instead, which
sample exactly on the floating-point grid and resist the floating-point attacks of
Mironov (2012) on textbook Laplace/Gaussian sampling; they are slower.

Every mechanism in dprelease receives its noise from one of these objects, so the only way
to make noise reproducible is a subclass written in a test (see tests/conftest.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class NoiseSource:
    """Laplace and Gaussian noise for DP mechanisms; never seeded by the user."""

    secure: bool = False
    _rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence()))

    @property
    def kind(self) -> str:
        """A public description recorded in the manifest (never the seed)."""
        return "opendp" if self.secure else "os-entropy-pcg64"

    def laplace(self, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
        """iid Laplace(0, scale) noise; density exp(-|z|/scale) / (2 scale)."""
        _check_scale(scale, "Laplace scale")
        if self.secure:
            return _opendp_sample("laplace", scale, size)
        return self._rng.laplace(0.0, scale, size)

    def gaussian(self, sigma: float, size: int | tuple[int, ...]) -> np.ndarray:
        """iid N(0, sigma^2) noise."""
        _check_scale(sigma, "Gaussian standard deviation")
        if self.secure:
            return _opendp_sample("gaussian", sigma, size)
        return self._rng.normal(0.0, sigma, size)


def _check_scale(scale: float, what: str) -> None:
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"{what} must be a positive finite number, got {scale!r}")


def _opendp_sample(kind: str, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
    """Draw noise with OpenDP's vector Laplace/Gaussian measurement applied to zeros.

    OpenDP is imported here, not at module import, to keep `import dprelease` fast.
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    shape = (size,) if isinstance(size, int) else tuple(size)
    count = int(np.prod(shape))
    if count == 0:
        return np.zeros(shape)
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=count)
    if kind == "laplace":
        measurement = dp.m.make_laplace(domain, dp.l1_distance(T=float), scale)
    else:
        measurement = dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale)
    return np.asarray(measurement([0.0] * count), dtype=float).reshape(shape)
