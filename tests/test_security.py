"""Security: secrets stay secret, `gpuledger sql` stays in its box, exports stay inert, crawls stay polite.

Secrets. Canary values are planted where the providers' standard chains look (env vars, an
Application Default Credentials file whose token endpoint is a loopback server), each provider
runs in *live* mode against the loopback replay server (so the secret-bearing code paths run:
the keys are really sent, which the test checks on the server's side), and then nothing the
project writes may hold a canary: log lines, exception texts, warehouse tables, exported files,
Prefect's artifact and stored logs, a recording. A second round makes every server answer 403
echoing the request back (headers, URL, body), the worst case for error messages.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
import traceback
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote, unquote

import duckdb
import pytest

from gpuledger import flows  # noqa: F401  (environment defaults)
from gpuledger.adapters.base import SourceContext, SourceError, redact, secret_env_vars
from gpuledger.adapters.registry import specs
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer, Request, load_manifest
from gpuledger.adapters.registry import source_module
from gpuledger.flows.fetch import describe_failure
from gpuledger.spiders import coreweave, hyperstack
from tests.builders import load, scraped, shared_prefect_server
from tests.faults.shapes import _records, _value, load_shape
from tests.conftest import replay_context
from gpuledger.warehouse.export import export_snapshot
from gpuledger.warehouse.store import AnomalyPolicy, open_reader, utcnow

# One canary per secret variable a registered source declares (ProviderSpec.secret_env_vars), so a
# new provider's key is covered with no edit here. Some are shaped like the real thing.
SHAPED = {
    "LAMBDA_API_KEY": "secret_lambda_CANARY1a2b3c4d5e6f",
    "RUNPOD_API_KEY": "rpa_CANARY7g8h9i0j1k2l3m",
    "VAST_API_KEY": "vast_CANARY4n5o6p7q8r9s",
    # Built from parts: the whole is shaped like a real access key id (AKIA + 16), which secret
    # scanners rightly flag in a repository; it is a canary that only ever goes to loopback.
    "AWS_ACCESS_KEY_ID": "AKIA" + "CANARY0T1U2V3W4X",
    "AWS_SECRET_ACCESS_KEY": "CANARYsecretY5Z6a7b8c9d0e1f2g3h4i5j6k7l8",
    "AWS_SESSION_TOKEN": "CANARYsessionm9n0o1p2q3r4s5t6u7v8w9",
    "GOOGLE_API_KEY": "AIzaCANARYx0y1z2A3B4C5D6",
}
SECRET_OWNERS = {name: spec.name for spec in specs() for name in spec.secret_env_vars}
CANARY = {name: SHAPED.get(name, f"CANARY-{name.lower()}-Q7r8S9t0") for name in sorted(SECRET_OWNERS)}
ADC_SECRETS = {"client_secret": "CANARY-client-secret-E7F8G9", "refresh_token": "1//CANARY-refresh-H0I1J2K3"}
ACCESS_TOKEN = "ya29.CANARY-access-L4M5N6O7"
ALL_CANARIES = [*CANARY.values(), *ADC_SECRETS.values(), ACCESS_TOKEN]
API_PROVIDERS = tuple(sorted({owner for owner in SECRET_OWNERS.values()}))
SENT_NOT = {"AWS_SECRET_ACCESS_KEY"}  # a signing key: only the signature made with it travels


# Per source with a key: a text of its recorded answers that reaches its offers (an instance type,
# a display name, a city). The live round plants the source's own key beside it, as a server
# quoting the request inside the data would; the key must be cut out of every record.
PLANTED = {
    "aws": "g6e.16xlarge", "cloudrift": "rtx49-10c-kn.1", "digitalocean": "gpu-4000adax1-20gb",
    "gcp": "a2-highgpu-1g", "hotaisle": "Xeon Platinum 8462Y+", "jarvislabs": "ada", "lambda": "gpu_1x_a10",
    "runpod": "MI300X", "scaleway": "GPU L4-1-24G Instance - fr-par-2", "shadeform": "US, Kansas City, KS",
    "tensordock": "Frankfurt", "vastai": "Quebec, CA", "verda": "1B300.30V",
}


def recorded_name(provider: str) -> str | None:
    """Where a source with a key and no PLANTED entry has its key planted: the name of the first
    record its recording's fault shape (faults.json) declares, which reaches its offers."""
    folder = BUNDLED_RECORDINGS / provider
    if (shape := load_shape(folder)) is None:
        return None
    bodies = [json.loads(ex.body()) for ex in load_manifest(folder)[1] if ex.path == shape.records.path]
    names = [_value(r, shape.records.key) for doc in bodies for r in _records(doc, shape.records.at)]
    return next((n for n in names if isinstance(n, str)), None)


PLANTED |= {p: name for p in API_PROVIDERS if p not in PLANTED and (name := recorded_name(p))}


def own_key(provider: str) -> str:
    return CANARY[min(n for n, owner in SECRET_OWNERS.items() if owner == provider)]


@functools.cache
def host_owners() -> dict[str, str]:
    return {ex.host: p for p in PLANTED for ex in load_manifest(BUNDLED_RECORDINGS / p)[1]}


def keys_in_data(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes] | None:
    """The recorded answer, its source's planted text followed by the source's key (as a JSON
    string or an XML text)."""
    provider = host_owners().get(host)
    if ex is None or provider is None:
        return None
    text, key = PLANTED[provider], own_key(provider)
    body = ex.body()
    for form in ('"{}"', ">{}<"):
        body = body.replace(form.format(text).encode(), form.format(f"{text} {key}").encode())
    return ex.status, dict(ex.headers), body


def replayed_batch(provider: str, hook: Any = None, recordings: Path = BUNDLED_RECORDINGS) -> Any:
    """`provider`'s Batch, fetched by its real client from `recordings` (answers optionally changed by `hook`)."""
    with ReplayServer(recordings, providers=[provider], hook=hook) as server:
        return source_module(provider).fetch(replay_context(server, provider))


def test_every_source_with_a_key_has_a_planted_canary() -> None:
    assert set(PLANTED) == set(API_PROVIDERS)  # a new source with a key names where its key is planted


def test_every_declared_secret_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(secret_env_vars()) == set(CANARY)
    assert {"LAMBDA_API_KEY", "AWS_SECRET_ACCESS_KEY", "GOOGLE_API_KEY"} <= set(CANARY)
    for name, value in CANARY.items():
        monkeypatch.setenv(name, value)
    for name, value in CANARY.items():
        assert redact(f"the server said: {value}!", patterns=False) == "the server said: [redacted]!", name


def leaks(text: str) -> list[str]:
    """Canaries in `text`, as they are or URL-encoded."""
    return [c for c in ALL_CANARIES if c in text or quote(c, safe="") in text]


# -- live mode, pointed at loopback ----------------------------------------------------------------

class LoopbackLive(SourceContext):
    """Live mode in every respect (credentials from the standard chains, keys sent), except that
    each real host name resolves to the replay server's loopback port."""

    def upstream_url(self, host: str) -> str:
        return self.replay_urls[host]

    def boto_endpoint(self, host: str) -> str | None:
        return self.replay_urls[host]


class TokenServer:
    """A loopback OAuth token endpoint: hands out ACCESS_TOKEN for the canary refresh token."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.echo = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                if outer.echo:  # a token server quoting the request in its error
                    payload = json.dumps({"error": "invalid_grant", "error_description": body.decode()}).encode()
                    self.send_response(400)
                else:
                    payload = json.dumps({"access_token": ACCESS_TOKEN, "expires_in": 3600,
                                          "token_type": "Bearer"}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Captured(logging.Handler):
    """Every log line the app emits with `gpuledger -v`: its own loggers at DEBUG, everything else at
    WARNING; httpx at INFO on top, since its request lines carry full URLs."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def captured_logs() -> Iterator[Captured]:
    handler = Captured()
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in ("", "gpuledger", "httpx")}
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("gpuledger").setLevel(logging.DEBUG)
    logging.getLogger("httpx").setLevel(logging.INFO)
    yield handler
    root.removeHandler(handler)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture
def canary_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[TokenServer]:
    tokens = TokenServer()
    adc = tmp_path / "adc.json"
    # An ADC file of the kind `gcloud auth application-default login` writes for workforce users:
    # a refresh token and an OAuth client, refreshed at its token_url (here: loopback).
    adc.write_text(json.dumps({"type": "external_account_authorized_user", "audience": "//iam.googleapis.com/canary",
                               "client_id": "canary-client", "token_url": tokens.url, **ADC_SECRETS}))
    for name, value in CANARY.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "gpuledger-replay")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    yield tokens
    tokens.close()


def live_context(server: ReplayServer, provider: str) -> LoopbackLive:
    settings = dict(server.settings.get(provider, {}))
    settings.update({"aws_regions": "us-east-1", "aws_price_source": "api", "gcp_regions": "us-central1"})
    return LoopbackLive(provider=provider, mode="live", replay_urls=server.endpoints(), settings=settings,
                        http_attempts=1, retry_wait_max_s=0.05, http_timeout_s=20)


def echo(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes]:
    """A server that answers 403 quoting the whole request: headers, URL and body."""
    quoted = {"error": "forbidden", "you_sent": {"target": req.target, "headers": req.headers,
                                                  "body": req.body.decode("utf-8", "replace")}}
    if host.startswith("ec2.") or host.startswith("api.pricing"):
        message = json.dumps(quoted).replace("<", " ").replace("&", " ")
        body = (f'<?xml version="1.0"?><Response><Errors><Error><Code>AuthFailure</Code><Message>{message}'
                f"</Message></Error></Errors><RequestID>r1</RequestID></Response>").encode()
        if host.startswith("api.pricing"):
            body = json.dumps({"__type": "AccessDeniedException", "message": json.dumps(quoted)}).encode()
        return 403, {"Content-Type": "text/xml" if host.startswith("ec2.") else "application/x-amz-json-1.1"}, body
    if "googleapis" in host:
        body = json.dumps({"error": {"code": 403, "message": json.dumps(quoted), "status": "PERMISSION_DENIED"}})
        return 403, {"Content-Type": "application/json"}, body.encode()
    return 403, {"Content-Type": "application/json"}, json.dumps(quoted).encode()


def exported_and_stored(db: Path, export_dir: Path) -> str:
    """Export a snapshot of the warehouse to `export_dir`, then return everything_written."""
    con = open_reader(db, allow_files=True)
    try:
        export_snapshot(con, export_dir)
    finally:
        con.close()
    return everything_written(db, export_dir)


def everything_written(db: Path, export_dir: Path) -> str:
    """Every table of the warehouse as text, and every exported file's bytes."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()]
        text = "\n".join(str(con.execute(f'select * from "{t}"').fetchall()) for t in tables)
    finally:
        con.close()
    for path in export_dir.rglob("*"):
        if path.is_file():
            text += "\n" + path.read_bytes().decode("latin-1")
    return text


def test_canary_secrets_are_sent_and_go_nowhere_else(canary_env: TokenServer, captured_logs: Captured,
                                                     tmp_path: Path) -> None:
    server = ReplayServer(BUNDLED_RECORDINGS, providers=list(API_PROVIDERS), hook=keys_in_data)
    server.start()
    outcomes, errors = [], []
    try:
        now = utcnow()
        by_provider: dict[str, list[Request]] = {}
        for p in API_PROVIDERS:
            ctx = live_context(server, p)
            before = len(server.requests)
            batch = source_module(p).fetch(ctx)
            by_provider[p] = [r for _, r in server.requests[before:]]
            outcomes.append(scraped(p, "live", now, utcnow(), batch=batch, requests=ctx.requests_made))
        seen = list(server.requests)
        # Round two: every server quotes our request back in a 403; the token server in a 400.
        server.hook = echo
        canary_env.echo = True
        for p in API_PROVIDERS:
            with pytest.raises(SourceError) as err:
                source_module(p).fetch(live_context(server, p))
            errors.append((p, err.value))
    finally:
        server.close()

    # Every source with a key sent one of its keys (whatever the provider's way)...
    for p in API_PROVIDERS:
        keys = [CANARY[n] for n, owner in SECRET_OWNERS.items() if owner == p and n not in SENT_NOT]
        carried = [r for r in by_provider[p]
                   if any(k in unquote(json.dumps(r.headers) + r.target + r.body.decode("latin-1")) for k in keys)]
        assert carried, f"{p}: no request carried any of its keys"

    # ...each the way its provider documents.
    def sent(host_part: str) -> list[Request]:
        return [r for h, r in seen if host_part in h]

    assert {r.headers.get("authorization") for r in sent("lambda")} == {f"Bearer {CANARY['LAMBDA_API_KEY']}"}
    assert {r.params.get("api_key") for r in sent("runpod")} == {CANARY["RUNPOD_API_KEY"]}
    assert {r.headers.get("authorization") for r in sent("vast")} == {f"Bearer {CANARY['VAST_API_KEY']}"}
    signed = sent("ec2.") + sent("api.pricing")
    assert signed and all(f"Credential={CANARY['AWS_ACCESS_KEY_ID']}/" in r.headers["authorization"] for r in signed)
    assert all(r.headers.get("x-amz-security-token") == CANARY["AWS_SESSION_TOKEN"] for r in signed)
    assert {r.headers.get("authorization") for r in sent("compute.googleapis")} == {f"Bearer {ACCESS_TOKEN}"}
    # GPULEDGER_GCP_API_KEY, when set, wins over Google's standard GOOGLE_API_KEY.
    assert {r.headers.get("x-goog-api-key") for r in sent("cloudbilling")} == {CANARY["GPULEDGER_GCP_API_KEY"]}
    import base64

    headers, body = canary_env.requests[0]
    assert ADC_SECRETS["refresh_token"] in unquote(body.decode())
    assert ADC_SECRETS["client_secret"] in base64.b64decode(headers["authorization"].split()[1]).decode()
    # The secret key itself never travels: only the signature made with it.
    assert not any(CANARY["AWS_SECRET_ACCESS_KEY"] in json.dumps(r.headers) + r.target + r.body.decode("latin-1")
                   for _, r in seen)

    # The errors say what failed, and hold no secret: message, repr, traceback with its causes.
    for p, err in errors:
        text = "\n".join([str(err), repr(err), "".join(traceback.format_exception(err)), describe_failure(p, err)])
        assert "403" in str(err) or "authentication" in str(err), (p, str(err))
        assert not leaks(text), (p, leaks(text), text[:2000])

    # The warehouse and an export of it, after the good round and the failed one.
    db = tmp_path / "ledger.duckdb"
    failed = [scraped(p, "live", utcnow(), utcnow(), error=describe_failure(p, e)) for p, e in errors]
    reports = load(db, outcomes, "canary-1")
    assert [r.state for r in reports] == ["ok"] * len(outcomes), [r.error for r in reports]
    load(db, failed, "canary-2")
    written = exported_and_stored(db, tmp_path / "export")
    assert "403" in written  # the failures were recorded...
    assert not leaks(written), leaks(written)  # ...without what the servers quoted back, or the keys in the data
    # Each source's planted key reached its rows, and was cut there: current, history, exported CSV.
    con = duckdb.connect(str(db), read_only=True)
    try:
        for table in ("offers", "offer_history"):
            for p in API_PROVIDERS:
                rows = str(con.execute(f"select * from {table} where provider = ?", [p]).fetchall())
                assert f"{PLANTED[p]} [redacted]" in rows, (table, p)
    finally:
        con.close()
    import csv

    with open(next((tmp_path / "export").glob("*/offers.csv")), newline="") as f:
        exported = {r["provider"] for r in csv.DictReader(f) if any("[redacted]" in v for v in r.values())}
    assert exported == set(API_PROVIDERS)
    assert captured_logs.lines, "nothing was logged: the capture is not working"
    logged = "\n".join(captured_logs.lines)
    assert not leaks(logged), [line for line in captured_logs.lines if leaks(line)][:5]


def test_a_key_cut_by_the_error_excerpt_leaves_no_start_of_itself(canary_env: TokenServer) -> None:
    """An error quotes the first 200 characters of the answer (80 of one that is no JSON), cut before they are
    redacted: a 401 that quotes Lambda's key at character 190 left the key's first 10 characters in the error
    (scrape_runs.error, the terminal); the start of the key is cut as the whole key is."""
    key = CANARY["LAMBDA_API_KEY"]
    head = '{"error": {"code": "global/invalid-api-key", "message": "'
    kept = [0]

    def rejected(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes]:
        sent = req.headers["authorization"].split()[-1]
        body = head + "k" * (200 - len(head) - len(" rejected: ") - kept[0]) + " rejected: " + sent + '"}}'
        return 401, {"Content-Type": "application/json"}, body.encode()

    server = ReplayServer(BUNDLED_RECORDINGS, providers=["lambda"], hook=rejected)
    server.start()
    try:
        for kept[0] in (8, 10, len(key) // 2, len(key) - 1):
            with pytest.raises(SourceError) as err:
                source_module("lambda").fetch(live_context(server, "lambda"))
            line = describe_failure("lambda", err.value)
            assert line.startswith("lambda: HTTP 401 from cloud.lambda.ai/api/v1/instance-types: "), line
            assert line.endswith(" rejected: [redacted]"), (kept[0], line[-60:])
            assert key[:8] not in line
        # A 200 that is no JSON is quoted by its first 80 characters, as a repr: the key cut there too.
        server.hook = lambda host, req, ex: (200, {"Content-Type": "text/html"}, (
            "<html>" + "p" * (80 - len("<html>") - len(" token ") - 12) + " token "
            + req.headers["authorization"].split()[-1] + "</html>").encode())
        with pytest.raises(SourceError) as err:
            source_module("lambda").fetch(live_context(server, "lambda"))
        line = describe_failure("lambda", err.value)
        assert line.startswith("lambda: cloud.lambda.ai/api/v1/instance-types did not answer JSON (starts '<html>")
        assert line.endswith(" token [redacted]')"), line[-60:]
        assert key[:8] not in line
    finally:
        server.close()


# -- the Prefect flow: artifact, stored logs, a recording ----------------------------------------

@pytest.mark.prefect
def test_canaries_stay_out_of_the_flow_artifact_logs_and_recording(tmp_path: Path,
                                                                     request: pytest.FixtureRequest) -> None:
    """`gpuledger record` from a replay, its run logs (gpuledger's own included, at INFO) shipped to
    the session's Prefect API as a served flow's are: Lambda, RunPod and Vast send their canary keys
    (record mode reads them from the env like live); Lambda's server rejects the key quoting it, and
    RunPod answers a GraphQL error quoting it. Nothing the flow stores may hold a canary."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter, FlowRunFilterId, FlowRunFilterStartTime, LogFilter, LogFilterFlowRunId,
    )

    recordings = tmp_path / "recordings"
    for p in ("lambda", "runpod", "vastai"):
        import shutil

        shutil.copytree(BUNDLED_RECORDINGS / p, recordings / p)
    for p, status, body in (
        ("lambda", 401, {"error": {"code": "global/invalid-api-key",
                                   "message": f"API key {CANARY['LAMBDA_API_KEY']} is invalid"}}),
        ("runpod", 200, {"errors": [{"message": f"api_key {CANARY['RUNPOD_API_KEY']} is not valid",
                                     "extensions": {"code": "UNAUTHENTICATED"}}]}),
    ):
        manifest = json.loads((recordings / p / "manifest.json").read_text())
        for ex in manifest["exchanges"]:
            ex["response"] = {"status": status, "headers": {"Content-Type": "application/json"},
                              "body": json.dumps(body)}
        (recordings / p / "manifest.json").write_text(json.dumps(manifest))
    db, rec = tmp_path / "ledger.duckdb", tmp_path / "recorded"
    api = shared_prefect_server(request.config)
    started = datetime.now(timezone.utc)
    done = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "record", str(rec), "--from-recordings",
                           str(recordings), "-p", "lambda", "-p", "runpod", "-p", "vastai", "--db", str(db)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **CANARY, "PREFECT_API_URL": api, "PREFECT_LOGGING_LEVEL": "INFO",
                               "PREFECT_LOGGING_EXTRA_LOGGERS": "gpuledger"})
    shown = done.stdout + done.stderr
    assert done.returncode == 1 and "failed providers: lambda, runpod" in shown, shown[-2000:]
    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(flow_run_filter=FlowRunFilter(start_time=FlowRunFilterStartTime(after_=started)))
        artifacts = [a.data or "" for a in client.read_artifacts(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))]
        stored_logs = [log.message for log in client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])))]
    assert any("401" in a for a in artifacts) and any("GraphQL error" in a for a in artifacts)
    assert any("vastai: fetched" in m for m in stored_logs), stored_logs[:5]  # gpuledger's own, at INFO
    assert not leaks(shown), leaks(shown)
    assert not leaks("\n".join(artifacts)), artifacts
    assert not leaks("\n".join(stored_logs)), [m for m in stored_logs if leaks(m)][:3]
    written = exported_and_stored(db, tmp_path / "export")
    for path in rec.rglob("*"):
        if path.is_file():
            written += path.read_bytes().decode("latin-1")
    assert (rec / "vastai" / "manifest.json").exists()
    assert not leaks(written), leaks(written)


# -- `gpuledger sql` stays inside the warehouse, read-only ---------------------------------------

@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("sql") / "ledger.duckdb"
    server = ReplayServer(BUNDLED_RECORDINGS, providers=["lambda"])
    server.start()
    try:
        ctx = replay_context(server, "lambda")
        batch = source_module("lambda").fetch(ctx)
    finally:
        server.close()
    assert load(db, [scraped("lambda", "replay", utcnow(), utcnow(), batch=batch)], "r")[0].ok
    return db


def sql(db: Path, query: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "sql", query, "--db", str(db), "--format", "csv"],
                          capture_output=True, text=True, timeout=120)


# One child runs `gpuledger sql` once per query, each through the command's whole path (its own
# locked read-only connection, its error handling, its exit code), with a marker line on both
# streams before each, so the queries cost one interpreter start between them, not one each.
_SQL_EACH = """
import json, sys
from gpuledger.flows.cli import app
db, queries, codes = sys.argv[1], json.loads(sys.argv[2]), []
for i, query in enumerate(queries):
    for stream in (sys.stdout, sys.stderr):
        print(f"\\n==sql-case {i}==", file=stream, flush=True)
    try:
        app(["sql", query, "--db", db, "--format", "csv"], prog_name="gpuledger")
    except SystemExit as done:
        codes.append(done.code)
    else:
        codes.append(0)
    sys.stdout.flush(); sys.stderr.flush()
print("\\n==sql-codes==" + json.dumps(codes), flush=True)
"""


def sql_each(db: Path, queries: list[str]) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of `gpuledger sql QUERY` for each query, in order."""
    done = subprocess.run([sys.executable, "-c", _SQL_EACH, str(db), json.dumps(queries)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out, codes = done.stdout.split("\n==sql-codes==")
    outs = re.split(r"\n==sql-case \d+==\n", out)[1:]
    errs = re.split(r"\n==sql-case \d+==\n", done.stderr)[1:]
    assert len(outs) == len(errs) == len(queries), done.stdout + done.stderr
    return list(zip(json.loads(codes), outs, errs))


def test_sql_refuses_attach_copy_local_files_and_extensions(small_db: Path, tmp_path: Path) -> None:
    secret_file = tmp_path / "secret.csv"
    secret_file.write_text("token\nCANARY-local-file-contents\n")
    other = tmp_path / "other.duckdb"
    copied = tmp_path / "copied.csv"
    before = small_db.read_bytes()
    cases = {
        f"attach '{other}' as other": "cannot read or write other files",
        f"copy offers to '{copied}' (format csv)": "cannot read or write other files",
        f"copy (select 1) to '{copied}'": "cannot read or write other files",
        f"select * from read_csv('{secret_file}')": "cannot read or write other files",
        f"select * from '{secret_file}'": "cannot read or write other files",
        "install httpfs": "cannot read or write other files",
        "load httpfs": "cannot read or write other files",
        "set enable_external_access = true": "the configuration has been locked",
        "drop table offers": "read-only",
        "insert into scrape_runs (run_id) values ('x')": "read-only",
    }
    for (query, expected), (code, out, err) in zip(cases.items(), sql_each(small_db, list(cases))):
        message = " ".join(err.split())
        assert code == 1, (query, out, message)
        assert expected in message, (query, message)
        assert "CANARY-local-file-contents" not in out + err
    assert not other.exists() and not copied.exists()
    assert small_db.read_bytes() == before
    ok = sql(small_db, "select count(*) as n from offers")
    assert ok.returncode == 0 and ok.stdout.splitlines() == ["n", "27"]


# -- CSV exports: no formula injection, numbers stay numbers --------------------------------------

def test_csv_export_neutralizes_formulas_from_scraped_fields(tmp_path: Path) -> None:
    """Lambda names its instance types; a hostile or broken API could name one '=HYPERLINK(...)'.
    The name travels through the real client into offers, and out through `gpuledger export`."""
    import csv

    names = {"=HYPERLINK(\"http://x\",\"y\")": "a", "+SUM(1+1)": "b", "-2+3": "c", "@cmd": "d",
             " =1+1": "e", "\n=2+2": "f", "\u00a0=3+3": "g", "\uff1d4+4": "h", "|calc": "i", "\t5": "j"}
    inert = {"gpu plain": "k", "nul\u0000byte": "l"}  # no formula; a NUL is written as U+2400
    doc = json.loads((BUNDLED_RECORDINGS / "lambda" / "instance-types.json").read_text())
    template = doc["data"]["gpu_1x_a10"]
    doc["data"] = {}
    for i, name in enumerate([*names, *inert]):
        item = json.loads(json.dumps(template))
        item["instance_type"]["name"] = name
        item["instance_type"]["price_cents_per_hour"] = 100 + i
        item["regions_with_capacity_available"] = item["regions_with_capacity_available"][:1]
        doc["data"][f"k{i}"] = item

    def hook(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()

    batch = replayed_batch("lambda", hook=hook)
    db = tmp_path / "ledger.duckdb"
    assert load(db, [scraped("lambda", "replay", utcnow(), utcnow(), batch=batch)], "r")[0].ok
    out = tmp_path / "export"
    result = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "export", str(out), "--db", str(db)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    folder = Path(result.stdout.strip().splitlines()[-1])
    with open(folder / "offers.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["instance_type"] for r in rows) == sorted(["'" + n for n in names] +
                                                              ["gpu plain", "nul\u2400byte"])
    # numbers and booleans: bare, no apostrophe
    assert sorted(float(r["price_per_hour"]) for r in rows) == [(100 + i) / 100 for i in range(len(rows))]
    for r in rows:
        assert r["gpu_count"] == "1.0" and r["gpu_memory_gb"] == "24.0" and r["available"] == "true"
    parquet = duckdb.sql(f"select instance_type from '{folder / 'offers.parquet'}'").fetchall()
    assert sorted(r[0] for r in parquet) == sorted([*names, *inert])  # Parquet keeps the data as it is


# -- crawls: what the child process really runs with -----------------------------------------------

class Trap:
    """A server on another host:port that must never be contacted: every request it gets (a
    WebSocket handshake is a GET too) is kept as (method, path, headers, body)."""

    def __init__(self, host: str = "localhost") -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _hit(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests.append((self.command, self.path, dict(self.headers), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = _hit

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        # "localhost": another netloc than 127.0.0.1:port; "127.0.0.1": the same host, another port
        self.url = f"http://{host}:{self.server.server_address[1]}"

    @property
    def hits(self) -> list[str]:
        return [path for _, path, _, _ in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def planted(trap: Trap) -> bytes:
    return (f'<script src="{trap.url}/evil.js"></script><img src="{trap.url}/pixel.gif">'
            f'<script>fetch("{trap.url}/inline"); new Image().src = "{trap.url}/beacon";</script>').encode()


def every_way_out(trap: Trap) -> bytes:
    """Script that tries each way a page can reach another origin and port."""
    tries = (
        'new WebSocket(T.replace("http", "ws") + "/websocket")',
        'window.open(T + "/window-open")',
        '(() => { const f = document.createElement("form"); f.method = "POST"; f.action = T + "/form-post"; '
        'f.target = "_blank"; f.innerHTML = "<input name=q value=1>"; document.body.appendChild(f); f.submit(); })()',
        'navigator.sendBeacon(T + "/send-beacon", "x")',
        'new EventSource(T + "/event-source")',
        'navigator.serviceWorker.register("/sw.js")',
        'fetch(T + "/fetch", {mode: "no-cors", method: "POST", body: "x"})',
        '(() => { const x = new XMLHttpRequest(); x.open("GET", T + "/xhr"); x.send(); })()',
        '(() => { const l = document.createElement("link"); l.rel = "prefetch"; l.href = T + "/prefetch"; '
        'document.head.appendChild(l); })()',
        '(() => { const i = document.createElement("iframe"); i.src = T + "/iframe"; document.body.appendChild(i); })()',
    )
    return (f"<script>const T = {json.dumps(trap.url)}; const tries = [{', '.join(f'() => {js}' for js in tries)}];"
            " for (const t of tries) { try { const p = t(); if (p && p.catch) p.catch(() => 0); } catch (e) {} }"
            "</script>").encode()


def scrape_with_planted_traps(module: Any, provider: str, page_path: str, plant: Any = planted,
                              trap_host: str = "localhost", slow_path: str = "") -> tuple[Any, Trap]:
    """Scrape `provider`'s replayed page with `plant(trap)` (scripts, images) planted in it that would
    call the trap server if anything ran or fetched them. `slow_path` is answered 2 s late, so the
    page stays open while the planted script's requests would leave."""
    trap = Trap(trap_host)

    def hook(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes] | None:
        if req.path == slow_path:
            time.sleep(2)
        if req.path != page_path or ex is None:
            return None
        body, n = re.subn(rb"<body[^>]*>", lambda m: m.group(0) + plant(trap), ex.body(), count=1)
        assert n == 1, "the page has no <body> to plant in"
        return 200, dict(ex.headers), body

    server = ReplayServer(BUNDLED_RECORDINGS, providers=[provider], hook=hook)
    server.start()
    try:
        return module.scrape(replay_context(server, provider)), trap
    finally:
        server.close()
        trap.close()


def test_plain_crawl_parses_html_and_never_runs_it(tmp_path: Path) -> None:
    result, trap = scrape_with_planted_traps(coreweave, "coreweave", "/pricing")
    assert len(result.items) > 10  # the page was parsed...
    assert trap.hits == []  # ...and none of its scripts or images was run or fetched
    eff = result.status["effective"]
    assert eff["ROBOTSTXT_OBEY"] is True and eff["TELNETCONSOLE_ENABLED"] is False
    assert eff["COOKIES_ENABLED"] is False and eff["USER_AGENT"].startswith("gpuledger/")
    assert "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware" in eff["downloader_middlewares"]
    assert not [e for e in eff["extensions"] if "telnet" in e.lower()]  # no console port opened


FORBIDDEN_BROWSER_FLAGS = ("--disable-web-security", "--remote-debugging", "--disable-site-isolation",
                           "--allow-running-insecure-content", "--disable-features=IsolateOrigins",
                           "--user-data-dir", "--enable-automation-extension", "--single-process")


def test_browser_crawl_runs_sandboxed_except_as_root_and_stays_on_its_host(tmp_path: Path) -> None:
    result, trap = scrape_with_planted_traps(hyperstack, "hyperstack", "/gpu-pricing")
    assert len(result.items) > 10  # rendered in Chromium, script and all...
    assert trap.hits == []  # ...but no request left the page's own host (scripts, images, fetches)
    eff = result.status["effective"]
    args = eff["browser_args"]
    assert eff["browser_headless"] is True and eff["abort_request_filter"] is True
    assert eff["browser_provider"] == "gpuledger.spiders.fence.FencedBrowsers"  # every context fenced
    assert eff["ROBOTSTXT_OBEY"] is True and eff["TELNETCONSOLE_ENABLED"] is False
    assert "--disable-background-networking" in args and "--disable-component-update" in args
    from gpuledger.spiders.browser import needs_no_sandbox

    # Only what Debian's chromium needs as root (or a machine without user namespaces says it needs).
    assert ("--no-sandbox" in args) == needs_no_sandbox() == (os.geteuid() == 0 or
                                                             os.environ.get("GPULEDGER_CHROMIUM_NO_SANDBOX") == "1")
    assert not [a for a in args if a.startswith(FORBIDDEN_BROWSER_FLAGS)], args


def test_a_rendered_page_reaches_no_other_origin_by_any_way_out() -> None:
    """The Hyperstack page, rendered in Chromium with script that opens a WebSocket, a popup, a
    form POST into a new window, a beacon, an event stream, a service worker, a prefetch and an
    iframe towards another port of the same host: the page still renders, and nothing arrives."""
    result, trap = scrape_with_planted_traps(hyperstack, "hyperstack", "/gpu-pricing", every_way_out, "127.0.0.1",
                                             slow_path="/gpu-pricing/rates.json")
    assert len(result.items) > 10
    assert trap.requests == [], trap.hits


def test_browser_sandbox_stays_on_for_other_users(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuledger.spiders import browser

    monkeypatch.delenv("GPULEDGER_CHROMIUM_NO_SANDBOX", raising=False)
    monkeypatch.setattr(browser.os, "geteuid", lambda: 1000)
    sandboxed = browser.launch_options("/usr/bin/chromium", 1000)["args"]
    # The zygote starts sandboxed renderers: kept whenever the sandbox is.
    assert "--no-sandbox" not in sandboxed and "--no-zygote" not in sandboxed
    monkeypatch.setenv("GPULEDGER_CHROMIUM_NO_SANDBOX", "1")  # a container without user namespaces
    assert browser.launch_options("/usr/bin/chromium", 1000)["args"][:2] == ["--no-sandbox", "--no-zygote"]
    monkeypatch.setattr(browser.os, "geteuid", lambda: 0)
    monkeypatch.delenv("GPULEDGER_CHROMIUM_NO_SANDBOX")
    assert browser.launch_options("/usr/bin/chromium", 1000)["args"][0] == "--no-sandbox"


# -- credentials stay with their host ------------------------------------------------------------

@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_to_another_port_receives_no_credential_from_any_source(canary_env: TokenServer,
                                                                          status: int) -> None:
    """Every source that declares a secret (from the registry), live against loopback with its
    canary keys, is answered with a redirect to another port of the same host, path and query
    kept: the redirect is refused with a line saying so, and the other port hears nothing."""
    trap = Trap("127.0.0.1")

    def redirect(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes]:
        return status, {"Location": trap.url + req.target, "Content-Type": "text/plain"}, b""

    server = ReplayServer(BUNDLED_RECORDINGS, providers=list(API_PROVIDERS), hook=redirect)
    server.start()
    try:
        for p in API_PROVIDERS:
            with pytest.raises(SourceError, match=f"redirect to another origin \\({trap.url}/\\) not followed"):
                source_module(p).fetch(live_context(server, p))
    finally:
        server.close()
        trap.close()
    assert trap.requests == []


def test_a_redirect_on_the_same_origin_is_still_followed(replay: Any) -> None:
    def moved(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes] | None:
        if "moved" in req.params:
            return None
        return 308, {"Location": req.target + ("&" if "?" in req.target else "?") + "moved=1"}, b""

    server = replay("lambda", hook=moved)
    batch = source_module("lambda").fetch(replay_context(server, "lambda"))
    assert len(batch.offers) == 27
    assert [r.params.get("moved") for _, r in server.requests] == [None, "1"]


# -- every answer bounded ------------------------------------------------------------------------

@functools.cache
def gzip_bomb() -> bytes:
    """About 1 MB of gzip that inflates to 1 GiB."""
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 20)
    return b"".join([packer.compress(block) for _ in range(1024)] + [packer.flush()])


def hostile_server(answer: Any) -> tuple[str, Any]:
    """A loopback server that reads a request and answers with `answer(socket)`; (URL, close)."""
    import socketserver

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.recv(65536)
            try:
                answer(self.request)
            except OSError:  # the client gave up
                pass

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def close() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}", close


def bomb(sock: Any) -> None:
    body = gzip_bomb()
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def drip(at_once: bytes) -> Any:
    """An answer that sends `at_once`, then one byte every 0.2 s (for at most 30 s)."""
    def answer(sock: Any) -> None:
        started = time.monotonic()
        sock.sendall(at_once)
        for byte in HEADERS[len(at_once):] + b"x" * 1000:
            if time.monotonic() - started > 30:
                return
            sock.sendall(bytes([byte]))
            time.sleep(0.2)
    return answer


HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"


@pytest.mark.parametrize("answer, expected", [
    (bomb, "exceeds the limit of 67,108,864 bytes"),
    (drip(HEADERS), "ReadTimeout: "),
    (drip(b""), "ReadTimeout: no complete answer within 2 s"),
], ids=["gzip-bomb", "body-drip", "header-drip"])
def test_a_hostile_answer_fails_its_request_within_the_bound(answer: Any, expected: str) -> None:
    """Lambda's real client against a server that answers with a gzip bomb (1 MB inflating to
    1 GiB) or drips its body or its status line a byte at a time: the request fails with one line
    naming the source, within the documented bound (the retry budget plus one request's timeout),
    having held no more than the source's byte limit."""
    gzip_bomb()  # made before the clock starts
    url, close = hostile_server(answer)
    ctx = SourceContext(provider="lambda", mode="replay", replay_urls={"cloud.lambda.ai": url},
                        http_timeout_s=2, http_attempts=2, retry_wait_max_s=0.05, retry_budget_s=3)
    started = time.monotonic()
    try:
        with pytest.raises(SourceError) as err:
            source_module("lambda").fetch(ctx)
    finally:
        close()
    elapsed = time.monotonic() - started
    assert str(err.value).startswith("lambda: cloud.lambda.ai/api/v1/instance-types") and expected in str(err.value)
    assert "\n" not in str(err.value)
    assert elapsed < ctx.retry_budget_s + ctx.http_timeout_s + 1.5, elapsed


def test_a_gzip_bomb_in_a_recording_fails_its_provider_alone_and_the_refresh_stays_small(tmp_path: Path) -> None:
    """`gpuledger refresh --replay` from recordings whose Lambda body file is a gzip bomb (1 MB
    inflating to 1 GiB): Lambda fails in one line naming its limit, Vast.ai loads, and the whole
    process tree of the refresh never holds 1.5 GB."""
    import shutil

    import psutil

    recordings = tmp_path / "recordings"
    for p in ("lambda", "vastai"):
        shutil.copytree(BUNDLED_RECORDINGS / p, recordings / p)
    manifest = json.loads((recordings / "lambda" / "manifest.json").read_text())
    for ex in manifest["exchanges"]:
        ex["response"]["body_file"] = "bomb.json.gz"
    (recordings / "lambda" / "manifest.json").write_text(json.dumps(manifest))
    (recordings / "lambda" / "bomb.json.gz").write_bytes(gzip_bomb())
    refresh = subprocess.Popen([sys.executable, "-m", "gpuledger.flows.cli", "refresh", "--replay", "--recordings",
                                str(recordings), "-p", "lambda", "-p", "vastai", "--db", str(tmp_path / "l.duckdb")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree = psutil.Process(refresh.pid)
    peak = 0
    while refresh.poll() is None:
        try:
            rss = sum(p.memory_info().rss for p in [tree, *tree.children(recursive=True)])
        except psutil.Error:
            continue
        peak = max(peak, rss)
        time.sleep(0.05)
    out, err = refresh.communicate()
    assert refresh.returncode == 1, out + err
    assert peak < 1.5e9, peak
    said = " ".join((out + err).split())
    assert "lambda: cloud.lambda.ai/api/v1/instance-types: the answer exceeds the limit of 67,108,864 bytes" in said
    assert "Traceback" not in out + err
    assert "failed providers: lambda" in said and re.search(r"vastai\s+ok", out + err)


# -- recordings are data -------------------------------------------------------------------------

OBTAINED = {"access_token": "CANARY-obtained-access-U1v2W3", "refresh_token": "CANARY-obtained-refresh-X4y5Z6"}


def test_a_recording_holds_no_secret_and_still_replays(canary_env: TokenServer, tmp_path: Path) -> None:
    """Every source with a secret is recorded (from a replay, its canary keys in the environment) with
    its servers quoting its key inside the data and its token endpoints handing out canary tokens:
    no file of the recording holds a key or a token, and Verda's recording (its token request
    carries the client id and secret) replays to the same offers."""
    from gpuledger.flows.fetch import SourcePlan, fetch_source

    def answer(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes] | None:
        if ex is not None and req.path.endswith("/token"):
            return 200, {"Content-Type": "application/json"}, json.dumps(
                {**OBTAINED, "token_type": "Bearer", "expires_in": 3600}).encode()
        return keys_in_data(host, req, ex)

    rec = tmp_path / "recorded"
    server = ReplayServer(BUNDLED_RECORDINGS, providers=list(API_PROVIDERS), hook=answer)
    server.start()
    try:
        for p in API_PROVIDERS:
            settings = {**server.settings.get(p, {}), "aws_regions": "us-east-1", "aws_price_source": "api",
                        "gcp_regions": "us-central1"}
            fetch_source(SourcePlan(provider=p, mode="record", replay_urls=server.endpoints(), settings=settings,
                                    record_dir=str(rec), http_attempts=1, retry_wait_max_s=0.05))
    finally:
        server.close()
    verda_sent = [r for h, r in server.requests if h == "api.verda.com" and r.path.endswith("/token")]
    assert CANARY["VERDA_CLIENT_SECRET"] in verda_sent[0].body.decode()  # the secret was really sent
    written = {str(f.relative_to(rec)): f.read_bytes().decode("latin-1") for f in rec.rglob("*") if f.is_file()}
    assert {f.split("/")[0] for f in written} == set(API_PROVIDERS)
    found = {f: [c for c in [*ALL_CANARIES, *OBTAINED.values()] if c in text or quote(c, safe="") in text]
             for f, text in written.items()}
    assert not {f: c for f, c in found.items() if c}
    batch, expected = replayed_batch("verda", recordings=rec), replayed_batch("verda")
    # the same offers, the key planted in one name cut out of it
    assert sorted(str(o.key).replace(" [redacted]", "") for o in batch.offers) == \
        sorted(str(o.key) for o in expected.offers) != []


# -- one line, never a traceback -----------------------------------------------------------------

def hostile_inputs(tmp: Path, db: Path) -> dict[str, tuple[list[str], dict[str, str], str]]:
    """Each input issue 46 found a traceback for: (arguments, environment, what the error line says)."""
    import shutil

    def recording(name: str, edit: Any) -> str:
        folder = tmp / name
        shutil.copytree(BUNDLED_RECORDINGS / "lambda", folder / "lambda")
        path = folder / "lambda" / "manifest.json"
        doc = json.loads(path.read_text())
        path.write_text(edit(doc) if callable(edit) else edit)
        return str(folder)

    def status_abc(doc: dict) -> str:
        doc["exchanges"][0]["response"]["status"] = "abc"
        return json.dumps(doc)

    def escaping(doc: dict) -> str:
        doc["exchanges"][0]["response"]["body_file"] = "../../../../../../etc/passwd"
        return json.dumps(doc)

    (tmp / "a-directory").mkdir()
    (tmp / "busy").mkdir()
    (tmp / "busy" / "kept.txt").write_text("mine")
    truncated = tmp / "truncated.duckdb"
    truncated.write_bytes(db.read_bytes()[:100_000])
    refresh = ["refresh", "--replay", "-p", "lambda", "--db", str(tmp / "new.duckdb")]
    return {
        "manifest status abc": (["refresh", "--replay", "--recordings", recording("m1", status_abc), "-p", "lambda",
                                 "--db", str(db)], {}, "exchanges.0.response.status: Input should be a valid integer"),
        "manifest exchanges not a list": (["refresh", "--replay", "--recordings", recording("m2", lambda d: json.dumps(
            {**d, "exchanges": {"a": 1}})), "-p", "lambda", "--db", str(db)], {}, "exchanges: Input should be a valid list"),
        "manifest not JSON": (["refresh", "--replay", "--recordings", recording("m3", "{not json"), "-p", "lambda",
                               "--db", str(db)], {}, "not a recording manifest (Expecting property name"),
        "recordings folder missing": (["refresh", "--replay", "--recordings", str(tmp / "nowhere"), "-p", "lambda",
                                       "--db", str(db)], {}, "no recording for this provider"),
        "body file outside its folder": (["refresh", "--replay", "--recordings", recording("m4", escaping), "-p",
                                          "lambda", "--db", str(db)], {}, "is outside the recording's folder"),
        "task timeout abc": (refresh, {"GPULEDGER_TASK_TIMEOUT_S": "abc"},
                             "GPULEDGER_TASK_TIMEOUT_S='abc': Input should be a valid number"),
        "anomaly factor nan": (refresh, {"GPULEDGER_OFFER_ANOMALY_FACTOR": "nan"},
                               "GPULEDGER_OFFER_ANOMALY_FACTOR='nan': Input should be a finite number"),
        "anomaly factor 0": (refresh, {"GPULEDGER_OFFER_ANOMALY_FACTOR": "0"}, "Input should be greater than 1"),
        "anomaly factor -1": (refresh, {"GPULEDGER_OFFER_ANOMALY_FACTOR": "-1"}, "Input should be greater than 1"),
        "exchange rate -1": (refresh, {"GPULEDGER_SCALEWAY_USD_PER_EUR": "-1"},
                             "GPULEDGER_SCALEWAY_USD_PER_EUR='-1': Input should be greater than or equal to 0.5"),
        "status --stale-after nan": (["status", "--stale-after", "nan", "--db", str(db)], {},
                                     "Invalid value for '--stale-after'"),
        "plot into a directory": (["plot", "--gpu", "A10", str(tmp / "a-directory"), "--db", str(db)], {},
                                  "Is a directory"),
        "report into a directory": (["report", str(tmp / "a-directory"), "--db", str(db)], {}, "Is a directory"),
        "record into a file's child": (["record", str(db / "sub"), "--from-recordings", str(BUNDLED_RECORDINGS),
                                        "-p", "lambda", "--db", str(tmp / "r.duckdb")], {}, "Not a directory"),
        "record into a non-empty folder": (["record", str(tmp / "busy"), "--from-recordings", str(BUNDLED_RECORDINGS),
                                            "-p", "lambda", "--db", str(tmp / "r.duckdb")], {}, "is not empty"),
        "refresh a truncated warehouse": (["refresh", "--replay", "-p", "lambda", "--db", str(truncated)], {},
                                          "a damaged or truncated file"),
        "accept an unknown provider's anomaly": (["refresh", "--replay", "-p", "lambda", "--accept-anomaly", "nosuch",
                                                  "--db", str(db)], {}, "--accept-anomaly nosuch: no such provider"),
        "sql on an ASCII terminal": (["sql", "select 'Zürich ☃' as city", "--db", str(db)],
                                     {"PYTHONIOENCODING": "ascii"}, ""),
    }


def test_no_hostile_input_gets_a_traceback(small_db: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Every input listed in issue 46, through the real command: one error line (or, for the ASCII
    terminal, escaped output), never a Python traceback; a usage error or a refused input exits 2.
    The refreshes report to the session's Prefect API (each would start a temporary server of its
    own: test_a_failed_provider_and_a_corrupt_saved_result_cost_one_line_each covers that one)."""
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    api = {"PREFECT_API_URL": shared_prefect_server(request.config)}
    cases = hostile_inputs(tmp_path, small_db)

    def run(name: str) -> subprocess.CompletedProcess[str]:
        args, env, _ = cases[name]
        own = tmp_path / f"case-{list(cases).index(name)}.duckdb"  # its own warehouse: the cases run at once
        shutil.copy(small_db, own)
        return subprocess.run([sys.executable, "-m", "gpuledger.flows.cli",
                               *[str(own) if a == str(small_db) else a for a in args]],
                              capture_output=True, text=True, timeout=120, env={**os.environ, **api, **env})

    with ThreadPoolExecutor(max_workers=3) as pool:
        ran = dict(zip(cases, pool.map(run, cases)))
    for name, (args, env, said) in cases.items():
        done = ran[name]
        shown = done.stdout + done.stderr
        assert "Traceback" not in shown and "Error logging to API" not in shown, (name, shown[-3000:])
        assert said in " ".join(shown.split()), (name, shown[-2000:])
        if said:
            assert done.returncode in (1, 2), (name, done.returncode)
        else:
            assert done.returncode == 0 and "Z\\xfcrich \\u2603" in done.stdout, (name, shown)
    assert not list(tmp_path.glob(".*.partial")) and (tmp_path / "busy" / "kept.txt").read_text() == "mine"


def test_a_failed_provider_and_a_corrupt_saved_result_cost_one_line_each(small_db: Path, tmp_path: Path) -> None:
    """A refresh that runs its flow: one provider fails (its recording answers 500), a result saved by
    an earlier refresh is unreadable. Each is said in one line: no Prefect task traceback, no complaint
    about the temporary API server, and status still answers."""
    import shutil

    db = tmp_path / "ledger.duckdb"
    shutil.copy(small_db, db)
    saved = Path(f"{db}.pending") / "refresh-20261201T000000Z-deadbeef"
    saved.mkdir(parents=True)
    (saved / "vastai.json").write_text("{garbage")
    recordings = tmp_path / "recordings"
    for p in ("lambda", "vastai"):
        shutil.copytree(BUNDLED_RECORDINGS / p, recordings / p)
    manifest = json.loads((recordings / "lambda" / "manifest.json").read_text())
    for ex in manifest["exchanges"]:
        ex["response"] = {"status": 500, "body": "upstream exploded"}
    (recordings / "lambda" / "manifest.json").write_text(json.dumps(manifest))
    done = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "refresh", "--replay", "--recordings",
                           str(recordings), "-p", "lambda", "-p", "vastai", "--db", str(db)],
                          capture_output=True, text=True, timeout=300)
    shown = done.stdout + done.stderr
    assert done.returncode == 1, shown
    assert "Traceback" not in shown and "Error logging to API" not in shown and "EventsWorker" not in shown, shown
    assert "HTTP 500 from cloud.lambda.ai/api/v1/instance-types: upstream exploded" in " ".join(shown.split())
    assert "cannot read the saved result" in shown and (saved / "vastai.json.unreadable").exists()
    status = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "status", "--db", str(db), "-f", "csv"],
                            capture_output=True, text=True, timeout=120)
    assert status.returncode in (0, 1, 3) and "vastai" in status.stdout, status.stderr


# -- a record is quarantined, not the provider ---------------------------------------------------

def test_absurd_records_are_quarantined_while_the_rest_of_the_provider_loads(tmp_path: Path) -> None:
    """Lambda's real client, its answer carrying four more instance types: a price of 5,000 digits, a
    name holding a lone surrogate ("\\ud800", valid JSON), a new 8x H100 at price_cents_per_hour 1e-10
    ($1.25e-13 per GPU-hour), and 8x V100 claiming 100,000 GPUs. Each is quarantined with its reason;
    the 27 real offers load, and the warehouse's cheapest H100 and V100 are Lambda's real prices."""
    doc = json.loads((BUNDLED_RECORDINGS / "lambda" / "instance-types.json").read_text())

    def variant(of: str, name: str, **changes: Any) -> None:
        item = json.loads(json.dumps(doc["data"][of]))
        item["instance_type"].update(name=name, **{k: v for k, v in changes.items() if k != "gpus"})
        if "gpus" in changes:
            item["instance_type"]["specs"]["gpus"] = changes["gpus"]
        doc["data"][name] = item

    variant("gpu_8x_h100_sxm5", "gpu_8x_h100_huge", price_cents_per_hour=424242)
    variant("gpu_1x_a10", "SURROGATE")
    variant("gpu_8x_h100_sxm5", "gpu_8x_h100_new", price_cents_per_hour=1e-10)
    variant("gpu_8x_v100", "gpu_100000x_v100", gpus=100_000)
    body = (json.dumps(doc).replace("424242", "9" * 5000).replace('"SURROGATE"', '"gpu_1x_\\ud800"')).encode()

    def hook(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json"}, body

    batch = replayed_batch("lambda", hook=hook)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    said = " | ".join(f"{ref}: {why}" for ref, why in reasons.items())
    assert len(batch.offers) == 27, said
    assert re.search(r"gpu_8x_h100_huge[^|]*price_per_hour is not a finite number", said), said
    assert re.search(r"gpu_1x_\\ud800[^|]*UTF-8 cannot encode", said), said
    assert re.search(r"gpu_8x_h100_new[^|]*price_per_gpu_hour 1\.25e-13 USD is outside 0\.075\.\.122", said), said
    assert re.search(r"gpu_100000x_v100[^|]*gpu_count 100000 exceeds 16", said), said
    db = tmp_path / "ledger.duckdb"
    report = load(db, [scraped("lambda", "replay", utcnow(), utcnow(), batch=batch)], "r")[0]
    assert report.ok and report.rows_loaded == 27 and report.rows_quarantined == len(batch.quarantined)
    con = duckdb.connect(str(db), read_only=True)
    try:
        cheapest = dict(con.execute("select gpu_model, min(price_per_gpu_hour) from offers group by 1").fetchall())
    finally:
        con.close()
    assert cheapest["H100-SXM"] == 3.99 and cheapest["V100-SXM2-16"] == 0.79  # lambda.ai/instances, 2026-09-20


def test_every_gpu_model_has_cited_plausibility_bounds() -> None:
    from gpuledger.warehouse import gpus
    from gpuledger.warehouse.records import plausible

    assert set(plausible()) == set(gpus.models())  # a new model of gpu_models.csv needs its tier
    text = (Path(gpus.__file__).parent / "data" / "plausibility.csv").read_text()
    tiers = [line.split(",") for line in text.splitlines() if line and not line.startswith(("#", "tier,"))]
    for tier, low, high, most, floor_from, ceiling_from, _ in tiers:
        assert f"[{floor_from}]" in text and f"[{ceiling_from}]" in text, tier  # each bound cites its price
        assert 0 < float(low) < float(high) and float(most) >= 16, tier
