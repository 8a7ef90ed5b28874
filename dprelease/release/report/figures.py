"""The weights figure of a synthetic release's report (`weights.png`): the released weight
values, the largest weights before and after Pareto smoothing, and PSIS k-hat against its
thresholds. matplotlib is imported lazily."""

from __future__ import annotations

import math

import numpy as np

GOOD_K_HAT = 0.5


def diagnostic_number(value: float | str | None) -> float:
    """Diagnostics store infinities as the strings "inf"/"-inf" (JSON has none)."""
    return float(value) if value is not None else float("nan")


def weights_figure(
    weights: np.ndarray,
    raw_log_weights: np.ndarray,
    smoothed_log_weights: np.ndarray,
    diagnostics: dict,
    temper: float = 1.0,
):  # noqa: ANN201 (matplotlib.figure.Figure; matplotlib is imported lazily)
    """Three panels: the released weight values, the largest weights raw vs Pareto-smoothed
    (same units: the raw ones normalised like the smoothed ones), and k-hat on its scale
    with the 0.5 and sample-size thresholds."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    weights = np.asarray(weights, dtype=float)
    smoothed = np.asarray(smoothed_log_weights, dtype=float)
    tempered = temper * np.asarray(raw_log_weights, dtype=float)
    shift = np.max(smoothed)
    scale = len(smoothed) / np.sum(np.exp(smoothed - shift))
    raw = np.sort(np.exp(tempered - shift) * scale)[::-1]
    tail = max(1, min(int(diagnostics.get("tail_length") or 1), len(raw)))
    # No axis offset ("1e-12+1" on flat weights). Fixed margins that hold the widest labels
    # (tests/test_curator_views.py checks every label is inside): a layout engine would
    # render the figure twice (0.4-0.5 s more per release here).
    with rc_context({"axes.formatter.useoffset": False}):
        figure = Figure(figsize=(13, 3.6))
        figure.subplots_adjust(left=0.055, right=0.99, bottom=0.15, top=0.91, wspace=0.3)
        left, middle, right = figure.subplots(1, 3, width_ratios=[3, 3, 2])
        _weights_panels(left, middle, weights, raw, tail)
        _k_hat_panel(
            right,
            diagnostic_number(diagnostics["k_hat"]),
            diagnostic_number(diagnostics["threshold"]),
        )
    return figure


def _weights_panels(left, middle, weights: np.ndarray, raw: np.ndarray, tail: int) -> None:  # noqa: ANN001
    positive = weights[weights > 0]
    if positive.size and positive.max() / positive.min() > 100:
        bins = np.geomspace(positive.min(), positive.max(), 60)
        left.set_xscale("log")
    elif np.ptp(weights) < 1e-6 * max(1.0, abs(float(weights.mean()))):
        # flat weights (e.g. no weights): one bar at their value on a readable axis
        bins = np.linspace(weights.mean() - 0.5, weights.mean() + 0.5, 60)  # value mid-bin
    else:
        bins = np.linspace(weights.min(), weights.max(), 60)
    left.hist(positive if left.get_xscale() == "log" else weights, bins=bins, color="tab:blue")
    left.axvline(1.0, color="black", linestyle="--", label="mean weight = 1")
    left.set_xlabel("weight")
    left.set_ylabel("synthetic rows")
    left.set_title("Released weights")
    left.legend()
    ranks = np.arange(1, tail + 1)
    middle.plot(ranks, raw[:tail], "o", ms=3, label="raw")
    middle.plot(ranks, np.sort(weights)[::-1][:tail], "-", label="Pareto-smoothed (released)")
    middle.set_xscale("log")
    top = np.concatenate([raw[:tail], np.sort(weights)[::-1][:tail]])
    if top.min() > 0 and top.max() / top.min() > 10:
        middle.set_yscale("log")
    middle.set_xlabel("rank among the largest weights")
    middle.set_ylabel("weight")
    middle.set_title(f"The {tail:,} largest weights")
    middle.legend()


def _k_hat_panel(axis, k_hat: float, threshold: float) -> None:  # noqa: ANN001
    low, high = -0.5, 1.2
    good = min(GOOD_K_HAT, threshold)
    axis.axvspan(low, good, color="tab:green", alpha=0.25, label="good")
    axis.axvspan(good, threshold, color="tab:orange", alpha=0.25, label="ok")
    axis.axvspan(threshold, high, color="tab:red", alpha=0.25, label="unreliable")
    axis.axvline(threshold, color="tab:red", label=f"threshold {threshold:.2f}")
    if math.isnan(k_hat):
        axis.annotate("k-hat n/a", (0.5, 0.5), xycoords="axes fraction", ha="center")
    else:
        # inside the panel by more than the marker's half width, never clipped by its edge
        shown = min(max(k_hat, low + 0.08), high - 0.08)
        axis.plot([shown], [0.5], "kD", ms=9, clip_on=False)
        label = f"k-hat {k_hat:.2f}" if math.isfinite(k_hat) else f"k-hat {k_hat}"
        # the label leans inwards near an edge of the panel, so it is never cut off
        align = "left" if shown < low + 0.35 else "right" if shown > high - 0.35 else "center"
        axis.annotate(label, (shown, 0.5), xytext=(0, 12), textcoords="offset points", ha=align)
    axis.set_xlim(low, high)
    axis.set_ylim(0, 1)
    axis.set_yticks([])
    axis.set_xlabel("PSIS k-hat")
    axis.set_title("Tail of the weights")
    axis.legend(loc="lower left", fontsize="small")
