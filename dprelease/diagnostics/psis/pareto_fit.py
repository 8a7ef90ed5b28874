"""PSIS steps 3 and 4: the generalized Pareto fit of the tail and its quantiles.

The profile method of Zhang and Stephens (2009), "A new and efficient estimation method for
the generalized Pareto distribution", Technometrics 51(3):316-325, exactly as loo's
``gpdfit`` (``wip = TRUE``, ``min_grid_pts = 30``), vectorised over rows; the formulas are in
psis.py's module docstring (step 3), with the quantiles of step 4. Hand-written for the
reasons given there.
"""

from __future__ import annotations

import math

import numpy as np

_GRID_MIN_POINTS = 30
_GRID_PRIOR = 3.0
_WIP_PRIOR_N = 10.0
_WIP_PRIOR_K = 0.5
# Working-set limit, in float64 elements, of (rows x grid x tail) per fit block.
_FIT_ELEMENTS = 1 << 21


def gpdfit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zhang-Stephens (2009) GPD fit with loo/posterior's weakly informative prior on k.

    ``x``: exceedances, shape ``(n_rows, M)``, each row sorted ascending, ``x >= 0``,
    ``x[:, -1] > 0``. Returns ``(k_hat, sigma)`` per row; NaN where the first-quartile
    anchor ``x*`` is 0 (loo's fit is NaN there: the grid is ``-inf``) or the fit degenerates.
    """
    n_rows, m_tail = x.shape
    n_grid = _GRID_MIN_POINTS + math.isqrt(m_tail)
    anchor = x[:, int(m_tail / 4 + 0.5) - 1]
    fit = anchor > 0.0
    anchor = np.where(fit, anchor, 1.0)
    grid = (1.0 - np.sqrt(n_grid / (np.arange(1, n_grid + 1) - 0.5))) / _GRID_PRIOR
    theta = 1.0 / x[:, -1:] + grid / anchor[:, None]

    prof_k = np.empty((n_rows, n_grid))
    rows_per_fit = max(1, _FIT_ELEMENTS // (n_grid * m_tail))
    for a in range(0, n_rows, rows_per_fit):
        b = min(a + rows_per_fit, n_rows)
        t = theta[a:b, :, None] * x[a:b, None, :]
        np.negative(t, out=t)
        np.log1p(t, out=t)
        prof_k[a:b] = t.mean(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        loglik = m_tail * (np.log(-theta / prof_k) - prof_k - 1.0)
        top = loglik.max(axis=1, keepdims=True)
        lse = top + np.log(np.exp(loglik - top).sum(axis=1, keepdims=True))
        weights = np.exp(loglik - lse)
        theta_hat = (theta * weights).sum(axis=1)
        k = np.log1p(-theta_hat[:, None] * x).mean(axis=1)
        sigma = -k / theta_hat
    k = (k * m_tail + _WIP_PRIOR_K * _WIP_PRIOR_N) / (m_tail + _WIP_PRIOR_N)
    k[~fit] = np.nan
    sigma[~fit] = np.nan
    return k, sigma


def gpd_quantiles(m_tail: int, k: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """GPD(0, sigma, k) quantiles at ``p_z = (z - 1/2)/M``, z = 1..M, one row per (k, sigma)."""
    log1m_p = np.log1p(-(np.arange(1, m_tail + 1) - 0.5) / m_tail)
    kk = k[:, None]
    safe_k = np.where(kk == 0.0, 1.0, kk)
    return np.where(
        kk == 0.0, -sigma[:, None] * log1m_p, sigma[:, None] * np.expm1(-kk * log1m_p) / safe_k
    )
