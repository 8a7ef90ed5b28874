"""How far an ABCDP posterior moved from the prior: spread, shift, and a permutation test.

Post-processing only (docs/privacy-model.md section 8): the inputs are the accepted draws (a DP
output) and fresh draws from the prior (public code, drawn with the public seed); nothing
here reads the real table, and the result may be published with the release.

Per parameter j, with X the n accepted draws and Y the M = PRIOR_DRAWS prior draws:

- quantiles 5 / 50 / 95 % of X_j and of Y_j;
- spread ratio  r_j = sd(X_j) / sd(Y_j): about 1 when the release left the parameter as
  uncertain as the prior, towards 0 when the data pinned it down;
- mean shift  d_j = (mean X_j - mean Y_j) / sd(Y_j), in prior standard deviations;
- KL_j = -log r_j + (r_j^2 + d_j^2) / 2 - 1/2, the Kullback-Leibler divergence (nats) of the
  normal fitted to X_j from the normal fitted to Y_j: 0 when both moments agree, growing with
  shrinkage, inflation and shift; and its permutation p-value p_j.

Jointly: KL = sum_j KL_j (the diagonal-normal divergence) and its permutation p-value. Under
"the accepted draws are prior draws" the pooled draws are exchangeable, so
p = (1 + #{permuted KL >= observed KL}) / (1 + PERMUTATIONS) is a valid p-value whatever the
prior's shape (`scipy.stats.permutation_test`, one-sided). Accepted draws that carry no
information from the data (acceptance independent of theta: the SVT noise swamps the MMD, or
the threshold lets almost every draw pass) are prior draws, and the test then rejects with
probability ALPHA only. Needs n >= 2 (no spread from one draw).

Why this statistic and not the energy distance or a classifier: an informative ABC posterior
is mostly a concentration of the prior, and with c = 10 accepted draws the energy distance
hardly sees it. Measured (`benchmarks/abcdp_calibration.py`, 40 replicates, 4 parameters
with a U(0, 1) prior, M = 1000, 5 % level; KL vs energy distance): one parameter shrunk to
0.3 of its prior sd, power 1.00 vs 0.05 at n = 10 and 1.00 vs 0.15 at n = 30; one parameter
moved to U(0.3, 1), 0.15 vs 0.15 at n = 10 and 0.97 vs 0.68 at n = 30; all four shrunk,
1.00 for both; rejections of prior draws (the null) 0.07 vs 0.10 and 0.07 vs 0.05 (+-0.04 at
40 replicates; a permutation test's false-alarm rate is at most 5 %;
docs/decisions/0029-posterior-releases.md). The moments miss
shape-only changes (e.g. a symmetric bimodal posterior with the prior's mean and sd); the
quantiles in the table show those.

Warning rule: when the joint p-value is >= ALPHA = 0.05, the report says plainly that the
accepted draws are indistinguishable from the prior and what to change (more epsilon or
fewer samples c, a smaller threshold with more draws T; with few accepted draws the test
cannot see small moves, which the warning says too). Otherwise it names the parameters whose
own p_j >= ALPHA (the data did not move them detectably). A p-value below ALPHA says the
posterior moved; one above it does not prove that it did not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

if TYPE_CHECKING:
    from matplotlib.figure import Figure

QUANTILES = (0.05, 0.5, 0.95)
PRIOR_DRAWS = 1000
PERMUTATIONS = 999
ALPHA = 0.05
_TINY = 1e-12  # floor of the spread ratio (identical accepted draws)
HISTOGRAM_MIN = 30  # accepted draws drawn as a histogram from this many, as ticks below
_GATHER_ELEMENTS = 4_000_000  # resamples x n x p values gathered per batch


def summarise(
    accepted: np.ndarray, prior: np.ndarray, names: Sequence[str], rng: np.random.Generator
) -> dict | None:
    """Plain-data summary of the module docstring (None when nothing was accepted).

    `accepted` (n, p) are the released draws, `prior` (M, p) public prior draws, `rng` a
    public stream (the permutations).
    """
    accepted = np.asarray(accepted, dtype=float).reshape(-1, len(names))
    prior = np.asarray(prior, dtype=float).reshape(-1, len(names))
    if len(accepted) == 0:
        return None
    scale = prior.std(axis=0, ddof=1)
    scale = np.where(scale > 0, scale, 1.0)
    x, y = accepted / scale, prior / scale
    testable = len(accepted) >= 2
    joint = kl_test(x, y, rng) if testable else (None, None)
    parameters = []
    for j, name in enumerate(names):
        divergence, p_value = kl_test(x[:, [j]], y[:, [j]], rng) if testable else (None, None)
        parameters.append(
            {
                "name": name,
                "mean": float(accepted[:, j].mean()),
                "quantiles": _quantiles(accepted[:, j]),
                "prior_quantiles": _quantiles(prior[:, j]),
                "sd_ratio": float(x[:, j].std(ddof=1) / y[:, j].std(ddof=1)) if testable else None,
                "mean_shift": float(x[:, j].mean() - y[:, j].mean()),
                "kl": divergence,
                "p_value": p_value,
            }
        )
    return {
        "n_accepted": len(accepted),
        "n_prior_draws": len(prior),
        "quantile_levels": list(QUANTILES),
        "kl": joint[0],
        "p_value": joint[1],
        "n_permutations": PERMUTATIONS,
        "alpha": ALPHA,
        "indistinguishable_from_prior": None if joint[1] is None else joint[1] >= ALPHA,
        "parameters": parameters,
    }


def kl_test(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """KL of the fitted diagonal normals and its one-sided permutation p-value.

    The resampled groups come from the pooled moments: for the labels ix of a resample, the
    x-group's sums are gathered (O(n p)) and the y-group's are the pooled sums minus them.
    """
    pooled = np.vstack([x, y])
    n, m = len(x), len(y)
    total, total_sq = pooled.sum(axis=0), (pooled**2).sum(axis=0)
    y_scale_floor = _TINY * y.std(axis=0, ddof=1)

    def statistic(ix: np.ndarray, iy: np.ndarray, axis: int = -1) -> np.ndarray:
        del iy, axis  # the y-group is the complement of ix
        chosen = pooled[np.asarray(ix, dtype=np.intp)]  # (..., n, p)
        sum_x, sq_x = chosen.sum(axis=-2), (chosen**2).sum(axis=-2)
        mean_x, mean_y = sum_x / n, (total - sum_x) / m
        var_x = (sq_x - n * mean_x**2) / (n - 1)
        var_y = (total_sq - sq_x - m * mean_y**2) / (m - 1)
        sx = np.maximum(np.sqrt(np.maximum(var_x, 0.0)), y_scale_floor)
        sy = np.sqrt(np.maximum(var_y, 0.0))
        ratio, shift = sx / sy, (mean_x - mean_y) / sy
        return (-np.log(ratio) + (ratio**2 + shift**2) / 2.0 - 0.5).sum(axis=-1)

    result = stats.permutation_test(
        (np.arange(n), np.arange(n, n + m)),
        statistic,
        permutation_type="independent",
        vectorized=True,
        n_resamples=PERMUTATIONS,
        batch=max(1, _GATHER_ELEMENTS // pooled[:n].size),
        alternative="greater",
        rng=rng,
    )
    return float(result.statistic), float(result.pvalue)


def _quantiles(values: np.ndarray) -> list[float]:
    return [float(q) for q in np.quantile(values, QUANTILES)]


def summary_lines(
    summary: dict | None, *, threshold: float, noise_scale: float, resample: bool
) -> list[str]:
    """The report's section: table, joint test, and the verdict with what to change.

    `threshold` (eps_abc), `noise_scale` (b) and `resample` are public (the manifest's).
    """
    lines = ["## Posterior against the prior", ""]
    if summary is None:
        return [
            *lines,
            "No draw was accepted: the posterior is undefined (there is no fallback to "
            "non-private ABC). " + _remedies(threshold, noise_scale, resample),
            "",
        ]
    n, joint_p = summary["n_accepted"], summary["p_value"]
    lines += [
        f"The {n} accepted draw{'s' if n != 1 else ''} against {summary['n_prior_draws']} fresh "
        "draws from the prior (the model's public code, the release's public seed): "
        "post-processing of the release; nothing here reads the real table. Spread ratio = "
        "posterior sd / prior sd (1: as uncertain as the prior); mean shift in prior sds; KL "
        "of the normal fitted to the accepted draws from the one fitted to the prior (nats); "
        f"p: permutation test ({summary['n_permutations']} permutations) of 'the accepted "
        "draws are prior draws'.",
        "",
        "| parameter | mean | 5 % / 50 % / 95 % | prior 5 % / 50 % / 95 % | spread ratio "
        "| mean shift | KL | p |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in summary["parameters"]:
        lines.append(
            f"| {row['name']} | {_fmt(row['mean'])} | "
            + " / ".join(_fmt(q) for q in row["quantiles"])
            + " | "
            + " / ".join(_fmt(q) for q in row["prior_quantiles"])
            + f" | {_fmt(row['sd_ratio'])} | {_fmt(row['mean_shift'])} | {_fmt(row['kl'])} "
            f"| {_fmt(row['p_value'])} |"
        )
    lines.append("")
    alpha = summary["alpha"]
    if joint_p is None:
        lines.append(
            "One accepted draw: no spread and no test. "
            + _remedies(threshold, noise_scale, resample)
        )
    elif joint_p >= alpha:
        lines.append(
            f"**Warning: the accepted draws are indistinguishable from the prior** (all "
            f"parameters jointly: KL {_fmt(summary['kl'])}, p = {_fmt(joint_p)} >= {alpha:g}, "
            f"with {n} accepted draws). This release says little about the parameters beyond "
            "what the prior already said: the data, or the noise level, did not inform them, "
            "or too few draws were accepted to see a move. "
            + _remedies(threshold, noise_scale, resample)
        )
    else:
        still = [row["name"] for row in summary["parameters"] if row["p_value"] >= alpha]
        lines.append(
            f"The posterior moved from the prior (all parameters jointly: KL "
            f"{_fmt(summary['kl'])}, p = {_fmt(joint_p)} < {alpha:g})."
            + (
                f" **Not distinguishable from their prior** (p >= {alpha:g}): "
                f"{', '.join(still)}; the data, or the noise level, did not inform "
                f"{'it' if len(still) == 1 else 'them'} detectably. "
                + _remedies(threshold, noise_scale, resample)
                if still
                else ""
            )
        )
    return [*lines, ""]


def summary_figure(
    accepted: np.ndarray, prior: np.ndarray, names: Sequence[str], summary: dict | None
) -> Figure:
    """Per parameter: the prior draws (histogram), the accepted draws (histogram and ticks),
    and the 5 / 50 / 95 % quantiles of both (prior dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    accepted = np.asarray(accepted, dtype=float).reshape(-1, len(names))
    prior = np.asarray(prior, dtype=float).reshape(-1, len(names))
    columns = min(len(names), 4)
    rows = -(-len(names) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.7 * rows), squeeze=False)
    rows_by_name = {row["name"]: row for row in summary["parameters"]} if summary else {}
    for j, (ax, name) in enumerate(zip(axes.ravel(), names, strict=False)):
        low = min(prior[:, j].min(), accepted[:, j].min()) if len(accepted) else prior[:, j].min()
        high = max(prior[:, j].max(), accepted[:, j].max()) if len(accepted) else prior[:, j].max()
        bins = np.linspace(low, high, 30) if high > low else 10
        ax.hist(prior[:, j], bins=bins, density=True, color="0.75", label="prior draws")
        for k, q in enumerate(np.quantile(prior[:, j], QUANTILES)):
            ax.axvline(q, color="0.3", ls="--", lw=0.8, label="prior 5/50/95 %" if k == 0 else None)
        if len(accepted) >= HISTOGRAM_MIN:
            ax.hist(
                accepted[:, j],
                bins=bins,
                density=True,
                alpha=0.6,
                color="C0",
                label="accepted draws",
            )
        elif len(accepted):  # few draws: one tick each, over the lower third of the panel
            for k, value in enumerate(accepted[:, j]):
                ax.axvline(
                    value, ymax=0.33, color="C0", lw=1.2, label="accepted draws" if k == 0 else None
                )
        for k, q in enumerate(np.quantile(accepted[:, j], QUANTILES) if len(accepted) else ()):
            ax.axvline(q, color="C3", lw=1.0, label="accepted 5/50/95 %" if k == 0 else None)
        row = rows_by_name.get(name)
        title = name
        if row and row["sd_ratio"] is not None:
            title += f"\nspread ratio {_fmt(row['sd_ratio'])}, p {_fmt(row['p_value'])}"
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(names) :]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=6)
    figure.suptitle("accepted draws against the prior", fontsize=9)
    figure.tight_layout()
    return figure


def _remedies(threshold: float, noise_scale: float, resample: bool) -> str:
    factor = "2c" if resample else "(c + 1)"
    return (
        f"The distance noise has scale 2b = {_fmt(2 * noise_scale)} against the threshold "
        f"{_fmt(threshold)}"
        + (
            " (of the same order: draws whose MMD lies within a few b of the threshold are "
            "accepted or refused largely by the noise)"
            if 2 * noise_scale >= 0.5 * threshold
            else ""
        )
        + f". To let the data speak: more epsilon or fewer samples c (b = {factor} / "
        "(epsilon_svt n_hat)); a smaller --threshold with more --n-draws so that c draws "
        "still pass (`dprelease infer abcdp-plan` shows the noise and flip probability for a "
        "guessed row count); with few accepted draws only large moves are visible."
    )


def _fmt(value: float | None) -> str:
    """Three significant digits; n/a for a missing value."""
    if value is None:
        return "n/a"
    return f"{value:.3g}"
