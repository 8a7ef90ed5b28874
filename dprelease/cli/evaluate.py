"""`dprelease evaluate`: the paper's utility study on a train/test split of a table (not for
publication: its metrics are computed on real data)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dprelease.cli import support
from dprelease.config import InputPolicy, SyntheticConfig, parse_config
from dprelease.errors import InputError, require
from dprelease.evaluation.harness import DEFAULT_WEIGHT_METHODS, EvaluationGrid
from dprelease.generators import GENERATORS
from dprelease.io.stream import preflight
from dprelease.release.synthetic.plan import DEFAULT_GENERATOR


def _csv(text: str, kind: type = str) -> list:
    try:
        return [kind(item.strip()) for item in text.split(",") if item.strip()]
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated values, got {text!r}") from None


def evaluate(
    input_path: support.InputArgument,
    schema: support.SchemaOption,
    test_fraction: Annotated[float, typer.Option("--test-fraction")] = 0.2,
    generators: Annotated[
        str, typer.Option("--generators", help=f"Comma-separated: {', '.join(GENERATORS)}.")
    ] = DEFAULT_GENERATOR,
    weights: Annotated[
        str, typer.Option("--weights", help="Comma-separated weight methods.")
    ] = ",".join(DEFAULT_WEIGHT_METHODS),
    epsilons: Annotated[str, typer.Option("--epsilons", help="Comma-separated.")] = "1,6",
    seeds: Annotated[int, typer.Option("--seeds")] = 10,
    n_synthetic: support.NSyntheticOption = None,
    out: Annotated[Path, typer.Option("--out", help="Evaluation directory.")] = Path("evaluations"),
    dask: Annotated[
        str | None,
        typer.Option(
            "--dask",
            metavar="ADDRESS|local",
            help="Run the cells on Dask: 'local' starts a 2-worker local cluster, an address "
            "(tcp://host:8786) uses a running scheduler. The real table's train/test parts go "
            "to the workers: keep them inside your trust boundary. Default: threads here. "
            "Needs the dask extra.",
        ),
    ] = None,
    verbose: support.VerboseOption = False,
) -> None:
    """Evaluate generators x weights x epsilons on a train/test split (not for publication).

    Needs the evaluate extra (POT); the default weights mlp and dp_mlp need the torch extra."""
    from dprelease.schema import load_schema

    epsilon_values = _csv(epsilons, float)
    with support.expected_errors(verbose):
        for epsilon in epsilon_values:  # the settings every cell's release config will have
            parse_config(SyntheticConfig, epsilon=epsilon, n_synthetic=n_synthetic)
        public = load_schema(schema)
        above = [e for e in epsilon_values if e > public.budget.epsilon]
        if above:  # each release must fit the cap on its own: say so before Prefect starts
            raise InputError(
                f"--epsilons {','.join(f'{e:g}' for e in above)} exceeds the dataset's cap "
                f"epsilon={public.budget.epsilon:g}: no release may spend more than the cap; "
                "pass --epsilons at most the cap"
            )
        grid = EvaluationGrid(generators=tuple(_csv(generators)), weights=tuple(_csv(weights)))
        grid.require_extras()
        if dask:
            require("dask", "--dask")
        preflight(input_path, public, InputPolicy())
    directory = support.run_flow(
        "dprelease.orchestration.flows.evaluate:run_evaluation",
        verbose=verbose,
        what="evaluation",
        dask=dask,
        input_path=str(input_path),
        schema_path=str(schema),
        out_dir=str(out),
        test_fraction=test_fraction,
        generators=_csv(generators),
        weights=_csv(weights),
        epsilons=epsilon_values,
        seeds=seeds,
        n_synthetic=n_synthetic,
    )
    support.stdout.print(directory, highlight=False, soft_wrap=True)
