"""The verifier's primitives: a named check, a manifest spend, a Parquet read.

Shared by `verify/release.py`, `verify/budget.py` and the kind modules; imports only
`dprelease.privacy.accounting` (see `verify.py` for why).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from dprelease.privacy.accounting import Spend


@dataclass(frozen=True)
class Check:
    """One named check: passed or not, with a one-line reason."""

    name: str
    passed: bool
    reason: str


def spend_of(value: object) -> Spend:
    """A manifest's {"epsilon": e, "delta": d} as a Spend (ValueError if malformed)."""
    if not isinstance(value, dict):
        raise ValueError(f"expected {{epsilon, delta}}, got {type(value).__name__}")
    epsilon, delta = value.get("epsilon"), value.get("delta")
    if not (_is_number(epsilon) and _is_number(delta)):
        raise ValueError("epsilon and delta must be numbers")
    return Spend(float(epsilon), float(delta))


def _is_number(x: object) -> TypeGuard[float]:
    return isinstance(x, int | float) and not isinstance(x, bool)


def read_parquet(path: Path):  # noqa: ANN201 (pyarrow.Table; pyarrow is imported lazily)
    import pyarrow.parquet as pq

    return pq.read_table(path)
