"""One provider's fetch: the source's own `fetch(ctx)`, its batch made the outcome the merge takes
(warehouse.pending). A refresh runs each in a worker process (gpuledger.children), so one provider's failure,
crash, timeout or runaway memory costs that provider alone; `fetch_source` runs a fetch in-process."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import sys
import tempfile
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuledger import children
from gpuledger.adapters.base import (
    FINGERPRINT, REDACTED, MissingCredentialsError, RedactingRecorder, SourceContext, Unchanged, quarantine_repeated,
    redact,
)
from gpuledger.adapters.registry import adopt_secret_env_vars, secret_env_vars, source_module
from gpuledger.adapters.replay import RecordingProxy
from gpuledger.warehouse import pending
from gpuledger.warehouse.pending import ScrapeOutcome
from gpuledger.warehouse.settings import env_name

log = logging.getLogger("gpuledger.refresh")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class SourcePlan:
    """How one provider is to be reached in this refresh (JSON, for the child process)."""

    provider: str
    mode: str = "live"  # live | replay | record
    replay_urls: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    since: dict[str, str] = field(default_factory=dict)  # SourceContext.since
    validators: dict[str, str] = field(default_factory=dict)  # SourceContext.validators (warehouse.validators)
    record_dir: str | None = None
    cache_dir: str | None = None  # SourceContext.cache_dir
    http_attempts: int = 3
    retry_wait_max_s: float = 8.0
    retry_budget_s: float = 120.0
    http_timeout_s: float = 60.0
    secret_env_vars: tuple[str, ...] = ()  # the refresh's, so the child need not import every source


def describe_failure(provider: str, err: BaseException) -> str:
    """One line for scrape_runs and the terminal: what failed, never a secret-bearing dump."""
    if isinstance(err, MissingCredentialsError):
        return redact(f"not configured: {err}")
    text = str(err) or type(err).__name__
    if not text.startswith(provider):
        text = f"{provider}: {type(err).__name__}: {text}"
    log.debug("%s failed:\n%s", provider, redact("".join(traceback.format_exception(err))))
    return redact(text)


@functools.cache  # the code a process runs does not change under it
def code_digest() -> str:
    digest = hashlib.sha256()
    for package in ("gpuledger", *(f"gpuledger.{p}" for p in ("adapters", "flows", "spiders", "warehouse"))):
        root = Path(importlib.util.find_spec(package).submodule_search_locations[0])  # type: ignore[union-attr]
        for f in sorted(root.glob("**/*" if package != "gpuledger" else "*")):
            if f.suffix in (".py", ".csv", ".sql") and "recordings" not in f.parts:
                digest.update(f.read_bytes())
    return digest.hexdigest()


def fingerprint(ctx: SourceContext) -> str:
    return hashlib.sha256(f"{ctx.mode}|{ctx.config.model_dump_json()}|{code_digest()}".encode()).hexdigest()[:16]


def fetch_source(plan: SourcePlan) -> ScrapeOutcome:
    """Run one provider's scrape in this process; raises on failure."""
    module = source_module(plan.provider)
    spec = module.PROVIDER
    started = utcnow()
    recorder = None if plan.record_dir is None else RedactingRecorder(Path(plan.record_dir) / plan.provider,
                                                                       plan.provider)
    ctx = SourceContext(
        provider=plan.provider, mode=plan.mode, replay_urls=plan.replay_urls, settings=dict(plan.settings),
        recorder=recorder, http_attempts=plan.http_attempts, retry_wait_max_s=plan.retry_wait_max_s,
        retry_budget_s=plan.retry_budget_s, http_timeout_s=plan.http_timeout_s, since=dict(plan.since),
        cache_dir=plan.cache_dir if recorder is None else None,  # a recording is made of whole answers
    )
    ctx.new_validators[FINGERPRINT] = fingerprint(ctx)
    if recorder is not None:
        ctx.proxy = RecordingProxy(recorder, ctx.upstream_url)
    elif plan.validators.get(FINGERPRINT) == ctx.new_validators[FINGERPRINT]:
        ctx.validators = dict(plan.validators)
    try:
        batch = module.fetch(ctx)
    except Unchanged as same:
        return ScrapeOutcome(plan.provider, plan.mode, started, utcnow(), state="unchanged", notes=[str(same)],
                             requests=ctx.requests_made, bytes_fetched=ctx.bytes_fetched)
    finally:
        if ctx.proxy is not None:  # the recording proxy, or the guard of a client gpuledger does not send for
            ctx.proxy.close()
    quarantine_repeated(batch, ctx.repeated_keys)
    if batch.secrets_redacted:
        batch.notes.append(f"{plan.provider}: {batch.secrets_redacted} records or notes held a known secret value; "
                           f"it is stored as {REDACTED}")
    if ctx.pages:
        batch.notes.append("pages read: " + ", ".join(f"{what} {n}" for what, n in sorted(ctx.pages.items())))
    if recorder is not None:
        recorder.write_manifest(plan.settings, started.isoformat(timespec="seconds"))
    return pending.outcome_of(batch, plan.provider, mode=plan.mode, started_at=started, finished_at=utcnow(),
                              requests=ctx.requests_made, bytes_fetched=ctx.bytes_fetched,
                              validators=ctx.new_validators, provider_facts=spec.facts_row(),
                              min_row_ratio=spec.anomaly.min_row_ratio, side_tables_only=spec.side_tables_only,
                              degraded=spec.degraded(ctx))


def failed(plan: SourcePlan, error: str, started: Any = None, state: str = "failed") -> ScrapeOutcome:
    return ScrapeOutcome(plan.provider, plan.mode, started or utcnow(), utcnow(), state=state, error=error)


def fetch_outcome(plan: SourcePlan) -> ScrapeOutcome:
    """fetch_source, its failure made a failed (or not configured) outcome."""
    started = utcnow()
    try:
        return fetch_source(plan)
    except Exception as err:  # noqa: BLE001 - the provider's failure is its outcome, said in one line
        state = "not_configured" if isinstance(err, MissingCredentialsError) else "failed"
        return failed(plan, describe_failure(plan.provider, err), started, state)


# -- the child process ----------------------------------------------------------------------------

LOG_PREFIX = "gpuledger-log "  # a child's log record on its stderr, relayed by the refresh


class _Relay(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(LOG_PREFIX + json.dumps([record.levelno, record.name, redact(record.getMessage())]) + "\n")


def relay_logs(stderr: str) -> str:
    """Log a child's relayed records here; the rest of its stderr (a crash's last words) is returned."""
    rest = []
    for line in stderr.splitlines():
        if line.startswith(LOG_PREFIX):
            level, name, message = json.loads(line[len(LOG_PREFIX):])
            logging.getLogger(name).log(level, "%s", message)
        elif line.strip():
            rest.append(line)
    return redact("\n".join(rest))[-children.STDERR_TAIL_CHARS:]


def fetch_in_child(plan: SourcePlan, timeout_s: float) -> dict[str, bytes]:
    """The provider's fetch in a worker process: its outcome's files, a failed one if the worker left none."""
    plan.secret_env_vars = secret_env_vars()
    started = utcnow()
    with tempfile.TemporaryDirectory(prefix=f"gpuledger-fetch-{plan.provider}-") as tmp:
        out = Path(tmp)
        request = json.dumps({"out": tmp, "plan": asdict(plan)}).encode()
        code, stderr = children.run_task("gpuledger.flows.fetch", request, timeout_s)
        last_words = children.last_words(relay_logs(stderr))
        if not (out / f"{plan.provider}.json").exists():
            if code is None:
                error = (f"{plan.provider}: the scrape did not finish within {timeout_s:g} s "
                         f"({env_name('task_timeout_s')}) and was stopped")
            else:
                error = f"{plan.provider}: the fetch process ended without a result (exit code {code})"
            if last_words:
                error += f": {last_words}"
            pending.write(out, failed(plan, error, started))
        return {p.name: p.read_bytes() for p in out.iterdir()}


def fetch_task(line: bytes) -> None:
    """One task of a fetch worker: the plan's outcome written to the task's folder."""
    task = json.loads(line)
    plan = SourcePlan(**task["plan"])
    adopt_secret_env_vars(tuple(plan.secret_env_vars))
    pending.write(Path(task["out"]), fetch_outcome(plan))


def main() -> int:
    children.end_with_parent()
    logging.basicConfig(level=logging.WARNING, handlers=[_Relay()])
    logging.getLogger("gpuledger").setLevel(logging.INFO)
    children.serve_tasks(fetch_task)
    return 0


if __name__ == "__main__":
    sys.exit(main())
