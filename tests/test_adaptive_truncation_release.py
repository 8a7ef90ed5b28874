"""Adaptive-truncation releases: CLI refusals, the bundle and its verification, the flow.

C7's release part: the release states T but never the real row count; the ledger entries
carry (epsilon, delta), the docs/adaptive-truncation.md 6.4 parameters and typed mechanism
descriptions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from leak_checks import mentions_count
from typer.testing import CliRunner

from dprelease.cli.app import app
from dprelease.config import TruncationConfig
from dprelease.datasets import census_like
from dprelease.errors import InputError
from dprelease.inference.truncation.privacy import BELOW_MIN_ROWS, plan_truncation
from dprelease.privacy.ledger import Ledger
from dprelease.release.files import TRANSCRIPT_FILE
from dprelease.release.pipeline import publish_release
from dprelease.release.report.truncation import trajectory_figure, trajectory_series
from dprelease.release.truncation import TRUNCATION_PIPELINE
from dprelease.schema import load_schema
from dprelease.verify.release import verify_release
from dprelease.verify.truncation import truncation_checks

ROOT = Path(__file__).parent.parent
N_REAL = 2345  # a row count that must appear nowhere in a release


@pytest.fixture(scope="module")
def census(tmp_path_factory) -> tuple[Path, Path]:
    """A census-like table of N_REAL rows and its schema with a public min_rows of 2000."""
    directory = tmp_path_factory.mktemp("census")
    table = directory / "census.csv"
    census_like(N_REAL, seed=5).to_csv(table, index=False)
    schema = yaml.safe_load((ROOT / "data" / "census.yaml").read_text())
    schema.update(dataset="census-truncation", min_rows=2000)
    schema_path = directory / "schema.yaml"
    schema_path.write_text(yaml.safe_dump(schema, sort_keys=False))
    return table, schema_path


def invoke(*args: object):  # noqa: ANN201
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--column", "region", "--n-steps", "100"), "'region' is categorical"),
        (("--column", "salary", "--n-steps", "100"), "'salary' is not in the schema"),
        (("--column", "age", "--n-steps", "2001"), "exceeds the schema's public min_rows 2000"),
        (("--column", "capital_gain", "--n-steps", "100"), "'capital_gain' is nullable"),
        (("--column", "age", "--delta", "0"), "needs --delta > 0"),
        (("--column", "age", "--n-steps", "100", "--engine", "latent_smc"), "not validated"),
    ],
)
def test_cli_refuses_before_any_spend(census, tmp_path, extra, message) -> None:
    table, schema = census
    ledger = tmp_path / "ledger.sqlite"
    result = invoke(
        "infer",
        "adaptive-truncation",
        table,
        "--schema",
        schema,
        "--epsilon",
        "1",
        "--ledger",
        f"sqlite:///{ledger}",
        "--out",
        tmp_path / "out",
        *extra,
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()
    if ledger.exists():
        with Ledger(f"sqlite:///{ledger}") as book:
            assert book.entries("census-truncation") == []


def test_design_truncation_command_is_public_and_prints_the_design() -> None:
    result = invoke("infer", "design-truncation", "--epsilon", "5", "--json", "--score", "mu")
    assert result.exit_code == 0, result.output
    design = json.loads(result.output)
    assert (design["a"], design["b"]) == (-0.72, 0.72)
    assert design["fisher"][0][0] == pytest.approx(0.6122, abs=1e-4)
    default = json.loads(invoke("infer", "design-truncation", "--epsilon", "1", "--json").output)
    assert (default["score"], default["a"], default["b"], default["mirrored"]) == (
        "det",
        -0.78,
        -0.72,
        True,
    )
    refused = invoke("infer", "design-truncation", "--epsilon", "-1")
    assert refused.exit_code == 2 and "epsilon must be a positive" in refused.output


def _library_release(census, tmp_path, noise) -> Path:
    """The product's release pipeline without Prefect, with seeded (test-only) noise."""
    table, schema_path = census
    config = TruncationConfig(column="age", epsilon=2.0, n_steps=150, particles=200, seed=3)
    return publish_release(
        TRUNCATION_PIPELINE,
        schema_path,
        config,
        table,
        out_dir=tmp_path / "releases",
        ledger_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        noise=noise,
    )


def test_release_verifies_and_states_t_but_no_row_count(census, tmp_path, seeded_noise) -> None:
    directory = _library_release(census, tmp_path, seeded_noise(8))
    result = verify_release(directory)
    assert result.passed, [c for c in result.checks if not c.passed]
    assert {c.name for c in result.checks} >= {"transcript-noise-scale", "truncation-ledger"}
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["kind"] == "adaptive-truncation" and manifest["n_steps"] == 150
    assert "T = 150 rows processed" in manifest["truncation_statement"]
    condition = "for input tables of at least T = 150 rows"
    assert condition in manifest["truncation_statement"]
    assert condition in manifest["privacy_statement"].split("; this release spent")[0]
    for path in directory.iterdir():
        if path.suffix in (".json", ".md"):
            assert not mentions_count(path.read_text(), N_REAL), path.name
    ledger = pq.read_table(directory / "ledger.parquet").to_pylist()
    (entry,) = ledger
    params = json.loads(entry["params"])
    assert (entry["mechanism"], entry["epsilon"], entry["delta"]) == (
        "adaptive_truncation_laplace",
        2.0,
        0.0,
    )
    assert params["n_steps"] == 150 and params["bounds"] == [17.0, 90.0]
    assert json.loads(entry["description"])["kind"] == "pure_epsilon"
    transcript = pq.read_table(directory / TRANSCRIPT_FILE).to_pandas()
    assert len(transcript) == 150 and (transcript.l >= 17).all() and (transcript.r <= 90).all()
    assert (directory / "trajectory.png").stat().st_size > 0
    report = (directory / "report.md").read_text()
    assert "![posterior trajectory](trajectory.png)" in report
    check = manifest["model_check"]
    assert set(check["parts"]) == {"location", "spread"} and 0 <= check["p_value"] <= 1
    assert check["verdict"] in report and "## Does the normal model describe the column?" in report
    assert "If the column is not normal, mu estimates" in check["verdict"] or not check["fits"]


def test_kind_checks_catch_a_noise_scale_too_small(census, tmp_path, seeded_noise) -> None:
    directory = _library_release(census, tmp_path, seeded_noise(9))
    manifest = json.loads((directory / "manifest.json").read_text())
    path = directory / TRANSCRIPT_FILE
    arrow = pq.read_table(path)
    scales = arrow.column("noise_scale").to_numpy() / np.sqrt(2)  # the reference code's bug
    index = arrow.schema.get_field_index("noise_scale")
    pq.write_table(arrow.set_column(index, "noise_scale", pa.array(scales)), path)
    failed = {c.name for c in truncation_checks(directory, manifest) if not c.passed}
    assert failed == {"transcript-noise-scale"}


@pytest.mark.prefect
def test_cli_release_with_a_dp_count_through_prefect(prefect_server, census, tmp_path) -> None:
    table, schema = census
    ledger_url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    common = ("--schema", schema, "--ledger", ledger_url, "--out", tmp_path / "releases")
    result = invoke(
        "infer",
        "adaptive-truncation",
        table,
        *common,
        "--column",
        "hours",
        "--epsilon",
        "2",
        "--delta",
        "1e-6",
        "--count-epsilon",
        "0.5",
        "--max-steps",
        "80",
        "--particles",
        "200",
        "--on-invalid-rows",
        "drop",
    )
    assert result.exit_code == 0, result.output
    directory = Path(result.stdout.strip().splitlines()[-1])
    assert verify_release(directory).passed
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["n_steps"] == 80 and manifest["t_from"] == "dp_count"
    assert manifest["release_spend"] == {"epsilon": 2.5, "delta": 1e-6}
    assert "not the real row count" in manifest["dp_row_count"]["note"]
    # stderr names the invalid-row policy, as the statement does, then the mechanism
    published = f"published: {manifest['privacy_statement']}"
    assert "invalid input rows were dropped" in published and published in result.stderr
    assert f"mechanism: {manifest['truncation_statement']}" in result.stderr
    with Ledger(ledger_url) as book:
        entries = book.entries("census-truncation")
    # One entry with the joint cost of the count and the transcript.
    assert [(e.mechanism, e.epsilon, e.delta) for e in entries] == [
        ("adaptive_truncation_laplace", 2.5, 1e-6),
    ]
    assert entries[0].params["count"]["scale"] == 2.0
    # A table below the schema's min_rows is refused after reading it, before any spend.
    small = tmp_path / "small.csv"
    census_like(300, seed=6).to_csv(small, index=False)
    refused = invoke(
        "infer",
        "adaptive-truncation",
        small,
        *common,
        "--column",
        "age",
        "--epsilon",
        "1",
        "--n-steps",
        "1000",
    )
    assert refused.exit_code == 2 and BELOW_MIN_ROWS in refused.output
    assert "300" not in refused.output
    with Ledger(ledger_url) as book:
        assert len(book.entries("census-truncation")) == 1


def test_a_nullable_column_releases_the_posterior_of_its_values_present(
    census, tmp_path, seeded_noise
) -> None:
    """capital_gain is missing in about 60 % of the rows: the rows with a missing value never
    reach the mechanism (a missing value would make the noise source raise), T comes from a
    DP count of the rows with a value, the random order is drawn from the noise source over
    those rows only, and the release says its posterior is of the non-missing values."""
    table, schema_path = census
    present = int(pd.read_csv(table).capital_gain.notna().sum())
    assert 0 < present < N_REAL
    sizes: list[int] = []

    class RecordingNoise(seeded_noise):
        def permutation(self, n: int) -> np.ndarray:
            sizes.append(n)
            return super().permutation(n)

    config = TruncationConfig(
        column="capital_gain", epsilon=1.0, count_epsilon=5.0, max_steps=60, particles=100, seed=2
    )
    directory = publish_release(
        TRUNCATION_PIPELINE,
        schema_path,
        config,
        table,
        out_dir=tmp_path / "releases",
        ledger_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        noise=RecordingNoise(12),
    )
    assert sizes == [present]
    assert verify_release(directory).passed
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["t_from"] == "dp_count" and manifest["n_steps"] == 60
    # Laplace scale 1/5: the count is of the rows with a value, not of the table's rows
    assert abs(manifest["dp_row_count"]["value"] - present) < 5
    assert "rows with a value" in manifest["dp_row_count"]["note"]
    statement = manifest["truncation_statement"]
    assert "rows with a value in capital_gain" in statement
    assert "the posterior is of the column's non-missing values" in statement
    assert "non-missing values" in manifest["missing_values"]
    report = (directory / "report.md").read_text()
    assert "posterior of the column's non-missing values" in report
    (entry,) = pq.read_table(directory / "ledger.parquet").to_pylist()
    params = json.loads(entry["params"])
    assert params["missing_values"] == manifest["missing_values"]
    assert params["count"]["counts"] == "rows with a value in the column"
    transcript = pq.read_table(directory / TRANSCRIPT_FILE).to_pandas()
    assert len(transcript) == 60 and np.isfinite(transcript.y).all()


def test_a_nullable_column_takes_t_from_a_count_of_its_rows_with_a_value(census) -> None:
    """The schema's min_rows bounds the table's rows, not the rows with a value: it neither
    fixes T by default nor admits --n-steps for a nullable column; without a delta the plan
    says what a nullable column needs."""
    _, schema_path = census
    schema = load_schema(schema_path)
    assert schema.min_rows == 2000
    default = plan_truncation(schema, "capital_gain", 1.0)
    assert (default.variant, default.n_steps, default.nullable) == ("dp_count", None, True)
    assert default.delta > 0
    assert plan_truncation(schema, "age", 1.0).variant == "min_rows"
    with pytest.raises(InputError, match="'capital_gain' is nullable: --n-steps cannot fix T"):
        plan_truncation(schema, "capital_gain", 1.0, n_steps=100)
    with pytest.raises(InputError, match="'capital_gain' is nullable: the number of rows T"):
        plan_truncation(schema, "capital_gain", 1.0, delta=0.0)


def test_the_trajectory_figure_keeps_sigma_in_the_bounds_range_and_the_mean_on_top() -> None:
    """The first steps under the default prior (E sigma infinite) give sigma posterior means
    of 1e5 and 95 % quantiles of 1e6 on a column bounded in [16, 100]: the figure draws sigma's
    median and 5-95 % band clipped to (max - min)/2 = 42, the largest spread a column in the
    bounds can have, and draws mu's posterior mean above its band and the intervals."""
    trajectory = pd.DataFrame(
        {
            "t": [1, 2, 3, 4, 5],
            "mu_mean": [70.0, 45.0, 40.0, 38.5, 38.0],
            "mu_sd": [60.0, 20.0, 5.0, 2.0, 1.0],
            "mu_q05": [-20.0, 10.0, 32.0, 35.0, 36.4],
            "mu_q50": [68.0, 44.0, 40.0, 38.4, 38.0],
            "mu_q95": [160.0, 80.0, 48.0, 42.0, 39.6],
            "sigma_mean": [1e5, 3e3, 80.0, 13.0, 12.0],
            "sigma_sd": [1e6, 1e4, 500.0, 3.0, 2.0],
            "sigma_q05": [0.01, 1.0, 5.0, 9.0, 10.0],
            "sigma_q50": [0.5, 30.0, 60.0, 12.0, 11.5],
            "sigma_q95": [1e6, 1e4, 300.0, 17.0, 14.0],
            "ess": [900.0, 800.0, 700.0, 600.0, 500.0],
        }
    )
    transcript = pd.DataFrame(
        {
            "t": [1, 2, 3, 4, 5],
            "l": [16.0, 40.0, 30.0, 36.0, 37.0],
            "r": [16.1, 41.0, 33.0, 37.0, 38.0],
        }
    )
    bounds, ceiling = (16.0, 100.0), 42.0
    series = trajectory_series(trajectory, bounds)
    for values in (series["sigma"], *series["sigma_band"]):
        assert ((values > 0) & (values <= ceiling)).all(), values
    np.testing.assert_array_equal(series["mu"], trajectory.mu_mean)
    figure = trajectory_figure(transcript, trajectory, bounds)
    top, bottom = figure.axes
    for line in bottom.lines:
        assert (np.asarray(line.get_ydata(), dtype=float) <= ceiling).all(), line.get_label()
    for band in bottom.collections:
        for path in band.get_paths():
            assert (path.vertices[:, 1] <= ceiling).all()
    (mean,) = [line for line in top.lines if line.get_label() == "posterior mean"]
    others = [*top.collections, *(line for line in top.lines if line is not mean)]
    assert others and all(mean.get_zorder() > artist.get_zorder() for artist in others)
