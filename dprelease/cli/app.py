"""The `dprelease` command line (typer + rich): the command groups assembled.

Everything that can be checked without reading the data (arguments, schema, the budget cap,
the input file's existence, type, encoding and header) is checked before Prefect is imported
and its temporary server started, so those errors come back in about the time of
`dprelease ledger show`. Expected errors print one `error:` line and exit with their code
(see `dprelease.cli.support`); `--verbose` shows Prefect's run log and tracebacks.
"""

from __future__ import annotations

import typer

from dprelease.cli.evaluate import evaluate
from dprelease.cli.infer import infer_app
from dprelease.cli.ledger import ledger_app
from dprelease.cli.release import release
from dprelease.cli.schema import schema_app
from dprelease.cli.server import server_app
from dprelease.cli.support import EXIT_CODES_HELP, claim_root_logger
from dprelease.cli.verify import VERIFY_EXIT_CODES, verify_command

app = typer.Typer(
    help="Differentially private synthetic releases with debiased importance weights, PSIS "
    "diagnostics and a persistent privacy-budget ledger. " + EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.callback()(claim_root_logger)
app.command("release", epilog=EXIT_CODES_HELP)(release)
app.command("evaluate", epilog=EXIT_CODES_HELP)(evaluate)
app.add_typer(ledger_app, name="ledger")
app.add_typer(infer_app, name="infer")
app.add_typer(server_app, name="server")
app.add_typer(schema_app, name="schema")
app.command("verify", epilog=VERIFY_EXIT_CODES)(verify_command)

if __name__ == "__main__":  # `python -m dprelease.cli.main` also tunes the collector
    app()
