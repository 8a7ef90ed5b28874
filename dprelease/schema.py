"""The public schema: the only source of column types, bounds and categories.

A schema is a YAML file validated with pydantic::

    dataset: cps1988                 # ledger key: one privacy budget per dataset
    description: free text
    max_rows: 100000                 # optional public upper bound on the row count
    min_rows: 1000                   # optional public lower bound (curator-vouched)
    budget: {epsilon: 6.0, delta: 1.0e-6}   # lifetime cap for this dataset
                                     # (optional accountant: basic | rdp, default basic;
                                     #  pld is accepted and means rdp)
    target: wage                     # optional label column
    columns:
      wage: {type: continuous, min: 0, max: 20000}
      education: {type: integer, min: 0, max: 20}
      region: {type: categorical, categories: [northeast, midwest, south, west]}
      age_band: {type: continuous, min: 15, max: 60, values: [17.5, 22, 27, 32, 37, 57]}
                                     # optional codebook of a coded numeric column

docs/privacy-model.md section 2: bounds, codebooks and category sets are public and come from
here, never from the data. Errors name the offending key (``columns.wage.max``) and what is wrong.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from dprelease.errors import InputError
from dprelease.privacy.accounting import Cap, cap_delta_warning

_STRICT = ConfigDict(extra="forbid", frozen=True)


class _NumericColumn(BaseModel):
    model_config = _STRICT
    nullable: bool = False

    @model_validator(mode="after")
    def _bounds_ordered(self) -> _NumericColumn:
        if not self.min < self.max:  # type: ignore[attr-defined]
            raise ValueError(f"min ({self.min}) must be smaller than max ({self.max})")  # type: ignore[attr-defined]
        return self


class ContinuousColumn(_NumericColumn):
    """A real-valued column with public bounds [min, max].

    `values` (optional) is the column's public codebook: the values a coded column takes,
    such as the mid-points of survey brackets (ages coded 17.5, 22, 27, ...). The generators'
    cells then follow the codebook (`generators.domain.public_cells`: one cell per value, or
    consecutive values grouped when there are more values than cells) and every synthetic
    value is one of them; a real value between two codebook values counts as the nearer one
    (part of the mechanism, like clipping to the bounds)."""

    type: Literal["continuous"]
    min: float = Field(allow_inf_nan=False)
    max: float = Field(allow_inf_nan=False)
    values: tuple[float, ...] | None = None

    @model_validator(mode="after")
    def _codebook_in_bounds(self) -> ContinuousColumn:
        if self.values is None:
            return self
        values = self.values
        if len(values) < 2:
            raise ValueError("values must list at least two codebook values")
        if not all(math.isfinite(v) for v in values) or any(
            b <= a for a, b in zip(values, values[1:], strict=False)
        ):
            raise ValueError("values must be finite and strictly increasing")
        if values[0] < self.min or values[-1] > self.max:
            raise ValueError(f"values must lie within [min, max] = [{self.min}, {self.max}]")
        return self


class IntegerColumn(_NumericColumn):
    """An integer-valued column with public bounds [min, max].

    `spacing` is how the generators' public cells split [min, max] when it holds more
    integers than cells (`generators.domain.public_cells`): "equal" widths, or "log": widths
    growing geometrically from min, one integer per cell at the low end, for counts and other
    integers whose mass sits near min (with equal widths a count column bounded at 200 shares
    one cell among 0..12, and decoding spreads its zeros over them)."""

    type: Literal["integer"]
    min: int
    max: int
    spacing: Literal["equal", "log"] = "equal"


class CategoricalColumn(BaseModel):
    """A column whose values come from a public, finite category set."""

    model_config = _STRICT
    type: Literal["categorical"]
    categories: tuple[str, ...] = Field(min_length=1)
    nullable: bool = False

    @field_validator("categories", mode="before")
    @classmethod
    def _categories_are_labels(cls, value: object) -> object:
        if not isinstance(value, list | tuple):
            return value
        labels = []
        for position, item in enumerate(value):
            if isinstance(item, bool):
                raise ValueError(
                    f"category {position} was read by YAML as the boolean {item}; quote it "
                    '(for example "no" or "yes")'
                )
            if isinstance(item, int | str):
                labels.append(str(item))
            else:
                raise ValueError(f"category {position} must be a string or an integer")
        if len(set(labels)) != len(labels):
            raise ValueError("categories must be distinct")
        return labels


ColumnSpec = Annotated[
    ContinuousColumn | IntegerColumn | CategoricalColumn, Field(discriminator="type")
]


class Budget(BaseModel):
    """Lifetime (epsilon, delta) cap of a dataset and the accountant that enforces it.

    `accountant`: `basic` (sums of epsilons and deltas) or `rdp` (the Rényi filter: many more
    small Gaussian, DP-SGD and zCDP releases; `dprelease.privacy.accountants`); recorded in
    the ledger when the dataset is registered. `pld` is accepted and means `rdp`: datasets
    registered with it before are enforced with rdp, PLD figures are only reported.
    Unset: the recorded one, or `basic` for a new dataset (`accountants.DEFAULT_ACCOUNTANT`,
    docs/privacy-model.md section 7: basic unless a tighter accountant is configured).
    """

    model_config = _STRICT
    epsilon: float = Field(gt=0, allow_inf_nan=False)
    delta: float = Field(ge=0, lt=1)
    accountant: Literal["basic", "rdp", "pld"] | None = None

    @property
    def cap(self) -> Cap:
        """The cap the ledger checks (`dprelease.privacy.accounting.Cap`)."""
        return Cap(self.epsilon, self.delta, self.accountant)


class Schema(BaseModel):
    """A public table schema; see the module docstring for the format."""

    model_config = _STRICT
    dataset: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=128)
    description: str = ""
    max_rows: int | None = Field(default=None, gt=0)
    min_rows: int | None = Field(default=None, gt=0)
    budget: Budget
    target: str | None = None
    columns: dict[str, ColumnSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _row_bounds_ordered(self) -> Schema:
        bounded = self.min_rows is not None and self.max_rows is not None
        if bounded and self.min_rows > self.max_rows:  # type: ignore[operator]
            raise ValueError(
                f"min_rows ({self.min_rows}) must not exceed max_rows ({self.max_rows})"
            )
        return self

    @model_validator(mode="after")
    def _target_is_a_column(self) -> Schema:
        if self.target is not None and self.target not in self.columns:
            raise ValueError(f"target {self.target!r} is not one of the columns")
        return self

    @property
    def cap_delta_warning(self) -> str | None:
        """Why the cap's delta is too large for this table, when it exceeds 1 / max_rows
        (`accounting.cap_delta_warning`)."""
        return cap_delta_warning(self.budget.delta, self.max_rows)

    def public_dict(self) -> dict:
        """The schema as plain JSON-able data (it is public: it goes into every manifest)."""
        return self.model_dump(mode="json")


def load_schema(path: str | Path) -> Schema:
    """Read and validate a schema file; raise `InputError` naming the key and the problem."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: schema file not found") from None
    except (UnicodeDecodeError, yaml.YAMLError) as error:
        raise InputError(f"{path}: not a readable YAML file ({type(error).__name__})") from None
    if not isinstance(raw, dict):
        raise InputError(
            f"{path}: a schema must be a YAML mapping with keys dataset, budget, columns"
        )
    try:
        return Schema.model_validate(raw)
    except ValidationError as error:
        raise InputError(f"{path}: invalid schema\n{_describe(error)}") from None


def _describe(error: ValidationError) -> str:
    lines = []
    for problem in error.errors():
        location = ".".join(str(part) for part in problem["loc"] if part not in _UNION_TAGS)
        if problem["type"] == "union_tag_invalid":  # the schema is public: name its value
            message = f"type {problem['ctx']['tag']!r} is not one of: {_COLUMN_TYPES}"
        elif problem["type"] == "int_parsing" and _EXPONENT.fullmatch(str(problem["input"])):
            message = _exponent_text(problem["input"])
        else:
            message = _COLUMN_TYPE_MESSAGES.get(problem["type"], problem["msg"])
        lines.append(f"  {location or '(top level)'}: {message}")
    return "\n".join(lines)


# YAML 1.1 reads a number in exponent form as text unless it has a dot and a signed exponent
# (1e9, 1e+9 and 1.0e9 are text, 1.0e+9 a number): pydantic's message for an integer key given
# so, "unable to parse string as an integer", does not say why.
_EXPONENT = re.compile(r"[+-]?[0-9]+(\.[0-9]*)?[eE][+-]?[0-9]+")


def _exponent_text(text: str) -> str:
    number = float(text)
    whole = f"write it as {int(number)}" if number.is_integer() else "an integer is required"
    return f"YAML reads {text} as text, not as a number: {whole}"


_UNION_TAGS = {"continuous", "integer", "categorical"}
_COLUMN_TYPES = "continuous, integer, categorical"
# pydantic's words for a column without a `type` ("Unable to extract tag using
# discriminator 'type'"), in the schema's own terms.
_COLUMN_TYPE_MESSAGES = {
    "union_tag_not_found": "needs a type: continuous, integer or categorical",
}
