"""Where the privacy ledger lives: the --ledger URL, else $DPRELEASE_LEDGER_URL, else a
per-installation SQLite file (README "The ledger"); and how messages show a URL."""

from __future__ import annotations

import os
from pathlib import Path

LEDGER_URL_ENV = "DPRELEASE_LEDGER_URL"
HOME_ENV = "DPRELEASE_HOME"
IN_MEMORY_URL = "sqlite://"


def default_home() -> Path:
    """The per-installation data directory: $DPRELEASE_HOME, else $XDG_DATA_HOME/dprelease,
    else ~/.local/share/dprelease. Independent of --out and the working directory."""
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser().resolve()
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home).expanduser().resolve() / "dprelease"


def resolve_ledger_url(ledger_url: str | None = None) -> str:
    """--ledger, else $DPRELEASE_LEDGER_URL, else the SQLite file `ledger.sqlite` in
    `default_home()`. A dataset's lifetime cap lives in one ledger, so the default never
    depends on the output directory (a fresh `--out` must not mean a fresh budget)."""
    return (
        ledger_url
        or os.environ.get(LEDGER_URL_ENV)
        or f"sqlite:///{default_home() / 'ledger.sqlite'}"
    )


def shown_url(ledger_url: str) -> str:
    """The ledger's URL as messages and logs show it: without its password."""
    from sqlalchemy.engine import make_url

    return make_url(ledger_url).render_as_string(hide_password=True)
