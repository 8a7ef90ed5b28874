"""`dprelease verify RELEASE_DIR`: check a release and print a table of checks and a verdict.

Exit codes: 0 every check holds; 1 a check fails (the failing checks are named on stderr);
2 RELEASE_DIR is not a directory. The checks are those of `dprelease.verify.release`; the command
reads only the release directory (no ledger database, no Prefect).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from dprelease.cli.support import fail, stdout
from dprelease.verify.release import verify_release

VERIFY_EXIT_CODES = (
    "Exit codes: 0 every check holds; 1 a check fails (named on stderr); 2 RELEASE_DIR is not "
    "a directory."
)


def verify_command(
    release_dir: Annotated[
        Path,
        typer.Argument(
            metavar="RELEASE_DIR",
            help="A release directory (with manifest.json).",
            exists=True,
            file_okay=False,
            dir_okay=True,
        ),
    ],
) -> None:
    """Check a release without trusting the publisher's tooling: recompute every sha256 in
    its manifest, check ledger.parquet against the privacy statement and the cap, and check
    the data files against the public schema."""
    result = verify_release(release_dir)
    table = Table(title=f"{result.kind or 'unknown'} release {result.release_id or '?'}")
    table.add_column("check")
    table.add_column("result")
    table.add_column("reason")
    for check in result.checks:
        verdict = Text("ok", style="green") if check.passed else Text("FAILED", style="bold red")
        table.add_row(Text(check.name), verdict, Text(check.reason))
    stdout.print(table)
    if result.manifest_sha256:
        stdout.print(
            f"manifest.json sha256 {result.manifest_sha256} (compare it with the digest the "
            "publisher announced)",
            highlight=False,
        )
    if not result.passed:
        names = ", ".join(check.name for check in result.failed)
        raise fail(f"{release_dir}: verification failed: {names}", 1)
    stdout.print(f"verified: all {len(result.checks)} checks hold", style="green")
