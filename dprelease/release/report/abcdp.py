"""`report.md` of an ABCDP release: the posterior sample against the prior
(`inference/abcdp/summary.py`), the flip-probability curve (Park et al., Proposition 4.2), the
shared sections. Drawn only from the release's DP outputs, public prior draws and public
metadata."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.inference.abcdp.summary import summary_figure, summary_lines
from dprelease.inference.abcdp.svt import flip_probability
from dprelease.release.files import ABCDP_POSTERIOR_FIGURE, FLIP_FIGURE
from dprelease.release.report.common import (
    closing_sections,
    human,
    opening_sections,
    save_figure,
    write_markdown,
)


def flip_figure(threshold: float, noise_scale: float, ax=None):  # noqa: ANN001, ANN201
    """G_b(|rho - eps_abc|) against rho for the realised b (Proposition 4.2); public."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = None
    if ax is None:
        figure, ax = plt.subplots(figsize=(6, 3.5))
    rho = np.linspace(0.0, max(2.0 * threshold, threshold + 10 * noise_scale), 400)
    ax.plot(rho, flip_probability(rho, threshold, noise_scale))
    ax.axvline(threshold, color="0.5", lw=0.8, ls="--", label="threshold eps_abc")
    ax.set_xlabel("MMD rho of a draw")
    ax.set_ylabel("P(DP decision flips)")
    ax.set_ylim(0, 0.55)
    ax.legend(fontsize=8)
    if figure is not None:
        figure.tight_layout()
    return figure or ax.figure


def write_abcdp_report(
    directory: Path, manifest: dict, posterior: pd.DataFrame, prior: np.ndarray
) -> None:
    """report.md with the posterior against the prior and the flip-probability curve (the
    bundle's report); `prior` are the public prior draws of the manifest's summary."""
    names = manifest["model"]["parameter_names"]
    summary = manifest["posterior_summary"]
    save_figure(directory, FLIP_FIGURE, flip_figure(manifest["threshold"], manifest["noise_scale"]))
    save_figure(
        directory,
        ABCDP_POSTERIOR_FIGURE,
        summary_figure(posterior[names].to_numpy(), prior, names, summary),
    )
    accepted, c = manifest["n_accepted"], manifest["n_samples"]
    lines = [
        *opening_sections(manifest, "ABCDP posterior release", manifest["svt_statement"]),
        "## Posterior sample",
        "",
        f"Model `{manifest['model']['reference']}` (sha256 `{manifest['model']['sha256']}`), "
        f"columns {', '.join(manifest['model']['columns'])}. {manifest['t_stop']} of "
        f"{manifest['n_draws']} prior draws were tested (m = {manifest['n_sim']} simulated rows "
        f"each); **{accepted} of c = {c} accepted**"
        + (
            " (fewer than c: the threshold is too small for this model and noise level, or "
            "the draws ran out)"
            if accepted < c
            else ""
        )
        + ".",
        "",
        *summary_lines(
            summary,
            threshold=manifest["threshold"],
            noise_scale=manifest["noise_scale"],
            resample=manifest["resample"],
        ),
        f"![accepted draws against the prior]({ABCDP_POSTERIOR_FIGURE})",
        "",
        "## Flip probability",
        "",
        f"A draw at MMD rho is accepted differently from non-private rejection ABC with "
        f"probability G_b(|rho - eps_abc|) (Park et al., Proposition 4.2), here with "
        f"b = {human(manifest['noise_scale'])} from the DP count "
        f"n_hat = {human(manifest['dp_row_count']['value'])} (a DP output, not the real row "
        "count).",
        "",
        f"![flip probability]({FLIP_FIGURE})",
        "",
        *closing_sections(directory, manifest),
    ]
    write_markdown(directory, lines)
