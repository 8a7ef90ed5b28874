"""Errors a curator can act on, each with the CLI exit code it maps to.

Messages name the file, column and kind of problem, never values or counts from the real
table: they may end up in Prefect flow-run states and logs (docs/privacy-model.md section 8).
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator


class DPReleaseError(Exception):
    """Base class; `exit_code` is what the CLI returns for it. `spend_kept` is set when the
    error was raised after the run's privacy spend was reserved (`spend_kept()`)."""

    exit_code = 1
    spend_kept = False


class InputError(DPReleaseError):
    """Bad schema, configuration or input table (exit 2). Nothing is written; raised before
    the reservation nothing is spent either (see `spend_kept` for errors after it)."""

    exit_code = 2


class BudgetExceededError(DPReleaseError):
    """The dataset's lifetime privacy cap refuses the planned spend (exit 3)."""

    exit_code = 3


class UnreliableWeightsError(DPReleaseError):
    """PSIS says the importance weights are unreliable; the release was not published (exit 4)."""

    exit_code = 4


SPEND_KEPT = "this run's reserved privacy spend stays in the ledger"


@contextlib.contextmanager
def spend_kept() -> Iterator[None]:
    """Wrap the steps of a release after its reservation: an `InputError` raised there says
    that the spend is kept (a run that may have touched the data never gives budget back)."""
    try:
        yield
    except InputError as error:
        if error.spend_kept:
            raise
        kept = type(error)(f"{error} ({SPEND_KEPT})")
        kept.spend_kept = True
        raise kept from None


# The optional dependency groups of pyproject.toml: the modules each one brings, with the
# package that installs each.
EXTRAS = {
    "torch": {"torch": "torch", "opacus": "opacus"},
    "mbi": {"mbi": "mbi", "polars": "polars"},
    "dask": {"dask": "dask", "distributed": "distributed", "prefect_dask": "prefect-dask"},
    "evaluate": {"ot": "POT"},
}


def require(extra: str, what: str) -> None:
    """Raise an `InputError` (exit 2, one line) naming the extra to install when a module of
    the optional dependency group `extra` is not installed; `what` is what needs it."""
    for module, package in EXTRAS[extra].items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise InputError(
                f"{what} needs the optional dependency {package}: pip install 'dprelease[{extra}]'"
            )
