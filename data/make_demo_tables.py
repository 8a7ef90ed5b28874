"""Write the bundled demo tables: `python data/make_demo_tables.py [--census-rows N]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from dprelease.datasets import breast_cancer, census_like

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--census-rows", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    breast_cancer().to_csv(HERE / "breast_cancer.csv", index=False)
    census_like(args.census_rows, args.seed).to_csv(HERE / "census.csv", index=False)
    print(f"wrote {HERE / 'breast_cancer.csv'} and {HERE / 'census.csv'}")


if __name__ == "__main__":
    main()
