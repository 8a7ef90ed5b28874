"""Evaluation harness: metrics on hand-computed inputs, weights of 1, refusals, one tiny grid."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.evaluation import harness
from dprelease.evaluation.harness import EvaluationGrid, evaluate_cell, split
from dprelease.evaluation.metrics import (
    Task,
    beta_mse,
    downstream,
    mean_marginal_tvd,
    tstr,
    wasserstein,
)
from dprelease.evaluation.outputs import check_output_directory
from dprelease.io.stream import load_validated
from dprelease.schema import Schema, load_schema

ROOT = Path(__file__).parent.parent
RNG = np.random.default_rng(0)


@pytest.fixture
def reproducible_cell_noise(monkeypatch, seeded_noise):
    """The harness's DP noise, seeded: these tests check the harness, not a noise draw.

    With OS-entropy noise, about one run in 170 of the breast-cancer cell clipped the
    minority class's noisy count to zero, so the synthetic table had one class and the
    logistic coefficients and ROC-AUC were undefined (NaN): a failure of the draw, not
    of the harness.
    """
    seeds = itertools.count()
    monkeypatch.setattr(harness, "NoiseSource", lambda: seeded_noise(next(seeds)))


def test_wasserstein_hand_computed():
    points = np.array([[0.0], [1.0]])
    assert wasserstein(points, np.ones(2), points, rng=RNG) == pytest.approx(0.0)
    assert wasserstein(points, np.ones(2), np.array([[0.0], [0.0]]), rng=RNG) == pytest.approx(0.5)
    # weights 3:1 put mass 3/4 at 0; the real rows have 1/2 there: move 1/4 by distance 1.
    assert wasserstein(points, np.array([3.0, 1.0]), points, rng=RNG) == pytest.approx(0.25)
    # 2-D Euclidean ground cost: (0,0) -> (0.3, 0.4) is 0.5.
    assert wasserstein(
        np.array([[0.0, 0.0]]), np.ones(1), np.array([[0.3, 0.4]]), rng=RNG
    ) == pytest.approx(0.5)


def test_beta_mse_hand_computed_and_weights():
    x = np.linspace(0, 1, 50)
    task = Task("regression", slice(1, 2))
    synthetic = np.column_stack([x, 1 + 2 * x])  # intercept 1, slope 2
    real = np.column_stack([x, 3 * x])  # intercept 0, slope 3
    assert beta_mse(synthetic, np.ones(50), real, task) == pytest.approx(1.0)
    # Weighting that ignores the corrupted half recovers the real coefficients exactly.
    mixed = np.vstack([real, np.column_stack([x, 1 + 2 * x])])
    weights = np.r_[np.ones(50), np.zeros(50)]
    assert beta_mse(mixed, weights, real, task) == pytest.approx(0.0, abs=1e-20)


def test_standardized_beta_mse_is_in_real_standard_deviations():
    x = np.linspace(0, 1, 50)
    task = Task("regression", slice(1, 2))
    real = np.column_stack([x, 3 * x])
    # Rescaling the feature by 10 on both sides leaves the standardized coefficients alone.
    scaled = np.column_stack([10 * x, 3 * x])
    assert beta_mse(real, np.ones(50), real, task, standardize=True) == pytest.approx(0.0)
    assert beta_mse(scaled, np.ones(50), scaled, task, standardize=True) == pytest.approx(0.0)
    # Half the real slope through the same mean (x = 0.5, y = 1.5): standardized slopes
    # 0.5 vs 1, intercepts both 0, so the MSE is 0.5^2 / 2.
    half = np.column_stack([x, 0.75 + 1.5 * x])
    assert beta_mse(half, np.ones(50), real, task, standardize=True) == pytest.approx(0.125)


def test_mean_marginal_tvd_hand_computed_and_weights():
    schema = {
        "dataset": "t",
        "budget": {"epsilon": 1, "delta": 0},
        "columns": {
            "a": {"type": "categorical", "categories": ["x", "y"]},
            "b": {"type": "continuous", "min": 0, "max": 10},
        },
    }
    encoder = Encoder(Schema.model_validate(schema))
    real = encoder.encode(pd.DataFrame({"a": ["x", "y"], "b": [0.5, 9.5]}))
    # b lands in the wrong bin for the second row: 1-way TVD of a is 0, of b is 1/2.
    synthetic = encoder.encode(pd.DataFrame({"a": ["x", "y"], "b": [0.5, 5.5]}))
    ones = np.ones(2)
    assert mean_marginal_tvd(encoder, real, synthetic, ones, order=1) == pytest.approx(0.25)
    assert mean_marginal_tvd(encoder, real, synthetic, ones, order=2) == pytest.approx(0.5)
    # Weight 0 on the wrong row: only (x, bin 0) is left, half the real mass misses.
    weights = np.array([1.0, 0.0])
    assert mean_marginal_tvd(encoder, real, synthetic, weights, order=2) == pytest.approx(0.5)
    assert mean_marginal_tvd(encoder, real, real, ones, order=2) == pytest.approx(0.0)


def test_tstr_learns_a_signal_and_fails_on_noise():
    rng = np.random.default_rng(0)
    x = rng.random((400, 1))
    task = Task("classification", slice(1, 3))
    label = (x[:, 0] > 0.5).astype(int)
    rows = np.column_stack([x, 1 - label, label])
    shuffled = np.column_stack([x, rows[rng.permutation(400), 1:]])
    assert tstr(rows[:200], np.ones(200), rows[200:], task, seed=0) > 0.95
    assert tstr(shuffled[:200], np.ones(200), rows[200:], task, seed=0) < 0.75


def test_weights_of_one_reproduce_the_unweighted_metrics():
    import ot
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    rng = np.random.default_rng(1)
    features = rng.random((200, 3))
    labels = (features[:, 0] + 0.3 * rng.random(200) > 0.6).astype(float)
    synthetic = np.column_stack([features, 1 - labels, labels])
    real_features = rng.random((100, 3))
    real_labels = (real_features[:, 0] > 0.6).astype(float)
    real = np.column_stack([real_features, 1 - real_labels, real_labels])
    task = Task("classification", slice(3, 5))
    ones = np.ones(200)
    plain_wst = ot.emd2(
        np.full(200, 1 / 200), np.full(100, 1 / 100), ot.dist(synthetic, real, metric="euclidean")
    )
    assert wasserstein(synthetic, ones, real, rng=RNG) == pytest.approx(plain_wst, rel=1e-12)
    fitted = [
        LogisticRegression(max_iter=2000).fit(f, y)
        for f, y in ((features, labels), (real_features, real_labels))
    ]
    coefficients = [np.r_[m.intercept_, m.coef_.ravel()] for m in fitted]
    expected = np.mean((coefficients[0] - coefficients[1]) ** 2)
    assert beta_mse(synthetic, ones, real, task) == pytest.approx(expected, rel=1e-6)
    from sklearn.metrics import roc_auc_score

    model = MLPClassifier((32, 32), max_iter=300, random_state=4).fit(features, labels)
    plain_auc = roc_auc_score(real_labels, model.predict_proba(real_features)[:, 1])
    assert downstream(synthetic, ones, real, task, seed=4) == pytest.approx(plain_auc, rel=1e-9)


def test_refuses_to_write_into_a_release_directory(tmp_path):
    release = tmp_path / "releases" / "data" / "r1"
    release.mkdir(parents=True)
    (release / "manifest.json").write_text("{}")
    with pytest.raises(InputError, match="refusing to write an evaluation into a release"):
        check_output_directory(release)
    with pytest.raises(InputError, match="refusing"):
        check_output_directory(release / "evaluation")
    (tmp_path / "releases" / "ledger.sqlite").write_text("")
    with pytest.raises(InputError, match="ledger.sqlite"):
        check_output_directory(tmp_path / "releases" / "evals")
    assert check_output_directory(tmp_path / "evaluations") == (tmp_path / "evaluations").resolve()


def test_split_is_disjoint_and_seeded():
    table = pd.DataFrame({"a": range(100)})
    train, test = split(table, 0.2, seed=3)
    assert len(test) == 20 and len(train) == 80
    assert set(train["a"]).isdisjoint(test["a"])
    assert split(table, 0.2, seed=3)[1]["a"].tolist() == test["a"].tolist()


def test_one_cell_on_breast_cancer(reproducible_cell_noise):
    schema = load_schema(ROOT / "data" / "breast_cancer.yaml")
    table = load_validated(ROOT / "data" / "breast_cancer.csv", schema)
    train, test = split(table, 0.2)
    encoder = Encoder(schema)
    grid = EvaluationGrid(
        weights=("none", "logreg", "beta_debiased"), epsilons=(1.0,), seeds=1, n_synthetic=400
    )
    rows = evaluate_cell(train, encoder.encode(test), schema, grid, "marginals", 1.0, 0)
    assert [row["weights"] for row in rows] == ["none", "logreg", "beta_debiased"]
    assert [row["private"] for row in rows] == [True, False, True]
    for row in rows:
        assert np.isfinite([row["wst"], row["beta_mse"], row["downstream"]]).all()
        assert 0 < row["downstream"] <= 1 and row["downstream_metric"] == "roc_auc"
    assert rows[0]["k_hat"] == -np.inf and rows[0]["ess_fraction"] == pytest.approx(1.0)


@pytest.mark.prefect
def test_evaluate_cli_writes_labelled_outputs(prefect_server, tmp_path):
    """Two cells (seeds) of two weight methods through the CLI and the flow, on a table of
    three columns (what a cell computes is checked on the bundled tables above)."""
    import yaml
    from typer.testing import CliRunner

    from dprelease.cli.app import app

    rng = np.random.default_rng(7)
    x = rng.random(100)
    label = np.where(x + 0.3 * rng.random(100) > 0.6, "b", "a")
    table = pd.DataFrame({"x": x, "k": rng.integers(0, 4, 100), "y": label})
    table.to_csv(tmp_path / "tiny.csv", index=False)
    schema = {
        "dataset": "tiny",
        "budget": {"epsilon": 50.0, "delta": 1e-4},
        "max_rows": 100,
        "target": "y",
        "columns": {
            "x": {"type": "continuous", "min": 0, "max": 1},
            "k": {"type": "integer", "min": 0, "max": 3},
            "y": {"type": "categorical", "categories": ["a", "b"]},
        },
    }
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(schema, sort_keys=False))
    out = tmp_path / "evaluations"
    result = CliRunner().invoke(
        app,
        [
            "evaluate",
            str(tmp_path / "tiny.csv"),
            "--schema",
            str(tmp_path / "tiny.yaml"),
            "--weights",
            "none,beta_debiased",
            "--epsilons",
            "2",
            "--seeds",
            "2",
            "--n-synthetic",
            "300",
            "--out",
            str(out),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    results = pq.read_table(out / "results.parquet")
    assert b"not for publication" in results.schema.metadata[b"dprelease.notice"]
    frame = results.to_pandas()
    assert len(frame) == 2 * 2 and set(frame["weights"]) == {"none", "beta_debiased"}
    summary = (out / "summary.md").read_text()
    assert "not for publication" in summary and "**" in summary
    assert "## pgm, epsilon = 2" in summary
    assert (out / "figure1_toy.png").exists() and (out / "box_wst.png").exists()
    assert not (tmp_path / "releases").exists()


def test_downstream_regression_is_the_weighted_mlp_regressor_mse():
    """A numeric target: an MLP regressor (hidden layers passed by name, not as `loss`)."""
    from sklearn.metrics import mean_squared_error
    from sklearn.neural_network import MLPRegressor

    rng = np.random.default_rng(5)
    features = rng.random((120, 2))
    synthetic = np.column_stack([features, 0.2 + 0.5 * features[:, 0]])
    real = synthetic[:40] + np.r_[0.0, 0.0, 0.05]
    task = Task("regression", slice(2, 3))
    model = MLPRegressor(hidden_layer_sizes=(8,), max_iter=300, random_state=2)
    model.fit(features, synthetic[:, 2])
    expected = mean_squared_error(real[:, 2], model.predict(real[:, :2]))
    got = downstream(synthetic, np.ones(120), real, task, seed=2, hidden=(8,))
    assert got == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("target", "kind", "metric"),
    [("wage", "regression", "mse"), ("high_earner", "classification", "roc_auc")],
)
def test_one_cell_on_a_numeric_and_a_categorical_target(
    target, kind, metric, reproducible_cell_noise
):
    from dprelease.datasets import census_like
    from dprelease.evaluation.harness import task_for
    from dprelease.schema import Schema

    schema = load_schema(ROOT / "data" / "census.yaml")
    schema = Schema.model_validate({**schema.public_dict(), "target": target, "max_rows": 400})
    encoder = Encoder(schema)
    task = task_for(schema, encoder)
    (column,) = [c for c in encoder.columns if c.name == target]
    assert task.kind == kind and task.target == slice(column.start, column.stop)
    train, test = split(census_like(300, seed=4), 0.25)
    grid = EvaluationGrid(
        weights=("none", "beta_debiased", "calibration"),
        epsilons=(2.0,),
        seeds=1,
        n_synthetic=300,
        wst_rows=300,
    )
    rows = evaluate_cell(train, encoder.encode(test), schema, grid, "marginals", 2.0, 0)
    assert [row["weights"] for row in rows] == ["none", "beta_debiased", "calibration"]
    for row in rows:
        assert row["downstream_metric"] == metric
        assert np.isfinite([row["wst"], row["beta_mse"], row["downstream"]]).all()
        # MSE of a label scaled to [0, 1] is at most 1; ROC-AUC lies in [0, 1].
        assert 0 <= row["downstream"] <= 1


def test_the_toy_figure_runs_the_calibration_weights(tmp_path):
    # `dprelease evaluate` draws it after the grid with the grid's methods; `calibration` (in
    # the default grid) needs the toy's public schema (without it: "method 'calibration'
    # needs option encoder="). The other methods take no schema (the neural ones cost ~20 s
    # here, so they are left to the CLI test above).
    from dprelease.evaluation.outputs import toy_figure

    assert toy_figure(tmp_path, ("none", "beta_debiased", "calibration"), 1.0).is_file()


def test_each_weight_methods_release_fits_the_cap_on_its_own(reproducible_cell_noise):
    """The grid's delta defaults to each release's own default (the cap's delta in proportion
    to epsilon): a fixed 1e-5 would refuse every cell of a dataset capped at delta 1e-6.
    And each weight method's release gets its own throwaway ledger: on one shared ledger,
    three releases at epsilon 1 would exceed a cap of 2.5."""
    from dprelease.datasets import census_like
    from dprelease.schema import Schema

    raw = load_schema(ROOT / "data" / "census.yaml").public_dict()
    schema = Schema.model_validate(raw | {"budget": {"epsilon": 2.5, "delta": 1e-6}})
    train, test = split(census_like(300, seed=4), 0.25)
    methods = ("none", "calibration", "beta_debiased")
    grid = EvaluationGrid(weights=methods, epsilons=(1.0,), seeds=1, n_synthetic=300)
    rows = evaluate_cell(train, Encoder(schema).encode(test), schema, grid, "pgm", 1.0, 0)
    assert tuple(row["weights"] for row in rows) == methods


def test_the_grid_imports_opendp_and_polars_before_its_threads_fit():
    import sys

    EvaluationGrid(generators=("pgm", "mst")).preload()
    assert {"polars", "opendp.prelude", "mbi.estimation"} <= set(sys.modules)
