"""The Prefect API a command's flow run reports to: the one PREFECT_API_URL names, or a temporary
`prefect server start` this command starts as soon as it knows it will run a flow, so that its start-up
overlaps the command's own work (Prefect would start one itself only at the first flow run, in-process)."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

import httpx

HEALTH_POLL_S = 0.1
STOP_WAIT_S = 5.0
START_ATTEMPTS = 3  # a port chosen free can be taken before the server binds it


class ApiServerError(RuntimeError):
    """Prefect's temporary API server did not start; the message says why in one line."""


def configured_url() -> str | None:
    """The API that Prefect's settings name (PREFECT_API_URL, a profile), or None."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url or None


class TemporaryApiServer:
    """`prefect server start` on a loopback port, for this command's flow runs only."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._stderr: IO[bytes] | None = None
        self._attempts = 0

    def command(self, port: int) -> list[str]:
        prefect = Path(sys.executable).with_name("prefect")
        return [str(prefect) if prefect.exists() else "prefect", "server", "start", "--host", "127.0.0.1",
                "--port", str(port), "--no-ui", "--no-services", "--analytics-off"]

    def start(self) -> None:
        self.stop()
        self._attempts += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self._stderr = tempfile.TemporaryFile()
        env = {**os.environ, "PREFECT_SERVER_LOGGING_LEVEL": "ERROR", "PREFECT_LOGGING_TO_API_ENABLED": "false"}
        # A session of its own: a terminal's Ctrl-C (or a SIGTERM to the refresh's process group) must not take
        # the API away under the flow, whose engine would then retry reporting its state for minutes. It is
        # stopped with the command, and the watchdog stops it if the command is killed.
        self.process = subprocess.Popen(self.command(self.port), env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=self._stderr, start_new_session=True)

    def wait_ready(self, timeout_s: float) -> str:
        """Its API URL once it answers; ApiServerError if it exits START_ATTEMPTS times or times out."""
        if self.process is None:
            self.start()
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=5.0, trust_env=False) as client:  # loopback: no proxy applies
            while True:
                assert self.process is not None
                code = self.process.poll()
                if code is not None:
                    if self._attempts < START_ATTEMPTS:
                        self.start()
                        continue
                    raise ApiServerError(f"Prefect's temporary API server exited with code {code}"
                                         f"{self._stderr_tail()}")
                url = f"http://127.0.0.1:{self.port}/api"
                with suppress(httpx.TransportError):
                    if client.get(f"{url}/health").status_code == 200:
                        return url
                if time.monotonic() > deadline:
                    said = self._stderr_tail()
                    self.stop()
                    raise ApiServerError(f"Prefect's temporary API server did not answer within {timeout_s:g} s "
                                         f"(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS){said}")
                time.sleep(HEALTH_POLL_S)

    def _stderr_tail(self) -> str:
        assert self._stderr is not None  # started, not stopped yet
        self._stderr.seek(0)
        lines = [" ".join(line.split()) for line in self._stderr.read().decode(errors="replace").splitlines()]
        lines = [line for line in lines if line]
        if not lines:
            return ""
        # The exception behind a failed start-up, whose last words ("Application startup failed") say no cause.
        causes = [line for line in lines if re.match(r"[\w.]*(Error|Exception)\b[^:]*: ", line)]
        return f": {causes[-1]} ({lines[-1]})" if causes and causes[-1] != lines[-1] else f": {lines[-1]}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def start_if_needed() -> TemporaryApiServer | None:
    """A temporary server, started now, when this process's flow runs need one (no API, ephemeral allowed)."""
    from prefect.settings import get_current_settings

    if configured_url() or not get_current_settings().server.ephemeral.enabled:
        return None
    server = TemporaryApiServer()
    server.start()
    return server


def _local_only(record: logging.LogRecord) -> bool:
    """Keeps a record logged outside any flow run (a module's warning at import, a server thread's) off the API
    handler, which could not place it and would warn "attempted to send logs to the API without a flow run id"."""
    from prefect.context import FlowRunContext, TaskRunContext

    if not getattr(record, "flow_run_id", None) and FlowRunContext.get() is None and TaskRunContext.get() is None:
        record.send_to_api = False
    return True


def api_troubles_off_the_terminal(run_process: bool = False) -> None:
    """Prefect's complaints about its API stay off the terminal: "... without a flow run id" always (a record
    logged outside any flow run stays local); "--- Error logging to API ---" too in a `run_process`, a served or
    worker-run flow's own process, whose run still writes the warehouse when its API went away (the command
    line decides for its own process: shown with -v). The run's own log lines stay on the terminal. Idempotent."""
    from prefect.logging.handlers import APILogHandler

    if run_process:
        logging.raiseExceptions = False  # what Prefect's log worker asks before writing its API's failures
    for name in ("gpuledger", "prefect.extra"):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, APILogHandler) and _local_only not in handler.filters:
                handler.addFilter(_local_only)


@contextmanager
def environ_set(values: dict[str, str]) -> Iterator[None]:
    """Within: these environment variables (for this process and its children), each put back after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def settings_set(updates: dict[Any, Any], inherited: Iterable[Any] = ()) -> Iterator[None]:
    """Within: this process's Prefect settings `updates`; those `inherited` also in its environment, for its
    children."""
    from prefect.settings import temporary_settings

    with environ_set({setting.name: str(updates[setting]) for setting in inherited}), \
            temporary_settings(updates=updates):
        yield


@contextmanager
def api_url_set(url: str, to_api: bool = True) -> Iterator[str]:
    """Within: this process's Prefect settings and its environment (for its children) name `url` as the API;
    `to_api` False keeps the run logs out of it (and off the terminal when it is gone)."""
    from prefect.settings import PREFECT_API_URL, PREFECT_LOGGING_TO_API_ENABLED

    with settings_set({PREFECT_API_URL: url, PREFECT_LOGGING_TO_API_ENABLED: to_api}, inherited=[PREFECT_API_URL]):
        yield url


@contextmanager
def flow_api(server: TemporaryApiServer | None) -> Iterator[str | None]:
    """Within: the API of `server` once it answers, stopped on the way out; with none, the configured API."""
    if server is None:
        url = configured_url()
        if url:  # one that does not answer: one line here, not Prefect's traceback from the flow run
            try:
                with httpx.Client(timeout=10.0) as client:
                    client.get(f"{url.rstrip('/')}/health")  # any answer will do: Cloud's may ask for the key
            except (httpx.HTTPError, httpx.InvalidURL) as err:
                from gpuledger.warehouse.catalog import shown as without_password

                shown = without_password(url)
                raise ApiServerError(f"cannot reach the Prefect API at {shown} (PREFECT_API_URL): "
                                     f"{type(err).__name__}: {str(err).replace(url, shown)}") from None
        with api_lost_said(url, "(PREFECT_API_URL)"):
            yield url
        return
    from prefect.settings import get_current_settings

    # The loopback address reached directly, not through an HTTP(S)_PROXY of the environment (which Prefect's
    # client follows, and which cannot reach this machine's loopback).
    current = os.environ.get("no_proxy", os.environ.get("NO_PROXY"))
    unproxied = ",".join(filter(None, [current, "127.0.0.1"]))
    try:
        url = server.wait_ready(float(get_current_settings().server.ephemeral.startup_timeout_seconds))
        with (api_url_set(url, to_api=False), environ_set({"no_proxy": unproxied, "NO_PROXY": unproxied}),
              api_lost_said(url, "(the temporary one)")):
            yield url
    finally:
        server.stop()


@contextmanager
def api_lost_said(url: str | None, which: str, doing: str = "during the flow run",
                  then: str = "`gpuledger status` shows what the refresh wrote") -> Iterator[None]:
    """Within: the API going away (under a flow run, Prefect's client raises httpx's error when it reports the
    run's state) is one line, ApiServerError, not Prefect's traceback; the refresh's own writes stand."""
    try:
        yield
    except httpx.TransportError as err:
        from gpuledger.warehouse.catalog import shown as without_password
        from gpuledger.warehouse.store import error_text

        said = error_text(err)  # a connection closed mid-answer: the async client's ReadError has no text of its own
        shown, said = (without_password(url), said.replace(url, without_password(url))) if url else ("", said)
        said = f"{type(err).__name__}: {said}" if said else type(err).__name__
        raise ApiServerError(f"lost the Prefect API at {shown} {which} {doing}: {said}; {then}") from None
