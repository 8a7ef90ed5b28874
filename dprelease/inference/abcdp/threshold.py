"""A threshold eps_abc for ABCDP from public quantities only: the MMD between simulations.

The threshold is on the scale of rho(D, Y) = || mean phi(D) - mean phi(Y) ||, which depends on
the model, the kernel and its bandwidth and the sizes n (real rows) and m (simulated rows), so
no single number fits every model. What a threshold must do can be measured without the real
table, by letting a simulation stand in for it. With K prior draws theta_1..theta_K
(`PLAN_DRAWS` or more), one simulated "data" set X_k of n rows and one independent simulation
Y_k of m rows per draw, and their mean embeddings under the release's kernel:

- the Monte Carlo floor: rho(X_k, Y_k), two simulations at the SAME parameter. If the real
  table were a simulation at theta_k, this is the distance of the right draw: a threshold
  below it rejects the right parameter too (docs/abcdp.md pitfall 9);
- the separation: rho(X_i, Y_j), i != j, simulations at INDEPENDENT prior draws. Its
  q-quantile is the threshold at which a fraction q of the prior draws passes, for data like
  a typical simulation from the prior predictive: the threshold has to lie well below the
  median of this distribution to tell draws apart at all.

Rule (`suggest_threshold`): the separation quantile at level 2c/T (about 2c of the T draws
pass for such data; the release stops at c, and the margin covers data less typical than
the average simulation), but not below the floor's 95 % quantile. It is an estimate for data
that look like the model's simulations; when the model does not fit, the real distances are
larger and fewer draws pass (the release's report shows how many did).

With the SVT noise at a guessed n_hat (b = (c + 1)/(epsilon_svt n_hat), or 2c/... with
resampling) a draw at distance rho passes with probability 1 - G_b(eps - rho) below the
threshold and G_b(rho - eps) above it (Proposition 4.2, marginal over the threshold's noise).
Averaged over the separation pairs this gives the expected number of DP acceptances in T
draws, the share of them that exact rejection ABC would also accept (below one half, most
accepted draws lie beyond the threshold, let through by the noise), and the exact threshold
that would pass as many draws (what the noisy test amounts to).

Public: the prior draws and simulations come from their own child of the public seed
(`THRESHOLD_STREAM`), so planning never changes the release's draws; the kernel is the
release's random features (the same W for the same seed), or for `gaussian_exact` random
features of the same bandwidth (`EXACT_FEATURES` of them, an unbiased approximation of its
kernel: all K^2 exact-kernel MMDs would cost K^2 n m kernel evaluations). Nothing here reads
the real table; the cost is K (n + m) simulated rows.
"""

from __future__ import annotations

import math

import numpy as np

from dprelease.errors import require
from dprelease.inference.abcdp.kernel import RandomFourierFeatures
from dprelease.inference.abcdp.mechanism import (
    M_MAX,
    SIM_BATCH_ROWS,
    ABCDPPlan,
    public_stream,
)
from dprelease.inference.abcdp.svt import flip_probability, svt_noise_scale

PLAN_DRAWS, MAX_PLAN_DRAWS = 200, 1000  # K: prior draws of the plan (more for rare levels)
MIN_PAIRS_BELOW = 25  # pairs expected below the suggested level, at least
FLOOR_LEVEL = 0.95
SEPARATION_LEVELS = (0.01, 0.05, 0.5)
EXACT_FEATURES = 2000
THRESHOLD_STREAM = 5  # child of the public seed (0-2: `ABCDPPlan.streams`, 3: probes, 4: report)


def plan_draws(level: float) -> int:
    """K such that about `MIN_PAIRS_BELOW` of the K (K - 1) pairs fall below `level`, within
    [PLAN_DRAWS, MAX_PLAN_DRAWS]."""
    needed = math.ceil(math.sqrt(MIN_PAIRS_BELOW / level)) + 1
    return min(max(PLAN_DRAWS, needed), MAX_PLAN_DRAWS)


def simulated_distances(
    plan: ABCDPPlan, n_rows: int, m: int, n_draws: int
) -> tuple[np.ndarray, np.ndarray]:
    """rho(X_k, Y_k) for k = 1..K (same parameter) and the K x K matrix rho(X_i, Y_j) (its
    off-diagonal: independent parameters); X_k has n_rows rows, Y_k m (module docstring)."""
    rng = public_stream(plan.seed, THRESHOLD_STREAM)
    features = plan.features
    if features is None:
        features = RandomFourierFeatures(
            plan.simulator.encoder.width, EXACT_FEATURES, plan.bandwidth, rng
        )
    theta = plan.simulator.prior(rng, n_draws)

    def embeddings(rows: int) -> np.ndarray:
        batch = max(1, SIM_BATCH_ROWS // rows)
        simulations = (
            plan.simulator.simulate(theta[start : start + batch], rows, rng)
            for start in range(0, n_draws, batch)
        )
        return np.vstack([features.mean_embeddings(simulated) for simulated in simulations])

    data, simulated = embeddings(n_rows), embeddings(m)
    squared = (
        (data**2).sum(axis=1)[:, None]
        + (simulated**2).sum(axis=1)[None, :]
        - 2.0 * data @ simulated.T
    )
    matrix = np.sqrt(np.maximum(squared, 0.0))
    return np.diag(matrix).copy(), matrix


def acceptance_probability(rho: np.ndarray, threshold: float, b: float) -> np.ndarray:
    """P(the SVT accepts a draw at distance rho), marginal over the threshold noise
    (Proposition 4.2): 1 - G_b below the threshold, G_b above it."""
    flip = flip_probability(rho, threshold, b)
    return np.where(np.asarray(rho) <= threshold, 1.0 - flip, flip)


def at_threshold(pairs: np.ndarray, threshold: float, n_draws: int, b: float) -> dict:
    """Expected acceptances among T draws for data like a typical simulation: without
    privacy, with the SVT noise b, the share of the latter within the threshold (that exact
    ABC accepts too), and the exact threshold that passes as many draws as the SVT does."""
    accept = acceptance_probability(pairs, threshold, b)
    exact = pairs <= threshold
    return {
        "threshold": threshold,
        "expected_exact_passes": float(n_draws * exact.mean()),
        "expected_dp_passes": float(n_draws * accept.mean()),
        "dp_share_exact": float((accept * exact).sum() / accept.sum()) if accept.sum() else 0.0,
        "effective_threshold": float(np.quantile(pairs, min(1.0, accept.mean()))),
    }


def suggest_threshold(plan: ABCDPPlan, n_rows_guess: float, threshold: float | None = None) -> dict:
    """The public threshold plan of the module docstring at a guessed row count (the data
    side's n; m = n_sim or min(n, 10 000) as in the release); also evaluates `threshold`."""
    require("torch", "the ABCDP threshold plan (random features in torch)")
    config = plan.config
    n_rows = max(1, round(n_rows_guess))
    m = config.n_sim or min(n_rows, M_MAX)
    level = min(1.0, 2.0 * config.n_samples / config.n_draws)
    n_draws = plan_draws(level)
    floor, matrix = simulated_distances(plan, n_rows, m, n_draws)
    pairs = matrix[~np.eye(n_draws, dtype=bool)]
    floor_high = float(np.quantile(floor, FLOOR_LEVEL))
    separation = {q: float(np.quantile(pairs, q)) for q in (level, *SEPARATION_LEVELS)}
    suggested = max(separation[level], floor_high)
    b = svt_noise_scale(config.n_samples, 1.0 / n_rows_guess, config.epsilon_svt, config.resample)
    result = {
        "n_rows_guess": n_rows_guess,
        "n_data_rows": n_rows,
        "n_sim": m,
        "plan_draws": n_draws,
        "kernel": config.kernel,
        "features": "release" if plan.features is not None else f"rff-{EXACT_FEATURES}",
        "bandwidth": plan.bandwidth,
        "floor": {"median": float(np.median(floor)), "q95": floor_high},
        "level": level,
        "separation": [{"level": q, "value": v} for q, v in separation.items()],
        "suggested": suggested,
        "rule": "floor" if floor_high > separation[level] else "separation",
        "noise_scale": b,
        "at_suggested": at_threshold(pairs, suggested, config.n_draws, b),
        "separable": suggested < separation[0.5],
    }
    if threshold is not None:
        result["at_threshold"] = at_threshold(pairs, threshold, config.n_draws, b)
    return result
