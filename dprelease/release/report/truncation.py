"""`report.md` of an adaptive-truncation release: the posterior table, the trajectory figure
(the paper's Figure 2 without the particle clouds; sigma as its median, on an axis ending at
the bounds' largest possible spread), the shared sections. Drawn only from the release's DP
outputs and public metadata."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.release.files import TRAJECTORY_FIGURE
from dprelease.release.report.common import (
    closing_sections,
    human,
    opening_sections,
    save_figure,
    write_markdown,
)


def sigma_ceiling(bounds: tuple[float, float]) -> float:
    """(hi - lo)/2: the largest standard deviation of any distribution on [lo, hi] (Popoviciu's
    inequality), so a sigma above it only says that the column spreads to its bounds."""
    return 0.5 * (bounds[1] - bounds[0])


def trajectory_series(trajectory: pd.DataFrame, bounds: tuple[float, float]) -> dict:
    """The per-step series `trajectory_figure` draws: for mu the posterior mean and its 5-95 %
    band; for sigma the posterior median and its 5-95 % band, each clipped to
    (0, `sigma_ceiling`]. Not sigma's mean: under the default prior (E sigma = infinity) the
    early posteriors keep a tail in which a few particles set the mean (`ParticlePosterior.
    summary`), which then spikes by orders of magnitude above anything the bounds allow."""
    ceiling = sigma_ceiling(bounds)
    return {
        "t": trajectory.t.to_numpy(),
        "mu": trajectory.mu_mean.to_numpy(),
        "mu_band": (trajectory.mu_q05.to_numpy(), trajectory.mu_q95.to_numpy()),
        "sigma": np.minimum(trajectory.sigma_q50.to_numpy(), ceiling),
        "sigma_band": tuple(
            np.minimum(trajectory[name].to_numpy(), ceiling) for name in ("sigma_q05", "sigma_q95")
        ),
    }


def trajectory_figure(
    transcript: pd.DataFrame, trajectory: pd.DataFrame, bounds: tuple[float, float]
):  # noqa: ANN201
    """Per step, mu's posterior mean and sigma's median (black, drawn over everything else)
    with their 5-95 % bands, and the intervals [l_t, r_t] (the paper's Figure 2 without the
    particle clouds); sigma's axis ends at `sigma_ceiling` (`trajectory_series`). matplotlib is
    imported here."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = trajectory_series(trajectory, bounds)
    t, ceiling = series["t"], sigma_ceiling(bounds)
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.fill_between(
        t,
        *series["mu_band"],
        color="tab:blue",
        alpha=0.25,
        lw=0,
        zorder=1,
        label="5-95 % posterior",
    )
    top.plot(
        transcript.t,
        transcript.l,
        color="tab:orange",
        lw=0.4,
        alpha=0.7,
        zorder=2,
        label="interval [l_t, r_t]",
    )
    top.plot(transcript.t, transcript.r, color="tab:orange", lw=0.4, alpha=0.7, zorder=2)
    top.plot(t, series["mu"], color="black", lw=1.3, zorder=3, label="posterior mean")
    centre, spread = trajectory.mu_mean.iloc[-1], max(trajectory.mu_sd.iloc[-1], 1e-12)
    top.set_ylim(centre - 40 * spread, centre + 40 * spread)
    top.set_ylabel("mu")
    top.legend(fontsize=7, loc="upper right")
    bottom.fill_between(
        t,
        *series["sigma_band"],
        color="tab:blue",
        alpha=0.25,
        lw=0,
        zorder=1,
        label="5-95 % posterior",
    )
    bottom.plot(t, series["sigma"], color="black", lw=1.3, zorder=3, label="posterior median")
    bottom.axhline(
        ceiling,
        color="0.5",
        ls="--",
        lw=0.8,
        zorder=2,
        label="(max - min)/2: values above drawn here",
    )
    bottom.set_yscale("log")
    bottom.set_ylim(top=ceiling * 1.3)
    bottom.set_ylabel("sigma")
    bottom.set_xlabel("t (rows processed)")
    bottom.legend(fontsize=7, loc="upper right")
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
    s, design = manifest["posterior_summary"], manifest["design"]
    column, n_steps = manifest["column"], manifest["n_steps"]
    spec = manifest["schema"]["columns"][column]
    bounds = (float(spec["min"]), float(spec["max"]))
    save_figure(directory, TRAJECTORY_FIGURE, trajectory_figure(transcript, trajectory, bounds))
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
    ]
    if "missing_values" in manifest:
        lines += [
            f"`{column}` is nullable: only rows with a value were processed (rows with a missing "
            "value never entered the mechanism), so this is the posterior of the column's "
            "non-missing values; it says nothing about how many values are missing.",
            "",
        ]
    lines += [
        "| parameter | posterior mean | sd | 5 % | 50 % | 95 % |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in ("mu", "sigma"):
        lines.append(
            f"| {name} | {human(s[f'{name}_mean'])} | {human(s[f'{name}_sd'])} "
            f"| {human(s[f'{name}_q05'])} | {human(s[f'{name}_q50'])} "
            f"| {human(s[f'{name}_q95'])} |"
        )
    lines += [
        "",
        f"Intervals: m + [{design['a']}, {design['b']}] c"
        + (
            f" at odd steps and m + [{-design['b']}, {-design['a']}] c at even steps"
            if design.get("mirrored")
            else ""
        )
        + " for (m, c) a Thompson draw from the current posterior (Fisher-information design, "
        f"score `{design['score']}`), intersected with the schema bounds.",
        "",
        f"![posterior trajectory]({TRAJECTORY_FIGURE})",
        "",
        *model_check_section(manifest["model_check"]),
    ]
    if "dp_row_count" in manifest:
        counted = "of the rows with a value " if "missing_values" in manifest else ""
        lines += [
            f"T was fixed from a DP row count {counted}"
            f"({human(manifest['dp_row_count']['value'])}, a Laplace-noised count, not the "
            "real number of rows).",
            "",
        ]
    lines += closing_sections(directory, manifest)
    write_markdown(directory, lines)
