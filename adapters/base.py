"""What every source gets handed: where to send requests (the real host live, a loopback replay server
or recording proxy otherwise, so the same client code runs in all three), and how."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import json
import logging
import math
import os
import re
import ssl
import statistics
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import quote, urljoin, urlsplit

import httpx
from tenacity import RetryCallState

from gpuledger.adapters import bounds
from gpuledger.adapters.replay import Recorder, RecordingProxy, record_boto_client
from gpuledger.adapters.retry import RetryableAnswer, RetryPolicy
from gpuledger.http_headers import retry_after_s
from gpuledger.warehouse.records import install_secret_cutter, shortened
from gpuledger.warehouse.settings import Settings, SettingsError, env_name, load_settings

log = logging.getLogger("gpuledger.adapters")

USER_AGENT = "gpuledger/0.1 (+https://github.com/gpuledger/gpuledger; GPU price comparison)"


# The validator key of the code, settings and mode that made a fetch's rows (flows.fetch.fingerprint): under
# another gpuledger (a parser fixed) or other settings, the other validators and kept parses prove nothing.
FINGERPRINT = "gpuledger"


# -- secrets never leave in a message: env secrets (ProviderSpec.secret_env_vars) and registered ones --

REDACTED = "[redacted]"
# A JSON field that hands out a credential: an OAuth token answer, a key echoed back.
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


def redact(text: str, patterns: bool = True) -> str:
    """`text` with known secret values (raw, URL-encoded or JSON-escaped) and credential-shaped fragments replaced."""
    if not text:
        return text
    if cut := secret_cutter():
        text = cut(_cut_off_secret_end(text))  # the end first: a "[redacted]" already there is no secret's start
    if patterns:
        for pattern in _SECRET_PATTERNS:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


# A text cut to a length before it is redacted (an answer's first 200 characters) may end inside a secret: a
# start of one that long or longer, ending the text (before the closing quotes and brackets of a repr or a
# parenthesis, and a shortened text's " …"), is cut too.
CUT_OFF_SECRET_MIN = 8
_CUT_MARK = re.compile(r"[\"')\]}]*(?: …)?\Z")


def _secret_forms() -> set[str]:
    with _registered_lock:
        values = set(_registered)
    values.update(v for v in (os.environ.get(n, "").strip() for n in secret_env_vars()) if len(v) >= 6)
    return {f for v in values for f in (v, quote(v, safe=""), json.dumps(v)[1:-1])}


def _cut_off_secret_end(text: str) -> str:
    mark = _CUT_MARK.search(text).group()  # type: ignore[union-attr]  # it matches at the end, if only ""
    body = text[:len(text) - len(mark)]
    tail = body[-CUT_OFF_SECRET_MIN:]
    longest = max((n for form in _secret_forms() if tail in form
                   for n in range(len(form), CUT_OFF_SECRET_MIN - 1, -1) if body.endswith(form[:n])), default=0)
    return body[:-longest] + REDACTED + mark if longest else text


def secret_cutter() -> Callable[[str], str] | None:
    """What replaces every known secret value in a text (raw, URL-encoded or JSON-escaped), or None while
    none is known. A partial of a compiled pattern, not a closure: a Batch keeps one and is pickled."""
    forms = _secret_forms()
    if not forms:
        return None
    pattern = re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))
    return functools.partial(pattern.sub, REDACTED)


# Every Batch a source fills cuts these values out of its records, quarantine entries and notes.
install_secret_cutter(secret_cutter)


class RedactingRecorder(Recorder):
    """A Recorder that never writes a secret: known secrets and handed-out tokens (TOKEN_FIELDS) are
    cut from the answers; a request parameter or JSON field holding one is left out of `match`."""

    def save(self, host: str, req: Any, status: int, headers: dict[str, str], body: bytes) -> None:
        cut = secret_cutter() or (lambda text: text)
        with contextlib.suppress(UnicodeDecodeError):  # not text: no secret to cut out of it
            text = body.decode("utf-8")
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
    """`err` to chain from, or a redacted stand-in when its text holds a secret."""
    text, clean = str(err), redact(str(err))
    return err if clean == text else Exception(f"{type(err).__name__}: {clean}")


def _redact_log(record: logging.LogRecord) -> bool:
    """httpx logs every request's URL at INFO (RunPod's documented key rides in its query string)."""
    message = record.getMessage()
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, ()
    return True


for _name in ("httpx", "urllib3.connectionpool"):
    logging.getLogger(_name).addFilter(_redact_log)


@functools.cache
def verifying_ssl_context() -> ssl.SSLContext:
    """httpx's default verifying TLS context, made once per process: loading the CA bundle costs
    about 0.15 s of CPU per client, and an SSLContext is safe to share."""
    return httpx.create_ssl_context()


@functools.cache
def bundle_ssl_context(path: str) -> ssl.SSLContext:
    """A verifying TLS context that trusts the CA bundle at `path` alone, as botocore does with its `ca_bundle`."""
    return ssl.create_default_context(cafile=path)


@dataclass(frozen=True)
class RepeatedKey:
    """A key a JSON object gave again: the value refused (the object keeps its first)."""

    where: str
    key: str
    value: Any


def parse_json(data: bytes | str, where: str, repeated: list[RepeatedKey]) -> Any:
    """`data` parsed as JSON (ValueError when it is not); a repeated key keeps its first value and
    the later ones go to `repeated` (Python's json would keep the last silently)."""

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
    # An integer too long for Python (4,300 digits) would fail the whole answer: read it as a float
    # (infinity), which fails the one record holding it.
    del repeated[kept:]
    return json.loads(data, object_pairs_hook=pairs, parse_int=lambda s: int(s) if len(s) < 4000 else float(s))


def quarantine_repeated(batch: Any, repeated: list[RepeatedKey]) -> None:
    for r in repeated:
        batch.quarantine("json", f"{r.where} key {r.key!r}",
                         f"repeated JSON key {r.key!r}: the object names it again; its first value is kept, "
                         "this one refused", r.value)


class SourceError(Exception):
    """A provider could not be scraped; the message (redacted when made) names it and what failed."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class MissingCredentialsError(SourceError):
    """The provider needs credentials that are not configured; it is skipped, others continue."""


class SchemaDriftError(SourceError):
    """The provider answered, but not in the shape we parse (a field is missing or renamed)."""


class Unchanged(Exception):
    """The answer is the one the last loaded fetch got (HTTP 304, same version): rows are confirmed as they are."""


class EnrichmentTimeout(SourceError):
    """An enrichment ran past its time limit; raised at its next request."""


# (name, monotonic deadline) of the enrichment running in this thread, checked before each request.
_ENRICHMENT_DEADLINE: contextvars.ContextVar[tuple[str, float] | None] = contextvars.ContextVar(
    "gpuledger_enrichment_deadline", default=None)


def _in_regions(masked: str, regions: list[str]) -> str:
    """A reason whose region is masked as NUL, said of the first region and counting the others; one that names
    no region (its regions all "") as it is."""
    named = sorted(set(filter(None, regions)))
    if not named:
        return masked
    others = f" (the same in {len(named) - 1} more: {', '.join(named[1:])})" if len(named) > 1 else ""
    return masked.replace("\0", named[0]) + others


def check_deadline() -> None:
    running = _ENRICHMENT_DEADLINE.get()
    if running is not None and time.monotonic() > running[1]:
        raise EnrichmentTimeout(f"{running[0]}: timed out")


# (answer, its items, the request {"path", "params", "json"}) -> the next request, or None at the end.
NextPage = Callable[[Any, list[Any], dict[str, Any]], "dict[str, Any] | None"]


def next_link(link: Callable[[Any], str | None], host: str) -> NextPage:
    """Follow the answer's next-page link, which must stay on `host` (our credentials go with it); a relative
    link is read against the page's own URL."""
    expected = urlsplit(f"//{host}")

    def following(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
        url = link(doc)
        if not url:
            return None
        try:
            parts = urlsplit(urljoin(f"https://{host}{request['path']}", url))
            elsewhere = (parts.hostname != expected.hostname
                         or parts.port not in (expected.port, None if expected.port else 443))
        except ValueError:  # no URL: a port out of range, a broken IPv6 address
            elsewhere = True
        if elsewhere:
            raise SourceError(f"the next-page link points outside {host}: {url[:200]!r}")
        return {**request, "path": parts.path + (f"?{parts.query}" if parts.query else ""), "params": {}}
    return following


def cursor(value: Callable[[Any], Any], param: str) -> NextPage:
    """Send the answer's cursor back as query parameter `param`; no cursor ends the listing."""
    def following(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
        token = value(doc)
        return {**request, "params": {**request["params"], param: token}} if token else None
    return following


def page_number(param: str = "page") -> NextPage:
    """Ask for page 1, 2, ... until a page comes back empty."""
    def following(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
        if not items:
            return None
        current = int(request["params"].get(param, 1))
        return {**request, "params": {**request["params"], param: current + 1}}
    return following


# boto3 clients are made under one lock (a Session is not thread-safe); every session shares one
# botocore loader, so each service model is parsed once per process.
_BOTO_LOCK = threading.Lock()
_BOTO_LOADER: Any = None


def _new_boto_session() -> tuple[Any, str | None]:
    """A boto3 session and the CA bundle its configuration names (AWS_CA_BUNDLE or a profile's ca_bundle: a proxy
    that inspects TLS), which botocore would trust instead of its own."""
    import boto3
    import botocore.session

    global _BOTO_LOADER
    core = botocore.session.get_session()
    _BOTO_LOADER = _BOTO_LOADER or core.get_component("data_loader")
    core.register_component("data_loader", _BOTO_LOADER)
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_api_timestamp)
    return boto3.session.Session(botocore_session=core), core.get_config_variable("ca_bundle")


def parse_api_timestamp(value: Any) -> datetime:
    """An AWS timestamp, timezone-aware: ISO 8601 by the standard library (many times faster than
    botocore's dateutil parser on a large spot price history), anything else by botocore."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            stamp = datetime.fromisoformat(value)
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)


@dataclass(frozen=True)
class HeldBody:
    """The `raw` of a botocore AWSResponse whose body is already read: botocore takes its content from stream()."""

    content: bytes

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.content


@dataclass
class SourceContext:
    """Endpoints, settings and HTTP policy for one provider's scrape."""

    provider: str
    mode: str = "live"  # live | replay | record
    replay_urls: dict[str, str] = field(default_factory=dict)  # host -> loopback base URL
    settings: dict[str, Any] = field(default_factory=dict)
    # Incremental stream key -> ISO timestamp of the newest stored observation (missing: backfill).
    since: dict[str, str] = field(default_factory=dict)
    # key -> ETag/Last-Modified or version of the last loaded fetch, and of this fetch.
    validators: dict[str, str] = field(default_factory=dict)
    new_validators: dict[str, str] = field(default_factory=dict)
    bytes_fetched: int = 0  # response bodies as received, every client
    # Where parses of immutable, versioned files are kept between refreshes (None: nothing kept).
    cache_dir: str | None = None
    kept_parses: int = 0  # parses taken from cache_dir instead of a download
    recorder: Recorder | None = None
    proxy: RecordingProxy | None = None
    http_timeout_s: float = 60.0
    http_attempts: int = 3
    retry_wait_max_s: float = 8.0
    retry_budget_s: float = 120.0
    requests_made: int = 0
    pages: dict[str, int] = field(default_factory=dict)  # listing -> pages read (paginate)
    # enrichment -> why it failed (enrich), a region it names masked as NUL -> the regions that failed so ("" for
    # an enrichment not per region)
    failures: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # Later values of keys a JSON answer repeated (parse_json), for the flow to quarantine.
    repeated_keys: list[RepeatedKey] = field(default_factory=list)
    _boto_session: tuple[Any, str | None] | None = field(default=None, repr=False, compare=False)

    @property
    def degraded(self) -> dict[str, str]:
        """Enrichment -> why it is missing: a reason that only names another region said once for all of them."""
        return {name: "; ".join(_in_regions(masked, regions) for masked, regions in sorted(by_reason.items()))
                for name, by_reason in sorted(self.failures.items())}

    def upstream_url(self, host: str) -> str:
        """Base URL of `host` itself (live) or of its replay server."""
        if self.reaches_provider:
            return f"https://{host}"
        if host not in self.replay_urls:
            raise SourceError(f"{self.provider}: the recording has no exchanges for host {host}")
        return self.replay_urls[host]

    def url(self, host: str) -> str:
        """Base URL a plain HTTP client should use for `host` (no trailing slash)."""
        if self.mode == "record":
            assert self.proxy is not None
            return self.proxy.url(host)
        return self.upstream_url(host)

    def guarded_url(self, host: str) -> str:
        """Base URL for a client gpuledger does not send for (google's): a bounding loopback proxy."""
        if self.proxy is None:
            self.proxy = RecordingProxy(None, self.upstream_url, timeout=self.http_timeout_s + 5,
                                        limit=bounds.held_limit(self.provider))
        return self.proxy.url(host)

    def boto_endpoint(self, host: str) -> str | None:
        """endpoint_url of a boto3 client: None (boto3's own) when the real provider is reached."""
        return None if self.reaches_provider else self.upstream_url(host)

    @property
    def config(self) -> Settings:
        """The typed settings of this moment: GPULEDGER_* variables over this scrape's `settings`."""
        try:
            return load_settings(**self.settings)
        except SettingsError as err:
            raise SourceError(f"{self.provider}: invalid settings: {err}") from None

    def select_regions(self, available: Iterable[str], live_defaults: Iterable[str], listed_in: str) -> list[str]:
        """Regions to scrape: setting `<provider>_regions` ("all" or a comma list); else `live_defaults`
        live, every region listed under replay/record."""
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

    def boto_client(self, service: str, region: str, host: str, **kwargs: Any) -> Any:
        """A real boto3 client; pointed at loopback under replay, recorded under record. bounds.fetch sends its
        requests (botocore's documented before-send answer): botocore's own timeout is per read and it reads a body
        whole, which would let a dripping endpoint hold a call as long as it drips, at any size."""
        from botocore.awsrequest import AWSResponse
        from botocore.config import Config
        from botocore.exceptions import HTTPClientError, ReadTimeoutError

        endpoint = self.boto_endpoint(host)
        config = Config(retries=self.retry_policy.botocore_retries(), user_agent_extra="gpuledger/0.1")
        with _BOTO_LOCK:
            if self._boto_session is None:
                self._boto_session = _new_boto_session()
            session, bundle = self._boto_session
            client = session.client(service, region_name=region, endpoint_url=endpoint, config=config, **kwargs)
        try:
            verify = bundle_ssl_context(bundle) if bundle else verifying_ssl_context()
        except (OSError, ssl.SSLError) as err:
            raise SourceError(f"{self.provider}: the CA bundle {bundle} (AWS_CA_BUNDLE or the profile's ca_bundle) "
                              f"cannot be read: {err.strerror or err}") from None
        if self.recorder is not None:
            record_boto_client(client, self.recorder, host)

        def send(request: Any, event_name: str = "", **_: Any) -> Any:
            check_deadline()
            self.requests_made += 1
            # A client per request: closing it closes the connection of a try abandoned at its deadline.
            with self.http_client(verify=verify) as http:
                sent = http.build_request(request.method, request.url, headers=list(request.headers.items()),
                                          content=request.body)
                try:
                    resp = bounds.fetch(http, sent, bounds.held_limit(self.provider), self.http_timeout_s,
                                        self.count_bytes)
                except httpx.TimeoutException:  # botocore retries these as its own transport's errors
                    raise ReadTimeoutError(endpoint_url=request.url) from None
                except httpx.TransportError as err:
                    raise HTTPClientError(error=f"{type(err).__name__}: {err}") from None
                except bounds.AnswerRefused as err:  # not worth a retry: botocore raises what it does not know
                    raise SourceError(f"{self.provider}: {host} ({event_name.rsplit('.', 1)[-1]}): {err}") from None
            return AWSResponse(request.url, resp.status_code, resp.headers, HeldBody(resp.content))

        client.meta.events.register("before-send", send)
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

    def api_key(self, key_env: str, needs: str | None = None) -> str:
        """Environment variable `key_env` ("" when unset). With `needs` (what the key is for) a missing key is
        MissingCredentialsError when the real provider is reached; without it the source works keyless."""
        key = os.environ.get(key_env, "").strip()
        if needs and not key and self.reaches_provider:
            raise MissingCredentialsError(f"{self.provider}: {key_env} is not set; {needs}")
        if bad := next((i for i, ch in enumerate(key, 1) if not " " <= ch <= "~"), None):
            raise SourceError(f"{self.provider}: {key_env} holds a character an HTTP header cannot carry "
                              f"(character {bad})")
        return key

    def usd_per_eur(self, setting: str) -> float:
        """The configured rate of a source priced in EUR; a rate it lacks is a setting not made, so the
        source is not configured (skipped, the others go on) rather than failed with every price
        quarantined."""
        rate = getattr(self.config, setting)
        if not rate:
            raise MissingCredentialsError(f"{self.provider}: {env_name(setting)} is not set; its prices are in "
                                          "EUR and are converted at that USD per EUR rate")
        return float(rate)

    def keyed_client(self, key_env: str, sent_as: str = "Authorization: Bearer {key}",
                     needs: str | None = None) -> httpx.Client:
        """An http_client asking for JSON that sends `api_key(key_env, needs)`, when set, as the header
        `sent_as` shows."""
        key = self.api_key(key_env, needs)
        header, _, value = sent_as.partition(": ")
        sent = {header: value.format(key=key)} if key else {}
        return self.http_client(headers={"Accept": "application/json", **sent})

    def get(self, client: httpx.Client, host: str, path: str, conditional: bool = False,
            **kwargs: Any) -> httpx.Response:
        """GET under the retry policy, its answer bounded; SourceError when it gives up. conditional=True
        sends the last loaded fetch's ETag/Last-Modified (a 304 raises Unchanged) and keeps the new ones."""
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
        """Keep `validator` of `key` for the next fetch; Unchanged when the last loaded fetch had it."""
        self.new_validators[key] = validator
        if self.validators.get(key) == validator:
            raise Unchanged(f"{self.provider}: {what} unchanged since the last loaded fetch")

    def kept_parse(self, name: str, files: Any, parse: Callable[[], Any]) -> Any:
        """parse()'s JSON value, or the one kept for `name` when this gpuledger and settings parsed the same
        versioned `files` (never changing: AWS's price list), which are then neither downloaded nor parsed."""
        if self.cache_dir is None:
            return parse()
        key = [files, self.new_validators.get(FINGERPRINT)]
        path = Path(self.cache_dir) / (hashlib.sha256(name.encode()).hexdigest()[:20] + ".json")
        # none kept, or unreadable: parsed anew below and kept again
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            kept = json.loads(path.read_bytes())
            if kept["key"] == key:
                with _registered_lock:
                    self.kept_parses += 1
                return kept["value"]
        value = parse()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}")
            part.write_text(json.dumps({"name": name, "key": key, "value": value}))
            os.replace(part, path)
        except OSError as err:  # the next refresh downloads these files again; this one is whole
            log.warning("%s: could not keep the parse of %s in %s: %s", self.provider, name, self.cache_dir,
                        err.strerror or err)
        return value

    def count_bytes(self, n: int) -> None:
        with _registered_lock:
            self.bytes_fetched += n

    def send(self, client: httpx.Client, method: str, host: str, path: str, **kwargs: Any) -> httpx.Response:
        def fetch() -> httpx.Response:
            request = client.build_request(method, self.url(host) + path, **kwargs)
            return bounds.fetch(client, request, bounds.held_limit(self.provider), self.http_timeout_s,
                                self.count_bytes)
        return self._with_retries(fetch, host, path)

    def get_json(self, client: httpx.Client, host: str, path: str, **kwargs: Any) -> Any:
        return self.json_of(self.get(client, host, path, **kwargs), host, path)

    def post_json(self, client: httpx.Client, host: str, path: str, **kwargs: Any) -> Any:
        return self.json_of(self.send(client, "POST", host, path, **kwargs), host, path)

    def json_of(self, resp: httpx.Response, host: str, path: str) -> Any:
        try:
            return parse_json(resp.content, f"{host}{path}", self.repeated_keys)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            raise SourceError(f"{self.provider}: {host}{path} did not answer JSON "
                              f"(starts {resp.text[:80]!r})") from None

    def stream_bytes(self, client: httpx.Client, host: str, path: str) -> Iterator[bytes]:
        """A GET's body as decoded byte chunks: its status line is retried; once the body flows a
        failure is final (a retry would hand the consumer pieces it has already seen)."""
        url, limit = self.url(host) + path, bounds.answer_limit(self.provider)

        def open_stream() -> httpx.Response:
            deadline[0] = time.monotonic() + self.http_timeout_s
            resp = bounds.within(self.http_timeout_s,
                                 lambda: bounds.open_answer(client, client.build_request("GET", url), limit))
            if resp.status_code >= 400:  # read whole (bounded): its text goes into the error
                return bounds.materialized(resp, bounds.held_limit(self.provider), deadline[0], self.count_bytes)
            return resp

        deadline = [0.0]
        resp = self._with_retries(open_stream, host, path)
        try:
            yield from bounds.chunks(resp, limit, deadline[0], streamed=True)
        except (httpx.TransportError, bounds.AnswerRefused) as err:
            raise SourceError(f"{self.provider}: GET {host}{path} failed: {type(err).__name__}: {err}") from err
        finally:
            resp.close()
            self.count_bytes(resp.num_bytes_downloaded)

    def enrich(self, name: str, fetch: Callable[..., Any], *args: Any, timeout_s: float = 600.0,
               default: Any = None, region: str = "", **kwargs: Any) -> Any:
        """`fetch(*args, **kwargs)` as the enrichment `name` (of one `region`, if it is per region): a failure
        or timeout returns `default` and records the reason in `degraded`, a reason that only names
        another region said once for all of them; missing credentials propagate."""
        token = _ENRICHMENT_DEADLINE.set((name, time.monotonic() + timeout_s))
        try:
            return fetch(*args, **kwargs)
        except MissingCredentialsError:
            raise
        except Exception as err:  # noqa: BLE001 - an enrichment's failure is recorded, never raised
            reason = shortened(redact(str(err) or type(err).__name__), 300)
            with _registered_lock:
                by_reason = self.failures.setdefault(name, {})
                by_reason.setdefault(reason.replace(region, "\0") if region else reason, []).append(region)
            log.warning("%s: %s degraded: %s", self.provider, name, reason)
            return default
        finally:
            _ENRICHMENT_DEADLINE.reset(token)

    def paginate(self, client: httpx.Client, host: str, path: str, items: Callable[[Any], list[Any]],
                 next_page: NextPage, *, method: str = "GET", params: dict[str, Any] | None = None,
                 json: Any = None, what: str | None = None, cap: str = "max_pages") -> Iterator[Any]:
        """Every item of a paged listing (`items(answer)` per page, `next_page` choosing the next
        request); a repeated request, more pages than setting `cap` or pages together larger than one answer
        may be (bounds.answer_limit: all are held) is SourceError. Pages count in `pages`."""
        what = what or f"{host}{path}"
        limit, held, most = getattr(self.config, cap), 0, bounds.answer_limit(self.provider)
        request: dict[str, Any] = {"path": path, "params": dict(params or {}), "json": json}
        asked: set[str] = set()
        for n in range(1, limit + 1):
            asked.add(repr(sorted(request.items(), key=str)))
            resp = self.send(client, method, host, request["path"], params=request["params"] or None,
                             json=request["json"])
            held += len(resp.content)
            if held > most:
                raise SourceError(f"{self.provider}: {what}: its pages together exceed the limit of {most:,} bytes "
                                  f"of one answer (after {n} pages)")
            doc = self.json_of(resp, host, request["path"])
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

    def _with_retries(self, call: Callable[[], httpx.Response], host: str, path: str) -> httpx.Response:
        def before_sleep(state: RetryCallState) -> None:
            log.info("%s: retrying %s%s after %s", self.provider, host, path, state.outcome.exception())

        def attempt() -> httpx.Response:
            check_deadline()
            self.requests_made += 1  # sent, whether or not an answer comes back
            resp = call()
            if resp.status_code < 400:
                return resp
            snippet = redact(resp.text[:200].replace("\n", " "))  # a server may echo our request, key and all
            msg = f"HTTP {resp.status_code} from {host}{path}: {snippet}"
            if resp.status_code == 429 or resp.status_code >= 500:
                raise RetryableAnswer(msg, retry_after_s(resp.headers.get("Retry-After")))
            raise SourceError(f"{self.provider}: {msg}")

        retrying = self.retry_policy.retrying(
            lambda e: isinstance(e, (httpx.TransportError, RetryableAnswer)), before_sleep)
        try:
            return retrying(attempt)
        except bounds.AnswerRefused as err:
            raise SourceError(f"{self.provider}: {host}{path}: {err}") from None
        except (RetryableAnswer, httpx.TransportError) as err:
            tries = int(retrying.statistics.get("attempt_number", 1))
            detail = err if isinstance(err, RetryableAnswer) else f"{type(err).__name__}: {err}"
            raise SourceError(f"{self.provider}: {host}{path} failed after {tries} attempts: {detail}") from err


def dig(obj: Any, *keys: str) -> Any:
    """obj[key][key]...: None where a level is missing or is not a JSON object."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def as_number(value: Any, what: str, error: type[Exception]) -> float:
    """A JSON number or numeric text ("2.19") as a float; anything else (a boolean too) raises `error`."""
    with contextlib.suppress(ValueError):
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            return float(value)
    raise error(f"{what} {value!r} is not a number")


def finite_number(value: Any) -> float | None:
    """A finite JSON number as a float; None for anything else (a boolean, text, NaN, an infinity)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def listed_price(value: Any, what: str, positive: bool = True) -> float:
    """A listed price or rate as a float; ValueError says why it cannot be one (zero passes unless `positive`)."""
    if value is None:
        raise ValueError(f"{what} is missing")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} {value!r} is not a number")
    if not math.isfinite(value):
        raise ValueError(f"{what} {value!r} is not a finite number")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{what} {value!r} is not a positive price")
    return float(value)


def spread(values: list[float]) -> dict[str, float]:
    """The min, median and max of some prices, rounded to 6 decimals; `values` must not be empty."""
    return {"min": round(min(values), 6), "median": round(statistics.median(values), 6), "max": round(max(values), 6)}


def stated_currency(record: Any) -> str | None:
    for name in ("currency", "currencyCode", "currency_code", "price_currency"):
        value = dig(record, name)
        if value is not None:
            return str(value).strip().upper() or None
    return None


def drift_guard(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a parser: a malformed answer that slips past its checks raises SchemaDriftError
    naming `what`, never a bare KeyError/TypeError without a provider's name."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except SourceError:
                raise
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
                detail = f"{type(err).__name__}: {err}"[:200]
                raise SchemaDriftError(f"{what}: the answer is malformed ({detail})") from None

        return guarded

    return wrap
