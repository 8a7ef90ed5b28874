"""`report.md`: a readable summary of a release for the people who receive it.

Drawn only from what the release itself contains (the synthetic rows, the released weights,
the manifest and ledger): nothing here is computed from the real table.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import is_numeric_dtype

FIGURE_WEIGHTS = "weights.png"


def write_report(
    directory: Path,
    manifest: dict,
    synthetic: pd.DataFrame,
    weights: np.ndarray,
    raw_log_weights: np.ndarray,
    smoothed_log_weights: np.ndarray,
) -> None:
    """Write report.md (and its figure) into the release directory."""
    diagnostics = manifest["diagnostics"]
    _plot_weights(
        directory / FIGURE_WEIGHTS,
        raw_log_weights,
        smoothed_log_weights,
        int(diagnostics.get("tail_length") or 0),
    )
    configuration = manifest["configuration"]
    lines = [
        f"# Synthetic release `{manifest['release_id']}` of `{manifest['dataset']}`",
        "",
        f"Created {manifest['created_at']} with dprelease "
        f"{manifest['package_versions']['dprelease']}.",
        "",
        "## Privacy",
        "",
        manifest["privacy_statement"] + ".",
        "",
        "Every number below is computed from the synthetic rows and the released weights, "
        "which are differentially private; nothing was computed from the real table.",
        "",
        "## How it was made",
        "",
        f"- Generator: `{configuration['generator']['generator']}` "
        f"({_json_inline(configuration['generator'])})",
        f"- Weights: `{configuration['weights']['method']}` "
        f"({_json_inline(configuration['weights'])})",
        f"- Synthetic rows: {manifest['n_synthetic']}",
        "",
        "## Importance weights",
        "",
        "`weight` makes estimates on the synthetic rows closer to the real distribution: use "
        "it as `sample_weight` or in weighted means (it averages 1). `log_weight` holds the "
        "raw debiased log weights before Pareto smoothing.",
        "",
        _diagnostics_table(diagnostics),
        "",
        f"![weights]({FIGURE_WEIGHTS})",
        "",
        "## Columns (synthetic data: unweighted and weighted)",
        "",
        _column_summary(synthetic, weights),
        "",
        "## Privacy ledger of the dataset",
        "",
        "See `ledger.parquet` for every entry up to and including this release.",
        "",
    ]
    (directory / "report.md").write_text("\n".join(lines))


def _json_inline(values: dict) -> str:
    return ", ".join(
        f"{key}={value}" for key, value in values.items() if not isinstance(value, dict)
    )


def _diagnostics_table(diagnostics: dict) -> str:
    rows = ["| diagnostic | value |", "| --- | --- |"]
    rows += [f"| {key} | {value} |" for key, value in diagnostics.items()]
    return "\n".join(rows)


def _column_summary(synthetic: pd.DataFrame, weights: np.ndarray) -> str:
    normalised = np.asarray(weights, dtype=float) / np.sum(weights)
    rows = ["| column | statistic | unweighted | weighted |", "| --- | --- | --- | --- |"]
    for name in synthetic.columns:
        values = synthetic[name]
        present = values.notna().to_numpy()
        if is_numeric_dtype(values):
            numbers = values.to_numpy(dtype=float, na_value=np.nan)
            unweighted = np.nanmean(numbers) if present.any() else float("nan")
            mass = normalised[present].sum()
            weighted = (
                np.sum(normalised[present] * numbers[present]) / mass if mass > 0 else float("nan")
            )
            rows.append(f"| {name} | mean | {unweighted:.4g} | {weighted:.4g} |")
            continue
        for level in values.cat.categories:
            hit = (values == level).to_numpy()
            rows.append(
                f"| {name} | share {level} | {hit.mean():.3f} | {normalised[hit].sum():.3f} |"
            )
    return "\n".join(rows)


def _plot_weights(
    path: Path, raw_log_weights: np.ndarray, smoothed_log_weights: np.ndarray, tail_length: int
) -> None:
    """Histogram of the released log weights and the upper tail, raw vs Pareto-smoothed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    raw = np.sort(raw_log_weights)[::-1] - np.max(raw_log_weights)
    smoothed = np.sort(smoothed_log_weights)[::-1] - np.max(raw_log_weights)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    left.hist(smoothed, bins=60, color="tab:blue")
    left.set_xlabel("log weight - max (smoothed)")
    left.set_ylabel("synthetic rows")
    left.set_title("Weight distribution")
    ranks = np.arange(1, max(1, min(tail_length, len(raw))) + 1)
    right.plot(ranks, raw[: len(ranks)], "o", ms=3, label="raw")
    right.plot(ranks, smoothed[: len(ranks)], "-", label="Pareto-smoothed")
    right.set_xscale("log")
    right.set_xlabel("rank in the upper tail")
    right.set_ylabel("log weight - max")
    right.set_title(f"Upper tail ({tail_length} largest weights) and its Pareto fit")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
