"""Benchmark of the importance-weight estimators (dprelease.weights).

1. Fit-and-score wall time of every method on 50,000 real x 50,000 synthetic rows with 20
   encoded features (the toy example's triangle in the first two features), epsilon = 1,
   delta = 1e-5, default options: the MLPs use batch size L = 256, q = L / (2 N_G) = 0.00256
   and T = ceil(20 / q) = 7,813 steps (20 expected epochs).
2. Scoring throughput of beta_debiased (noise draw, beta_tilde^T x + log b(x)) on 1,000,000
   synthetic rows.
3. Triangle mass (share of the normalised weight on the triangle; true weights 1.0, uniform
   about 0.5) and total variation to the true weights, mean over seeds, on the 2-feature toy
   example with 2,000 real and 2,000 synthetic rows at epsilon 0.5, 1 and 6.

Run: .venv/bin/python benchmarks/weights.py [--seeds 10] [--skip-large]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dprelease.privacy.noise import NoiseSource
from dprelease.weights import estimate, plan
from dprelease.weights.base import augment
from dprelease.weights.logistic_noise import gated_log_weights
from dprelease.weights.toy import in_triangle, triangle_example, triangle_mass

DELTA = 1e-5
METHODS = ("none", "logreg", "beta_noised", "beta_debiased", "weight_noised", "mlp", "dp_mlp")


def run(method: str, real: np.ndarray, synthetic: np.ndarray, eps: float, seed: int):
    """Default options; the seed fixes only the MLPs' initial weights (and mlp's batches)."""
    options = {"seed": seed} if method in ("mlp", "dp_mlp") else {}
    return estimate(method, real, synthetic, epsilon=eps, delta=DELTA, **options)


def ess_fraction(weights: np.ndarray) -> float:
    """Kish effective sample size over N: (sum w)^2 / (N sum w^2)."""
    return float(weights.sum() ** 2 / (len(weights) * np.sum(weights**2)))


def fit_times() -> None:
    real, synthetic = triangle_example(50_000, 50_000, np.random.default_rng(0), n_features=20)
    print("## fit-and-score time, 50,000 real x 50,000 synthetic rows, 20 features, epsilon 1")
    for method in METHODS:
        start = time.perf_counter()
        est = run(method, real, synthetic, 1.0, 0)
        seconds = time.perf_counter() - start
        d = est.details
        extra = f"steps={d['steps']} q={d['sample_rate']:.5f}" if "steps" in d else ""
        if "noise_multiplier" in d:
            extra += f" sigma={d['noise_multiplier']:.3f} eps_reported={d['epsilon_reported']:.4f}"
        elif "noise_scale" in d:
            extra += f"{d['mechanism']} scale={d['noise_scale']:.4g} lambda={d['lambda']:.4g}"
        w = est.weights
        print(
            f"{method:>14}: {seconds:8.2f} s  mass {triangle_mass(w, synthetic):.3f} "
            f"ESS/N {ess_fraction(w):.3f}  {extra}",
            flush=True,
        )


def scoring_throughput() -> None:
    rows = 1_000_000
    x_aug = augment(np.random.default_rng(1).uniform(size=(rows, 20)))
    cal = plan("beta_debiased", 1.0, DELTA, 20, rows)
    beta_hat = np.random.default_rng(2).normal(size=21)
    noise = NoiseSource()
    start = time.perf_counter()
    gated_log_weights(
        beta_hat, x_aug, cal["mechanism"], cal["noise_scale"], noise, debias=True, gate=False
    )
    seconds = time.perf_counter() - start
    print(
        f"## beta_debiased scoring: {rows:,} rows x 21 in {seconds:.3f} s "
        f"({rows / seconds:,.0f} rows/s)",
        flush=True,
    )


def toy_masses(seeds: int) -> None:
    epsilons = (0.5, 1.0, 6.0)
    budget_free = ("none", "logreg", "mlp")
    scores: dict[tuple[str, float], list[tuple[float, float, float]]] = {}
    for seed in range(seeds):
        real, synthetic = triangle_example(2000, 2000, np.random.default_rng(seed))
        truth = 2.0 * in_triangle(synthetic)
        for method in METHODS:
            for eps in epsilons[:1] if method in budget_free else epsilons:
                w = run(method, real, synthetic, eps, seed).weights
                score = (triangle_mass(w, synthetic), 0.5 * float(np.mean(np.abs(w - truth))))
                scores.setdefault((method, eps), []).append((*score, ess_fraction(w)))
    print(
        f"## toy example, 2,000 real x 2,000 synthetic, {seeds} seeds: triangle mass mean+-sd, "
        "total variation to the true weights, ESS/N (budget-free methods: one column)"
    )
    for eps in epsilons:
        print(f"epsilon {eps:g}")
        for method in METHODS:
            values = np.array(scores[(method, epsilons[0] if method in budget_free else eps)])
            mass, tv, ess = values.mean(axis=0)
            print(
                f"  {method:>14}: mass {mass:.3f}+-{values[:, 0].std():.3f}  TV {tv:.3f}  "
                f"ESS/N {ess:.3f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--skip-large", action="store_true")
    args = parser.parse_args()
    if not args.skip_large:
        fit_times()
        scoring_throughput()
    toy_masses(args.seeds)


if __name__ == "__main__":
    main()
