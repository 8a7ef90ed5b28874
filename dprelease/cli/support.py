"""Plumbing shared by every `dprelease` command that runs a flow or touches the ledger.

- `fail` / `expected_errors`: an expected error (`DPReleaseError`: bad input, budget refusal,
  unreliable weights) becomes ONE line on stderr, `error: ...`, and its exit code; no
  traceback unless `--verbose`. Unexpected errors keep their traceback.
- `run_flow`: runs a Prefect flow in this process with a concise rich progress line (the
  current task; a plain line per task when stderr is not a terminal) instead of Prefect's
  console log; Prefect's full run log still goes to the
  Prefect API (UI) and, with `--verbose`, to the terminal.
- `check_before_run`: the cap, then what can be checked about an input file without reading
  its values (`io.stream.preflight`: existence, type, UTF-8 header, the column set), so those
  errors come back before Prefect's temporary server starts (15-25 s here);
  `publish_command` runs them and then the release flow. When no server is configured,
  `run_flow` says how to start one (`SERVER_HINT`); a configured one that does not answer is
  one error line (`check_prefect_server`).
- `ledger_notice`: which ledger is used, and whether this dataset has history in it.

Exit codes (README): 0 published, 1 unexpected error, 2 bad input or configuration, 3 the
dataset's cap refuses the run, 4 the weights are unreliable (nothing published), 5 published
but its verdict is "not usable" (`publish_command` prints the verdict next to the path).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from dprelease.config import InputPolicy, InvalidRows, OutOfBounds
from dprelease.diagnostics.accuracy import NOT_USABLE
from dprelease.errors import DPReleaseError
from dprelease.io.stream import preflight
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.privacy.ledger.location import LEDGER_URL_ENV, shown_url
from dprelease.release.files import MANIFEST_FILE
from dprelease.release.pipeline import (
    DuplicateReleaseWarning,
    Plan,
    check_budget,
)
from dprelease.release.synthetic.plan import DEFAULT_N_SYNTHETIC, MAX_DEFAULT_N_SYNTHETIC
from dprelease.release.writer import refuse_inside_release

stdout = Console()
stderr = Console(stderr=True)

INFER_EXIT_CODES_HELP = (
    "Exit codes: 0 published; 1 unexpected error; 2 bad input or configuration (nothing "
    "spent when refused before the run starts); 3 the dataset's cap refuses the run (checked "
    "before the data is read; nothing spent)."
)  # a posterior has no importance weights, so no PSIS refusal (exit 4)
EXIT_CODES_HELP = INFER_EXIT_CODES_HELP.removesuffix(".") + (
    "; 4 PSIS says the weights are unreliable (the spend stays in the ledger, nothing "
    'published); 5 published, but the release\'s verdict is "not usable" (its report says '
    "why)."
)
NOT_USABLE_EXIT = 5  # a published release whose verdict (manifest `verdict`) is "not usable"
LEDGER_EXIT_CODES_HELP = (
    "Exit codes: 0 shown; 1 unexpected error; 2 the dataset has no entries in the ledger."
)
LEDGER_HELP = (
    f"SQLAlchemy URL of the privacy ledger (default: ${LEDGER_URL_ENV}, else "
    "$DPRELEASE_HOME/ledger.sqlite, else ~/.local/share/dprelease/ledger.sqlite)"
)
LedgerOption = Annotated[str | None, typer.Option("--ledger", help=LEDGER_HELP)]


InputArgument = Annotated[
    Path, typer.Argument(metavar="INPUT", help="Real table (.csv UTF-8, or .parquet).")
]
SchemaOption = Annotated[Path, typer.Option("--schema", help="Public schema (YAML).")]


def epsilon_option(help: str) -> Any:
    """The required `--epsilon` option (of a float), with a command's own help."""
    return typer.Option("--epsilon", help=help)


def delta_option(help: str) -> Any:
    """The optional `--delta` option (of a float or None: the command's documented default)."""
    return typer.Option("--delta", help=help, show_default=False)


OutOption = Annotated[Path, typer.Option("--out", help="Directory of the releases.")]
InvalidRowsOption = Annotated[
    InvalidRows,
    typer.Option(
        "--on-invalid-rows",
        help="refuse (the CLI's default): exit 2 on any invalid row or an empty table, at no "
        "cost, so you can fix the file or the schema; a release's guarantee then holds given "
        "that it exists (its existence reveals that every row was valid). drop (the default "
        "of flows, deployments and the Python API): drop invalid rows inside the mechanism, "
        "so whether a release exists never depends on one row; use it for unattended runs.",
    ),
]
OutOfBoundsOption = Annotated[
    OutOfBounds,
    typer.Option(
        "--on-out-of-bounds",
        help="Clip numbers outside the bounds, or reject them (the table under --on-invalid-rows "
        "refuse, the row under drop).",
    ),
]
SECURE_NOISE_HELP = (
    "Laplace/Gaussian noise from OpenDP's samplers applied to the values (resistant to "
    "floating-point attacks; slower). DP-SGD (dpgan, dpcgan, dp_mlp) then sums four Gaussian "
    "draws per coordinate from torch's generator (Opacus' DPOptimizer mitigation), not a "
    "cryptographic sampler."
)
SecureNoiseOption = Annotated[
    bool, typer.Option("--secure-noise/--no-secure-noise", help=SECURE_NOISE_HELP)
]
NSyntheticOption = Annotated[
    int | None,
    typer.Option(
        "--n-synthetic",
        help=f"Synthetic rows (default: the schema's max_rows, at least {DEFAULT_N_SYNTHETIC:,} "
        f"and at most {MAX_DEFAULT_N_SYNTHETIC:,}; refused when its estimated memory exceeds "
        "what the machine has available)",
        show_default=False,
    ),
]
DropExtraColumnsOption = Annotated[
    bool, typer.Option("--drop-extra-columns", help="Ignore input columns not in the schema.")
]
VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Show Prefect's run log and tracebacks of errors."),
]


def fail(message: str, exit_code: int = 2) -> typer.Exit:
    """Print `error: message` on stderr (as written: brackets are not markup), every further
    line of a message of several problems indented under it; return the Exit to raise."""
    first, *details = escape(message).split("\n")
    indented = "".join(f"\n{line if line.startswith(' ') else '  ' + line}" for line in details)
    stderr.print(f"[bold red]error:[/bold red] {first}{indented}", highlight=False, soft_wrap=True)
    return typer.Exit(exit_code)


@contextlib.contextmanager
def expected_errors(verbose: bool = False) -> Iterator[None]:
    """Turn a `DPReleaseError` into one `error:` line and its exit code."""
    try:
        yield
    except DPReleaseError as error:
        if verbose:
            stderr.print_exception()
        raise fail(str(error), error.exit_code) from None


def claim_root_logger() -> None:
    """Give the CLI process's root logger a (silent) handler before any library is imported.

    Opacus calls `logging.basicConfig` when imported (for DP-SGD calibration this happens in
    the checks before Prefect starts); on a root logger without handlers that installs a
    stderr handler, Prefect then leaves the root alone and every INFO record of the run
    reaches the terminal. With a handler present `basicConfig` does nothing and Prefect
    configures the root as usual (its console handler obeys `--verbose`).
    """
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


def prepare_prefect(verbose: bool) -> None:
    """Environment for running a flow in this process, set before Prefect is imported.

    Prefect's temporary server gets time to start on a small busy machine (its default of
    20 s is often too short on 2 cores); neither it nor Prefect's SDK phones home. Without
    `verbose` Prefect's console handler shows nothing (its API handler still sends the whole
    run log to the server). A user's own settings win.
    """
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")  # Prefect's SDK telemetry (checked on import)
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")


@contextlib.contextmanager
def _stage_display(what: str) -> Iterator[Callable[[str], None]]:
    """Where the current stage is shown: one transient rich status line on a terminal; a
    plain line per new stage when stderr is a file or a pipe (a scheduled run's log gets no
    redraws)."""
    if stderr.is_terminal:
        with stderr.status(f"{what}: starting Prefect") as status:
            yield lambda task: status.update(f"{what}: {task}")
        return
    shown: list[str] = []

    def line(task: str) -> None:
        if not shown or shown[-1] != task:
            shown.append(task)
            stderr.print(f"{what}: {task}", highlight=False, soft_wrap=True)

    yield line


SERVER_HINT = (
    "note: no Prefect server is configured, so this run starts a temporary one (15-25 s). "
    "Start one once with `make server` (or `dprelease server start`): later runs then take "
    "seconds."
)


def check_prefect_server() -> None:
    """Before the flow starts (no data read yet): with no server configured (no
    `PREFECT_API_URL` in the environment or the active Prefect profile) print `SERVER_HINT`,
    as Prefect will start its temporary server; with one configured that does not answer its
    health check, fail with one line that says how to start it (exit 2) instead of
    Prefect's traceback. Imports Prefect's settings and client."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if not url:
        stderr.print(SERVER_HINT, highlight=False, soft_wrap=True)
        return
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        error = client.api_healthcheck()
    if error is not None:
        unset = (
            "`unset PREFECT_API_URL` in this shell"
            if os.environ.get("PREFECT_API_URL")
            else "`prefect config unset PREFECT_API_URL`"
        )
        raise fail(
            f"cannot reach the Prefect server at {url} ({type(error).__name__}): start it "
            f"with `dprelease server start` (`make server`) if it is this machine's, or run "
            f"{unset} to let each run start a temporary one"
        )


class _ProgressLine(logging.Handler):
    """Passes the name of the task Prefect is running to `update` (see `_stage_display`)."""

    _SUFFIX = re.compile(r"-[0-9a-f]{1,4}$")

    def __init__(self, update: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self._update = update

    def emit(self, record: logging.LogRecord) -> None:
        name = getattr(record, "task_run_name", None)
        if name:
            self._update(self._SUFFIX.sub("", str(name)))


def run_flow(flow_path: str, *, verbose: bool, what: str, **params: Any) -> Any:
    """Run the flow at `flow_path` ("module:name", imported only now, after the Prefect
    environment is prepared) in this process with a progress line; expected errors become
    one line (see `expected_errors`)."""
    import importlib

    prepare_prefect(verbose)
    module, name = flow_path.split(":")
    flow = getattr(importlib.import_module(module), name)
    check_prefect_server()
    loggers = [logging.getLogger("prefect.task_runs"), logging.getLogger("prefect.flow_runs")]
    with expected_errors(verbose), contextlib.ExitStack() as stack:
        if verbose:
            return flow(**params)
        handler = _ProgressLine(stack.enter_context(_stage_display(what)))
        for logger in loggers:
            logger.addHandler(handler)
            stack.callback(logger.removeHandler, handler)
        return flow(**params)


def check_before_run(
    ledger_url: str, plan: Plan, input_path: Path, policy: InputPolicy, out: Path
) -> None:
    """The checks of a release that read no data, in order: `--out` not inside a release
    (exit 2), the cap (exit 3; the input is not even opened), then the input file's header
    (exit 2). Prints which ledger is used and a warning when the cap's delta exceeds
    1 / max_rows. (A repeat of today's configuration is warned about by the run itself, once
    the table passed validation and the spend is next: `show_duplicate_warning`.)"""
    refuse_inside_release(out)
    check_budget(ledger_url, plan)
    preflight(input_path, plan.schema, policy)
    stderr.print(ledger_notice(ledger_url, plan.dataset), highlight=False, soft_wrap=True)
    warning = plan.schema.cap_delta_warning
    if warning is not None:
        stderr.print(f"warning: {warning}", highlight=False, soft_wrap=True)


@contextlib.contextmanager
def show_duplicate_warning() -> Iterator[None]:
    """Print each `DuplicateReleaseWarning` raised inside as a `warning:` line on stderr (the
    pipeline raises it right before the reservation, `pipeline.run_guarded`); other warnings
    are shown as before."""
    with warnings.catch_warnings():  # restores the filters and `showwarning` afterwards
        warnings.simplefilter("always", DuplicateReleaseWarning)
        shown = warnings.showwarning

        def show(
            message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any
        ) -> None:
            if issubclass(category, DuplicateReleaseWarning):
                stderr.print(f"warning: {message}", highlight=False, soft_wrap=True)
            else:
                shown(message, category, *args, **kwargs)

        warnings.showwarning = show
        yield


def publish_command(
    flow_path: str,
    *,
    plan: Plan,
    input_path: Path,
    schema: Path,
    config: InputPolicy,
    out: Path,
    ledger_url: str,
    verbose: bool,
    what: str,
    summary: Callable[[dict], str],
) -> None:
    """What every release command does after planning: the checks that read no data, then
    the flow in this process; then `summary(manifest)`, the dataset's budget in plain words
    (`ledger.view.plain_summary`) and the release's verdict (`verdict_line`, where the
    manifest has one) on stderr, the release directory on stdout, and exit
    `NOT_USABLE_EXIT` when the verdict is "not usable"."""
    with expected_errors(verbose):
        check_before_run(ledger_url, plan, input_path, config, out)
    with show_duplicate_warning():
        release_dir = run_flow(
            flow_path,
            verbose=verbose,
            what=what,
            input_path=str(input_path),
            schema_path=str(schema),
            config=config,
            out_dir=str(out),
            ledger_url=ledger_url,
        )
    manifest = json.loads((Path(release_dir) / MANIFEST_FILE).read_text())
    stderr.print(f"published: {summary(manifest)}", highlight=False, soft_wrap=True)
    stderr.print(budget_line(ledger_url, plan.dataset), highlight=False, soft_wrap=True)
    judged = manifest.get("verdict")  # a synthetic release's; the posterior kinds have none
    if judged is not None:
        stderr.print(verdict_line(judged), highlight=False, soft_wrap=True)
    stdout.print(release_dir, highlight=False, soft_wrap=True)
    if judged is not None and judged["verdict"] == NOT_USABLE:
        raise typer.Exit(NOT_USABLE_EXIT)


def budget_line(ledger_url: str, dataset: str) -> str:
    """The dataset's budget in plain words after a release (`ledger_view.plain_summary`)."""
    with Ledger(ledger_url) as ledger:
        return f"budget: {ledger.summary(dataset)['plain_summary']}"


def verdict_line(judged: dict) -> str:
    """The release's verdict as the manifest records it (`diagnostics.accuracy.verdict`, DP
    outputs only) with its first reason: `verdict: not usable (the DP noise dominates: ...;
    report.md has every reason)`."""
    reasons = judged["reasons"]
    if not reasons:
        return f"verdict: {judged['verdict']}"
    more = "; report.md has every reason" if len(reasons) > 1 else ""
    return f"verdict: {judged['verdict']} ({reasons[0]}{more})"


def ledger_notice(ledger_url: str, dataset: str) -> str:
    """One line: the ledger used and whether the dataset has history there."""
    with Ledger(ledger_url) as ledger:
        known = ledger.cap(dataset) is not None
    shown = shown_url(ledger_url)
    if known:
        return f"ledger: {shown}"
    return (
        f"ledger: {shown} (first release of dataset {dataset!r} in this ledger; if the "
        "dataset was released before, this is the wrong ledger: pass --ledger)"
    )
