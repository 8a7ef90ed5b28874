"""The fast path is the easy one: without a configured Prefect server the CLI says that it
starts a temporary one and how to start a server once; with a configured server that answers it
says nothing; with one that does not answer it fails with one line saying how to start it,
before the flow (and so before any data is read)."""

from __future__ import annotations

import socket
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import typer
from prefect.settings import PREFECT_API_URL, temporary_settings

from dprelease.cli import support


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path == "/api/health" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"true")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_flow(monkeypatch):
    runs: list[str] = []
    flow = types.SimpleNamespace(flow=lambda: runs.append("ran") or "done")
    monkeypatch.setitem(sys.modules, "fake_flows", flow)
    monkeypatch.setattr(support, "prepare_prefect", lambda verbose: None)
    return runs


def test_without_a_server_the_cli_says_it_starts_a_temporary_one(fake_flow, capsys):
    with temporary_settings(updates={PREFECT_API_URL: None}):
        assert support.run_flow("fake_flows:flow", verbose=False, what="release") == "done"
    err = capsys.readouterr().err
    assert "starts a temporary one" in err and "make server" in err


def test_a_running_server_is_used_without_a_word(fake_flow, capsys):
    server = HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/api"
        with temporary_settings(updates={PREFECT_API_URL: url}):
            assert support.run_flow("fake_flows:flow", verbose=False, what="release") == "done"
    finally:
        server.shutdown()
    assert "temporary" not in capsys.readouterr().err and fake_flow == ["ran"]


def test_a_configured_server_that_is_down_is_one_line_before_the_flow(
    fake_flow, capsys, monkeypatch
):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)  # configured in the profile only
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    with temporary_settings(updates={PREFECT_API_URL: url}), pytest.raises(typer.Exit) as exit_:
        support.run_flow("fake_flows:flow", verbose=False, what="release")
    err = capsys.readouterr().err
    assert exit_.value.exit_code == 2 and fake_flow == []
    assert f"cannot reach the Prefect server at {url}" in err and "make server" in err
    assert "Traceback" not in err
    assert "prefect config unset PREFECT_API_URL" in err  # a setting of the Prefect profile


def test_a_dead_server_named_in_the_environment_says_to_unset_the_variable(
    fake_flow, capsys, monkeypatch
):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    monkeypatch.setenv("PREFECT_API_URL", url)
    with temporary_settings(updates={PREFECT_API_URL: url}), pytest.raises(typer.Exit):
        support.run_flow("fake_flows:flow", verbose=False, what="release")
    err = " ".join(capsys.readouterr().err.split())
    assert "`unset PREFECT_API_URL` in this shell" in err and "config unset" not in err
