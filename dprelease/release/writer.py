"""Writing a release directory atomically: one writer for every kind of release.

A release is a directory `releases/<dataset>/<release_id>/` holding only DP outputs, their
post-processing and public metadata (docs/privacy-model.md section 8). Every kind (DP synthetic
data, adaptive-truncation posteriors, ABCDP posteriors) hands this module a `ReleaseBundle`;
the writer adds what all kinds share:

- `ledger.parquet`: the dataset's ledger entries up to and including this release;
- `manifest.json`: kind, release id, UTC time, schema, configuration, package versions, the
  privacy statement (this release's spend, the dataset's total, the cap, the accountant that
  enforces it and its total; for an rdp dataset also the PLD figure, labelled as valid for a
  sequence of mechanisms fixed in advance; a warning when the cap's delta exceeds 1 / max_rows)
  and the sha256 of every other file (`dprelease verify` recomputes them);
- the release id and privacy statement as Arrow key-value metadata of every Parquet file;
- `report.md` (written by the kind's `report` callable, which receives the manifest).

Everything is written into a hidden sibling directory and renamed into place only when
complete; a failure removes the partial directory, so a release exists whole or not at all.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from uuid import uuid4

import pandas as pd

from dprelease.errors import InputError
from dprelease.privacy.accountants import (
    BASIC,
    FIXED_IN_ADVANCE,
    PLD,
    RDP,
    RDP_FILTER,
    compose_history,
)
from dprelease.privacy.accounting import NEIGHBOURING, Cap, Spend, cap_delta_warning, compose
from dprelease.privacy.ledger_tables import LedgerEntry
from dprelease.release.files import LEDGER_FILE, MANIFEST_FILE, REPORT_FILE

VERSIONED_PACKAGES = (
    "dprelease",
    "numpy",
    "pandas",
    "pyarrow",
    "scipy",
    "scikit-learn",
    "torch",
    "opacus",
    "dp-accounting",
    "opendp",
    "prefect",
)


RELEASE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"


def new_release_id(now: datetime | None = None) -> str:
    """A sortable, unique id: UTC timestamp plus 8 random hex digits. Taken before the real
    data is read (`release.pipeline`), its time is the release's published time."""
    now = now or datetime.now(UTC)
    return f"{now:{RELEASE_TIME_FORMAT}}-{uuid4().hex[:8]}"


def release_time(release_id: str) -> datetime:
    """The UTC time in a release id (`created_at` of the manifest)."""
    stamp = release_id.split("-", 1)[0]
    return datetime.strptime(stamp, RELEASE_TIME_FORMAT).replace(tzinfo=UTC)


INVALID_ROWS_CLAUSES = {
    "refuse": (
        "an input with any invalid row is refused, so the existence of this release "
        "reveals that every input row was valid"
    ),
    "drop": (
        "invalid input rows were dropped inside the mechanism (a stable transformation), so "
        "whether this release exists does not depend on any one row"
    ),
}


def out_of_bounds_clause(out_of_bounds: str, invalid_rows: str) -> str:
    """What happened to numbers outside the schema's bounds (the policy, never how many)."""
    if out_of_bounds == "clip":
        return "numbers outside the schema's bounds were clipped to them (part of the mechanism)"
    if invalid_rows == "drop":
        return (
            "input rows with a number outside the schema's bounds were dropped with the "
            "invalid rows (--on-out-of-bounds reject under drop)"
        )
    return "an input with any number outside the schema's bounds is refused"


def privacy_statement(
    release_spend: Spend,
    dataset_total: Spend,
    cap: Spend,
    accountant: str = BASIC,
    invalid_rows: str = "refuse",
    accountant_total: Spend | None = None,
    fixed_in_advance: Spend | None = None,
    warning: str | None = None,
    out_of_bounds: str = "clip",
    fixed_in_advance_by: str = PLD,
) -> str:
    """The sentence every release carries (docs/privacy-model.md sections 1 and 7): this release's
    spend, the dataset's total under basic composition (for rdp, said to be a sum that may
    exceed the cap without an overspend) and, for the rdp accountant, under the
    Rényi filter (the accountant that enforces the cap, valid for releases chosen adaptively),
    the cap, the PLD figure when given (valid only for a sequence fixed in advance, never used
    to admit a release), the cap's delta warning, the invalid-row policy and the out-of-bounds
    policy (`out_of_bounds_clause`)."""
    tight = (
        f"; under {accountant} composition ({RDP_FILTER}, valid for releases chosen after "
        f"earlier ones were seen) epsilon={accountant_total.epsilon:.6g}, "
        f"delta={accountant_total.delta:.6g}"
        if accountant != BASIC and accountant_total is not None
        else ""
    )
    reported = (
        f"; {fixed_in_advance_by} composition gives epsilon={fixed_in_advance.epsilon:.6g}, "
        f"delta={fixed_in_advance.delta:.6g}, {FIXED_IN_ADVANCE} only (reported, never used "
        "to admit a release)"
        if fixed_in_advance is not None
        else ""
    )
    caution = f"; warning: {warning}" if warning is not None else ""
    summed = (
        f"basic composition, the entries' sum: under {accountant} it may exceed the cap "
        "without any overspend"
        if tight
        else "basic composition"
    )
    return (
        f"(epsilon, delta)-DP for the add/remove of one row of the real table; this release "
        f"spent epsilon={release_spend.epsilon:.6g}, delta={release_spend.delta:.6g}; "
        f"dataset total epsilon={dataset_total.epsilon:.6g}, delta={dataset_total.delta:.6g} "
        f"({summed}){tight}, of cap epsilon={cap.epsilon:.6g}, "
        f"delta={cap.delta:.6g} checked with the {accountant} accountant{reported}{caution}; "
        f"{INVALID_ROWS_CLAUSES[invalid_rows]}; "
        f"{out_of_bounds_clause(out_of_bounds, invalid_rows)}"
    )


@dataclass(frozen=True)
class LedgerRecord:
    """What a release carries from the ledger: its id, its own entries' ids, the dataset's
    entries up to and including them, and the cap as recorded (with its accountant)."""

    release_id: str
    entry_ids: tuple[int, ...]
    entries: list[LedgerEntry]
    cap: Cap


@dataclass(frozen=True)
class ReleaseBundle:
    """What one release holds, before the shared files are added; all DP output or public.

    `tables` are written as Parquet (`name -> table`), `json_files` as JSON. `report` writes
    `report.md` and its figures into the directory it is given; it receives the manifest.
    """

    kind: str
    dataset: str
    record: LedgerRecord
    schema: dict
    configuration: dict
    report: Callable[[Path, dict], None]
    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    json_files: Mapping[str, dict] = field(default_factory=dict)
    manifest_extra: Mapping[str, object] = field(default_factory=dict)
    invalid_rows: str = "refuse"
    out_of_bounds: str = "clip"

    @property
    def release_id(self) -> str:
        return self.record.release_id

    @property
    def release_spend(self) -> Spend:
        """Basic composition of this release's own ledger entries."""
        ids = set(self.record.entry_ids)
        return compose(Spend(e.epsilon, e.delta) for e in self.record.entries if e.id in ids)

    @property
    def dataset_total(self) -> Spend:
        return compose(Spend(e.epsilon, e.delta) for e in self.record.entries)


def refuse_inside_release(out_dir: str | Path) -> None:
    """Refuse (InputError) an output directory that is, or lies inside, a release directory
    (one holding a manifest): a new release there would nest in it and break its
    verification. Checked before anything is read or spent."""
    out = Path(out_dir).resolve()
    for directory in (out, *out.parents):
        if (directory / MANIFEST_FILE).is_file():
            raise InputError(
                f"{out_dir}: refusing to write a release inside the release directory "
                f"{directory} (it would nest in it and break its verification); choose "
                "another --out"
            )


def write_release(bundle: ReleaseBundle, out_dir: str | Path) -> Path:
    """Write the release atomically; return its final directory."""
    dataset_dir = Path(out_dir) / bundle.dataset
    final = dataset_dir / bundle.release_id
    if final.exists():
        raise FileExistsError(f"{final} exists already")
    dataset_dir.mkdir(parents=True, exist_ok=True)
    partial = dataset_dir / f".incomplete-{bundle.release_id}"
    partial.mkdir()
    try:
        manifest = _manifest(bundle)
        _write_data_files(bundle, manifest["privacy_statement"], partial)
        bundle.report(partial, manifest)
        manifest["files"] = _checksums(partial)
        (partial / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        _fsync_tree(partial)
        _stamp_times(partial, release_time(bundle.release_id))
        os.rename(partial, final)
        _stamp_times(final, release_time(bundle.release_id), files=False)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return final


def _manifest(bundle: ReleaseBundle) -> dict:
    """The manifest. `accountant` is the accountant that enforces the cap (`rdp` for a dataset
    recorded as `pld`, which `recorded_accountant` then names), `accountant_total` its figure
    (rdp only), `fixed_in_advance_total` the reported PLD figure (rdp only)."""
    release, total, cap = bundle.release_spend, bundle.dataset_total, bundle.record.cap
    if cap.accountant is None:
        raise ValueError("which accountant? pass the dataset's cap from Ledger.cap(dataset)")
    composition = compose_history(bundle.record.entries, cap, cap.accountant, report_pld=True)
    accountant, tight, reported = (
        composition.accountant,
        composition.enforced,
        composition.fixed_in_advance,
    )
    warning = cap_delta_warning(cap.delta, bundle.schema.get("max_rows"))
    extra: dict = {}
    if accountant == RDP:
        extra["accountant_total"] = {"epsilon": tight.epsilon, "delta": tight.delta}
    if cap.accountant != accountant:
        extra["recorded_accountant"] = cap.accountant
    if reported is not None:
        extra["fixed_in_advance_total"] = {
            "accountant": composition.fixed_in_advance_by,
            "epsilon": reported.epsilon,
            "delta": reported.delta,
            "valid_for": FIXED_IN_ADVANCE,
        }
    if warning is not None:
        extra["warnings"] = [warning]
    return {
        "kind": bundle.kind,
        "release_id": bundle.release_id,
        "dataset": bundle.dataset,
        "created_at": release_time(bundle.release_id).isoformat(),
        "privacy_statement": privacy_statement(
            release,
            total,
            cap,
            accountant,
            bundle.invalid_rows,
            tight if accountant == RDP else None,
            reported,
            warning,
            bundle.out_of_bounds,
            composition.fixed_in_advance_by,
        ),
        "release_spend": {"epsilon": release.epsilon, "delta": release.delta},
        "dataset_total": {"epsilon": total.epsilon, "delta": total.delta},
        "cap": {"epsilon": cap.epsilon, "delta": cap.delta},
        "accountant": accountant,
        **extra,
        "neighbouring": NEIGHBOURING,
        "on_invalid_rows": bundle.invalid_rows,
        "on_out_of_bounds": bundle.out_of_bounds,
        **bundle.manifest_extra,
        "schema": bundle.schema,
        "configuration": bundle.configuration,
        "package_versions": package_versions(),
    }


def _write_data_files(bundle: ReleaseBundle, statement: str, directory: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    stamp = {
        b"dprelease.release_id": bundle.release_id.encode(),
        b"dprelease.kind": bundle.kind.encode(),
        b"dprelease.privacy_statement": statement.encode(),
    }
    for name, table in bundle.tables.items():
        arrow = pa.Table.from_pandas(table, preserve_index=False)
        arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), **stamp})
        pq.write_table(arrow, directory / name)
    ledger = pd.DataFrame([entry.as_dict() for entry in bundle.record.entries])
    for column in ("params", "description"):  # JSON text: one Arrow type for any content
        if column in ledger:
            ledger[column] = ledger[column].map(lambda value: json.dumps(value, sort_keys=True))
    for column in ("reserved_at", "committed_at"):  # dates only: a time would time data steps
        if column in ledger:
            ledger[column] = ledger[column].map(
                lambda value: value[:10] if isinstance(value, str) else None
            )
    pq.write_table(pa.Table.from_pandas(ledger, preserve_index=False), directory / LEDGER_FILE)
    for name, content in bundle.json_files.items():
        (directory / name).write_text(json.dumps(content, indent=2) + "\n")


_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s:]+\.png)\)")


def artifact_markdown(release_dir: Path) -> str:
    """The release's report.md with every relative PNG embedded as a data URI, so that a
    viewer without access to the release directory (the Prefect UI) shows the figures."""

    def embed(match: re.Match) -> str:
        path = release_dir / match.group(2)
        if not path.is_file():
            return f"*({match.group(1)}: figure in the release directory)*"
        encoded = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"![{match.group(1)}](data:image/png;base64,{encoded})"

    return _IMAGE.sub(embed, (release_dir / REPORT_FILE).read_text())


def package_versions() -> dict[str, str]:
    """Installed versions of the packages a release depends on (without importing them)."""
    versions = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _checksums(directory: Path) -> dict[str, str]:
    return {
        path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != MANIFEST_FILE
    }


def _stamp_times(directory: Path, moment: datetime, *, files: bool = True) -> None:
    """Set the access and modification times of the release's files and directory to the
    release's time (taken before the data was read): write times would time the data steps
    (issue 19 item 4)."""
    stamp = moment.timestamp()
    paths = [*directory.rglob("*")] if files else []
    for path in [*paths, directory]:
        os.utime(path, (stamp, stamp))


def _fsync_tree(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
