"""How many releases a cap admits under the accountants that may enforce it (basic, and rdp:
the Rényi filter), what the PLD figure would have admitted (reported only: valid for a
sequence of mechanisms fixed in advance, never used to admit a release), and what the rdp
check costs inside the reservation lock.

`python benchmarks/accounting.py [--cap-epsilon 6] [--cap-delta 1e-6] [--epsilon 1] [--runs 3]`

Release kinds at their default settings, epsilon 1 per release (delta: the planner's default,
the cap's delta in proportion to epsilon):
- synthetic: `plan_release` on data/breast_cancer.yaml with the cap replaced: the marginals
  generator (Laplace histograms) and the default weights (calibration: analytic Gaussian) at
  the default weights fraction; also privbayes (exponential mechanism + Laplace tables),
  dpgan (DP-SGD, Poisson-subsampled Gaussian) and OpenDP's AIM and MST (rho-zCDP)
  generators for comparison;
- adaptive truncation (min_rows variant): one pure-epsilon entry (per-row Laplace releases in
  parallel composition), as `inference.truncation.privacy` reserves it;
- ABCDP: a Laplace row count (count_fraction of epsilon) and a pure-epsilon SVT.
Columns: `basic` and `rdp` count releases admitted; `pld*` how many the PLD figure would
have admitted (not enforced); `eps(rdp) at basic max` the Rényi filter's epsilon after as
many releases as basic admits. Timing: a SQLite ledger with 100 entries of the kind (and a
worst case of 100 distinct Laplace mechanisms), cold (per-process Rényi-curve cache cleared;
a reserve composes under the lock) and locked (the composition the lock waits for). Public
quantities only: no data is read.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dprelease.config import ABCDPConfig, SyntheticConfig
from dprelease.privacy import accountants, rdp_filter
from dprelease.privacy.accounting import Cap, PlannedSpend, Spend, compose
from dprelease.privacy.calibration import laplace_scale
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.privacy.mechanisms import Laplace, PureEpsilon
from dprelease.release.synthetic.plan import DEFAULT_WEIGHTS, plan_release
from dprelease.schema import Budget, load_schema

ROOT = Path(__file__).parent.parent
HISTORY = 100


def synthetic(cap: Spend, epsilon: float, generator: str, options: dict) -> list[PlannedSpend]:
    schema = load_schema(ROOT / "data" / "breast_cancer.yaml")
    schema = schema.model_copy(update={"budget": Budget(epsilon=cap.epsilon, delta=cap.delta)})
    config = SyntheticConfig(epsilon=epsilon, generator=generator, generator_options=options)
    return plan_release(schema, config).planned_spends


def truncation(epsilon: float) -> list[PlannedSpend]:
    return [PlannedSpend("adaptive_truncation", epsilon, 0.0, {}, PureEpsilon(epsilon))]


def abcdp(epsilon: float) -> list[PlannedSpend]:
    default = ABCDPConfig.model_fields["count_fraction"].default
    count = default * epsilon
    return [
        PlannedSpend("dp_row_count", count, 0.0, {}, Laplace(laplace_scale(1.0, count), 1.0)),
        PlannedSpend("abcdp_svt", epsilon - count, 0.0, {}, PureEpsilon(epsilon - count)),
    ]


def time_reserve(history: list[PlannedSpend], planned: list[PlannedSpend], runs: int) -> tuple:
    """Median seconds of a cold reserve and of the locked composition, 100-entry history."""
    cap = Cap(1e6, 0.5, "rdp")  # never refuses: the check's cost, not its answer
    cold, locked = [], []
    with tempfile.TemporaryDirectory() as directory:
        for run in range(runs):
            with Ledger(f"sqlite:///{Path(directory) / f'{run}.sqlite'}") as ledger:
                ledger.reserve("d", cap, "history", history)
                rdp_filter.rdp_curve.cache_clear()
                started = time.perf_counter()
                ledger.reserve("d", cap, "next", planned)
                cold.append(time.perf_counter() - started)
                started = time.perf_counter()
                accountants.compose_history([*history, *planned, *planned], cap, "rdp")
                locked.append(time.perf_counter() - started)
    return statistics.median(cold), statistics.median(locked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cap-epsilon", type=float, default=6.0)
    parser.add_argument("--cap-delta", type=float, default=1e-6)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    cap, eps = Spend(args.cap_epsilon, args.cap_delta), args.epsilon
    kinds: dict[str, Callable[[], list[PlannedSpend]]] = {
        f"synthetic (marginals + {DEFAULT_WEIGHTS})": lambda: synthetic(cap, eps, "marginals", {}),
        f"synthetic (privbayes + {DEFAULT_WEIGHTS})": lambda: synthetic(cap, eps, "privbayes", {}),
        f"synthetic (dpgan + {DEFAULT_WEIGHTS})": lambda: synthetic(cap, eps, "dpgan", {}),
        f"synthetic (aim + {DEFAULT_WEIGHTS})": lambda: synthetic(cap, eps, "aim", {}),
        f"synthetic (mst + {DEFAULT_WEIGHTS})": lambda: synthetic(cap, eps, "mst", {}),
        "adaptive truncation (min_rows)": lambda: truncation(eps),
        "abcdp (count + SVT)": lambda: abcdp(eps),
    }
    print(f"cap epsilon={cap.epsilon:g}, delta={cap.delta:g}; epsilon {eps:g} per release")
    header = f"{'release kind':<40}{'delta/rel':>10}{'basic':>7}{'rdp':>6}{'pld*':>6}"
    print(f"{header}{'eps(rdp) at basic max':>23}{'cold s':>9}{'locked ms':>10}")
    for name, make in kinds.items():
        release = make()
        basic = accountants.releases_that_fit([], release, cap, "basic")
        tight = accountants.releases_that_fit([], release, cap, "rdp")
        reported = pld_would_admit(release, cap)
        at_basic = accountants.compose_history(release * max(basic, 1), cap, "rdp").enforced
        per = compose(release)
        history = (release * HISTORY)[:HISTORY]
        cold, locked = time_reserve(history, release, args.runs)
        print(
            f"{name:<40}{per.delta:>10.3g}{basic:>7}{tight:>6}{reported:>6}"
            f"{at_basic.epsilon:>23.4f}{cold:>9.3f}{1000 * locked:>10.2f}"
        )
    worst = [PlannedSpend("l", 0.05, 0.0, {}, Laplace(20.0 + i / 100, 1.0)) for i in range(HISTORY)]
    cold, locked = time_reserve(worst, truncation(eps), args.runs)
    print(f"{'worst case: 100 distinct mechanisms':<40}{'':>52}{cold:>9.3f}{1000 * locked:>10.2f}")
    print("* pld: what the PLD figure would admit; reported only, it never admits a release")


def pld_would_admit(release: list[PlannedSpend], cap: Spend) -> int:
    """Releases whose PLD figure (or basic sums) fit the cap: what the pld accountant admitted
    before it lost the right to enforce (no filter proof)."""

    def fits(k: int) -> bool:
        composition = accountants.compose_history(release * k, cap, "rdp", report_pld=True)
        reported = composition.fixed_in_advance
        return composition.basic.fits_within(cap) or (
            reported is not None and reported.fits_within(cap)
        )

    count = 0
    while fits(count + 1):
        count += 1
    return count


if __name__ == "__main__":
    main()
