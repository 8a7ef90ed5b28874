"""`dprelease server start|stop|status`: a local Prefect server that outlives the command
that started it (`make server` and `make server-stop` call it).

Prefect 3.8's `prefect server start --background` starts the server with its stdout and
stderr piped to the starting command, which exits at once: the server's first log line after
that meets a pipe nobody reads, and the failed write ends the server (without network,
Prefect's telemetry error does it 20-40 s after the start), leaving its `server.pid` behind
for the next start to refuse. `start` runs `prefect server start` in the foreground mode
instead, in a process session of its own (no terminal hang-up reaches it), stdin from /dev/null,
stdout and stderr appended to a log file; it records the process in a pid file, waits for
the server's health check (`/api/health`; 15-25 s on a small machine) and then points the
active Prefect profile at it (`PREFECT_API_URL`), so every later `dprelease` run uses it.
Prefect's telemetry is off unless the environment says otherwise, as for the CLI's
temporary server (`support.prepare_prefect`).

Files (`ServerFiles`), in PREFECT_HOME: `dprelease-server.pid` (JSON: pid, host, port and
command line) and `dprelease-server.log`. A pid file whose process is gone, or whose pid now
belongs to another command line, is stale: `start` removes it and starts a server, `stop`
removes it; a live one makes `start` say where the server runs. `stop` sends SIGTERM to the
server's process session (SIGKILL after `STOP_TIMEOUT` s) and leaves the profile pointing at the
stopped server, so the next `start` brings it back; until then a release says in one line
that the configured server does not answer (`support.check_prefect_server`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from dprelease.errors import DPReleaseError, InputError

HOST = "127.0.0.1"
DEFAULT_PORT = 4200
START_TIMEOUT = 120.0  # seconds: Prefect's server takes 15-25 s here, longer on a busy machine
STOP_TIMEOUT = 20.0
PID_FILE = "dprelease-server.pid"
LOG_FILE = "dprelease-server.log"


@dataclass(frozen=True)
class ServerFiles:
    """The pid file and the log file of the server started from this PREFECT_HOME."""

    home: Path

    @property
    def pid_file(self) -> Path:
        return self.home / PID_FILE

    @property
    def log_file(self) -> Path:
        return self.home / LOG_FILE


@dataclass(frozen=True)
class Running:
    """A server process recorded in the pid file."""

    pid: int
    host: str
    port: int
    command: list[str]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def server_command(host: str, port: int) -> list[str]:
    """Prefect's server in the foreground mode (it serves in this very process)."""
    return [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)]


def api_url(host: str, port: int) -> str:
    return f"http://{host}:{port}/api"


def answers(host: str, port: int) -> bool:
    """Whether a Prefect API answers its health check at host:port."""
    try:
        with urllib.request.urlopen(f"{api_url(host, port)}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _alive(pid: int, command: list[str]) -> bool:
    """Whether process `pid` runs `command` (not a zombie, not a reused pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: the pid was reused
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.parent.exists():
        return True  # no /proc: the signal check is all there is
    try:
        return cmdline.read_bytes().split(b"\0")[:-1] == [part.encode() for part in command]
    except OSError:
        return False


def recorded(files: ServerFiles) -> tuple[Running | None, bool]:
    """The live server of the pid file, and whether the pid file is stale (present, but its
    process gone or the pid reused)."""
    try:
        data = json.loads(files.pid_file.read_text())
        running = Running(int(data["pid"]), str(data["host"]), int(data["port"]), data["command"])
    except FileNotFoundError:
        return None, False
    except (OSError, ValueError, KeyError, TypeError):
        return None, True  # unreadable (e.g. Prefect's bare pid format): not ours to trust
    if _alive(running.pid, running.command):
        return running, False
    return None, True


def _port_free(host: str, port: int) -> bool:
    """Whether a server could listen on host:port. SO_REUSEADDR, as Prefect's server (uvicorn)
    binds: connections of a stopped server that linger in TIME_WAIT do not take the port."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def start(
    files: ServerFiles,
    host: str = HOST,
    port: int = DEFAULT_PORT,
    *,
    command: list[str] | None = None,
    timeout: float = START_TIMEOUT,
    settings: dict[str, str] | None = None,
) -> tuple[str, str]:
    """Start a detached server unless one runs (module docstring); return its API URL and a
    line saying what happened. `command`: the server's command line (default
    `server_command`); `settings`: environment variables of the server's process on top of
    this process's environment. Raises InputError when the port is taken by something that
    is not a Prefect server, DPReleaseError when the server exits or does not answer in
    `timeout` s."""
    running, stale = recorded(files)
    if running is not None:
        state = "answers" if answers(running.host, running.port) else "is starting"
        return api_url(running.host, running.port), (
            f"the Prefect server started earlier {state} at {running.url} (pid {running.pid}; "
            f"log {files.log_file}); `dprelease server stop` stops it"
        )
    note = ""
    if stale:
        files.pid_file.unlink(missing_ok=True)
        note = f" (removed the stale pid file {files.pid_file}: its process had ended)"
    if answers(host, port):
        return api_url(host, port), (
            f"a Prefect server not started by `dprelease server start` already answers at "
            f"http://{host}:{port}{note}; stop it the way it was started"
        )
    if not _port_free(host, port):
        raise InputError(f"port {port} on {host} is in use by another program: pass --port")
    command = command or server_command(host, port)
    files.home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **(settings or {})}
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # The UI asks its server for the API's address: Prefect derives it from the active
    # profile's PREFECT_API_URL (or port 4200), not from `--port`; name this server's.
    env.setdefault("PREFECT_UI_API_URL", api_url(host, port))
    with files.log_file.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    record = {"pid": process.pid, "host": host, "port": port, "command": command}
    files.pid_file.write_text(json.dumps(record))
    deadline = time.monotonic() + timeout
    while not answers(host, port):
        code = process.poll()
        if code is not None:
            files.pid_file.unlink(missing_ok=True)
            raise DPReleaseError(
                f"the Prefect server exited (code {code}) before answering; its log: "
                f"{files.log_file}"
            )
        if time.monotonic() > deadline:
            raise DPReleaseError(
                f"the Prefect server (pid {process.pid}) did not answer within {timeout:.0f} s; "
                f"its log: {files.log_file}; `dprelease server stop` stops it"
            )
        time.sleep(0.5)
    return api_url(host, port), (
        f"the Prefect server answers at http://{host}:{port} (UI and API; pid {process.pid}, "
        f"log {files.log_file}){note}; `dprelease server stop` stops it"
    )


def _signal_session(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)  # the server leads its own process session and group


def _reap(pid: int) -> None:
    """Collect the exit status when the server is this process's child (tests)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop(files: ServerFiles, timeout: float = STOP_TIMEOUT) -> str:
    """Stop the server of the pid file and remove the file; return what happened."""
    running, stale = recorded(files)
    if running is None:
        files.pid_file.unlink(missing_ok=True)
        gone = f" (removed the stale pid file {files.pid_file})" if stale else ""
        return f"no Prefect server started by `dprelease server start` is running{gone}"
    _signal_session(running.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(running.pid, running.command):
        _reap(running.pid)
        if time.monotonic() > deadline:
            _signal_session(running.pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.2)
    files.pid_file.unlink(missing_ok=True)
    return (
        f"stopped the Prefect server at {running.url} (pid {running.pid}); the Prefect "
        "profile still points at it: `dprelease server start` starts it again, `prefect "
        "config unset PREFECT_API_URL` lets each run start a temporary one"
    )


def status(files: ServerFiles) -> tuple[bool, str]:
    """Whether the server of the pid file answers, and a line saying so."""
    running, stale = recorded(files)
    if running is None:
        gone = " (its pid file is stale: the process ended)" if stale else ""
        return False, f"no Prefect server started by `dprelease server start` is running{gone}"
    if answers(running.host, running.port):
        return True, f"the Prefect server answers at {running.url} (pid {running.pid})"
    return False, (
        f"the Prefect server (pid {running.pid}) runs but does not answer at {running.url} "
        f"yet; its log: {files.log_file}"
    )


def prefect_files() -> ServerFiles:
    """The files under the active PREFECT_HOME (imports Prefect's settings)."""
    from prefect.settings import get_current_settings

    return ServerFiles(Path(get_current_settings().home))


server_app = typer.Typer(
    help="A local Prefect server in the background, shared by every later run.",
    no_args_is_help=True,
)
PortOption = Annotated[int, typer.Option("--port", help="Port on 127.0.0.1.")]


@server_app.command(
    "start",
    epilog="Exit codes: 0 the server answers; 1 it did not come up (see its log); 2 the port "
    "is taken by another program.",
)
def start_command(port: PortOption = DEFAULT_PORT) -> None:
    """Start a detached local Prefect server and point the Prefect profile at it.

    Its log and pid file are in PREFECT_HOME; waits until it answers; says so and does
    nothing else when it already runs."""
    from dprelease.cli.support import expected_errors, stderr

    with expected_errors():
        url, line = start(prefect_files(), HOST, port)
        from prefect.settings import PREFECT_API_URL, update_current_profile

        profile = update_current_profile({PREFECT_API_URL: url})
    stderr.print(line, highlight=False, soft_wrap=True)
    stderr.print(
        f"Prefect profile {profile.name!r}: PREFECT_API_URL={url}", highlight=False, soft_wrap=True
    )


@server_app.command("stop")
def stop_command() -> None:
    """Stop the server `dprelease server start` started."""
    from dprelease.cli.support import stderr

    stderr.print(stop(prefect_files()), highlight=False, soft_wrap=True)


@server_app.command("status", epilog="Exit codes: 0 it answers; 1 it does not.")
def status_command() -> None:
    """Say whether the server `dprelease server start` started answers."""
    from dprelease.cli.support import stderr

    up, line = status(prefect_files())
    stderr.print(line, highlight=False, soft_wrap=True)
    if not up:
        raise typer.Exit(1)
