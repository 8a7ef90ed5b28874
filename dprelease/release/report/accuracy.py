"""The "Is this release usable?" section of a synthetic release's report: the verdict, the
accuracy the DP noise allows and the collapse check (`dprelease.diagnostics.accuracy`), from
the manifest only (DP outputs and public quantities)."""

from __future__ import annotations

from decimal import Decimal
from itertools import combinations

from dprelease.diagnostics.accuracy import FAIR_TVD, GOOD_TVD, USABLE
from dprelease.diagnostics.column_cells import (
    APART,
    WEAK_SDS,
    crowded,
    moved_means,
    noisy_tails,
)
from dprelease.release.report.common import human

SHOWN_MARGINALS = 12
GRADE_TEXT = {
    "good": "good: the DP noise moves each measured marginal little",
    "fair": "fair: the DP noise is noticeable; check the columns you rely on",
    "poor": "poor: the DP noise dominates",
    "not stated": "not stated: the generator measures no marginals",
}


def usable_section(manifest: dict) -> list[str]:
    """The verdict with its reasons, the accuracy grade and table, the collapse check."""
    judged, accuracy = manifest["verdict"], manifest["accuracy"]
    lines = ["## Is this release usable?", "", f"**Verdict: {judged['verdict']}.**", ""]
    if judged["verdict"] != USABLE:
        lines += [f"- {reason}." for reason in judged["reasons"]] + [""]
    lines += [
        f"Accuracy allowed by the DP noise: {GRADE_TEXT[accuracy['grade']]}. For each marginal "
        "the generator measured, the expected total variation distance of its noisy counts "
        "from the real ones, k E|noise| / (2 T) for k cells and the noisy total T (an order "
        "of magnitude: the generator's fit usually lowers it, the real rows' own sampling "
        f"variation comes on top). Good: one-way median at most {GOOD_TVD:g}; the noise "
        f"dominates above {FAIR_TVD:g}.",
        "",
        *_marginals_table(accuracy),
        *_pairs_lines(accuracy["marginals"], manifest["schema"]),
        *_relations_lines(accuracy["relations"]),
        *_inside_cells_lines(accuracy["relations"], manifest["schema"]),
        *_precision_lines(accuracy.get("measured_precision"), manifest),
        *_rows_lines(accuracy["synthetic_rows"], manifest["schema"]["columns"]),
    ]
    return lines


def _marginals_table(accuracy: dict) -> list[str]:
    marginals = accuracy["marginals"]
    if not marginals:
        return []
    worst = sorted(marginals, key=lambda m: -m["expected_tvd"])[:SHOWN_MARGINALS]
    lines = [
        "Median expected TVD: "
        f"{_value(accuracy['one_way_median_expected_tvd'])} over the one-way marginals, "
        f"{_value(accuracy['multi_way_median_expected_tvd'])} over the multi-way ones. The "
        f"{len(worst)} least accurate of {len(marginals)} measured marginals (all are in "
        "`manifest.json`, `accuracy`):",
        "",
        "| measured marginal | cells | expected TVD |",
        "| --- | --- | --- |",
    ]
    lines += [
        f"| {' × '.join(m['columns'])} | {m['cells']:,} | {_value(m['expected_tvd'])} |"
        for m in worst
    ]
    return [*lines, ""]


def _pairs_lines(marginals: list[dict], schema: dict) -> list[str]:
    """Which pairs of columns some measured marginal holds together (the relations the
    generator fitted); every other pair keeps only what passes through those."""
    names = list(schema["columns"])
    total = len(names) * (len(names) - 1) // 2
    if not total or not marginals:
        return []
    pairs = {
        tuple(sorted(pair, key=names.index))
        for m in marginals
        if len(m["columns"]) > 1
        for pair in combinations(m["columns"], 2)
    }
    if not pairs:
        return [
            "Relations between columns: none was measured, so the synthetic columns are "
            "independent of one another.",
            "",
        ]

    def listed(chosen: set[tuple[str, str]]) -> str:
        ordered = sorted(chosen, key=lambda pair: (names.index(pair[0]), names.index(pair[1])))
        return ", ".join(f"`{a}` × `{b}`" for a, b in ordered)

    target = schema.get("target")
    others = {pair for pair in pairs if target not in pair}
    if target and len(pairs) - len(others) == len(names) - 1:
        which = f"every column with the target `{target}`"
        which += f"; and {listed(others)}" if others else ""
    else:
        which = listed(pairs)
    return [
        f"Relations between columns: {len(pairs)} of the {total} pairs of columns were measured "
        f"together: {which}. Every other pair keeps only the part of its relation that passes "
        "through these pairs, so it is weaker than the real one or lost: check the pairs you "
        "rely on against this list.",
        "",
    ]


def _relations_lines(relations: dict) -> list[str]:
    """Which columns entered the measured relations in two cells only (`coarse_relations`)."""
    if not relations["columns_in_two_cells"]:
        return []
    shown = ", ".join(f"`{c}`" for c in relations["columns_in_two_cells"])
    return [
        f"Relations between columns: {len(relations['columns_in_two_cells'])} of the "
        f"{relations['related_columns']} columns with more than two cells entered every "
        f"measured multi-way marginal in two cells (above or below a DP split): {shown}. "
        "Their relations in the synthetic rows are weaker than the real ones, or lost to the "
        "noise.",
        "",
    ]


def _inside_cells_lines(relations: dict, schema: dict) -> list[str]:
    """With a categorical target: the cells in which each numeric column was measured with
    it, inside which its values are drawn apart from the target (`diagnostics.accuracy`,
    "Inside a cell")."""
    columns, target = schema["columns"], schema.get("target")
    if target is None or columns.get(target, {}).get("type") != "categorical":
        return []
    numeric = [
        record
        for record in relations["cells_with_target"]
        if columns.get(record["column"], {}).get("type") != "categorical"
    ]
    if not numeric:
        return []
    shown = ", ".join(f"`{r['column']}` in {r['cells']}" for r in numeric)
    return [
        f"Relations with the target: `{target}` is categorical, and inside each cell in which "
        "a numeric column was measured with it, the column's synthetic values are drawn apart "
        "from it, so a relation that changes inside a cell comes out flatter than the real one "
        f"(a logistic regression's slope, for instance; more rows give finer cells): {shown} "
        "cells.",
        "",
    ]


def _precision_lines(precision: dict | None, manifest: dict) -> list[str]:
    """Each continuous column's measured recording steps (`generators.lattice`), and the
    continuous columns where none stood out from the noise."""
    if precision is None:
        return []
    share = manifest["configuration"]["generator"].get("budget_shares", {}).get("lattice", 0)
    continuous = [
        name
        for name, spec in manifest["schema"]["columns"].items()
        if spec.get("type") == "continuous" and not spec.get("values")
    ]
    if not continuous:
        return []
    found, rest = [], []
    for name in continuous:
        parts = _kept_parts(precision[name]) if name in precision else []
        if parts:
            found.append(f"`{name}` " + ", ".join(parts))
        else:
            rest.append(f"`{name}`")
    lines = [
        "Recorded precision: a DP count of how many of each continuous column's values are "
        f"zero or multiples of each power of ten ({share:.0%} of the generator's budget) "
        "found the zeros and steps its synthetic values are drawn on (a step's share is of "
        "the nonzero values): " + "; ".join(found) + "."
        if found
        else "Recorded precision: no continuous column's values showed zeros or a step (a "
        "power of ten they are multiples of) above the DP noise."
    ]
    if rest and found:
        lines.append(
            f"Neither stood out from the noise for {', '.join(rest)}: their synthetic values "
            "are drawn anywhere in their cells, with digits the real values may not have."
        )
    elif rest:
        lines.append("Their synthetic values are drawn anywhere in their cells.")
    return [*lines, ""]


def _kept_parts(record: dict) -> list[str]:
    """A column's kept zeros and steps (`Lattice.record`) in words: "93% exactly 0", "the
    rest on 0.01 (100%)"; none when nothing was kept."""
    pairs = zip(record["steps"], record["shares"][:-1], strict=True)  # "none" left out
    steps = ", ".join(f"{_decimal(step)} ({_share(share)})" for step, share in pairs if share > 0)
    zero = record.get("zero_share", 0.0)
    parts = [f"{_share(zero)} exactly 0"] if zero else []
    if steps:
        parts.append(("the rest on " if zero else "on ") + steps)
    return parts


def _decimal(step: float) -> str:
    """A power of ten as people write it: 100, 1, 0.00001 (not 1e+02 or 1e-05)."""
    return format(Decimal(repr(step)).normalize(), "f")


def _share(share: float) -> str:
    """A kept share (of a column's values for zeros, of its nonzero values for a step), to
    the percent; a kept share is never shown as 0 %."""
    return "< 1%" if share < 0.005 else f"{share:.0%}"


def _value(value: float | None) -> str:
    """A TVD in [0, 1] to three decimals."""
    if value is None:
        return "none measured"
    return "< 0.001" if value < 0.0005 else f"{value:.3f}"


def _rows_lines(rows: dict, schema_columns: dict) -> list[str]:
    lines = [f"Synthetic rows: {rows['n_synthetic']:,}, of which {rows['distinct']:,} distinct."]
    if rows["collapsed"]:
        lines.append(
            "**Warning:** the generator collapsed onto few distinct rows. Weights cannot "
            "restore rows the generator never produces, however good their diagnostics; use "
            "another generator or more ε for it."
        )
    for column, categories in rows["missing_categories"].items():
        shown = ", ".join(f"`{c}`" for c in categories)
        lines.append(f"No synthetic row has `{column}` = {shown}.")
    for column in crowded(rows):
        record, spec = rows["cell_crowding"][column], schema_columns.get(column, {})
        count = (
            spec.get("type") == "integer"
            and spec.get("spacing") != "log"
            and record["lowest_cell_among_them"]
        )
        lines.append(
            f"`{column}`: 90 % of its synthetic rows lie in {record['cells_holding_90_percent']}"
            f" of its {record['cells']} cells (up to {human(record['widest_of_them'])} wide). "
            "Inside a cell synthetic values are spread evenly (on the column's measured "
            "precision, where it has one): relations with other columns finer than a cell are "
            "lost, and so is the column's own shape there. Bounds in the "
            "schema closer to where the rows are (values beyond them are clipped) give finer "
            "cells there"
            + (
                " (or, as its rows sit near `min`, `spacing: log`, which gives its low values "
                "cells of their own)."
                if count
                else "."
            )
        )
    for column in moved_means(rows):
        record = rows["weak_cells"][column]
        kept = record["mean_without_weak_cells"]
        lines.append(
            f"`{column}`: {record['rows_in_weak_cells']:.1%} of its synthetic rows lie in "
            f"{record['weak_cells']} cell{'s' if record['weak_cells'] != 1 else ''} whose DP "
            f"counts are within {WEAK_SDS:g} noise standard deviations of zero{APART} (cells "
            "the noise alone can fill, whether or not real rows are there); its synthetic mean "
            f"is {human(record['mean'], 4)}, "
            + (
                f"and {human(kept, 4)} without them"
                if kept is not None
                else "and every cell of it is weak, so there is no mean without them"
            )
            + f". Means, sums and far values of `{column}` rest on those rows. "
            + _fewer_weak_cells(record)
        )
    lines += [_tail_line(column, rows["weak_cells"][column]) for column in noisy_tails(rows)]
    return [*lines, ""]


def _tail_line(column: str, record: dict) -> str:
    """A column whose far tail rests on weak cells (`column_cells.noisy_tails`): the rows
    beyond its strong cells on each such side, and what rests on them."""
    beyond = []  # (share of rows, where, the strong cells' edge, the percentile there)
    if record["lower_tail_on_noise"]:
        beyond.append(
            (record["rows_below_strong_cells"], "below", record["strong_cells_low"], "1st")
        )
    if record["upper_tail_on_noise"]:
        beyond.append(
            (record["rows_above_strong_cells"], "above", record["strong_cells_high"], "99th")
        )
    share, direction, edge, _ = beyond[0]
    percentiles = " and ".join(side[3] for side in beyond)
    return (
        f"`{column}`: {share:.1%} of its synthetic rows lie {direction} {human(edge, 4)}"
        + "".join(f" and {rows:.1%} {where} {human(at, 4)}" for rows, where, at, _ in beyond[1:])
        + f", beyond its cells whose DP counts are {WEAK_SDS:g} noise standard deviations "
        "above zero and, apart from its body, above what the noise alone reaches in any of its "
        "cells, in cells the noise alone can fill (whether or not real rows are there): "
        f"its {percentiles} percentile{'s' if len(beyond) > 1 else ''} and the values beyond "
        "rest on noise, not on real rows. " + _fewer_weak_cells(record)
    )


def _fewer_weak_cells(record: dict) -> str:
    """What leaves a column fewer weak cells (`column_cells.weak_cells`): more rows or a
    larger epsilon always; fewer columns too where no cell is strong (each column's noise
    grows with the number of tables measured); bounds nearer its rows where cells of several
    values lie beyond its strong ones. Where each cell is one value (a month, a 0/1
    indicator), a value beyond the strong cells may be a rare real one, so narrower bounds
    only if no real row can take it; where no cell lies beyond them, the bounds are not the
    cause."""
    low, high = record["strong_cells_low"], record["strong_cells_high"]
    if low is None or high is None:
        return (
            "No cell of it stands above the noise: more rows, fewer columns or a larger "
            "ε leave fewer such cells."
        )
    if not record["cells_beyond_strong_cells"]:
        return "More rows or a larger ε leave fewer such cells; its bounds are not the cause."
    if record["one_value_per_cell"]:
        kept = (
            f"other than {human(low, 4)}"
            if low == high
            else f"outside {human(low, 4)}-{human(high, 4)}"
        )
        return (
            "More rows or a larger ε leave fewer such cells; narrower bounds too, but only "
            f"if no real row can take a value {kept}."
        )
    return (
        "Bounds in the schema closer to where its rows are, more rows or a larger ε leave "
        "fewer such cells."
    )
