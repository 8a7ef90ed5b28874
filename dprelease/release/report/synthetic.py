"""`report.md` of a DP synthetic-data release: a readable summary for the people who receive it.

Drawn only from what the release contains (the synthetic rows, the released weights, the
manifest and the ledger entries): every summary is post-processing of DP outputs, nothing is
computed from the real table (docs/privacy-model.md section 8). The sections every release kind
shares come from `dprelease.release.report.common`.

Column summaries compare, on the synthetic rows only, the unweighted value with the
importance-weighted one (self-normalised, `dprelease.analysis.weighted_mean`). They "differ a
lot" -- and the report says so in a plain warning -- when a numeric mean moves by more than
`MEAN_SHIFT_SD` (0.2) standard deviations of the column (a "small" effect in Cohen's terms,
large enough that an analysis would change), or a category share by more than
`SHARE_SHIFT` (5 percentage points). Standard errors are those of the weighted estimate
with the weights taken as fixed: they ignore the DP noise in the weights, and the report says
so next to them.

"Is this release usable?" comes first (`report/accuracy.py`): one verdict from the accuracy the
DP noise allows, the collapse check and the weights' diagnostics. PSIS judges the weights,
not the rows: flat, "good" weights say nothing about a generator that collapsed or drowned in
noise.

The weights figure (`weights.png`) shows the released `weight` values (histogram), the
largest weights before and after Pareto smoothing, and PSIS k-hat against its thresholds
(0.5 and the sample-size dependent threshold; Vehtari et al. 2024, section 3).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import is_numeric_dtype

from dprelease.analysis import WeightedMean, weighted_mean
from dprelease.release.files import SYNTHETIC_FILE, WEIGHTS_FIGURE
from dprelease.release.report.accuracy import usable_section
from dprelease.release.report.common import (
    closing_sections,
    header_section,
    human,
    percent,
    privacy_section,
    save_figure,
    write_markdown,
)
from dprelease.release.report.expectations import expectations_section
from dprelease.release.report.figures import (
    GOOD_K_HAT,
    diagnostic_number,
    weights_figure,
)

MEAN_SHIFT_SD = 0.2
SHARE_SHIFT = 0.05
VERDICT_TEXT = {
    "good": (
        "good: the weights' tail is light, so weighted estimates are stable (this grades the "
        'weights only; how faithful the rows are is the verdict of "Is this release usable?")'
    ),
    "ok": "ok: weighted estimates are usable, with somewhat more variance",
    "unreliable": (
        "unreliable: a few rows carry most of the weight; weighted estimates are unstable and "
        "the generator misses part of the real distribution"
    ),
}


def write_report(
    directory: Path,
    manifest: dict,
    synthetic: pd.DataFrame,
    weights: np.ndarray,
    raw_log_weights: np.ndarray,
    smoothed_log_weights: np.ndarray,
) -> None:
    """Write report.md and weights.png into the release directory (the `report` callable of
    the synthetic kind's `ReleaseBundle`; `dprelease.release.synthetic.pipeline`)."""
    diagnostics = manifest["diagnostics"]
    temper = float(manifest["configuration"]["release"].get("temper", 1.0))
    figure = weights_figure(weights, raw_log_weights, smoothed_log_weights, diagnostics, temper)
    save_figure(directory, WEIGHTS_FIGURE, figure)
    summary = column_summary(synthetic, weights)
    lines = [
        *header_section(manifest, "Synthetic release"),
        *privacy_section(manifest),
        *usable_section(manifest),
        *_made_section(manifest, synthetic),
        *_weights_section(manifest, diagnostics),
        *columns_section(summary),
        *_snippet_section(manifest, synthetic),
        *expectations_section(manifest),
        *closing_sections(directory, manifest),
    ]
    write_markdown(directory, lines)


def _made_section(manifest: dict, synthetic: pd.DataFrame) -> list[str]:
    configuration = manifest["configuration"]
    generator, weights = configuration["generator"], configuration["weights"]
    fraction = weights.get("fraction")
    rho = (configuration.get("budget_split") or {}).get("rho")
    of = "zCDP budget ρ" if rho else "budget"
    share = f", {percent(fraction)} of the release's {of}" if fraction else ""
    lines = [
        "## How it was made",
        "",
        f"- Generator: `{generator['generator']}` (allotted {_part_spend(generator)}).",
        f"- Weights: `{weights['method']}`{share} (allotted {_part_spend(weights)}).",
        f"- Synthetic rows: {len(synthetic):,}.",
        "",
    ]
    if rho:
        lines += [
            f"Both are Gaussian mechanisms sharing the release's ρ = {human(rho)} (zero-"
            "concentrated DP): each alone is (ε, δ)-DP at its allotment above, and together, "
            "since their ρs add, they are (ε, δ)-DP at the release's spend, less than the sum "
            "of their ε. The ledger records them as one entry.",
            "",
        ]
    return lines + [
        "What each mechanism actually spent is in `ledger.parquet` (a mechanism may spend less "
        "than its allotment, e.g. a pure-ε mechanism spends no δ).",
        "",
    ]


def _part_spend(part: dict) -> str:
    """`ε = 0.9, δ = 9e-7` of a configuration part (generator or weights)."""
    return f"ε = {human(part.get('epsilon', 0.0))}, δ = {human(part.get('delta', 0.0))}"


def _weights_section(manifest: dict, diagnostics: dict) -> list[str]:
    n = int(diagnostics.get("n_draws") or manifest["n_synthetic"])
    k_hat, threshold = (
        diagnostic_number(diagnostics["k_hat"]),
        diagnostic_number(diagnostics["threshold"]),
    )
    ess, ess_raw = diagnostic_number(diagnostics["ess"]), diagnostic_number(diagnostics["ess_raw"])
    verdict = diagnostics["verdict"]
    lines = [
        "## Importance weights",
        "",
        "`weight` corrects the synthetic rows towards the real distribution: use it as "
        "`sample_weight` or in weighted means (it averages 1; a row with weight 2 counts "
        "twice). `log_weight` holds the raw debiased log weights before Pareto smoothing.",
        "",
        "- **k-hat** (Pareto k) measures how heavy the tail of the largest weights is: "
        f"below {human(GOOD_K_HAT)} weighted estimates are stable, up to "
        f"{human(threshold, 2)} (the threshold for {n:,} rows) usable, above it a few rows "
        "dominate them.",
        "- **ESS** (effective sample size) is the number of equally weighted rows that would "
        "give weighted estimates the same precision as these weighted rows.",
        "",
        f"**Weights' verdict:** {_verdict_text(manifest['configuration']['weights'], verdict)}",
        "",
        "| diagnostic | value |",
        "| --- | --- |",
        f"| k-hat | {_k_hat_text(k_hat)} (threshold {human(threshold, 2)}) |",
        f"| ESS of `weight` | {human(ess)} of {n:,} rows ({percent(ess / n)}) |",
        f"| ESS before smoothing | {human(ess_raw)} |",
        f"| tail length (largest weights smoothed) | {int(diagnostics['tail_length']):,} |",
    ]
    if diagnostics.get("reason"):  # prose, not a table cell: the Prefect UI cuts wide tables
        lines += ["", f"Note on the tail: {diagnostics['reason']}"]
    temper = manifest["configuration"]["release"].get("temper", 1.0)
    if temper != 1.0:
        lines += [
            "",
            f"The weights were tempered before smoothing (w^α with α = {human(temper)}): a "
            "shorter tail and more stable estimates, at the price of some bias.",
        ]
    lines += [
        "",
        f"![weights: their distribution, the largest ones, and k-hat]({WEIGHTS_FIGURE})",
        "",
        *_calibration_lines(manifest["configuration"]["weights"]),
    ]
    return lines


FLAT_REASONS = {  # the methods' flat_reason in plain words
    "noisy count within the noise": (
        "the DP row count is within a few noise standard deviations of zero: the weights' "
        "share of the budget cannot tell the rows from the noise"
    ),
    "no pair varies": "no two-way table the weights measure varies over the synthetic rows",
    "no tempering gave weights PSIS calls reliable": (
        "no tempering of the discriminator's weights gave them a tail PSIS calls reliable"
    ),
    "noise gate": "the DP coefficients carry no signal detectable above their own noise",
}


def _verdict_text(weights: dict, verdict: str) -> str:
    """The weights' verdict; flat weights (method `none`, or weights a method made flat:
    calibration's and the discriminator's `flat_reason`, the logistic weights' noise gate)
    are said to be flat, not "good"."""
    fit = weights.get("calibration")
    reason = (fit.get("flat_reason") if isinstance(fit, dict) else None) or weights.get(
        "flat_reason"
    )
    if (weights.get("noise_gate") or {}).get("flat"):
        reason = "noise gate"
    if weights.get("method") == "none" or reason:
        why = f" ({FLAT_REASONS.get(reason, reason)})" if reason else ""
        return (
            f"flat: every row has weight 1, so the weights correct nothing{why}; weighted "
            "and unweighted estimates are the same"
        )
    return VERDICT_TEXT.get(verdict, verdict)


def _calibration_lines(weights: dict) -> list[str]:
    """What the calibration weights were fitted to and how far the rows were from it, in
    units of the noise (all DP: functions of the noisy sums and the synthetic rows)."""
    fit = weights.get("calibration")
    if not isinstance(fit, dict):  # other methods (weight_noised: a text on its calibration)
        return []
    pairs = ", ".join(f"{a} × {b}" for a, b in weights["features"]["pairs"])
    lines = [
        "### What the weights were calibrated to",
        "",
        f"DP two-way tables of the real rows ({pairs}; numeric columns in "
        f"{weights['features']['bins']} cells cut at synthetic quantiles), raked to the "
        "synthetic rows' one-way margins.",
        "",
    ]
    if fit.get("chi2_unweighted_per_df") is not None:
        lines += [
            "Distance in units of the DP noise (chi-square per degree of freedom; about 1 "
            "means within the noise):",
            "",
            "| | chi-square / df |",
            "| --- | --- |",
            f"| unweighted synthetic rows | {human(fit['chi2_unweighted_per_df'])} |",
            f"| weighted synthetic rows | {human(fit['chi2_weighted_per_df'])} |",
            "",
        ]
    if fit.get("flat_reason"):
        reason = fit["flat_reason"]
        lines += [f"The weights are flat: {FLAT_REASONS.get(reason, reason)}.", ""]
    elif fit.get("temper", 1.0) < 1.0:
        lines += [
            f"The fit was tempered (exponent {human(fit['temper'])}) to keep the effective "
            f"sample size at least {percent(weights['ess_floor'])} of the rows (and, where "
            "PSIS needed it, the weights' tail reliable).",
            "",
        ]
    if fit.get("guidance"):
        lines += [f"Advice: {fit['guidance']}.", ""]
    return lines


def column_summary(synthetic: pd.DataFrame, weights: np.ndarray) -> pd.DataFrame:
    """Per numeric column its mean, per categorical column each level's share: unweighted and
    weighted (`dprelease.analysis.weighted_mean`, with its standard error), the synthetic
    rows used, and whether they differ a lot (module docstring). Synthetic rows only."""
    weights = np.asarray(weights, dtype=float)
    rows = []
    for name in synthetic.columns:
        values = synthetic[name]
        if is_numeric_dtype(values) and not values.notna().any():
            continue  # no synthetic row has a value: there is no mean to show
        result = weighted_mean(values, weights)
        if isinstance(result, WeightedMean):
            numbers = values.dropna().to_numpy(dtype=float)
            plain, sd = float(numbers.mean()), float(numbers.std())
            differs = sd > 0 and abs(result.mean - plain) > MEAN_SHIFT_SD * sd
            rows.append(
                (name, "mean", plain, result.mean, result.standard_error, result.rows_used, differs)
            )
            continue
        for level, share in result.shares.iterrows():
            plain = share["rows"] / len(values)
            differs = abs(share["share"] - plain) > SHARE_SHIFT
            rows.append(
                (
                    name,
                    f"share {level}",
                    plain,
                    share["share"],
                    share["standard_error"],
                    result.rows_used,
                    differs,
                )
            )
    return pd.DataFrame(
        rows,
        columns=["column", "statistic", "unweighted", "weighted", "se", "rows", "differs"],
    )


def columns_section(summary: pd.DataFrame) -> list[str]:
    lines = ["## Columns: unweighted and weighted", ""]
    flagged = summary[summary["differs"]]
    if len(flagged):
        what = "; ".join(
            f"{row['column']} {row['statistic'].replace('share ', '= ')} "
            f"({_value(row['statistic'], row['unweighted'])} unweighted, "
            f"{_value(row['statistic'], row['weighted'])} weighted)"
            for row in flagged.to_dict("records")
        )
        lines += [
            f"**Warning: the weighted and unweighted summaries differ a lot for {what}.** "
            "Either the generator misrepresents these columns and the weights correct it, or "
            "the DP noise in the weights moved them: nothing in a release can tell which. "
            "Treat estimates that involve these columns with caution, and compare weighted "
            "and unweighted results before relying on either.",
            "",
        ]
    lines += [
        "| column | statistic | unweighted | weighted ± standard error | rows with a value |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in summary.to_dict("records"):
        statistic = row["statistic"]
        weighted = f"{_value(statistic, row['weighted'])} ± {_value(statistic, row['se'])}"
        mark = " (differs a lot)" if row["differs"] else ""
        lines.append(
            f"| {row['column']} | {statistic} | {_value(statistic, row['unweighted'])} "
            f"| {weighted}{mark} | {row['rows']:,} |"
        )
    lines += [
        "",
        "Standard errors treat the weights as fixed: they ignore the DP noise in the weights "
        "(and the generator's own error), so the real uncertainty is larger. Means of "
        "nullable columns use the rows with a value only.",
        "",
    ]
    return lines


def _value(statistic: str, value: float) -> str:
    return percent(value) if statistic.startswith("share") else human(value)


def _snippet_section(manifest: dict, synthetic: pd.DataFrame) -> list[str]:
    numeric = [c for c in synthetic.columns if is_numeric_dtype(synthetic[c])]
    categorical = [c for c in synthetic.columns if c not in numeric]
    path = f"path/to/{manifest['dataset']}/{manifest['release_id']}"
    code = [
        "from dprelease.analysis import load_release, weighted_mean",
        "",
        f'release = load_release("{path}")',
        "table, weight = release.table, release.weights  # one weight per row, mean 1",
    ]
    code += [f'print(weighted_mean(table["{c}"], weight))' for c in (numeric + categorical)[:2]]
    plain = [
        "import pyarrow.parquet as pq",
        "",
        f'frame = pq.read_table("{path}/{SYNTHETIC_FILE}").to_pandas()',
    ]
    if numeric:
        column = numeric[0]
        plain += [
            f'rows = frame["{column}"].notna()',
            f'print((frame["{column}"][rows] * frame["weight"][rows]).sum() '
            f'/ frame["weight"][rows].sum())',
        ]
    return [
        "## Using the release",
        "",
        "With dprelease (weighted means with standard errors, category shares):",
        "",
        "```python",
        *code,
        "```",
        "",
        "With pandas and pyarrow only:",
        "",
        "```python",
        *plain,
        "```",
        "",
        "Pass `weight` as `sample_weight` to scikit-learn estimators, or use "
        "`dprelease.analysis.fit_weighted`.",
        "",
    ]


def _k_hat_text(k_hat: float) -> str:
    if k_hat == -math.inf:
        return "none (the largest weights are all equal: the weights are bounded)"
    if k_hat == math.inf:
        return "not estimable"
    return f"{round(k_hat, 2) + 0.0:.2f}"  # to the hundredth, as its thresholds (+0.0: no "-0")
