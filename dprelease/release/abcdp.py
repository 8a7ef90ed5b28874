"""An ABCDP release: public plan, loading the real rows, the bundle and its report (spec 7).

`plan_abcdp_release(schema, model_reference, config)` loads the model (public code), dry-runs
it from the prior and fixes the bandwidth and random features; the CLI calls it before Prefect
starts and the flow calls it again (same seed, same result). `load_real_rows` validates the
table and encodes the model's columns. `abcdp_bundle` turns the DP result into a
`ReleaseBundle`: the accepted theta's with their draw indices (`posterior.parquet`), the
consumed prior draws with their DP indicators (`draws.parquet`), and the manifest fields
(model sha256, seed of the public randomness, bandwidth, T, m, stop index, the DP count n_hat
labelled as such). Never the distances, the noisy threshold, the real row count, or any other
statistic of the real rows (spec 7.6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.inference.abcdp import (
    ABCDPConfig,
    ABCDPPlan,
    ABCDPResult,
    plan_abcdp,
)
from dprelease.inference.abcdp_model import load_model
from dprelease.inference.abcdp_svt import SVT_VARIANTS, flip_probability
from dprelease.privacy.accounting import Cap
from dprelease.privacy.ledger import LedgerEntry
from dprelease.release import ReleaseBundle
from dprelease.schema import Schema
from dprelease.validation import load_validated
from dprelease.verify_abcdp import DRAWS_FILE, KIND, POSTERIOR_FILE

FIGURE_FLIP = "flip_probability.png"
FIGURE_POSTERIOR = "posterior.png"


@dataclass(frozen=True)
class ABCDPRelease:
    """The public plan of one release: the schema and the ABCDP plan."""

    schema: Schema
    plan: ABCDPPlan

    @property
    def cap(self) -> Cap:
        """The schema's cap (what the ledger checks before the data is read)."""
        return self.schema.budget.cap

    @property
    def dataset(self) -> str:
        return self.schema.dataset


def plan_abcdp_release(schema: Schema, model_reference: str, config: ABCDPConfig) -> ABCDPRelease:
    """Load and dry-run the model, fix the public kernel; InputError (exit 2) on any problem."""
    return ABCDPRelease(schema, plan_abcdp(schema, load_model(model_reference), config))


def load_real_rows(input_path: str, release: ABCDPRelease) -> np.ndarray:
    """Validate the real table against the whole schema; encode the model's columns."""
    config = release.plan.config
    validated = load_validated(
        input_path,
        release.schema,
        on_out_of_bounds=config.on_out_of_bounds,
        on_invalid_rows=config.on_invalid_rows,
        drop_extra_columns=config.drop_extra_columns,
    )
    simulator = release.plan.simulator
    return simulator.encoder.encode(validated.table[list(simulator.schema.columns)])


def svt_statement(plan: ABCDPPlan, result: ABCDPResult) -> str:
    """One public sentence describing the mechanism (for the manifest and the report)."""
    c = plan.config
    factor = "2c" if c.resample else "(c + 1)"
    return (
        f"sparse vector technique ({SVT_VARIANTS[c.resample]}, c={c.n_samples}, "
        f"threshold {c.threshold:g} on the MMD scale) at epsilon={c.epsilon_svt:.6g} with "
        f"sensitivity 1/n_hat of the 1/n_hat-normalised MMD, threshold noise Laplace(b), "
        f"distance noise Laplace(2b), b = {factor}/(epsilon n_hat) = {result.noise_scale:.6g}; "
        f"n_hat from a Laplace row count at epsilon={c.epsilon_count:.6g}"
    )


def abcdp_bundle(
    release: ABCDPRelease,
    result: ABCDPResult,
    *,
    release_id: str,
    ledger_entries: Sequence[LedgerEntry],
    release_entry_ids: Sequence[int],
    cap: Cap,
) -> ReleaseBundle:
    """The release bundle (spec 7.6): DP outputs and public metadata only. `cap` is the
    dataset's cap as the ledger records it (with its accountant, `Ledger.cap`)."""
    plan = release.plan
    posterior = result.posterior
    manifest_extra = {
        "model": {
            "reference": plan.model.reference,
            "file": plan.model.path.name,
            "class": plan.model.class_name,
            "sha256": plan.model.sha256,
            "parameter_names": list(plan.model.parameter_names),
            "columns": list(plan.model.columns),
        },
        "epsilon": plan.config.epsilon,
        "n_samples": plan.config.n_samples,
        "threshold": plan.config.threshold,
        "resample": plan.config.resample,
        "public_seed": plan.seed,
        "bandwidth": plan.bandwidth,
        "n_draws": plan.config.n_draws,
        "n_sim": result.n_sim,
        "t_stop": result.n_consumed,
        "n_accepted": len(result.accepted),
        "noise_scale": result.noise_scale,
        "dp_row_count": {
            "value": result.n_hat,
            "note": "Laplace count of the rows (a DP output, scale 1/epsilon_count), the "
            "public normaliser n_hat; not the real row count",
        },
        "posterior_mean": {
            name: (float(posterior[name].mean()) if len(posterior) else None)
            for name in plan.model.parameter_names
        },
        "svt_statement": svt_statement(plan, result),
    }
    return ReleaseBundle(
        kind=KIND,
        dataset=release.dataset,
        release_id=release_id,
        ledger_entries=ledger_entries,
        release_entry_ids=release_entry_ids,
        cap=cap,
        schema=release.schema.public_dict(),
        configuration=plan.configuration(),
        report=partial(write_abcdp_report, posterior=posterior, draws=result.draws_table),
        tables={POSTERIOR_FILE: posterior, DRAWS_FILE: result.draws_table},
        manifest_extra=manifest_extra,
        invalid_rows=plan.config.on_invalid_rows,
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


def posterior_figure(posterior: pd.DataFrame, draws: pd.DataFrame, names: Sequence[str]):  # noqa: ANN201
    """Histograms of the accepted theta's over the consumed prior draws, per parameter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(len(names), 4)
    rows = -(-len(names) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3 * columns, 2.6 * rows), squeeze=False)
    for ax, name in zip(axes.ravel(), names, strict=False):
        values = draws[name].to_numpy()
        bins = np.linspace(values.min(), values.max(), 30) if len(values) > 1 else 10
        ax.hist(values, bins=bins, density=True, alpha=0.35, color="0.5", label="prior draws")
        if len(posterior):
            ax.hist(posterior[name], bins=bins, density=True, alpha=0.7, label="ABCDP posterior")
        ax.set_title(name, fontsize=9)
    for ax in axes.ravel()[len(names) :]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=7)
    figure.tight_layout()
    return figure


def write_abcdp_report(
    directory: Path, manifest: dict, posterior: pd.DataFrame, draws: pd.DataFrame
) -> None:
    """report.md with the flip-probability curve and posterior plots (the bundle's report)."""
    import matplotlib.pyplot as plt

    from dprelease.report_common import (
        budget_section,
        header_section,
        human,
        privacy_section,
        verification_section,
        write_markdown,
    )

    names = manifest["model"]["parameter_names"]
    for figure, name in (
        (flip_figure(manifest["threshold"], manifest["noise_scale"]), FIGURE_FLIP),
        (posterior_figure(posterior, draws, names), FIGURE_POSTERIOR),
    ):
        figure.savefig(directory / name, dpi=100)
        plt.close(figure)
    accepted, c = manifest["n_accepted"], manifest["n_samples"]
    lines = [
        *header_section(manifest, "ABCDP posterior release"),
        *privacy_section(manifest),
        f"- Mechanism: {manifest['svt_statement']}.",
        "",
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
        "| parameter | posterior mean (accepted draws) |",
        "| --- | --- |",
    ]
    for name in names:
        mean = manifest["posterior_mean"][name]
        lines.append(f"| {name} | {human(mean) if mean is not None else 'n/a (none accepted)'} |")
    lines += [
        "",
        f"![posterior and prior draws]({FIGURE_POSTERIOR})",
        "",
        "## Flip probability",
        "",
        f"A draw at MMD rho is accepted differently from non-private rejection ABC with "
        f"probability G_b(|rho - eps_abc|) (Park et al., Proposition 4.2), here with "
        f"b = {human(manifest['noise_scale'])} from the DP count "
        f"n_hat = {human(manifest['dp_row_count']['value'])} (a DP output, not the real row "
        "count).",
        "",
        f"![flip probability]({FIGURE_FLIP})",
        "",
        *budget_section(directory, manifest),
        *verification_section(manifest),
    ]
    write_markdown(directory, lines)
