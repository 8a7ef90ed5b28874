"""`verify_release(path)`: check a release directory without trusting the publisher's tooling.

A recipient runs this on a release they received (`dprelease verify RELEASE_DIR`). It reads
only the files of the release, with pyarrow, json and hashlib (plus numpy for arithmetic);
it never opens the publisher's ledger database, starts Prefect or imports a generator, so its
verdict does not rest on the code that produced the release. The pieces of dprelease it
imports (in `verify/check.py` and `verify/budget.py`) are `dprelease.privacy.accounting` (the
definition of basic composition and of "fits within the cap", numpy-free and
dependency-free) and, for releases of an rdp dataset only, `dprelease.privacy.accountants`
(the Rényi filter's definition), so the verifier and the ledger cannot disagree about what the
cap means, and `dprelease.release.files` (the file names and formats the writer also uses).

Common checks (every kind; a manifest without `kind` is a "synthetic" release, as written
before release kinds existed):

- `manifest`: `manifest.json` is a JSON object with the fields below.
- `sha256:<file>`: the sha256 of every file listed in the manifest's `files` is recomputed;
  `no-extra-files`: the directory holds no file the manifest does not list.
- `ledger`: `ledger.parquet` is readable with the ledger columns, every row is of this
  dataset and under the manifest's neighbouring relation (spends only compose under one).
- `ledger-release-spend`: this release's entries (rows whose `release_id` is the manifest's)
  sum, under basic composition, to the manifest's `release_spend`; `ledger-status`: every one
  of them is `spent`.
- `ledger-dataset-total`: all rows sum to the manifest's `dataset_total`.
- `cap`: the manifest's cap is the schema's budget (the ledger refuses any other cap).
- `release-delta`: this release's delta is at most the cap's delta (no accountant can admit
  more; a release that records more is refused by the ledger).
- `within-cap`: the dataset total fits the cap under the accountant that enforces it: basic
  composition, or, when the manifest names `rdp` (or `pld`, the name such datasets had
  before; they are enforced with rdp), the Rényi filter's total recomputed from the typed
  descriptions in `ledger.parquet` (never the PLD figure, which is reported only).
- `accountant` (rdp and pld only): an rdp manifest states its total (`accountant_total`) and
  it equals the recomputed one; a pld manifest is said to be checked with rdp.
- `parquet-metadata`: every Parquet file but the ledger carries the manifest's release id,
  kind and privacy statement in its Arrow metadata (so a table separated from its manifest
  still says what it is, and a manifest edited away from the tables is caught).
- `privacy-statement`: every `epsilon=`/`delta=` number in the manifest's statement is the
  release spend, the dataset total, the cap, the accountant's total or the reported PLD
  figure (`fixed_in_advance_total`), and the first three
  are all stated, and it names the accountant: a statement edited away from the numbers is
  caught.

Kind-specific checks: `KIND_CHECKS[kind](release_dir, manifest) -> list[Check]`. Registry
design (no import cycles, nothing imported that a release does not need): a kind's check
function lives in a small module that does `from dprelease.verify.release import KIND_CHECKS, Check`
and registers itself at import time (`KIND_CHECKS["abcdp"] = check_abcdp_release`);
this module never imports those modules at its top level. It imports the module named in
`KIND_MODULES[kind]` lazily, the first time a release of that kind is verified. The table is
explicit on purpose: the `kind` string comes from an untrusted manifest and must never be
turned into a module name. `dprelease/verify/synthetic.py` is the "synthetic" kind's module
and the pattern for the others (`dprelease/verify/<kind>.py`, importing no more than this
module does).

With `expectations=True` (`dprelease verify --expectations`, the gx extra): Great
Expectations validates `synthetic.parquet` against the suite derived from the manifest's
public schema, one check per expectation (`verify/expectations.py`, which imports GX and
`dprelease.expectations` only).

What verification does not prove: the manifest is not signed, so someone who rewrites every
file consistently (values, ledger, hashes) passes. Authenticity needs the manifest's sha256
(printed by `dprelease verify`) compared with a digest the publisher announced elsewhere.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dprelease.release.files import LEDGER_FILE, MANIFEST_FILE, SYNTHETIC
from dprelease.verify.budget import ledger_checks, statement_check
from dprelease.verify.check import Check, read_parquet

__all__ = ["KIND_CHECKS", "Check", "VerificationResult", "read_parquet", "verify_release"]

DEFAULT_KIND = SYNTHETIC
REQUIRED_MANIFEST = {
    "release_id": str,
    "dataset": str,
    "files": dict,
    "privacy_statement": str,
    "release_spend": dict,
    "dataset_total": dict,
    "cap": dict,
    "schema": dict,
}


@dataclass(frozen=True)
class VerificationResult:
    """All checks of one release and the overall verdict (`passed`: every check holds)."""

    release_dir: Path
    kind: str | None
    release_id: str | None
    manifest_sha256: str | None
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if not check.passed]


KindChecks = Callable[[Path, dict], list[Check]]
KIND_CHECKS: dict[str, KindChecks] = {}
ROW_COUNT_KEYS = ("n_rows", "row_count", "num_rows", "n_real", "rows")
# kind -> module that registers its checks into KIND_CHECKS when imported.
KIND_MODULES: dict[str, str] = {
    "synthetic": "dprelease.verify.synthetic",
    "adaptive-truncation": "dprelease.verify.truncation",
    "abcdp": "dprelease.verify.abcdp",
}


def verify_release(path: str | Path, *, expectations: bool = False) -> VerificationResult:
    """Run every common check and the checks of the release's kind; with `expectations`,
    Great Expectations' checks too (module docstring)."""
    directory = Path(path)
    manifest, digest, manifest_check = _load_manifest(directory)
    if manifest is None:
        return VerificationResult(directory, None, None, digest, (manifest_check,))
    kind = manifest.get("kind", DEFAULT_KIND)
    checks = [manifest_check, *_file_checks(directory, manifest["files"])]
    checks += _guarded("ledger", lambda: ledger_checks(directory, manifest))
    checks.append(statement_check(manifest))
    checks.append(_no_row_count(manifest))
    checks += _guarded("parquet-metadata", lambda: [_parquet_metadata(directory, manifest)])
    checks += _guarded(f"{kind}-checks", lambda: _kind_checks(kind)(directory, manifest))
    if expectations:
        from dprelease.verify.expectations import expectation_checks

        checks += _guarded("expectations", lambda: expectation_checks(directory, manifest, kind))
    return VerificationResult(directory, kind, manifest["release_id"], digest, tuple(checks))


def _no_row_count(manifest: dict) -> Check:
    """No field of the manifest is named like a real row count (docs/privacy-model.md section 8)."""
    found = []

    def walk(value: object, path: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if str(key).lower() in ROW_COUNT_KEYS:
                    found.append(f"{path}{key}")
                walk(item, f"{path}{key}.")

    walk(manifest, "")
    if found:
        return Check("no-row-count", False, f"row-count fields: {', '.join(found)}")
    return Check("no-row-count", True, "no real row count in the manifest")


# --- manifest and files ---------------------------------------------------------------------


def _load_manifest(directory: Path) -> tuple[dict | None, str | None, Check]:
    path = directory / MANIFEST_FILE
    try:
        raw = path.read_bytes()
    except OSError as error:
        return None, None, Check("manifest", False, f"{MANIFEST_FILE} unreadable: {error}")
    digest = hashlib.sha256(raw).hexdigest()
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, digest, Check("manifest", False, f"{MANIFEST_FILE} is not JSON: {error}")
    if not isinstance(manifest, dict):
        return None, digest, Check("manifest", False, f"{MANIFEST_FILE} is not a JSON object")
    wrong = [
        key for key, kind in REQUIRED_MANIFEST.items() if not isinstance(manifest.get(key), kind)
    ]
    if "kind" in manifest and not isinstance(manifest["kind"], str):
        wrong.append("kind")
    if wrong:
        return None, digest, Check("manifest", False, f"missing or malformed: {', '.join(wrong)}")
    return manifest, digest, Check("manifest", True, f"kind {manifest.get('kind', DEFAULT_KIND)}")


def _file_checks(directory: Path, files: dict) -> list[Check]:
    checks = []
    for name, expected in sorted(files.items()):
        check_name = f"sha256:{name}"
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or name in ("", MANIFEST_FILE):
            checks.append(Check(check_name, False, "not a file name inside the release"))
            continue
        try:
            actual = hashlib.sha256((directory / relative).read_bytes()).hexdigest()
        except OSError:
            checks.append(Check(check_name, False, "listed in the manifest but missing"))
            continue
        if actual == expected:
            checks.append(Check(check_name, True, "matches the manifest"))
        else:
            checks.append(Check(check_name, False, "content differs from the manifest's hash"))
    present = {
        p.relative_to(directory).as_posix()
        for p in directory.rglob("*")
        if p.is_file() or p.is_symlink()
    } - {MANIFEST_FILE}
    extra = sorted(present - set(files))
    checks.append(
        Check("no-extra-files", False, f"files not in the manifest: {', '.join(extra)}")
        if extra
        else Check("no-extra-files", True, f"{len(present)} files, all listed")
    )
    return checks


def _parquet_metadata(directory: Path, manifest: dict) -> Check:
    import pyarrow.parquet as pq

    expected = {
        b"dprelease.release_id": manifest["release_id"],
        b"dprelease.privacy_statement": manifest["privacy_statement"],
    }
    if "kind" in manifest:  # releases from before release kinds carry no kind stamp
        expected[b"dprelease.kind"] = manifest["kind"]
    names = sorted(n for n in manifest["files"] if n.endswith(".parquet") and n != LEDGER_FILE)
    for name in names:
        metadata = pq.read_schema(directory / name).metadata or {}
        wrong = [
            key.decode().removeprefix("dprelease.")
            for key, value in expected.items()
            if metadata.get(key, b"").decode(errors="replace") != value
        ]
        if wrong:
            return Check("parquet-metadata", False, f"{name}: {', '.join(wrong)} differ")
    return Check("parquet-metadata", True, f"stamped with this release: {', '.join(names)}")


# --- kinds ------------------------------------------------------------------------------------


def _kind_checks(kind: str) -> KindChecks:
    if kind not in KIND_CHECKS and kind in KIND_MODULES:
        importlib.import_module(KIND_MODULES[kind])
    if kind not in KIND_CHECKS:
        raise LookupError(f"no checks for release kind {kind!r} in this installation")
    return KIND_CHECKS[kind]


def _guarded(name: str, run: Callable[[], list[Check]]) -> list[Check]:
    """Run a group of checks; a file too damaged to read fails the group, it never crashes."""
    try:
        return run()
    except Exception as error:  # noqa: BLE001 - any failure to read is a failed check
        return [Check(name, False, f"could not be checked: {type(error).__name__}: {error}")]
