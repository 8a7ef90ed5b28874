"""End to end through Prefect (the pytest session's server) and the CLI."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from leak_checks import mentions_count
from typer.testing import CliRunner

from dprelease.cli.app import app
from dprelease.datasets import census_like
from dprelease.expectations import gx_installed
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.privacy.ledger.location import resolve_ledger_url
from dprelease.release.synthetic.plan import DEFAULT_N_SYNTHETIC

ROOT = Path(__file__).parent.parent
N_REAL = 4321  # a row count that appears nowhere else in a release
# Tests about the ledger must not depend on the random PSIS verdict of the weights.
LENIENT = ("--allow-unreliable-weights",)
# Tests about the ledger and the cap: the cheapest generator (one-way marginals) and a small
# synthetic table; what they check does not depend on the generator.
CHEAP = ("--generator", "marginals", "--n-synthetic", "2000", *LENIENT)

pytestmark = pytest.mark.prefect


@pytest.fixture(scope="module")
def census_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("input") / "census.csv"
    census_like(N_REAL, seed=11).to_csv(path, index=False)
    return path


def schema_file(tmp_path: Path, epsilon_cap: float = 3.0, dataset: str = "census-test") -> Path:
    schema = yaml.safe_load((ROOT / "data" / "census.yaml").read_text())
    schema["budget"] = {"epsilon": epsilon_cap, "delta": 1e-5}
    schema["dataset"] = dataset
    schema["max_rows"] = 3000
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(schema, sort_keys=False))
    return path


def invoke(*args: str):  # noqa: ANN201
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def release_args(input_path: Path, schema: Path, out: Path, *extra: str) -> list[str]:
    return [
        "release",
        str(input_path),
        "--schema",
        str(schema),
        "--epsilon",
        "1.0",
        "--delta",
        "1e-6",
        "--out",
        str(out),
        "--seed",
        "3",
        *extra,
    ]


def ledger_json(out: Path | None = None, dataset: str = "census-test") -> dict | None:
    """The dataset's summary in the default ledger (per test: conftest's DPRELEASE_HOME);
    `out` is accepted to show the ledger does not depend on it."""
    with Ledger(resolve_ledger_url()) as ledger:
        return ledger.summary(dataset) if ledger.cap(dataset) else None


def test_release_end_to_end(prefect_server, census_csv, tmp_path):
    out = tmp_path / "releases"
    result = invoke(*release_args(census_csv, schema_file(tmp_path), out, *LENIENT))
    assert result.exit_code == 0, result.output
    release_dir = Path(result.stdout.strip().splitlines()[-1])
    assert release_dir.parent == out / "census-test"
    assert sorted(p.name for p in release_dir.iterdir()) == sorted(
        [
            "diagnostics.json",
            "ledger.parquet",
            "manifest.json",
            "report.md",
            "synthetic.parquet",
            "weights.png",
            *(["expectations.json"] if gx_installed() else []),
        ]
    )
    table = pq.read_table(release_dir / "synthetic.parquet")
    metadata = table.schema.metadata
    assert metadata[b"dprelease.release_id"].decode() == release_dir.name
    assert b"add/remove of one row" in metadata[b"dprelease.privacy_statement"]
    frame = table.to_pandas()
    assert list(frame.columns) == [
        *yaml.safe_load((ROOT / "data" / "census.yaml").read_text())["columns"],
        "weight",
        "log_weight",
    ]
    # max(the schema's public max_rows = 3000, DEFAULT_N_SYNTHETIC), never the real count
    assert len(frame) == DEFAULT_N_SYNTHETIC
    assert str(frame["age"].dtype) == "int64" and str(frame["region"].dtype) == "category"
    assert frame["weight"].mean() == pytest.approx(1.0, rel=1e-9)
    assert np.isfinite(frame["log_weight"]).all()

    manifest = json.loads((release_dir / "manifest.json").read_text())
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((release_dir / name).read_bytes()).hexdigest() == digest
    assert set(manifest["files"]) == {p.name for p in release_dir.iterdir()} - {"manifest.json"}
    assert manifest["release_spend"]["epsilon"] <= 1.0 + 1e-12
    assert manifest["configuration"]["weights"]["method"] == "calibration"
    assert manifest["configuration"]["generator"]["generator"] == "pgm"
    assert "this release spent epsilon=" in manifest["privacy_statement"]
    assert manifest["diagnostics"]["verdict"] in {"good", "ok", "unreliable"}

    ledger = pq.read_table(release_dir / "ledger.parquet").to_pandas()
    # The generator's and the weights' Gaussian mechanisms: one zCDP entry at the release's
    # (epsilon, delta), whose rho is the sum of the components' rhos.
    (entry,) = ledger.itertuples()
    assert entry.mechanism == "zcdp-gaussian-marginals + weights:calibration"
    assert entry.epsilon <= 1.0 and entry.epsilon == pytest.approx(1.0, rel=1e-6)
    params = json.loads(entry.params)
    components = {c["mechanism"]: c["rho"] for c in params["components"]}
    assert set(components) == {"zcdp-gaussian-marginals", "weights:calibration"}
    assert params["rho"] == pytest.approx(sum(components.values()), rel=1e-12)
    assert components["weights:calibration"] == pytest.approx(0.05 * params["rho"], rel=1e-6)
    assert (ledger["status"] == "committed").all()
    assert (ledger["release_id"] == release_dir.name).all()

    # Nothing computed on the real table without privacy: not even its row count.
    for path in release_dir.iterdir():
        if path.suffix in {".json", ".md"}:
            assert not mentions_count(path.read_text(), N_REAL), path.name


def test_releases_accumulate_and_the_cap_refuses_before_reading(
    prefect_server, census_csv, tmp_path
):
    out = tmp_path / "releases"
    schema = schema_file(tmp_path, epsilon_cap=2.5)
    for _ in range(2):
        assert invoke(*release_args(census_csv, schema, out, *CHEAP)).exit_code == 0
    before = ledger_json(out)
    assert before["spent"]["epsilon"] == pytest.approx(2.0, abs=1e-9)
    # The third release would pass the cap: it must stop before reading its input, so a
    # path that does not exist yields exit 3 (budget), not exit 2 (missing file).
    result = invoke(*release_args(tmp_path / "never-read.csv", schema, out))
    assert result.exit_code == 3
    assert "already spent" in result.stderr
    assert ledger_json(out) == before
    assert len(list((out / "census-test").iterdir())) == 2


BAD_INPUTS = {
    "unknown-category": (
        lambda f: f.assign(region="atlantis"),
        "not among the schema's categories",
    ),
    "missing-value": (lambda f: f.assign(sex=None), "does not mark it nullable"),
    "wrong-type": (lambda f: f.assign(hours="many"), "not numbers"),
    "extra-column": (lambda f: f.assign(ssn="x"), "1 column not in the schema"),
    "empty": (lambda f: f.iloc[:0], "has no rows"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exits_2_and_writes_nothing(prefect_server, census_csv, tmp_path, case):
    edit, message = BAD_INPUTS[case]
    bad = tmp_path / "bad.csv"
    edit(pd.read_csv(census_csv)).to_csv(bad, index=False)
    out = tmp_path / "releases"
    result = invoke(*release_args(bad, schema_file(tmp_path), out))
    assert result.exit_code == 2, result.output
    assert message in result.stderr and str(bad) in result.stderr
    assert ledger_json(out) is None
    assert not (out / "census-test").exists()


def test_non_utf8_input_exits_2(prefect_server, tmp_path):
    bad = tmp_path / "latin1.csv"
    census_like(20, seed=1).assign(region="m\xe9xico").to_csv(bad, index=False, encoding="latin-1")
    out = tmp_path / "releases"
    result = invoke(*release_args(bad, schema_file(tmp_path), out))
    assert result.exit_code == 2 and "not UTF-8" in result.stderr
    assert ledger_json(out) is None and not (out / "census-test").exists()


def test_out_of_bounds_reject_exits_2(prefect_server, census_csv, tmp_path):
    bad = tmp_path / "oob.csv"
    pd.read_csv(census_csv).assign(age=150).to_csv(bad, index=False)
    out = tmp_path / "releases"
    result = invoke(*release_args(bad, schema_file(tmp_path), out, "--on-out-of-bounds", "reject"))
    assert result.exit_code == 2 and "outside the schema's bounds" in result.stderr
    assert ledger_json(out) is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--weights", "logreg"], "not differentially private"),
        (["--weights", "mlp"], "not differentially private"),
        (["--weights-fraction", "1.0"], "strictly between 0 and 1"),
        (["--weights", "none", "--weights-fraction", "0.5"], "take no budget"),
        (["--generator", "nope"], "unknown generator"),
    ],
)
def test_refused_configurations_exit_2(prefect_server, census_csv, tmp_path, extra, message):
    out = tmp_path / "releases"
    result = invoke(*release_args(census_csv, schema_file(tmp_path), out, *extra))
    assert result.exit_code == 2 and message in result.stderr
    assert ledger_json(out) is None


def test_ledger_show_json(prefect_server, census_csv, tmp_path):
    out = tmp_path / "releases"
    assert invoke(*release_args(census_csv, schema_file(tmp_path), out, *LENIENT)).exit_code == 0
    result = invoke("ledger", "show", "census-test", "--json")
    assert result.exit_code == 0
    shown = json.loads(result.stdout)
    assert set(shown) == {
        "dataset",
        "cap",
        "accountant",
        "recorded_accountant",
        "spent",
        "by_accountant",
        "reported",
        "last_release",
        "notes",
        "plain_summary",
        "entries",
    }
    assert shown["reported"] == {}  # the PLD figure is reported for rdp datasets only
    assert shown["cap"] == {"epsilon": 3.0, "delta": 1e-5}
    assert len(shown["entries"]) == 1  # generator and weights: one zCDP entry
    table = invoke("ledger", "show", "census-test")
    assert "accountant: basic" in table.stdout and "releases like the last one" in table.stdout
    assert invoke("ledger", "show", "other").exit_code == 2


@pytest.mark.skipif(
    not os.environ.get("DPRELEASE_TEST_POSTGRES_URL"),
    reason="concurrent flow runs need the Prefect test server on PostgreSQL",
)
def test_concurrent_releases_publish_exactly_what_the_cap_admits(
    prefect_server, census_csv, tmp_path
):
    """Four CLI processes at once against a cap that admits two releases. Needs the Prefect
    server on PostgreSQL (DPRELEASE_TEST_POSTGRES_URL, as CI sets it): on Prefect's SQLite
    harness one of the four flow runs now and then fails with "database is locked", which
    says nothing about the ledger (whose own concurrency tests run on SQLite too)."""
    out = tmp_path / "releases"
    schema = schema_file(tmp_path, epsilon_cap=2.0)
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dprelease.cli.app",
                *release_args(census_csv, schema, out, *CHEAP),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    codes = [process.returncode for process in processes]
    report = "\n".join(
        f"--- exit {p.returncode}:\n{err[-3000:]}"
        for p, (_, err) in zip(processes, outputs, strict=True)
    )
    assert sorted(codes) == [0, 0, 3, 3], report
    summary = ledger_json(out)
    assert summary["spent"]["epsilon"] <= 2.0 + 1e-12
    assert len({entry["release_id"] for entry in summary["entries"]}) == 2
    assert len(list((out / "census-test").iterdir())) == 2


def test_unreliable_weights_exit_4_keep_the_spend_and_publish_nothing(
    prefect_server, census_csv, tmp_path, monkeypatch
):
    import dprelease.weights as weight_methods

    def unbounded(estimate):  # noqa: ANN001, ANN202
        # The calibration's certified bound holds for its own weights, not for these.
        return {key: value for key, value in estimate.details.items() if key != "log_weight_max"}

    real_estimate = weight_methods.estimate

    def heavy_tailed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        estimate = real_estimate(*args, **kwargs)
        rng = np.random.default_rng(0)
        log_weights = 3.0 * rng.standard_cauchy(len(estimate.log_weights))
        return dataclasses.replace(estimate, log_weights=log_weights, details=unbounded(estimate))

    monkeypatch.setattr(weight_methods, "estimate", heavy_tailed)
    # The default release streams its real rows (SyntheticPlan.streams): same seam there.
    import dprelease.release.synthetic.pipeline as release_tasks

    real_estimate_streaming = release_tasks.estimate_streaming

    def heavy_tailed_streaming(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        estimate = real_estimate_streaming(*args, **kwargs)
        log_weights = 3.0 * np.random.default_rng(0).standard_cauchy(len(estimate.log_weights))
        return dataclasses.replace(estimate, log_weights=log_weights, details=unbounded(estimate))

    monkeypatch.setattr(release_tasks, "estimate_streaming", heavy_tailed_streaming)
    out = tmp_path / "releases"
    schema = schema_file(tmp_path)
    result = invoke(*release_args(census_csv, schema, out))
    assert result.exit_code == 4
    assert "because the generator misses part of the real distribution" in result.stderr
    assert ledger_json(out)["spent"]["epsilon"] == pytest.approx(1.0)
    assert not (out / "census-test").exists() or not any((out / "census-test").iterdir())
    published = invoke(*release_args(census_csv, schema, out, "--allow-unreliable-weights"))
    assert published.exit_code == 0
    manifest = json.loads((Path(published.stdout.strip()) / "manifest.json").read_text())
    assert manifest["diagnostics"]["verdict"] == "unreliable"
    assert manifest["configuration"]["release"]["allow_unreliable_weights"] is True
    assert "unreliable" in (Path(published.stdout.strip()) / "report.md").read_text()


def test_prefect_yaml_deployments_match_their_flows():
    import importlib

    config = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    assert config["deployments"]
    for deployment in config["deployments"]:
        path, name = deployment["entrypoint"].split(":")
        assert (ROOT / path).exists(), path
        flow = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), name)
        assert deployment["work_pool"]["name"]
        for schedule in deployment.get("schedules", []):  # on-demand deployments have none
            assert schedule["cron"] and schedule["active"]
        parameters = flow.validate_parameters(deployment["parameters"])
        # Scheduled runs must not reveal one row through their existence: every flow takes
        # its settings as one validated `config`.
        assert parameters["config"].on_invalid_rows == "drop"


def test_privbayes_release_through_the_cli(prefect_server, census_csv, tmp_path):
    out = tmp_path / "releases"
    extra = ("--generator", "privbayes", *LENIENT)
    result = invoke(*release_args(census_csv, schema_file(tmp_path), out, *extra))
    assert result.exit_code in (0, 5), result.output  # published; 5: its verdict "not usable"
    manifest = json.loads((Path(result.stdout.strip()) / "manifest.json").read_text())
    # PrivBayes' DP-chosen network may hold tables the noise dominates (1 of 3 seeded runs)
    assert result.exit_code == (5 if manifest["verdict"]["verdict"] == "not usable" else 0)
    assert manifest["configuration"]["generator"]["generator"] == "privbayes"
    spends = manifest["release_spend"]
    assert spends["epsilon"] == pytest.approx(1.0) and spends["delta"] <= 1e-6


def test_dpgan_with_discriminator_weights_spends_only_the_generator(
    prefect_server, census_csv, tmp_path
):
    from dprelease.orchestration.flows.release import release_flow

    out = tmp_path / "releases"
    release_dir = Path(
        release_flow(
            input_path=str(census_csv),
            schema_path=str(schema_file(tmp_path)),
            config={
                "epsilon": 1.0,
                "delta": 1e-6,
                "generator": "dpgan",
                "generator_options": {"steps": 40},
                "weights": "discriminator",
                "n_synthetic": 500,
                "seed": 1,
                "allow_unreliable_weights": True,
            },
            out_dir=str(out),
        )
    )
    ledger = pq.read_table(release_dir / "ledger.parquet").to_pandas()
    assert list(ledger["mechanism"].str.startswith("weights:")) == [False] * len(ledger)
    (entry,) = [json.loads(p) for p in ledger["params"]]
    assert entry["steps"] == 40 and entry["noise_multiplier"] > 0
    assert 0.98 <= ledger["epsilon"].sum() <= 1.0
    frame = pq.read_table(release_dir / "synthetic.parquet").to_pandas()
    weights = json.loads((release_dir / "manifest.json").read_text())["configuration"]["weights"]
    # logit D(x) varies, so the weights are not uniform, unless no tempering of them was
    # reliable (a DP outcome: the 40-step DP-GAN's noise comes from OS entropy), when they
    # are flat and the release says why
    if weights["flat_reason"] is None:
        assert frame["log_weight"].std() > 0 and weights["temper"] > 0
    else:
        assert weights["flat_reason"] == "no tempering gave weights PSIS calls reliable"
        assert (frame["log_weight"] == 0).all() and weights["temper"] == 0
