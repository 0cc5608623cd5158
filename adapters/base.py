"""What every source gets handed: where to send requests, and how.

A source never builds URLs to a provider's host by itself: it asks its
`SourceContext` for the base URL of a real host name. Live, that is the real
host; under replay, a loopback port serving recordings; under record, a
loopback proxy that saves what the real host said. The same client code runs
in all three, which is what makes the replay tests honest.
"""

from __future__ import annotations

import codecs
import contextvars
import dataclasses
import json
import logging
import os
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator

from urllib.parse import quote, urlsplit

import httpx
from tenacity import RetryCallState, Retrying

from gpuledger.adapters import bounds
from gpuledger.adapters.replay import Recorder, RecordingProxy, record_boto_client
from gpuledger.adapters.retry import RetryableAnswer, RetryPolicy, retry_after_s
from gpuledger.warehouse.records import install_secret_cutter
from gpuledger.warehouse.settings import Settings, SettingsError, env_name, load_settings

log = logging.getLogger("gpuledger.adapters")

USER_AGENT = "gpuledger/0.1 (+https://github.com/gpuledger/gpuledger; GPU price comparison)"


# -- secrets never leave in a message ----------------------------------------------------------

# The values of every registered source's secret environment variables (ProviderSpec.secret_env_vars)
# and of any secret registered at run time (register_secret: e.g. an OAuth refresh token read from
# an ADC file) are cut out of every error message and of httpx's request log lines.
REDACTED = "[redacted]"
# The value of a JSON field that hands out a credential: an OAuth token answer, a key echoed back.
TOKEN_FIELDS = re.compile(r'("(?:access_token|refresh_token|id_token|client_secret|api_?key)"\s*:\s*")[^"]*(")', re.I)
_registered: set[str] = set()
_registered_lock = threading.Lock()
# Credential-shaped text whatever its value: what a server echoing our request would show.
_SECRET_PATTERNS = (
    re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"(?i)(\bbasic\s+)[A-Za-z0-9+/=]{8,}"),
    re.compile(r"(?i)(\b(?:api[_-]?key|x-goog-api-key|key|access_token|refresh_token|client_secret|"
               r"id_token|password|secret|token|session[_-]?token)[\"']?\s*[=:]\s*[\"']?)[^\s&\"',;<>}]{6,}"),
    re.compile(r"(Credential=)[^/\s,]{8,}"),
    re.compile(r"(?s)(-----BEGIN [A-Z ]*PRIVATE KEY-----).*?(-----END [A-Z ]*PRIVATE KEY-----|$)"),
)


def register_secret(value: str | None) -> None:
    """A secret that is not in the environment (read from a credentials file, issued by a token server)."""
    if value and len(value) >= 6:
        with _registered_lock:
            _registered.add(value)


def secret_env_vars() -> tuple[str, ...]:
    # Imported here: the registry imports the source modules, which import this one.
    from gpuledger.adapters.registry import secret_env_vars as registered

    return registered()


def known_secrets() -> list[str]:
    """The secret values in play: the env's and the registered ones, longest first."""
    with _registered_lock:
        values = set(_registered)
    values.update(v for v in (os.environ.get(n, "").strip() for n in secret_env_vars()) if len(v) >= 6)
    return sorted(values, key=len, reverse=True)


def redact(text: str, patterns: bool = True) -> str:
    """`text` with every known secret value (raw or URL-encoded) and, unless `patterns` is False,
    every credential-shaped fragment replaced."""
    if not text:
        return text
    for value in known_secrets():
        text = text.replace(value, REDACTED).replace(quote(value, safe=""), REDACTED)
    if patterns:
        for pattern in _SECRET_PATTERNS:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


class SecretCutter:
    """Replaces given secret values in a text, as they are, URL-encoded or JSON-escaped (the forms
    a value takes inside a body or a provider_data document). A class, not a closure: a Batch
    keeps one and is pickled to a Dask worker and back."""

    def __init__(self, values: Iterable[str]) -> None:
        forms = {f for v in values for f in (v, quote(v, safe=""), json.dumps(v)[1:-1])}
        self.pattern = re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))

    def __call__(self, text: str) -> str:
        return self.pattern.sub(REDACTED, text) if self.pattern.search(text) else text


def secret_cutter() -> SecretCutter | None:
    """The cutter of every known secret value, or None while none is known. Only exact values:
    data is not searched for credential shapes."""
    values = known_secrets()
    return SecretCutter(values) if values else None


# Every Batch a source fills cuts these values out of its records, quarantine entries and notes.
install_secret_cutter(secret_cutter)


class RedactingRecorder(Recorder):
    """A Recorder that never writes a secret (a recording is shared like source code): every known
    secret value is cut from the answers it keeps (a server may quote our key back), and so is every
    token an answer hands out (TOKEN_FIELDS: the source registers it only after the answer is kept);
    a request parameter or JSON field holding a secret is left out of the exchange's `match`, so the
    recording still replays. Otherwise an answer is kept as it was answered."""

    def save(self, host: str, req: Any, status: int, headers: dict[str, str], body: bytes) -> None:
        cut = secret_cutter() or (lambda text: text)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            clean = TOKEN_FIELDS.sub(lambda m: m.group(1) + REDACTED + m.group(2), cut(text))
            body = clean.encode("utf-8") if clean != text else body

        def kept(doc: Any) -> Any:
            if isinstance(doc, dict):
                return {k: kept(v) for k, v in doc.items() if not isinstance(v, str) or cut(v) == v}
            return [kept(v) for v in doc if not isinstance(v, str) or cut(v) == v] if isinstance(doc, list) else doc

        doc = req.json_body()
        req = dataclasses.replace(req, path=cut(req.path), params=kept(req.params),
                                  body=req.body if doc is None else json.dumps(kept(doc)).encode())
        super().save(host, req, status, headers, body)


def scrubbed(err: BaseException) -> BaseException:
    """`err` to chain from, or a stand-in of its type and redacted text when its text holds a secret
    (a library error quoting a server that echoed our request), so no traceback carries it."""
    text = str(err)
    clean = redact(text)
    if clean == text:
        return err
    return Exception(f"{type(err).__name__}: {clean}")


class _RedactingFilter(logging.Filter):
    """httpx logs every request's URL at INFO (RunPod's documented key rides in its query string)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True


for _name in ("httpx", "urllib3.connectionpool"):
    logging.getLogger(_name).addFilter(_RedactingFilter())


# -- TLS ------------------------------------------------------------------------------------------

_SSL_CONTEXT: list[ssl.SSLContext] = []
_SSL_LOCK = threading.Lock()


def verifying_ssl_context() -> ssl.SSLContext:
    """The certificate-verifying TLS context every http_client shares, made once per process the
    way httpx makes its default one (SSL_CERT_FILE / SSL_CERT_DIR, else certifi's bundle).
    Loading the CA bundle costs about 0.15 s of CPU, which each new client would pay again; an
    SSLContext is safe to share between connections and threads."""
    with _SSL_LOCK:
        if not _SSL_CONTEXT:
            _SSL_CONTEXT.append(httpx.create_ssl_context())
        return _SSL_CONTEXT[0]


# -- a JSON object names each key once ----------------------------------------------------------

@dataclass(frozen=True)
class RepeatedKey:
    """A key a JSON object gave again: the value refused (the object keeps its first)."""

    where: str  # host and path of the answer
    key: str
    value: Any


def parse_json(data: bytes | str, where: str, repeated: list[RepeatedKey]) -> Any:
    """`data` parsed as JSON (ValueError when it is not). An object that names a key twice keeps
    the first value, and each later one is appended to `repeated`: Python's json would keep the
    last silently, and an answer listing a price twice is not to be trusted for the second."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) == len(items):  # the common case, at C speed
            return obj
        first: dict[str, Any] = {}
        for key, value in items:
            if key in first:
                repeated.append(RepeatedKey(where, key, value))
            else:
                first[key] = value
        return first

    kept = len(repeated)
    try:
        return json.loads(data, object_pairs_hook=pairs)
    except ValueError as err:
        if "digits" not in str(err):
            raise
    # An integer longer than Python converts (4,300 digits) fails the whole answer: read it as a
    # float instead (infinity), which the one record holding it fails as a number, not the provider.
    del repeated[kept:]
    return json.loads(data, object_pairs_hook=pairs, parse_int=lambda s: int(s) if len(s) < 4000 else float(s))


def quarantine_repeated(batch: Any, repeated: list[RepeatedKey]) -> None:
    """Each refused value of a repeated key, quarantined in `batch` (kind `json`) with its key."""
    for r in repeated:
        batch.quarantine("json", f"{r.where} key {r.key!r}",
                         f"repeated JSON key {r.key!r}: the object names it again; its first value is kept, "
                         "this one refused", r.value)


class SourceError(Exception):
    """A provider could not be scraped; the message names the provider and what failed.

    The message is redacted when the error is made: it reaches scrape_runs, the terminal,
    Prefect's task log and its artifact, and may quote what a server answered.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class MissingCredentialsError(SourceError):
    """The provider needs credentials that are not configured; it is skipped, others continue."""


class SchemaDriftError(SourceError):
    """The provider answered, but not in the shape we parse (a field is missing or renamed)."""


class Unchanged(Exception):
    """The source's answer is the one its last loaded fetch got (HTTP 304, the same price list
    version): nothing is downloaded or parsed, and the merge confirms the provider's rows as they are."""


class EnrichmentTimeout(SourceError):
    """An enrichment ran past its time limit; raised at its next request."""


# The deadline of the enrichment running in this thread (a monotonic time), checked before each request.
_ENRICHMENT_DEADLINE: contextvars.ContextVar[tuple[str, float] | None] = contextvars.ContextVar(
    "gpuledger_enrichment_deadline", default=None)


def check_deadline() -> None:
    """Raise EnrichmentTimeout when the enrichment running in this thread is past its time (a client
    that makes requests gpuledger's httpx and boto3 hooks do not see calls this before each)."""
    running = _ENRICHMENT_DEADLINE.get()
    if running is not None and time.monotonic() > running[1]:
        raise EnrichmentTimeout(f"{running[0]}: timed out")


# -- paging ---------------------------------------------------------------------------------------

# How the next page is asked for: given the answer, the items it held and the request that got it,
# the next request ({"path", "params", "json"}) or None when the listing is complete.
NextPage = Callable[[Any, list[Any], dict[str, Any]], "dict[str, Any] | None"]


def next_link(link: Callable[[Any], str | None], host: str) -> NextPage:
    """Follow the answer's link to the next page (OData NextPageLink, JSON:API links.next), which
    must stay on `host`: a link elsewhere is refused, never followed with our credentials."""
    expected = urlsplit(f"//{host}")

    def following(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
        url = link(doc)
        if not url:
            return None
        parts = urlsplit(url)
        if parts.netloc and (parts.hostname != expected.hostname
                             or parts.port not in (expected.port, None if expected.port else 443)):
            raise SourceError(f"the next-page link points outside {host}: {url[:200]!r}")
        return {**request, "path": parts.path + (f"?{parts.query}" if parts.query else ""), "params": {}}
    return following


def cursor(value: Callable[[Any], Any], param: str) -> NextPage:
    """Send the answer's cursor back as query parameter `param`; no cursor ends the listing."""
    def following(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
        token = value(doc)
        return {**request, "params": {**request["params"], param: token}} if token else None
    return following


def page_number(param: str = "page", start: int = 1) -> NextPage:
    """Ask for page start, start + 1, ... until a page comes back empty."""
    def following(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
        if not items:
            return None
        current = int(request["params"].get(param, start))
        return {**request, "params": {**request["params"], param: current + 1}}
    return following


# boto3 clients are made under one lock (a boto3 Session is not thread-safe) from one session per
# scrape; every session of the process shares one botocore loader, so each service model (read-only
# JSON) is parsed once, not once per client. Credentials stay per session (the standard chain).
_BOTO_LOCK = threading.Lock()
_BOTO_LOADER: Any = None


def _new_boto_session() -> Any:
    import boto3
    import botocore.session

    global _BOTO_LOADER
    core = botocore.session.get_session()
    if _BOTO_LOADER is None:
        _BOTO_LOADER = core.get_component("data_loader")
    else:
        core.register_component("data_loader", _BOTO_LOADER)
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_api_timestamp)
    return boto3.session.Session(botocore_session=core)


def parse_api_timestamp(value: Any) -> datetime:
    """A timestamp of an AWS answer, timezone-aware: the ISO 8601 the EC2 API writes
    ('2026-11-30T03:00:00.000Z') by the standard library, anything else by botocore's parser.
    botocore's default goes through dateutil, the largest cost of a world-scale spot price
    history (75,239 Timestamps): the same instants, many times faster."""
    if isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value)
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)


@dataclass
class SourceContext:
    """Endpoints, settings and HTTP policy for one provider's scrape."""

    provider: str
    mode: str = "live"  # live | replay | record
    replay_urls: dict[str, str] = field(default_factory=dict)  # host -> loopback base URL
    settings: dict[str, Any] = field(default_factory=dict)
    # Where each incremental stream of this source resumes: stream key (the source names it) ->
    # ISO timestamp of the newest observation the warehouse holds. The flow reads it from the
    # warehouse before the scrape; a missing key means a first run (the source backfills).
    since: dict[str, str] = field(default_factory=dict)
    # What proved this source's answers current at its last loaded fetch (key -> an ETag and
    # Last-Modified date, a version; warehouse.validators), and what this fetch's answers carry.
    validators: dict[str, str] = field(default_factory=dict)
    new_validators: dict[str, str] = field(default_factory=dict)
    bytes_fetched: int = 0  # response bodies as received, every client
    recorder: Recorder | None = None
    proxy: RecordingProxy | None = None
    http_timeout_s: float = 60.0
    http_attempts: int = 3
    retry_wait_max_s: float = 8.0
    retry_budget_s: float = 120.0
    requests_made: int = 0
    pages: dict[str, int] = field(default_factory=dict)  # listing -> pages read (paginate)
    degraded: dict[str, str] = field(default_factory=dict)  # enrichment -> why it is missing (enrich)
    # Later values of keys a JSON answer repeated (parse_json), for the flow to quarantine.
    repeated_keys: list[RepeatedKey] = field(default_factory=list)
    _boto_session: Any = field(default=None, repr=False, compare=False)

    # -- where to send requests -------------------------------------------------
    def upstream_url(self, host: str) -> str:
        """Base URL of `host` itself (live) or of its replay server."""
        if self.mode == "replay" or (self.mode == "record" and self.replay_urls):
            try:
                return self.replay_urls[host]
            except KeyError:
                raise SourceError(
                    f"{self.provider}: the recording has no exchanges for host {host}"
                ) from None
        return f"https://{host}"

    def url(self, host: str) -> str:
        """Base URL a plain HTTP client should use for `host` (no trailing slash)."""
        if self.mode == "record":
            assert self.proxy is not None
            return self.proxy.url(host)
        return self.upstream_url(host)

    def guarded_url(self, host: str) -> str:
        """Base URL for a client whose requests gpuledger does not send itself (the google clients):
        a loopback proxy that bounds each answer and keeps redirects on their origin (bounds.py)."""
        if self.proxy is None:
            self.proxy = RecordingProxy(None, self.upstream_url, timeout=self.http_timeout_s + 5,
                                        limit=self.answer_limit)
        return self.proxy.url(host)

    @property
    def answer_limit(self) -> int:
        """The most bytes one answer may hold, on the wire or decoded (ProviderSpec.max_answer_mb)."""
        return bounds.answer_limit(self.provider)

    def boto_endpoint(self, host: str) -> str | None:
        """endpoint_url of a boto3 client for `host`: None (boto3's own, signed for the real host) when
        the real provider is reached; the replay server's loopback URL otherwise."""
        if self.mode == "live" or (self.mode == "record" and not self.replay_urls):
            return None
        return self.upstream_url(host)

    @property
    def config(self) -> Settings:
        """The typed settings of this moment: GPULEDGER_* variables over this scrape's `settings`."""
        try:
            return load_settings(**self.settings)
        except SettingsError as err:
            raise SourceError(f"{self.provider}: invalid settings: {err}") from None

    def select_regions(self, available: "Iterable[str]", live_defaults: "Iterable[str]", listed_in: str) -> list[str]:
        """Regions to scrape: setting `<provider>_regions` ("all" or a comma list); else, live,
        `live_defaults` (GPU regions), and under replay/record every region the source lists."""
        wanted = getattr(self.config, f"{self.provider}_regions")
        avail = sorted(set(available))
        if wanted is None:
            defaults = set(live_defaults)
            return [r for r in avail if r in defaults] if self.mode == "live" else avail
        if wanted == "all":
            return avail
        names = [w.strip() for w in wanted.split(",") if w.strip()]
        unknown = [n for n in names if n not in avail]
        if unknown:
            raise SourceError(f"{self.provider}: regions {unknown} are not in {listed_in}")
        return names

    # -- clients ---------------------------------------------------------------
    def boto_client(self, service: str, region: str, host: str, **kwargs: Any) -> Any:
        """A real boto3 client; pointed at loopback under replay, recorded under record."""
        from botocore.config import Config

        endpoint = self.boto_endpoint(host)
        config = Config(
            retries=self.retry_policy.botocore_retries(),
            connect_timeout=min(self.http_timeout_s, 15),
            read_timeout=self.http_timeout_s,
            user_agent_extra="gpuledger/0.1",
        )
        with _BOTO_LOCK:
            if self._boto_session is None:
                self._boto_session = _new_boto_session()
            client = self._boto_session.client(service, region_name=region, endpoint_url=endpoint, config=config,
                                               **kwargs)
        if self.recorder is not None:
            record_boto_client(client, self.recorder, host)

        def count(**_: Any) -> None:
            check_deadline()
            self.requests_made += 1

        def received(response_dict: Any = None, **_: Any) -> None:
            body = (response_dict or {}).get("body")
            self.count_bytes(len(body) if isinstance(body, bytes) else 0)

        client.meta.events.register("before-send", count)
        client.meta.events.register("response-received", received)
        return client

    @property
    def reaches_provider(self) -> bool:
        """A real provider endpoint is reached (live, or recording from live): a key is needed."""
        return self.mode == "live" or (self.mode == "record" and not self.replay_urls)

    def http_client(self, **kwargs: Any) -> httpx.Client:
        headers = {"User-Agent": USER_AGENT, **kwargs.pop("headers", {})}
        kwargs.setdefault("verify", verifying_ssl_context())
        # Redirects are followed by bounds.open_answer, on their own origin only.
        return httpx.Client(timeout=self.http_timeout_s, headers=headers, follow_redirects=False, **kwargs)

    def get(self, client: httpx.Client, host: str, path: str, conditional: bool = False,
            **kwargs: Any) -> httpx.Response:
        """GET under the retry policy (transport errors, 429 and 5xx), its answer bounded (bounds.py);
        SourceError when it gives up. conditional=True, for the one answer a source's data is made
        of: the request carries the ETag and Last-Modified date of the last loaded fetch, a 304
        raises Unchanged, the answer's are kept."""
        key = f"{host}{path}"
        before = json.loads(self.validators.get(key, "{}")) if conditional else {}
        asked = {h: before[v] for h, v in (("If-None-Match", "etag"), ("If-Modified-Since", "last-modified"))
                 if v in before}
        if asked:
            kwargs["headers"] = {**kwargs.get("headers", {}), **asked}
        resp = self.send(client, "GET", host, path, **kwargs)
        if asked and resp.status_code == 304:
            self.new_validators[key] = self.validators[key]
            raise Unchanged(f"{self.provider}: {key} unchanged since the last loaded fetch (HTTP 304)")
        now = {v: resp.headers[v] for v in ("etag", "last-modified") if conditional and v in resp.headers}
        if now:
            self.new_validators[key] = json.dumps(now, sort_keys=True)
        return resp

    def unless_unchanged(self, key: str, validator: str, what: str) -> None:
        """Keep `validator` of `key` (a price list's versions) for the next fetch; raise Unchanged when
        it is the one of the last loaded fetch."""
        self.new_validators[key] = validator
        if self.validators.get(key) == validator:
            raise Unchanged(f"{self.provider}: {what} unchanged since the last loaded fetch")

    def count_bytes(self, n: int) -> None:
        with _registered_lock:
            self.bytes_fetched += n

    def post(self, client: httpx.Client, host: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.send(client, "POST", host, path, **kwargs)

    def send(self, client: httpx.Client, method: str, host: str, path: str, **kwargs: Any) -> httpx.Response:
        def fetch() -> httpx.Response:
            request = client.build_request(method, self.url(host) + path, **kwargs)
            return bounds.fetch(client, request, self.answer_limit, self.http_timeout_s, self.count_bytes)
        return self._with_retries(fetch, host, path)

    def get_json(self, client: httpx.Client, host: str, path: str, **kwargs: Any) -> Any:
        """GET under the retry policy, the answer parsed as JSON (SourceError when it is not)."""
        return self.json_of(self.get(client, host, path, **kwargs), host, path)

    def post_json(self, client: httpx.Client, host: str, path: str, **kwargs: Any) -> Any:
        return self.json_of(self.post(client, host, path, **kwargs), host, path)

    def json_of(self, resp: httpx.Response, host: str, path: str) -> Any:
        """The answer parsed by parse_json: a repeated key's later values go to `repeated_keys`."""
        try:
            return self.parse_json(resp.content, f"{host}{path}")
        except ValueError:
            raise SourceError(f"{self.provider}: {host}{path} did not answer JSON "
                              f"(starts {resp.text[:80]!r})") from None

    def parse_json(self, data: bytes | str, where: str) -> Any:
        """JSON from this source (ValueError when it is not), repeated keys noted (parse_json)."""
        return parse_json(data, where, self.repeated_keys)

    def stream_lines(self, client: httpx.Client, host: str, path: str) -> Iterator[str]:
        """Stream a text body line by line: memory stays flat whatever the size. No source uses it
        today; kept as the text-decoding baseline that bench/ingest.py measures stream_bytes against."""
        return self._stream(client, host, path, _lines)

    def stream_bytes(self, client: httpx.Client, host: str, path: str) -> Iterator[bytes]:
        """Stream a body as raw (content-decoded) byte chunks of any size, for parsers that split
        lines themselves faster than httpx's text decoding can."""
        return self._stream(client, host, path, iter)

    def enrich(self, name: str, fetch: Callable[..., Any], *args: Any, timeout_s: float = 600.0,
               default: Any = None, **kwargs: Any) -> Any:
        """`fetch(*args, **kwargs)` as the enrichment `name` (ProviderSpec.enrichments): its failure,
        or its running past `timeout_s`, costs only itself. The reason is kept in `degraded` (the
        run is then marked degraded and the warehouse keeps what the enrichment last gave) and
        `default` is returned. Missing credentials are not a failure of an enrichment: they
        propagate."""
        token = _ENRICHMENT_DEADLINE.set((name, time.monotonic() + timeout_s))
        try:
            return fetch(*args, **kwargs)
        except MissingCredentialsError:
            raise
        except Exception as err:  # noqa: BLE001 - an enrichment's failure is recorded, never raised
            reason = " ".join(redact(str(err) or type(err).__name__).split())[:300]
            with _registered_lock:
                self.degraded[name] = f"{self.degraded[name]}; {reason}" if name in self.degraded else reason
            log.warning("%s: %s degraded: %s", self.provider, name, reason)
            return default
        finally:
            _ENRICHMENT_DEADLINE.reset(token)

    def paginate(self, client: httpx.Client, host: str, path: str, items: Callable[[Any], list[Any]],
                 next_page: NextPage, *, method: str = "GET", params: dict[str, Any] | None = None,
                 json: Any = None, what: str | None = None, cap: str = "max_pages") -> Iterator[Any]:
        """Every item of a paged listing: `items(answer)` of each page, `next_page` choosing the next
        request (next_link, cursor, page_number, or the source's own) or ending the listing. A
        repeated request or more pages than the setting `cap` allows is a paging loop: SourceError.
        The pages read are counted in `pages` under `what` and noted on the run."""
        what = what or f"{host}{path}"
        limit = getattr(self.config, cap)
        request: dict[str, Any] = {"path": path, "params": dict(params or {}), "json": json}
        asked: set[str] = set()
        for _ in range(limit):
            asked.add(repr(sorted(request.items(), key=str)))
            send = self.get_json if method == "GET" else self.post_json
            extra = {"params": request["params"]} if request["params"] else {}
            if request["json"] is not None:
                extra["json"] = request["json"]
            doc = send(client, host, request["path"], **extra)
            page = items(doc)
            with _registered_lock:
                self.pages[what] = self.pages.get(what, 0) + 1
            yield from page
            following = next_page(doc, page, request)
            if following is None:
                return
            if repr(sorted(following.items(), key=str)) in asked:
                raise SourceError(f"{self.provider}: {what}: the next page asked for is one already read "
                                  "(a paging loop)")
            request = following
        raise SourceError(f"{self.provider}: {what}: paging did not end within {limit} pages ({env_name(cap)})")

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(attempts=self.http_attempts, wait_max_s=self.retry_wait_max_s, budget_s=self.retry_budget_s)

    def _stream(self, client: httpx.Client, host: str, path: str,
                chunks: Callable[[Iterator[bytes]], Iterator[Any]]) -> Iterator[Any]:
        """The answer's status line and headers are retried like any request; once its body
        flows, a failure is final: a retry would hand the consumer pieces it has already seen."""
        url, limit = self.url(host) + path, self.answer_limit

        def open_stream() -> httpx.Response:
            check_deadline()
            deadline[0] = time.monotonic() + self.http_timeout_s
            resp = bounds.within(self.http_timeout_s,
                                 lambda: bounds.open_answer(client, client.build_request("GET", url), limit))
            self.requests_made += 1
            if resp.status_code >= 400:
                _raise_for(self.provider, host, path,
                           bounds.materialized(resp, limit, deadline[0], on_received=self.count_bytes))
            return resp

        deadline = [0.0]
        resp = self._with_retries(open_stream, host, path, count=False)
        try:
            yield from chunks(bounds.chunks(resp, limit, deadline[0], streamed=True))
        except (httpx.TransportError, bounds.AnswerRefused) as err:
            raise SourceError(f"{self.provider}: GET {host}{path} failed: {type(err).__name__}: {err}") from err
        finally:
            resp.close()
            self.count_bytes(resp.num_bytes_downloaded)

    def _with_retries(self, call: Callable[[], httpx.Response], host: str, path: str,
                      count: bool = True) -> httpx.Response:
        def before_sleep(state: RetryCallState) -> None:
            log.info("%s: retrying %s%s after %s", self.provider, host, path, state.outcome.exception())

        def attempt() -> httpx.Response:
            check_deadline()
            resp = call()
            if count:
                self.requests_made += 1
            if resp.status_code >= 400:
                _raise_for(self.provider, host, path, resp)
            return resp

        retrying = self.retry_policy.retrying(
            lambda e: isinstance(e, (httpx.TransportError, RetryableAnswer)), before_sleep)
        try:
            return retrying(attempt)
        except RetryableAnswer as err:
            raise SourceError(f"{self.provider}: {host}{path} failed after {_tries(retrying)} attempts: {err}") from err
        except bounds.AnswerRefused as err:
            raise SourceError(f"{self.provider}: {host}{path}: {err}") from None
        except httpx.TransportError as err:
            raise SourceError(
                f"{self.provider}: {host}{path} failed after {_tries(retrying)} attempts: "
                f"{type(err).__name__}: {err}"
            ) from err


def _tries(retrying: Retrying) -> int:
    return int(retrying.statistics.get("attempt_number", 1))


def _lines(chunks: Iterator[bytes]) -> Iterator[str]:
    """The text lines of a UTF-8 body given in chunks."""
    decode, rest = codecs.getincrementaldecoder("utf-8")().decode, ""
    for chunk in chunks:
        *lines, rest = (rest + decode(chunk)).split("\n")
        yield from (line.rstrip("\r") for line in lines)
    rest += decode(b"", True)
    if rest:
        yield rest


# Field names an API would use to say which currency its prices are in.
CURRENCY_FIELDS = ("currency", "currencyCode", "currency_code", "price_currency")


def as_number(value: Any, what: str, error: type[Exception]) -> float:
    """A JSON number or numeric text ("2.19") as a float; anything else raises `error` naming
    `what` and the value (a boolean is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise error(f"{what} {value!r} is not a number")
    try:
        return float(value)
    except ValueError:
        raise error(f"{what} {value!r} is not a number") from None


def stated_currency(record: Any) -> str | None:
    """The currency a record says its prices are in, if it says one (APIs that publish bare USD
    numbers today, like Lambda's, RunPod's and Vast's, would gain such a field first)."""
    if not isinstance(record, dict):
        return None
    for name in CURRENCY_FIELDS:
        value = record.get(name)
        if value is not None:
            return str(value).strip().upper() or None
    return None


MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def drift_guard(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a parser of a provider's answer: a malformed answer that slips past its checks
    (a field of the wrong type, a list where an object was) raises SchemaDriftError naming `what`,
    never a bare KeyError/TypeError that would reach the flow without a provider's name. A parser
    still quarantines a single bad record itself; this is the net for the whole answer."""
    import functools

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except SourceError:
                raise
            except MALFORMED as err:
                detail = f"{type(err).__name__}: {err}"[:200]
                raise SchemaDriftError(f"{what}: the answer is malformed ({detail})") from None

        return guarded

    return wrap


def _raise_for(provider: str, host: str, path: str, resp: httpx.Response) -> None:
    snippet = redact(resp.text[:200].replace("\n", " "))  # a server may echo our request, key and all
    msg = f"HTTP {resp.status_code} from {host}{path}: {snippet}"
    if resp.status_code == 429 or resp.status_code >= 500:
        raise RetryableAnswer(msg, retry_after_s(resp.headers.get("Retry-After")))
    raise SourceError(f"{provider}: {msg}")
