"""Warehouses for tests, built only through the real code paths.

`load_day` merges a hand-written batch with warehouse.store.load_outcome (the
same SCD2 merge a refresh uses); `load` hands outcomes over on disk and merges
them as a refresh does (warehouse.pending, merge_pending); `replayed_warehouse`
runs the providers' real clients against the loopback replay server and loads
them that way, in this process and without Prefect (quick, for tests that only
need data).
"""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

import duckdb

from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.flows.fetch import SourcePlan, fetch_outcome
from gpuledger.warehouse import pending
from gpuledger.warehouse.pending import ScrapeOutcome
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.spot import read_since
from gpuledger.warehouse.store import AnomalyPolicy, LoadReport, db_path, load_outcome, merge_pending

T0 = datetime(2026, 11, 1, 3, 0, tzinfo=timezone.utc)

# GPU model -> (name as reported, GiB per GPU)
GPUS = {"H100-SXM": ("H100 SXM", 80.0), "A100-SXM4-80": ("A100 SXM4 80GB", 80.0), "L4": ("L4", 24.0)}


def offer(itype: str, price: float, gpu: str = "H100-SXM", count: float = 8, region: str = "us-east-1",
          option: str = "on_demand", **extra: Any) -> dict[str, Any]:
    name, mem = GPUS[gpu]
    return dict(region=region, instance_type=itype, purchase_option=option, gpu_model=gpu, gpu_name_reported=name,
                gpu_vendor="NVIDIA", gpu_count=count, gpu_memory_gb=mem, price_per_hour=price,
                source_currency="USD", source_price_per_hour=price, **extra)


def egress(region: str, tiers: Sequence[tuple[float, float | None, float]]) -> list[dict[str, Any]]:
    """Internet egress tiers [(start_gb, end_gb or None, usd_per_gb)] for one region."""
    return [dict(region=region, destination="internet", tier_start_gb=start, tier_end_gb=end, usd_per_gb=usd,
                 source_currency="USD", source_usd_per_gb=usd) for start, end, usd in tiers]


def batch(provider: str, offers: Sequence[dict[str, Any]], egress_rows: Sequence[dict[str, Any]] = ()) -> Batch:
    b = Batch(provider)
    for o in offers:
        assert b.offer(f"{o['region']}/{o['instance_type']}/{o['purchase_option']}", {}, **o), b.quarantined
    for e in egress_rows:
        assert b.add("egress", f"{e['region']}/{e['tier_start_gb']}", {}, **e), b.quarantined
    return b


def outcome(b: Batch | None, provider: str | None = None, when: datetime = T0, error: str | None = None,
            **run: Any) -> ScrapeOutcome:
    """A scrape's outcome as a fetch hands it over: `b`'s rows, or (no batch) a failed run."""
    if b is None:
        assert provider is not None
        return ScrapeOutcome(provider, "replay", when, when, state="failed", error=error or "failed", **run)
    return pending.outcome_of(b, provider, mode="replay", started_at=when, finished_at=when, **run)


def load_day(con: duckdb.DuckDBPyConnection, provider: str, offers: Sequence[dict[str, Any]] | None, day: float,
             refresh_id: str | None = None, error: str | None = None,
             egress_rows: Sequence[dict[str, Any]] = ()) -> LoadReport:
    """One provider's scrape on day `day` (T0 + day), merged by the real loader."""
    now = T0 + timedelta(days=day)
    scraped = outcome(batch(provider, offers, egress_rows) if offers else None, provider, now, error)
    return load_outcome(con, scraped, refresh_id or f"refresh-day{day:g}", AnomalyPolicy(), now=now)


def load(db: Path | str, outcomes: Sequence[ScrapeOutcome], refresh_id: str = "refresh-test",
         policy: AnomalyPolicy | None = None, **merge: Any) -> list[LoadReport]:
    """Hand `outcomes` over on disk and merge them, as a refresh does."""
    for o in outcomes:
        pending.write(pending.pending_dir(db_path(db)) / refresh_id, o)
    return merge_pending(db, refresh_id, policy or AnomalyPolicy(), **merge)


_PREFECT_SERVER: list[str] = []
PREFECT_SERVER_START_S = 180  # a loaded two-core machine


def shared_prefect_server(config: Any) -> str:
    """One Prefect API server per test process for every module that asks, on a database of its own,
    stopped when pytest ends; returns its URL, this process's API from then on (modules with their own
    harness nest inside it). It is the refresh command's own temporary server (`prefect server start
    --no-services`): Prefect's test harness also runs the event services, which no test reads and which
    keep a core busy a few seconds a minute."""
    import shutil
    import tempfile

    from prefect.settings import PREFECT_API_URL

    from gpuledger.flows.prefect_api import TemporaryApiServer, environ_set, settings_set

    if not _PREFECT_SERVER:
        folder = tempfile.mkdtemp(prefix="gpuledger-test-prefect-")
        server = TemporaryApiServer()
        with environ_set({"PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{folder}/prefect.db"}):
            url = server.wait_ready(PREFECT_SERVER_START_S)  # a start it retries uses the same database
        settings = settings_set({PREFECT_API_URL: url})
        settings.__enter__()

        def stop() -> None:
            settings.__exit__(None, None, None)
            server.stop()
            shutil.rmtree(folder, ignore_errors=True)

        config.add_cleanup(stop)
        _PREFECT_SERVER.append(url)
    return _PREFECT_SERVER[0]


def lambda_price_hook(instance: str, cents: int) -> Any:
    """A replay hook: Lambda's recorded instance-types answer, with one type's price changed."""
    def hook(host: str, request: Any, exchange: Any) -> tuple[int, dict[str, str], bytes] | None:
        if exchange is None or host != "cloud.lambda.ai" or not exchange.path.endswith("/instance-types"):
            return None
        body = json.loads(exchange.body())
        body["data"][instance]["instance_type"]["price_cents_per_hour"] = cents
        return exchange.status, dict(exchange.headers), json.dumps(body).encode()
    return hook


# (provider, its GPULEDGER_* settings) -> its clean replay: the bundled recordings answer the same
# every time, so the modules that only need a provider's rows in a warehouse share one fetch.
_CLEAN_REPLAYS: dict[tuple[str, tuple[tuple[str, str], ...]], ScrapeOutcome] = {}


def replayed_warehouse(db: Path, providers: Sequence[str], hook: Any = None,
                       refresh_id: str = "refresh-replayed", recordings: Path = BUNDLED_RECORDINGS) -> list[LoadReport]:
    """Fetch `providers` from the recordings (the bundled ones unless told) with their real clients
    (responses optionally changed by a ReplayServer hook), then load them as one refresh. A
    provider's first clean replay of the bundled recordings in the session (no hook, nothing
    stored yet) is kept for the next clean one."""
    since = read_since(db)
    settings = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("GPULEDGER_")))
    kept = hook is None and recordings == BUNDLED_RECORDINGS  # answers that are the same every time
    clean = {p: _CLEAN_REPLAYS.get((p, settings)) if kept and not since.get(p) else None for p in providers}
    fetched: dict[str, ScrapeOutcome] = {}
    wanted = [p for p in providers if clean[p] is None]
    if wanted:
        server = ReplayServer(recordings, providers=wanted, hook=hook)
        server.start()
        try:
            fetched = {p: fetch_outcome(SourcePlan(p, "replay", server.endpoints(), dict(server.settings.get(p, {})),
                                                   since.get(p, {}), http_attempts=2, retry_wait_max_s=0.05))
                       for p in wanted}
        finally:
            server.close()
        if kept:
            _CLEAN_REPLAYS.update({(p, settings): o for p, o in fetched.items() if not since.get(p) and o.state == "ok"})
    now = datetime.now(timezone.utc)  # a kept replay stands for a fetch started now
    outcomes = [dataclasses.replace(o, notes=list(o.notes), started_at=now, finished_at=now)
                if (o := clean[p]) is not None else fetched[p] for p in providers]
    reports = load(db, outcomes, refresh_id)
    assert all(r.ok for r in reports), [(r.provider, r.error) for r in reports]
    return reports


def scraped(provider: str, mode: str, started: datetime, finished: datetime, batch: Batch | None = None,
            error: str | None = None, **run: Any) -> ScrapeOutcome:
    """An outcome as a fetch hands it over: `batch`'s rows (a failed run when `error` is given or
    there is no batch)."""
    if error is not None or batch is None:
        return ScrapeOutcome(provider, mode, started, finished, state=run.pop("state", "failed"), error=error, **run)
    return pending.outcome_of(batch, provider, mode=mode, started_at=started, finished_at=finished, **run)
