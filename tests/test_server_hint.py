"""The fast path is the easy one (issue 19 item 17): without a configured Prefect server the
CLI says that it starts a temporary one and how to start a server once; with one it says
nothing. (The latency itself is `benchmarks/cli_latency.py`.)"""

from __future__ import annotations

import sys
import types

import pytest
from prefect.settings import PREFECT_API_URL, temporary_settings

from dprelease.cli import support


@pytest.mark.parametrize("url", [None, "http://127.0.0.1:4200/api"])
def test_the_cli_says_how_to_start_a_server_only_when_it_starts_a_temporary_one(
    monkeypatch, capsys, url
):
    monkeypatch.setitem(sys.modules, "fake_flows", types.SimpleNamespace(flow=lambda: "done"))
    monkeypatch.setattr(support, "prepare_prefect", lambda verbose: None)
    with temporary_settings(updates={PREFECT_API_URL: url}):
        assert support.run_flow("fake_flows:flow", verbose=False, what="release") == "done"
    err = capsys.readouterr().err
    if url is None:
        assert "starts a temporary one" in err and "make server" in err
    else:
        assert "temporary" not in err
