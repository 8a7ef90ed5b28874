"""Verification checks of a "synthetic" release (registered into `verify.release.KIND_CHECKS`).

`synthetic.parquet` is checked against the manifest's public schema only (never against
anything the publisher's code computes):

- `synthetic-columns`: exactly the schema's columns plus `weight` and `log_weight`;
  `synthetic-rows`: at least one row, and as many as the manifest's `n_synthetic`.
- `synthetic-types`: continuous -> float, integer -> integer, categorical -> strings
  (plain or dictionary-encoded); `weight` and `log_weight` float.
- `synthetic-nulls`: nulls only in columns the schema marks nullable (a NaN counts as a null
  here: it is what pandas writes for a missing float); none in the weights.
- `synthetic-bounds`: every numeric value finite and within the schema's [min, max], and one
  of its codebook `values` where the schema lists them;
  `synthetic-categories`: every categorical value among the schema's categories.
- `weights`: `weight` finite, non-negative, mean 1 (tolerance `WEIGHT_MEAN_TOL`);
  `log-weights`: `log_weight` finite.
- `weights-consistent`: `weight` is the released log weights, Pareto-smoothed and
  self-normalised (docs/privacy-model.md section 3; main paper supplement A.2). PSIS leaves every
  log weight outside its upper tail unchanged and smooths the tail monotonically, so (a)
  `weight` is a non-decreasing function of `log_weight` and (b) outside the tail (the rows
  below the `tail_length`-th largest log weight) `log(weight) - temper * log_weight` is one
  constant. Bounded weights that the gate passed unsmoothed (`diagnostics.gate`) satisfy
  both trivially. A weight edited and renormalised breaks (a) or (b).
- `diagnostics`: `diagnostics.json` equals the manifest's diagnostics, and their PSIS
  effective sample size is `(sum w)^2 / sum w^2` of the released `weight`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from dprelease.encoding import in_codebook
from dprelease.release.files import DIAGNOSTICS_FILE, SYNTHETIC_FILE, WEIGHT_COLUMNS
from dprelease.verify.release import KIND_CHECKS, Check, read_parquet

WEIGHT_MEAN_TOL = 1e-6
# Outside the PSIS tail log(weight) - temper * log_weight is constant up to float64 rounding
# of the normalisation (relative 1e-15 of the log weights' magnitude).
LOG_RATIO_TOL = 1e-9
ESS_RTOL = 1e-6


def synthetic_checks(directory: Path, manifest: dict) -> list[Check]:
    """Every check of the module docstring, in order."""
    table = read_parquet(directory / SYNTHETIC_FILE)
    schema_columns: dict = manifest["schema"]["columns"]
    checks = [_columns(table, schema_columns)]
    checks.append(_rows(table, manifest))
    present = {name: spec for name, spec in schema_columns.items() if name in table.column_names}
    checks += [
        _types(table, present),
        _nulls(table, present),
        _bounds(table, present),
        _categories(table, present),
    ]
    if not all(name in table.column_names for name in WEIGHT_COLUMNS):
        return [*checks, Check("weights", False, "no weight and log_weight columns")]
    weight = _floats(table, "weight")
    log_weight = _floats(table, "log_weight")
    checks += [
        _weights(weight),
        _log_weights(log_weight),
        _consistent(weight, log_weight, manifest),
        _diagnostics(directory, manifest, weight),
    ]
    return checks


def _columns(table, schema_columns: dict) -> Check:  # noqa: ANN001
    expected = [*schema_columns, *WEIGHT_COLUMNS]
    names = table.column_names
    missing = [name for name in expected if name not in names]
    extra = [name for name in names if name not in expected]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    problems = [
        f"{label}: {', '.join(values)}"
        for label, values in (("missing", missing), ("extra", extra), ("repeated", duplicated))
        if values
    ]
    if problems:
        return Check("synthetic-columns", False, "; ".join(problems))
    return Check("synthetic-columns", True, f"the schema's {len(schema_columns)} columns + weights")


def _rows(table, manifest: dict) -> Check:  # noqa: ANN001
    stated = manifest.get("n_synthetic")
    if table.num_rows == 0:
        return Check("synthetic-rows", False, "no rows")
    if stated is not None and stated != table.num_rows:
        return Check("synthetic-rows", False, f"{table.num_rows} rows, the manifest says {stated}")
    return Check("synthetic-rows", True, f"{table.num_rows} rows")


def _types(table, columns: dict) -> Check:  # noqa: ANN001
    import pyarrow.types as types

    def fits(kind: str, arrow_type) -> bool:  # noqa: ANN001
        if kind == "continuous":
            return types.is_floating(arrow_type)
        if kind == "integer":
            return types.is_integer(arrow_type)
        if types.is_dictionary(arrow_type):
            arrow_type = arrow_type.value_type
        return types.is_string(arrow_type) or types.is_large_string(arrow_type)

    wrong = [
        f"{name} ({spec['type']} stored as {table.schema.field(name).type})"
        for name, spec in columns.items()
        if not fits(spec["type"], table.schema.field(name).type)
    ]
    wrong += [
        f"{name} (stored as {table.schema.field(name).type})"
        for name in WEIGHT_COLUMNS
        if name in table.column_names and not types.is_floating(table.schema.field(name).type)
    ]
    if wrong:
        return Check("synthetic-types", False, "wrong type: " + ", ".join(wrong))
    return Check("synthetic-types", True, "every column has its schema type")


def _nulls(table, columns: dict) -> Check:  # noqa: ANN001
    required = [name for name, spec in columns.items() if not spec.get("nullable", False)]
    required += [name for name in WEIGHT_COLUMNS if name in table.column_names]
    with_nulls = [name for name in required if _missing(table, name) > 0]
    if with_nulls:
        return Check(
            "synthetic-nulls", False, "missing values in non-nullable " + ", ".join(with_nulls)
        )
    return Check("synthetic-nulls", True, "missing values only in nullable columns")


def _bounds(table, columns: dict) -> Check:  # noqa: ANN001
    outside = []
    for name, spec in columns.items():
        if spec["type"] == "categorical":
            continue
        values = _floats(table, name)
        values = values[~np.isnan(values)]
        low, high = float(spec["min"]), float(spec["max"])
        if not np.all(np.isfinite(values)) or np.any((values < low) | (values > high)):
            outside.append(f"{name} (bounds [{spec['min']}, {spec['max']}])")
        elif spec.get("values") is not None and not in_codebook(values, spec["values"]).all():
            outside.append(f"{name} (codebook {list(spec['values'])})")
    if outside:
        return Check("synthetic-bounds", False, "values outside the schema: " + ", ".join(outside))
    return Check("synthetic-bounds", True, "numeric values within the schema's bounds")


def _categories(table, columns: dict) -> Check:  # noqa: ANN001
    import pyarrow as pa
    import pyarrow.compute as pc

    unknown = []
    for name, spec in columns.items():
        if spec["type"] != "categorical":
            continue
        values = pc.drop_null(table.column(name).cast(pa.string()))
        allowed = pa.array([str(c) for c in spec["categories"]], type=pa.string())
        if not pc.all(pc.is_in(values, value_set=allowed)).as_py():
            unknown.append(name)
    if unknown:
        return Check(
            "synthetic-categories", False, "values not among the categories: " + ", ".join(unknown)
        )
    return Check("synthetic-categories", True, "categorical values among the schema's categories")


def _weights(weight: np.ndarray) -> Check:
    if not np.all(np.isfinite(weight)):
        return Check("weights", False, "weight has non-finite values")
    if np.any(weight < 0):
        return Check("weights", False, "weight has negative values")
    mean = float(np.mean(weight))
    if abs(mean - 1.0) > WEIGHT_MEAN_TOL:
        return Check("weights", False, f"weight has mean {mean:.9g}, not 1")
    return Check("weights", True, "non-negative, finite, mean 1")


def _log_weights(log_weight: np.ndarray) -> Check:
    if not np.all(np.isfinite(log_weight)):
        return Check("log-weights", False, "log_weight has non-finite values")
    return Check("log-weights", True, "finite")


def _consistent(weight: np.ndarray, log_weight: np.ndarray, manifest: dict) -> Check:
    if not (np.all(np.isfinite(weight)) and np.all(np.isfinite(log_weight))):
        return Check("weights-consistent", False, "non-finite weights")
    order = np.lexsort((weight, log_weight))
    sorted_weight = weight[order]
    if np.any(np.diff(sorted_weight) < -1e-12 * sorted_weight[1:]):
        return Check("weights-consistent", False, "weight is not increasing in log_weight")
    temper = manifest.get("configuration", {}).get("release", {}).get("temper")
    tail_length = manifest.get("diagnostics", {}).get("tail_length")
    if not isinstance(temper, int | float) or not isinstance(tail_length, int):
        return Check("weights-consistent", True, "monotone (no temper/tail length to check more)")
    if not 0 <= tail_length < len(log_weight):
        return Check("weights-consistent", False, f"tail length {tail_length} is impossible")
    n = len(log_weight)
    # The tail is the `tail_length` largest log weights; rows strictly below the smallest of
    # them are outside it whatever the tie-breaking.
    cutoff = np.partition(log_weight, n - tail_length)[n - tail_length] if tail_length else np.inf
    body = (log_weight < cutoff) & (weight > 0)
    if body.sum() < 2:
        return Check("weights-consistent", True, "monotone (no untouched body to compare)")
    ratio = np.log(weight[body]) - temper * log_weight[body]
    scale = max(1.0, float(np.max(np.abs(temper * log_weight[body]))))
    if np.ptp(ratio) > LOG_RATIO_TOL * scale:
        return Check(
            "weights-consistent", False, "weight is not exp(temper * log_weight) outside the tail"
        )
    return Check("weights-consistent", True, "weight = smoothed, normalised exp(log_weight)")


def _diagnostics(directory: Path, manifest: dict, weight: np.ndarray) -> Check:
    import json

    stated = manifest.get("diagnostics")
    if not isinstance(stated, dict):
        return Check("diagnostics", False, "the manifest states no diagnostics")
    path = directory / DIAGNOSTICS_FILE
    if path.exists() and json.loads(path.read_text()) != stated:
        return Check("diagnostics", False, f"{DIAGNOSTICS_FILE} differs from the manifest")
    ess = float(np.sum(weight)) ** 2 / float(np.sum(weight**2))
    stated_ess = stated.get("ess")
    if not isinstance(stated_ess, int | float) or not math.isclose(
        ess, stated_ess, rel_tol=ESS_RTOL
    ):
        return Check("diagnostics", False, f"ESS {stated_ess} is not that of weight ({ess:.6g})")
    return Check("diagnostics", True, f"ESS {ess:.6g} is that of the released weights")


def _floats(table, name: str) -> np.ndarray:  # noqa: ANN001
    """A column as float64 with NaN for nulls."""
    import pyarrow as pa

    return table.column(name).cast(pa.float64()).to_numpy(zero_copy_only=False)


def _missing(table, name: str) -> int:  # noqa: ANN001
    import pyarrow.types as types

    if types.is_floating(table.column(name).type):
        return int(np.count_nonzero(np.isnan(_floats(table, name))))  # nulls read as NaN
    return table.column(name).null_count


KIND_CHECKS["synthetic"] = synthetic_checks
