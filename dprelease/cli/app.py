"""The `dprelease` command line (typer + rich).

Everything that can be checked without reading the data (arguments, schema, the budget cap,
the input file's existence, type, encoding and header) is checked here, before Prefect is
imported and its temporary server started, so those errors come back in about the time of
`dprelease ledger show`. Expected errors print one `error:` line and exit with their code
(see `dprelease.cli_support`); `--verbose` shows Prefect's run log and tracebacks.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dprelease.cli_infer import infer_app
from dprelease.cli_support import (
    EXIT_CODES_HELP,
    DropExtraColumnsOption,
    InputArgument,
    InvalidRows,
    InvalidRowsOption,
    LedgerOption,
    OutOption,
    SchemaOption,
    VerboseOption,
    check_before_run,
    claim_root_logger,
    expected_errors,
    preflight_table,
    run_flow,
    stderr,
    stdout,
)
from dprelease.evaluation.harness import DEFAULT_WEIGHT_METHODS
from dprelease.generators import GENERATORS
from dprelease.planning import (
    DEFAULT_GENERATOR,
    DEFAULT_N_SYNTHETIC,
    DEFAULT_WEIGHTS,
    DEFAULT_WEIGHTS_FRACTION,
    ReleaseConfig,
    plan_release,
)
from dprelease.privacy.ledger import Ledger, resolve_ledger_url
from dprelease.privacy.ledger_view import ledger_summary_lines
from dprelease.verify_cli import VERIFY_EXIT_CODES, verify_command
from dprelease.weights import NON_PRIVATE_METHODS, PRIVATE_METHODS

NSyntheticOption = Annotated[
    int | None,
    typer.Option(
        "--n-synthetic",
        help=f"Synthetic rows (default: the schema's max_rows, at least {DEFAULT_N_SYNTHETIC})",
        show_default=False,
    ),
]

app = typer.Typer(
    help="Differentially private synthetic releases with debiased importance weights, PSIS "
    "diagnostics and a persistent privacy-budget ledger. " + EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
ledger_app = typer.Typer(help="Inspect the privacy-budget ledger.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")
app.callback()(claim_root_logger)
app.add_typer(infer_app, name="infer")
app.command("verify", epilog=VERIFY_EXIT_CODES)(verify_command)

RELEASE_WEIGHTS = [m for m in PRIVATE_METHODS if m not in NON_PRIVATE_METHODS] + [
    "none",
    "discriminator",
]


class OutOfBounds(StrEnum):
    clip = "clip"
    reject = "reject"




@app.command(epilog=EXIT_CODES_HELP)
def release(
    input_path: InputArgument,
    schema: SchemaOption,
    epsilon: Annotated[float, typer.Option("--epsilon", help="Epsilon this release spends.")],
    delta: Annotated[
        float | None,
        typer.Option(
            "--delta",
            help="Delta this release spends (default: the cap's delta x epsilon / the cap's "
            "epsilon; 0 for a pure-epsilon cap)",
            show_default=False,
        ),
    ] = None,
    out: OutOption = Path("releases"),
    generator: Annotated[
        str | None,
        typer.Option(
            "--generator",
            help=f"Synthetic-data generator: {', '.join(GENERATORS)} (default: "
            f"{DEFAULT_GENERATOR}). marginals with calibration, logistic or no weights "
            "streams the input in chunks (bounded memory); the other generators and weights "
            "load the whole table into memory.",
            show_default=False,
        ),
    ] = None,
    n_synthetic: NSyntheticOption = None,
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help=f"Importance weights: {', '.join(RELEASE_WEIGHTS)} (default: "
            f"{DEFAULT_WEIGHTS})",
            show_default=False,
        ),
    ] = None,
    weights_fraction: Annotated[
        float | None,
        typer.Option(
            "--weights-fraction",
            help="Share of epsilon and delta for the weights (default: "
            f"{DEFAULT_WEIGHTS_FRACTION}; 0 for none and discriminator)",
            show_default=False,
        ),
    ] = None,
    ledger: LedgerOption = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Fixes synthetic sampling and post-processing, never DP noise."
        ),
    ] = None,
    on_out_of_bounds: Annotated[
        OutOfBounds,
        typer.Option("--on-out-of-bounds", help="Clip or reject numbers outside the bounds."),
    ] = OutOfBounds.clip,
    on_invalid_rows: InvalidRowsOption = InvalidRows.refuse,
    drop_extra_columns: DropExtraColumnsOption = False,
    temper: Annotated[
        float,
        typer.Option(
            "--temper", help="Temper the weights as w^ALPHA (0 < ALPHA <= 1) before PSIS."
        ),
    ] = 1.0,
    allow_unreliable_weights: Annotated[
        bool,
        typer.Option(
            "--allow-unreliable-weights", help="Publish even when PSIS k-hat is above threshold."
        ),
    ] = False,
    secure_noise: Annotated[
        bool,
        typer.Option(
            "--secure-noise",
            help="Laplace/Gaussian noise from OpenDP's samplers, DP-SGD in Opacus' secure mode.",
        ),
    ] = False,
    verbose: VerboseOption = False,
) -> None:
    """Publish a DP synthetic release of INPUT and print its directory.

    The ledger is $DPRELEASE_LEDGER_URL, else a per-user SQLite file (see --ledger)."""
    from dprelease.schema import load_schema

    # The release's settings: checked here as a ReleaseConfig, then passed to the flow with
    # the defaults the plan resolved (delta, generator, weights).
    settings = {
        "epsilon": epsilon,
        "delta": delta,
        "generator": generator,
        "weights": weights,
        "weights_fraction": weights_fraction,
        "n_synthetic": n_synthetic,
        "seed": seed,
        "on_out_of_bounds": on_out_of_bounds.value,
        "on_invalid_rows": on_invalid_rows.value,
        "drop_extra_columns": drop_extra_columns,
        "temper": temper,
        "allow_unreliable_weights": allow_unreliable_weights,
        "secure_noise": secure_noise,
    }
    config = ReleaseConfig(**settings)
    ledger_url = resolve_ledger_url(ledger)
    with expected_errors(verbose):
        public = load_schema(schema)
        plan = plan_release(public, config)
        check_before_run(
            ledger_url, public, plan.cap, plan.planned_spends, input_path,
            drop_extra_columns=drop_extra_columns,
        )  # fmt: skip
    shows_progress = GENERATORS[plan.config.generator].shows_progress
    release_dir = run_flow(
        "flows.release:release_flow",
        verbose=verbose,
        what=f"release of {public.dataset}",
        input_path=str(input_path),
        schema_path=str(schema),
        out_dir=str(out),
        ledger_url=ledger_url,
        generator_options={"progress": True} if shows_progress else {},
        **settings
        | {
            "delta": plan.config.delta,
            "generator": plan.config.generator,
            "weights": plan.config.weights,
        },
    )
    manifest = json.loads((Path(release_dir) / "manifest.json").read_text())
    stderr.print(
        f"published: {manifest['privacy_statement']}", highlight=False, soft_wrap=True
    )
    stdout.print(release_dir, highlight=False, soft_wrap=True)


def _csv(text: str, kind: type = str) -> list:
    try:
        return [kind(item.strip()) for item in text.split(",") if item.strip()]
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated values, got {text!r}") from None


@app.command(epilog=EXIT_CODES_HELP)
def evaluate(
    input_path: InputArgument,
    schema: SchemaOption,
    test_fraction: Annotated[float, typer.Option("--test-fraction")] = 0.2,
    generators: Annotated[
        str, typer.Option("--generators", help=f"Comma-separated: {', '.join(GENERATORS)}.")
    ] = DEFAULT_GENERATOR,
    weights: Annotated[
        str, typer.Option("--weights", help="Comma-separated weight methods.")
    ] = ",".join(DEFAULT_WEIGHT_METHODS),
    epsilons: Annotated[str, typer.Option("--epsilons", help="Comma-separated.")] = "1,6",
    seeds: Annotated[int, typer.Option("--seeds")] = 10,
    n_synthetic: NSyntheticOption = None,
    out: Annotated[Path, typer.Option("--out", help="Evaluation directory.")] = Path("evaluations"),
    dask: Annotated[
        str | None,
        typer.Option(
            "--dask",
            metavar="ADDRESS|local",
            help="Run the cells on Dask: 'local' starts a 2-worker local cluster, an address "
            "(tcp://host:8786) uses a running scheduler. The real table's train/test parts go "
            "to the workers: keep them inside your trust boundary. Default: threads here.",
        ),
    ] = None,
    verbose: VerboseOption = False,
) -> None:
    """Evaluate generators x weights x epsilons on a train/test split (not for publication)."""
    from dprelease.schema import load_schema

    with expected_errors(verbose):
        preflight_table(input_path, load_schema(schema), drop_extra_columns=False)
    directory = run_flow(
        "flows.evaluate:run_evaluation",
        verbose=verbose,
        what="evaluation",
        dask=dask,
        input_path=str(input_path),
        schema_path=str(schema),
        out_dir=str(out),
        test_fraction=test_fraction,
        generators=_csv(generators),
        weights=_csv(weights),
        epsilons=_csv(epsilons, float),
        seeds=seeds,
        n_synthetic=n_synthetic,
    )
    stdout.print(directory, highlight=False, soft_wrap=True)


@ledger_app.command("show", epilog=EXIT_CODES_HELP)
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
        table.add_column(heading)
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
    stdout.print(table)
    for line in ledger_summary_lines(summary):
        stdout.print(line, highlight=False, soft_wrap=True)


if __name__ == "__main__":
    app()
