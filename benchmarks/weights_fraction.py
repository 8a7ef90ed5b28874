"""Evidence for the default `--weights-fraction`: how WST and beta-MSE of a release change
with the share F of the budget given to the weights (the generator gets 1 - F).

`python benchmarks/weights_fraction.py [--table breast_cancer|census] [--seeds 5]`

For each epsilon and F, beta_debiased weights on a generator with (1 - F) epsilon are
compared with unweighted synthetic data from a generator with the whole epsilon (what the
curator gets by not spending on weights). Computed on real data: evidence, not a release.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from dprelease.datasets import census_like
from dprelease.encoding import Encoder, column_dtypes
from dprelease.evaluation.harness import EvaluationGrid, evaluate_cell, split
from dprelease.io.stream import load_validated
from dprelease.schema import load_schema

ROOT = Path(__file__).parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--table", choices=("breast_cancer", "census"), default="breast_cancer")
    parser.add_argument("--generator", default="marginals")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epsilons", default="1,6")
    args = parser.parse_args()
    schema = load_schema(ROOT / "data" / f"{args.table}.yaml")
    if args.table == "census":
        table = census_like(20_000, seed=0).astype(column_dtypes(schema))
    else:
        table = load_validated(ROOT / "data" / "breast_cancer.csv", schema)
    train, test = split(table, 0.2)
    encoder = Encoder(schema)
    train, test = encoder.encode(train), encoder.encode(test)
    rows = []
    for epsilon in (float(e) for e in args.epsilons.split(",")):
        for fraction in (0.0, 0.1, 0.2, 0.3, 0.5):
            methods = ("none",) if fraction == 0 else ("beta_debiased",)
            grid = EvaluationGrid(weights=methods, weights_fraction=fraction, n_synthetic=2000)
            for seed in range(args.seeds):
                for row in evaluate_cell(train, test, schema, grid, args.generator, epsilon, seed):
                    rows.append({**row, "fraction": fraction})
    frame = pd.DataFrame(rows)
    summary = frame.groupby(["epsilon", "fraction"])[["wst", "beta_mse", "downstream"]].agg(
        ["mean", "sem"]
    )
    print(
        f"{args.table}, generator {args.generator}, {args.seeds} seeds "
        "(fraction 0 = unweighted, whole budget to the generator)"
    )
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(summary)
    best = frame[frame.fraction > 0].groupby(["epsilon", "fraction"])["wst"].mean()
    print(
        "lowest mean WST per epsilon at fraction:",
        {eps: float(best.loc[eps].idxmin()) for eps in best.index.levels[0]},
    )


if __name__ == "__main__":
    main()
