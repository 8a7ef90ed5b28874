"""dprelease: differentially private synthetic releases with debiased importance weights,
PSIS diagnostics and a persistent privacy-budget ledger.

Importing this package is cheap: Prefect, torch, Opacus and OpenDP are imported
only where they are used.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dprelease")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"
