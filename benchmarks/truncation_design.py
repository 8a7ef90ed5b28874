"""The adaptive-truncation design score chosen by a benchmark, and the coverage table of the
default (docs/adaptive-truncation.md 3.4; docs/decisions/0029-posterior-releases.md). Run through
`benchmarks/adaptive_truncation.py --sections design targets` (or this file directly).

Every run uses the release's defaults: the prior from the schema bounds
(`NormalPrior.from_bounds`), the IBIS engine, n = 1000 rows (all processed), values clipped to
the bounds as the release loads them, fresh DP noise from a production `NoiseSource`
(OS entropy: numbers vary slightly run to run), the data and the SMC seeded per repetition.

- design: scores "mu" (the paper's), "trace" and "det" (mirrored pair, D-optimal) on several
  truths and bounds at epsilon 1 and 5: 90 % coverage of mu and sigma, median posterior sd of
  mu and of sigma (in units of the true sigma), mean |posterior mean - truth| / sigma.
- targets: the default design on N(37, 4^2) in [0, 100] and on the paper's N(50, 10)
  (variance 10, as the paper's code) in [-1000, 1000], epsilon 1, 20 repetitions: the 90 %
  intervals of mu and of sigma must each cover the truth in >= 16 of 20, and the median posterior
  sd of mu must be <= 0.6 on the first case.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from dprelease.inference.truncation.design import SCORES, design_truncation
from dprelease.inference.truncation.engines import NormalPrior
from dprelease.inference.truncation.online import run_adaptive_truncation
from dprelease.privacy.noise import NoiseSource

# (name, mu, sigma, lo, hi, epsilon)
DESIGN_CASES = [
    ("N(37,4) [0,100]", 37.0, 4.0, 0.0, 100.0, 1.0),
    ("N(50,10v) [-1000,1000]", 50.0, math.sqrt(10.0), -1000.0, 1000.0, 1.0),
    ("N(80,15) [0,100]", 80.0, 15.0, 0.0, 100.0, 1.0),
    ("N(0,1) [-5,5]", 0.0, 1.0, -5.0, 5.0, 1.0),
    ("N(37,4) [0,100] eps5", 37.0, 4.0, 0.0, 100.0, 5.0),
]
TARGET_CASES = DESIGN_CASES[:2]
N_ROWS = 1000


def one_run(case: tuple, score: str, rep: int, particles: int) -> dict:
    """One release-path run with the defaults; coverage and spread of the posterior."""
    name, mu, sigma, lo, hi, epsilon = case
    values = np.clip(np.random.default_rng(3000 + rep).normal(mu, sigma, N_ROWS), lo, hi)
    start = time.perf_counter()
    result = run_adaptive_truncation(
        values,
        N_ROWS,
        design=design_truncation(epsilon=epsilon, score=score),
        prior=NormalPrior.from_bounds(lo, hi),
        bounds=(lo, hi),
        epsilon=epsilon,
        noise=NoiseSource(),
        rng=np.random.default_rng(rep),
        n_particles=particles,
    )
    s = result.posterior.summary()
    return {
        "case": name,
        "score": score,
        "rep": rep,
        "cov_mu": s["mu_q05"] <= mu <= s["mu_q95"],
        "cov_sigma": s["sigma_q05"] <= sigma <= s["sigma_q95"],
        "sd_mu": s["mu_sd"],
        "sd_mu_rel": s["mu_sd"] / sigma,
        "sd_sigma_rel": s["sigma_sd"] / sigma,
        "err_mu_rel": abs(s["mu_mean"] - mu) / sigma,
        "sigma_mean": s["sigma_mean"],
        "seconds": time.perf_counter() - start,
    }


def table(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    grouped = runs.groupby(keys, sort=False)
    return pd.DataFrame(
        {
            "reps": grouped.rep.count(),
            "cov90 mu": grouped.cov_mu.sum(),
            "cov90 sigma": grouped.cov_sigma.sum(),
            "median sd mu": grouped.sd_mu.median(),
            "median sd mu/sigma": grouped.sd_mu_rel.median(),
            "median sd sigma/sigma": grouped.sd_sigma_rel.median(),
            "mean |err mu|/sigma": grouped.err_mu_rel.mean(),
            "median sigma_hat": grouped.sigma_mean.median(),
            "s/run": grouped.seconds.mean(),
        }
    )


def print_design_choice(reps: int, particles: int = 500) -> pd.DataFrame:
    """Every score on every design case; prints the table and the per-score totals."""
    for epsilon in sorted({case[-1] for case in DESIGN_CASES}):
        for score in SCORES:
            d = design_truncation(epsilon=epsilon, score=score)
            print(
                f"design eps={epsilon:g} score={score}: [a*, b*] = [{d.a}, {d.b}]"
                f"{' and its mirror' if d.mirrored else ''}, "
                f"F = {np.round(d.fisher, 4).tolist()}"
            )
    runs = pd.DataFrame(
        [
            one_run(case, score, rep, particles)
            for case in DESIGN_CASES
            for score in SCORES
            for rep in range(reps)
        ]
    )
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        print(f"Design choice ({reps} reps per cell, N = {particles} particles):")
        print(table(runs, ["case", "score"]).round(3).to_string())
        print("Totals over the cases (coverage counts out of", reps * len(DESIGN_CASES), "):")
        print(table(runs, ["score"]).round(3).to_string())
    return runs


def print_targets(reps: int = 20, particles: int = 1000) -> pd.DataFrame:
    """The coverage table of the default design on the two target cases, with verdicts."""
    default = design_truncation().score
    runs = pd.DataFrame(
        [one_run(case, default, rep, particles) for case in TARGET_CASES for rep in range(reps)]
    )
    summary = table(runs, ["case", "score"])
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        print(f"Coverage of the default design (score {default}, {reps} reps, N = {particles}):")
        print(summary.round(3).to_string())
    need = math.ceil(0.8 * reps)
    for (name, _), row in summary.iterrows():
        ok = row["cov90 mu"] >= need and row["cov90 sigma"] >= need
        line = f"{name}: cov90 mu {row['cov90 mu']}/{reps}, sigma {row['cov90 sigma']}/{reps}"
        if name == TARGET_CASES[0][0]:
            ok = ok and row["median sd mu"] <= 0.6
            line += f", median sd mu {row['median sd mu']:.3f} (need <= 0.6)"
        print(f"{'PASS' if ok else 'FAIL'} {line} (need >= {need} each)")
    return runs


if __name__ == "__main__":
    print_design_choice(6)
    print_targets(20)
