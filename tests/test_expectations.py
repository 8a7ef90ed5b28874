"""Great Expectations: the public schema as an Expectation Suite, every synthetic release
validated with it (`expectations.json`, the manifest, the report), `dprelease verify
--expectations` on any release, and one error line naming the gx extra when it is missing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from release_fixtures import edit_table, publish_table
from typer.testing import CliRunner

from dprelease.cli.app import app
from dprelease.config import SyntheticConfig
from dprelease.expectations import GX_EXTRA
from dprelease.schema import Schema
from dprelease.verify.release import verify_release

pytest.importorskip("great_expectations")

ROOT = Path(__file__).parent.parent
SCHEMA = Schema.model_validate(
    {
        "dataset": "gx-test",
        "budget": {"epsilon": 50.0, "delta": 1e-4},
        "max_rows": 1000,
        "target": "y",
        "columns": {
            "x": {"type": "continuous", "min": 0, "max": 1},
            "k": {"type": "integer", "min": 0, "max": 3},
            "age": {"type": "continuous", "min": 15, "max": 60, "values": [17.5, 22, 27, 57]},
            "note": {"type": "categorical", "categories": ["p", "q"], "nullable": True},
            "y": {"type": "categorical", "categories": ["a", "b"]},
        },
    }
)
# Runs Python with great_expectations unimportable (as without the gx extra).
WITHOUT_GX = """
import sys
from importlib.abc import MetaPathFinder

class NoGreatExpectations(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "great_expectations" or name.startswith("great_expectations."):
            raise ImportError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoGreatExpectations())
sys.argv = ["dprelease", *sys.argv[1:]]
from dprelease.cli.main import main
main()
"""


def _table(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "x": rng.random(rows),
            "k": rng.integers(0, 4, rows),
            "age": rng.choice([17.5, 22, 27, 57], rows),
            "note": rng.choice(["p", "q", None], rows),
            "y": rng.choice(["a", "b"], rows),
        }
    )


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gx")
    config = SyntheticConfig(epsilon=5.0, delta=1e-6, n_synthetic=2_000, seed=0)
    directory, _ = publish_table(out, SCHEMA, config, _table(800, seed=1))
    return directory


@pytest.fixture
def copy(release, tmp_path) -> Path:
    target = tmp_path / release.name
    shutil.copytree(release, target)
    return target


def _gx_failures(directory: Path) -> set[str]:
    return {c.name for c in verify_release(directory, expectations=True).failed}


def test_the_suite_states_every_rule_of_the_public_schema():
    from dprelease.expectations.suite import INTEGER_TYPES, suite_json

    suite = suite_json(SCHEMA)
    rules = {(e["type"], e["kwargs"].get("column")): e["kwargs"] for e in suite["expectations"]}
    columns = list(SCHEMA.columns)
    assert suite["name"] == "dprelease.gx-test"
    assert rules["expect_table_columns_to_match_set", None]["column_set"] == columns
    assert rules["expect_table_columns_to_match_ordered_list", None]["column_list"] == columns
    assert rules["expect_column_values_to_be_between", "x"] == {
        "column": "x",
        "min_value": 0.0,
        "max_value": 1.0,
    }
    assert rules["expect_column_values_to_be_between", "k"]["max_value"] == 3
    assert rules["expect_column_values_to_be_in_type_list", "k"]["type_list"] == list(INTEGER_TYPES)
    assert rules["expect_column_values_to_be_in_set", "age"]["value_set"] == [17.5, 22, 27, 57]
    assert rules["expect_column_values_to_be_in_set", "y"]["value_set"] == ["a", "b"]
    assert rules["expect_column_values_to_be_in_set", "note"]["value_set"] == ["p", "q"]
    not_null = {column for kind, column in rules if kind == "expect_column_values_to_not_be_null"}
    assert not_null == {"x", "k", "age", "y"}  # `note` is nullable
    assert "public schema" in suite["notes"] and "trust boundary" in suite["notes"]


def test_the_cli_writes_gxs_own_suite_json(tmp_path):
    import great_expectations as gx

    schema = ROOT / "data" / "census.yaml"
    result = CliRunner().invoke(app, ["schema", "export-expectations", str(schema)])
    assert result.exit_code == 0, result.output
    suite = json.loads(result.stdout)
    gx.get_context(mode="ephemeral")
    assert len(gx.ExpectationSuite(**suite).expectations) == len(suite["expectations"]) == 20
    out = tmp_path / "suite.json"
    result = CliRunner().invoke(
        app, ["schema", "export-expectations", str(schema), "--out", str(out)]
    )
    assert result.exit_code == 0 and json.loads(out.read_text()) == suite


def test_a_release_stores_gxs_result_and_the_report_shows_it(release):
    manifest = json.loads((release / "manifest.json").read_text())
    record = json.loads((release / "expectations.json").read_text())
    assert "expectations.json" in manifest["files"]
    summary = manifest["expectations"]
    assert summary["checked"] and summary["success"] and summary["failed"] == []
    assert summary["held"] == summary["expectations"] == len(record["suite"]["expectations"])
    assert record["result"]["success"] and record["suite"]["name"] == "dprelease.gx-test"
    # GX's result without the clock reading of its batch (taken after the real data was read)
    assert "ge_load_time" not in json.dumps(record)
    assert (
        manifest["package_versions"]["great_expectations"] == record["great_expectations_version"]
    )
    report = (release / "report.md").read_text()
    assert "## Great Expectations" in report and "**every expectation holds**" in report
    assert "may be published" in report


def test_the_exported_suite_passes_on_a_release(release):
    result = verify_release(release, expectations=True)
    assert result.passed, result.failed
    gx_checks = [check.name for check in result.checks if check.name.startswith("gx:")]
    assert "gx:expect_column_values_to_be_between(x)" in gx_checks
    assert "gx:expect_column_values_to_be_in_set(age)" in gx_checks
    assert len(gx_checks) == len(
        json.loads((release / "expectations.json").read_text())["outcomes"]
    )


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda frame: frame.assign(x=frame["x"].where(frame.index != 0, 1.5)),
            {"gx:expect_column_values_to_be_between(x)"},
        ),
        (
            lambda frame: frame.assign(y=frame["y"].astype(str).where(frame.index != 0, "c")),
            {"gx:expect_column_values_to_be_in_set(y)"},
        ),
        (
            lambda frame: frame.assign(age=frame["age"].where(frame.index != 0, 20.0)),
            {"gx:expect_column_values_to_be_in_set(age)"},
        ),
        (
            lambda frame: frame.assign(k=frame["k"].astype(float)),
            {"gx:expect_column_values_to_be_in_type_list(k)"},
        ),
        (
            lambda frame: frame.drop(columns=["k"]),
            {
                "gx:expect_table_columns_to_match_set",
                "gx:expect_table_columns_to_match_ordered_list",
                "gx:expect_column_values_to_not_be_null(k)",
                "gx:expect_column_values_to_be_in_type_list(k)",
                "gx:expect_column_values_to_be_between(k)",
            },
        ),
    ],
    ids=["outside-a-bound", "unknown-category", "off-codebook", "not-integer", "missing-column"],
)
def test_the_exported_suite_fails_on_a_tampered_release(copy, edit, expected):
    edit_table(copy / "synthetic.parquet", edit)
    assert {name for name in _gx_failures(copy) if name.startswith("gx:")} == expected


def test_verify_expectations_names_the_failing_expectation_and_exits_1(copy):
    def outside(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.assign(x=frame["x"].where(frame.index != 0, 1.5))

    edit_table(copy / "synthetic.parquet", outside)
    result = CliRunner().invoke(app, ["verify", "--expectations", str(copy)])
    assert result.exit_code == 1
    assert "gx:expect_column_values_to_be_between(x)" in result.stderr


def test_a_posterior_release_has_no_table_for_the_suite(tmp_path):
    from dprelease.verify.expectations import expectation_checks

    (check,) = expectation_checks(tmp_path, {"schema": SCHEMA.public_dict()}, "abcdp")
    assert not check.passed and check.name == "expectations"


def test_column_names_equal_but_for_case_are_refused():
    from dprelease.errors import InputError
    from dprelease.expectations.suite import suite_json

    schema = SCHEMA.public_dict()
    schema["columns"] = {"x": schema["columns"]["x"], "X": schema["columns"]["x"]}
    with pytest.raises(InputError, match="differ only in case"):
        suite_json(schema)


def test_a_missing_column_is_recorded_without_tracebacks_or_clock():
    from dprelease.expectations.suite import expectation_suite
    from dprelease.expectations.validation import validate

    record = validate(_table(50, seed=2).drop(columns=["x"]), expectation_suite(SCHEMA))
    text = json.dumps(record)
    assert not record["success"] and "Traceback" not in text and "ge_load_time" not in text
    (missing,) = [o for o in record["outcomes"] if o["column"] == "x" and not o["success"]][:1]
    assert missing["observed"].startswith("not evaluated:")


def test_without_the_extra_a_release_says_the_check_did_not_run(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "great_expectations", None)  # not importable
    config = SyntheticConfig(epsilon=5.0, delta=1e-6, n_synthetic=1_000, seed=0)
    directory, manifest = publish_table(tmp_path, SCHEMA, config, _table(300, seed=3))
    assert not (directory / "expectations.json").exists()
    assert manifest["expectations"] == {
        "checked": False,
        "reason": f"Great Expectations is not installed: {GX_EXTRA}",
    }
    report = (directory / "report.md").read_text()
    assert f"Not checked: Great Expectations is not installed: {GX_EXTRA}" in report
    assert not verify_release(directory).failed


def test_a_failing_gx_leaves_the_release_written_and_says_why(tmp_path, monkeypatch):
    from dprelease.release.synthetic import expectations

    def failing(table: pd.DataFrame, suite: object) -> dict:
        raise RuntimeError("a value GX might quote")

    monkeypatch.setattr(expectations, "validate", failing)
    config = SyntheticConfig(epsilon=5.0, delta=1e-6, n_synthetic=1_000, seed=0)
    directory, manifest = publish_table(tmp_path, SCHEMA, config, _table(300, seed=4))
    assert not (directory / "expectations.json").exists()
    assert manifest["expectations"] == {
        "checked": False,
        "reason": "Great Expectations failed (RuntimeError)",
    }
    assert not verify_release(directory).failed


@pytest.mark.parametrize(
    "args",
    [["schema", "export-expectations", "data/census.yaml"], ["verify", "--expectations", "."]],
    ids=["export-expectations", "verify"],
)
def test_without_the_extra_the_cli_names_it_in_one_line(args):
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_GX, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: Great Expectations is not installed: {GX_EXTRA}"
    ]


def test_the_artifact_lists_failed_expectations_first():
    """The Prefect UI may show one page of rows at a time: a failure must not hide on the
    second."""
    from dprelease.orchestration.tasks.artifacts import expectation_rows

    def outcome(column: str, success: bool) -> dict:
        rule = "between 0 and 1"
        expectation = "expect_column_values_to_be_between"
        return {
            "success": success,
            "column": column,
            "rule": rule,
            "observed": "",
            "expectation": expectation,
        }

    record = {"outcomes": [outcome("a", True), outcome("b", True), outcome("c", False)]}
    rows = expectation_rows(record)
    assert [(row["column"], row["result"]) for row in rows] == [
        ("c", "FAILED"),
        ("a", "ok"),
        ("b", "ok"),
    ]
