"""MkDocs hook: the CLI reference page, generated from the typer app at build time.

`reference/cli.md` holds the marker `<!-- cli-reference -->`; this hook replaces it with the
Markdown that typer's own generator (`typer.cli.get_docs_for_click`, what
`typer dprelease.cli.app utils docs --name dprelease` prints) writes for
`dprelease.cli.app:app`, so the page always matches the installed command's options, defaults
and help texts.
"""

from __future__ import annotations

import click
import typer.main
from typer.cli import MARKUP_MODE_KEY, get_docs_for_click

MARKER = "<!-- cli-reference -->"
PAGE = "reference/cli.md"


def cli_markdown() -> str:
    from dprelease.cli.app import app

    command = typer.main.get_command(app)
    context = click.Context(command, obj={MARKUP_MODE_KEY: app.rich_markup_mode})
    return get_docs_for_click(
        obj=command, ctx=context, name="dprelease", title="CLI reference"
    ).strip()


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001
    if page.file.src_uri != PAGE:
        return markdown
    return markdown.replace(MARKER, cli_markdown())
