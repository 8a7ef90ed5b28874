"""dprelease: differentially private synthetic releases with debiased importance weights,
PSIS diagnostics and a persistent privacy-budget ledger.

The public API (`__all__`): `publish` a release of any kind from a file or a DataFrame, its
settings (`SyntheticConfig`, `TruncationConfig`, `ABCDPConfig`), the public schema
(`Schema`, `load_schema`) and its Great Expectations suite (`expectation_suite`, the gx
extra), the privacy ledger (`Ledger`), checking a release (`verify_release`), the analysis
helpers (`load_release`, `weighted_mean`, `fit_weighted`,
`design_matrix`, `glm_effective_sample_size`) and the errors a caller catches.

Importing this package is cheap: each name is imported when first used (PEP 562), and
Prefect, torch, Opacus, OpenDP and Great Expectations only where they are needed.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dprelease.analysis import (
        Release,
        design_matrix,
        fit_weighted,
        glm_effective_sample_size,
        load_release,
        weighted_mean,
    )
    from dprelease.config import ABCDPConfig, SyntheticConfig, TruncationConfig
    from dprelease.errors import (
        BudgetExceededError,
        DPReleaseError,
        InputError,
        UnreliableWeightsError,
    )
    from dprelease.expectations.suite import expectation_suite
    from dprelease.privacy.ledger.ledger import Ledger
    from dprelease.release.api import publish
    from dprelease.schema import Schema, load_schema
    from dprelease.verify.release import VerificationResult, verify_release

try:
    __version__ = version("dprelease")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

_EXPORTS = {
    "publish": "dprelease.release.api",
    "SyntheticConfig": "dprelease.config",
    "TruncationConfig": "dprelease.config",
    "ABCDPConfig": "dprelease.config",
    "Schema": "dprelease.schema",
    "load_schema": "dprelease.schema",
    "Ledger": "dprelease.privacy.ledger.ledger",
    "verify_release": "dprelease.verify.release",
    "VerificationResult": "dprelease.verify.release",
    "Release": "dprelease.analysis",
    "load_release": "dprelease.analysis",
    "weighted_mean": "dprelease.analysis",
    "fit_weighted": "dprelease.analysis",
    "design_matrix": "dprelease.analysis",
    "glm_effective_sample_size": "dprelease.analysis",
    "DPReleaseError": "dprelease.errors",
    "InputError": "dprelease.errors",
    "BudgetExceededError": "dprelease.errors",
    "UnreliableWeightsError": "dprelease.errors",
    "expectation_suite": "dprelease.expectations.suite",
}
__all__ = [
    "ABCDPConfig",
    "BudgetExceededError",
    "DPReleaseError",
    "InputError",
    "Ledger",
    "Release",
    "Schema",
    "SyntheticConfig",
    "TruncationConfig",
    "UnreliableWeightsError",
    "VerificationResult",
    "__version__",
    "design_matrix",
    "expectation_suite",
    "fit_weighted",
    "glm_effective_sample_size",
    "load_release",
    "load_schema",
    "publish",
    "verify_release",
    "weighted_mean",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dprelease' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
