"""Great Expectations (GX): the public schema as an Expectation Suite, and a table checked
against it.

- `suite`: the suite, derived from the public schema alone (it may be published);
- `validation`: GX's validation of a table against it, in the form a release stores;

Everything checked here inside dprelease is public or a DP output (the schema, a release's
synthetic table), so its results may be published. The real table stays with dprelease's own
validator (`dprelease.io.validate`); a curator may run the exported suite on it inside the
trust boundary, and those results are never published: they are validation statistics of the
real data (docs/privacy-model.md section 8; docs/how-to/great-expectations.md).

GX is the optional `gx` extra (`GX_EXTRA`). Importing this package imports nothing else:
`gx_installed` asks the import system without importing GX; `require_gx` imports it or raises
`MissingExtraError` (one line naming the extra, exit 2).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from dprelease.errors import InputError

GX_MODULE = "great_expectations"
GX_EXTRA = "pip install 'dprelease[gx]'"
GX_MISSING = f"Great Expectations is not installed: {GX_EXTRA}"


class MissingExtraError(InputError):
    """A command needs Great Expectations and the `gx` extra is not installed (exit 2)."""


def gx_installed() -> bool:
    """Whether Great Expectations can be imported, without importing it."""
    try:
        return importlib.util.find_spec(GX_MODULE) is not None
    except (ImportError, ValueError):
        return False


def require_gx() -> ModuleType:
    """The `great_expectations` module, or `MissingExtraError` naming the extra."""
    try:
        return importlib.import_module(GX_MODULE)
    except ImportError:
        raise MissingExtraError(GX_MISSING) from None
