"""`report.md` of a synthetic release: rounded numbers, the sections a recipient needs, the
weighted/unweighted warning, runnable snippets, and an artifact without relative images."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import tempfile
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from leak_checks import mentions_count
from release_fixtures import build_release

from dprelease.diagnostics.accuracy import collapse, public_domain_size
from dprelease.release.report.common import human, percent, privacy_section
from dprelease.release.report.synthetic import (
    MEAN_SHIFT_SD,
    SHARE_SHIFT,
    column_summary,
    columns_section,
    weights_figure,
)
from dprelease.release.writer import artifact_markdown

N_REAL = 1537  # the fixture's real row count: it must appear nowhere


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    build_release(out, seed=0, n_real=N_REAL)
    return build_release(out, seed=1, n_real=N_REAL)


@pytest.fixture(scope="module")
def report(release) -> str:
    return (release / "report.md").read_text()


@pytest.fixture(scope="module")
def manifest(release) -> dict:
    return json.loads((release / "manifest.json").read_text())


def prose(report: str) -> str:
    """The report without code blocks and the verbatim formal statement."""
    without_code = re.sub(r"```.*?```", "", report, flags=re.S)
    return "\n".join(line for line in without_code.splitlines() if not line.startswith("> "))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.9000000000000001, "0.9"),
        (1.0, "1"),
        (713.901, "714"),
        (12345.6, "12,346"),
        (0.123456, "0.123"),
        (1e-6, "1e-6"),
        (2.5e-7, "2.5e-7"),
        (9.000000000000001e-07, "9e-7"),
        (0.0, "0"),
        (float("inf"), "infinite"),
        (float("nan"), "n/a"),
    ],
)
def test_numbers_are_rounded_for_people(value, text):
    assert human(value) == text


def test_percent():
    assert percent(0.89237) == "89.2%" and percent(float("nan")) == "n/a"


def test_the_report_has_every_section(report):
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Privacy",
        "## Is this release usable?",
        "## How it was made",
        "## Importance weights",
        "## Columns: unweighted and weighted",
        "## Using the release",
        "## Great Expectations",
        "## Budget of the dataset",
        "## How to verify this release",
    ]


def test_no_unrounded_number_and_no_real_count(report):
    # Release ids and times aside (an id holds its creation time: 15:37:24 must not look
    # like 1,537 real rows), no number carries more than 3 significant decimals.
    stamps = r"\d{8}T\d{6}Z-[0-9a-f]{8}|\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2})?( UTC)?"
    unstamped = re.sub(stamps, "", report)
    text = prose(unstamped)
    assert not re.findall(r"\d\.\d{4,}", text)
    assert not re.findall(r"\d{4,}\.\d", text)
    assert not mentions_count(report, N_REAL)


def test_privacy_section_states_the_delta_used_the_accountant_and_the_policy(report, manifest):
    spent = manifest["release_spend"]
    assert f"ε = {human(spent['epsilon'])}, δ = {human(spent['delta'])}" in report
    assert "basic composition (epsilons add up, deltas add up)" in report
    assert "Invalid input rows: **refuse**" in report
    assert f"> {manifest['privacy_statement']}" in report
    tight = {**manifest, "accountant": "pld", "on_invalid_rows": "drop"}
    text = "\n".join(privacy_section(tight))
    assert "the `pld` accountant" in text and "Invalid input rows: **drop**" in text
    assert "does not depend on any one row" in text


def test_budget_shows_remaining_and_past_releases(report, manifest, release):
    cap, total = manifest["cap"], manifest["dataset_total"]
    remaining = f"| remaining (basic composition) | {human(cap['epsilon'] - total['epsilon'])} |"
    assert remaining in report
    assert "The dataset has 2 releases in its ledger, this one included" in report
    ledger = pd.read_parquet(release / "ledger.parquet")
    for release_id in ledger["release_id"].unique():
        assert f"`{release_id}`" in report
    assert f"`{manifest['release_id']}` (this release)" in report


def test_first_release_says_so(tmp_path):
    directory = build_release(tmp_path, n_synthetic=300, on_invalid_rows="drop", temper=0.5)
    text = (directory / "report.md").read_text()
    assert "This is the first release of this dataset in its ledger." in text
    assert "Invalid input rows: **drop**" in text
    assert "tempered before smoothing (w^α with α = 0.5)" in text


def test_uniform_weights_report_bounded_weights(tmp_path):
    directory = build_release(tmp_path, n_synthetic=300, weights="none")
    text = (directory / "report.md").read_text()
    assert "| k-hat | none (the largest weights are all equal" in text
    assert "Warning" not in text  # uniform weights change no summary
    # flat weights are said to be flat, never "good" (a "not usable" release read "good")
    assert "**Weights' verdict:** flat: every row has weight 1, so the weights correct" in text
    assert "good:" not in text
    diagnostics = json.loads((directory / "diagnostics.json").read_text())
    assert diagnostics["flat"] is True  # a reader of the JSON sees it too


def test_flat_calibration_weights_say_why_in_plain_words(manifest):
    from dprelease.release.report.synthetic import _verdict_text

    flat = {"flat_reason": "noisy count within the noise"}
    weights = {"method": "calibration", "calibration": flat}
    text = _verdict_text(weights, "good")
    assert text.startswith("flat: every row has weight 1") and "good" not in text
    assert "the DP row count is within a few noise standard deviations of zero" in text
    fitted = {"method": "calibration", "calibration": {"flat_reason": None}}
    assert _verdict_text(fitted, "good").startswith("good: the weights' tail is light")
    # the other methods that can make their weights flat (a DP outcome) say so too
    untempered = {
        "method": "discriminator",
        "temper": 0.0,
        "flat_reason": "no tempering gave weights PSIS calls reliable",
    }
    assert "tail PSIS calls reliable" in _verdict_text(untempered, "good")
    tempered = {"method": "discriminator", "temper": 0.4, "flat_reason": None}
    assert _verdict_text(tempered, "good").startswith("good: the weights' tail is light")
    gated = {"method": "beta_debiased", "noise_gate": {"flat": True, "statistic": 3.1}}
    assert "no signal detectable above their own noise" in _verdict_text(gated, "good")


def test_calibration_weights_say_what_they_were_calibrated_to(tmp_path):
    directory = build_release(
        tmp_path, n_synthetic=3000, weights="calibration", generator="marginals", epsilon=3.0
    )
    text = (directory / "report.md").read_text()
    manifest = json.loads((directory / "manifest.json").read_text())
    fit = manifest["configuration"]["weights"]["calibration"]
    assert manifest["diagnostics"]["flat"] is (fit["flat_reason"] is not None)
    assert "### What the weights were calibrated to" in text
    assert "high_earner × age" in text  # the census schema's target paired with a column
    assert f"| unweighted synthetic rows | {human(fit['chi2_unweighted_per_df'])} |" in text
    # the marginals generator misses every dependence on the target: far outside the noise
    assert fit["chi2_unweighted_per_df"] > 5
    assert fit["chi2_weighted_per_df"] < fit["chi2_unweighted_per_df"]


def test_k_hat_ess_and_standard_errors_are_explained(report, manifest):
    assert "**k-hat** (Pareto k) measures how heavy the tail" in report
    assert "**ESS** (effective sample size) is the number of equally weighted rows" in report
    assert f"threshold {human(manifest['diagnostics']['threshold'], 2)}" in report
    assert "they ignore the DP noise in the weights" in report


def test_snippets_run_on_the_release(report, release, manifest):
    placeholder = f"path/to/{manifest['dataset']}/{manifest['release_id']}"
    blocks = re.findall(r"```python\n(.*?)```", report, flags=re.S)
    assert len(blocks) == 2 and all(placeholder in block for block in blocks)
    outputs = []
    for block in blocks:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(block.replace(placeholder, str(release)), {})  # noqa: S102
        outputs.append(printed.getvalue())
    # Both snippets compute the same weighted mean of the first numeric column.
    frame = pd.read_parquet(release / "synthetic.parquet")
    expected = np.average(frame["age"], weights=frame["weight"])
    (shown,) = re.findall(r"WeightedMean\(mean=(?:np\.float64\()?([-0-9.e+]+)", outputs[0])[:1]
    assert float(shown) == pytest.approx(expected, rel=1e-12)
    assert float(outputs[1].strip()) == pytest.approx(expected, rel=1e-12)


def summary_text(values: dict, weights: np.ndarray) -> tuple[pd.DataFrame, str]:
    summary = column_summary(pd.DataFrame(values), weights)
    return summary, "\n".join(columns_section(summary))


def test_warning_only_where_weighted_and_unweighted_differ_a_lot():
    # x in {0, 1} (sd 0.5); weights 1 + a on the ones, 1 - a on the zeros move the mean by a/2.
    x = np.repeat([0.0, 1.0], 50)
    group = pd.Categorical(np.repeat(["a", "b"], 50), categories=["a", "b"])
    below, above = 2 * 0.9 * MEAN_SHIFT_SD * 0.5, 2 * 1.1 * MEAN_SHIFT_SD * 0.5
    uniform = np.ones(100)
    summary, text = summary_text({"x": x}, uniform)
    assert not summary["differs"].any() and "Warning" not in text
    summary, text = summary_text({"x": x}, np.where(x == 1, 1 + below, 1 - below))
    assert not summary["differs"].any() and "Warning" not in text
    summary, text = summary_text({"x": x}, np.where(x == 1, 1 + above, 1 - above))
    assert summary["differs"].tolist() == [True]
    assert "**Warning: the weighted and unweighted summaries differ a lot for x mean" in text
    assert "(differs a lot)" in text
    # Category shares: flagged above SHARE_SHIFT (5 points), not below.
    small = 2 * 0.8 * SHARE_SHIFT
    summary, text = summary_text({"g": group}, np.where(x == 1, 1 + small, 1 - small))
    assert not summary["differs"].any() and "Warning" not in text
    large = 2 * 1.2 * SHARE_SHIFT
    summary, text = summary_text({"g": group}, np.where(x == 1, 1 + large, 1 - large))
    assert summary["differs"].tolist() == [True, True]
    assert "g = a (50.0% unweighted, 44.0% weighted)" in text


def test_nullable_columns_use_the_rows_with_a_value():
    values = np.array([1.0, np.nan, 3.0, np.nan])
    summary, text = summary_text({"v": values}, np.array([1.0, 5.0, 3.0, 5.0]))
    row = summary.iloc[0]
    assert row["rows"] == 2 and row["unweighted"] == 2.0
    assert row["weighted"] == pytest.approx((1 * 1 + 3 * 3) / 4)
    assert "| v | mean | 2 | 2.5 ± " in text


def test_weights_figure_shows_weight_values_and_the_threshold(release, manifest):
    frame = pd.read_parquet(release / "synthetic.parquet")
    weights, raw = frame["weight"].to_numpy(), frame["log_weight"].to_numpy()
    diagnostics = manifest["diagnostics"]
    smoothed = np.log(weights)  # weights are exp(smoothed) up to a constant
    figure = weights_figure(weights, raw, smoothed, diagnostics)
    histogram, tail, k_hat = figure.axes
    assert histogram.get_xlabel() == "weight"
    edges = [patch.get_x() for patch in histogram.patches]
    assert min(edges) == pytest.approx(weights.min())
    assert max(p.get_x() + p.get_width() for p in histogram.patches) == pytest.approx(weights.max())
    largest = tail.lines[1].get_ydata()
    assert largest[0] == pytest.approx(weights.max())
    threshold = diagnostics["threshold"]
    assert any(list(line.get_xdata()) == [threshold, threshold] for line in k_hat.lines)
    assert any("k-hat" in text.get_text() for text in k_hat.texts)
    import matplotlib.pyplot as plt

    plt.close(figure)


def test_the_report_references_its_figure_and_the_artifact_embeds_it(report, release):
    assert "](weights.png)" in report
    markdown = artifact_markdown(release)
    assert not re.search(r"!\[[^\]]*\]\((?!data:)", markdown)
    (encoded,) = re.findall(r"\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", markdown)
    assert base64.b64decode(encoded) == (release / "weights.png").read_bytes()


def test_no_two_tildes_of_a_paragraph_render_as_strikethrough(report, release):
    """GitHub-flavoured markdown (the Prefect UI's) strikes through the text between two
    tildes of a paragraph: outside code, no paragraph of the report or of its artifact has
    two tildes that are not escaped."""
    for text in (report, artifact_markdown(release)):
        outside_code = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))
        for paragraph in outside_code.split("\n\n"):
            assert len(re.findall(r"(?<!\\)~", paragraph)) < 2, paragraph


# The Prefect UI shows a markdown artifact's table in cells that do not wrap, in a view about
# 1,000 px wide in a 1,600-px window, at about 7 px a character: a wider table is cut.
UI_TABLE_CHARACTERS = 140


def table_widths(markdown: str) -> list[int]:
    """Per table of `markdown`: the sum over its columns of the longest cell, in characters."""
    widths, rows = [], []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= set("-: ") for cell in cells):
                rows.append(cells)
        elif rows:
            widths.append(sum(max(len(c) for c in column) for column in zip(*rows, strict=True)))
            rows = []
    return widths


def test_every_table_of_the_report_fits_the_prefect_ui(report, tmp_path):
    flat = build_release(tmp_path, n_synthetic=300, weights="none")  # the longest verdict
    for text in (report, (flat / "report.md").read_text()):
        widths = table_widths(text)
        assert widths and max(widths) <= UI_TABLE_CHARACTERS, widths


def test_a_long_history_shows_the_most_recent_releases():
    from datetime import date

    from dprelease.release.report.common import MAX_PAST_RELEASES, budget_section

    entries = [
        {
            "release_id": f"r{i:03d}",
            "reserved_at": f"2026-01-{1 + i % 28:02d}T00:00:{i % 60:02d}+00:00",
            "epsilon": 0.1,
            "delta": 0.0,
            "mechanism": mechanism,
        }
        for i in range(MAX_PAST_RELEASES + 5)
        for mechanism in ("laplace-histograms", "laplace-histograms")
    ]
    manifest = {
        "release_id": "r024",
        "cap": {"epsilon": 10.0, "delta": 1e-5},
        "dataset_total": {"epsilon": 5.0, "delta": 0.0},
    }
    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as directory:
        pq.write_table(pa.Table.from_pylist(entries), Path(directory) / "ledger.parquet")
        text = "\n".join(budget_section(Path(directory), manifest))
    assert f"has {MAX_PAST_RELEASES + 5} releases in its ledger, this one included; the 20" in text
    rows = [line for line in text.splitlines() if line.startswith("| `r")]
    assert len(rows) == MAX_PAST_RELEASES
    day = date(2026, 1, 25).isoformat()  # r024's reserved_at
    assert f"| `r024` (this release) | {day} | 0.2 | 0 | laplace-histograms |" in text
    assert "| remaining (basic composition) | 5 | 1e-5 |" in text
    assert "accountant" not in text
    manifest.update(accountant="pld", accountant_total={"epsilon": 3.25, "delta": 1e-5})
    with tempfile.TemporaryDirectory() as directory:
        pq.write_table(pa.Table.from_pylist(entries), Path(directory) / "ledger.parquet")
        text = "\n".join(budget_section(Path(directory), manifest))
    assert "| spent under the `pld` accountant | 3.25 | 1e-5 |" in text
    assert "may exceed the cap (and show nothing remaining) without any overspend" in text
    assert "| remaining under the `pld` accountant | 6.75 | at δ = 1e-5 |" in text


def test_distinct_rows_are_counted_and_a_collapse_is_flagged(report, release, manifest):
    synthetic = pd.read_parquet(release / "synthetic.parquet")
    columns = manifest["schema"]["columns"]  # census: continuous wage, so unbounded
    distinct = len(synthetic[list(columns)].drop_duplicates())
    assert f"Synthetic rows: {len(synthetic):,}, of which {distinct:,} distinct." in report
    assert "collapsed" not in report
    assert public_domain_size(columns) == np.inf

    def repeated(distinct_rows: int) -> pd.DataFrame:  # 20,000 rows, `distinct_rows` distinct
        rows = synthetic.iloc[np.zeros(20_000, dtype=int)].reset_index(drop=True)
        return rows.assign(wage=(np.arange(20_000) % distinct_rows).astype(float))

    # a collapsed DP-GAN: 849 distinct rows of 20,000 (4 %, above a threshold of 1 %)
    assert collapse(repeated(849), columns)["collapsed"]
    assert not collapse(repeated(15_000), columns)["collapsed"]
    # an all-categorical schema: 2 x 3 (+ missing) = 8 possible rows, all 8 present is fine
    small = {
        "a": {"type": "categorical", "categories": ["x", "y"]},
        "b": {"type": "categorical", "categories": ["p", "q", "r"], "nullable": True},
    }
    assert public_domain_size(small) == 8
    every = pd.DataFrame([(a, b) for a in "xy" for b in ("p", "q", "r", None)], columns=["a", "b"])
    table = every.iloc[np.arange(20_000) % 8]
    rows = collapse(table, small)
    assert not rows["collapsed"] and rows["distinct"] == 8
    assert rows["missing_categories"] == {}
    assert collapse(table[table["a"] == "x"], small)["missing_categories"] == {"a": ["y"]}
    assert public_domain_size({"n": {"type": "integer", "min": 1, "max": 10}}) == 10


def test_a_zcdp_release_says_why_its_allotments_add_up_to_more(tmp_path):
    """pgm + calibration share the release's rho: each part's epsilon alone sums to more than
    the release's, and the report says why (one ledger entry, rhos add)."""
    directory = build_release(tmp_path, n_synthetic=300, weights="calibration")
    text = (directory / "report.md").read_text()
    manifest = json.loads((directory / "manifest.json").read_text())
    configuration = manifest["configuration"]
    parts = configuration["generator"]["epsilon"] + configuration["weights"]["epsilon"]
    assert parts > manifest["release_spend"]["epsilon"]
    assert "5.0% of the release's zCDP budget ρ" in text
    assert f"sharing the release's ρ = {human(configuration['budget_split']['rho'])}" in text
    assert "The ledger records them as one entry." in text
    assert len(pd.read_parquet(directory / "ledger.parquet")) == 1


def test_crowded_columns_are_named_with_their_cells(manifest):
    """The release states how its synthetic rows fill each numeric column's cells
    (`diagnostics.accuracy.cell_crowding`), and the report names the crowded ones and says
    what that loses."""
    from dprelease.release.report.accuracy import usable_section

    crowding = manifest["accuracy"]["synthetic_rows"]["cell_crowding"]
    assert {"wage", "capital_gain"} <= set(crowding)  # every numeric column with wide cells

    def record(held: int, widest: float, lowest: bool, is_crowded: bool = True) -> dict:
        return {
            "cells": 64 if held == 3 else 16,
            "cells_holding_90_percent": held,
            "widest_of_them": widest,
            "lowest_cell_among_them": lowest,
            "crowded": is_crowded,
        }

    edited = json.loads(json.dumps(manifest))
    edited["accuracy"]["synthetic_rows"]["cell_crowding"] = {
        "wage": record(3, 312.5, True),
        "hours": record(2, 6.1, True),
        "age": record(2, 4.6, False),
        "education": record(9, 1.3, False, is_crowded=False),
    }
    lines = usable_section(edited)
    wage = next(line for line in lines if line.startswith("`wage`"))
    assert wage.startswith(
        "`wage`: 90 % of its synthetic rows lie in 3 of its 64 cells (up to 312 wide)."
    )
    assert wage.endswith("give finer cells there.")  # continuous: no `spacing` advice
    hours = next(line for line in lines if line.startswith("`hours`"))  # integers near min
    assert "`spacing: log`, which gives its low values cells of their own" in hours
    age = next(line for line in lines if line.startswith("`age`"))  # integers, not near min
    assert "spacing" not in age and age.endswith("give finer cells there.")
    assert not any(line.startswith("`education`: 90 %") for line in lines)  # not crowded


def test_a_mean_resting_on_weak_cells_is_named_with_both_means(manifest):
    """The release records each numeric column's weak cells and its mean with and without
    them (`diagnostics.accuracy.weak_cells`); the report names the columns whose mean they
    move, with both means."""
    from dprelease.release.report.accuracy import usable_section

    weak = manifest["accuracy"]["synthetic_rows"]["weak_cells"]
    assert {"wage", "capital_gain"} <= set(weak)  # every numeric column
    keys = {
        "weak_cells",
        "rows_in_weak_cells",
        "mean",
        "mean_without_weak_cells",
        "weak_cells_move_mean",
        "strong_cells_low",
        "strong_cells_high",
        "rows_below_strong_cells",
        "rows_above_strong_cells",
        "lower_tail_on_noise",
        "upper_tail_on_noise",
        "cells_beyond_strong_cells",
        "one_value_per_cell",
    }
    assert all(set(record) == keys for record in weak.values())
    edited = json.loads(json.dumps(manifest))
    tails = {
        "strong_cells_low": 0.0,
        "strong_cells_high": 50.0,
        "rows_below_strong_cells": 0.0,
        "rows_above_strong_cells": 0.0,
        "lower_tail_on_noise": False,
        "upper_tail_on_noise": False,
        "cells_beyond_strong_cells": 8,
        "one_value_per_cell": False,
    }
    edited["accuracy"]["synthetic_rows"]["weak_cells"] = {
        "wage": {
            "weak_cells": 40,
            "rows_in_weak_cells": 0.0123,
            "mean": 812.4,
            "mean_without_weak_cells": 640.55,
            "weak_cells_move_mean": True,
            **tails,
            "upper_tail_on_noise": True,
        },
        "hours": {
            "weak_cells": 16,
            "rows_in_weak_cells": 1.0,
            "mean": 40.2,
            "mean_without_weak_cells": None,
            "weak_cells_move_mean": True,
            **tails,
            "strong_cells_low": None,
            "strong_cells_high": None,
        },
        "children": {
            "weak_cells": 1,
            "rows_in_weak_cells": 0.08,
            "mean": 0.08,
            "mean_without_weak_cells": 0.0,
            "weak_cells_move_mean": True,
            **tails,
            "strong_cells_high": 0.0,
            "cells_beyond_strong_cells": 1,
            "one_value_per_cell": True,
        },
        "age": {
            "weak_cells": 0,
            "rows_in_weak_cells": 0.0,
            "mean": 41.0,
            "mean_without_weak_cells": 41.0,
            "weak_cells_move_mean": False,
            **tails,
        },
    }
    lines = usable_section(edited)
    wage = next(line for line in lines if line.startswith("`wage`: 1.2%"))
    assert "lie in 40 cells whose DP counts are within 2 noise standard deviations" in wage
    assert "its synthetic mean is 812.4, and 640.5 without them." in wage
    hours = next(line for line in lines if line.startswith("`hours`: 100.0%"))
    assert "its synthetic mean is 40.2, and every cell of it is weak, so there is no mean" in hours
    # what leaves fewer weak cells: bounds only where cells of several values lie beyond the
    # strong ones; a 0/1 column's weak 1s, or a column without a strong cell, need more rows
    assert wage.endswith(
        "Bounds in the schema closer to where its rows are, more rows or a "
        "larger ε leave fewer such cells."
    )
    assert hours.endswith(
        "No cell of it stands above the noise: more rows, fewer columns or a "
        "larger ε leave fewer such cells."
    )
    children = next(line for line in lines if line.startswith("`children`: 8.0%"))
    assert "lie in 1 cell whose DP counts" in children
    assert children.endswith(
        "More rows or a larger ε leave fewer such cells; narrower bounds "
        "too, but only if no real row can take a value other than 0."
    )
    edited["accuracy"]["synthetic_rows"]["weak_cells"]["wage"]["cells_beyond_strong_cells"] = 0
    inner = next(line for line in usable_section(edited) if line.startswith("`wage`: 1.2%"))
    assert inner.endswith("its bounds are not the cause.")  # weak cells between strong ones
    assert not any(line.startswith("`age`") for line in lines)
    assert sum(line.startswith("`wage`") for line in lines) == 1  # its tail: the mean's line


def test_a_far_tail_resting_on_weak_cells_is_named_with_its_span(manifest):
    """A column whose far tails rest on weak cells but whose mean they do not move
    (`column_cells.noisy_tails`): the report says how many rows lie beyond which value, and
    which percentiles rest on noise."""
    from dprelease.release.report.accuracy import usable_section

    edited = json.loads(json.dumps(manifest))
    edited["accuracy"]["synthetic_rows"]["weak_cells"] = {
        "wage": {
            "weak_cells": 5,
            "rows_in_weak_cells": 0.03,
            "mean": 15.6,
            "mean_without_weak_cells": 15.1,
            "weak_cells_move_mean": False,
            "strong_cells_low": 6.25,
            "strong_cells_high": 12_500.0,
            "rows_below_strong_cells": 0.012,
            "rows_above_strong_cells": 0.018,
            "lower_tail_on_noise": True,
            "upper_tail_on_noise": True,
            "cells_beyond_strong_cells": 3,
            "one_value_per_cell": False,
        },
        "age": {
            "weak_cells": 1,
            "rows_in_weak_cells": 0.004,
            "mean": 41.0,
            "mean_without_weak_cells": 41.0,
            "weak_cells_move_mean": False,
            "strong_cells_low": 16.0,
            "strong_cells_high": 90.0,
            "rows_below_strong_cells": 0.0,
            "rows_above_strong_cells": 0.004,
            "lower_tail_on_noise": False,
            "upper_tail_on_noise": False,
            "cells_beyond_strong_cells": 1,
            "one_value_per_cell": False,
        },
    }
    lines = usable_section(edited)
    wage = next(line for line in lines if line.startswith("`wage`"))
    assert wage.startswith(
        "`wage`: 1.2% of its synthetic rows lie below 6.25 and 1.8% above "
        "12,500, beyond its cells whose DP counts are 2 noise standard"
    )
    assert "its 1st and 99th percentiles and the values beyond rest on noise" in wage
    assert not any(line.startswith("`age`") for line in lines)


def test_the_recorded_precision_names_each_continuous_columns_steps(manifest):
    """The steps `pgm` measured (`generators.lattice`) are in the manifest and the report
    names them with their shares, and the continuous columns where none stood out; a
    generator that measures no steps says nothing about them."""
    from dprelease.release.report.accuracy import usable_section

    continuous = [
        name for name, spec in manifest["schema"]["columns"].items() if spec["type"] == "continuous"
    ]
    assert continuous and manifest["configuration"]["generator"]["generator"] == "pgm"
    # every continuous column without a codebook, whatever the noise kept (a manifest's keys
    # never depend on DP outcomes: tests/test_dask.py compares them across runs)
    assert set(manifest["accuracy"]["measured_precision"]) == set(continuous)
    edited = json.loads(json.dumps(manifest))
    record = {"steps": [100.0, 1.0, 0.1, 1e-05], "shares": [0.0, 0.978, 0.02, 0.002, 0.0]}
    edited["accuracy"]["measured_precision"] = {continuous[0]: record}
    lines = usable_section(edited)
    found = next(line for line in lines if line.startswith("Recorded precision"))
    assert found.endswith(f"`{continuous[0]}` on 1 (98%), 0.1 (2%), 0.00001 (< 1%).")
    record["zero_share"] = 0.93  # a zero-inflated column: its zeros, then its steps
    found = next(line for line in usable_section(edited) if line.startswith("Recorded"))
    assert found.endswith(
        f"`{continuous[0]}` 93% exactly 0, the rest on 1 (98%), 0.1 (2%), 0.00001 (< 1%)."
    )
    record["zero_share"] = 0.0
    record["shares"] = [0.0, 0.0, 0.0, 0.0, 1.0]  # no step above the noise: all "none"
    lines = usable_section(edited)
    assert any(line.startswith("Recorded precision: no continuous column") for line in lines)
    assert "Their synthetic values are drawn anywhere in their cells." in lines
    del edited["accuracy"]["measured_precision"]  # e.g. `aim`: no steps measured
    assert not any("Recorded precision" in line for line in usable_section(edited))


@pytest.mark.parametrize(
    ("k_hat", "text"), [(-0.0098, "-0.01"), (-0.001, "0.00"), (0.7123, "0.71"), (0.5, "0.50")]
)
def test_k_hat_is_shown_to_the_hundredth_like_its_thresholds(k_hat, text):
    """A k-hat of -0.0098 once read "-0.0098": four decimals of a shape estimate compared
    with 0.5 and 0.7."""
    from dprelease.release.report.synthetic import _k_hat_text

    assert _k_hat_text(k_hat) == text


def test_the_pairs_measured_together_are_listed(manifest):
    from dprelease.release.report.accuracy import _pairs_lines, usable_section

    schema = {"columns": {"a": {}, "b": {}, "c": {}, "y": {}}, "target": "y"}
    one_way = [{"columns": [name]} for name in schema["columns"]]
    tree = one_way + [
        {"columns": ["y", "a"]},
        {"columns": ["y", "a", "b"]},
        {"columns": ["y", "b", "c"]},
    ]
    (line, _) = _pairs_lines(tree, schema)
    assert line.startswith("Relations between columns: 5 of the 6 pairs of columns were")
    assert "every column with the target `y`; and `a` × `b`, `b` × `c`." in line
    assert "`a` × `c`" not in line
    (line, _) = _pairs_lines(one_way, schema | {"target": None})
    assert "none was measured, so the synthetic columns are independent" in line
    # the default generator's release: every pair its marginals hold, and no other
    names = list(manifest["schema"]["columns"])
    lines = usable_section(manifest)
    (line,) = [x for x in lines if "pairs of columns were measured together" in x]
    held = {
        frozenset(p)
        for m in manifest["accuracy"]["marginals"]
        for p in combinations(m["columns"], 2)
    }
    assert f"{len(held)} of the {len(names) * (len(names) - 1) // 2} pairs" in line


def test_a_categorical_targets_cells_with_each_numeric_column_are_named(manifest):
    """Inside a measured cell a numeric column is drawn apart from a categorical target
    (`diagnostics.accuracy`, "Inside a cell"): the report names each numeric column's cells
    with the census target `high_earner`, from the measurements; a numeric target or none
    gets no such line."""
    from dprelease.diagnostics.accuracy import coarse_relations
    from dprelease.generators.base import Measurement
    from dprelease.release.report.accuracy import usable_section

    records = manifest["accuracy"]["relations"]["cells_with_target"]
    columns = manifest["schema"]["columns"]
    numeric = [r for r in records if columns[r["column"]]["type"] != "categorical"]
    assert {r["column"] for r in numeric} == {"age", "education", "hours", "wage", "capital_gain"}
    (line,) = [x for x in usable_section(manifest) if x.startswith("Relations with the target")]
    assert "`high_earner` is categorical" in line and "drawn apart from it" in line
    assert line.endswith(", ".join(f"`{r['column']}` in {r['cells']}" for r in numeric) + " cells.")
    for target in ("wage", None):
        schema = {**manifest["schema"], "target": target}
        assert not any(
            x.startswith("Relations with the target")
            for x in usable_section({**manifest, "schema": schema})
        )
    # the most cells a column had in a marginal that holds the target, whichever marginal
    measured = [
        Measurement(("y", "a"), 8, "gaussian", 1.0, 100.0, (2, 4)),
        Measurement(("y", "b", "a"), 24, "gaussian", 1.0, 100.0, (2, 2, 6)),
        Measurement(("a", "c"), 64, "gaussian", 1.0, 100.0, (8, 8)),
    ]
    assert coarse_relations(measured, "y")["cells_with_target"] == [
        {"column": "a", "cells": 6},
        {"column": "b", "cells": 2},
    ]
    assert coarse_relations(measured)["cells_with_target"] == []
