"""Benchmark: ABCDP calibrated against exact rejection ABC, and the report's prior test.

1. Simulation-based calibration (Talts et al. 2018) of the toy model (Park et al. section
   6.1) against the exact reference: for K data sets, theta* ~ Dirichlet(1, ..., 1) prior,
   N = SBC_ROWS rows simulated at theta*, T = SBC_DRAWS prior draws with m = N simulated rows
   each, RFF D = 100 with l = 0.12 (encoded), c = 10, eps_abc = SBC_THRESHOLD. For every
   data set and coordinate, u = (#{accepted theta_j < theta*_j} + U) / (n + 1), U ~ U(0, 1),
   is uniform when the posterior is calibrated. Exact rejection ABC (`reference.py`: same
   draws, kernel and threshold, n_hat = N) is not calibrated itself (a threshold > 0 widens
   the posterior: u piles up near 1/2); the question is whether ABCDP (dprelease
   calibration: DP count at 5 % of epsilon, Delta = 1/n_hat, SVT without resampling, OS
   noise) reproduces the reference's calibration as epsilon grows. Printed per method:
   mean accepted, mean |u - 1/2| (1/4 when calibrated), coverage of the central 90 % rank
   interval, KS distance of the pooled u to U(0, 1), KS distance to the exact reference's u,
   mean |posterior mean - exact posterior mean| and mean |posterior mean - theta*|. SBC
   alone cannot judge a posterior that is the prior (prior draws are calibrated by
   construction): at small epsilon ABCDP looks "calibrated" because it returns near-prior
   draws; the distance to the exact posterior and to theta* tell it apart.
2. Power of the report's prior test (`summary.py`): n accepted draws against M = 1000 prior
   draws, 4 parameters with a U(0, 1) prior; the diagonal-normal KL permutation test against
   an energy-distance permutation test (Szekely and Rizzo), at the 5 % level, under the null
   and three alternatives (one parameter shrunk to 0.3 of its prior sd, all shrunk, one
   moved to U(0.3, 1)).

Run: ``.venv/bin/python benchmarks/abcdp_calibration.py [--datasets 60] [--replicates 5]
[--power-replicates 40]``. About 5 minutes on 2 cores (the simulations dominate).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from abcdp import N_FEATURES, simulated_embeddings
from scipy import stats
from scipy.spatial.distance import cdist

from dprelease.inference.abcdp.model import SimulatorCheck, load_model
from dprelease.inference.abcdp.reference import exact_acceptance
from dprelease.inference.abcdp.summary import kl_test
from dprelease.inference.abcdp.svt import svt_below_threshold
from dprelease.privacy.counting import dp_row_count
from dprelease.privacy.noise import NoiseSource
from dprelease.schema import load_schema

MODEL = "data/models/toy_mixture.py:DirichletUniformMixture"
SCHEMA = "data/models/toy_mixture.yaml"
SBC_ROWS, SBC_DRAWS, SBC_C, SBC_THRESHOLD = 1000, 1000, 10, 0.15
SBC_EPSILONS = (0.1, 1.0, 10.0, 100.0)
N_MIN = 20  # the default refusal of a small DP count


def sbc_dataset(check: SimulatorCheck, seed: int):
    """theta*, the T prior draws, the real feature sum and the T simulated mean embeddings."""
    star_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[0])
    star = check.prior(star_rng, 1)[0]
    return (star, *simulated_embeddings(check, star, SBC_ROWS, SBC_DRAWS, seed + 1, batch=100))


def ranks(star: np.ndarray, accepted: np.ndarray, jitter: np.ndarray) -> np.ndarray:
    """u_j = (#{accepted_j < star_j} + U_j) / (n + 1) per coordinate (uniform if calibrated);
    the jitter U is shared by every method on one data set (equal draws, equal u)."""
    below = (accepted < star[None, :]).sum(axis=0)
    return (below + jitter) / (len(accepted) + 1)


def sbc(n_datasets: int, replicates: int) -> None:
    check = SimulatorCheck(load_model(MODEL), load_schema(SCHEMA))
    rng = np.random.default_rng(12345)  # rank jitter only
    methods = ["exact ABC", *(f"ABCDP eps={e:g}" for e in SBC_EPSILONS)]
    u = {name: [] for name in methods}
    gap = {name: [] for name in methods}
    error = {name: [] for name in methods}
    accepted_count = {name: [] for name in methods}
    refused = dict.fromkeys(SBC_EPSILONS, 0)
    started = time.perf_counter()
    for seed in range(n_datasets):
        star, theta, real_sum, embeddings = sbc_dataset(check, seed)
        exact_distances = np.linalg.norm(embeddings - real_sum / SBC_ROWS, axis=1)
        exact = list(exact_acceptance(exact_distances, SBC_THRESHOLD, SBC_C))
        if not exact:
            continue
        exact_mean = theta[exact].mean(axis=0)
        jitter = rng.uniform(size=star.shape)
        runs = [("exact ABC", exact)]
        for epsilon in SBC_EPSILONS:
            for _ in range(replicates):
                noise = NoiseSource()
                n_hat = dp_row_count(SBC_ROWS, 0.05 * epsilon, noise)
                if n_hat < N_MIN:  # a release refuses it (after the count)
                    refused[epsilon] += 1
                    continue
                distances = np.linalg.norm(embeddings - real_sum / n_hat, axis=1)
                outcome = svt_below_threshold(
                    [distances], SBC_THRESHOLD, SBC_C, 0.95 * epsilon, 1.0 / n_hat, False, noise
                )
                if outcome.accepted:
                    runs.append((f"ABCDP eps={epsilon:g}", list(outcome.accepted)))
        for name, chosen in runs:
            posterior = theta[chosen]
            u[name].append(ranks(star, posterior, jitter))
            gap[name].append(float(np.abs(posterior.mean(axis=0) - exact_mean).mean()))
            error[name].append(float(np.abs(posterior.mean(axis=0) - star).mean()))
            accepted_count[name].append(len(chosen))
    print(
        f"\n== SBC of the toy against exact rejection ABC: {len(u['exact ABC'])} of "
        f"{n_datasets} data sets with an exact acceptance (theta* ~ prior, N = m = {SBC_ROWS}, "
        f"T = {SBC_DRAWS}, c = {SBC_C}, eps_abc = {SBC_THRESHOLD}, RFF D = {N_FEATURES}), "
        f"{replicates} noise replicates per epsilon; simulations "
        f"{time.perf_counter() - started:.0f} s (load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores)"
    )
    if any(refused.values()):
        print(f"runs refused by n_min = {N_MIN} after the DP count: {refused}")
    print(
        "method            accepted  |u-1/2| (0.25)  90% cover  KS to U(0,1)  KS to exact  "
        "|mean - exact|  |mean - theta*|"
    )
    reference = np.concatenate(u["exact ABC"])
    for name in methods:
        values = np.concatenate(u[name])
        ks_uniform = stats.kstest(values, "uniform").statistic
        ks_exact = stats.ks_2samp(values, reference).statistic if name != "exact ABC" else 0.0
        print(
            f"{name:<17} {np.mean(accepted_count[name]):>8.1f}  "
            f"{np.mean(np.abs(values - 0.5)):>14.3f}  "
            f"{np.mean((values > 0.05) & (values < 0.95)):>9.2f}  {ks_uniform:>12.3f}  "
            f"{ks_exact:>11.3f}  {np.mean(gap[name]):>14.3f}  {np.mean(error[name]):>15.3f}"
        )


def energy_test(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> float:
    """Permutation p-value of the energy distance (the alternative the report did not take)."""
    pooled = np.vstack([x, y])
    distances = cdist(pooled, pooled)
    row_sums, total, n, m = distances.sum(axis=1), distances.sum(), len(x), len(y)

    def statistic(ix, iy, axis=-1):  # noqa: ANN001, ANN202
        ix = np.asarray(ix, dtype=np.intp)
        xx = distances[ix[..., :, None], ix[..., None, :]].sum(axis=(-2, -1))
        x_all = row_sums[ix].sum(axis=-1)
        return 2 * (x_all - xx) / (n * m) - xx / n**2 - (total - 2 * x_all + xx) / m**2

    result = stats.permutation_test(
        (np.arange(n), np.arange(n, n + m)),
        statistic,
        vectorized=True,
        n_resamples=999,
        alternative="greater",
        rng=rng,
        batch=200,
    )
    return float(result.pvalue)


def power(replicates: int) -> None:
    rng = np.random.default_rng(7)
    alternatives = {
        "null (prior draws)": lambda n: rng.uniform(size=(n, 4)),
        "one shrunk to 0.3 sd": lambda n: np.column_stack(
            [0.5 + 0.3 * (rng.uniform(size=n) - 0.5), rng.uniform(size=(n, 3))]
        ),
        "all shrunk to 0.3 sd": lambda n: 0.5 + 0.3 * (rng.uniform(size=(n, 4)) - 0.5),
        "one moved to U(0.3, 1)": lambda n: np.column_stack(
            [rng.uniform(0.3, 1.0, size=n), rng.uniform(size=(n, 3))]
        ),
    }
    print(
        f"\n== Power of the prior test at the 5 % level ({replicates} replicates, 4 parameters, "
        "U(0, 1) prior, 1000 prior draws): KL (the report's) / energy distance"
    )
    print("alternative               n = 10         n = 30")
    for name, draw in alternatives.items():
        cells = []
        for n in (10, 30):
            kl, energy = [], []
            for _ in range(replicates):
                x, y = draw(n), rng.uniform(size=(1000, 4))
                kl.append(kl_test(x, y, rng)[1] <= 0.05)
                energy.append(energy_test(x, y, rng) <= 0.05)
            cells.append(f"{np.mean(kl):.2f} / {np.mean(energy):.2f}")
        print(f"{name:<25} {cells[0]:<14} {cells[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=60)
    parser.add_argument("--replicates", type=int, default=5)
    parser.add_argument("--power-replicates", type=int, default=40, help="0: skip.")
    args = parser.parse_args()
    if args.power_replicates:
        power(args.power_replicates)
    sbc(args.datasets, args.replicates)


if __name__ == "__main__":
    main()
