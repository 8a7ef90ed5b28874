"""`dprelease schema ...`: the public schema in the terms of other tools.

`export-expectations SCHEMA [--out FILE]`: the schema as a Great Expectations Expectation
Suite, GX's own suite JSON (`dprelease.expectations.suite`), on stdout or into FILE. It is
derived from the public schema alone, so it may be published. Needs the gx extra; without it
one `error:` line names it (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from dprelease.cli.support import expected_errors, fail, stderr
from dprelease.expectations import GX_EXTRA, require_gx

SCHEMA_EXIT_CODES = (
    "Exit codes: 0 written; 1 unexpected error; 2 an invalid schema, a FILE that cannot be "
    f"written, or no gx extra ({escape(GX_EXTRA)})."
)

schema_app = typer.Typer(
    help="The public schema in the terms of other tools.", no_args_is_help=True
)


@schema_app.command("export-expectations", epilog=SCHEMA_EXIT_CODES)
def export_expectations(
    schema: Annotated[Path, typer.Argument(metavar="SCHEMA", help="Public schema (YAML).")],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the suite into FILE (default: stdout).", metavar="FILE"),
    ] = None,
) -> None:
    """The public schema as a Great Expectations Expectation Suite (GX's suite JSON): the
    column set and order, a value in every non-nullable column, integer types, the bounds,
    the categories and the codebook values. Derived from the public schema alone, it may be
    published."""
    from dprelease.expectations.suite import suite_json
    from dprelease.schema import load_schema

    with expected_errors():
        require_gx()
        text = json.dumps(suite_json(load_schema(schema)), indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text)
    except OSError as error:
        raise fail(f"{out}: cannot write the suite ({error.strerror})") from None
    stderr.print(f"wrote the Expectation Suite of {schema} to {out}", highlight=False)
