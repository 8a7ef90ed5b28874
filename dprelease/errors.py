"""Errors a curator can act on, each with the CLI exit code it maps to.

Messages name the file, column and kind of problem, never values or counts from the real
table: they may end up in Prefect flow-run states and logs (PRIVACY_MODEL.md section 8).
"""

from __future__ import annotations


class DPReleaseError(Exception):
    """Base class; `exit_code` is what the CLI returns for it."""

    exit_code = 1


class InputError(DPReleaseError):
    """Bad schema, configuration or input table (exit 2). Nothing was spent or written."""

    exit_code = 2


class BudgetExceededError(DPReleaseError):
    """The dataset's lifetime privacy cap refuses the planned spend (exit 3)."""

    exit_code = 3


class UnreliableWeightsError(DPReleaseError):
    """PSIS says the importance weights are unreliable; the release was not published (exit 4)."""

    exit_code = 4
