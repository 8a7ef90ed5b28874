"""An input error of several problems is one `error:` line on stderr, its other problems
indented under it, the most telling problem first."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from dprelease.cli.app import app
from dprelease.datasets import census_like

ROOT = Path(__file__).parent.parent


def test_a_repeated_header_name_is_one_error_line_naming_the_repetition_first(tmp_path):
    schema = yaml.safe_load((ROOT / "data" / "census.yaml").read_text())
    schema["dataset"] = "error-lines"
    schema_path = tmp_path / "schema.yaml"
    schema_path.write_text(yaml.safe_dump(schema, sort_keys=False))
    frame = census_like(50, seed=1)
    header = ",".join("age" if name == "wage" else name for name in frame.columns)
    table = tmp_path / "repeated.csv"  # `age` twice: `wage` is missing as a consequence
    table.write_text(header + "\n" + frame.to_csv(index=False, header=False))
    result = CliRunner().invoke(
        app, ["release", str(table), "--schema", str(schema_path), "--epsilon", "1"]
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert errors == [
        f"error: {table}: duplicate column names in the header: age (each column "
        "needs a distinct name)"
    ]
    details = [line for line in lines if not line.startswith(("error:", "ledger:"))]
    assert details == [f"  {table}: missing columns required by the schema: wage"]
