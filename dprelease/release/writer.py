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

Everything is written inside a hidden sibling directory that only its owner can open, and
renamed into place only when complete; a failure removes the partial directory, so a release
exists whole or not at all. The modification and access times of its files, of its directory
and of the dataset's directory are set to the time of its id, taken before the data was read.
What no process can set is an inode's change time (ctime): on the curator's filesystem it
shows when the writer finished, as does the moment the directory appears. Both stay inside
the trust boundary (docs/privacy-model.md section 8); a copy made to publish the release
(`cp -p`, `rsync -t`, an upload) carries the id's modification times and its own ctimes.
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
from dprelease.privacy.ledger.ledger import SPENT
from dprelease.privacy.ledger.tables import LedgerEntry
from dprelease.privacy.mechanisms import KIND_KEY, PoissonSubsampledGaussian
from dprelease.release.files import (
    COMMITTED,
    LEDGER_FILE,
    MANIFEST_FILE,
    NOT_COMMITTED,
    REPORT_FILE,
)

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
    "great_expectations",
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


EXISTENCE_CLAUSES = {
    "refuse": (
        "Given that this release exists (an input with any invalid row is refused, so its "
        "existence reveals that every input row was valid), "
    ),
    "drop": "",
}
INVALID_ROWS_CLAUSES = {
    "refuse": "",
    "drop": (
        "; invalid input rows were dropped inside the mechanism (a stable transformation), so "
        "whether this release exists does not depend on any one row"
    ),
}
TRUST_BOUNDARY = (
    "the orchestrator's run records (Prefect's task start and end times, which time the "
    "steps that read the real table) and the release files' inode change times stay inside "
    "the curator's trust boundary: only those who may see the real table may see them"
)


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


def noise_clause(secure: bool, dpsgd: bool = False) -> str:
    """Where the release's noise came from (docs/privacy-model.md section 9). Without secure
    noise, noise drawn in floating point and added to a value keeps traces of that value's
    floating-point grid, which can tell values apart (Mironov 2012). DP-SGD's noise comes from
    Opacus' optimizer in either mode: a torch generator seeded from OS entropy, not a
    cryptographic sampler; its secure mode sums four draws per coordinate (Opacus' mitigation
    of the floating-point attack)."""
    clause = (
        "its Laplace and Gaussian noise was drawn by OpenDP's samplers applied to the values "
        "themselves (resistant to floating-point attacks)"
        if secure
        else "its noise was drawn in floating point and added to the values, which leaves "
        "traces an attacker can use to tell values apart (floating-point attacks, Mironov "
        "2012; --secure-noise draws it with OpenDP's samplers instead)"
    )
    if dpsgd:
        how = "each coordinate the sum of four draws" if secure else "drawn in floating point"
        clause += (
            f"; DP-SGD's Gaussian noise came from torch's generator seeded from OS entropy "
            f"({how}), not from a cryptographic sampler"
        )
    return clause


def privacy_statement(
    release_spend: Spend,
    dataset_total: Spend,
    cap: Spend,
    accountant: str = BASIC,
    *,
    invalid_rows: str = "refuse",
    accountant_total: Spend | None = None,
    fixed_in_advance: Spend | None = None,
    warning: str | None = None,
    out_of_bounds: str = "clip",
    fixed_in_advance_by: str = PLD,
    conditions: tuple[str, ...] = (),
    noise: str | None = None,
) -> str:
    """The sentence every release carries (docs/privacy-model.md sections 1, 7, 8 and 9).

    It opens with the guarantee and what it is conditional on: under the `refuse` policy,
    that the release exists (its existence reveals that every row was valid); the kind's
    `conditions` (e.g. a table of at least the schema's min_rows rows). Then this release's
    spend, the dataset's total under basic composition (for rdp, said to be a sum that may
    exceed the cap without an overspend) and, for the rdp accountant, under the
    Rényi filter (the accountant that enforces the cap, valid for releases chosen adaptively),
    the cap, the PLD figure when given (valid only for a sequence fixed in advance, never used
    to admit a release), the cap's delta warning, the invalid-row and out-of-bounds policies,
    where the noise came from (`noise_clause`; default: not secure) and the trust boundary
    (`TRUST_BOUNDARY`)."""
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
    conditional = "".join(f", {condition}" for condition in conditions)
    summed = (
        f"basic composition, the entries' sum: under {accountant} it may exceed the cap "
        "without any overspend"
        if tight
        else "basic composition"
    )
    return (
        f"{EXISTENCE_CLAUSES[invalid_rows]}(epsilon, delta)-DP for the add/remove of one row "
        f"of the real table{conditional}{INVALID_ROWS_CLAUSES[invalid_rows]}; this release "
        f"spent epsilon={release_spend.epsilon:.6g}, delta={release_spend.delta:.6g}; "
        f"dataset total epsilon={dataset_total.epsilon:.6g}, delta={dataset_total.delta:.6g} "
        f"({summed}){tight}, of cap epsilon={cap.epsilon:.6g}, "
        f"delta={cap.delta:.6g} checked with the {accountant} accountant{reported}{caution}; "
        f"{out_of_bounds_clause(out_of_bounds, invalid_rows)}; "
        f"{noise_clause(False) if noise is None else noise}; {TRUST_BOUNDARY}"
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
    secure_noise: bool = False
    conditions: tuple[str, ...] = ()  # what the guarantee is conditional on (`privacy_statement`)

    @property
    def release_id(self) -> str:
        return self.record.release_id

    @property
    def ran_dpsgd(self) -> bool:
        """Whether one of this release's entries is DP-SGD (a Poisson-subsampled Gaussian)."""
        ids = set(self.record.entry_ids)
        kinds = [
            e.description.get(KIND_KEY)
            for e in self.record.entries
            if e.id in ids and isinstance(e.description, dict)
        ]
        return PoissonSubsampledGaussian.kind in kinds

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
    created = [d for d in (Path(out_dir), dataset_dir) if not d.exists()]
    dataset_dir.mkdir(parents=True, exist_ok=True)
    staging = dataset_dir / f".incomplete-{bundle.release_id}"
    staging.mkdir(mode=0o700)  # private while staged: nobody else sees the release grow
    partial = staging / bundle.release_id
    partial.mkdir()
    moment = release_time(bundle.release_id)
    try:
        manifest = _manifest(bundle)
        _write_data_files(bundle, manifest["privacy_statement"], partial)
        bundle.report(partial, manifest)
        manifest["files"] = _checksums(partial)
        (partial / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        _fsync_tree(partial)
        _stamp_times(partial, moment)
        os.rename(partial, final)
        staging.rmdir()
        _stamp_times(final, moment, files=False)
        for directory in (dataset_dir, *created):  # their modification times: the id's too
            _stamp_times(directory, moment, files=False)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
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
            invalid_rows=bundle.invalid_rows,
            accountant_total=tight if accountant == RDP else None,
            fixed_in_advance=reported,
            warning=warning,
            out_of_bounds=bundle.out_of_bounds,
            fixed_in_advance_by=composition.fixed_in_advance_by,
            conditions=bundle.conditions,
            noise=noise_clause(bundle.secure_noise, bundle.ran_dpsgd),
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
    if "status" in ledger:  # committed or not: why a run did not commit is not published
        ledger["status"] = ledger["status"].map(
            lambda status: COMMITTED if status == SPENT else NOT_COMMITTED
        )
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
    release's time (taken before the data was read): write times would time the data steps."""
    stamp = moment.timestamp()
    paths = [*directory.rglob("*")] if files else []
    for path in [*paths, directory]:
        os.utime(path, (stamp, stamp))


def _fsync_tree(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
