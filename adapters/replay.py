"""Loopback HTTP replay and recording of provider exchanges (format: docs/recordings.md): `ReplayServer` answers
real clients on 127.0.0.1, one port per host; `RecordingProxy` forwards and records in the same layout."""

from __future__ import annotations

import gzip
import json
import logging
import re
import sys
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import parse_qsl, urlsplit

import httpx
from pydantic import BaseModel, Field, ValidationError

from gpuledger.adapters import bounds

# Never recorded, never matched: they change on every call or carry secrets.
VOLATILE_PARAMS = frozenset({
    "StartTime", "EndTime", "StartDateRange", "EndDateRange", "X-Amz-Date", "X-Amz-Signature",
    "X-Amz-Credential", "X-Amz-Security-Token", "key", "api_key", "access_token",
})
# Response headers that describe one transfer, not the content.
HOP_HEADERS = frozenset(
    {"content-length", "transfer-encoding", "connection", "content-encoding", "date", "server", "keep-alive"}
)
# Kept besides the content type: what a conditional request is answered against.
VALIDATOR_HEADERS = ("etag", "last-modified")
BUNDLED_RECORDINGS = Path(__file__).parent / "recordings"
# A body file larger than this (or gzipped) is streamed from disk one chunk at a time.
STREAM_MIN_BYTES = 1 << 20
# gzip's read(n) holds about 3 n at its peak on Python 3.12 and later (2 n on 3.11): a small chunk keeps a
# streamed .gz body near 1 MB in memory on every supported Python.
STREAM_CHUNK_BYTES = 1 << 18
MAX_BODY_BYTES = 1 << 30  # the most a body read whole (a hook's, a test's) may hold
GZIP_MAGIC = b"\x1f\x8b"

log = logging.getLogger("gpuledger.replay")


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]  # lower-cased names
    body: bytes
    target: str = ""  # path with query string, as sent

    def json_body(self) -> Any:
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    def describe(self) -> str:
        shown = {k: v for k, v in self.params.items() if k not in VOLATILE_PARAMS}
        return f"{self.method} {self.path} params={shown}"


def parse_request(method: str, target: str, headers: dict[str, str], body: bytes) -> Request:
    parts = urlsplit(target)
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    lower = {k.lower(): v for k, v in headers.items()}
    if "application/x-www-form-urlencoded" in lower.get("content-type", "") and body:
        params.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return Request(method.upper(), parts.path or "/", params, lower, body, target)


def not_modified(req: Request, headers: dict[str, str]) -> bool:
    """Whether a GET is answered 304 (RFC 9110 13.1.2-3): If-None-Match by weak comparison, else
    If-Modified-Since against Last-Modified."""
    have = {k.lower(): v for k, v in headers.items()}
    tags = req.headers.get("if-none-match")
    if req.method not in ("GET", "HEAD"):
        return False
    if tags is not None:
        wanted = {tag.strip().removeprefix("W/") for tag in tags.split(",")}
        return tags.strip() == "*" or ("etag" in have and have["etag"].strip().removeprefix("W/") in wanted)
    try:
        return parsedate_to_datetime(have["last-modified"]) <= parsedate_to_datetime(req.headers["if-modified-since"])
    except (KeyError, TypeError, ValueError):  # a date missing or not parsing: the condition is ignored
        return False


def _json_subset(want: Any, got: Any) -> bool:
    """`want` is in `got`: a None value means the key is absent, a list's items are each found."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k not in got if v is None else k in got and _json_subset(v, got[k])
                                             for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and all(any(_json_subset(w, g) for g in got) for w in want)
    return want == got


def _count_leaves(doc: Any) -> int:
    if isinstance(doc, (dict, list)):
        return sum(map(_count_leaves, doc.values() if isinstance(doc, dict) else doc)) or 1
    return 1


class RecordedResponse(BaseModel):
    status: int = Field(default=200, ge=100, le=599)
    headers: dict[str, str] = {}
    body: str = ""
    body_file: str | None = None  # relative to the recording's folder


class Exchange(BaseModel):
    """One exchange of a manifest; `body_source` is the body itself or its file (load_manifest)."""

    host: str = Field(min_length=1)
    method: str = "GET"
    path: str = "/"
    match: dict[str, Any] = {}
    response: RecordedResponse
    body_source: Path | bytes = b""

    @property
    def status(self) -> int:
        return self.response.status

    @property
    def headers(self) -> dict[str, str]:
        return self.response.headers

    @property
    def specificity(self) -> int:
        m = self.match
        return (len(m.get("params", {})) + len(m.get("headers", {})) + len(m.get("body_contains", []))
                + (_count_leaves(m["json"]) if "json" in m else 0))

    def matches(self, req: Request) -> bool:
        m = self.match
        return (req.method == self.method.upper() and req.path == self.path
                and _json_subset(m.get("params", {}), req.params)
                and all(req.headers.get(k.lower()) == v for k, v in m.get("headers", {}).items())
                and all(s.encode() in req.body for s in m.get("body_contains", []))
                and ("json" not in m or _json_subset(m["json"], req.json_body())))

    def body(self) -> bytes:
        """The whole body; RecordingError past MAX_BODY_BYTES (a .gz file may inflate a thousandfold)."""
        if isinstance(self.body_source, bytes):
            return self.body_source
        return b"".join(FileBody(self.body_source).chunks(limit=MAX_BODY_BYTES))

    def payload(self) -> bytes | FileBody:
        """The body to send: a large or compressed body file is streamed, a small body is read whole."""
        if isinstance(self.body_source, Path) and (self.body_source.suffix == ".gz"
                                                   or self.body_source.stat().st_size > STREAM_MIN_BYTES):
            return FileBody(self.body_source)
        return self.body()


@dataclass(frozen=True)
class FileBody:
    """A recorded body served from its file in chunks; a .gz one decompressed as it is sent (length unknown)."""

    path: Path

    @property
    def length(self) -> int | None:
        return None if self.path.suffix == ".gz" else self.path.stat().st_size

    def chunks(self, size: int = STREAM_CHUNK_BYTES, limit: int | None = None) -> Iterator[bytes]:
        opener = gzip.open if self.path.suffix == ".gz" else open
        read = 0
        try:
            with opener(self.path, "rb") as f:
                while chunk := f.read(size):
                    read += len(chunk)
                    if limit is not None and read > limit:
                        raise RecordingError(f"{self.path}: the body holds more than {limit:,} bytes")
                    yield chunk
        except (OSError, EOFError, zlib.error) as err:  # a truncated or damaged .gz file
            raise RecordingError(f"body file {self.path} cannot be read: {err}") from None


class RecordingError(Exception):
    """A recording folder is missing or malformed."""


class _Manifest(BaseModel):
    settings: dict[str, Any] = {}
    exchanges: list[Exchange] = []


def holds_recording(provider_dir: Path) -> bool:
    return (provider_dir / "manifest.json").is_file()


def load_manifest(provider_dir: Path) -> tuple[dict[str, Any], list[Exchange]]:
    """The manifest's document and exchanges; a one-line RecordingError for a missing or malformed
    manifest, or a body file missing or outside the provider's folder."""
    path = provider_dir / "manifest.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        manifest = _Manifest.model_validate(doc)
    except FileNotFoundError:
        raise RecordingError(f"no recording for this provider: {path} does not exist") from None
    except (OSError, ValueError) as err:  # ValidationError is a ValueError
        problem = " ".join(str(err).split())[:300] if not isinstance(err, ValidationError) else "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()[:3])
        raise RecordingError(f"{path}: not a recording manifest ({problem})") from None
    folder = provider_dir.resolve()
    for i, ex in enumerate(manifest.exchanges):
        ex.body_source = ex.response.body.encode()
        if ex.response.body_file is not None:
            ex.body_source = body = (folder / ex.response.body_file).resolve()
            if not body.is_relative_to(folder):
                raise RecordingError(f"{path}: exchange {i}: body file {ex.response.body_file!r} is outside "
                                     f"the recording's folder")
            if not body.is_file():
                raise RecordingError(f"{path}: exchange {i}: body file {body} is missing")
            with body.open("rb") as f:
                magic = f.read(2)
            if body.suffix == ".gz" and magic != GZIP_MAGIC:
                raise RecordingError(f"{path}: exchange {i}: body file {body} is not gzip-compressed "
                                     "(a name ending in .gz is served decompressed)")
    return doc, manifest.exchanges


# (host, request, exchange|None) -> (status, headers, body) replacing the answer, or None (the recording's).
ResponseHook = Callable[[str, Request, "Exchange | None"], "tuple[int, dict[str, str], bytes] | None"]
Answer = Callable[[str, Request], "tuple[int, dict[str, str], bytes | FileBody]"]
# Told after each answer: (host, request, body bytes sent).
SentHook = Callable[[str, Request, int], None]


def _make_handler(host: str, answer: Answer, on_sent: SentHook | None = None):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            req = parse_request(self.command, self.path, dict(self.headers.items()), body)
            try:
                status, headers, payload = answer(host, req)
            except ConnectionAbortedError:  # a proxy whose upstream failed: the client sees it fail too
                self.close_connection = True
                return
            self.send_response(status)
            for k, v in headers.items():
                if k.lower() not in HOP_HEADERS:
                    self.send_header(k, v)
            streamed = isinstance(payload, FileBody)
            size = payload.length if streamed else len(payload)
            self.send_header(*(("Transfer-Encoding", "chunked") if size is None else ("Content-Length", str(size))))
            self.end_headers()
            sent = 0
            if self.command != "HEAD":
                sent = self._send_body(payload.chunks() if streamed else [payload], chunked=size is None)
            if on_sent is not None:
                on_sent(host, req, sent)

        def _send_body(self, chunks: Iterable[bytes], chunked: bool) -> int:
            sent = 0
            try:
                for chunk in chunks:
                    self.wfile.write(b"%X\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                    sent += len(chunk)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):  # the client gave up: nothing left to send to
                self.close_connection = True
            except RecordingError as err:  # the answer breaks off: the client fails, the log names the file
                log.warning("gpuledger replay: %s", err)
                self.close_connection = True
            return sent

        do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that gave up is no error here
            super().handle_error(request, client_address)


class _HostServers:
    """One HTTP server per virtual host, all on 127.0.0.1."""

    def __init__(self) -> None:
        self.servers: dict[str, ThreadingHTTPServer] = {}

    def add(self, host: str, answer: Answer, on_sent: SentHook | None = None) -> str:
        if host not in self.servers:
            server = self.servers[host] = _Server(("127.0.0.1", 0), _make_handler(host, answer, on_sent))
            # a short poll: closing waits for each serve loop's next one
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"replay-{host}",
                             daemon=True).start()
        return self.url(host)

    def url(self, host: str) -> str:
        return f"http://127.0.0.1:{self.servers[host].server_address[1]}"

    def close(self) -> None:
        # Each shutdown waits for its serve loop's next poll: all are asked at once.
        with ThreadPoolExecutor(max(1, len(self.servers))) as pool:
            list(pool.map(ThreadingHTTPServer.shutdown, self.servers.values()))
        for s in self.servers.values():
            s.server_close()
        self.servers.clear()


class ReplayServer:
    """Serves recorded exchanges; `endpoints()` maps real hosts to loopback URLs."""

    def __init__(self, recordings_dir: Path | str, providers: list[str] | None = None,
                 hook: ResponseHook | None = None) -> None:
        self.root = Path(recordings_dir)
        self.hook = hook
        self.exchanges: dict[str, list[Exchange]] = {}
        self.settings: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, Request]] = []
        self.bytes_sent: dict[str, int] = {}  # host -> response body bytes sent
        self._lock = threading.Lock()
        self._hosts = _HostServers()
        names = providers if providers is not None else sorted(
            p.name for p in self.root.iterdir() if holds_recording(p))
        for name in names:
            doc, exchanges = load_manifest(self.root / name)
            self.settings[name] = doc.get("settings", {})
            for ex in exchanges:
                self.exchanges.setdefault(ex.host, []).append(ex)

    def __enter__(self) -> "ReplayServer":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        for host in self.exchanges:
            self._hosts.add(host, self._answer, self._sent)

    def close(self) -> None:
        self._hosts.close()

    def endpoints(self) -> dict[str, str]:
        return {h: self._hosts.url(h) for h in self._hosts.servers}

    def find(self, host: str, req: Request) -> Exchange | None:
        found = [ex for ex in self.exchanges.get(host, []) if ex.matches(req)]
        return max(found, key=lambda ex: ex.specificity, default=None)

    def _sent(self, host: str, req: Request, nbytes: int) -> None:
        with self._lock:
            self.bytes_sent[host] = self.bytes_sent.get(host, 0) + nbytes

    def _answer(self, host: str, req: Request) -> tuple[int, dict[str, str], bytes | FileBody]:
        with self._lock:
            self.requests.append((host, req))
        ex = self.find(host, req)
        if self.hook is not None:
            hooked = self.hook(host, req, ex)
            if hooked is not None:
                return hooked
        if ex is None:
            msg = f"gpuledger replay: no recorded exchange for {host}: {req.describe()}"
            return 404, {"Content-Type": "text/plain"}, msg.encode()
        if ex.status == 200 and not_modified(req, ex.headers):
            return 304, {k: v for k, v in ex.headers.items() if k.lower() in VALIDATOR_HEADERS}, b""
        return ex.status, dict(ex.headers), ex.payload()


def write_endpoints(server: ReplayServer, path: Path) -> None:
    """Save a started server's endpoints and settings for a refresh in another process (--replay-endpoints)."""
    doc = {"endpoints": server.endpoints(), "settings": server.settings}
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)


def read_endpoints(path: Path | str) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """(host -> loopback URL, provider -> recorded settings) as `write_endpoints` saved them."""
    try:
        doc = json.loads(Path(path).read_text())
        return dict(doc["endpoints"]), dict(doc.get("settings", {}))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise RecordingError(f"{path}: not a replay endpoints file ({err})") from err


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "root"


@dataclass
class Recorder:
    out_dir: Path
    provider: str
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def save(self, host: str, req: Request, status: int, headers: dict[str, str], body: bytes) -> None:
        match: dict[str, Any] = {}
        params = {k: v for k, v in req.params.items() if k not in VOLATILE_PARAMS}
        if params:
            match["params"] = params
        target = req.headers.get("x-amz-target")
        if target:
            match["headers"] = {"X-Amz-Target": target}
        doc = req.json_body()
        if isinstance(doc, dict):
            match["json"] = {k: v for k, v in doc.items() if k not in VOLATILE_PARAMS}
        with self.lock:
            n = len(self.exchanges) + 1
            hint = params.get("Action") or (target or "").split(".")[-1] or req.path.rsplit("/", 1)[-1]
            rel = f"{_slug(host)}/{n:04d}-{_slug(hint)}.body"
            (self.out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.out_dir / rel).write_bytes(body)
            keep = {k: v for k, v in headers.items() if k.lower() in ("content-type", *VALIDATOR_HEADERS)}
            self.exchanges.append({"host": host, "method": req.method, "path": req.path, "match": match,
                                   "response": {"status": status, "headers": keep, "body_file": rel}})

    def write_manifest(self, settings: dict[str, Any], recorded_at: str) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / "manifest.json"
        doc = {"provider": self.provider, "recorded_at": recorded_at, "settings": settings,
               "exchanges": self.exchanges}
        path.write_text(json.dumps(doc, indent=1))
        return path


class RecordingProxy:
    """Forwards each request to `upstream(host)`, bounded (bounds.py; a refused answer is a 502 saying why),
    recording it with `recorder`; request headers are never written. Not for SigV4 (record_boto_client)."""

    def __init__(self, recorder: Recorder | None, upstream: Callable[[str], str], timeout: float = 300,
                 limit: int | None = None) -> None:
        self.recorder = recorder
        self.upstream = upstream
        self.timeout = timeout
        self.limit = limit if limit is not None else bounds.answer_limit(recorder.provider if recorder else "")
        self._hosts = _HostServers()
        self._client = httpx.Client(timeout=timeout, follow_redirects=False)
        self._lock = threading.Lock()

    def url(self, host: str) -> str:
        with self._lock:
            return self._hosts.add(host, self._forward)

    def _forward(self, host: str, req: Request) -> tuple[int, dict[str, str], bytes]:
        target = self.upstream(host).rstrip("/") + (req.target or req.path)
        headers = {k: v for k, v in req.headers.items() if k not in ("host", "content-length", "accept-encoding")}
        request = self._client.build_request(req.method, target, headers=headers, content=req.body or None)
        try:
            resp = bounds.fetch(self._client, request, self.limit, self.timeout)
        except bounds.AnswerRefused as err:
            return 502, {"Content-Type": "text/plain"}, f"gpuledger: {host}{req.path}: {err}".encode()
        except httpx.TransportError as err:
            raise ConnectionAbortedError(str(err)) from None
        out_headers = {k: v for k, v in resp.headers.items() if k.lower() not in HOP_HEADERS}
        if self.recorder is not None and 200 <= resp.status_code < 300:
            self.recorder.save(host, req, resp.status_code, out_headers, resp.content)
        return resp.status_code, out_headers, resp.content

    def close(self) -> None:
        self._hosts.close()
        self._client.close()


def record_boto_client(client: Any, recorder: "Recorder", host: str) -> None:
    """Record a boto3 client's exchanges under the real `host`: before-send stashes the signed
    request in the call's context, response-received saves it with the raw body."""

    def before_send(request: Any, **_: Any) -> None:
        request.context["gpuledger_request"] = request

    def response_received(response_dict: Any = None, context: Any = None, exception: Any = None, **_: Any) -> None:
        sent = (context or {}).get("gpuledger_request")
        status = (response_dict or {}).get("status_code", 0)
        if exception is not None or sent is None or not 200 <= status < 300:
            return
        parts = urlsplit(sent.url)
        body = sent.body if isinstance(sent.body, bytes) else (sent.body or "").encode()
        headers_sent = {k: v.decode("latin-1") if isinstance(v, bytes) else v for k, v in sent.headers.items()}
        req = parse_request(sent.method, parts.path + (f"?{parts.query}" if parts.query else ""), headers_sent, body)
        recorder.save(host, req, status, dict(response_dict.get("headers", {})), response_dict.get("body") or b"")

    client.meta.events.register("before-send", before_send)
    client.meta.events.register("response-received", response_received)
