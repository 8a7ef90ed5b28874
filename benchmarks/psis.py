"""Benchmark: dprelease.diagnostics.psis.smoothing against arviz.psislw (ArviZ 0.23).

Prints the best-of-3 wall time for 1-D weight vectors of 10^4, 10^6 and 10^7 log weights and
for 2-D batches (4 vectors of 10^6 each; 1,000 vectors of 1,000 each), the speed-up ratio,
and the largest k-hat difference between the two implementations as a sanity check.

Run: ``.venv/bin/python benchmarks/psis.py`` (needs the dev extra for ArviZ).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np

from dprelease.diagnostics import psis

CASES: list[tuple[int, ...]] = [
    (10_000,),
    (1_000_000,),
    (10_000_000,),
    (4, 1_000_000),
    (1_000, 1_000),
]
REPEATS = 3


def best_time(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    def arviz_psislw(lw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(over="ignore"):  # ArviZ's _gpdfit overflows harmlessly in exp
            return arviz.psislw(lw, reff=1.0, normalize=False)

    rng = np.random.default_rng(0)
    print(f"ArviZ {arviz.__version__}, numpy {np.__version__}; best of {REPEATS} runs")
    header = f"{'shape':>14} {'dprelease [s]':>14} {'arviz [s]':>10} {'ratio':>7} {'max|dk|':>9}"
    print(header)
    print("-" * len(header))
    for shape in CASES:
        lw = rng.standard_t(5, shape)
        ours = best_time(lambda lw=lw: psis(lw))
        theirs = best_time(lambda lw=lw: arviz_psislw(lw))
        dk = np.max(np.abs(np.asarray(psis(lw).k_hat) - arviz_psislw(lw)[1]))
        label = " x ".join(f"{n:,}" for n in shape)
        print(f"{label:>14} {ours:14.4f} {theirs:10.4f} {theirs / ours:7.1f} {dk:9.1e}")


if __name__ == "__main__":
    main()
