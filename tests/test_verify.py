"""`dprelease verify`: a real release passes; tampering with any file is caught by name."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import typer
from release_fixtures import build_release, edit_table, failed, manifest_of, rehash, save_manifest
from typer.testing import CliRunner

from dprelease.cli.verify import verify_command
from dprelease.expectations import gx_installed
from dprelease.privacy.accountants import compose_history
from dprelease.privacy.accounting import Cap, PlannedSpend, Spend
from dprelease.release.writer import privacy_statement
from dprelease.verify.release import verify_release

COMMON = {
    "manifest",
    "no-extra-files",
    "ledger",
    "ledger-release-spend",
    "ledger-status",
    "ledger-dataset-total",
    "cap",
    "release-delta",
    "within-cap",
    "privacy-statement",
    "no-row-count",
    "parquet-metadata",
}
SYNTHETIC = {
    "synthetic-columns",
    "synthetic-rows",
    "synthetic-types",
    "synthetic-nulls",
    "synthetic-bounds",
    "synthetic-categories",
    "weights",
    "log-weights",
    "weights-consistent",
    "diagnostics",
}
FILES = {"diagnostics.json", "ledger.parquet", "report.md", "synthetic.parquet", "weights.png"}
if gx_installed():  # Great Expectations' validation of the synthetic table
    FILES.add("expectations.json")


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """The second release of a dataset (so its ledger holds another release's entries)."""
    out = tmp_path_factory.mktemp("verify")
    build_release(out, seed=0)
    return build_release(out, seed=1)


@pytest.fixture
def copy(release, tmp_path) -> Path:
    target = tmp_path / release.name
    shutil.copytree(release, target)
    return target


def edit_synthetic(edit: Callable) -> Callable[[Path], None]:
    return lambda d: edit_table(d / "synthetic.parquet", edit)


def edit_ledger(edit: Callable) -> Callable[[Path], None]:
    return lambda d: edit_table(d / "ledger.parquet", lambda f: edit(f, manifest_of(d)))


def with_value(column: str, value: object, dtype: str | None = None) -> Callable:
    def edit(frame):  # noqa: ANN001, ANN202
        frame[column] = frame[column].astype(dtype or object)
        frame.loc[0, column] = value
        return frame

    return edit


def scaled_weight(renormalise: bool) -> Callable:
    def edit(frame):  # noqa: ANN001, ANN202
        body_row = int(np.argmin(frame["log_weight"].to_numpy()))
        frame.loc[body_row, "weight"] *= 2.0
        if renormalise:
            frame["weight"] /= frame["weight"].mean()
        return frame

    return edit


def swapped_weights(frame):  # noqa: ANN001, ANN201
    order = np.argsort(frame["log_weight"].to_numpy())
    low, high = order[0], order[len(order) // 2]
    weights = frame["weight"].to_numpy().copy()
    weights[[low, high]] = weights[[high, low]]
    return frame.assign(weight=weights)


def this_release(frame, manifest):  # noqa: ANN001, ANN201
    return (frame["release_id"] == manifest["release_id"]).to_numpy()


def more_epsilon(mine: bool) -> Callable:
    def edit(frame, manifest):  # noqa: ANN001, ANN202
        row = np.flatnonzero(this_release(frame, manifest) == mine)[0]
        frame.loc[row, "epsilon"] += 0.25
        return frame

    return edit


def set_status(frame, manifest):  # noqa: ANN001, ANN201
    frame.loc[np.flatnonzero(this_release(frame, manifest))[0], "status"] = "reserved"
    return frame


def drop_past_row(frame, manifest):  # noqa: ANN001, ANN201
    return frame.drop(index=np.flatnonzero(~this_release(frame, manifest))[0])


def edit_manifest(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(directory: Path) -> None:
        manifest = manifest_of(directory)
        edit(manifest)
        save_manifest(directory, manifest)

    return apply


def restated(manifest: dict) -> None:
    manifest["privacy_statement"] = manifest["privacy_statement"].replace(
        "this release spent epsilon=1,", "this release spent epsilon=0.5,"
    )


def flip_report_byte(directory: Path) -> None:
    data = bytearray((directory / "report.md").read_bytes())
    data[100] ^= 0x01
    (directory / "report.md").write_bytes(bytes(data))


def edit_diagnostics(directory: Path) -> None:
    path = directory / "diagnostics.json"
    diagnostics = json.loads(path.read_text())
    diagnostics["k_hat"] = 0.1
    path.write_text(json.dumps(diagnostics))


# tamper -> (file it changes or None, the checks that fail once the hashes are made to match)
TAMPERS = {
    "value-out-of-bounds": (
        edit_synthetic(with_value("age", 200, "int64")),
        "synthetic.parquet",
        {"synthetic-bounds"},
    ),
    "unknown-category": (
        edit_synthetic(with_value("region", "atlantis")),
        "synthetic.parquet",
        {"synthetic-categories"},
    ),
    "null-in-required-column": (
        edit_synthetic(with_value("sex", None)),
        "synthetic.parquet",
        {"synthetic-nulls"},
    ),
    "integer-as-float": (
        edit_synthetic(lambda f: f.assign(age=f["age"].astype(float))),
        "synthetic.parquet",
        {"synthetic-types"},
    ),
    "column-dropped": (
        edit_synthetic(lambda f: f.drop(columns="hours")),
        "synthetic.parquet",
        {"synthetic-columns"},
    ),
    "weight-changed": (
        edit_synthetic(scaled_weight(renormalise=False)),
        "synthetic.parquet",
        {"weights", "weights-consistent", "diagnostics"},
    ),
    "weight-changed-and-renormalised": (
        edit_synthetic(scaled_weight(renormalise=True)),
        "synthetic.parquet",
        {"weights-consistent", "diagnostics"},
    ),
    "weights-swapped": (
        edit_synthetic(swapped_weights),
        "synthetic.parquet",
        {"weights-consistent"},
    ),
    "ledger-epsilon-of-this-release": (
        edit_ledger(more_epsilon(mine=True)),
        "ledger.parquet",
        {"ledger-release-spend", "ledger-dataset-total"},
    ),
    "ledger-epsilon-of-a-past-release": (
        edit_ledger(more_epsilon(mine=False)),
        "ledger.parquet",
        {"ledger-dataset-total"},
    ),
    "ledger-entry-not-spent": (edit_ledger(set_status), "ledger.parquet", {"ledger-status"}),
    "ledger-row-deleted": (edit_ledger(drop_past_row), "ledger.parquet", {"ledger-dataset-total"}),
    "diagnostics-edited": (edit_diagnostics, "diagnostics.json", {"diagnostics"}),
    "report-byte": (flip_report_byte, "report.md", set()),
    "manifest-statement": (
        edit_manifest(restated),
        None,
        {"privacy-statement", "parquet-metadata"},
    ),
    "manifest-release-spend": (
        edit_manifest(lambda m: m["release_spend"].update(epsilon=0.5)),
        None,
        {"ledger-release-spend", "privacy-statement"},
    ),
    "manifest-cap": (
        edit_manifest(lambda m: m["cap"].update(epsilon=1.5)),
        None,
        {"cap", "within-cap", "privacy-statement"},
    ),
}


def test_a_real_release_passes_every_check(release):
    result = verify_release(release)
    assert result.passed, result.failed
    assert result.kind == "synthetic" and result.release_id == release.name
    assert {c.name for c in result.checks} == COMMON | SYNTHETIC | {f"sha256:{f}" for f in FILES}
    digest = hashlib.sha256((release / "manifest.json").read_bytes()).hexdigest()
    assert result.manifest_sha256 == digest


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_tampering_is_caught_by_the_hashes(copy, case):
    tamper, changed, _ = TAMPERS[case]
    tamper(copy)
    names = failed(copy)
    assert names, case
    if changed is not None:
        assert f"sha256:{changed}" in names


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_tampering_with_matching_hashes_is_caught_by_content(copy, case):
    tamper, changed, expected = TAMPERS[case]
    tamper(copy)
    rehash(copy)
    if changed == "report.md":  # the report is only protected by its hash
        assert failed(copy) == set()
        return
    assert failed(copy) == expected


def test_extra_and_missing_files(copy):
    (copy / "notes.txt").write_text("not part of the release")
    (copy / "weights.png").unlink()
    result = verify_release(copy)
    assert {c.name for c in result.failed} == {"no-extra-files", "sha256:weights.png"}
    reasons = {c.name: c.reason for c in result.failed}
    assert "notes.txt" in reasons["no-extra-files"]
    assert "missing" in reasons["sha256:weights.png"]


def test_manifest_paths_outside_the_release_are_refused(copy):
    edit_manifest(lambda m: m["files"].update({"../outside": "0" * 64}))(copy)
    assert failed(copy) == {"sha256:../outside"}


def test_an_unreadable_manifest_fails_alone(copy):
    (copy / "manifest.json").write_text("{not json")
    result = verify_release(copy)
    assert [c.name for c in result.checks] == ["manifest"] and not result.passed


def test_a_release_from_before_kinds_is_synthetic(copy):
    edit_manifest(lambda m: m.pop("kind"))(copy)
    table = pq.read_table(copy / "synthetic.parquet")
    metadata = {k: v for k, v in table.schema.metadata.items() if k != b"dprelease.kind"}
    pq.write_table(table.replace_schema_metadata(metadata), copy / "synthetic.parquet")
    rehash(copy)
    result = verify_release(copy)
    assert result.passed and result.kind == "synthetic"


def test_an_unknown_kind_fails_by_name(copy):
    edit_manifest(lambda m: m.update(kind="nonsense"))(copy)
    result = verify_release(copy)
    reasons = {c.name: c.reason for c in result.failed}
    assert "no checks for release kind 'nonsense'" in reasons["nonsense-checks"]


def restate(directory: Path, *, cap: Spend, accountant: str, tight: Spend | None) -> None:
    """Rewrite a release consistently as if its dataset had another cap and accountant."""
    manifest = manifest_of(directory)
    manifest["cap"] = manifest["schema"]["budget"] = {"epsilon": cap.epsilon, "delta": cap.delta}
    manifest["accountant"] = accountant
    manifest.pop("accountant_total", None)
    if tight is not None:
        manifest["accountant_total"] = {"epsilon": tight.epsilon, "delta": tight.delta}
    manifest["privacy_statement"] = privacy_statement(
        Spend(**manifest["release_spend"]),
        Spend(**manifest["dataset_total"]),
        cap,
        accountant,
        accountant_total=tight,
    )
    table = pq.read_table(directory / "synthetic.parquet")
    metadata = {
        **table.schema.metadata,
        b"dprelease.privacy_statement": manifest["privacy_statement"].encode(),
    }
    pq.write_table(table.replace_schema_metadata(metadata), directory / "synthetic.parquet")
    save_manifest(directory, manifest)
    rehash(directory)


def rdp_total(directory: Path, cap: Spend) -> Spend:
    """The Rényi filter's total of the release's ledger, as the ledger computes it."""
    rows = pq.read_table(directory / "ledger.parquet").to_pylist()
    for row in rows:
        row["description"] = json.loads(row["description"])
    entries = [PlannedSpend("m", r["epsilon"], r["delta"], {}, r["description"]) for r in rows]
    return compose_history(entries, Cap(cap.epsilon, cap.delta, "rdp"), "rdp").enforced


def test_the_enforcing_accountants_total_is_recomputed_from_the_ledger(copy):
    """rdp: the manifest's total must be the Rényi filter's on the ledger's typed entries, and
    that total (never a PLD figure) must fit the cap; a basic sum above the cap is fine."""
    cap = Spend(1.95, 1e-5)  # below the basic sum of 2
    tight = rdp_total(copy, cap)
    assert tight.epsilon < 1.95
    restate(copy, cap=cap, accountant="rdp", tight=tight)
    assert failed(copy) == set()
    restate(copy, cap=cap, accountant="basic", tight=None)
    assert failed(copy) == {"within-cap"}
    restate(copy, cap=cap, accountant="rdp", tight=Spend(tight.epsilon - 0.2, 1e-5))
    assert failed(copy) == {"accountant"}  # a total that is not the ledger's
    restate(copy, cap=cap, accountant="rdp", tight=None)
    assert failed(copy) == {"accountant"}
    small = Spend(tight.epsilon - 0.1, 1e-5)
    restate(copy, cap=small, accountant="rdp", tight=rdp_total(copy, small))
    assert failed(copy) == {"within-cap"}
    # A release of a dataset recorded as pld is checked with rdp: its
    # stated PLD total is not trusted, the recomputed Rényi total must fit.
    restate(copy, cap=small, accountant="pld", tight=Spend(0.5, 1e-5))
    assert failed(copy) == {"within-cap"}
    restate(copy, cap=cap, accountant="pld", tight=Spend(0.5, 1e-5))
    assert failed(copy) == set()


def test_a_release_delta_above_the_caps_fails(copy):
    """A release whose own delta exceeds the cap's delta fails verification, under pld too
    (e.g. `--delta 0.5` against a cap delta of 1e-5): the release's own delta must fit the
    cap's."""
    release = Spend(**manifest_of(copy)["release_spend"])  # delta 1e-6
    cap = Spend(10.0, release.delta / 2)
    restate(copy, cap=cap, accountant="pld", tight=Spend(1.0, cap.delta))
    assert "release-delta" in failed(copy)
    restate(copy, cap=Spend(10.0, release.delta), accountant="basic", tight=None)
    assert "release-delta" not in failed(copy)


def test_a_tempered_release_with_drop_policy_passes(tmp_path):
    directory = build_release(tmp_path, temper=0.5, on_invalid_rows="drop", n_synthetic=300)
    assert verify_release(directory).passed
    edit_table(directory / "synthetic.parquet", swapped_weights)
    rehash(directory)
    assert failed(directory) == {"weights-consistent"}


def test_a_release_without_weights_passes(tmp_path):
    directory = build_release(tmp_path, weights="none", n_synthetic=300)
    assert verify_release(directory).passed


def test_verifying_imports_nothing_of_the_publishing_side(release):
    code = (
        "import sys; from dprelease.verify.release import verify_release; "
        "assert 'dprelease.verify.synthetic' not in sys.modules; "  # kind modules load lazily
        f"assert verify_release({str(release)!r}).passed; "
        "print(' '.join(sorted(sys.modules)))"
    )
    modules = set(
        subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        ).stdout.split()
    )
    forbidden = {
        "sqlalchemy",
        "prefect",
        "torch",
        "sklearn",
        "matplotlib",
        "dprelease.privacy.ledger.ledger",
        "dprelease.generators",
        "dprelease.weights",
        "dprelease.release.writer",
    }
    assert not forbidden & modules, forbidden & modules


def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("verify")(verify_command)
    app.command("other")(lambda: None)  # two commands: `verify` is a subcommand, as in dprelease
    return app


def test_cli_exit_codes(release, copy, tmp_path):
    runner = CliRunner()
    ok = runner.invoke(cli(), ["verify", str(release)])
    assert ok.exit_code == 0, ok.output
    assert "verified: all" in ok.stdout and "sha256:synthetic.parquet" in ok.stdout
    flip_report_byte(copy)
    bad = runner.invoke(cli(), ["verify", str(copy)])
    assert bad.exit_code == 1
    assert "verification failed: sha256:report.md" in bad.stderr
    assert runner.invoke(cli(), ["verify", str(tmp_path / "nowhere")]).exit_code == 2


@pytest.mark.prefect
def test_a_release_published_by_the_cli_verifies(prefect_server, tmp_path):
    """The real flow's output (not only this module's fixture) passes every check."""
    import yaml
    from release_fixtures import census_schema

    from dprelease.cli.app import app
    from dprelease.datasets import census_like

    table = tmp_path / "census.csv"  # rows enough that the verdict is never "not usable" (exit 5)
    census_like(2000, seed=5).to_csv(table, index=False)
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(census_schema("verify-cli").public_dict(), sort_keys=False))
    out = tmp_path / "releases"
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    arguments = ["release", table, "--schema", schema, "--epsilon", "1", "--out", out]
    arguments += ["--ledger", ledger, "--n-synthetic", "500", "--allow-unreliable-weights"]
    result = CliRunner().invoke(app, [str(a) for a in arguments], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (directory,) = (out / "verify-cli").iterdir()
    verified = verify_release(directory)
    assert verified.passed, verified.failed
    assert CliRunner().invoke(cli(), ["verify", str(directory)]).exit_code == 0


def test_a_cap_delta_above_one_over_max_rows_is_stated_and_verifies(tmp_path):
    """A cap delta above 1 / max_rows is warned about in the manifest and the privacy
    statement (hence the report), and the verifier accepts the statement with it."""
    from release_fixtures import census_schema

    from dprelease.schema import Budget

    schema = census_schema("loose-delta")  # max_rows 3000
    schema = schema.model_copy(update={"budget": Budget(epsilon=3.0, delta=1e-3)})
    directory = build_release(tmp_path, schema=schema, n_synthetic=300)
    manifest = manifest_of(directory)
    (warning,) = manifest["warnings"]
    assert warning.startswith("the cap's delta (0.001) exceeds 1 / max_rows (0.000333333)")
    assert f"warning: {warning}" in manifest["privacy_statement"]
    assert warning in (directory / "report.md").read_text().replace("\n", " ")
    assert verify_release(directory).passed
