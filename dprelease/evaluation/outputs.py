"""Write an evaluation: `results.parquet`, `summary.md` (paper-style tables, mean +- standard
error over seeds, best private method per column in bold) and PNG figures (box plots per
metric; the paper's Figure 1 on the toy triangle example).

Every output is labelled as computed on real data and not for publication. Writing into a
release directory (one holding a `manifest.json` or a `ledger.sqlite`, or inside one) is
refused: evaluations must never mix with what is published.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.evaluation.harness import NOT_FOR_PUBLICATION
from dprelease.release.files import MANIFEST_FILE
from dprelease.release.synthetic.plan import weights_options
from dprelease.schema import Schema

METRICS = {  # column -> (title, lower is better)
    "wst": ("WST", True),
    "beta_mse": ("beta-MSE", True),
    "downstream": ("downstream", None),  # direction depends on the metric (AUC vs MSE)
    "k_hat": ("PSIS k-hat", True),
    "ess_fraction": ("ESS / N_G", False),
}
RELEASE_MARKERS = (MANIFEST_FILE, "ledger.sqlite")


def check_output_directory(out_dir: str | Path) -> Path:
    """Refuse a directory that is, or lies inside, a release directory."""
    out = Path(out_dir).resolve()
    for directory in (out, *out.parents):
        for marker in RELEASE_MARKERS:
            if (directory / marker).exists():
                raise InputError(
                    f"{out_dir}: refusing to write an evaluation into a release directory "
                    f"({directory / marker} exists); evaluations are computed on real data "
                    "and must stay apart from releases"
                )
    return out


def write_evaluation(results: pd.DataFrame, out_dir: str | Path, grid: dict) -> Path:
    """Write results.parquet, summary.md and figures; return the directory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = check_output_directory(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(results, preserve_index=False)
    table = table.replace_schema_metadata(
        {
            b"dprelease.notice": NOT_FOR_PUBLICATION.encode(),
            b"dprelease.grid": json.dumps(grid).encode(),
        }
    )
    pq.write_table(table, out / "results.parquet")
    figures = _box_plots(results, out)
    (out / "summary.md").write_text(summary_markdown(results, grid, figures))
    return out


def summary_markdown(results: pd.DataFrame, grid: dict, figures: list[str]) -> str:
    lines = [
        "# Evaluation of weighted DP synthetic data",
        "",
        f"> {NOT_FOR_PUBLICATION}",
        "",
        "Mean +- standard error over seeds. WST: Wasserstein distance to the real test rows "
        "(lower is better); beta-MSE: squared difference of linear-model coefficients (lower "
        "is better); downstream: ROC-AUC (higher is better) or MSE (lower is better) of an MLP "
        "trained on the weighted synthetic rows. Bold: the best private method in the column. "
        "`logreg` and `mlp` are non-private references (marked *).",
        "",
        f"Grid: `{json.dumps(grid)}`",
        "",
    ]
    for (generator, epsilon), block in results.groupby(["generator", "epsilon"], sort=True):
        lines += [f"## {generator}, epsilon = {epsilon:g}", "", _table(block), ""]
    timing = results.groupby("generator")[
        ["fit_seconds", "sample_seconds", "weights_seconds", "metrics_seconds"]
    ].mean()
    lines += ["## Mean seconds per cell step", "", _markdown(timing.round(3)), ""]
    lines += [f"![{name}]({name})" for name in figures]
    return "\n".join(lines) + "\n"


def _table(block: pd.DataFrame) -> str:
    higher_is_better = block["downstream_metric"].iloc[0] == "roc_auc"
    grouped = block.groupby("weights", sort=False)
    means = grouped[list(METRICS)].mean()
    errors = grouped[list(METRICS)].sem().fillna(0.0)
    private = grouped["private"].first()
    cells = pd.DataFrame(index=means.index)
    for column, (title, lower) in METRICS.items():
        lower = (not higher_is_better) if lower is None else lower
        candidates = means.loc[private, column].dropna()
        best = None
        if not candidates.empty:
            best = candidates.idxmin() if lower else candidates.idxmax()
        formatted = []
        mean, error = means[column], errors[column]
        for method in means.index:
            text = f"{mean[method]:.4g} +- {error[method]:.2g}"
            formatted.append(f"**{text}**" if method == best else text)
        cells[title] = formatted
    cells.index = [m if private[m] else f"{m}*" for m in cells.index]
    return _markdown(cells)


def _markdown(frame: pd.DataFrame) -> str:
    header = "| | " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "| --- " * (len(frame.columns) + 1) + "|"
    rows = [
        f"| {index} | " + " | ".join(str(v) for v in row) + " |"
        for index, row in zip(frame.index, frame.to_numpy(), strict=True)
    ]
    return "\n".join([header, rule, *rows])


def _box_plots(results: pd.DataFrame, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    groups = list(results.groupby(["generator", "epsilon"], sort=True))
    for column, (title, _) in METRICS.items():
        figure, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
        for axis, ((generator, epsilon), block) in zip(axes[0], groups, strict=True):
            methods = list(dict.fromkeys(block["weights"]))
            data = [block.loc[block["weights"] == m, column].to_numpy(float) for m in methods]
            # bounded weights have k-hat = -inf (PSIS left them unsmoothed): no box to draw
            axis.boxplot([d[np.isfinite(d)] for d in data], tick_labels=methods)
            axis.set_title(f"{generator}, eps={epsilon:g}")
            axis.tick_params(axis="x", rotation=45)
        figure.suptitle(f"{title} (computed on real data: not for publication)")
        figure.tight_layout()
        name = f"box_{column}.png"
        figure.savefig(out / name, dpi=90)
        plt.close(figure)
        names.append(name)
    return names


# The public schema of the toy example's two columns (weights whose feature map comes from the
# schema, `calibration`, need its `Encoder`).
TOY_SCHEMA = Schema.model_validate(
    {
        "dataset": "toy-triangle",
        "budget": {"epsilon": 1e6, "delta": 0.5},
        "columns": {
            "x1": {"type": "continuous", "min": 0, "max": 1},
            "x2": {"type": "continuous", "min": 0, "max": 1},
        },
    }
)


def toy_figure(
    out_dir: str | Path, methods: tuple[str, ...], epsilon: float, seed: int = 0
) -> Path:
    """The paper's Figure 1: weighted KDEs of uniform-square synthetic rows against real rows
    uniform on the triangle x1 + x2 < 1, one panel per weight method (public toy data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import gaussian_kde

    from dprelease import weights as weight_methods
    from dprelease.diagnostics import normalised_weights, psis
    from dprelease.privacy.noise import NoiseSource
    from dprelease.weights.toy import triangle_example

    rng = np.random.default_rng(seed)
    real, synthetic = triangle_example(2000, 2000, rng)
    encoder = Encoder(TOY_SCHEMA)  # the toy rows are already encoded: [0, 1] bounds
    grid = np.linspace(0, 1, 80)
    xx, yy = np.meshgrid(grid, grid)
    points = np.vstack([xx.ravel(), yy.ravel()])
    panels: list[tuple[str, np.ndarray, np.ndarray | None]] = [("real (triangle)", real, None)]
    for method in methods:
        if method == "discriminator":
            continue
        private = method in weight_methods.PRIVATE_METHODS
        estimate = weight_methods.estimate(
            method,
            real,
            synthetic,
            epsilon=epsilon if private else None,
            delta=1e-5 if private else None,
            noise=NoiseSource(),
            **weights_options(method, {}, encoder, None, None),
        )
        panels.append(
            (method, synthetic, normalised_weights(psis(estimate.log_weights).log_weights))
        )
    figure, axes = plt.subplots(1, len(panels), figsize=(3 * len(panels), 3.2), squeeze=False)
    for axis, (title, rows, weights) in zip(axes[0], panels, strict=True):
        density = gaussian_kde(rows.T, weights=weights)(points).reshape(xx.shape)
        axis.contourf(xx, yy, density, levels=20, cmap="viridis")
        axis.plot([0, 1], [1, 0], "w--", lw=1)
        axis.set_title(title, fontsize=9)
        axis.set_xticks([])
        axis.set_yticks([])
    figure.suptitle(f"Toy example (paper Figure 1), weights at epsilon={epsilon:g}")
    figure.tight_layout()
    path = Path(out_dir) / "figure1_toy.png"
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
