"""Market safeguards and signals of issue 16: the per-offer anomaly guard, staleness per row, one
interruption-risk scale across providers, and the queries of docs/queries.md that use them."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

import duckdb
import httpx
import pytest

from gpuledger.adapters import azure, azure_eviction, runpod, vastai
from gpuledger.adapters.base import SourceContext
from gpuledger.flows.cadence import refresh_lock_within
from gpuledger.warehouse import interruption
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import (
    AnomalyPolicy, RefreshRunningError, close_writer, load_outcome, open_writer, refresh_lock, utcnow,
)
from tests.builders import scraped, T0, batch, load_day, offer
from tests.conftest import replay_context

LAMBDA_PRICES = {"gpu_1x_h100_sxm5": 3.29, "gpu_8x_h100_sxm5": 23.92, "gpu_1x_a100_sxm4": 1.29}


@pytest.fixture
def con(db: Path):
    con = open_writer(db)
    yield con
    close_writer(con)


def lambda_offers(prices: dict[str, float]) -> list[dict]:
    return [offer(itype, price, count=8 if "8x" in itype else 1,
                  gpu="A100-SXM4-80" if "a100" in itype else "H100-SXM")
            for itype, price in prices.items()]


def current(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    return dict(con.execute("select instance_type, price_per_hour from offers where provider = 'lambda'").fetchall())


# -- the per-offer anomaly guard -----------------------------------------------------------------

def test_one_offer_jumping_tenfold_is_held_back_and_the_rest_load(con) -> None:
    assert load_day(con, "lambda", lambda_offers(LAMBDA_PRICES), 0).ok
    jumped = dict(LAMBDA_PRICES, gpu_1x_h100_sxm5=32.9, gpu_1x_a100_sxm4=1.19)  # 3.29 read as 32.9; a real cut
    report = load_day(con, "lambda", lambda_offers(jumped), 1)
    assert report.ok, report.error  # the medians moved little: the provider-level guard lets it through
    assert current(con) == {"gpu_1x_h100_sxm5": 3.29, "gpu_8x_h100_sxm5": 23.92, "gpu_1x_a100_sxm4": 1.19}
    assert (report.new, report.changed, report.closed) == (0, 1, 0)
    assert report.rows_quarantined == 1
    assert "1 offer(s) held back at their previous price by the per-offer anomaly guard" in report.notes
    [(ref, reason)] = con.execute("select source_ref, reason from quarantine").fetchall()
    assert ref == "us-east-1//gpu_1x_h100_sxm5/on_demand"
    assert reason.startswith("per-offer anomaly guard: lambda offer us-east-1//gpu_1x_h100_sxm5/on_demand: "
                             "price per hour moved from 3.29 to 32.9 USD (x10.00, limit x5)")
    assert "--accept-anomaly lambda" in reason
    # the held-back offer kept its one version, still open; the a100 cut opened a second
    assert con.execute("select instance_type, price_per_hour, valid_to is null from offer_history "
                       "where instance_type <> 'gpu_8x_h100_sxm5' order by 1, 2").fetchall() == [
        ("gpu_1x_a100_sxm4", 1.19, True), ("gpu_1x_a100_sxm4", 1.29, False), ("gpu_1x_h100_sxm5", 3.29, True)]
    [(notes,)] = con.execute("select notes from scrape_runs order by finished_at desc limit 1").fetchall()
    assert "held back" in notes


def test_the_override_loads_the_jump(con) -> None:
    assert load_day(con, "lambda", lambda_offers(LAMBDA_PRICES), 0).ok
    jumped = dict(LAMBDA_PRICES, gpu_1x_h100_sxm5=32.9)
    now = T0 + timedelta(days=1)
    outcome = scraped("lambda", "replay", now, now, batch=batch("lambda", lambda_offers(jumped)))
    report = load_outcome(con, outcome, "r1", AnomalyPolicy(accept=frozenset({"lambda"})), now=now)
    assert report.ok and report.rows_quarantined == 0
    assert current(con)["gpu_1x_h100_sxm5"] == 32.9
    assert any(n.startswith("offer price jumps accepted by override: lambda offer us-east-1//gpu_1x_h100_sxm5/"
                            "on_demand: price per hour moved from 3.29 to 32.9 USD") for n in report.notes)


def test_the_factor_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert AnomalyPolicy().max_offer_ratio == 5.0
    monkeypatch.setenv("GPULEDGER_OFFER_ANOMALY_FACTOR", "12")
    assert AnomalyPolicy.from_env().max_offer_ratio == 12.0


# -- staleness per row -----------------------------------------------------------------------------

def test_offer_freshness_marks_the_offers_of_a_provider_that_last_succeeded_long_ago(con) -> None:
    assert load_day(con, "lambda", lambda_offers(LAMBDA_PRICES), 0).ok  # 2026-11-01, weeks ago
    now = utcnow()
    fresh = scraped("runpod", "replay", now, now, batch=batch("runpod", [offer("1x H100", 2.69, count=1)]))
    assert load_outcome(con, fresh, "r-now", now=now).ok
    # lambda's latest attempt failed just now: its offers stay, and stay stale
    assert load_day(con, "lambda", None, (now - T0).total_seconds() / 86400, error="lambda: HTTP 503").state == "failed"
    rows = con.execute("select provider, instance_type, provider_last_ok, provider_age_hours, provider_state, stale "
                       "from offer_freshness order by provider, instance_type").fetchall()
    assert [r[:2] for r in rows] == [("lambda", "gpu_1x_a100_sxm4"), ("lambda", "gpu_1x_h100_sxm5"),
                                     ("lambda", "gpu_8x_h100_sxm5"), ("runpod", "1x H100")]
    for provider, _, last_ok, age, state, stale in rows[:3]:
        assert last_ok == T0 and stale is True and state == "failed"
        assert age == pytest.approx((utcnow() - T0).total_seconds() / 3600, abs=0.1)  # 30 days and more
    assert rows[3][2] == now and rows[3][4:] == ("ok", False) and rows[3][3] < 0.1


# -- one interruption-risk scale ---------------------------------------------------------------------

@pytest.mark.parametrize("label, source, expected", [
    ("<5%", interruption.AWS_SPOT_ADVISOR, ("low", 5, "aws_spot_advisor")),
    ("10-15%", interruption.AWS_SPOT_ADVISOR, ("medium", 15, "aws_spot_advisor")),
    (">20%", interruption.AWS_SPOT_ADVISOR, ("high", 100, "aws_spot_advisor")),
    ("0-5", interruption.AZURE_EVICTION_RATE, ("low", 5, "azure_spot_eviction_rate")),
    ("15-20", interruption.AZURE_EVICTION_RATE, ("high", 20, "azure_spot_eviction_rate")),
    ("20+", interruption.AZURE_EVICTION_RATE, ("high", 100, "azure_spot_eviction_rate")),
    (None, interruption.AWS_SPOT_ADVISOR, ("unknown", None, "unpublished")),
    ("<5%", interruption.AZURE_EVICTION_RATE, ("unknown", None, "unpublished")),  # not Azure's label
])
def test_published_rate_bands(label, source, expected) -> None:
    r = interruption.from_rate_band(label, source)
    assert (r["interruption_risk_level"], r["interruption_rate_max_pct"], r["interruption_risk_source"]) == expected


def test_an_offer_without_a_signal_is_unknown_unless_on_demand() -> None:
    b = batch("gcp", [offer("a3-highgpu-8g", 88.49), offer("a3-highgpu-8g", 29.4, option="spot")])
    levels = {o.purchase_option: (o.interruption_risk_level, o.interruption_rate_max_pct,
                                  o.interruption_risk_source) for o in b.offers}
    assert levels == {"on_demand": ("none", None, "not_interruptible"), "spot": ("unknown", None, "unpublished")}
    assert not Batch("x").offer("bad", {}, **offer("t", 1.0, option="spot", interruption_risk_level="safe",
                                                   interruption_risk_source="unpublished"))


def test_runpod_interruptible_pods_take_their_level_from_the_stock(replay) -> None:
    server = replay("runpod")
    got = {(o.region, o.purchase_option): (o.availability_level, o.interruption_risk_level, o.interruption_risk_source)
           for o in runpod.fetch(replay_context(server, "runpod")).offers if o.gpu_name_reported == "NVIDIA H100 80GB HBM3"}
    # the recording: secureStock Medium, communityStock Low
    assert got == {("secure-cloud", "on_demand"): ("medium", "none", "not_interruptible"),
                   ("secure-cloud", "interruptible"): ("medium", "medium", "runpod_stock_status"),
                   ("community-cloud", "on_demand"): ("low", "none", "not_interruptible"),
                   ("community-cloud", "interruptible"): ("low", "high", "runpod_stock_status")}


def test_vastai_offers_take_their_level_from_host_reliability(replay) -> None:
    server = replay("vastai")
    got = {(o.region, o.instance_type, o.purchase_option): (o.reliability, o.interruption_risk_level)
           for o in vastai.fetch(replay_context(server, "vastai")).offers}
    assert got[("US", "2x H100-SXM", "on_demand")] == (0.806, "high")  # reliability2 0.806, search/page-4.json
    assert got[("CA", "8x H100-NVL", "on_demand")] == (0.9023, "medium")
    assert got[("BE", "8x H100-SXM", "on_demand")] == (0.9997, "low")
    assert got[("BE", "8x H100-SXM", "interruptible")] == (0.9997, "medium")  # a higher bid stops it


RISK_COLUMNS = "interruption_risk_level, interruption_rate_max_pct, interruption_risk_source"
SIGNALS = {  # provider -> offers carrying each source's signal, as its adapter makes them
    "aws": [offer("p5.48xlarge", 55.04),
            offer("p5.48xlarge", 12.5, option="spot", zone="us-east-1a", interruption_risk="<5%",
                  **interruption.from_rate_band("<5%", interruption.AWS_SPOT_ADVISOR)),
            offer("p4d.24xlarge", 9.8, gpu="A100-SXM4-80", option="spot", zone="us-east-1b", interruption_risk=">20%",
                  **interruption.from_rate_band(">20%", interruption.AWS_SPOT_ADVISOR))],
    "vastai": [offer("8x H100-SXM", 15.2, reliability=0.9997, **interruption.from_host_reliability(0.9997, False)),
               offer("8x H100-SXM", 9.1, option="interruptible", reliability=0.9997,
                     **interruption.from_host_reliability(0.9997, True)),
               offer("2x H100-SXM", 4.1, count=2, reliability=0.806, **interruption.from_host_reliability(0.806, False)),
               offer("1x H100-SXM", 2.0, count=1, **interruption.from_host_reliability(None, False))],
    "runpod": [offer("1x H100", 1.75, count=1, option="interruptible", availability_level="medium",
                     **interruption.from_stock_level("medium")),
               offer("1x L4", 0.22, gpu="L4", count=1, option="interruptible", availability_level="low",
                     **interruption.from_stock_level("low"))],
    "gcp": [offer("a3-highgpu-8g", 29.4, option="spot")],
}


def test_rows_upgraded_to_version_7_get_the_levels_their_sources_give(tmp_path: Path) -> None:
    """A warehouse made before version 7 upgrades with each row's level filled from its stored signal: the
    same as its adapter gives now, so the next load of the same offers opens no new version."""
    from gpuledger.warehouse.schema import UPGRADES, migrate
    from tests.test_schema import v1_warehouse

    fresh = tmp_path / "fresh.duckdb"
    con = open_writer(fresh)
    for provider, offers in SIGNALS.items():
        assert load_day(con, provider, offers, 0).ok
    expected = con.execute(f"select instance_type, purchase_option, {RISK_COLUMNS} from offers order by all").fetchall()
    close_writer(con)
    old = tmp_path / "v6.duckdb"
    v1_warehouse(old)
    con = duckdb.connect(str(old))
    migrate(con, [step for step in UPGRADES if step[0] < 7])
    con.execute(f"attach '{fresh}' as fresh (read_only)")
    for table in ("offers", "offer_history", "scrape_runs"):
        con.execute(f"delete from {table}")
        drop = f" exclude ({RISK_COLUMNS}, gpu_memory_from_canon)" if table != "scrape_runs" \
            else " exclude (degraded, bytes_fetched)"
        con.execute(f"insert into {table} by name select *{drop} from fresh.{table}")
    con.close()
    con = open_writer(old)
    try:
        assert con.execute(f"select instance_type, purchase_option, {RISK_COLUMNS} from offers order by all"
                           ).fetchall() == expected
        assert ("p4d.24xlarge", "spot", "high", 100.0, "aws_spot_advisor") in expected
        assert ("1x H100-SXM", "on_demand", "unknown", None, "unpublished") in expected
        for provider, offers in SIGNALS.items():
            report = load_day(con, provider, offers, 1)
            assert report.ok and (report.new, report.changed, report.closed) == (0, 0, 0), provider
    finally:
        close_writer(con)


def test_azure_spot_offers_take_the_eviction_rate_resource_graph_publishes(replay) -> None:
    server = replay("azure")
    b = azure.fetch(replay_context(server, "azure"))
    rated = {(o.region, o.instance_type): (o.interruption_risk, o.interruption_risk_level, o.interruption_rate_max_pct)
             for o in b.offers if o.interruption_risk_source == interruption.AZURE_EVICTION_RATE}
    # resource-graph/page-01.json and page-02.json (the second page reached through $skipToken)
    assert rated[("eastus", "Standard_ND96isr_H100_v5")] == ("0-5", "low", 5)
    assert rated[("westus3", "Standard_ND96isr_H100_v5")] == ("20+", "high", 100)
    assert rated[("southcentralus", "Standard_NV36ads_A10_v5")] == ("10-15", "medium", 15)
    assert len(rated) == 9
    assert all(o.purchase_option == "spot" for o in b.offers if o.interruption_risk_source == "azure_spot_eviction_rate")
    on_demand = next(o for o in b.offers if (o.region, o.instance_type, o.purchase_option) ==
                     ("eastus", "Standard_ND96isr_H100_v5", "on_demand"))
    assert (on_demand.interruption_risk_level, on_demand.interruption_risk) == ("none", None)
    spot = sum(o.purchase_option == "spot" for o in b.offers)
    assert f"azure: spot eviction rates: 11 rows in 2 pages from Resource Graph; 9 of {spot} spot offers have one, " \
           f"{spot - 9} unknown" in b.notes
    requests = [r for _, r in server.requests if r.path == azure_eviction.RESOURCE_GRAPH_PATH]
    assert len(requests) == 2 and all("authorization" not in r.headers for r in requests)  # a replay sends no token


def test_live_azure_without_credentials_skips_the_rates_with_a_counted_note(monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path: Path) -> None:
    for name in ("AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
                 "AZURE_USERNAME", "AZURE_FEDERATED_TOKEN_FILE", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(tmp_path))  # no `az login` either
    b = batch("azure", [offer("Standard_ND96isr_H100_v5", 18.17, option="spot", region="eastus"),
                        offer("Standard_ND96isr_H100_v5", 98.32, region="eastus")])
    ctx = SourceContext(provider="azure", mode="live")
    with ctx.http_client(transport=httpx.MockTransport(lambda req: pytest.fail(f"no request expected: {req.url}"))) \
            as client:
        azure_eviction.add_eviction_rates(ctx, client, b)
    [note] = b.notes
    assert note.startswith("azure: spot eviction rates skipped: no Azure credentials (")
    assert note.endswith("; 1 spot offers have interruption_risk_level unknown")
    assert [(o.purchase_option, o.interruption_risk_level) for o in b.offers] == [("spot", "unknown"),
                                                                                  ("on_demand", "none")]


def test_a_credential_chain_that_never_answers_costs_only_the_eviction_rates(monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:
    for name in ("AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
                 "AZURE_USERNAME", "AZURE_FEDERATED_TOKEN_FILE", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(tmp_path))
    with socket.socket() as endpoint:  # App Service's managed identity endpoint: it takes the request, never answers
        endpoint.bind(("127.0.0.1", 0))
        endpoint.listen(8)
        monkeypatch.setenv("IDENTITY_ENDPOINT", f"http://127.0.0.1:{endpoint.getsockname()[1]}/msi/token")
        monkeypatch.setenv("IDENTITY_HEADER", "header-of-the-app-service")
        monkeypatch.setattr(azure_eviction, "TOKEN_TIMEOUT_S", 2.0)
        b = batch("azure", [offer("Standard_ND96isr_H100_v5", 18.17, option="spot", region="eastus"),
                            offer("Standard_ND96isr_H100_v5", 98.32, region="eastus")])
        ctx = SourceContext(provider="azure", mode="live")
        start = time.monotonic()
        with ctx.http_client(transport=httpx.MockTransport(lambda req: pytest.fail(f"no request: {req.url}"))) as c:
            azure_eviction.add_eviction_rates(ctx, c, b)
        took = time.monotonic() - start
    # before: the token was asked outside the enrichment, with azure-core's own waits: the azure scrape hung there
    # until its task's 1,800 s were over, and none of its offers loaded
    assert took < 6
    assert ctx.degraded == {"spot eviction rates": "azure: no token from Azure's credential chain within 2 s"}
    assert [(o.purchase_option, o.interruption_risk_level) for o in b.offers] == [("spot", "unknown"),
                                                                                  ("on_demand", "none")]


# -- cadence: refreshes queue for the warehouse ------------------------------------------------------

def hold_lock(db: Path, seconds: float) -> tuple[threading.Thread, dict[str, float]]:
    """Another refresh holding the lock for `seconds` (a thread of this process: the lock is an
    flock on its own file descriptor, so it excludes this process's later opens too). The dict
    gets `released`, the monotonic time just before the holder lets go."""
    taken, times = threading.Event(), {}

    def hold() -> None:
        with refresh_lock(db):
            taken.set()
            time.sleep(seconds)
            times["released"] = time.monotonic()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert taken.wait(10)
    return thread, times


def test_a_refresh_turned_away_by_a_running_pull_names_the_pull(db: Path) -> None:
    """A pull holds the lock as a refresh does: the refresh said "another refresh of ... is running"."""
    with refresh_lock(db, "pull"):
        with pytest.raises(RefreshRunningError) as turned_away:
            with refresh_lock(db):
                pass
    assert re.fullmatch(rf"another pull of {re.escape(str(db))} is running \(pid {os.getpid()} since "
                        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\); try again when it has finished",
                        str(turned_away.value))


def test_a_scheduled_refresh_waits_for_the_running_one_and_a_bounded_wait_gives_up(db: Path) -> None:
    holder, times = hold_lock(db, 1.0)
    started = time.monotonic()
    with pytest.raises(RefreshRunningError, match="another refresh of .* is running"):
        with refresh_lock_within(db, 0.2, poll_s=0.05):
            pass
    gave_up = time.monotonic()
    assert gave_up - started >= 0.2 and "released" not in times  # refused while the other one ran
    with refresh_lock_within(db, 30, poll_s=0.05):
        acquired = time.monotonic()
    assert acquired >= times["released"]  # it got the lock once the holder let go
    holder.join()
    with pytest.raises(RefreshRunningError):  # 0: refused at once, as `gpuledger refresh` is
        with refresh_lock_within(db, 0):
            with refresh_lock_within(db, 0):
                pass


def test_the_weekly_price_move_query_counts_this_weeks_moves_only(con) -> None:
    from tests.test_queries import blocks

    [query] = [q for heading, q in blocks("sql") if heading == "Offers whose price moved more than 20 % this week"]
    now = utcnow()
    for days_ago, prices in ((10, {"a": 2.0, "b": 10.0, "c": 4.0}), (9, {"a": 3.0, "b": 10.0, "c": 4.0}),
                             (2, {"a": 3.0, "b": 8.5, "c": 2.8})):
        at = now - timedelta(days=days_ago)
        outcome = scraped("lambda", "replay", at, at, batch=batch("lambda", [offer(k, v) for k, v in prices.items()]))
        assert load_outcome(con, outcome, f"r-{days_ago}", now=at).ok
    rows = con.execute(query).fetchall()
    # a: +50 % nine days ago (last week); b: -15 % (too small); c: 4.00 -> 2.80, -30 % two days ago
    assert [r[3:8] for r in rows] == [("c", "on_demand", 4.0, 2.8, -30.0)]
