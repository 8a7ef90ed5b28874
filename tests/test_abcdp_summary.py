"""The ABCDP posterior against the prior (dprelease/inference/abcdp/summary.py): quantiles,
spread ratio, shift, the permutation test and the warning rule. Every random input is
seeded (public post-processing), so the outcomes are fixed."""

from __future__ import annotations

import numpy as np
import pytest

from dprelease.inference.abcdp import summary as summary_module
from dprelease.inference.abcdp.summary import kl_test, summarise, summary_figure, summary_lines

NAMES = ["a", "b"]


def _prior(rng, size):
    return np.column_stack([rng.uniform(5, 30, size), rng.uniform(0, 1, size)])


def _lines(summary):
    return "\n".join(summary_lines(summary, threshold=0.07, noise_scale=0.02, resample=False))


def test_statistic_is_the_kl_of_fitted_normals_and_p_a_permutation_p_value():
    rng = np.random.default_rng(0)
    x, y = rng.normal(0.5, 0.4, size=(12, 3)), rng.normal(size=(800, 3))
    kl, p = kl_test(x, y, np.random.default_rng(1))
    ratio = x.std(axis=0, ddof=1) / y.std(axis=0, ddof=1)
    shift = (x.mean(axis=0) - y.mean(axis=0)) / y.std(axis=0, ddof=1)
    assert kl == pytest.approx(float((-np.log(ratio) + (ratio**2 + shift**2) / 2 - 0.5).sum()))
    assert p == pytest.approx(1 / 1000) and p * 1000 == pytest.approx(round(p * 1000))


def test_prior_draws_are_rarely_called_moved(monkeypatch):
    """A permutation test: P(p <= 0.05) <= 0.05 when the accepted draws are prior draws.
    100 seeded null replicates (10 draws against 1000, two parameters): at most 12 rejections
    (a correct test exceeds that with probability 0.002 under Binomial(100, 0.05))."""
    monkeypatch.setattr(summary_module, "PERMUTATIONS", 199)
    rng = np.random.default_rng(2)
    rejections = sum(
        kl_test(_prior(rng, 10), _prior(rng, 1000), rng)[1] <= 0.05 for _ in range(100)
    )
    assert rejections <= 12


def test_a_concentrated_parameter_is_detected_and_the_others_named():
    rng = np.random.default_rng(3)
    prior = _prior(rng, 1000)
    accepted = np.column_stack([rng.normal(12, 1.0, 10), rng.uniform(0, 1, 10)])  # a: sd 1/7.2
    result = summarise(accepted, prior, NAMES, np.random.default_rng(4))
    a, b = result["parameters"]
    assert a["sd_ratio"] < 0.3 and a["p_value"] < 0.01 and b["p_value"] >= 0.05
    assert a["mean_shift"] == pytest.approx(
        (accepted[:, 0].mean() - prior[:, 0].mean()) / prior[:, 0].std(ddof=1)
    )
    assert a["quantiles"] == pytest.approx(np.quantile(accepted[:, 0], [0.05, 0.5, 0.95]))
    assert b["prior_quantiles"] == pytest.approx(np.quantile(prior[:, 1], [0.05, 0.5, 0.95]))
    assert result["p_value"] < 0.05 and result["indistinguishable_from_prior"] is False
    text = _lines(result)
    assert "The posterior moved from the prior" in text
    assert "**Not distinguishable from their prior** (p >= 0.05): b;" in text
    assert "| a | 12" in text and "Warning" not in text


def test_accepted_draws_like_the_prior_give_the_warning_and_what_to_change():
    rng = np.random.default_rng(5)
    result = summarise(_prior(rng, 10), _prior(rng, 1000), NAMES, np.random.default_rng(6))
    assert result["indistinguishable_from_prior"] is True
    text = _lines(result)
    assert "**Warning: the accepted draws are indistinguishable from the prior**" in text
    for advice in ("more epsilon or fewer samples c", "a smaller --threshold with more --n-draws"):
        assert advice in text
    assert "2b = 0.04 against the threshold 0.07 (of the same order" in text


def test_one_or_no_accepted_draw():
    rng = np.random.default_rng(7)
    one = summarise(_prior(rng, 1), _prior(rng, 1000), NAMES, rng)
    assert one["p_value"] is None and one["parameters"][0]["sd_ratio"] is None
    assert "One accepted draw: no spread and no test." in _lines(one)
    assert summarise(np.empty((0, 2)), _prior(rng, 1000), NAMES, rng) is None
    assert "No draw was accepted: the posterior is undefined" in _lines(None)


def test_figure_has_one_panel_per_parameter():
    rng = np.random.default_rng(8)
    prior, accepted = _prior(rng, 1000), _prior(rng, 40)
    figure = summary_figure(accepted, prior, NAMES, summarise(accepted, prior, NAMES, rng))
    titles = [ax.get_title() for ax in figure.axes]
    assert titles[0].startswith("a\nspread ratio") and titles[1].startswith("b\nspread ratio")
