"""Writing a release directory atomically.

Layout of `releases/<dataset>/<release_id>/` (PRIVACY_MODEL.md section 8: only DP outputs,
their post-processing and public metadata):

- `synthetic.parquet`: the schema's columns with their types, plus `weight` (self-normalised,
  mean 1) and `log_weight` (the raw debiased log weights); Arrow key-value metadata carries
  the release id and the privacy statement.
- `ledger.parquet`: the dataset's ledger entries up to and including this release.
- `diagnostics.json`: PSIS diagnostics of the released weights.
- `manifest.json`: release id, UTC time, schema, configuration, package versions, the
  privacy statement, and the sha256 of every other file.
- `report.md` (and its PNG figures): a readable summary for the recipients.

Everything is written into a hidden sibling directory and renamed into place only when
complete; a failure removes the partial directory, so a release either exists whole or not
at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from importlib import metadata
from pathlib import Path
from uuid import uuid4

import numpy as np
import pandas as pd

from dprelease.diagnostics import normalised_weights
from dprelease.privacy.accounting import Spend, compose
from dprelease.privacy.ledger import LedgerEntry
from dprelease.report import write_report

SYNTHETIC_FILE = "synthetic.parquet"
LEDGER_FILE = "ledger.parquet"
MANIFEST_FILE = "manifest.json"
DIAGNOSTICS_FILE = "diagnostics.json"
REPORT_FILE = "report.md"
VERSIONED_PACKAGES = (
    "dprelease",
    "numpy",
    "pandas",
    "pyarrow",
    "scikit-learn",
    "torch",
    "opacus",
    "dp-accounting",
    "opendp",
    "great-expectations",
    "prefect",
)


def new_release_id(now: datetime | None = None) -> str:
    """A sortable, unique id: UTC timestamp plus 8 random hex digits."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid4().hex[:8]}"


def privacy_statement(release_spend: Spend, dataset_total: Spend, cap: Spend) -> str:
    """The sentence every release carries (PRIVACY_MODEL.md sections 1 and 7)."""
    return (
        f"(epsilon, delta)-DP for the add/remove of one row of the real table; this release "
        f"spent epsilon={release_spend.epsilon:.6g}, delta={release_spend.delta:.6g}; "
        f"dataset total epsilon={dataset_total.epsilon:.6g}, delta={dataset_total.delta:.6g} "
        f"of cap epsilon={cap.epsilon:.6g}, delta={cap.delta:.6g} (basic composition)"
    )


@dataclass(frozen=True)
class ReleaseContent:
    """Everything a release holds; all of it DP output or public metadata."""

    dataset: str
    release_id: str
    synthetic: pd.DataFrame
    log_weights: np.ndarray
    smoothed_log_weights: np.ndarray
    ledger_entries: Sequence[LedgerEntry]
    release_spend: Spend
    cap: Spend
    schema: dict
    configuration: dict
    diagnostics: dict

    @cached_property
    def weights(self) -> np.ndarray:
        """Self-normalised (mean 1) Pareto-smoothed weights: the `weight` column (computed
        once; the parquet file and the report both use it)."""
        return normalised_weights(self.smoothed_log_weights)


def write_release(content: ReleaseContent, out_dir: str | Path) -> Path:
    """Write the release atomically; return its final directory."""
    dataset_dir = Path(out_dir) / content.dataset
    final = dataset_dir / content.release_id
    if final.exists():
        raise FileExistsError(f"{final} exists already")
    dataset_dir.mkdir(parents=True, exist_ok=True)
    partial = dataset_dir / f".incomplete-{content.release_id}"
    partial.mkdir()
    try:
        manifest = _write_files(content, partial)
        write_report(
            partial,
            manifest,
            content.synthetic,
            content.weights,
            content.log_weights,
            content.smoothed_log_weights,
        )
        manifest["files"] = _checksums(partial)
        (partial / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        _fsync_tree(partial)
        os.rename(partial, final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return final


def _write_files(content: ReleaseContent, directory: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    total = compose(Spend(e.epsilon, e.delta) for e in content.ledger_entries)
    statement = privacy_statement(content.release_spend, total, content.cap)
    table = content.synthetic.assign(
        weight=np.asarray(content.weights, dtype=float),
        log_weight=np.asarray(content.log_weights, dtype=float),
    )
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    arrow = arrow.replace_schema_metadata(
        {
            **(arrow.schema.metadata or {}),
            b"dprelease.release_id": content.release_id.encode(),
            b"dprelease.privacy_statement": statement.encode(),
        }
    )
    pq.write_table(arrow, directory / SYNTHETIC_FILE)
    ledger = pd.DataFrame([entry.as_dict() for entry in content.ledger_entries])
    ledger["params"] = ledger["params"].map(lambda params: json.dumps(params, sort_keys=True))
    pq.write_table(pa.Table.from_pandas(ledger, preserve_index=False), directory / LEDGER_FILE)
    (directory / DIAGNOSTICS_FILE).write_text(json.dumps(content.diagnostics, indent=2) + "\n")
    return {
        "release_id": content.release_id,
        "dataset": content.dataset,
        "created_at": datetime.now(UTC).isoformat(),
        "privacy_statement": statement,
        "release_spend": {
            "epsilon": content.release_spend.epsilon,
            "delta": content.release_spend.delta,
        },
        "dataset_total": {"epsilon": total.epsilon, "delta": total.delta},
        "cap": {"epsilon": content.cap.epsilon, "delta": content.cap.delta},
        "neighbouring": "add/remove-one",
        "n_synthetic": len(content.synthetic),
        "schema": content.schema,
        "configuration": content.configuration,
        "diagnostics": content.diagnostics,
        "package_versions": package_versions(),
    }


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


def _fsync_tree(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
