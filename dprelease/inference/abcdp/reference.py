"""Exact (non-private) rejection ABC with the kernel, threshold and draws of an ABCDP plan.

The reference that the DP posterior approaches as epsilon grows, for tests and benchmarks
ONLY. Same prior draws theta_t and simulations Y_t (the plan's public simulation stream, so
draw t is the same draw as in `run_abcdp`), same random features and bandwidth, same
threshold eps_abc, and the MMD normalised by the true row count (n_hat = N, the limit of the
DP count as its epsilon grows), m = n_sim or min(N, 10 000); it accepts the first c draws with

    rho_t = || (1/N) sum_i phi(x_i) - (1/m) sum_j phi(y_tj) || <= eps_abc

(Pritchard et al. 1999; Park et al., Algorithm 1 without its two Laplace noises). The DP
release differs from it only through the SVT noise, b = (c + 1) / (eps_svt n_hat), and the
count: by Proposition 4.2 a draw at |rho_t - eps_abc| = a is decided differently with
probability G_b(a), which vanishes as epsilon grows (tests/test_abcdp_reference.py).

NOT differentially private: it reads the real rows and their count without noise, and its
distances are secret. Nothing in `dprelease.release`, `flows`, `tasks` or the CLI imports it
(tests/test_abcdp_reference.py checks), and nothing it returns may be published.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dprelease.inference.abcdp.kernel import make_distance
from dprelease.inference.abcdp.mechanism import M_MAX, ABCDPPlan, simulated_distances


@dataclass(frozen=True)
class ExactABC:
    """Accepted draw indices (draw order), draws consumed, their rho_t (secret), and m."""

    draws: np.ndarray = field(repr=False)  # theta_t for t < n_consumed
    distances: np.ndarray = field(repr=False)  # rho_t for t < n_consumed: NEVER publish
    accepted: tuple[int, ...]
    n_consumed: int
    n_sim: int

    @property
    def posterior(self) -> np.ndarray:
        """The accepted draws, (n_accepted, p)."""
        return self.draws[list(self.accepted)]


def exact_acceptance(distances: np.ndarray, threshold: float, c: int) -> tuple[int, ...]:
    """The first c indices t with distances[t] <= threshold (fewer when fewer pass)."""
    return tuple(int(t) for t in np.flatnonzero(np.asarray(distances) <= threshold)[:c])


def exact_rejection_abc(real_encoded: np.ndarray, plan: ABCDPPlan) -> ExactABC:
    """Run the reference on the real rows (encoded as for `run_abcdp`); stops at c accepted."""
    config = plan.config
    n = len(real_encoded)
    m = config.n_sim or min(n, M_MAX)
    distance = make_distance(config.kernel, plan.bandwidth, plan.features, real_encoded, n)
    theta, batches = simulated_distances(plan, distance, m)
    seen: list[np.ndarray] = []
    accepted: tuple[int, ...] = ()
    for batch in batches:
        seen.append(batch)
        accepted = exact_acceptance(np.concatenate(seen), config.threshold, config.n_samples)
        if len(accepted) >= config.n_samples:
            break
    distances = np.concatenate(seen)
    n_consumed = accepted[-1] + 1 if len(accepted) >= config.n_samples else len(distances)
    return ExactABC(
        draws=theta[:n_consumed],
        distances=distances[:n_consumed],
        accepted=accepted,
        n_consumed=n_consumed,
        n_sim=m,
    )
