"""`dprelease verify RELEASE_DIR`: check a release and print a table of checks and a verdict.

Exit codes: 0 every check holds; 1 a check fails (the failing checks are named on stderr);
2 RELEASE_DIR is not a directory, or `--expectations` without the gx extra. The checks are
those of `dprelease.verify.release`; the command reads only the release directory (no ledger
database, no Prefect). `--expectations` adds Great Expectations' validation of the synthetic
table against the suite derived from the manifest's public schema, one check per expectation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dprelease.cli.support import expected_errors, fail, stdout
from dprelease.expectations import GX_EXTRA, require_gx
from dprelease.verify.release import verify_release

VERIFY_EXIT_CODES = (
    "Exit codes: 0 every check holds; 1 a check fails (named on stderr); 2 RELEASE_DIR is not "
    "a directory, or --expectations without the gx extra."
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
    expectations: Annotated[
        bool,
        typer.Option(
            "--expectations",
            help="Also validate synthetic.parquet with Great Expectations against the suite "
            "derived from the manifest's public schema, one check per expectation (needs "
            f"the gx extra: {escape(GX_EXTRA)}).",
        ),
    ] = False,
) -> None:
    """Check a release without trusting the publisher's tooling: recompute every sha256 in
    its manifest, check ledger.parquet against the privacy statement and the cap, and check
    the data files against the public schema."""
    if expectations:
        with expected_errors():
            require_gx()
    result = verify_release(release_dir, expectations=expectations)
    table = Table(title=f"{result.kind or 'unknown'} release {result.release_id or '?'}")
    table.add_column("check", overflow="fold")  # long names (gx:...) wrap, never cut
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
