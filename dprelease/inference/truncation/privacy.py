"""Privacy plan of an adaptive-truncation release under add/remove-one (docs/adaptive-truncation.md
section 4.3).

The paper (Yildirim 2023, Proposition 1 and Appendix A) proves epsilon-DP under substitution
for a sequence whose length n is public; docs/privacy-model.md makes the row count N_D private and
uses add/remove-one, so dprelease processes a PUBLIC number of rows T, chosen as a uniformly
random subset of T distinct rows in uniformly random order, the subset and order drawn from
the mechanism's `NoiseSource` (never from the user seed: a known permutation breaks the
coupling below). T is fixed in one of two ways:

- variant "min_rows" (pure epsilon): the schema declares a public lower bound `min_rows` and
  T <= min_rows is requested; a table with fewer rows than T violates the schema and is
  refused (exit 2) without saying how many rows it has.
- variant "dp_count" ((epsilon + epsilon_count, delta_T)): a Laplace count
  n~ = N_D + Lap(1/epsilon_count) (sensitivity 1) and
  T = min(max_steps, floor(n~ - ln(1/(2 delta_T)) / epsilon_count)), so that
  P(T > N_D) = P(Lap >= ln(1/(2 delta_T))/epsilon_count + 1) = delta_T e^{-epsilon_count}
  <= delta_T for every N_D. If T > N_D the run aborts with a generic error (no output).

Claim: given T, the transcript (y_t, l_t, r_t, Thompson draws)_{t<=T} and all its
post-processing are epsilon-DP under add/remove-one. Proof sketch: let D' = D + {x*}. A
uniform T-subset of D' in random order either misses x* (probability 1 - q, q = T/(N_D + 1))
and then has exactly the law of the T-subset of D, or holds x* at a uniform slot j with the
other T - 1 rows a uniform subset of D; coupling x* with a uniformly chosen unused row of D
turns this into the T-subset of D with one slot substituted. For a fixed slot assignment the
transcript density is a product of per-slot Laplace factors (paper Appendix A: l_t, r_t depend
only on earlier releases and independent randomness), so one substitution changes it by a
factor in [e^-eps, e^eps]. Hence P_D'(S) <= (1 - q) P_D(S) + q e^eps P_D(S) <= e^eps P_D(S)
and P_D'(S) >= e^-eps P_D(S). (Subsampling amplification would give less than epsilon, but q
involves N_D, so it is not claimed.) Variant "dp_count" adds the count by basic composition
and the failure event, whose probability bound does not depend on N_D.

Each processed row enters ONE Laplace release; epsilon is neither divided nor multiplied by T
(parallel composition). A second run over the same table is a new spend.

A nullable column: the rows processed are those with a value, so the posterior is of the
column's non-missing values, and the rows with a missing value are never processed. T always
comes from a DP count of the rows with a value ("dp_count"): the schema's `min_rows` bounds
the table's rows, not those with a value (any number of them may be missing), so it cannot
fix T; a pure-epsilon T would need a public lower bound on the rows with a value, which the
schema does not declare. The proof above holds on the subset D_v of rows with a value:
keeping a row depends on that row alone, so adding a row x* to D adds x* to D_v when it has a
value and leaves D_v, hence every output, unchanged otherwise; the count of D_v has
add/remove sensitivity 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dprelease.errors import InputError
from dprelease.privacy.accounting import PlannedSpend, default_delta
from dprelease.privacy.counting import dp_row_count
from dprelease.privacy.mechanisms import ApproxDP, PureEpsilon
from dprelease.privacy.noise import NoiseSource
from dprelease.release.files import COUNT_MECHANISM, TRUNCATION_MECHANISM
from dprelease.schema import CategoricalColumn, Schema

ROW_SELECTION = "uniform subset without replacement, random order"
MISSING_VALUES = (
    "left out: the rows processed (and counted for T) are those with a value, so the posterior "
    "is of the column's non-missing values"
)
TOO_FEW_ROWS = "the table has fewer rows than the number of rows to process"
BELOW_MIN_ROWS = "the table has fewer rows than the schema's min_rows"


@dataclass(frozen=True)
class TruncationPlan:
    """Public plan of one release: column, bounds, budgets and how T is fixed."""

    column: str
    bounds: tuple[float, float]
    epsilon: float
    variant: str  # "min_rows" | "dp_count"
    n_steps: int | None  # T for "min_rows"; None until the DP count for "dp_count"
    delta: float = 0.0  # delta_T ("dp_count" only)
    count_epsilon: float = 0.0
    max_steps: int = 10_000
    min_steps: int = 50
    nullable: bool = False  # rows with a missing value are left out; T counts the others

    def planned_spends(self, design: dict) -> list[PlannedSpend]:
        """The release's ONE ledger entry (docs/adaptive-truncation.md 6.4) with its typed
        mechanism description. Under "dp_count" the Laplace row count that fixes T and the
        transcript given T have a joint proof (module docstring: (epsilon + epsilon_count,
        delta_T), the failure event included), so they are one (epsilon, delta) entry, never
        two that an accountant could compose as if each held on its own; the count's
        parameters are in `params["count"]`."""
        params: dict = {
            "column": self.column,
            "family": design["family"],
            "n_steps": self.n_steps,
            "score": design["score"],
            "a": design["a"],
            "b": design["b"],
            "noise": "laplace",
            "scale_rule": "(r_t - l_t)/epsilon",
            "per_row": True,
            "row_selection": ROW_SELECTION,
            "bounds": list(self.bounds),
            "t_from": self.variant,
            "transcript_epsilon": self.epsilon,
        }
        if self.nullable:
            params["missing_values"] = MISSING_VALUES
        if self.variant != "dp_count":
            return [
                PlannedSpend(
                    TRUNCATION_MECHANISM, self.epsilon, 0.0, params, PureEpsilon(self.epsilon)
                )
            ]
        params["count"] = {
            "mechanism": COUNT_MECHANISM,
            "counts": "rows with a value in the column" if self.nullable else "rows",
            "epsilon": self.count_epsilon,
            "sensitivity": 1,
            "noise": "laplace",
            "scale": 1.0 / self.count_epsilon,
            "max_steps": self.max_steps,
            "min_steps": self.min_steps,
            "delta_T": self.delta,
        }
        joint = self.epsilon + self.count_epsilon
        return [
            PlannedSpend(
                TRUNCATION_MECHANISM, joint, self.delta, params, ApproxDP(joint, self.delta)
            )
        ]


def plan_truncation(
    schema: Schema,
    column: str,
    epsilon: float,
    *,
    delta: float | None = None,
    n_steps: int | None = None,
    count_epsilon: float | None = None,
    max_steps: int = 10_000,
    min_steps: int = 50,
) -> TruncationPlan:
    """Validate the public inputs and fix how T is chosen; raise `InputError` (exit 2).

    Defaults when neither `n_steps` nor `delta` is given (public functions of the schema):
    with a schema `min_rows` and a column that is not nullable, the pure-epsilon variant with
    T = min(min_rows, max_steps); otherwise T from a DP count with delta_T =
    `privacy.accounting.default_delta` (the cap's delta in proportion to this release's share
    of the cap's epsilon). A pure-epsilon cap without `min_rows`, or with a nullable column,
    has no default and is refused with what to declare. A nullable column refuses `n_steps`
    (module docstring: `min_rows` does not bound its rows with a value).
    """
    if column not in schema.columns:
        raise InputError(f"column {column!r} is not in the schema of dataset {schema.dataset!r}")
    spec = schema.columns[column]
    nullable = spec.nullable
    if n_steps is None and delta is None:
        if schema.min_rows is not None and not nullable:
            n_steps = min(schema.min_rows, max_steps)
        else:
            delta = default_delta(schema.budget, epsilon)
    delta = 0.0 if delta is None else delta
    if isinstance(spec, CategoricalColumn):
        raise InputError(
            f"column {column!r} is categorical; adaptive truncation needs a continuous or "
            "integer column"
        )
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise InputError("--epsilon must be a positive finite number")
    if not 0 <= delta < 1:
        raise InputError("--delta must be in [0, 1)")
    if not 1 <= min_steps <= max_steps:
        raise InputError("--min-steps must be at least 1 and at most --max-steps")
    bounds = (float(spec.min), float(spec.max))
    if n_steps is not None:
        if n_steps < 1:
            raise InputError("--n-steps must be a positive integer")
        if nullable:
            raise InputError(
                f"column {column!r} is nullable: --n-steps cannot fix T for it (the schema's "
                "min_rows bounds the table's rows, not those with a value); leave it out, and T "
                "comes from a DP count of the rows with a value (needs --delta > 0)"
            )
        if schema.min_rows is None:
            raise InputError(
                "--n-steps needs a public lower bound min_rows in the schema; without it use "
                "--delta > 0 (T from a DP row count)"
            )
        if n_steps > schema.min_rows:
            raise InputError(
                f"--n-steps {n_steps} exceeds the schema's public min_rows {schema.min_rows}"
            )
        return TruncationPlan(column, bounds, float(epsilon), "min_rows", int(n_steps))
    if delta <= 0 and nullable:
        raise InputError(
            f"column {column!r} is nullable: the number of rows T comes from a DP count of the "
            "rows with a value, which needs --delta > 0 (the schema's budget delta is 0: pass "
            "--delta within the cap)"
        )
    if delta <= 0:
        raise InputError(
            "without --n-steps the number of rows T comes from a DP count, which needs "
            "--delta > 0 (the schema's budget delta is 0: declare a public min_rows in the "
            "schema, or pass --delta within the cap)"
        )
    count_epsilon = 0.05 * epsilon if count_epsilon is None else count_epsilon
    if not (math.isfinite(count_epsilon) and count_epsilon > 0):
        raise InputError("--count-epsilon must be a positive finite number")
    return TruncationPlan(
        column,
        bounds,
        float(epsilon),
        "dp_count",
        None,
        float(delta),
        float(count_epsilon),
        int(max_steps),
        int(min_steps),
        nullable,
    )


def steps_from_count(noisy_count: float, count_epsilon: float, delta: float, max_steps: int) -> int:
    """T = min(max_steps, floor(n~ - ln(1/(2 delta)) / epsilon_count))
    (docs/adaptive-truncation.md 4.3)."""
    margin = math.log(1.0 / (2.0 * delta)) / count_epsilon
    return int(min(max_steps, math.floor(noisy_count - margin)))


def select_rows(n_rows: int, n_steps: int, noise: NoiseSource, message: str) -> np.ndarray:
    """Indices of a uniformly random T-subset in uniformly random order, from the noise source.

    The first T entries of a uniform random permutation (`noise.permutation`, OS entropy), so
    `--seed` cannot reproduce the selection. Refuses with `message` (which must carry no
    count) when the table has fewer than T rows.
    """
    if n_steps > n_rows:
        raise InputError(message)
    return noise.permutation(n_rows)[:n_steps]


def resolve_steps(
    plan: TruncationPlan, n_rows: int, noise: NoiseSource
) -> tuple[int, float | None]:
    """T for this run (and the DP count, a DP output, for "dp_count"); sees the real N_D.

    Must run only after the plan's spends are reserved. Errors carry no count.
    """
    if plan.variant == "min_rows":
        assert plan.n_steps is not None
        if n_rows < plan.n_steps:
            raise InputError(BELOW_MIN_ROWS)
        return plan.n_steps, None
    noisy = dp_row_count(n_rows, plan.count_epsilon, noise)
    n_steps = steps_from_count(noisy, plan.count_epsilon, plan.delta, plan.max_steps)
    if n_steps < plan.min_steps:
        raise InputError(
            f"the DP row count allows fewer than --min-steps {plan.min_steps} rows; the count's "
            "spend stays recorded"
        )
    if n_steps > n_rows:
        raise InputError(TOO_FEW_ROWS)
    return n_steps, noisy


def guarantee_conditions(plan: TruncationPlan) -> tuple[str, ...]:
    """What the guarantee is conditional on: with a public T (`min_rows`), a table with fewer
    than T rows is refused before anything is spent, so the guarantee holds for tables of at
    least T rows (T is at most the schema's public min_rows)."""
    if plan.variant != "min_rows":
        return ()
    return (
        f"for input tables of at least T = {plan.n_steps} rows (at most the schema's public "
        "min_rows; a smaller table is refused before anything is spent)",
    )


def privacy_statement(plan: TruncationPlan, n_steps: int) -> str:
    """Public privacy statement of the release (T is public)."""
    if plan.variant == "min_rows":
        guarantee = f"{plan.epsilon:g}-DP"
    else:
        guarantee = f"({plan.epsilon + plan.count_epsilon:g}, {plan.delta:g})-DP"
    conditions = "".join(f" {condition}" for condition in guarantee_conditions(plan))
    statement = (
        f"{guarantee} for add/remove of one row{conditions}; each processed row entered one "
        f"Laplace release of its value clamped to an adaptively chosen interval (scale "
        f"(r_t - l_t)/{plan.epsilon:g}); T = {n_steps} rows processed, chosen as a uniformly "
        "random subset in random order"
    )
    if plan.nullable:
        statement += (
            f" of the rows with a value in {plan.column}, T from a DP count of those rows; rows "
            "with a missing value were not processed: the posterior is of the column's "
            "non-missing values"
        )
    return statement
