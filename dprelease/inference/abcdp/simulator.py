"""Calling the user's simulator: one parameter draw at a time, or a batch of draws.

`simulate(theta, m, rng) -> pd.DataFrame` (docs/abcdp.md section 7.1) comes in two conventions:

- **per draw** (how most simulators are written): `theta` is ONE draw, a float array of
  shape (p,), and the result has m rows. dprelease calls it once per draw, in draw order,
  with the same generator, and stacks the results.
- **batched**: `theta` has shape (B, p) and the result has B * m rows, draw-major: the m rows
  of draw b at positions b*m .. (b+1)*m - 1. Faster (one call per batch of draws).

A model declares its convention with a class attribute `batched = True` or `batched = False`.
Without it, the dry run detects it (before any spend, from the prior with the public seed;
PROBE_ROWS rows per draw) by this rule:

1. Batch probe: theta of PROBE_DRAWS = 3 prior draws must give 3m rows, and the same call
   with the same generator seed but the last draw replaced by another prior draw must leave
   the first 2m rows unchanged (the rows of each draw sit in its block and depend on that
   draw only): **batched**.
2. Otherwise, one-draw probe: theta of shape (p,) must give m rows: **per draw**.
3. Otherwise, if the batch probe gave 3m rows: **batched** (the function cannot simulate one
   draw of shape (p,), so it is no per-draw simulator; its block order was not confirmed,
   e.g. because its use of the generator depends on the parameters).
4. Otherwise the model is refused (`InputError`, one line naming what each probe returned).

Why in this order. A batched simulator that also takes one draw (`np.atleast_2d(theta)`)
returns m rows for one draw too: both conventions are right and step 1 picks the faster.
A per-draw simulator given a batch usually raises or returns m rows (it reads the first draw,
or broadcasts): step 1 fails and step 2 holds; this is the case that was refused before
("returned 100 rows, expected 2000"). The dangerous case is a per-draw simulator that
returns B*m rows for a batch by broadcasting, in the wrong order (`mu + sd *
rng.standard_normal((m, 1))` gives an (m, B) array, m-major): taken as a batch its blocks
would mix draws. Changing the last draw then changes rows inside the first blocks, so step 1
fails and it is called per draw, which is right. When both conventions could apply, per
draw is always correct ("one draw in, m rows out" is its definition) and batched only faster,
so step 3 applies only when the one-draw call fails.

The probes only choose how the simulator is called: their draws and rows are discarded. The
mode and the rule that chose it go into the release's configuration. Every call gets a copy
of theta, so a simulator that writes into its argument cannot change the released draws.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dprelease.errors import InputError

ATTRIBUTE = "batched"
BATCHED, PER_DRAW = "batched", "per-draw"
PROBE_DRAWS, PROBE_ROWS = 3, 16


@dataclass(frozen=True)
class LoadedModel:
    """A model instance, where it came from, and the sha256 of its file."""

    model: Any
    reference: str
    path: Path
    class_name: str
    sha256: str

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.class_name}"

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(self.model.parameter_names)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.model.columns)


@dataclass(frozen=True)
class SimulatorMode:
    """How `simulate` is called, and which rule of the module docstring chose it."""

    batched: bool
    rule: str

    @property
    def name(self) -> str:
        return BATCHED if self.batched else PER_DRAW

    def to_dict(self) -> dict:
        return {"mode": self.name, "rule": self.rule}


def declared_mode(loaded: LoadedModel) -> SimulatorMode | None:
    """The model's `batched` attribute, if it has one (it must be True or False)."""
    if not hasattr(loaded.model, ATTRIBUTE):
        return None
    value = getattr(loaded.model, ATTRIBUTE)
    if not isinstance(value, bool | np.bool_):
        raise InputError(
            f"{loaded.name}: `{ATTRIBUTE}` must be True (simulate takes a (B, p) batch) or "
            f"False (one draw of shape (p,)), not {value!r}"
        )
    return SimulatorMode(bool(value), f"declared `{ATTRIBUTE} = {bool(value)}`")


def simulate_frame(
    loaded: LoadedModel, batched: bool, theta: np.ndarray, m: int, rng: np.random.Generator
) -> pd.DataFrame:
    """The model's rows for every draw of theta (B, p), draw-major, checked for type, columns
    and row count (not values); per draw: one call per draw, stacked."""
    if batched:
        frame = _call(loaded, theta.copy(), m, rng)
        call = f"theta of {len(theta)} draws, m={m}"
        return _checked(loaded, frame, len(theta) * m, call, batched=True)
    per_draw_call = f"one draw of shape (p,), m={m}"
    frames = [
        _checked(loaded, _call(loaded, row.copy(), m, rng), m, per_draw_call, batched=False)
        for row in theta
    ]
    return pd.concat(frames, ignore_index=True)


def detect_mode(
    loaded: LoadedModel,
    prior: Callable[[np.random.Generator, int], np.ndarray],
    rng: np.random.Generator,
) -> SimulatorMode:
    """Steps 1-4 of the module docstring, with `prior` the checked prior sampler."""
    theta = prior(rng, PROBE_DRAWS)
    other = prior(rng, 1)[0]
    seed = int(rng.integers(2**63))
    batch = _probe(loaded, theta, seed, batched=True)
    if isinstance(batch, pd.DataFrame):
        changed = theta.copy()
        changed[-1] = other
        again = _probe(loaded, changed, seed, batched=True)
        head = (PROBE_DRAWS - 1) * PROBE_ROWS
        if isinstance(again, pd.DataFrame) and _same_rows(batch, again, head):
            return SimulatorMode(True, "detected: a batch of draws gives m rows per draw")
    single = _probe(loaded, theta[:1], seed, batched=False)
    if isinstance(single, pd.DataFrame):
        return SimulatorMode(False, "detected: one draw of shape (p,) gives m rows")
    if isinstance(batch, pd.DataFrame):
        return SimulatorMode(
            True, "detected: a batch of draws gives m rows per draw, one draw is refused"
        )
    if single == batch:  # e.g. the same exception both ways
        raise InputError(
            f"{loaded.name}: simulate {single} (given one draw of shape (p,) and given a batch "
            f"of {PROBE_DRAWS} draws, m={PROBE_ROWS})"
        )
    raise InputError(
        f"{loaded.name}: simulate(theta, m, rng) must return m rows for one draw (theta of "
        f"shape (p,)) or B*m rows for a batch (theta of shape (B, p)); given one draw it "
        f"{single}, given {PROBE_DRAWS} draws it {batch} (m={PROBE_ROWS})"
    )


def _probe(
    loaded: LoadedModel, theta: np.ndarray, seed: int, *, batched: bool
) -> pd.DataFrame | str:
    """The frame of one probe (type, columns, rows checked), or what went wrong as a clause."""
    argument = theta.copy() if batched else theta[0].copy()
    expected = len(theta) * PROBE_ROWS if batched else PROBE_ROWS
    try:
        frame = loaded.model.simulate(argument, PROBE_ROWS, np.random.default_rng(seed))
    except Exception as error:  # noqa: BLE001 - the model is public user code
        return f"raised {describe_error(error)}"
    problem = _problem(loaded, frame, expected)
    return problem if problem else _in_order(loaded, frame)


def _same_rows(first: pd.DataFrame, second: pd.DataFrame, n_rows: int) -> bool:
    head = first.iloc[:n_rows].reset_index(drop=True)
    return head.equals(second.iloc[:n_rows].reset_index(drop=True))


def _call(loaded: LoadedModel, theta: np.ndarray, m: int, rng: np.random.Generator) -> object:
    try:
        return loaded.model.simulate(theta, m, rng)
    except Exception as error:  # noqa: BLE001 - the model is public user code
        raise InputError(f"{loaded.name}: simulate raised {describe_error(error)}") from None


def _problem(loaded: LoadedModel, frame: object, expected: int) -> str | None:
    """What is wrong with the type, columns or row count of a result, as a clause."""
    if not isinstance(frame, pd.DataFrame):
        return f"returned a {type(frame).__name__}, not a pandas DataFrame"
    columns = list(loaded.columns)
    if len(frame.columns) != len(columns) or set(frame.columns) != set(columns):
        return f"returned columns {list(frame.columns)}, expected {columns}"
    if len(frame) != expected:
        return f"returned {len(frame)} rows, expected {expected}"
    return None


def _checked(
    loaded: LoadedModel, frame: object, expected: int, call: str, *, batched: bool
) -> pd.DataFrame:
    problem = _problem(loaded, frame, expected)
    if problem is None:
        assert isinstance(frame, pd.DataFrame)  # `_problem` checked it
        return _in_order(loaded, frame)
    hint = ""
    if batched and problem.endswith(f" rows, expected {expected}"):
        hint = (
            f" (m rows per draw); a simulator of one draw at a time should declare "
            f"`{ATTRIBUTE} = False`"
        )
    raise InputError(f"{loaded.name}: simulate({call}) {problem}{hint}")


def _in_order(loaded: LoadedModel, frame: pd.DataFrame) -> pd.DataFrame:
    """The model's columns in its order (selecting costs more than the simulation itself for
    a small per-draw frame, so only when needed)."""
    columns = list(loaded.columns)
    return frame if list(frame.columns) == columns else frame[columns]


def describe_error(error: Exception) -> str:
    """`Type: first line` of an exception raised by user code (one line, bounded)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300]}" if text else type(error).__name__
