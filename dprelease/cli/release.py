"""`dprelease release`: publish a DP synthetic release of a table.

The options are the fields of `dprelease.config.SyntheticConfig` (checked by it); everything
that needs no data (the settings, the schema, the plan, the cap, the input's header) is
checked before Prefect is imported, then the release flow runs in this process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dprelease.cli import support
from dprelease.config import InvalidRows, OutOfBounds, SyntheticConfig, parse_config
from dprelease.generators import GENERATORS
from dprelease.privacy.ledger.location import resolve_ledger_url
from dprelease.release.synthetic.plan import (
    DEFAULT_GENERATOR,
    DEFAULT_WEIGHTS,
    DEFAULT_WEIGHTS_FRACTION,
    DEFAULT_ZCDP_WEIGHTS_FRACTION,
    plan_release,
)
from dprelease.weights import NON_PRIVATE_METHODS, PRIVATE_METHODS

RELEASE_WEIGHTS = [m for m in PRIVATE_METHODS if m not in NON_PRIVATE_METHODS] + [
    "none",
    "discriminator",
]


ReleaseEpsilon = Annotated[float, support.epsilon_option("Epsilon this release spends.")]
ReleaseDelta = Annotated[
    float | None,
    support.delta_option(
        "Delta this release spends (default: the cap's delta x epsilon / the cap's epsilon; "
        "0 for a pure-epsilon cap)"
    ),
]


def release(
    input_path: support.InputArgument,
    schema: support.SchemaOption,
    epsilon: ReleaseEpsilon,
    delta: ReleaseDelta = None,
    out: support.OutOption = Path("releases"),
    generator: Annotated[
        str | None,
        typer.Option(
            "--generator",
            help=f"Synthetic-data generator: {', '.join(GENERATORS)} (default: "
            f"{DEFAULT_GENERATOR}). pgm and marginals with calibration, logistic or no "
            "weights stream the input in chunks (bounded memory); the other generators and "
            "weights load the whole table into memory. dpgan and dpcgan need the torch extra, "
            "mst and aim the mbi extra.",
            show_default=False,
        ),
    ] = None,
    n_synthetic: support.NSyntheticOption = None,
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help=f"Importance weights: {', '.join(RELEASE_WEIGHTS)} (default: "
            f"{DEFAULT_WEIGHTS}; dp_mlp needs the torch extra)",
            show_default=False,
        ),
    ] = None,
    weights_fraction: Annotated[
        float | None,
        typer.Option(
            "--weights-fraction",
            help="The weights' share of the budget (default: "
            f"{DEFAULT_ZCDP_WEIGHTS_FRACTION} of the release's zCDP rho when the generator and "
            f"the weights are both Gaussian, else {DEFAULT_WEIGHTS_FRACTION} of epsilon and "
            "delta; 0 for none and discriminator)",
            show_default=False,
        ),
    ] = None,
    ledger: support.LedgerOption = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Fixes synthetic sampling and post-processing, never DP noise."
        ),
    ] = None,
    on_out_of_bounds: support.OutOfBoundsOption = OutOfBounds.clip,
    on_invalid_rows: support.InvalidRowsOption = InvalidRows.refuse,
    drop_extra_columns: support.DropExtraColumnsOption = False,
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
    secure_noise: support.SecureNoiseOption = False,
    verbose: support.VerboseOption = False,
) -> None:
    """Publish a DP synthetic release of INPUT and print its directory.

    The ledger is $DPRELEASE_LEDGER_URL, else a per-user SQLite file (see --ledger)."""
    from dprelease.schema import load_schema

    ledger_url = resolve_ledger_url(ledger)
    with support.expected_errors(verbose):
        config = parse_config(
            SyntheticConfig,
            epsilon=epsilon,
            delta=delta,
            generator=generator,
            weights=weights,
            weights_fraction=weights_fraction,
            n_synthetic=n_synthetic,
            seed=seed,
            on_out_of_bounds=on_out_of_bounds,
            on_invalid_rows=on_invalid_rows,
            drop_extra_columns=drop_extra_columns,
            temper=temper,
            allow_unreliable_weights=allow_unreliable_weights,
            secure_noise=secure_noise,
        )
        public = load_schema(schema)
        plan = plan_release(public, config)
        if plan.generator.shows_progress:
            config = config.model_copy(update={"generator_options": {"progress": True}})
    support.publish_command(
        "dprelease.orchestration.flows.release:release_flow",
        plan=plan,
        input_path=input_path,
        schema=schema,
        config=config,
        out=out,
        ledger_url=ledger_url,
        verbose=verbose,
        what=f"release of {public.dataset}",
        summary=lambda manifest: manifest["privacy_statement"],
    )
