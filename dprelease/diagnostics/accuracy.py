"""What a synthetic release can be trusted for: the accuracy its DP noise allows, whether the
generator collapsed, and one verdict. Computed only from public quantities and DP outputs
(the generator's noisy measurements, the synthetic rows, the weights' diagnostics): nothing
here reads the real table (docs/privacy-model.md section 8).

Expected error of a measured marginal. A generator measures a marginal as noisy counts over
its k public cells (`generators.base.Measurement`: noise of standard deviation s on every
cell, Laplace or Gaussian, and the noisy total N~, a DP estimate of the row count; the real
count is never used). Its shares are the noisy counts over N~, so the total variation
distance of the measured marginal from the real one is about

    E[TVD] ~ (1/2) sum_cells E|Z| / N~ = k E|Z| / (2 N~),
    E|Z| = s / sqrt(2) (Laplace of scale b = s / sqrt 2),  s sqrt(2 / pi) (Gaussian),

capped at 1, the largest TVD. This ignores the clipping of negative counts and the error of
N~ itself; the released marginals are post-processing of the measurements (clipped,
normalised, or fitted by a graphical model), which usually lowers the error, and the real
rows' own sampling variation comes on top. It is an order of magnitude, not a bound: enough
to say when the noise dominates.

Grade (`grade`): "good" when the median expected TVD of the one-way marginals is at most
`GOOD_TVD` (0.05: a twentieth of a column's mass misplaced) and that of the multi-way ones at
most 2 `GOOD_TVD`; "poor" (the noise dominates) when the one-way median exceeds `FAIR_TVD`
(0.15) or the multi-way median 2 `FAIR_TVD`; "fair" in between; "not stated" when the
generator measured no marginals (the DP-GANs).

Coarse relations (`coarse_relations`). The expected TVD grades the noise per measured cell,
not how coarse the cells are: on a few hundred rows a graphical model measures the
relations between columns with every column in two cells (above or below a DP split), and
the synthetic rows' relations come out weaker or are lost to the noise (a correlation of
-0.28 on 601 rows comes out near -0.09 at epsilon 1). A column is "in two cells"
when it has more than two cells of its own (its one-way measurement) but at most two on its
axis of every multi-way marginal that holds it (the generator's `Measurement.shape`); when
at least half of the columns with more than two cells that enter a multi-way marginal are,
the relations are coarse.

Inside a cell. The marginal-based generators draw a numeric column's value inside its
measured cell apart from the other columns (`pgm` couples an ordered target and each numeric
feature by a Gaussian copula near each cell, `generators.pgm.latent`), so with a
categorical target a relation that changes inside a cell comes out flatter (a logistic
slope about half the real one where a feature enters the tables with the target in 11
cells; the real rows with each value drawn uniformly inside the same cells give the same
flattening). The report names each numeric column's cells with a categorical target
(`cells_with_target`).

Collapse (`collapse`). A generator can produce few distinct rows whatever its weights' PSIS
diagnostics say (PSIS judges the weights, not the rows): with a continuous column every
synthetic row should be distinct, so fewer than `DISTINCT_CONTINUOUS` (50 %) distinct rows is
a collapse (a collapsed DP-GAN gives a few per cent); without one, fewer
distinct rows than `COLLAPSE_FRACTION` (1 %) of what the release could hold (its row count,
or the size of the schema's public domain when smaller). Categories of the schema that no
synthetic row has are listed (the generator may have lost them).

Crowded cells, weak cells and far tails: `diagnostics.column_cells`.

Verdict (`verdict`): "usable" only when the grade is good, the relations are not coarse, no
column is crowded, no column's mean or far tail rests on weak cells, the generator did not
collapse and the weights are reliable and reached what they were fitted to; "not usable"
when the noise dominates or the generator collapsed; "usable with caution" otherwise, with
the reasons (measurements of every check:
docs/decisions/0025-report-relations-and-collapse.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median
from typing import Any

import pandas as pd

from dprelease.diagnostics.column_cells import (
    APART,
    TAIL_SHARE,
    WEAK_SDS,
    crowded,
    moved_means,
    noisy_tails,
)
from dprelease.generators.base import Measurement

GOOD_TVD = 0.05
FAIR_TVD = 0.15
DISTINCT_CONTINUOUS = 0.5
COLLAPSE_FRACTION = 0.01
WEIGHTS_CHI2_LIMIT = 4.0  # weighted chi-square per df above this: the weights missed their target
USABLE, CAUTION, NOT_USABLE = "usable", "usable with caution", "not usable"


def expected_tvd(measurement: Measurement) -> float:
    """The expected TVD of a measured marginal from its noise (module docstring)."""
    if measurement.noise == "laplace":
        mean_abs = measurement.noise_std / math.sqrt(2.0)
    else:
        mean_abs = measurement.noise_std * math.sqrt(2.0 / math.pi)
    if measurement.noisy_total <= 0:
        return 1.0
    return min(1.0, measurement.cells * mean_abs / (2.0 * measurement.noisy_total))


def grade(measurements: Sequence[Measurement], target: str | None = None) -> dict:
    """Each measured marginal's expected TVD, their medians (one-way, multi-way), the grade
    and the relations' resolution, with the `target` where the schema names one (module
    docstring)."""
    rows: list[dict[str, Any]] = [
        {"columns": list(m.columns), "cells": m.cells, "expected_tvd": expected_tvd(m)}
        for m in measurements
    ]
    one = [r["expected_tvd"] for r in rows if len(r["columns"]) == 1]
    multi = [r["expected_tvd"] for r in rows if len(r["columns"]) > 1]
    one_median = median(one) if one else None
    multi_median = median(multi) if multi else None
    if not rows:
        label = "not stated"
    elif _within(one_median, FAIR_TVD) and _within(multi_median, 2 * FAIR_TVD):
        good = _within(one_median, GOOD_TVD) and _within(multi_median, 2 * GOOD_TVD)
        label = "good" if good else "fair"
    else:
        label = "poor"
    return {
        "grade": label,
        "one_way_median_expected_tvd": one_median,
        "multi_way_median_expected_tvd": multi_median,
        "relations": coarse_relations(measurements, target),
        "marginals": rows,
    }


def coarse_relations(measurements: Sequence[Measurement], target: str | None = None) -> dict:
    """The columns with more than two cells that every multi-way marginal holding them
    measured in two cells, out of those that some multi-way marginal holds, and whether
    they are at least half (module docstring); and the most cells each other column had in
    a multi-way marginal with the `target` (`cells_with_target`, a list of records so that
    the manifest's structure does not depend on which tables the DP outputs chose)."""
    own = {m.columns[0]: m.cells for m in measurements if len(m.columns) == 1}
    finest: dict[str, int] = {}
    with_target: dict[str, int] = {}
    for m in measurements:
        if len(m.columns) > 1 and m.shape is not None:
            for column, size in zip(m.columns, m.shape, strict=True):
                finest[column] = max(finest.get(column, 0), size)
                if target in m.columns and column != target:
                    with_target[column] = max(with_target.get(column, 0), size)
    related = [c for c in finest if own.get(c, 0) > 2]
    two = [c for c in related if finest[c] <= 2]
    return {
        "columns_in_two_cells": two,
        "related_columns": len(related),
        "coarse": bool(related) and 2 * len(two) >= len(related),
        "cells_with_target": [{"column": c, "cells": n} for c, n in with_target.items()],
    }


def _within(value: float | None, limit: float) -> bool:
    return value is None or value <= limit


def collapse(synthetic: pd.DataFrame, columns: dict) -> dict:
    """Distinct synthetic rows, whether the generator collapsed, and the schema categories no
    synthetic row has (module docstring). `columns` is the public schema's columns."""
    n_rows = len(synthetic)
    distinct = len(synthetic[list(columns)].drop_duplicates())
    if any(spec["type"] == "continuous" for spec in columns.values()):
        collapsed = distinct < DISTINCT_CONTINUOUS * n_rows
    else:
        collapsed = distinct < COLLAPSE_FRACTION * min(float(n_rows), public_domain_size(columns))
    missing = {
        name: _absent(synthetic[name], spec["categories"])
        for name, spec in columns.items()
        if spec["type"] == "categorical"
    }
    return {
        "n_synthetic": n_rows,
        "distinct": distinct,
        "collapsed": collapsed,
        "missing_categories": {name: cats for name, cats in missing.items() if cats},
    }


def _absent(column: pd.Series, categories: list) -> list:
    """The categories no value of `column` equals (as text). The column is converted once:
    converting it per category took 5 of the 6.6 s of a release's bundle step on a 105-level
    column of 400,000 synthetic rows (NYC flights)."""
    present = set(column.astype(str).unique())
    return [category for category in categories if category not in present]


def public_domain_size(columns: dict) -> float:
    """Number of possible rows of the schema's columns (public): categories or integer values
    per column (plus one when nullable); a continuous column has infinitely many."""
    size = 1.0
    for spec in columns.values():
        if spec["type"] == "categorical":
            values = float(len(spec["categories"]))
        elif spec["type"] == "integer":
            values = float(spec["max"] - spec["min"] + 1)
        else:
            return math.inf
        size *= values + bool(spec.get("nullable"))
    return size


def verdict(accuracy: dict, rows: dict, weights_verdict: str, weights_chi2: float | None) -> dict:
    """The release's verdict and its reasons, from the accuracy grade, the collapse check,
    the weights' PSIS verdict and how far the weights stayed from their DP target."""
    not_usable, caution = [], []
    if accuracy["grade"] == "poor":
        not_usable.append(
            "the DP noise dominates: the expected error of the measured marginals is above "
            f"{FAIR_TVD:g} (total variation); there are too few real rows for this many "
            "columns and cells at this epsilon"
        )
    elif accuracy["grade"] == "fair":
        caution.append("the DP noise is noticeable in the measured marginals")
    elif accuracy["grade"] == "not stated":
        caution.append("the generator measures no marginals, so their accuracy is not stated")
    relations = accuracy["relations"]
    if relations["coarse"]:
        caution.append(
            f"the relations between columns are coarse: {len(relations['columns_in_two_cells'])} "
            f"of the {relations['related_columns']} columns with more than two cells were "
            "measured with each other in two cells only, so the synthetic rows' relations come "
            "out weaker than the real ones or are lost to the noise; more rows or a larger "
            "epsilon measure them finer"
        )
    if rows["collapsed"]:
        not_usable.append(
            f"the generator collapsed onto {rows['distinct']:,} distinct rows of "
            f"{rows['n_synthetic']:,}"
        )
    if rows["missing_categories"]:
        caution.append("some categories have no synthetic row")
    column_reasons = (
        (
            crowded(rows),
            "90 % of the synthetic rows lie in at most an eighth of the column's "
            "cells, inside which values are drawn apart from the other columns, so relations "
            "finer than a cell are lost; bounds closer to where the rows are give finer cells "
            "there",
        ),
        (
            moved_means(rows),
            f"synthetic rows in cells whose DP counts are within {WEAK_SDS:g} "
            f"noise standard deviations of zero{APART}, cells the noise alone can fill, move the "
            "column's mean by more than a quarter of a standard deviation of its other rows: its "
            "mean and its far values are not reliable",
        ),
        (
            noisy_tails(rows),
            f"{TAIL_SHARE:.0%} or more of the synthetic rows lie beyond the "
            f"cells whose DP counts are {WEAK_SDS:g} noise standard deviations above zero and, "
            "apart from the column's body, above what the noise alone reaches in any of its "
            "cells, in cells the noise alone can fill: the column's 1st or 99th percentile and "
            "its far values are not reliable",
        ),
    )
    for names, reason in column_reasons:
        if names:
            caution.append(", ".join(f"`{name}`" for name in names) + f": {reason}")
    if weights_verdict == "unreliable":
        caution.append("PSIS calls the importance weights unreliable")
    if weights_chi2 is not None and weights_chi2 > WEIGHTS_CHI2_LIMIT:
        caution.append(
            f"the weighted rows stay {weights_chi2:.3g} times the noise level (chi-square per "
            "degree of freedom) from the DP tables the weights were fitted to"
        )
    label = NOT_USABLE if not_usable else (CAUTION if caution else USABLE)
    return {"verdict": label, "reasons": not_usable + caution}
