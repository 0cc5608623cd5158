"""`gpuledger report`: the static comparison page, checked in Python and in a real Chromium.

The warehouse is three providers replayed through their real clients plus a
hand-made provider `acme` whose scraped strings are hostile HTML, with tiered
egress and a spot offer without a provider-given discount. Expected values come
from SQL on the warehouse, not from the report code.

The browser test writes its screenshot to tmp_path; with GPULEDGER_TEST_ARTIFACTS
set (e.g. tests/artifacts) it is copied there too, to be kept.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator

import duckdb
import pytest
import typer
from typer.testing import CliRunner

from gpuledger.adapters.base import SourceContext
from gpuledger.adapters.registry import SOURCES
from gpuledger.flows.ops_cli import register
from gpuledger.flows.report import render_report, report_providers, report_rows, write_report
from gpuledger.spiders.browser import find_chromium, launch_args
from tests.builders import T0, egress, load_day, offer, replayed_warehouse
from gpuledger.warehouse.store import open_reader, open_writer

EVIL_INSTANCE = '<img src=x onerror="window.pwned=1">'
EVIL_REGION = '"><script>window.pwned=2</script>'
NOW = T0 + timedelta(days=2)  # "now" for the hand-made page: acme was scraped 2 days (48 h) before


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("report") / "ledger.duckdb"
    replayed_warehouse(db, ["lambda", "runpod", "vastai"])
    con = open_writer(db)
    try:
        load_day(con, "acme", [offer(EVIL_INSTANCE, 24.0, region=EVIL_REGION),
                               offer(EVIL_INSTANCE, 12.0, region=EVIL_REGION, option="spot")], 0, "refresh-acme",
                 egress_rows=egress(EVIL_REGION, [(0, 100, 0.0), (100, 10240, 0.09), (10240, None, 0.05)]))
    finally:
        con.close()
    return db


class Tags(HTMLParser):
    """Every tag and attribute name in a page, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.attrs: set[str] = set()
        self.count: Counter[str] = Counter()
        self.csp = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.add(tag)
        self.count[tag] += 1
        self.attrs.update(name for name, _ in attrs)
        if tag == "meta" and ("http-equiv", "Content-Security-Policy") in attrs:
            self.csp = dict(attrs)["content"] or ""


def sql(db: Path, query: str, params: list[Any] | None = None) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query, params or []).fetchall()
    finally:
        con.close()


def test_rows_and_escaping(warehouse: Path) -> None:
    con = open_reader(warehouse)
    try:
        fresh = report_providers(con, NOW)
        rows = report_rows(con, 140.0, fresh)
    finally:
        con.close()
    assert len(rows) == sql(warehouse, "select count(*) from offers")[0][0]
    acme = {r["purchase_option"]: r for r in rows if r["provider"] == "acme"}
    # 140 GB through the tiers: 100 GB free, 40 GB at 0.09
    assert acme["on_demand"]["egress_usd"] == pytest.approx(3.6) and acme["on_demand"]["egress_source"] == "region"
    assert acme["spot"]["spot_discount_pct"] == 50.0  # 12 vs the same type's 24 on demand
    assert acme["on_demand"]["spot_discount_pct"] is None
    assert acme["spot"]["price_per_gpu_hour"] == 1.5 and acme["spot"]["billing_granularity_s"] is None
    # freshness: acme's only scrape was 48 h before NOW -> stale; the replays are in the future of NOW
    by_provider = {f.provider: f for f in fresh}
    assert by_provider["acme"].state == "stale" and by_provider["acme"].age_hours == 48.0
    assert by_provider["lambda"].billing_granularity_s == 60 and by_provider["lambda"].minimum_charge_s == 60
    # every registered source is listed: those this warehouse never loaded as such
    assert sorted(by_provider) == sorted({"acme", *SOURCES})
    assert {"aws", "gcp", "hyperstack", "vastai"} <= set(by_provider)
    gcp = by_provider["gcp"]
    assert (gcp.state, gcp.age_hours, gcp.last_success, gcp.offers, gcp.display_name) == ("never", None, None, 0, "gcp")

    page = render_report(rows, fresh, NOW, 140.0)
    assert EVIL_INSTANCE not in page and EVIL_REGION not in page
    assert "&lt;img src=x onerror=&quot;window.pwned=1&quot;&gt;" in page
    assert "&quot;&gt;&lt;script&gt;window.pwned=2&lt;/script&gt;" in page
    tags = Tags()
    tags.feed(page)
    assert tags.names == {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "table", "thead",
                          "tbody", "tr", "th", "td", "form", "label", "select", "option", "input", "button", "span",
                          "script"}
    assert tags.count["script"] == 1  # ours, and only ours
    assert not tags.attrs & {"src", "href", "action", "srcset", "onerror", "onload"}  # nothing to fetch or run
    assert tags.csp.startswith("default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-")
    assert 'data-v="3.6"' in page and ">$3.60</td>" in page
    assert '<tr class="f-never"><td>gcp</td><td>never loaded</td><td>never</td><td>never</td><td>0</td>' in page
    assert "current offers from 4 providers." in page  # acme, lambda, runpod, vastai: the ones ever loaded


@pytest.fixture(scope="module")
def page_file(warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("page") / "prices.html"
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["report", str(out), "--db", str(warehouse)])
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith(str(out))
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    chromium = find_chromium(SourceContext(provider="report-test"))
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=launch_args(), headless=True)
        yield b
        b.close()


def visible(page: Any) -> Any:
    return page.locator("#offers tbody tr:not([hidden])")


def test_page_in_a_browser_filters_sorts_and_runs_no_scraped_code(page_file: Path, warehouse: Path, browser: Any,
                                                                   tmp_path: Path) -> None:
    total = sql(warehouse, "select count(*) from offers")[0][0]
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    requests: list[str] = []
    dialogs: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(page_file.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    assert page.text_content("#count") == str(total)
    assert visible(page).count() == total

    # GPU + purchase option
    page.select_option("#f-gpu", "H100-SXM")
    page.select_option("#f-option", "on_demand")
    expected = sql(warehouse, "select count(*) from offers "
                              "where gpu_model = 'H100-SXM' and purchase_option = 'on_demand'")
    assert expected[0][0] > 3
    assert page.text_content("#count") == str(expected[0][0]) and visible(page).count() == expected[0][0]
    assert set(visible(page).locator("td:nth-child(1)").all_text_contents()) == {"H100-SXM"}

    # sort by price per GPU-hour: first click ascending, second descending
    price_th = page.locator("#offers th[data-key=price]")
    price_th.click()
    assert price_th.get_attribute("aria-sort") == "ascending"
    cheapest = sql(warehouse, """select provider, instance_type, price_per_gpu_hour from offers
                                 where gpu_model = 'H100-SXM' and purchase_option = 'on_demand'
                                 order by price_per_gpu_hour, provider, region, zone, instance_type limit 1""")[0]
    first = visible(page).first.locator("td")
    assert (first.nth(3).text_content(), first.nth(6).text_content()) == cheapest[:2]
    assert float(first.nth(8).get_attribute("data-v")) == cheapest[2]
    price_th.click()
    assert price_th.get_attribute("aria-sort") == "descending"
    dearest = sql(warehouse, """select provider, region, instance_type, price_per_gpu_hour, price_per_hour from offers
                                where gpu_model = 'H100-SXM' and purchase_option = 'on_demand'
                                order by price_per_gpu_hour desc, provider, region, zone, instance_type limit 1""")[0]
    first = visible(page).first.locator("td")
    assert (first.nth(3).text_content(), first.nth(4).text_content(), first.nth(6).text_content()) == dearest[:3]
    assert float(first.nth(8).get_attribute("data-v")) == dearest[3]
    assert first.nth(9).text_content() == f"${dearest[4]:,.2f}"
    prices = [float(v) for v in visible(page).locator("td:nth-child(9)").evaluate_all(
        "cells => cells.map(c => c.dataset.v)")]
    assert prices == sorted(prices, reverse=True)

    # provider + region text + VRAM + max price
    page.select_option("#f-gpu", "")
    page.select_option("#f-option", "")
    page.select_option("#f-provider", "vastai")
    page.fill("#f-region", "us")
    page.fill("#f-vram", "48")
    page.fill("#f-price", "1.5")
    n = sql(warehouse, """select count(*) from offers where provider = 'vastai'
                          and lower(region || ' ' || zone) like '%us%' and gpu_memory_gb_nominal >= 48
                          and price_per_gpu_hour <= 1.5""")[0][0]
    assert n > 0
    assert page.text_content("#count") == str(n) and visible(page).count() == n
    page.screenshot(path=str(tmp_path / "report-filtered.png"))

    # the hostile strings are text on the page, never markup or script
    page.click("button[type=reset]")
    page.wait_for_function(f"document.getElementById('count').textContent === '{total}'")
    page.select_option("#f-provider", "acme")
    assert visible(page).count() == 2
    cells = visible(page).first.locator("td")
    assert cells.nth(6).text_content() == EVIL_INSTANCE and cells.nth(4).text_content() == EVIL_REGION
    assert cells.nth(12).text_content() == "$3.60"
    assert page.evaluate("typeof window.pwned") == "undefined" and dialogs == []
    assert page.locator("#offers img, #offers script").count() == 0
    assert requests == [page_file.as_uri()]  # nothing but the file itself

    # the picture for people: H100 on demand, cheapest first
    page.click("button[type=reset]")
    page.select_option("#f-gpu", "H100-SXM")
    page.locator("#offers th[data-key=price]").click()
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot))
    page.close()
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("GPULEDGER_TEST_ARTIFACTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for name in ("report.png", "report-filtered.png"):
            shutil.copy(tmp_path / name, Path(keep) / name)


def test_report_command_without_a_warehouse(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "p.html"), "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code == 2 and "no warehouse at" in result.output
    assert not (tmp_path / "p.html").exists()


def test_write_report_replaces_the_file_whole(warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "prices.html"
    r1 = write_report(warehouse, out, now=NOW)
    r2 = write_report(warehouse, out, egress_gb=20000, now=NOW)  # 100 free, 10140 at .09, 9760 at .05
    assert r1.path == r2.path == out and not list(out.parent.glob(".*partial"))
    acme = [r for r in r2.rows if r["provider"] == "acme"][0]
    assert acme["egress_usd"] == pytest.approx(10140 * 0.09 + 9760 * 0.05)
    assert "downloading 20000 GB" in out.read_text()
