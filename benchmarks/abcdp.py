"""Benchmark: ABCDP (Park et al. 2021), the paper's Figure 1 and toy example (docs/abcdp.md section
6.1-6.5).

1. Flip probability (Figure 1, code `prob_flip.py`): rho ~ U[0, 1] (100 values), eps_abc = 0.2,
   G_b(|rho - eps_abc|) with b = 2 c Delta / epsilon and Delta = 1/N (the script's choice), for
   c in {10, 100, 1000}, N in {10, 100, 1000}, epsilon in {0.01, ..., 100}. Prints the median
   and maximum over the 100 rho's; writes `abcdp_flip_probability.png` (box plots).
2. Toy example (Figures 2-3): Dirichlet(1,...,1) prior, mixture of five uniforms, theta* of the
   paper, N = m = 5000, RFF D = 100 with l = 0.6 (0.12 on the encoded scale y/5), T = 10 000
   prior draws per data set, independent streams for every data set (the reference code's
   runs share their draws, spec pitfall 11). The mean embeddings of the T simulated sets are
   computed once per data set through the library (`SimulatorCheck`, `RandomFourierFeatures`);
   the SVT (`svt_below_threshold`) then runs `--replicates` times per cell on the stored
   distances with fresh OS-entropy noise. Metric: mean absolute error of the posterior mean
   over the 5 coordinates (the code's "MSE"); a run that accepts nothing scores the prior
   mean's error. Grid: c in {10, 100, 1000}, eps_abc in {0.05, 0.1, 0.2, 0.5}, epsilon in
   {0.5, 1, 10, inf}, both RESAMPLE options; paper calibration (Delta = 2/N with the true N,
   all epsilon to the SVT) so the numbers compare with docs/abcdp.md 6.5; then the dprelease
   calibration (n_hat from a Laplace count at 5 % of epsilon, Delta = 1/n_hat) on the same
   data sets. Writes `abcdp_toy_error.png` (error vs eps_abc per c and option).
   Beside it, the exact (non-private) rejection ABC reference (`inference/abcdp/reference.py`:
   same draws, kernel and threshold, n_hat = N) for c = 10 and a few epsilons: the DP error,
   the exact error, the distance between their posterior means, and the share of DP-accepted
   draws that exact ABC accepts too (dprelease calibration).
3. Speed: one full `run_abcdp` on the bundled toy table with T = 10 000, m = 5000, D = 100 and a
   threshold nothing passes (every draw simulated and tested: the worst case); and the
   bundled breast-cancer model simulated per draw against batched (2000 draws, m = 569,
   checked and encoded as in a release).

Run: ``.venv/bin/python benchmarks/abcdp.py [OUT_DIR] [--datasets 10] [--replicates 20]``
(default OUT_DIR benchmarks/out/). Takes a few minutes on 2 cores. Simulation-based
calibration against exact ABC and the power of the report's prior test:
`benchmarks/abcdp_calibration.py`.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.config import ABCDPConfig
from dprelease.inference.abcdp.kernel import RandomFourierFeatures
from dprelease.inference.abcdp.mechanism import plan_abcdp, run_abcdp
from dprelease.inference.abcdp.model import SimulatorCheck, load_model
from dprelease.inference.abcdp.reference import exact_acceptance
from dprelease.inference.abcdp.svt import flip_probability, svt_below_threshold
from dprelease.privacy.counting import dp_row_count
from dprelease.privacy.noise import NoiseSource
from dprelease.schema import load_schema

MODEL = "data/models/toy_mixture.py:DirichletUniformMixture"
SCHEMA = "data/models/toy_mixture.yaml"
TRUE_THETA = np.array([0.25, 0.04, 0.33, 0.04, 0.34])
N_ROWS, N_DRAWS, N_FEATURES, BANDWIDTH = 5000, 10_000, 100, 0.12
CS, THRESHOLDS, EPSILONS = (10, 100, 1000), (0.05, 0.1, 0.2, 0.5), (0.5, 1.0, 10.0, math.inf)
FLIP_EPSILONS = (0.01, 0.1, 0.5, 1, 5, 10, 50, 100)
FLIP_NS = (10, 100, 1000)
BESIDE_THRESHOLDS, BESIDE_EPSILONS = (0.05, 0.1, 0.2), (0.5, 1.0, 10.0, 100.0, 1000.0)


def flip_table(out_dir: Path) -> None:
    """Figure 1 of the paper: box plots of G_b(|rho - 0.2|) over epsilon."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rho = np.random.default_rng(0).uniform(0, 1, 100)
    print("\n== Flip probability (Figure 1): median / max of G_b(|rho - 0.2|), b = 2c/(eps N)")
    print("N     c    " + "".join(f"eps={e:<9g}" for e in FLIP_EPSILONS))
    figure, axes = plt.subplots(len(CS), len(FLIP_NS), figsize=(12, 8), sharey=True)
    for j, n in enumerate(FLIP_NS):
        for i, c in enumerate(CS):
            values = [flip_probability(rho, 0.2, 2 * c / (n * e)) for e in FLIP_EPSILONS]
            cells = "".join(f"{np.median(v):.3f}/{v.max():.3f}  " for v in values)
            print(f"{n:<5} {c:<4} {cells}")
            ax = axes[i, j]
            ax.boxplot(values, tick_labels=[f"{e:g}" for e in FLIP_EPSILONS])
            ax.set_title(f"N = {n}, c = {c}", fontsize=9)
            ax.set_xlabel("epsilon_total", fontsize=8)
            ax.tick_params(labelsize=7)
        axes[0, 0].set_ylabel("flip probability")
    figure.tight_layout()
    figure.savefig(out_dir / "abcdp_flip_probability.png", dpi=100)
    plt.close(figure)


def simulated_embeddings(
    check: SimulatorCheck, truth: np.ndarray, rows: int, draws: int, seed: int, batch: int = 50
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One data set of `rows` rows simulated at `truth`: theta_t (draws from the prior), the
    real feature sum and the simulated mean embeddings (also benchmarks/abcdp_calibration.py)."""
    data_rng, prior_rng, feature_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    real = check.simulate(truth[None, :], rows, data_rng)[0]
    features = RandomFourierFeatures(1, N_FEATURES, BANDWIDTH, feature_rng)
    theta = check.prior(prior_rng, draws)
    embeddings = np.vstack(
        [
            features.mean_embeddings(check.simulate(theta[i : i + batch], rows, prior_rng))
            for i in range(0, draws, batch)
        ]
    )
    return theta, features.feature_sum(real), embeddings


def toy_embeddings(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One data set: theta_t (T, 5), the real feature sum, the T simulated mean embeddings."""
    check = SimulatorCheck(load_model(MODEL), load_schema(SCHEMA))
    return simulated_embeddings(check, TRUE_THETA, N_ROWS, N_DRAWS, seed)


def error_of(theta: np.ndarray, accepted: tuple[int, ...]) -> float:
    chosen = theta[list(accepted)] if accepted else theta
    return float(np.abs(chosen.mean(axis=0) - TRUE_THETA).mean())


def run_cell(data, c, eps_abc, epsilon, resample, calibration, replicates) -> tuple[float, float]:
    """Mean error and mean number accepted over data sets x replicates."""
    errors, counts = [], []
    for theta, real_sum, embeddings in data:
        if math.isinf(epsilon):
            distances = np.linalg.norm(embeddings - real_sum / N_ROWS, axis=1)
            accepted = exact_acceptance(distances, eps_abc, c)
            errors.append(error_of(theta, accepted))
            counts.append(len(accepted))
            continue
        for _ in range(replicates):
            noise = NoiseSource()
            if calibration == "paper":
                n_hat, sensitivity, eps_svt = N_ROWS, 2.0 / N_ROWS, epsilon
            else:
                n_hat = dp_row_count(N_ROWS, 0.05 * epsilon, noise)
                sensitivity, eps_svt = 1.0 / n_hat, 0.95 * epsilon
            distances = np.linalg.norm(embeddings - real_sum / n_hat, axis=1)
            outcome = svt_below_threshold(
                [distances], eps_abc, c, eps_svt, sensitivity, resample, noise
            )
            errors.append(error_of(theta, outcome.accepted))
            counts.append(len(outcome.accepted))
    return float(np.mean(errors)), float(np.mean(counts))


def toy_tables(out_dir: Path, n_datasets: int, replicates: int) -> None:
    started = time.perf_counter()
    data = [toy_embeddings(seed) for seed in range(n_datasets)]
    prior = np.mean([error_of(theta, ()) for theta, _, _ in data])
    print(
        f"\n== Toy example: {n_datasets} data sets x {replicates} noise replicates "
        f"(embeddings in {time.perf_counter() - started:.0f} s); prior error {prior:.3f}"
    )
    print("mean abs. error of the posterior mean, paper calibration (Delta = 2/N), F / T:")
    print("c     eps_abc " + "".join(f"eps={e:<14g}" for e in EPSILONS))
    grid = {}
    for c in CS:
        for eps_abc in THRESHOLDS:
            cells = []
            for epsilon in EPSILONS:
                if math.isinf(epsilon):
                    error, count = run_cell(data, c, eps_abc, epsilon, False, "paper", 1)
                    cells.append(f"{error:.3f} (acc {count:.0f})")
                    grid[(c, eps_abc, epsilon, False)] = error
                    continue
                pair = []
                for resample in (False, True):
                    error, _ = run_cell(data, c, eps_abc, epsilon, resample, "paper", replicates)
                    grid[(c, eps_abc, epsilon, resample)] = error
                    pair.append(error)
                cells.append(f"{pair[0]:.3f} / {pair[1]:.3f}   ")
            print(f"{c:<5} {eps_abc:<7g} " + "".join(f"{cell:<18}" for cell in cells))
    print(
        "\npaper vs dprelease calibration (n_hat = N + Lap(1/(0.05 eps)), Delta = 1/n_hat), F / T:"
    )
    print("c     eps_abc eps   paper F / T      dprelease F / T")
    for c in (10, 100):
        for eps_abc in (0.05, 0.1):
            for epsilon in (0.5, 1.0):
                ours = [
                    run_cell(data, c, eps_abc, epsilon, r, "dprelease", replicates)[0]
                    for r in (False, True)
                ]
                paper = [grid[(c, eps_abc, epsilon, r)] for r in (False, True)]
                print(
                    f"{c:<5} {eps_abc:<7g} {epsilon:<5g} {paper[0]:.3f} / {paper[1]:.3f}    "
                    f"{ours[0]:.3f} / {ours[1]:.3f}"
                )
    toy_figure(grid, prior, out_dir)
    beside_exact(data, replicates)


def beside_exact(data, replicates: int, c: int = 10) -> None:
    """The DP posterior (dprelease calibration) beside exact rejection ABC on the same data."""
    print(
        f"\n== Toy beside exact rejection ABC (same draws, kernel, threshold; n_hat = N), "
        f"c = {c}, no resampling, dprelease calibration; {len(data)} data sets x {replicates}"
    )
    print("per epsilon: DP error / |DP mean - exact mean| / share of DP draws exact ABC accepts")
    print("eps_abc exact error (acc)  " + "".join(f"eps={e:<20g}" for e in BESIDE_EPSILONS))
    for eps_abc in BESIDE_THRESHOLDS:
        exact_errors, counts, cells = [], [], {e: ([], [], []) for e in BESIDE_EPSILONS}
        for theta, real_sum, embeddings in data:
            exact_distances = np.linalg.norm(embeddings - real_sum / N_ROWS, axis=1)
            exact = exact_acceptance(exact_distances, eps_abc, c)
            exact_mean = theta[list(exact)].mean(axis=0) if exact else theta.mean(axis=0)
            exact_errors.append(error_of(theta, exact))
            counts.append(len(exact))
            for epsilon in BESIDE_EPSILONS:
                for _ in range(replicates):
                    noise = NoiseSource()
                    n_hat = dp_row_count(N_ROWS, 0.05 * epsilon, noise)
                    distances = np.linalg.norm(embeddings - real_sum / n_hat, axis=1)
                    outcome = svt_below_threshold(
                        [distances], eps_abc, c, 0.95 * epsilon, 1.0 / n_hat, False, noise
                    )
                    chosen = list(outcome.accepted)
                    dp_mean = theta[chosen].mean(axis=0) if chosen else theta.mean(axis=0)
                    errors, gaps, shares = cells[epsilon]
                    errors.append(error_of(theta, outcome.accepted))
                    gaps.append(float(np.abs(dp_mean - exact_mean).mean()))
                    if chosen:
                        shares.append(float(np.mean(exact_distances[chosen] <= eps_abc)))
        row = f"{eps_abc:<7g} {np.mean(exact_errors):.3f} ({np.mean(counts):>4.1f})     "
        for epsilon in BESIDE_EPSILONS:
            errors, gaps, shares = cells[epsilon]
            share = f"{np.mean(shares):.2f}" if shares else "n/a"
            row += f"{np.mean(errors):.3f}/{np.mean(gaps):.3f}/{share:<8}  "
        print(row)


def toy_figure(grid: dict, prior: float, out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, len(CS), figsize=(12, 6.5), sharey=True)
    for row, resample in enumerate((False, True)):
        for col, c in enumerate(CS):
            ax = axes[row, col]
            for epsilon in EPSILONS:
                key_resample = False if math.isinf(epsilon) else resample
                errors = [grid[(c, a, epsilon, key_resample)] for a in THRESHOLDS]
                label = "non-private" if math.isinf(epsilon) else f"eps = {epsilon:g}"
                ax.plot(THRESHOLDS, errors, marker="o", label=label)
            ax.axhline(prior, color="0.5", ls="--", lw=0.8, label="prior")
            ax.set_xscale("log")
            ax.set_xticks(THRESHOLDS, [f"{a:g}" for a in THRESHOLDS])
            ax.minorticks_off()
            ax.set_title(f"c = {c}, RESAMPLE = {resample}", fontsize=9)
            ax.set_xlabel("eps_abc")
        axes[row, 0].set_ylabel("mean abs. error")
    axes[0, 0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out_dir / "abcdp_toy_error.png", dpi=100)
    plt.close(figure)


def speed() -> None:
    config = ABCDPConfig(
        model=MODEL,
        n_samples=10,
        threshold=1e-6,
        epsilon=1.0,
        n_draws=N_DRAWS,
        n_sim=N_ROWS,
        n_features=N_FEATURES,
        bandwidth=BANDWIDTH,
        seed=0,
    )
    plan = plan_abcdp(load_schema(SCHEMA), load_model(MODEL), config)
    real = plan.simulator.encoder.encode(pd.read_csv("data/models/toy_mixture.csv"))
    started, cpu = time.perf_counter(), time.process_time()
    result = run_abcdp(real, plan, NoiseSource())
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"\n== Speed: run_abcdp, N = m = {N_ROWS}, T = {N_DRAWS} (all tested: "
        f"{result.n_consumed}), D = {N_FEATURES}: {seconds:.1f} s wall, {cpu:.1f} s CPU "
        f"(all threads; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )


def per_draw_speed(n_draws: int = 2000, m: int = 569) -> None:
    schema = load_schema("data/breast_cancer.yaml")
    print(f"\n== Speed: simulating {n_draws} draws x m = {m} rows (checked, encoded)")
    for name in ("RadiusByDiagnosis", "RadiusByDiagnosisPerDraw"):
        check = SimulatorCheck(load_model(f"data/models/breast_cancer_radius.py:{name}"), schema)
        theta = check.prior(np.random.default_rng(0), n_draws)
        rng = np.random.default_rng(1)
        started = time.perf_counter()
        for start in range(0, n_draws, 250_000 // m):
            check.simulate(theta[start : start + 250_000 // m], m, rng)
        print(f"{check.mode.name:<9} ({name}): {time.perf_counter() - started:.2f} s wall")
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", default="benchmarks/out")
    parser.add_argument("--datasets", type=int, default=10)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--skip-toy", action="store_true", help="Only the flip figure and speed.")
    args = parser.parse_args()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    flip_table(out_dir)
    speed()
    per_draw_speed()
    if not args.skip_toy:
        toy_tables(out_dir, args.datasets, args.replicates)
    print(f"\nfigures in {out_dir}/")


if __name__ == "__main__":
    main()
