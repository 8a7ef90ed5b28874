"""Downstream helpers for analysts: weighted mean and SE, weighted fits, GLM effective size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dprelease.analysis import (
    Release,
    WeightedMean,
    WeightedShares,
    design_matrix,
    fit_weighted,
    glm_effective_sample_size,
    weighted_mean,
)
from dprelease.schema import Schema


def test_weighted_mean_and_standard_error_by_hand():
    result = weighted_mean(np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 2.0]))
    # mu = (1 + 2 + 8) / 4 = 2.75; se^2 = sum (w/4)^2 (x - mu)^2
    assert isinstance(result, WeightedMean)
    assert result.mean == pytest.approx(2.75)
    expected = np.sqrt((1 / 16) * 1.75**2 + (1 / 16) * 0.75**2 + (4 / 16) * 1.25**2)
    assert result.standard_error == pytest.approx(expected)
    assert (result.rows_used, result.rows_missing, result.missing_share) == (3, 0, 0.0)
    with pytest.raises(ValueError, match="non-negative"):
        weighted_mean(np.ones(2), np.array([1.0, -1.0]))


def test_weighted_mean_is_calibrated():
    """Importance sampling N(0,1) -> N(1,1): the SE matches the spread over replications."""
    rng = np.random.default_rng(0)
    estimates, errors = [], []
    for _ in range(400):
        x = rng.normal(size=2000)
        w = np.exp(x - 0.5)  # p_target / p_proposal for mean 1 vs 0
        result = weighted_mean(x, w)
        estimates.append(result.mean)
        errors.append(result.standard_error)
    assert abs(np.mean(estimates) - 1.0) < 3 * np.std(estimates) / np.sqrt(400) + 0.01
    assert np.mean(errors) == pytest.approx(np.std(estimates), rel=0.15)


def test_glm_effective_sample_size():
    rng = np.random.default_rng(2)
    x = np.column_stack([np.ones(3000), rng.normal(size=(3000, 2))])
    beta = np.array([0.2, 1.0, -0.5])
    y = rng.random(3000) < 1 / (1 + np.exp(-x @ beta))
    assert glm_effective_sample_size(x, y, np.ones(3000), beta) == pytest.approx(3000)
    uneven = rng.exponential(size=3000)
    ess = glm_effective_sample_size(x, y, uneven, beta)
    assert 0 < ess < 3000
    # Constant weights (any scale) are uniform weights: the full sample size.
    z = x @ beta + rng.normal(size=3000)
    assert glm_effective_sample_size(x, z, np.full(3000, 2.0), beta, "gaussian") == pytest.approx(
        3000
    )


def test_fit_weighted_uses_the_release_weights():
    from sklearn.linear_model import LogisticRegression

    schema = Schema.model_validate(
        {
            "dataset": "a",
            "budget": {"epsilon": 1, "delta": 0},
            "columns": {
                "x": {"type": "continuous", "min": 0, "max": 1},
                "y": {"type": "categorical", "categories": ["no", "yes"]},
            },
        }
    )
    table = pd.DataFrame(
        {
            "x": [0.1, 0.2, 0.8, 0.9, 0.15, 0.85],
            "y": pd.Categorical(["no", "no", "yes", "yes", "yes", "no"], categories=["no", "yes"]),
        }
    )
    flip_weights = np.array([1, 1, 1, 1, 1e-6, 1e-6]) * 6 / 4
    release = Release(table, flip_weights, {"schema": schema.public_dict()})
    model = fit_weighted(LogisticRegression(C=100.0), release, "y")
    assert model.coef_[0, 0] > 0
    assert list(model.feature_names_in_) == ["x"]
    new_rows = design_matrix(schema, pd.DataFrame({"x": [0.05, 0.95]}), "y")
    assert list(model.predict(new_rows)) == ["no", "yes"]
    with pytest.raises(ValueError, match="not a column"):
        fit_weighted(LogisticRegression(), release, "z")


def test_weighted_mean_of_a_nullable_column_says_which_rows_it_used():
    values = pd.Series([1.0, np.nan, 2.0, 4.0, np.nan])
    weights = np.array([1.0, 3.0, 1.0, 2.0, 1.0])
    result = weighted_mean(values, weights)
    # The mean over rows with a value: weights 1, 1, 2 as in the hand-computed case above.
    assert result.mean == pytest.approx(2.75)
    expected = np.sqrt((1 / 16) * 1.75**2 + (1 / 16) * 0.75**2 + (4 / 16) * 1.25**2)
    assert result.standard_error == pytest.approx(expected)
    assert (result.rows_used, result.rows_missing) == (3, 2)
    # Weighted missing share 4/8; its SE: sqrt(sum (w/8)^2 (1{missing} - 1/2)^2).
    assert result.missing_share == pytest.approx(0.5)
    assert result.missing_share_se == pytest.approx(np.sqrt(np.sum((weights / 8) ** 2) / 4))
    # A pandas nullable integer column gives the same answer.
    integers = pd.Series([1, pd.NA, 2, 4, pd.NA], dtype="Int64")
    assert weighted_mean(integers, weights) == result
    with pytest.raises(ValueError, match="no synthetic row has a value"):
        weighted_mean(pd.Series([np.nan, np.nan]), np.ones(2))


def test_weighted_mean_of_a_categorical_column_gives_category_shares():
    values = pd.Series(pd.Categorical(["a", "b", None, "a"], categories=["a", "b", "c"]))
    weights = np.array([1.0, 2.0, 1.0, 4.0])
    result = weighted_mean(values, weights)
    assert isinstance(result, WeightedShares)
    assert list(result.shares.index) == ["a", "b", "c", "<missing>"]
    share = weights / 8
    expected = {"a": 5 / 8, "b": 2 / 8, "c": 0.0, "<missing>": 1 / 8}
    for level, p in expected.items():
        hit = np.array([level == v for v in ["a", "b", "<missing>", "a"]], dtype=float)
        row = result.shares.loc[level]
        assert row["share"] == pytest.approx(p)
        assert row["standard_error"] == pytest.approx(np.sqrt(np.sum(share**2 * (hit - p) ** 2)))
    assert result.shares["share"].sum() == pytest.approx(1.0)
    assert result.shares["rows"].tolist() == [2, 1, 0, 1]
    assert (result.rows_used, result.rows_missing) == (4, 1)
    # Plain strings (no categorical dtype): the observed levels, sorted.
    strings = weighted_mean(pd.Series(["y", "x", "y"]), np.ones(3))
    assert strings.shares["share"].to_dict() == pytest.approx({"x": 1 / 3, "y": 2 / 3})
