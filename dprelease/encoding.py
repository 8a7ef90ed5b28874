"""Encoding between a schema-typed table and the matrix generators and weights see.

docs/privacy-model.md section 2: numeric columns are scaled to [0, 1] with the schema's public
bounds, v = (x - min) / (max - min); categorical columns are one-hot over the schema's
categories. A nullable column gets one more state for "missing": a nullable categorical
has an extra one-hot level, a nullable numeric column an indicator feature in front of its
value (the value is 0 when missing). Decoding is the exact inverse on encoded tables, and
maps any matrix (for example a generator's output) back to valid schema values: numeric
values clipped to the bounds, integers rounded, a coded column's values to the nearest value
of its codebook, categories by the largest coordinate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from dprelease.schema import (
    CategoricalColumn,
    ColumnSpec,
    ContinuousColumn,
    IntegerColumn,
    Schema,
)

MISSING_LEVEL = "<missing>"


@dataclass(frozen=True)
class EncodedColumn:
    """Where one schema column lives in the encoded matrix.

    Categorical: features `start .. start + len(levels)` are the one-hot levels (the
    schema's categories, then `MISSING_LEVEL` when nullable). Numeric: a missing indicator
    at `start` when nullable, then the scaled value at `value_index`.
    """

    name: str
    spec: ColumnSpec
    start: int
    width: int

    @property
    def is_categorical(self) -> bool:
        return isinstance(self.spec, CategoricalColumn)

    @property
    def levels(self) -> tuple[str, ...]:
        assert isinstance(self.spec, CategoricalColumn)
        missing = (MISSING_LEVEL,) if self.spec.nullable else ()
        return self.spec.categories + missing

    @property
    def value_index(self) -> int:
        return self.start + self.width - 1

    @property
    def missing_index(self) -> int | None:
        if not self.spec.nullable:
            return None
        return self.start + self.width - 1 if self.is_categorical else self.start

    @property
    def stop(self) -> int:
        return self.start + self.width


class Encoder:
    """Encode a validated table into [0, 1]^d and decode matrices back to schema types."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        columns = []
        start = 0
        for name, spec in schema.columns.items():
            if isinstance(spec, CategoricalColumn):
                width = len(spec.categories) + int(spec.nullable)
            else:
                width = 1 + int(spec.nullable)
            columns.append(EncodedColumn(name, spec, start, width))
            start += width
        self.columns: tuple[EncodedColumn, ...] = tuple(columns)
        self.width = start

    @property
    def feature_names(self) -> list[str]:
        names = []
        for column in self.columns:
            if column.is_categorical:
                names += [f"{column.name}={level}" for level in column.levels]
            else:
                if column.spec.nullable:
                    names.append(f"{column.name}:missing")
                names.append(column.name)
        return names

    def encode(self, table: pd.DataFrame) -> np.ndarray:
        """Encode a table whose values already satisfy the schema (see `dprelease.io.validate`)."""
        matrix = np.zeros((len(table), self.width))
        for column in self.columns:
            spec = column.spec
            values = table[column.name]
            missing = values.isna().to_numpy()
            if isinstance(spec, CategoricalColumn):
                # int64: pandas' codes are int8 up to 127 categories, and int8 + start wraps
                # past 127 (a 105-level column from position 26 put its last three levels
                # into another column's slot; numpy 2 keeps the int8 of the array).
                codes = pd.Categorical(values, categories=spec.categories).codes
                codes = np.where(missing, len(spec.categories), codes.astype(np.int64))
                if (codes < 0).any():
                    raise ValueError(f"column {column.name!r} has values outside its categories")
                matrix[np.arange(len(table)), column.start + codes] = 1.0
            else:
                low, high = float(spec.min), float(spec.max)
                numbers = values.to_numpy(dtype=float, na_value=np.nan)
                scaled = (numbers - low) / (high - low)
                if np.any(scaled[~missing] < 0) or np.any(scaled[~missing] > 1):
                    raise ValueError(f"column {column.name!r} has values outside its bounds")
                matrix[:, column.value_index] = np.where(missing, 0.0, scaled)
                if column.missing_index is not None:
                    matrix[:, column.missing_index] = missing
        return matrix

    def snap_to_codebooks(self, matrix: np.ndarray) -> np.ndarray:
        """Encoded rows with every coded column's value moved to its nearest scaled codebook
        value (a missing value stays 0): for generators whose output is continuous."""
        out = np.array(matrix, dtype=float)
        for column in self.columns:
            if not isinstance(column.spec, ContinuousColumn) or column.spec.values is None:
                continue
            value = out[:, column.value_index]
            snapped = nearest_codebook_value(scaled_codebook(column.spec), value)
            present = np.ones(len(out), bool)
            if column.missing_index is not None:
                present = out[:, column.missing_index] < 0.5
            out[:, column.value_index] = np.where(present, snapped, value)
        return out

    def decode(self, matrix: np.ndarray) -> pd.DataFrame:
        """Map encoded rows back to a table with the schema's columns and types."""
        matrix = np.asarray(matrix, dtype=float)
        if matrix.ndim != 2 or matrix.shape[1] != self.width:
            raise ValueError(f"expected a matrix with {self.width} columns, got {matrix.shape}")
        data: dict[str, pd.Categorical[str] | pd.Series] = {}
        for column in self.columns:
            spec = column.spec
            block = matrix[:, column.start : column.stop]
            if isinstance(spec, CategoricalColumn):
                codes = np.argmax(block, axis=1)
                if spec.nullable:
                    codes = np.where(codes == len(spec.categories), -1, codes)
                data[column.name] = pd.Categorical.from_codes(
                    codes, categories=pd.Index(spec.categories)
                )
                continue
            low, high = float(spec.min), float(spec.max)
            values = low + np.clip(matrix[:, column.value_index], 0.0, 1.0) * (high - low)
            values = np.clip(_rounded(values, high - low), low, high)
            missing = (
                matrix[:, column.missing_index] > 0.5
                if column.missing_index is not None
                else np.zeros(len(matrix), dtype=bool)
            )
            data[column.name] = _numeric_series(spec, values, missing)
        return pd.DataFrame(data)


def scaled_codebook(spec: ContinuousColumn) -> np.ndarray:
    """A coded column's codebook `values` scaled to [0, 1] with its bounds, as encoded."""
    return (np.asarray(spec.values, dtype=float) - spec.min) / (spec.max - spec.min)


def nearest_codebook_value(values: tuple[float, ...] | np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each x replaced by the nearest of the sorted codebook `values` (same units)."""
    grid = np.asarray(values, dtype=float)
    right = np.clip(np.searchsorted(grid, x), 1, len(grid) - 1)
    left = right - 1
    return np.where(x - grid[left] < grid[right] - x, grid[left], grid[right])  # ties: right


def in_codebook(x: ArrayLike, values: tuple[float, ...]) -> np.ndarray:
    """Whether each x is one of the codebook `values` (to rounding error)."""
    x = np.asarray(x, dtype=float)
    return np.isclose(x, nearest_codebook_value(values, x), rtol=1e-12, atol=1e-12)


def _rounded(values: np.ndarray, span: float) -> np.ndarray:
    """Values rounded to 1e-9 of the span's decade, which removes the scaling's rounding
    error (58 decoded as 57.99999999999999) and keeps every digit a value can carry
    (`generators.lattice`)."""
    if span <= 0:
        return values
    return np.round(values, max(0, 9 - math.floor(math.log10(span))))


def _numeric_series(
    spec: ContinuousColumn | IntegerColumn, values: np.ndarray, missing: np.ndarray
) -> pd.Series:
    if isinstance(spec, ContinuousColumn) and spec.values is not None:
        values = nearest_codebook_value(spec.values, values)
    if isinstance(spec, IntegerColumn):
        integers = pd.array(np.rint(values).astype(np.int64), dtype="Int64")
        integers[missing] = pd.NA
        return pd.Series(integers if spec.nullable else integers.astype("int64"))
    return pd.Series(np.where(missing, np.nan, values), dtype="float64")


def column_dtypes(
    schema: Schema,
) -> dict[str, pd.CategoricalDtype | Literal["Int64", "int64", "float64"]]:
    """The pandas dtype every schema column has after validation and after decoding."""
    dtypes: dict[str, pd.CategoricalDtype | Literal["Int64", "int64", "float64"]] = {}
    for name, spec in schema.columns.items():
        if isinstance(spec, CategoricalColumn):
            dtypes[name] = pd.CategoricalDtype(list(spec.categories))
        elif isinstance(spec, IntegerColumn):
            dtypes[name] = "Int64" if spec.nullable else "int64"
        else:
            dtypes[name] = "float64"
    return dtypes
