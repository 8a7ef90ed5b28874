"""The private part of ABCDP: DP row count, sparse vector technique, flip probability.

Spec abcdp.md sections 3-5; Park et al. (ABCDP), Algorithm 1, Theorem 4.1, Lemma 4.2,
Proposition 4.2.

SVT (`svt_below_threshold`), for sensitivity Delta of each query and total epsilon:

    b = (c + 1) Delta / epsilon   RESAMPLE = False  (Lyu, Su, Li 2017, Alg. 1)
    b = 2 c Delta / epsilon       RESAMPLE = True   (Dwork and Roth 2014, Alg. 2 "Sparse")
    eps_hat = eps_abc + Lap(b); for t = 1..T: accept t iff rho_t + Lap(2b) <= eps_hat
    (fresh query noise every t; fresh threshold after each acceptance if RESAMPLE); stop at c.

The cost is the full epsilon whatever the number of acceptances (pitfall 7). Query noise is
Lap(2b), not Lap(b): with Lap(b) the c = 1 case is not epsilon-DP (the classic bug;
tests/test_abcdp_privacy.py computes the exact output distribution and shows both).

Secret state: the noisy threshold, the query noises and the distances stay local to
`svt_below_threshold`; it returns only the accepted indices and how many queries it consumed
(the stop index), which are the DP output.

DP row count (docs/abcdp.md 5.3): n~ = N_D + Lap(1/eps_count) (add/remove sensitivity 1). The paper
normalises by the private N and calibrates b with it, which is not DP when N is private
(docs/abcdp.md 5.1); here Delta = 1/n_hat with the public n_hat = n~, so the release is
(eps_count + eps_svt)-DP by adaptive composition.

Hand-written: the SVT of dp-accounting/OpenDP does not take a lazily generated query stream
with an early stop at c in the "below threshold" direction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from dprelease.privacy.calibration import laplace_scale
from dprelease.privacy.noise import NoiseSource


def svt_noise_scale(c: int, sensitivity: float, epsilon: float, resample: bool) -> float:
    """Threshold noise scale b of Theorem 4.1 solved for b; the query noise is 2b."""
    if c < 1:
        raise ValueError("the number of samples c must be >= 1")
    multiplier = 2 * c if resample else c + 1
    return laplace_scale(multiplier * sensitivity, epsilon)


@dataclass(frozen=True)
class SVTOutcome:
    """The DP output of the SVT: accepted indices (draw order) and queries consumed."""

    accepted: tuple[int, ...]
    n_consumed: int


def svt_below_threshold(
    distance_batches: Iterable[np.ndarray],
    threshold: float,
    c: int,
    epsilon: float,
    sensitivity: float,
    resample: bool,
    noise: NoiseSource,
) -> SVTOutcome:
    """Algorithm 1 of ABCDP on distances arriving in batches, in draw order; stops at c.

    The iterable is consumed lazily: no batch after the c-th acceptance is requested, so a
    generator may simulate on demand. Returns only the DP indicators (as indices).
    """
    scale = svt_noise_scale(c, sensitivity, epsilon, resample)
    noisy_threshold = float(noise.add_laplace(threshold, scale))
    accepted: list[int] = []
    offset = 0
    for batch in distance_batches:
        noisy = noise.add_laplace(np.asarray(batch, dtype=float), 2.0 * scale)
        position = 0
        while position < len(noisy):
            hits = np.flatnonzero(noisy[position:] <= noisy_threshold)
            if hits.size == 0:
                break
            if not resample:
                take = hits[: c - len(accepted)]
                accepted.extend(int(offset + position + hit) for hit in take)
                position += int(take[-1]) + 1
            else:
                accepted.append(int(offset + position + hits[0]))
                position += int(hits[0]) + 1
                noisy_threshold = float(noise.add_laplace(threshold, scale))
            if len(accepted) >= c:
                return SVTOutcome(tuple(accepted), offset + position)
        offset += len(noisy)
    return SVTOutcome(tuple(accepted), offset)


def lemma42_density(z: np.ndarray, b: float) -> np.ndarray:
    """Density of Z = m - nu, m ~ Lap(b), nu ~ Lap(2b): (2 e^{-|z|/2b} - e^{-|z|/b}) / (6b)."""
    z = np.abs(np.asarray(z, dtype=float))
    return (2.0 * np.exp(-z / (2.0 * b)) - np.exp(-z / b)) / (6.0 * b)


def lemma42_tail(a: np.ndarray, b: float) -> np.ndarray:
    """G_b(a) = P(Z > a) = (4 e^{-a/2b} - e^{-a/b}) / 6 for a >= 0 (Lemma 4.2)."""
    a = np.asarray(a, dtype=float)
    if np.any(a < 0):
        raise ValueError("G_b is defined for a >= 0")
    return (4.0 * np.exp(-a / (2.0 * b)) - np.exp(-a / b)) / 6.0


def flip_probability(rho: float | np.ndarray, eps_abc: float, b: float) -> np.ndarray:
    """P[DP decision != non-private decision] = G_b(|rho - eps_abc|) (Proposition 4.2)."""
    return lemma42_tail(np.abs(np.asarray(rho, dtype=float) - eps_abc), b)
