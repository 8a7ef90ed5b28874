"""Sources of differential-privacy noise: every mechanism adds its noise to its values here.

docs/privacy-model.md section 9: DP noise is drawn from an unpredictable source (OS entropy) and
never from a user seed; a user seed may fix only post-processing and synthetic sampling.
`NoiseSource()` therefore takes no seed. The API takes the VALUES a mechanism releases and
returns them noised, so that the secure mode can apply OpenDP's measurements to the values
themselves:

- `add_laplace(values, scale)`, `add_gaussian(values, sigma)`: values plus iid noise;
  `counts=True` for integer counts (secure mode then returns integers).
- `noisy_max(scores, epsilon, sensitivity)`: an epsilon-DP choice of an index.
- `permutation(n)`: a uniformly random order (row selection).

Default mode: numpy's PCG64 seeded from 128 bits of OS entropy
(`numpy.random.SeedSequence()` without arguments reads `secrets.randbits`); Laplace and
Gaussian noise drawn in floating point and added to the values; the selection is the
exponential mechanism by the Gumbel-max trick.

Secure mode (`NoiseSource(secure=True)`, `--secure-noise`): OpenDP's measurements applied to
the values themselves (docs/decisions/0027-secure-noise.md). Noise drawn on zeros and added in
floating point is not secure: fl(x + z) keeps the floating-point grid of x (Mironov 2012).
Under Laplace(1), every output of fl(0.3 + z) in (-0.2, 0.1) is a multiple of 2^-55, while 23 %
of those of fl(0.1 + z) are not (measured on 200,000 draws; 3.2 % of all outputs below 0.1):
one such output proves x != 0.3 (tests/test_privacy_calibration.py checks the event). OpenDP's
`make_laplace` / `make_gaussian` on floats add exact discrete Laplace / Gaussian noise on the
grid 2^-1074 (every float is a multiple of it, so the input is not rounded:
`map(d) = d / scale` exactly) to the exact input and round the exact sum once, so any float
can come out whatever the input's grid (53 % of the outputs in that interval are off the 2^-55
grid from 0.3 as from 0.1). Their privacy curve is the continuous mechanism's up to terms of
order 2^-1074 / scale, far below the float64 resolution of the accountants, so the ledger's
Laplace and Gaussian descriptions stay valid.
Counts (`counts=True`) get integer-valued noise: the same measurement applied to the count,
rounded to the nearest integer (post-processing, so the Laplace / Gaussian description of
the count stays exact; the rounding adds about 1/12 to the noise variance). OpenDP's
integer Laplace would be the geometric mechanism, equally (D / b)-DP, but for sensitivity 1
its privacy-loss distribution is that of randomized response, larger at every Rényi order
than the continuous Laplace's that the ledger composes: the description would have to change
with the noise mode, so it is not used.
The selection uses OpenDP's `make_noisy_max` (report noisy max with exponential noise, i.e.
permute-and-flip; McKenna and Sheldon 2020, Ding et al. 2021), epsilon-DP at scale
2 sensitivity / epsilon, like the default mode's exponential mechanism. A permutation has no
floating-point representation to attack; it comes from the OS-entropy generator in both modes.
Secure mode is slower (about 2.4 s per 100,000 float values, 1 s per 100,000 counts on the
2-core reference machine, vectorised measurements over a vector domain).

Every mechanism in dprelease receives its noise from one of these objects, so the only way
to make noise reproducible is a subclass written in a test (see tests/conftest.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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

    def add_laplace(self, values: Any, scale: float, *, counts: bool = False) -> np.ndarray:
        """values + iid Laplace(0, scale) noise (density exp(-|z|/scale) / (2 scale))."""
        _check_scale(scale, "Laplace scale")
        values = _values(values, counts)
        if self.secure:
            return _opendp_apply("laplace", values, scale, counts)
        return values + self._rng.laplace(0.0, scale, values.shape)

    def add_gaussian(self, values: Any, sigma: float, *, counts: bool = False) -> np.ndarray:
        """values + iid N(0, sigma^2) noise."""
        _check_scale(sigma, "Gaussian standard deviation")
        values = _values(values, counts)
        if self.secure:
            return _opendp_apply("gaussian", values, sigma, counts)
        return values + self._rng.normal(0.0, sigma, values.shape)

    def noisy_max(self, scores: np.ndarray, epsilon: float, sensitivity: float) -> int:
        """An epsilon-DP choice of the index of a large score, for scores of this sensitivity.

        Default: the exponential mechanism (McSherry and Talwar 2007), P(j) proportional to
        exp(epsilon S_j / (2 sensitivity)), by Gumbel-max (-log E, E ~ Exp(1)). Secure: OpenDP's
        report noisy max with exponential noise at scale 2 sensitivity / epsilon.
        """
        _check_scale(epsilon, "epsilon")
        _check_scale(sensitivity, "score sensitivity")
        scores = np.asarray(scores, dtype=float)
        if self.secure:
            return _opendp_noisy_max(scores, 2.0 * sensitivity / epsilon)
        with np.errstate(divide="ignore"):  # Exp(1) = 0 (probability 2^-53) gives +inf
            gumbel = -np.log(self._rng.exponential(1.0, scores.shape))
        return int(np.argmax(epsilon * scores / (2 * sensitivity) + gumbel))

    def permutation(self, n: int) -> np.ndarray:
        """A uniformly random permutation of range(n) (OS entropy in both modes): the order of
        n iid N(0, 1) draws, whose ranks are uniform (the draws the row selection always used,
        so seeded test sources keep their streams)."""
        return np.argsort(self._rng.normal(0.0, 1.0, n), kind="stable")


def _check_scale(scale: float, what: str) -> None:
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"{what} must be a positive finite number, got {scale!r}")


def _values(values: Any, counts: bool) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError("noise is added to finite values only")
    if counts and not np.array_equal(values, np.round(values)):
        raise ValueError("counts=True needs integer-valued counts")
    return values


def _opendp_apply(kind: str, values: np.ndarray, scale: float, counts: bool) -> np.ndarray:
    """OpenDP's vector Laplace/Gaussian measurement applied to the values (module docstring);
    rounded to integers for counts. OpenDP is imported here, not at module import, to keep
    `import dprelease` fast."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    if values.size == 0:
        return values.copy()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=values.size)
    if kind == "laplace":
        measurement = dp.m.make_laplace(domain, dp.l1_distance(T=float), scale)
    else:
        measurement = dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale)
    noisy = np.asarray(measurement(values.ravel().tolist()), dtype=float).reshape(values.shape)
    return np.rint(noisy) if counts else noisy


def _opendp_noisy_max(scores: np.ndarray, scale: float) -> int:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    measurement = dp.m.make_noisy_max(domain, dp.linf_distance(T=float), dp.max_divergence(), scale)
    return int(measurement(scores.tolist()))
