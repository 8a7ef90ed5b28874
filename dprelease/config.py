"""The public settings of every release kind, declared once.

One pydantic model per kind: `SyntheticConfig` (DP synthetic data), `TruncationConfig` (the
adaptive-truncation posterior, Yildirim 2023) and `ABCDPConfig` (ABCDP posterior samples, Park
et al. 2021). The CLI builds them from its options (`parse_config` turns validation errors into
one `InputError` naming the options), the Prefect flows take them as their parameter (Prefect
validates pydantic parameters; `prefect.yaml` nests them under `config:`), and the library's
release pipelines read them. Every field is public: it goes into the manifest.

Shared by every kind (`ReleaseSettings`):
- `on_out_of_bounds`: `clip` numbers outside the schema's bounds to them (part of the
  mechanism, docs/privacy-model.md section 2) or `reject` them: the row is then invalid, so
  the table is refused under `on_invalid_rows=refuse` and the row dropped under `drop`;
- `on_invalid_rows`: `drop` invalid rows inside the mechanism (the default: whether a release
  exists then never depends on one row, and its guarantee is unconditional) or `refuse` a
  table with any invalid row (its guarantee then holds given that the release exists, whose
  existence reveals that every row was valid). The configs default to `drop`: they are what
  the flows, scheduled deployments and the Python API run, where nobody reads a refusal.
  The CLI's release commands default to `refuse` instead (`dprelease.cli.support`): a
  curator at a terminal reads the refusal (which column, which kind of problem), fixes the
  schema or the file and runs again at no cost, where under `drop` a wrong category list
  would silently drop most rows and spend the budget on what is left
  (docs/decisions/0028-invalid-row-policy.md);
- `drop_extra_columns`: ignore input columns that are not in the schema;
- `seed`: fixes sampling and post-processing only, never DP noise (section 9);
- `secure_noise`: Laplace/Gaussian noise from OpenDP's samplers applied to the values
  (default off, on for adaptive truncation, whose published values are per-row noisy values:
  `TruncationConfig`).
`InputPolicy` (the first three) is what reading and validating the input needs.

Defaults that depend on the schema (the synthetic kind's delta, generator, weights, rows; how
adaptive truncation fixes T) are resolved once, by the kind's `plan`, and recorded in the
manifest.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from dprelease.errors import InputError


class OutOfBounds(StrEnum):
    """What happens to numbers outside the schema's bounds."""

    clip = "clip"
    reject = "reject"


class InvalidRows(StrEnum):
    """What happens to a table with invalid rows (and to an empty table)."""

    refuse = "refuse"
    drop = "drop"


def _positive_finite(value: float) -> float:
    if not (value > 0 and math.isfinite(value)):
        raise ValueError("must be a positive finite number")
    return value


Epsilon = Annotated[float, AfterValidator(_positive_finite)]
Delta = Annotated[float, Field(ge=0, lt=1)]
_FROZEN = ConfigDict(extra="forbid", frozen=True)


class InputPolicy(BaseModel):
    """How the real table is read and validated (see the module docstring)."""

    model_config = _FROZEN
    on_out_of_bounds: OutOfBounds = OutOfBounds.clip
    on_invalid_rows: InvalidRows = InvalidRows.drop
    drop_extra_columns: bool = False


class ReleaseSettings(InputPolicy):
    """What every release kind shares (see the module docstring)."""

    seed: int | None = None
    secure_noise: bool = False


class SyntheticConfig(ReleaseSettings):
    """A DP synthetic release (`dprelease release`). None: the documented default
    (`dprelease.release.synthetic.plan`)."""

    epsilon: Epsilon
    delta: Delta | None = None
    generator: str | None = None
    generator_options: dict[str, Any] = Field(default_factory=dict)
    weights: str | None = None
    weights_fraction: float | None = Field(default=None, ge=0)
    weights_options: dict[str, Any] = Field(default_factory=dict)
    n_synthetic: int | None = Field(default=None, ge=1)
    temper: float = Field(default=1.0, gt=0, le=1)
    allow_unreliable_weights: bool = False


PRIOR_KEYS = ("mu_mean", "mu_var", "sigma2_shape", "sigma2_scale")


class TruncationConfig(ReleaseSettings):
    """An adaptive-truncation posterior release (`dprelease infer adaptive-truncation`).

    Secure noise is the default: the release publishes each processed row's clamped value
    plus Laplace noise, and noise added in floating point would let an attacker tell values
    apart (docs/privacy-model.md section 9; about 1 ms per row with OpenDP)."""

    secure_noise: bool = True

    column: str
    epsilon: Epsilon
    delta: Delta | None = None
    n_steps: int | None = Field(default=None, ge=1)
    count_epsilon: Epsilon | None = None
    max_steps: int = Field(default=10_000, ge=1)
    min_steps: int = Field(default=50, ge=1)
    family: str = "normal"
    score: str = "det"
    engine: str = "ibis"
    particles: int = Field(default=1000, ge=10)
    prior: dict[str, float] | None = None  # PRIOR_KEYS; None: the default prior from the bounds

    @model_validator(mode="after")
    def _prior_has_every_key(self) -> TruncationConfig:
        if self.prior is not None and set(self.prior) != set(PRIOR_KEYS):
            raise ValueError(f"prior needs exactly the keys {', '.join(PRIOR_KEYS)}")
        return self


MEDIAN_PRIOR: Final = "median-prior"


class ABCDPConfig(ReleaseSettings):
    """An ABCDP posterior release (`dprelease infer abcdp`; docs/abcdp.md section 7.2).
    `model`: the public model code, `path/to/model.py:ClassName`."""

    model: str
    n_samples: int = Field(ge=1)
    threshold: Epsilon
    epsilon: Epsilon
    count_fraction: float = Field(default=0.05, gt=0, lt=1)
    resample: bool = False
    n_draws: int = 10_000
    n_sim: int | None = Field(default=None, ge=1)
    kernel: Literal["gaussian_rff", "gaussian_exact"] = "gaussian_rff"
    n_features: int = Field(default=500, ge=2, multiple_of=2)
    bandwidth: Epsilon | Literal["median-prior"] = MEDIAN_PRIOR
    n_min: int = Field(default=20, ge=1)

    @field_validator("n_draws")
    @classmethod
    def _enough_draws(cls, n_draws: int, info: ValidationInfo) -> int:
        if n_draws < info.data.get("n_samples", 1):
            raise ValueError("(T) must be at least --n-samples (c)")
        return n_draws

    @property
    def epsilon_count(self) -> float:
        return self.count_fraction * self.epsilon

    @property
    def epsilon_svt(self) -> float:
        return self.epsilon - self.epsilon_count


Config = TypeVar("Config", bound=BaseModel)


def parse_config(config_type: type[Config], /, **values: Any) -> Config:
    """`config_type(**values)`, with validation errors as one `InputError` naming the CLI options,
    one problem a line (`n_synthetic` is `--n-synthetic`: "--n-synthetic should be greater
    than or equal to 1")."""
    try:
        return config_type(**values)
    except ValidationError as error:
        lines = []
        for problem in error.errors():
            fields = [str(part) for part in problem["loc"] if isinstance(part, str)]
            message = problem["msg"].removeprefix("Value error, ").removeprefix("Input ")
            if problem["type"] == "extra_forbidden":
                message = "is not a known setting"
            if fields:
                message = f"--{fields[0].replace('_', '-')} {message}"
            lines.append(f"  {message}")
        raise InputError("invalid settings:\n" + "\n".join(dict.fromkeys(lines))) from None
