"""`dprelease ledger ...`: inspect the privacy-budget ledger."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from dprelease.cli.support import LEDGER_EXIT_CODES_HELP, LedgerOption, expected_errors, stdout
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.privacy.ledger.location import resolve_ledger_url
from dprelease.privacy.ledger.view import ledger_summary_lines

ledger_app = typer.Typer(help="Inspect the privacy-budget ledger.", no_args_is_help=True)


@ledger_app.command("show", epilog=LEDGER_EXIT_CODES_HELP)
def ledger_show(
    dataset: Annotated[str, typer.Argument(help="Dataset name (the schema's `dataset`).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ledger: LedgerOption = None,
) -> None:
    """Entries and totals of DATASET against its cap."""
    url = resolve_ledger_url(ledger)
    with expected_errors(), Ledger(url) as book:
        summary = book.summary(dataset)
    if as_json:
        stdout.print_json(json.dumps(summary))
        return
    table = Table(title=f"Privacy ledger of {dataset}")
    for heading in ("id", "release", "mechanism", "epsilon", "delta", "status", "accounted as"):
        table.add_column(heading, no_wrap=heading == "release")
    for entry in summary["entries"]:
        table.add_row(
            str(entry["id"]),
            entry["release_id"],
            entry["mechanism"],
            f"{entry['epsilon']:.6g}",
            f"{entry['delta']:.6g}",
            entry["status"],
            entry.get("accounted_as", ""),
        )
    # Never cut a release id: piped or redirected output is as wide as the table needs
    # (rich assumes 80 columns there), a terminal keeps its width (other columns wrap).
    if stdout.is_terminal:
        stdout.print(table)
    else:
        unbounded = stdout.options.update(max_width=10_000)
        Console(width=Measurement.get(stdout, unbounded, table).maximum).print(table)
    for line in ledger_summary_lines(summary):
        stdout.print(line, highlight=False, soft_wrap=True)
