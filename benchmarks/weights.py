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

4. Target model (`--target-model`): the default generator on 80 % of epsilon 1 and the
   calibration weights on 20 % (delta 1e-5, N_G = 20,000) on public tuning tables (breast
   cancer, RAND HIE; never the wage tables, which confirm).
   beta-MSE: mean squared difference between the target model's coefficients (intercept and
   slopes; least squares for a numeric target, L2 logistic regression C = 1 for a
   categorical one) fitted on the real training split and on the (weighted) synthetic rows,
   with features and a numeric target standardised by the training split's mean and SD.
   Rows: unweighted, the calibration weights without moments and held margins, the default
   calibration weights, and OpenDP's MST peer (`--peers mst`); also the
   largest shift of a one-way share over the generator's cells and the ESS / N_G.

Run: .venv/bin/python benchmarks/weights.py [--seeds 10] [--skip-large]
     .venv/bin/python benchmarks/weights.py --target-model [--seeds 3] [--peers mst]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dprelease.privacy.noise import NoiseSource
from dprelease.weights import estimate, plan
from dprelease.weights.base import augment
from dprelease.weights.calibration.tilting import ess
from dprelease.weights.logistic.noise import gated_log_weights
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


def _standardised_beta(evaluator, x: np.ndarray, w: np.ndarray, scale) -> np.ndarray:
    design, y = evaluator._design(x)
    mean, sd = scale
    z = (design - mean) / sd
    if evaluator.categorical:
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=1.0, max_iter=2000).fit(z, y, sample_weight=w)
        return np.r_[model.intercept_, model.coef_.ravel()]
    y_mean, y_sd = evaluator.y_scale
    a = np.hstack([np.ones((len(z), 1)), z]) * np.sqrt(w)[:, None]
    return np.linalg.lstsq(a, (y - y_mean) / y_sd * np.sqrt(w), rcond=None)[0]


def target_model(seeds: int, peers: list[str], tables: list[str]) -> None:
    from types import SimpleNamespace

    from utility import TABLES, Evaluator, _clip, opendp_peer

    from dprelease.encoding import Encoder
    from dprelease.generators import make_generator
    from dprelease.weights.calibration.held_margins import HeldMargins

    epsilon, fraction, n_synthetic = 1.0, 0.2, 20_000
    variants = {
        "unweighted": None,
        "calibration (pairs only)": {"moments": False, "hold_margins": False},
        "calibration (default)": {},
    }
    for table_name in tables:
        table = TABLES[table_name]()
        encoder = Encoder(table.schema)
        scores: dict[str, list] = {}
        for seed in range(seeds):
            order = np.random.default_rng(seed).permutation(len(table.frame))
            cut = int(0.8 * len(order))
            train_frame = table.frame.iloc[order[:cut]].reset_index(drop=True)
            train = encoder.encode(_clip(train_frame, table.schema))
            evaluator = Evaluator(encoder, train, train)
            design, y = evaluator._design(train)
            sd = design.std(axis=0)
            scale = (design.mean(axis=0), np.where(sd > 0, sd, 1.0))
            evaluator.y_scale = (y.mean(), y.std())
            beta_real = _standardised_beta(evaluator, train, np.ones(len(train)), scale)
            generator = make_generator(
                "marginals", encoder, (1 - fraction) * epsilon, (1 - fraction) * DELTA
            )
            synthetic = generator.fit(train).sample(n_synthetic, np.random.default_rng(seed))
            held = HeldMargins(encoder, generator.bins, synthetic)
            for name, options in variants.items():
                start = time.process_time()
                if options is None:
                    log_w = np.zeros(len(synthetic))
                else:
                    log_w = estimate(
                        "calibration",
                        train,
                        synthetic,
                        epsilon=fraction * epsilon,
                        delta=fraction * DELTA,
                        encoder=encoder,
                        **options,
                    ).log_weights
                cpu = time.process_time() - start
                w = np.exp(log_w - log_w.max())
                beta = _standardised_beta(evaluator, synthetic, w / w.mean(), scale)
                row = (np.mean((beta - beta_real) ** 2), held.max_shift(log_w), ess(log_w), cpu)
                scores.setdefault(name, []).append(row)
            args = SimpleNamespace(iters=300, aim_rounds=40)
            for peer in peers:
                out = encoder.encode(opendp_peer(peer, table, train_frame, epsilon, args, seed))
                beta = _standardised_beta(evaluator, out, np.ones(len(out)), scale)
                row = (np.mean((beta - beta_real) ** 2), np.nan, len(out), np.nan)
                scores.setdefault(f"opendp-{peer}", []).append(row)
        print(f"## target model, {table.name}, epsilon {epsilon:g}, {seeds} seeds (mean +- SE)")
        for name, rows in scores.items():
            values = np.array(rows, dtype=float)
            mean, se = values.mean(axis=0), values.std(axis=0) / np.sqrt(len(values))
            print(
                f"  {name:>26}: beta-MSE {mean[0]:.5f} +- {se[0]:.5f}  "
                f"max one-way shift {mean[1]:.2e}  ESS/N {mean[2] / n_synthetic:.3f}  "
                f"CPU {mean[3]:.1f} s",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--target-model", action="store_true")
    parser.add_argument("--peers", nargs="*", default=[])
    parser.add_argument("--tables", nargs="+", default=["breast", "randhie"])
    args = parser.parse_args()
    if args.target_model:
        target_model(args.seeds, args.peers, args.tables)
        return
    if not args.skip_large:
        fit_times()
        scoring_throughput()
    toy_masses(args.seeds)


if __name__ == "__main__":
    main()
