"""A curator's first hour: the default command works, every expected error is one clean line
without a traceback and comes back before Prefect starts when the data need not be read, the
ledger does not depend on --out, and invalid rows can be dropped."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dprelease.cli.app import app
from dprelease.config import InputPolicy, SyntheticConfig
from dprelease.datasets import census_like
from dprelease.io.stream import load_validated
from dprelease.privacy.accounting import default_delta
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.privacy.ledger.location import resolve_ledger_url
from dprelease.release.report.common import human
from dprelease.release.synthetic.plan import resolve_defaults
from dprelease.schema import Schema, load_schema

ROOT = Path(__file__).parent.parent


def write_schema(tmp_path: Path, *, cap_epsilon: float = 3.0, cap_delta: float = 1e-5) -> Path:
    schema = yaml.safe_load((ROOT / "data" / "census.yaml").read_text())
    schema["budget"] = {"epsilon": cap_epsilon, "delta": cap_delta}
    schema["dataset"] = "first-hour"
    schema["max_rows"] = 2000
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(schema, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("first-hour") / "census.csv"
    # max_rows rows: even a pure-epsilon release's DP noise is far from "not usable" (exit 5)
    census_like(2000, seed=5).to_csv(path, index=False)
    return path


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dprelease.cli.app", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def one_clean_error(result: subprocess.CompletedProcess, code: int, message: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert result.returncode == code, result.stderr
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    # Besides the error (whose details, e.g. several schema problems, are indented below it)
    # at most the line naming the ledger and, stderr not being a terminal, a line per stage.
    stages = ("ledger:", "release of ")
    others = [line for line in lines if not line.startswith(("error:", " ", *stages))]
    assert not others, result.stderr


# --- library: defaults and row validity ---------------------------------------------------


def test_default_delta_is_the_cap_share_of_the_release():
    schema = load_schema(ROOT / "data" / "census.yaml")  # cap (12, 1e-5)
    assert default_delta(schema.budget, 3.0) == pytest.approx(1e-5 * 3.0 / 12.0, rel=1e-12)
    assert default_delta(schema.budget, 20.0) == pytest.approx(1e-5)  # never above the cap's delta
    config = resolve_defaults(schema, SyntheticConfig(epsilon=1.0))
    assert config.delta > 0 and config.generator and config.weights
    pure = Schema.model_validate(
        {**schema.public_dict(), "budget": {"epsilon": 12.0, "delta": 0.0}}
    )
    config = resolve_defaults(pure, SyntheticConfig(epsilon=1.0))
    # the defaults need no delta: the calibration weights fall back to Laplace noise
    assert (config.delta, config.generator, config.weights) == (0.0, "pgm", "calibration")


def test_drop_judges_each_row_on_its_own_values(tmp_path):
    schema = load_schema(ROOT / "data" / "census.yaml")
    frame = census_like(6, seed=1).astype(object)
    frame.loc[1, "region"] = "atlantis"  # unknown category
    frame.loc[2, "sex"] = None  # missing in a non-nullable column
    frame.loc[3, "hours"] = "many"  # not a number
    frame.loc[4, "age"] = 30.5  # not an integer
    frame.loc[5, "capital_gain"] = None  # nullable: fine
    frame.loc[0, "capital_gain"] = 100.0
    path = tmp_path / "rows.csv"
    frame.to_csv(path, index=False)
    kept = load_validated(path, schema, InputPolicy(on_invalid_rows="drop"))
    assert kept["age"].tolist() == frame["age"].iloc[[0, 5]].tolist()
    assert kept["capital_gain"].isna().tolist() == [False, True]


# --- CLI errors before Prefect starts -----------------------------------------------------


def test_help_lists_choices_defaults_ledger_variable_and_exit_codes():
    output = CliRunner().invoke(app, ["release", "--help"], terminal_width=200).output
    text = " ".join(output.replace("│", " ").split())  # the help as read, across its wrapping
    for needle in (
        "marginals",
        "privbayes",
        "beta_debiased",
        "dp_mlp",
        "0.05 of the release's",
        "calibration",
        "DPRELEASE_LEDGER_URL",
        "Exit codes",
    ):
        assert needle in text, needle


# Runs the `dprelease` command line (`python -m dprelease.cli`, as runpy runs it) once per
# argument list in this fresh interpreter, each with its own stdout and stderr, and prints their
# exit codes and output, and whether Prefect was imported by then, as JSON. An exception the
# command line lets through prints its traceback, as the interpreter would (exit 1).
ONE_PROCESS_PER_CASE = """
import contextlib, io, json, runpy, sys, traceback
results = []
for argv in json.loads(sys.argv[1]):
    sys.argv = ["dprelease", *argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module("dprelease.cli", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
    results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(),
                    "prefect": sorted(m for m in sys.modules if m.split(".")[0] == "prefect")})
print(json.dumps(results))
"""


def test_errors_that_need_no_data_are_one_line_before_prefect(table, tmp_path):
    schema = write_schema(tmp_path)
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes("age,r\xe9gion\n1,2\n".encode("latin-1"))
    extra = tmp_path / "extra.csv"
    pd.read_csv(table).assign(ssn="x").to_csv(extra, index=False)
    broken_schema = tmp_path / "broken.yaml"
    broken_schema.write_text("dataset: x\nbudget: {epsilon: -1, delta: 0}\ncolumns: {}\n")
    release = ("release", "--epsilon", "1")
    cases = [
        ((*release, tmp_path / "missing.csv", "--schema", schema), 2, "input file not found"),
        ((*release, latin1, "--schema", schema), 2, "not UTF-8"),
        ((*release, extra, "--schema", schema), 2, "1 column not in the schema"),
        ((*release, table, "--schema", broken_schema), 2, "invalid schema"),
        ((*release, table, "--schema", schema, "--generator", "nope"), 2, "unknown generator"),
        (
            (*release, table, "--schema", schema, "--weights", "logreg"),
            2,
            "not differentially private",
        ),
        (
            ("release", table, "--schema", schema, "--epsilon", "5"),
            3,
            "refusing before reading the data",
        ),
        (
            ("evaluate", table, "--schema", schema, "--epsilons", "1,5"),
            2,
            "--epsilons 5 exceeds the dataset's cap",
        ),
    ]
    # No Prefect server is reachable at this address: a run that tried to start a flow
    # would fail with another message.
    argvs = json.dumps([[str(arg) for arg in argv] for argv, _, _ in cases])
    process = subprocess.run(
        [sys.executable, "-c", ONE_PROCESS_PER_CASE, argvs],
        capture_output=True,
        text=True,
        env={**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api"},
        timeout=300,
    )
    assert process.returncode == 0 and not process.stderr, process.stderr
    results = json.loads(process.stdout)
    for (argv, code, message), result in zip(cases, results, strict=True):
        one_clean_error(
            subprocess.CompletedProcess(argv, result["code"], result["stdout"], result["stderr"]),
            code,
            message,
        )
        assert not result["stdout"], result["stdout"]
        assert not result["prefect"], (argv, result["prefect"])


# --- CLI through Prefect ------------------------------------------------------------------


def test_only_epsilon_publishes_with_the_documented_default_delta(prefect_server, table, tmp_path):
    schema = write_schema(tmp_path)
    out = tmp_path / "releases"
    result = CliRunner().invoke(
        app,
        [
            "release",
            str(table),
            "--schema",
            str(schema),
            "--epsilon",
            "1",
            "--out",
            str(out),
            "--allow-unreliable-weights",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "first release of dataset 'first-hour' in this ledger" in result.stderr
    manifest = json.loads((Path(result.stdout.strip()) / "manifest.json").read_text())
    used = manifest["configuration"]["release"]["delta"]
    assert used == pytest.approx(1e-5 / 3.0, rel=1e-12)  # the cap's delta x 1/3 of its epsilon
    spent = manifest["release_spend"]["delta"]
    assert 0 < spent <= used * (1 + 1e-9)  # the Laplace marginals spend none of their share
    assert f"delta={spent:.6g}" in manifest["privacy_statement"]
    report = (Path(result.stdout.strip()) / "report.md").read_text()
    assert f"δ = {human(spent)}" in report

    # Another --out, another working directory: the same ledger, the cap keeps counting.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    try:
        again = CliRunner().invoke(
            app,
            [
                "release",
                str(table),
                "--schema",
                str(schema),
                "--epsilon",
                "1",
                "--out",
                str(tmp_path / "other-out"),
                "--n-synthetic",
                "1000",
                "--allow-unreliable-weights",
            ],
        )
    finally:
        os.chdir(ROOT)
    assert again.exit_code == 0, again.output
    assert "first release" not in again.stderr
    with Ledger(resolve_ledger_url()) as ledger:
        assert ledger.spent("first-hour").epsilon == pytest.approx(2.0)


def test_pure_epsilon_cap_publishes_with_only_epsilon(prefect_server, table, tmp_path):
    schema = write_schema(tmp_path, cap_delta=0.0)
    result = CliRunner().invoke(
        app,
        [
            "release",
            str(table),
            "--schema",
            str(schema),
            "--epsilon",
            "1",
            "--out",
            str(tmp_path / "releases"),
            "--n-synthetic",
            "1000",
        ],
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((Path(result.stdout.strip()) / "manifest.json").read_text())
    assert manifest["release_spend"] == {"epsilon": pytest.approx(1.0), "delta": 0.0}
    assert manifest["configuration"]["weights"]["method"] == "calibration"
    assert manifest["configuration"]["weights"]["mechanism"] == "laplace"


def test_error_inside_the_flow_is_one_line(prefect_server, table, tmp_path):
    schema = write_schema(tmp_path)
    bad = tmp_path / "bad.csv"
    frame = pd.read_csv(table)
    frame.loc[3, "region"] = "atlantis"
    frame.to_csv(bad, index=False)
    result = run_cli(
        "release",
        bad,
        "--schema",
        schema,
        "--epsilon",
        "1",
        "--out",
        tmp_path / "r",
        env={"PREFECT_API_URL": prefect_server},
    )
    one_clean_error(result, 2, "not among the schema's categories")


def test_on_invalid_rows_drop_publishes_and_says_so(prefect_server, table, tmp_path):
    schema = write_schema(tmp_path)
    bad = tmp_path / "bad.csv"
    frame = pd.read_csv(table)
    frame.loc[3, "region"] = "atlantis"
    frame.loc[7, "sex"] = None
    frame.to_csv(bad, index=False)
    empty = tmp_path / "empty.csv"
    frame.iloc[:0].to_csv(empty, index=False)
    for path, code in ((bad, 0), (empty, 5)):  # published; an empty table's is not usable
        result = CliRunner().invoke(
            app,
            [
                "release",
                str(path),
                "--schema",
                str(schema),
                "--epsilon",
                "1",
                "--out",
                str(tmp_path / "releases"),
                "--on-invalid-rows",
                "drop",
                "--n-synthetic",
                "1000",
                "--allow-unreliable-weights",
            ],
        )
        assert result.exit_code == code, result.output
        manifest = json.loads((Path(result.stdout.strip()) / "manifest.json").read_text())
        assert (
            "invalid input rows were dropped inside the mechanism"
            in (manifest["privacy_statement"])
        )
        assert manifest["configuration"]["release"]["on_invalid_rows"] == "drop"


def test_opacus_import_cannot_route_prefect_logs_to_the_terminal():
    """Opacus calls logging.basicConfig on import; the CLI claims the root logger first, so no
    stderr handler appears and Prefect's console handler stays the only one. Opacus' module
    is executed again (`importlib.reload`) on a root logger without handlers, as in a fresh
    CLI process: without the claim it installs a stderr handler, after it nothing."""
    import importlib

    import opacus.utils.module_utils

    from dprelease.cli.support import claim_root_logger

    root = logging.getLogger()
    saved = root.handlers[:]
    try:
        root.handlers.clear()
        importlib.reload(opacus.utils.module_utils)
        unclaimed = [type(handler).__name__ for handler in root.handlers]
        root.handlers.clear()
        claim_root_logger()
        importlib.reload(opacus.utils.module_utils)
        claimed = [type(handler).__name__ for handler in root.handlers]
    finally:
        root.handlers[:] = saved
    assert unclaimed == ["StreamHandler"]
    assert claimed == ["NullHandler"]


def test_a_delta_above_the_caps_is_refused_and_a_large_cap_delta_warned(table, tmp_path, capsys):
    """A release delta above the cap's (`--delta 0.5` against a cap delta of 1e-5) is refused
    by the checks that read no data (exit 3, before Prefect); a cap delta above 1 / max_rows draws a
    warning line."""
    from dprelease.cli.support import check_before_run
    from dprelease.errors import BudgetExceededError
    from dprelease.release.synthetic.plan import plan_release

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    config = SyntheticConfig(epsilon=1.0, delta=0.5)
    plan = plan_release(load_schema(write_schema(tmp_path)), config)
    refused = r"release's delta=0\.5 exceeds the cap's delta=1e-05"
    with pytest.raises(BudgetExceededError, match=refused):
        check_before_run(url, plan, table, config, tmp_path / "releases")
    assert BudgetExceededError.exit_code == 3
    loose = load_schema(write_schema(tmp_path, cap_delta=1e-3))  # max_rows 2000: 1/2000 < 1e-3
    config = SyntheticConfig(epsilon=1.0)
    check_before_run(url, plan_release(loose, config), table, config, tmp_path / "releases")
    assert "warning: the cap's delta (0.001) exceeds 1 / max_rows (0.0005)" in (
        capsys.readouterr().err.replace("\n", " ")
    )


# --- CLI after publication ----------------------------------------------------------------


def test_the_verdict_is_shown_and_a_not_usable_release_exits_5(table, tmp_path, monkeypatch):
    """After publication stderr shows the release's verdict as its manifest records it, with
    its first reason, next to the path on stdout; a release published with the verdict "not
    usable" exits 5, so that a scheduled job can tell it from one "usable with caution"
    (exit 0). The flow is replaced by releases built with seeded noise (census-like rows:
    300 at epsilon 0.1, where the noise dominates; 1,537 at epsilon 1)."""
    from release_fixtures import build_release

    from dprelease.cli import support

    built = {
        "not usable": build_release(tmp_path / "poor", epsilon=0.1, n_real=300, weights="none"),
        "usable with caution": build_release(tmp_path / "fair", weights="none"),
    }
    command = [
        "release",
        str(table),
        "--schema",
        str(write_schema(tmp_path)),
        "--epsilon",
        "1",
        "--out",
        str(tmp_path / "out"),
    ]
    for verdict, code in (("not usable", 5), ("usable with caution", 0)):
        directory = built[verdict]
        monkeypatch.setattr(support, "run_flow", lambda *_, directory=directory, **__: directory)
        monkeypatch.setattr(support, "budget_line", lambda *_: "budget: (the stand-in's ledger)")
        result = CliRunner().invoke(app, command)
        assert result.exit_code == code, result.output
        assert result.stdout.strip() == str(directory)
        judged = json.loads((directory / "manifest.json").read_text())["verdict"]
        assert judged["verdict"] == verdict and len(judged["reasons"]) > 1
        line = f"verdict: {verdict} ({judged['reasons'][0]}; report.md has every reason)"
        assert line in result.stderr.splitlines()
    assert '5 published, but the release\'s verdict is "not usable"' in support.EXIT_CODES_HELP
