"""The `dprelease` command line (typer + rich).

Exit codes: 0 success, 2 bad input or configuration, 3 the privacy cap refuses the run,
4 the weights are unreliable and nothing was published (see README).
Prefect is imported only by the commands that run a flow, so `dprelease --help` and
`dprelease ledger show` stay fast.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dprelease.errors import DPReleaseError
from dprelease.evaluation.harness import DEFAULT_WEIGHT_METHODS
from dprelease.planning import DEFAULT_WEIGHTS

app = typer.Typer(
    help="Differentially private synthetic releases with debiased importance weights.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
ledger_app = typer.Typer(help="Inspect the privacy-budget ledger.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")
stdout = Console()
stderr = Console(stderr=True)


class OutOfBounds(StrEnum):
    clip = "clip"
    reject = "reject"


LedgerOption = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="SQLAlchemy URL of the ledger [default: $DPRELEASE_LEDGER_URL, else "
        "sqlite:///OUT/ledger.sqlite]",
    ),
]
OutOption = Annotated[Path, typer.Option("--out", help="Directory of the releases.")]


@app.command()
def release(
    input_path: Annotated[
        Path, typer.Argument(metavar="INPUT", help="Real table (.csv or .parquet).")
    ],
    schema: Annotated[Path, typer.Option("--schema", help="Public schema (YAML).")],
    epsilon: Annotated[float, typer.Option("--epsilon", help="Epsilon this release spends.")],
    delta: Annotated[float, typer.Option("--delta", help="Delta this release spends.")] = 0.0,
    out: OutOption = Path("releases"),
    generator: Annotated[
        str, typer.Option("--generator", help="Synthetic-data generator.")
    ] = "marginals",
    n_synthetic: Annotated[
        int | None,
        typer.Option(
            "--n-synthetic", help="Synthetic rows [default: schema max_rows, else 10000]."
        ),
    ] = None,
    weights: Annotated[
        str, typer.Option("--weights", help="Importance-weight method.")
    ] = DEFAULT_WEIGHTS,
    weights_fraction: Annotated[
        float | None,
        typer.Option("--weights-fraction", help="Share of epsilon and delta for the weights."),
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
    drop_extra_columns: Annotated[
        bool, typer.Option("--drop-extra-columns", help="Ignore input columns not in the schema.")
    ] = False,
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
        bool, typer.Option("--secure-noise", help="Draw DP noise with OpenDP's samplers.")
    ] = False,
) -> None:
    """Publish a DP synthetic release of INPUT and print where it is."""
    _prepare_prefect()
    from dprelease.generators import GENERATORS
    from flows.release import release_flow

    known = GENERATORS.get(generator)
    progress = {"progress": True} if known is not None and known.shows_progress else {}

    release_dir = _run(
        release_flow,
        input_path=str(input_path),
        schema_path=str(schema),
        epsilon=epsilon,
        delta=delta,
        out_dir=str(out),
        generator=generator,
        n_synthetic=n_synthetic,
        weights=weights,
        weights_fraction=weights_fraction,
        ledger_url=ledger,
        seed=seed,
        on_out_of_bounds=on_out_of_bounds.value,
        drop_extra_columns=drop_extra_columns,
        temper=temper,
        allow_unreliable_weights=allow_unreliable_weights,
        secure_noise=secure_noise,
        generator_options=progress,
    )
    stdout.print(release_dir, highlight=False, soft_wrap=True)


def _csv(text: str, kind: type = str) -> list:
    try:
        return [kind(item.strip()) for item in text.split(",") if item.strip()]
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated values, got {text!r}") from None


@app.command()
def evaluate(
    input_path: Annotated[
        Path, typer.Argument(metavar="INPUT", help="Real table (.csv or .parquet).")
    ],
    schema: Annotated[Path, typer.Option("--schema", help="Public schema (YAML).")],
    test_fraction: Annotated[float, typer.Option("--test-fraction")] = 0.2,
    generators: Annotated[str, typer.Option("--generators", help="Comma-separated.")] = "marginals",
    weights: Annotated[
        str, typer.Option("--weights", help="Comma-separated weight methods.")
    ] = ",".join(DEFAULT_WEIGHT_METHODS),
    epsilons: Annotated[str, typer.Option("--epsilons", help="Comma-separated.")] = "1,6",
    seeds: Annotated[int, typer.Option("--seeds")] = 10,
    out: Annotated[Path, typer.Option("--out", help="Evaluation directory.")] = Path("evaluations"),
) -> None:
    """Evaluate generators x weights x epsilons on a train/test split (not for publication)."""
    _prepare_prefect()
    from flows.evaluate import evaluation_flow

    directory = _run(
        evaluation_flow,
        input_path=str(input_path),
        schema_path=str(schema),
        out_dir=str(out),
        test_fraction=test_fraction,
        generators=_csv(generators),
        weights=_csv(weights),
        epsilons=_csv(epsilons, float),
        seeds=seeds,
    )
    stdout.print(directory, highlight=False, soft_wrap=True)


@ledger_app.command("show")
def ledger_show(
    dataset: Annotated[str, typer.Argument(help="Dataset name (the schema's `dataset`).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ledger: LedgerOption = None,
    out: OutOption = Path("releases"),
) -> None:
    """Entries and totals of DATASET against its cap."""
    from dprelease.privacy.ledger import Ledger, resolve_ledger_url

    with Ledger(resolve_ledger_url(ledger, str(out))) as book:
        summary = _run(book.summary, dataset)
    if as_json:
        stdout.print_json(json.dumps(summary))
        return
    table = Table(title=f"Privacy ledger of {dataset}")
    for heading in ("id", "release", "mechanism", "epsilon", "delta", "status"):
        table.add_column(heading)
    for entry in summary["entries"]:
        table.add_row(
            str(entry["id"]),
            entry["release_id"],
            entry["mechanism"],
            f"{entry['epsilon']:.6g}",
            f"{entry['delta']:.6g}",
            entry["status"],
        )
    stdout.print(table)
    spent, cap = summary["spent"], summary["cap"]
    stdout.print(
        f"spent epsilon={spent['epsilon']:.6g} of {cap['epsilon']:.6g}, "
        f"delta={spent['delta']:.6g} of {cap['delta']:.6g}"
    )


def _prepare_prefect() -> None:
    """Give Prefect's temporary server time to start on a small, busy machine (its default
    of 20 s is often too short on 2 cores) and keep it from phoning home; a user's own
    settings win."""
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def _run(function, *args, **kwargs):  # noqa: ANN001, ANN202
    """Call `function`; turn a DPReleaseError into its message and exit code."""
    try:
        return function(*args, **kwargs)
    except DPReleaseError as error:
        stderr.print(f"[bold red]error:[/bold red] {error}", highlight=False, soft_wrap=True)
        raise typer.Exit(error.exit_code) from None


if __name__ == "__main__":
    app()
