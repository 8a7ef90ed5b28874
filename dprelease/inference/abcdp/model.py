"""The user's ABC model (public code): loading, checking, and encoding its simulations.

Protocol (docs/abcdp.md section 7.1), a class in a Python file referenced as `path/model.py:Class`,
constructed without arguments::

    class Model:
        parameter_names: tuple[str, ...]
        columns: tuple[str, ...]          # schema columns the simulator produces
        def sample_prior(self, rng: np.random.Generator, size: int) -> np.ndarray  # (size, p)
        def simulate(self, theta: np.ndarray, m: int, rng: np.random.Generator) -> pd.DataFrame

`simulate` is called per draw (`theta` one draw of shape (p,), m rows back) or batched
(`theta` of shape (B, p), B * m rows back, the m rows of draw b at positions
b*m .. (b+1)*m - 1), as the model declares by a class attribute `batched = False` / `True`
or, without it, as the dry run detects (`simulator.py` states the rule). The result is a
DataFrame with exactly the model's columns. The model never sees the real table. Its output
must already satisfy the schema (values within the bounds, categories in the set, no missing
values in non-nullable columns, integers in integer columns): a violation is a bug of the
model and refused (`InputError`, exit 2), not clipped. Valid output is encoded with the same
public `Encoder` as the real rows, on the sub-schema of the model's columns.

The file's sha256 goes into the release manifest. `SimulatorCheck` resolves the calling
convention and `SimulatorCheck.dry_run` simulates from the prior, both before any spend, so a
broken model is refused before the data is read.

Trust: the file is executed in the curator's process, which holds the real table while the
SVT runs; the guarantee assumes the code only does what the protocol says (it is public:
review it, and pin it by the sha256 the release records). A model that reads process memory
or writes files is outside any DP analysis.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.inference.abcdp.simulator import (
    LoadedModel,
    declared_mode,
    describe_error,
    detect_mode,
    simulate_frame,
)
from dprelease.schema import CategoricalColumn, IntegerColumn, Schema


def load_model(reference: str) -> LoadedModel:
    """Import `path/to/model.py:Class` and instantiate it; InputError on any problem."""
    path_text, separator, class_name = str(reference).rpartition(":")
    if not separator or not path_text or not class_name.isidentifier():
        raise InputError(f"--model must look like path/to/model.py:ClassName, not {reference!r}")
    path = Path(path_text)
    if not path.is_file() or path.suffix != ".py":
        raise InputError(f"{path}: model file not found (expected a .py file)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    module_name = f"dprelease_user_model_{digest[:16]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up here
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - any failure of public user code is an input error
        sys.modules.pop(module_name, None)
        raise InputError(f"{path}: importing the model failed: {describe_error(error)}") from None
    cls = getattr(module, class_name, None)
    if not inspect.isclass(cls):
        raise InputError(f"{path}: has no class {class_name!r}")
    try:
        model = cls()
    except Exception as error:  # noqa: BLE001
        raise InputError(f"{path}:{class_name}() failed: {describe_error(error)}") from None
    loaded = LoadedModel(model, str(reference), path, class_name, digest)
    _check_protocol(loaded)
    return loaded


def _check_protocol(loaded: LoadedModel) -> None:
    model = loaded.model
    for attribute in ("parameter_names", "columns"):
        value = getattr(model, attribute, None)
        if (
            not isinstance(value, tuple | list)
            or not value
            or not all(isinstance(item, str) for item in value)
            or len(set(value)) != len(value)
        ):
            raise InputError(
                f"{loaded.name}: `{attribute}` must be a non-empty tuple of distinct strings"
            )
    for method in ("sample_prior", "simulate"):
        if not callable(getattr(model, method, None)):
            raise InputError(f"{loaded.name}: has no method `{method}`")


def model_schema(schema: Schema, loaded: LoadedModel) -> Schema:
    """The schema restricted to the model's columns (the MMD compares those columns)."""
    unknown = [name for name in loaded.columns if name not in schema.columns]
    if unknown:
        raise InputError(
            f"{loaded.name}: columns not in the schema {schema.dataset!r}: {', '.join(unknown)}"
        )
    public = schema.public_dict()
    public["columns"] = {name: public["columns"][name] for name in loaded.columns}
    public["target"] = None
    return Schema.model_validate(public)


class SimulatorCheck:
    """Calls the model, checks what it returns, and encodes simulations to (B, m, d).

    `mode` is how `simulate` is called (per draw or batched): the model's declaration, else
    detected by probes from the prior drawn with `probe_rng` (public; the default is a fixed
    seed, as the probes only choose the calling convention and are discarded).
    """

    def __init__(
        self, loaded: LoadedModel, schema: Schema, probe_rng: np.random.Generator | None = None
    ) -> None:
        self.loaded = loaded
        self.schema = model_schema(schema, loaded)
        self.encoder = Encoder(self.schema)
        self.mode = declared_mode(loaded) or detect_mode(
            loaded, self.prior, probe_rng if probe_rng is not None else np.random.default_rng(0)
        )

    def prior(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` prior draws, checked: a finite (size, p) float array."""
        theta = self._call("sample_prior", rng, size)
        try:
            theta = np.asarray(theta, dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"{self.loaded.name}: sample_prior must return numbers") from None
        expected = (size, len(self.loaded.parameter_names))
        if theta.shape != expected:
            raise InputError(
                f"{self.loaded.name}: sample_prior(rng, {size}) returned shape {theta.shape}, "
                f"expected {expected} (one column per parameter name)"
            )
        if not np.all(np.isfinite(theta)):
            raise InputError(f"{self.loaded.name}: sample_prior returned non-finite values")
        return theta

    def simulate(self, theta: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
        """Simulate m rows for each row of theta (B, p); checked and encoded, (B, m, d)."""
        frame = simulate_frame(self.loaded, self.mode.batched, theta, m, rng)
        self._check_values(frame)
        encoded = self.encoder.encode(frame)
        return encoded.reshape(len(theta), m, self.encoder.width)

    def dry_run(self, rng: np.random.Generator, n_draws: int = 4, m: int = 64) -> np.ndarray:
        """Prior draws and small simulations, checked, before any spend; returns (n, m, d)."""
        return self.simulate(self.prior(rng, n_draws), m, rng)

    def _call(self, method: str, *args: object) -> object:
        try:
            return getattr(self.loaded.model, method)(*args)
        except Exception as error:  # noqa: BLE001 - the model is public user code
            raise InputError(
                f"{self.loaded.name}: {method} raised {describe_error(error)}"
            ) from None

    def _check_values(self, frame: pd.DataFrame) -> None:
        name = self.loaded.name
        for column, spec in self.schema.columns.items():
            values = frame[column]
            missing = values.isna().to_numpy()
            if missing.any() and not spec.nullable:
                raise InputError(
                    f"{name}: simulated column {column!r} has missing values but the schema "
                    "does not mark it nullable"
                )
            present = values[~missing]
            if isinstance(spec, CategoricalColumn):
                if not present.isin(spec.categories).all():
                    raise InputError(
                        f"{name}: simulated column {column!r} has values outside the schema's "
                        f"categories {list(spec.categories)} (labels as strings)"
                    )
                continue
            try:
                numbers = present.to_numpy(dtype=float)
            except (TypeError, ValueError):
                raise InputError(f"{name}: simulated column {column!r} is not numeric") from None
            if not np.all(np.isfinite(numbers)):
                raise InputError(f"{name}: simulated column {column!r} has non-finite values")
            if np.any(numbers < spec.min) or np.any(numbers > spec.max):
                raise InputError(
                    f"{name}: simulated column {column!r} has values outside the schema's "
                    f"bounds [{spec.min}, {spec.max}]"
                )
            if isinstance(spec, IntegerColumn) and np.any(numbers % 1 != 0):
                raise InputError(f"{name}: simulated column {column!r} has non-integer values")
