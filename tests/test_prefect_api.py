"""The Prefect API of a command's flow runs (flows/prefect_api.py): the configured one, or a
temporary server the command starts itself, with real processes."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import duckdb
import psutil
import pytest
from typer.testing import CliRunner

from gpuledger.flows import prefect_api
from gpuledger.flows.cli import app

# The same newcomer's path as README's first command: no API configured anywhere.
NO_API_SCRIPT = r"""
import json, os, sys
from gpuledger.flows import prefect_api
from prefect import flow
from prefect.client.orchestration import get_client

@flow(name="prefect-api-probe")
def probe() -> str:
    from prefect.runtime import flow_run
    return flow_run.id

server = prefect_api.start_if_needed()
with prefect_api.flow_api(server) as url:
    pid = server.process.pid
    run_id = probe()
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
print(json.dumps({
    "url": url, "port": server.port, "run_state": run.state.type.value,
    "server_module_imported": "prefect.server.api.server" in sys.modules,
    "stopped": server.process is None, "pid": pid, "api_url_env_after": os.environ.get("PREFECT_API_URL"),
}))
"""


def no_api_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")  # its own database, not the user's
    return env


def test_a_temporary_server_serves_the_flow_run_and_is_stopped_after(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", NO_API_SCRIPT], env=no_api_env(tmp_path), capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["url"] == f"http://127.0.0.1:{doc['port']}/api"
    assert doc["run_state"] == "COMPLETED"  # the run the server recorded, read back from it
    # The reason for starting it ourselves: the server's modules stay out of this process.
    assert doc["server_module_imported"] is False
    assert doc["stopped"] is True and doc["api_url_env_after"] is None
    assert not psutil.pid_exists(doc["pid"])
    # Prefect's database went where PREFECT_HOME says: the server had this process's settings.
    assert (tmp_path / "prefect-home" / "prefect.db").exists()


def test_a_temporary_server_is_reached_directly_under_a_proxy_of_the_environment(tmp_path: Path) -> None:
    """HTTP(S)_PROXY set (a corporate network, a CI runner) and no NO_PROXY: Prefect's client sent the flow run's
    calls for the temporary loopback server through the proxy, which cannot reach it, and every refresh (a
    replay too) ended in a 457-line traceback, `RuntimeError: Failed to reach API at http://127.0.0.1:.../api/`.
    The loopback server is reached directly; the proxy hears nothing, and NO_PROXY is as it was after."""
    heard: list[str] = []

    class Proxy(http.server.BaseHTTPRequestHandler):  # a proxy that cannot reach this machine's loopback
        def do_GET(self) -> None:
            heard.append(self.path)
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_PATCH = do_PUT = do_CONNECT = do_GET

        def log_message(self, *args: object) -> None:
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    env = {k: v for k, v in no_api_env(tmp_path).items() if k.lower() not in ("no_proxy", "all_proxy")}
    env["HTTP_PROXY"] = env["HTTPS_PROXY"] = f"http://127.0.0.1:{proxy.server_address[1]}"
    script = NO_API_SCRIPT.replace('"api_url_env_after"', '"no_proxy_after": [os.environ.get("no_proxy"), '
                                   'os.environ.get("NO_PROXY")], "api_url_env_after"')
    try:
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=240)
    finally:
        proxy.shutdown()
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["run_state"] == "COMPLETED"
    assert heard == []
    assert doc["no_proxy_after"] == [None, None] and doc["api_url_env_after"] is None


@contextlib.contextmanager
def answering_api(asked: list[str]) -> Iterator[int]:
    """A loopback server answering every GET 200, as a running Prefect API does (its port; paths in `asked`)."""
    class Api(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    api = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    try:
        yield api.server_address[1]
    finally:
        api.shutdown()


def test_a_configured_api_is_used_and_nothing_is_started() -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    asked: list[str] = []
    with answering_api(asked) as port:
        configured = f"http://127.0.0.1:{port}/api"
        with temporary_settings(updates={PREFECT_API_URL: configured}):
            assert prefect_api.start_if_needed() is None
            with prefect_api.flow_api(None) as url:
                assert url == configured
    assert asked == ["/api/health"]


def test_a_configured_api_that_does_not_answer_is_one_line_without_its_password(tmp_path: Path) -> None:
    # PREFECT_API_URL left set for a `prefect server` that is down: refresh had printed Prefect's traceback
    # (440 lines, "RuntimeError: Failed to reach API at ...").
    from prefect.settings import PREFECT_API_URL, temporary_settings

    db = tmp_path / "ledger.duckdb"
    with temporary_settings(updates={PREFECT_API_URL: "http://bob:hunter2@127.0.0.1:9/api"}):
        result = CliRunner().invoke(app, ["refresh", "--replay", "--db", str(db), "-p", "lambda"])
    assert result.exit_code == 1 and (result.exception is None or isinstance(result.exception, SystemExit))
    assert result.output.strip() == ("error: cannot reach the Prefect API at http://127.0.0.1:9/api (PREFECT_API_URL): "
                                     "ConnectError: [Errno 111] Connection refused")
    assert not db.exists()


class ScriptedServer(prefect_api.TemporaryApiServer):
    """The real start/wait/stop with another program in the server's place."""

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code
        self.started: list[subprocess.Popen[bytes]] = []

    def command(self, port: int) -> list[str]:
        return [sys.executable, "-c", self.code]

    def start(self) -> None:
        super().start()
        assert self.process is not None
        self.started.append(self.process)


def test_an_api_connection_closed_mid_answer_is_said_without_an_empty_reason() -> None:
    # Prefect's async client loses its server mid-answer: httpx's ReadError carries no text. The line had read
    # "...while serving: ReadError: ; serving stopped: ...".
    import httpx

    with pytest.raises(prefect_api.ApiServerError) as raised:
        with prefect_api.api_lost_said("http://127.0.0.1:4200/api", "(PREFECT_API_URL)", "while serving",
                                       "serving stopped"):
            raise httpx.ReadError("")
    assert str(raised.value) == ("lost the Prefect API at http://127.0.0.1:4200/api (PREFECT_API_URL) while serving: "
                                 "ReadError; serving stopped")
    with pytest.raises(prefect_api.ApiServerError) as raised:  # the reason is in the chain behind it
        with prefect_api.api_lost_said("http://127.0.0.1:4200/api", "(PREFECT_API_URL)", "while serving",
                                       "serving stopped"):
            try:
                raise ConnectionResetError(104, "Connection reset by peer")
            except ConnectionResetError as reset:
                raise httpx.ReadError("") from reset
    assert str(raised.value) == ("lost the Prefect API at http://127.0.0.1:4200/api (PREFECT_API_URL) while serving: "
                                 "ReadError: [Errno 104] Connection reset by peer; serving stopped")


def test_a_server_that_exits_is_retried_then_said_in_one_line() -> None:
    server = ScriptedServer("import sys; sys.stderr.write('warming up\\nERROR: [Errno 98] address already in use\\n');"
                            " sys.exit(3)")
    with pytest.raises(prefect_api.ApiServerError) as err:
        server.wait_ready(60)
    assert str(err.value) == ("Prefect's temporary API server exited with code 3: "
                              "ERROR: [Errno 98] address already in use")
    assert len(server.started) == prefect_api.START_ATTEMPTS == 3


def test_a_server_that_fails_its_start_up_says_the_exception_behind_it() -> None:
    # What `prefect server start` prints when its database cannot be made (HOME=/nonexistent, a cron job's
    # system user): the message had been only its last line, "Application startup failed. Exiting."
    said = ("Traceback (most recent call last):\n  File \"aiosqlite/core.py\", line 466, in connector\n"
            "    return sqlite3.connect(loc, **kwargs)\n"
            "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) unable to open database file\n"
            "(Background on this error at: https://sqlalche.me/e/21/e3q8)\n"
            "ERROR:    Application startup failed. Exiting.\n")
    server = ScriptedServer(f"import sys; sys.stderr.write({said!r}); sys.exit(3)")
    with pytest.raises(prefect_api.ApiServerError) as err:
        server.wait_ready(60)
    assert str(err.value) == ("Prefect's temporary API server exited with code 3: sqlalchemy.exc.OperationalError: "
                              "(sqlite3.OperationalError) unable to open database file "
                              "(ERROR: Application startup failed. Exiting.)")


def test_a_server_that_never_answers_times_out_and_is_killed() -> None:
    server = ScriptedServer("import sys, time; sys.stderr.write('stuck in migrations\\n'); sys.stderr.flush();"
                            " time.sleep(120)")
    server.start()
    with pytest.raises(prefect_api.ApiServerError) as err:
        server.wait_ready(1.5)
    assert str(err.value) == ("Prefect's temporary API server did not answer within 1.5 s "
                              "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS): stuck in migrations")
    assert server.process is None and server.started[0].poll() is not None  # stopped, not left behind


def test_the_refresh_command_says_a_failed_server_in_one_line(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[ScriptedServer] = []

    def failing() -> ScriptedServer:
        server = ScriptedServer("import sys; sys.stderr.write('boom\\n'); sys.exit(1)")
        server.start()
        started.append(server)
        return server

    monkeypatch.setattr(prefect_api, "start_if_needed", failing)
    db = tmp_path / "ledger.duckdb"
    result = CliRunner().invoke(app, ["refresh", "--replay", "--db", str(db), "-p", "lambda"])
    assert result.exit_code == 1
    assert result.output.strip() == "error: Prefect's temporary API server exited with code 1: boom"
    assert all(p.poll() is not None for p in started[0].started)
    if db.exists():  # nothing was fetched, so nothing was loaded
        con = duckdb.connect(str(db), read_only=True)
        assert con.execute("select count(*) from offers").fetchone() == (0,)
        con.close()


# What the process Prefect starts for a served or worker-run flow does (`python -m prefect.engine`): its logging set
# up with gpuledger among the extra loggers (`gpuledger serve` names it), then the flow's module imported (its
# settings read: a misspelt one is warned about, outside any flow run), then the run logs while its API is gone.
RUN_PROCESS_SCRIPT = r"""
import logging, uuid
from prefect.logging.configuration import setup_logging
setup_logging()
from gpuledger.flows import refresh, prefect_api
prefect_api.api_troubles_off_the_terminal(run_process=True)  # what the flow does first in a deployment's run
from prefect.logging.handlers import APILogHandler
logging.getLogger("gpuledger.refresh").warning("lambda: failed", extra={"flow_run_id": str(uuid.uuid4())})
APILogHandler().flush()
"""


def test_a_run_process_keeps_prefect_api_complaints_off_its_terminal(tmp_path: Path) -> None:
    # Had been, on `gpuledger serve`'s terminal: "UserWarning: Logger 'gpuledger.settings' attempted to send logs
    # to the API without a flow run id ..." (and the warning's source line), and, once the API went away mid-run,
    # "--- Error logging to API ---" then "All connection attempts failed" glued to the next log line.
    env = {**no_api_env(tmp_path), "PREFECT_API_URL": "http://127.0.0.1:9/api", "PREFECT_LOGGING_LEVEL": "INFO",
           "PREFECT_LOGGING_EXTRA_LOGGERS": "gpuledger", "GPULEDGER_TASK_TIMOUT_S": "5"}
    done = subprocess.run([sys.executable, "-c", RUN_PROCESS_SCRIPT], capture_output=True, text=True, timeout=120,
                          env=env)
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    assert "without a flow run id" not in shown and "UserWarning" not in shown, shown
    assert "Error logging to API" not in shown and "All connection attempts failed" not in shown, shown
    # the run's own lines stay, each once
    assert shown.count("ignoring unknown settings: GPULEDGER_TASK_TIMOUT_S (did you mean GPULEDGER_TASK_TIMEOUT_S?)") \
        == 1, shown
    assert shown.count("lambda: failed") == 1, shown


def test_an_api_that_goes_away_during_the_flow_run_is_one_line(tmp_path: Path) -> None:
    # `gpuledger refresh` with PREFECT_API_URL set, its `prefect server` stopped mid-refresh: the refresh wrote the
    # warehouse, then Prefect's client, reporting the run's final state, raised httpx's ConnectError through the
    # command: a 400-line traceback ("ConnectError: [Errno 111] Connection refused"), exit 1.
    import httpx
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with answering_api([]) as port:  # answers the check at the start
        configured = f"http://user:secret@127.0.0.1:{port}/api"
        with temporary_settings(updates={PREFECT_API_URL: configured}), \
                pytest.raises(prefect_api.ApiServerError) as raised:
            with prefect_api.flow_api(None):
                raise httpx.ConnectError(f"[Errno 111] Connection refused ({configured}/flow_runs)")
    said = str(raised.value)
    assert said == (f"lost the Prefect API at http://127.0.0.1:{port}/api (PREFECT_API_URL) "
                    "during the flow run: ConnectError: [Errno 111] Connection refused "
                    f"(http://127.0.0.1:{port}/api/flow_runs); "
                    "`gpuledger status` shows what the refresh wrote")
    assert "secret" not in said and "\n" not in said
