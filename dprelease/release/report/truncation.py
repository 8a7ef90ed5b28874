"""`report.md` of an adaptive-truncation release: the posterior table, the trajectory figure
(the paper's Figure 2 without the particle clouds), the shared sections. Drawn only from the
release's DP outputs and public metadata."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dprelease.release.files import TRAJECTORY_FIGURE
from dprelease.release.report.common import (
    closing_sections,
    human,
    opening_sections,
    save_figure,
    write_markdown,
)


def trajectory_figure(transcript: pd.DataFrame, trajectory: pd.DataFrame):  # noqa: ANN201
    """Posterior mean and 5-95 % band of mu and sigma per step, with the intervals [l_t, r_t]
    (the paper's Figure 2 without the particle clouds). matplotlib is imported here."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.fill_between(trajectory.t, trajectory.mu_q05, trajectory.mu_q95, alpha=0.3,
                     label="5-95 % posterior")  # fmt: skip
    top.plot(trajectory.t, trajectory.mu_mean, color="red", lw=1, label="posterior mean")
    top.plot(transcript.t, transcript.l, color="0.4", lw=0.5, label="interval [l_t, r_t]")
    top.plot(transcript.t, transcript.r, color="0.4", lw=0.5)
    centre, spread = trajectory.mu_mean.iloc[-1], max(trajectory.mu_sd.iloc[-1], 1e-12)
    top.set_ylim(centre - 40 * spread, centre + 40 * spread)
    top.set_ylabel("mu")
    top.legend(fontsize=7, loc="upper right")
    bottom.fill_between(trajectory.t, trajectory.sigma_q05, trajectory.sigma_q95, alpha=0.3)
    bottom.plot(trajectory.t, trajectory.sigma_mean, color="red", lw=1)
    bottom.set_yscale("log")
    bottom.set_ylabel("sigma")
    bottom.set_xlabel("t (rows processed)")
    figure.tight_layout()
    return figure


def model_check_section(check: dict) -> list[str]:
    """The posterior predictive check of the released values (docs/adaptive-truncation.md 6.6):
    verdict, p-values per statistic, and the mean release per interval-position bin."""
    parts = ", ".join(f"{name} {human(value)}" for name, value in check["parts"].items())
    lines = [
        "## Does the normal model describe the column?",
        "",
        check["verdict"],
        "",
        "Posterior predictive check of the released values against the fitted model "
        f"(p-values: {parts}; combined {human(check['p_value'])}). Mean release per group of "
        "steps, grouped by the position of their interval, against the model's prediction:",
        "",
        "| interval centres | steps | mean release | predicted | z |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in check["bins"]:
        low, high = row["interval_centres"]
        lines.append(
            f"| {human(low)} to {human(high)} | {row['steps']} | {human(row['mean_release'])} "
            f"| {human(row['predicted'])} | {row['z']:.2f} |"
        )
    return [*lines, ""]


def write_truncation_report(
    directory: Path, manifest: dict, transcript: pd.DataFrame, trajectory: pd.DataFrame
) -> None:
    """report.md and trajectory.png (the `report` callable of the bundle)."""
    save_figure(directory, TRAJECTORY_FIGURE, trajectory_figure(transcript, trajectory))
    s, design = manifest["posterior_summary"], manifest["design"]
    column, n_steps = manifest["column"], manifest["n_steps"]
    title = "Adaptive-truncation posterior release"
    lines = [
        *opening_sections(manifest, title, manifest["truncation_statement"]),
        "## Posterior of the column's normal model",
        "",
        f"Column `{column}` modelled as N(mu, sigma^2); {n_steps} rows processed, each "
        "released once as its value clamped to [l_t, r_t] plus Laplace noise of scale "
        f"(r_t - l_t)/{human(manifest['epsilon'])}. Engine `{manifest['engine']}` "
        "(SMC on (mu, sigma) with the exact likelihood of the released values).",
        "",
        "| parameter | posterior mean | sd | 5 % | 95 % |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in ("mu", "sigma"):
        lines.append(
            f"| {name} | {human(s[f'{name}_mean'])} | {human(s[f'{name}_sd'])} "
            f"| {human(s[f'{name}_q05'])} | {human(s[f'{name}_q95'])} |"
        )
    lines += [
        "",
        f"Intervals: m + [{design['a']}, {design['b']}] c"
        + (f" at odd steps and m + [{-design['b']}, {-design['a']}] c at even steps"
           if design.get("mirrored") else "")
        + " for (m, c) a Thompson draw from the current posterior (Fisher-information design, "
        f"score `{design['score']}`), intersected with the schema bounds.",
        "",
        f"![posterior trajectory]({TRAJECTORY_FIGURE})",
        "",
        *model_check_section(manifest["model_check"]),
    ]
    if "dp_row_count" in manifest:
        lines += [
            f"T was fixed from a DP row count ({human(manifest['dp_row_count']['value'])}, a "
            "Laplace-noised count, not the real number of rows).",
            "",
        ]
    lines += closing_sections(directory, manifest)
    write_markdown(directory, lines)
