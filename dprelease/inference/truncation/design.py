"""Choice of the truncation interval: Fisher-information design and location-scale reduction.

Yildirim (2023) section 5. For a location-scale family and intervals l = m + a c, r = m + b c
(eq. (11)), Theorem 3 gives F_{m+ac, m+bc}(m, c) = F_{a,b}(0, 1) / c^2, so the maximiser

    (a*, b*) = argmax_{a,b} sc(F_{a,b}^eps(0, 1))                                 (13)

does not depend on (m, c) and is computed once per (family, epsilon, score). Scores:

- "mu" = F[1,1] (the paper's experiments): symmetric intervals [-A, A], A on the 0.06 grid up to 3
  (the author's code; A = 0, zero width, excluded; spec pitfall 5). At epsilon = 1 the optimum
  [-0.06, 0.06] is a noisy sign bit of X - m: F[2,2] ~ 0, the released values say nothing about
  sigma and its posterior stays at the prior (docs/adaptive-truncation.md 3.4).
- "trace" = F[1,1] + F[2,2] over the same candidates.
- "det" (the default; docs/adaptive-truncation.md 3.4): a *mirrored pair* of intervals used in
  turn, [a, b] at odd steps t and [-b, -a] at even steps, scored by the determinant of the
  pair's average information. Mirroring y -> -y flips the sign of the mu score only, so
  F_{-b,-a}(0, 1) is F_{a,b}(0, 1) with F[1,2] negated and the pair's average is
  diag(F[1,1], F[2,2]): the D-optimal (Fisher-determinant) score is F[1,1] F[2,2] of [a, b].
  One interval alone has a nearly singular F at small epsilon (a threshold at m + a c informs
  only mu - a sigma); the pair informs both. Candidates: every a < b on the 0.06 grid of
  [-3, 3] with a + b <= 0 (a pair and its mirror score the same). Which step uses which
  interval depends on t only (public), so the choice stays adaptive post-processing.

The objective is very flat near its maximum (docs/adaptive-truncation.md section 3.2), so the
default method is the exact quadrature of `fisher_information`; the paper's Monte Carlo
estimator is available as method="monte_carlo" with common random numbers across candidates.

Thompson sampling (paper section 5.1): the next interval is m + [a*, b*] c for (m, c) a draw
from the current posterior; dprelease then intersects it with the schema's public bounds
(docs/adaptive-truncation.md section 3.3), which is post-processing of public quantities.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from dprelease.inference.truncation.likelihood import fisher_information, fisher_information_mc

DEFAULT_GRID: tuple[float, ...] = tuple(float(a) for a in np.round(np.arange(1, 51) * 0.06, 2))
FAMILIES = ("normal",)
SCORES = ("mu", "trace", "det")
DEFAULT_SCORE = "det"
_SEARCH_ORDER = 100  # quadrature order of the search; the winner is re-evaluated at 200
METHODS = ("quadrature", "monte_carlo")
_MC_SEED = 20230119  # public: the Monte Carlo design is a data-independent computation


@dataclass(frozen=True)
class TruncationDesign:
    """The public base interval [a*, b*] of the location-scale reduction (eq. (13))."""

    family: str
    epsilon: float
    score: str
    a: float
    b: float
    fisher: np.ndarray  # F_{a*,b*}(0, 1), 2x2 in (mu, sigma)
    method: str
    grid: tuple[float, ...]
    symmetric: bool

    @property
    def mirrored(self) -> bool:
        """True for score "det": even steps use the mirror [-b*, -a*] of [a*, b*]."""
        return self.score == "det"

    def base_interval(self, step: int) -> tuple[float, float]:
        """[a*, b*] for step t = `step` (1-based); its mirror at even t when `mirrored`."""
        if self.mirrored and step % 2 == 0:
            return -self.b, -self.a
        return self.a, self.b

    def to_dict(self) -> dict:
        """Public JSON-able description (goes into design.json and the ledger)."""
        return {
            "family": self.family,
            "epsilon": self.epsilon,
            "score": self.score,
            "a": self.a,
            "b": self.b,
            "fisher": self.fisher.tolist(),
            "method": self.method,
            "grid": list(self.grid),
            "symmetric": self.symmetric,
            "mirrored": self.mirrored,
        }


def score_value(fisher: np.ndarray, score: str) -> float:
    """sc(F): F[1,1] for "mu", the trace for "trace", F[1,1] F[2,2] (the determinant of the
    mirrored pair's average information) for "det"."""
    if score == "mu":
        return float(fisher[0, 0])
    if score == "trace":
        return float(fisher[0, 0] + fisher[1, 1])
    if score == "det":
        return float(fisher[0, 0] * fisher[1, 1])
    raise ValueError(f"unknown score {score!r}; choose one of {', '.join(SCORES)}")


def _candidates(grid: tuple[float, ...], symmetric: bool, score: str) -> list[tuple[float, float]]:
    if symmetric and score != "det":
        return [(-a, a) for a in grid]
    points = sorted({0.0, *grid, *(-a for a in grid)})
    pairs = [(a, b) for i, a in enumerate(points) for b in points[i + 1 :]]
    return [(a, b) for a, b in pairs if a + b <= 1e-12] if score == "det" else pairs


@lru_cache(maxsize=64)
def design_truncation(
    family: str = "normal",
    epsilon: float = 1.0,
    score: str = DEFAULT_SCORE,
    symmetric: bool = True,
    grid: tuple[float, ...] = DEFAULT_GRID,
    method: str = "quadrature",
) -> TruncationDesign:
    """Grid search of eq. (13); public (reads no data), cached per argument tuple.

    `symmetric` restricts "mu" and "trace" to [-A, A]; "det" always searches all pairs."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; supported: {', '.join(FAMILIES)}")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise ValueError("epsilon must be a positive finite number")
    if not grid or min(grid) <= 0:
        raise ValueError("the grid must hold positive half-widths (A = 0 has zero width)")
    score_value(np.zeros((2, 2)), score)  # validates the score name
    best: tuple[float, float, np.ndarray] | None = None
    for a, b in _candidates(tuple(grid), symmetric, score):
        if method == "quadrature":
            fisher = fisher_information(a, b, epsilon, order=_SEARCH_ORDER)
        else:
            rng = np.random.default_rng(_MC_SEED)  # common random numbers across candidates
            fisher = fisher_information_mc(a, b, epsilon, rng)
        if best is None or score_value(fisher, score) > score_value(best[2], score):
            best = (a, b, fisher)
    assert best is not None
    a, b, _ = best
    fisher = fisher_information(a, b, epsilon) if method == "quadrature" else best[2]
    symmetric = symmetric and score != "det"
    return TruncationDesign(
        family, float(epsilon), score, a, b, fisher, method, tuple(grid), symmetric
    )


def design_interval(
    design: TruncationDesign,
    location: float,
    scale: float,
    bounds: tuple[float, float],
    step: int = 1,
) -> tuple[float, float]:
    """Interval m + [a*, b*] c (eq. (11)) for step t (mirrored at even t for score "det"),
    intersected with the public bounds (docs/adaptive-truncation.md 3.3)."""
    a, b = design.base_interval(step)
    return clip_interval(location + a * scale, location + b * scale, bounds)


def clip_interval(left: float, right: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """[left, right] intersected with the public bounds [lo, hi] (docs/adaptive-truncation.md 3.3).

    If the intersection is narrower than 1e-9 (hi - lo) (the interval lies outside the
    bounds, or the drawn scale is tiny), the interval keeps the width
    w = max(min(right - left, hi - lo), 1e-9 (hi - lo)) and its centre is moved inside the
    bounds, which places it against the nearer bound when it was outside: the width is
    never 0. Post-processing of public quantities only.
    """
    lo, hi = bounds
    min_width = 1e-9 * (hi - lo)
    clipped_left, clipped_right = max(left, lo), min(right, hi)
    if clipped_right - clipped_left >= min_width:
        return clipped_left, clipped_right
    width = max(min(right - left, hi - lo), min_width)
    centre = min(max(0.5 * (left + right), lo + 0.5 * width), hi - 0.5 * width)
    return max(centre - 0.5 * width, lo), min(centre + 0.5 * width, hi)
