"""`dprelease server start|stop|status` (`make server`): the server outlives the command that
started it, even when it writes output afterwards; a live pid file means "already running"; a
stale one is replaced. The machinery runs with a stand-in server (a small HTTP server that
answers the health check and, like Prefect's, dies when a write to its output fails); the
deployment test (tests/test_deployment_schedule.py) starts Prefect's real server with it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from dprelease.cli.server import ServerFiles, answers, recorded, start, status, stop
from dprelease.errors import DPReleaseError, InputError

# Answers /api/health; writes a line to stdout and stderr every 50 ms and exits as soon as one
# write fails (a pipe whose reader is gone), as Prefect's server does.
STAND_IN = """
import http.server, os, sys, threading, time
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/api/health" else 404)
        self.end_headers()
        self.wfile.write(b"true")
    def log_message(self, *args):
        pass
def chatter():
    while True:
        try:
            os.write(1, b"stdout line\\n")
            os.write(2, b"stderr line\\n")
        except OSError:
            os._exit(1)
        time.sleep(0.05)
threading.Thread(target=chatter, daemon=True).start()
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def port() -> int:
    return _free_port()


@pytest.fixture
def files(tmp_path):
    files = ServerFiles(tmp_path / "prefect-home")
    yield files
    stop(files)


def _stand_in(port: int) -> list[str]:
    return [sys.executable, "-c", STAND_IN, str(port)]


def _start_from_a_child(files: ServerFiles, port: int) -> None:
    """`start` in a process of its own that exits, as `make server` runs it."""
    code = (
        "from pathlib import Path; from dprelease.cli.server import ServerFiles, start; "
        f"start(ServerFiles(Path({str(files.home)!r})), '127.0.0.1', {port}, "
        f"command={_stand_in(port)!r}, timeout=30)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)


def test_a_started_server_outlives_the_command_and_keeps_writing_its_log(files, port):
    _start_from_a_child(files, port)
    running, stale = recorded(files)
    assert running is not None and not stale
    time.sleep(1.0)  # the stand-in writes 20 lines a second after its starter exited
    assert answers("127.0.0.1", port) and recorded(files)[0] == running
    log = files.log_file.read_text()
    assert "stdout line" in log and "stderr line" in log
    assert os.getsid(running.pid) == running.pid  # its own process session: no hang-up
    assert status(files)[0]
    assert "stopped the Prefect server" in stop(files)
    assert not files.pid_file.exists() and not answers("127.0.0.1", port)
    assert recorded(files) == (None, False) and not status(files)[0]


def test_the_ui_is_told_the_api_of_the_port_it_was_started_on(files, port, monkeypatch):
    """Prefect's UI calls the API at PREFECT_UI_API_URL, which defaults to the profile's
    PREFECT_API_URL or port 4200, whatever port the server listens on."""
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    monkeypatch.delenv("PREFECT_UI_API_URL", raising=False)
    shows_env = "import os; print('UI=' + os.environ['PREFECT_UI_API_URL'], flush=True)\n"
    start(files, port=port, command=[sys.executable, "-c", shows_env + STAND_IN, str(port)])
    assert f"UI=http://127.0.0.1:{port}/api" in files.log_file.read_text()


def test_a_running_server_is_reported_not_started_twice(files, port):
    url, first = start(files, port=port, command=_stand_in(port), timeout=30)
    assert url == f"http://127.0.0.1:{port}/api" and "answers at" in first
    pid = recorded(files)[0].pid
    again_url, again = start(files, port=port, command=_stand_in(port), timeout=30)
    assert again_url == url and "started earlier answers" in again and f"pid {pid}" in again
    assert recorded(files)[0].pid == pid


def test_a_stale_pid_file_is_replaced_by_a_new_server(files, port):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    files.home.mkdir(parents=True)
    stale = {"pid": ended.pid, "host": "127.0.0.1", "port": port, "command": _stand_in(port)}
    files.pid_file.write_text(json.dumps(stale))
    assert recorded(files) == (None, True)
    assert "stale" in status(files)[1]
    _, line = start(files, port=port, command=_stand_in(port), timeout=30)
    assert "removed the stale pid file" in line
    running, is_stale = recorded(files)
    assert running is not None and running.pid != ended.pid and not is_stale


def test_a_pid_reused_by_another_command_is_stale(files, port):
    files.home.mkdir(parents=True)
    other = {"pid": os.getpid(), "host": "127.0.0.1", "port": port, "command": ["prefect"]}
    files.pid_file.write_text(json.dumps(other))
    assert recorded(files) == (None, True)
    assert "removed the stale pid file" in stop(files) and not files.pid_file.exists()


def test_a_server_that_exits_at_once_is_one_error_naming_its_log(files, port):
    with pytest.raises(DPReleaseError, match="exited \\(code 3\\) before answering") as error:
        start(files, port=port, command=[sys.executable, "-c", "exit(3)"], timeout=30)
    assert str(files.log_file) in str(error.value) and not files.pid_file.exists()


def test_a_port_taken_by_another_program_is_refused(files):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InputError, match=f"port {port} .* in use by another program"):
            start(files, port=port, command=_stand_in(port), timeout=30)
    assert not files.pid_file.exists()


@pytest.mark.prefect
def test_a_port_whose_closed_connections_linger_in_time_wait_is_free(files):
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server side closes first: its end stays in TIME_WAIT
        client.close()
    url, _ = start(files, port=port, command=_stand_in(port), timeout=30)
    assert answers("127.0.0.1", port) and url.endswith(f":{port}/api")
