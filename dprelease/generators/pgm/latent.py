"""Within-cell coupling of an ordered feature to a numeric target (`pgm`).

The `pgm` model measures each feature with the target at a COARSE resolution (b cells per
feature, m_y groups of the target; b = 2 where the noise allows no more) and refines a drawn
coarse cell to the fine public cells with the feature's one-way shares. Drawn that way, a
row's place inside its coarse cell is independent of its target: the slope of the target on
the feature comes only from the coarse cells, and with 2 cells a least-squares slope keeps
about 2 / pi of itself (Var E[x | cell] / Var x for a normal x split at its median).

The coupling assumes what the coarse table cannot show: near each coarse cell c of the
feature, target and feature are monotone maps of a standard bivariate normal (Z_y, Z_x) of
correlation rho_c (a latent Gaussian copula), the coarse cells cutting each margin at its
quantiles. Then

- rho_c is estimated from the model's coarse joint table P(g, c') of target group g and the
  feature's cells c' = c - 1, c, c + 1 (`local_correlations`; the whole table when b = 2):
  with the normal scores m_g = E[Z_y | g] and m_c' = E[Z_x | c'] of that window's margins
  (each cell's conditional mean under its margin's quantile cuts), E_rho[m_g m_c'] =
  sum P_rho(g, c') m_g m_c' increases with rho, and rho_c solves E_rho[m_g m_c'] =
  sum P(g, c') m_g m_c' (`latent_correlation`; the cells' probabilities under rho by
  Gauss-Legendre quadrature over each target cell, P(g, c') = int_g phi(z) [Phi((u_c' -
  rho z) / s) - Phi((l_c' - rho z) / s)] dz, s = sqrt(1 - rho^2)). This is the grouping
  correction of a correlation of scores (the polychoric correlation's idea, Pearson 1900;
  Olsson 1979 fits the whole table by maximum likelihood, slower and no less noisy). The
  window lets the direction change along the feature: a wage that rises and then falls with
  experience would be coupled the wrong way on its falling part by one rho for the column;
- each synthetic row's latent target is Z_y = Phi^-1(U), U uniform over its fine cell's
  interval of the target's cumulative one-way shares (missing: a draw of N(0, 1));
- the m rows that drew coarse cell c of the feature (whatever their target group and
  parent) are ranked by S = rho_c Z_y + sqrt(1 - rho_c^2) E, E ~ N(0, 1), and the k-th
  gets the fine cell at the quantile (k + U) / m of the feature's fine shares inside c
  (`sampling.systematic_uniforms` with `scores`).

Every measured statistic is kept: the coarse cells are drawn from the model's tables, and
ranking only decides which of the rows in a coarse cell gets which of the fine cells the
stratified draw assigns (the same counts per fine cell), so the fine one-way shares, the
coarse tables and the target's shares are those of independent placement; only the coupling
inside the cells differs, the copula's instead of independence. Post-processing of DP outputs
(the model's tables and shares) and of the sampling generator's draws; no real row is read.
Hand-written: no library estimates a polychoric correlation from a table of shares in a
millisecond (this does, with `scipy.optimize.brentq`; 14 ms a call with scipy.stats' norm and
40 bisection steps).

One correlation near each coarse cell, coupled to the target alone, is the choice the
paired measurements support: one rho per column, a coupling given the tree parent too,
per-parent-cell correlations and a two-category target were measured and not made the default
(docs/decisions/0011-pgm-within-cell-coupling.md).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

MAX_LATENT = 0.95  # |rho| at most: the rows keep some freedom inside their cells
WINDOW = 1  # a coarse cell's rho from the cells up to this many on either side of it
QUADRATURE = np.polynomial.legendre.leggauss(24)
FAR = 8.0  # standard normal SDs: the infinite ends of the quadrature's intervals


def normal_scores(shares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cut points of a standard normal at the cumulative `shares` of ordered cells
    (len + 1 of them, -inf and +inf at the ends) and each cell's conditional mean
    E[Z | cell] = (phi(lower) - phi(upper)) / p (0 for an empty cell)."""
    p = np.clip(np.asarray(shares, dtype=float), 0.0, None)
    p = p / p.sum()
    cuts = np.concatenate([[-np.inf], ndtri(np.clip(np.cumsum(p)[:-1], 0.0, 1.0)), [np.inf]])
    density = _pdf(cuts)
    means = np.divide(density[:-1] - density[1:], p, out=np.zeros_like(p), where=p > 0)
    return cuts, means


def cell_probabilities(rho: float, y_cuts: np.ndarray, x_cuts: np.ndarray) -> np.ndarray:
    """P(Z_y in cell g, Z_x in cell c) for a standard bivariate normal of correlation rho,
    cells between consecutive cut points (module docstring's quadrature)."""
    nodes, weights = QUADRATURE
    low, high = np.clip(y_cuts[:-1], -FAR, FAR), np.clip(y_cuts[1:], -FAR, FAR)
    half = (high - low)[:, None] / 2
    z = half * nodes[None, :] + ((high + low) / 2)[:, None]
    mass = half * weights[None, :] * _pdf(z)
    spread = np.sqrt(1.0 - rho**2)
    within = np.diff(ndtr((x_cuts[None, None, :] - rho * z[:, :, None]) / spread), axis=2)
    return np.einsum("gq,gqc->gc", mass, within)


def _pdf(z: np.ndarray) -> np.ndarray:
    """The standard normal density (0 at +-inf)."""
    return np.exp(-0.5 * np.square(z)) / np.sqrt(2.0 * np.pi)


def latent_correlation(joint: np.ndarray) -> float:
    """rho of the latent Gaussian copula behind a coarse table P(target group, feature cell)
    of ordered cells (module docstring), by Brent's method on [-MAX_LATENT, MAX_LATENT]
    (the moment increases with rho); 0 where either margin holds fewer than two occupied
    cells."""
    joint = np.clip(np.asarray(joint, dtype=float), 0.0, None)
    if joint.sum() <= 0:
        return 0.0
    joint = joint / joint.sum()
    rows, columns = joint.sum(axis=1), joint.sum(axis=0)
    if (rows > 0).sum() < 2 or (columns > 0).sum() < 2:
        return 0.0
    (y_cuts, y_means), (x_cuts, x_means) = normal_scores(rows), normal_scores(columns)
    observed = float(y_means @ joint @ x_means)

    def excess(rho: float) -> float:
        return float(y_means @ cell_probabilities(rho, y_cuts, x_cuts) @ x_means) - observed

    if excess(-MAX_LATENT) >= 0:
        return -MAX_LATENT
    if excess(MAX_LATENT) <= 0:
        return MAX_LATENT
    return float(brentq(excess, -MAX_LATENT, MAX_LATENT, xtol=1e-6))


def local_correlations(joint: np.ndarray, width: int = WINDOW) -> np.ndarray:
    """rho_c for every feature cell c of a coarse table P(target group, feature cell): the
    latent correlation of its cells c - width .. c + width (module docstring)."""
    cells = joint.shape[1]
    return np.array(
        [
            latent_correlation(joint[:, max(0, c - width) : min(cells, c + width + 1)])
            for c in range(cells)
        ]
    )


def latent_positions(
    shares: np.ndarray, chosen: np.ndarray, missing: bool, rng: np.random.Generator
) -> np.ndarray:
    """Z = Phi^-1(U) for every row, U uniform over its fine cell's interval of the column's
    cumulative shares (the last cell, when `missing`, is "missing": Z ~ N(0, 1) there)."""
    shares = np.clip(np.asarray(shares, dtype=float), 0.0, None)
    regular = shares.size - int(missing)
    p = shares[:regular] / max(float(shares[:regular].sum()), 1e-300)
    upper = np.cumsum(p)
    z = rng.standard_normal(chosen.size)
    inside = chosen < regular
    cells = chosen[inside]
    u = upper[cells] - p[cells] * rng.random(cells.size)
    z[inside] = ndtri(np.clip(u, 1e-12, 1.0 - 1e-12))
    return z


def coupled_scores(
    rho: np.ndarray, latent_target: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """S = rho Z_y + sqrt(1 - rho^2) E per row (rho: each row's cell's): the ranks inside a
    coarse cell that give the rows the copula's coupling with the target (module
    docstring)."""
    noise = rng.standard_normal(latent_target.size)
    return rho * latent_target + np.sqrt(1.0 - rho**2) * noise
