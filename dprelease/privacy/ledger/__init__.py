"""The persistent privacy-budget ledger (docs/privacy-model.md section 7).

- `ledger`: `Ledger`, the reservation protocol (check, reserve atomically, commit);
- `admission`: whether the cap admits a release under the enforcing accountant;
- `tables`: the SQLAlchemy tables and entries (`LedgerEntry`);
- `location`: which ledger a process uses (`resolve_ledger_url`);
- `view`: what `dprelease ledger show` and the release report say of it.
"""

from dprelease.privacy.ledger.ledger import RESERVED, SPENT, Ledger
from dprelease.privacy.ledger.location import LEDGER_URL_ENV, resolve_ledger_url, shown_url
from dprelease.privacy.ledger.tables import LedgerEntry

__all__ = [
    "LEDGER_URL_ENV",
    "RESERVED",
    "SPENT",
    "Ledger",
    "LedgerEntry",
    "resolve_ledger_url",
    "shown_url",
]
