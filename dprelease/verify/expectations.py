"""`dprelease verify --expectations`: a synthetic release's table validated by Great
Expectations against the suite derived from the release's own public schema.

The suite comes from the manifest's `schema` (`dprelease.expectations.suite`), never from a
file the publisher wrote (`expectations.json` is only hashed, like every file), and GX
validates `synthetic.parquet` as read with pyarrow, without its `weight` and `log_weight`
columns (the weights have their own checks, `verify.synthetic`). One check per expectation,
named `gx:<expectation>(<column>)`, with the rule and what GX observed. A release of another
kind has no table of the schema: its one check `expectations` fails.

Needs the gx extra (`dprelease.expectations.require_gx`); besides GX it imports only
`dprelease.expectations` (which imports `dprelease.errors`), so the verdict still rests on
no code that produced the release.
"""

from __future__ import annotations

from pathlib import Path

from dprelease.expectations.suite import expectation_suite
from dprelease.expectations.validation import validate
from dprelease.release.files import SYNTHETIC, SYNTHETIC_FILE, WEIGHT_COLUMNS
from dprelease.verify.check import Check, read_parquet


def expectation_checks(directory: Path, manifest: dict, kind: str) -> list[Check]:
    """The checks of the module docstring."""
    if kind != SYNTHETIC:
        return [Check("expectations", False, f"a {kind} release has no table of the schema")]
    table = read_parquet(directory / SYNTHETIC_FILE).to_pandas()
    table = table.drop(columns=[name for name in WEIGHT_COLUMNS if name in table.columns])
    record = validate(table, expectation_suite(manifest["schema"]))
    return [
        Check(
            f"gx:{outcome['expectation']}"
            + (f"({outcome['column']})" if outcome["column"] is not None else ""),
            outcome["success"],
            f"{outcome['rule']}: {outcome['observed']}",
        )
        for outcome in record["outcomes"]
    ]
