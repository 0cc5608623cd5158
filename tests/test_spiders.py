"""Web-page spiders: CoreWeave (server-rendered) and Hyperstack (JavaScript-rendered, headless Chromium).

Parsers are tested on saved HTML through scrapy's HtmlResponse (no server); the
crawls run the real spiders in child processes against the ReplayServer on
127.0.0.1, with the values checked by hand against the pages (provenance in
adapters/recordings/{coreweave,hyperstack}/README.md).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from scrapy.http import HtmlResponse

from gpuledger.adapters.base import USER_AGENT, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from gpuledger.spiders import SPIDERS, browser, coreweave, crusoe, hyperstack, page_source, runner
from gpuledger.spiders.items import (
    PAGE_ROW_FIELDS,
    PageRow,
    PriceTextError,
    parse_money,
    parse_number,
    price_unit,
    usd_per_gb_month,
)
from gpuledger.spiders.page_source import LayoutChanged, spider_path
from gpuledger.spiders.runner import crawl
from gpuledger.spiders.settings import browser_settings, crawl_settings
from tests.conftest import replay_context

FIX = Path(__file__).parent / "fixtures"
CW_PAGE = BUNDLED_RECORDINGS / "coreweave" / "www.coreweave.com" / "pricing.html"
HS_SERVED = BUNDLED_RECORDINGS / "hyperstack" / "www.hyperstack.cloud" / "gpu-pricing.html"
HS_RENDERED = FIX / "hyperstack" / "gpu-pricing.rendered.html"
WALL_TIMES: dict[str, float] = {}
CW_SPIDER = spider_path(coreweave.CoreWeavePricingSpider)
HS_SPIDER = spider_path(hyperstack.HyperstackPricingSpider)


def html(path: Path, url: str) -> HtmlResponse:
    return HtmlResponse(url=url, body=path.read_bytes(), encoding="utf-8")


def by_key(batch, instance_type: str, option: str = "on_demand"):
    [offer] = [o for o in batch.offers if o.instance_type == instance_type and o.purchase_option == option]
    return offer


# -- pure text helpers ------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("$49.24/hr", (49.24, "USD")),
    ("$49.24 / Hour", (49.24, "USD")),
    ("On-Demand Price: $68.80 / Hour", (68.8, "USD")),
    ("$1,250", (1250.0, "USD")),
    ("$1,250.50 / hr", (1250.5, "USD")),
    ("from $1.82", (1.82, "USD")),
    ("€3.20 per GPU per hour", (3.2, "EUR")),
    ("Contact sales", None),
    ("Contact Sales.", None),
    ("Coming soon", None),
    ("—", None),
])
def test_parse_money(text: str, expected) -> None:
    assert parse_money(text) == expected


@pytest.mark.parametrize("text", ["", "TBD", "Free", "ask us"])
def test_parse_money_refuses_what_is_not_a_price(text: str) -> None:
    with pytest.raises(PriceTextError):
        parse_money(text)


@pytest.mark.parametrize("text, why", [
    ("$2,49/hr", "decimal comma"),  # was read as $249/hr
    ("$1.234,56 / hr", "decimal comma"),  # was read as $1.234
    ("2,49 EUR", "decimal comma"),  # was read as 249 EUR
    ("$2.10 - $2.50 / hr", "price range"),  # was read as $2.10
    ("$2.10–2.50/hr", "price range"),
    ("$2.10/hr to $2.50/hr", "price range"),
])
def test_parse_money_refuses_a_decimal_comma_or_a_range(text: str, why: str) -> None:
    """A number the page may mean otherwise, or two prices, is never read as one price."""
    with pytest.raises(PriceTextError, match=f"{why} in {re.escape(repr(text))}"):
        parse_money(text)
    batch = crusoe.build_batch([PageRow(kind="gpu", section="", name="NVIDIA H100", price_text=text)])
    assert batch.offers == []
    assert [q.reason for q in batch.quarantined] == [f"price: {why} in {text!r}: not read as a price"]


def test_a_spec_with_a_decimal_comma_is_not_read_a_hundred_times_larger() -> None:
    """'61,44' TB of local disk was read as 6,144 TB (6,144,000 GB on the offer)."""
    assert parse_number("2,048") == 2048 and parse_number("1,024.5 GB") == 1024.5
    with pytest.raises(ValueError, match="not a number: '61,44'"):
        parse_number("61,44")
    rows = coreweave.parse_pricing_page(html(CW_PAGE, "https://www.coreweave.com/pricing"))
    [h100] = [r for r in rows if r.name == "NVIDIA HGX H100"]
    h100.cells["Local Storage (TB)"] = "61,44"
    batch = coreweave.build_batch([h100])
    assert batch.offers == [] and [q.reason for q in batch.quarantined] == ["gpu: not a number: '61,44'"]


def test_units_and_numbers() -> None:
    assert price_unit("$3.20/hr") == "hour"
    assert price_unit("$3.20 per GPU per hour") == "hour"
    assert price_unit("$0.070/GB/mo") == "gb_month"
    assert price_unit("$0.000096774 per GB per hour") == "gb_hour"
    assert price_unit("$4.00 per IP / month") == "month"
    assert usd_per_gb_month("$0.070/GB/mo") == (0.07, "USD")
    assert usd_per_gb_month("$0.000096774 per GB per hour") == (0.070645, "USD")  # x 730 h
    assert usd_per_gb_month("Contact sales") is None
    with pytest.raises(PriceTextError):
        usd_per_gb_month("$4.00 per IP / month")
    assert parse_number("2,048") == 2048 and parse_number("61.44") == 61.44 and parse_number("—") is None


# -- CoreWeave: parser on the saved page -----------------------------------------------------------

def test_coreweave_rows_from_saved_page() -> None:
    rows = coreweave.parse_pricing_page(html(CW_PAGE, "https://www.coreweave.com/pricing"))
    gpu = [r for r in rows if r.kind == "gpu"]
    assert [r.name for r in gpu][:4] == ["NVIDIA GB200 NVL72", "NVIDIA GB300 NVL72", "NVIDIA HGX B300",
                                        "NVIDIA HGX B200"]
    assert len(gpu) == 11 and not any("Genoa" in r.name for r in rows)  # CPU table ignored
    h100 = next(r for r in gpu if r.name == "NVIDIA HGX H100")
    assert (h100.product_id, h100.section) == ("nvidia-hgx-h100", "REGION: NORTH AMERICA")
    assert (h100.cells["GPU Count"], h100.cells["VRAM (GB)"], h100.cells["System RAM (GB)"]) == ("8", "80", "2,048")
    assert (h100.price_text, h100.spot_text) == ("$49.24", "$19.71")  # labelled spans, not the mobile duplicate
    assert "/ Hour" in h100.cells["Instance Price Per Hour"]
    gb200 = gpu[0]
    assert gb200.cells["GPU Count"] == "4"  # footnote marker stripped...
    assert gb200.footnotes[0].startswith("GB200 NVL72 and GB300 NVL72 are priced per instance of 4 GPUs")  # ...kept
    assert (gpu[1].price_text, gpu[2].price_text, gpu[2].spot_text) == ("Contact sales", "Contact sales", "$35.84")
    services = {r.name: (r.kind, r.price_text) for r in rows if r.kind != "gpu"}
    assert services["Distributed File Storage"] == ("storage", "$0.070/GB/mo")
    assert services["Egress and IOPS"] == ("network", "Free")


def test_coreweave_normalized_records() -> None:
    batch = coreweave.build_batch(coreweave.parse_pricing_page(html(CW_PAGE, "https://www.coreweave.com/pricing")))
    options = [o.purchase_option for o in batch.offers]
    assert (options.count("on_demand"), options.count("spot")) == (9, 5)
    assert (len(batch.storage), len(batch.egress), len(batch.quarantined)) == (5, 1, 0)
    h100 = by_key(batch, "8x NVIDIA HGX H100")
    assert (h100.price_per_hour, h100.price_per_gpu_hour, h100.gpu_count) == (49.24, 6.155, 8)  # instance price
    assert (h100.gpu_model, h100.gpu_variant_exact, h100.gpu_memory_gb, h100.total_gpu_memory_gb) == (
        "H100-SXM", True, 80, 640)
    assert (h100.region, h100.zone, h100.vcpus, h100.ram_gb, h100.local_disk_gb) == (
        "north-america", "", 128, 2048, 61440)
    assert (h100.billing_granularity_s, h100.minimum_charge_s, h100.interconnect) == (60, 0, "NVSwitch")
    spot = by_key(batch, "8x NVIDIA HGX H100", "spot")
    assert (spot.price_per_hour, spot.spot_savings_pct) == (19.71, 60.0)
    assert by_key(batch, "8x NVIDIA L40S").price_per_gpu_hour == 2.25  # 18.00 / 8
    gb200 = by_key(batch, "4x NVIDIA GB200 NVL72")
    assert (gb200.gpu_model, gb200.gpu_count, gb200.price_per_gpu_hour) == ("GB200", 4, 10.5)
    a100 = by_key(batch, "8x NVIDIA A100")
    assert (a100.gpu_model, a100.gpu_variant_exact, a100.price_per_hour) == ("A100-SXM4-80", False, 21.6)
    # "Contact sales": no on-demand offer for GB300 NVL72 / HGX B300, not quarantined, noted; B300 spot kept.
    assert not [o for o in batch.offers if "GB300" in o.instance_type]
    assert [o.purchase_option for o in batch.offers if o.instance_type == "8x NVIDIA HGX B300"] == ["spot"]
    assert by_key(batch, "8x NVIDIA HGX B300", "spot").price_per_hour == 35.84
    assert any("GB300" in n and "Contact sales" in n for n in batch.notes)
    storage = {s.storage_class: s.usd_per_gb_month for s in batch.storage}
    assert storage["distributed-file-storage"] == 0.07 and storage["ai-object-storage-hot"] == 0.06
    [egress] = batch.egress
    assert (egress.destination, egress.tier_start_gb, egress.usd_per_gb) == ("internet", 0.0, 0.0)
    assert "billing-and-charges" in egress.description
    keys = [o.key for o in batch.offers]
    assert len(keys) == len(set(keys))
    assert json.loads(h100.provider_data)["product_id"] == "nvidia-hgx-h100"


def test_coreweave_bad_rows_are_quarantined_not_dropped() -> None:
    rows = coreweave.parse_pricing_page(html(CW_PAGE, "https://www.coreweave.com/pricing"))
    rows = [r for r in rows if r.name in ("NVIDIA HGX H100", "NVIDIA L40", "NVIDIA L40S")]
    rows[0].name = "NVIDIA Z9000"  # unknown GPU
    rows[1].price_text = "€18.00"  # not USD
    rows[2].price_text = "TBD"  # not a price
    batch = coreweave.build_batch(rows)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert "unknown GPU name 'NVIDIA Z9000'" in reasons["north-america/nvidia-hgx-h100"]
    assert "EUR, not USD" in reasons["north-america/nvidia-l40s"]
    assert "no price in 'TBD'" in reasons["north-america/nvidia-l40"]
    assert batch.offers == []


def test_coreweave_layout_changes_raise() -> None:
    redesigned = FIX / "coreweave" / "layout_changed" / "coreweave" / "www.coreweave.com" / "pricing.html"
    with pytest.raises(LayoutChanged, match="no GPU price table"):
        coreweave.parse_pricing_page(html(redesigned, "https://www.coreweave.com/pricing"))
    renamed = CW_PAGE.read_text().replace("<div>GPU Count</div></div>", "<div>Accelerators</div></div>")
    with pytest.raises(LayoutChanged, match="lacks the columns \\['gpu count'\\]"):
        coreweave.parse_pricing_page(HtmlResponse(url="https://x/", body=renamed.encode(), encoding="utf-8"))


def test_coreweave_reads_the_price_column_by_its_label_not_its_place() -> None:
    """A column added after 'Instance Price Per Hour' (here a reserved rate) is not read as the instance price."""
    def with_column(label: str, cell: str, after: bool) -> HtmlResponse:
        """The page with a column `label` beside 'Instance Price Per Hour', `cell` in each price row."""
        hourly = '<div class="table-v2-cell"><div>Instance Price Per Hour</div></div>'
        added = f'<div class="table-v2-cell"><div>{label}</div></div>'
        lines = CW_PAGE.read_text().replace(hourly, hourly + added if after else added + hourly, 1).split("\n")
        for at in [i for i, line in enumerate(lines) if 'class="table-v2-cell table-v2-cell--price"' in line][::-1]:
            lines.insert(at + after, f'<div class="table-v2-cell"><div>{cell}</div></div>')
        return HtmlResponse(url="https://x/", body="\n".join(lines).encode(), encoding="utf-8")

    page = with_column("Reserved Price Per Hour", "$30.00 / Hour", after=True)
    batch = coreweave.build_batch(coreweave.parse_pricing_page(page))
    h100 = by_key(batch, "8x NVIDIA HGX H100"), by_key(batch, "8x NVIDIA HGX H100", "spot")
    assert (h100[0].price_per_hour, h100[1].price_per_hour) == (49.24, 19.71)
    assert by_key(batch, "8x NVIDIA L40S").price_per_hour == 18.0
    assert batch.counts() == {"offers": 14, "egress": 1, "storage": 5, "quarantined": 0}
    # a monthly instance price placed before the hourly one is not the hourly price either
    page = with_column("Instance Price Per Month", "$35,945.20 / Month", after=False)
    batch = coreweave.build_batch(coreweave.parse_pricing_page(page))
    assert by_key(batch, "8x NVIDIA HGX H100").price_per_hour == 49.24 and len(batch.offers) == 14


def test_coreweave_row_whose_cells_do_not_match_the_columns_is_quarantined() -> None:
    """The H100 row lost its vCPU cell: its RAM would be read as vCPUs (2,048) and its disk as RAM."""
    page = CW_PAGE.read_text()
    at = page.index('<div class="table-v2-cell"><div>128</div></div>', page.index('data-product="nvidia-hgx-h100"'))
    page = page[:at] + page[at + len('<div class="table-v2-cell"><div>128</div></div>'):]
    batch = coreweave.build_batch(
        coreweave.parse_pricing_page(HtmlResponse(url="https://x/", body=page.encode(), encoding="utf-8")))
    assert [(q.source_ref, q.reason) for q in batch.quarantined] == [
        ("north-america/nvidia-hgx-h100", "layout: 6 cells under 7 column labels")]
    assert not [o for o in batch.offers if "H100" in o.instance_type]
    assert len(batch.offers) == 12 and by_key(batch, "8x NVIDIA HGX H200").vcpus == 128  # the others load


def test_coreweave_region_tabs_and_plain_price_cells() -> None:
    """Two region tabs; an older row layout with the price as the cell's own text."""
    def table(region: str, name: str, price: str) -> str:
        return (f'<div class="table-region-tag">REGION: {region}</div><div class="table-v2 kubernetes-gpu-pricing">'
                '<div class="table-v2-header"><div class="table-grid"><div class="table-v2-cell"><div>GPU Model</div>'
                '</div><div class="table-v2-cell"><div>GPU Count</div></div><div class="table-v2-cell"><div>VRAM (GB)'
                '</div></div><div class="table-v2-cell"><div>Instance Price Per Hour</div></div></div></div>'
                '<div class="table-row-v2 w-dyn-item kubernetes-gpu-pricing"><div class="table-grid">'
                f'<div class="table-v2-cell table-v2-cell--name"><h3 class="table-model-name">{name}</h3></div>'
                f'<div class="table-v2-cell"><div>8</div></div><div class="table-v2-cell"><div>48</div></div>'
                f'<div class="table-v2-cell"><div>{price}</div></div></div></div></div>')
    page = f"<html><body>{table('NORTH AMERICA', 'NVIDIA L40S', '$18.00')}{table('EUROPE', 'NVIDIA L40', '$10.00')}</body></html>"
    rows = coreweave.parse_pricing_page(HtmlResponse(url="https://x/", body=page.encode(), encoding="utf-8"))
    assert [(r.section, r.price_text) for r in rows] == [("REGION: NORTH AMERICA", "$18.00"), ("REGION: EUROPE", "$10.00")]
    batch = coreweave.build_batch(rows)
    assert sorted((o.region, o.price_per_hour) for o in batch.offers) == [("europe", 10.0), ("north-america", 18.0)]


# -- Hyperstack: parser on the rendered DOM, and proof the served HTML needs JavaScript ------------

def test_hyperstack_rows_from_rendered_dom() -> None:
    rows = hyperstack.parse_pricing_page(html(HS_RENDERED, "https://www.hyperstack.cloud/gpu-pricing"))
    on_demand = [r for r in rows if r.kind == "gpu" and not r.spot_text]
    spot = [r for r in rows if r.spot_text]
    assert len(on_demand) == 13 and len(spot) == 5
    h100 = next(r for r in on_demand if r.name == "NVIDIA H100 SXM")
    assert h100.section == "On-Demand GPU Pricing"
    assert h100.cells == {"GPU Model": "NVIDIA H100 SXM", "VRAM (GB)": "80", "Max pCPUs per GPU": "24",
                          "Max RAM (GB) per GPU": "240", "Pricing Per Hour": "$3.20/hr"}
    assert [(r.name, r.spot_text) for r in spot][0] == ("NVIDIA H100 PCIe", "$2.00/hr")
    assert not any("from $" in (r.price_text + r.spot_text) for r in rows)  # reserved terms not scraped
    assert {r.name: r.kind for r in rows if r.kind != "gpu"} == {
        "Cloud-SSD volumes (SSVs)": "storage", "Public IP address": "network", "Egress / ingress traffic": "network"}


def test_hyperstack_served_html_has_no_prices_without_javascript() -> None:
    with pytest.raises(LayoutChanged, match="has no price rows"):
        hyperstack.parse_pricing_page(html(HS_SERVED, "https://www.hyperstack.cloud/gpu-pricing"))


def test_hyperstack_normalized_records() -> None:
    batch = hyperstack.build_batch(hyperstack.parse_pricing_page(html(HS_RENDERED, "https://x/gpu-pricing")))
    options = [o.purchase_option for o in batch.offers]
    assert (options.count("on_demand"), options.count("spot")) == (13, 5)
    h100 = by_key(batch, "1x NVIDIA H100 SXM")
    assert (h100.price_per_hour, h100.gpu_count, h100.gpu_model, h100.vcpus, h100.ram_gb) == (
        3.2, 1, "H100-SXM", 24, 240)  # per-GPU price; pCPU/RAM are the page's per-GPU maxima
    assert (h100.region, h100.billing_granularity_s, h100.minimum_charge_s) == ("global", 60, None)
    assert json.loads(h100.provider_data)["vcpus_ram_are_maxima_per_gpu"] is True
    assert by_key(batch, "1x NVIDIA H200 SXM").price_per_hour == 3.99
    nvlink = by_key(batch, "1x NVIDIA H100 NVLink")
    assert (nvlink.gpu_model, nvlink.price_per_hour, nvlink.interconnect, nvlink.vcpus) == (
        "H100-PCIe", 2.6, "NVLink", None)  # "—" on the page -> None, never invented
    a100_spot = by_key(batch, "1x NVIDIA A100", "spot")
    assert (a100_spot.price_per_hour, a100_spot.spot_savings_pct, a100_spot.gpu_memory_gb) == (1.08, 20.0, 80)
    a4000 = by_key(batch, "1x NVIDIA A4000")
    assert (a4000.gpu_model, a4000.gpu_memory_gb_nominal) == ("RTX-A4000", 16)
    assert batch.quarantined == []
    [ssd] = batch.storage
    assert (ssd.storage_class, ssd.usd_per_gb_month) == ("cloud-ssd-volumes-ssvs", 0.070645)
    [egress] = batch.egress
    assert (egress.region, egress.usd_per_gb, egress.tier_start_gb) == ("global", 0.0, 0.0)


def test_hyperstack_reads_the_price_column_by_its_label_not_its_place() -> None:
    """A column added after 'Pricing Per Hour' (here a reserved rate) is not read as the on-demand price."""
    page = HS_RENDERED.read_text().replace("<th>Pricing Per Hour</th></tr>",
                                           "<th>Pricing Per Hour</th><th>Reserved Per Hour</th></tr>", 1)
    page = page.replace("<td>$3.20/hr</td></tr>", "<td>$3.20/hr</td><td>$2.72/hr</td></tr>", 1)
    page = page.replace("<td>$2.50/hr</td></tr>", "<td>$2.50/hr</td><td>$1.75/hr</td></tr>", 1)
    rows = hyperstack.parse_pricing_page(HtmlResponse(url="https://x/", body=page.encode(), encoding="utf-8"))
    batch = hyperstack.build_batch(rows)
    assert by_key(batch, "1x NVIDIA H100 SXM").price_per_hour == 3.2
    assert by_key(batch, "1x NVIDIA H100").price_per_hour == 2.5
    spot_moved = HS_RENDERED.read_text().replace("<th>GPU Model</th><th>Pricing Per Hour</th>",
                                                 "<th>GPU Model</th><th>Price per hour (spot)</th>", 1)
    with pytest.raises(LayoutChanged, match="spot table header .* lacks the columns \\['pricing per hour'\\]"):
        hyperstack.parse_pricing_page(HtmlResponse(url="https://x/", body=spot_moved.encode(), encoding="utf-8"))


def test_hyperstack_row_that_lost_a_cell_is_quarantined_not_dropped() -> None:
    page = HS_RENDERED.read_text().replace("<td>NVIDIA H100 SXM</td><td>80</td><td>24</td><td>240</td>",
                                           "<td>NVIDIA H100 SXM</td><td>80</td><td>24</td>", 1)
    page = page.replace("<td>NVIDIA L40</td><td>$0.80/hr</td>", "<td>NVIDIA L40 $0.80/hr</td>", 1)  # spot row
    batch = hyperstack.build_batch(
        hyperstack.parse_pricing_page(HtmlResponse(url="https://x/", body=page.encode(), encoding="utf-8")))
    assert [(q.source_ref, q.reason) for q in batch.quarantined] == [
        ("global/NVIDIA H100 SXM/on_demand", "layout: 4 cells under the 5 columns of the on-demand table"),
        ("global/NVIDIA L40 $0.80/hr/spot", "layout: 1 cells under the 2 columns of the spot table")]
    options = [o.purchase_option for o in batch.offers]
    assert (options.count("on_demand"), options.count("spot")) == (12, 4)  # the others load
    assert by_key(batch, "1x NVIDIA H200 SXM").price_per_hour == 3.99


def test_a_storage_row_that_lost_its_price_cell_is_quarantined_not_dropped() -> None:
    # Both pages dropped such a row without a word (CoreWeave under 2 cells, Hyperstack other than 2).
    cell = '<div class="table-v2-cell"><div>$0.070/GB/mo</div></div>'
    page = CW_PAGE.read_text()
    at = page.index(cell, page.index('<h3 class="table-model-name">Distributed File Storage</h3>'))
    batch = coreweave.build_batch(coreweave.parse_pricing_page(
        HtmlResponse(url="https://x/", body=(page[:at] + page[at + len(cell):]).encode(), encoding="utf-8")))
    assert [(q.kind, q.source_ref, q.reason) for q in batch.quarantined] == [
        ("storage", "Distributed File Storage", "layout: 1 cell(s) in a storage row, not a name and a price")]
    assert "Distributed File Storage" not in {s.description.split(":")[0] for s in batch.storage}

    page = HS_RENDERED.read_text().replace("<td>Cloud-SSD volumes (SSVs)</td><td>$0.000096774 per GB per hour</td>",
                                           "<td>Cloud-SSD volumes (SSVs)</td><td>NVMe</td><td>$0.000096774</td>", 1)
    batch = hyperstack.build_batch(
        hyperstack.parse_pricing_page(HtmlResponse(url="https://x/", body=page.encode(), encoding="utf-8")))
    assert [(q.kind, q.source_ref, q.reason) for q in batch.quarantined] == [
        ("storage", "Cloud-SSD volumes (SSVs)", "layout: 3 cells under the 2 columns (name, price) of the storage "
                                                "table")]
    assert batch.storage == [] and [e.usd_per_gb for e in batch.egress] == [0.0]  # the egress row still loads


def test_shared_storage_and_egress_rows() -> None:
    """Both page sources make storage and egress records through the same builders."""
    from gpuledger.warehouse.records import Batch

    batch = Batch("hyperstack")
    for text in ("Free", "$0.02 per GB", "€0.02/GB", "$4.00 per IP / month", "TBD"):
        page_source.add_egress(batch, PageRow(kind="network", section="", name="Data egress", price_text=text),
                               ["global"], f"egress: {text}")
    page_source.add_egress(batch, PageRow(kind="network", section="", name="Public IP", price_text="$4/mo"),
                           ["global"], "not egress")
    assert [(e.usd_per_gb, e.description) for e in batch.egress] == [(0.0, "egress: Free"),
                                                                    (0.02, "egress: $0.02 per GB")]
    assert [q.reason for q in batch.quarantined] == [
        "egress price '€0.02/GB' is not USD per GB", "egress price '$4.00 per IP / month' is not USD per GB",
        "price: no price in 'TBD'"]
    for text in ("$0.000096774 per GB per hour", "Contact sales", "$3/hr"):
        page_source.add_storage(batch, PageRow(kind="storage", section="", name="Block SSD", price_text=text),
                                ["eu", "us"], "ssd")
    assert [(s.region, s.storage_class, s.usd_per_gb_month) for s in batch.storage] == [
        ("eu", "block-ssd", 0.070645), ("us", "block-ssd", 0.070645)]  # x 730 h, once per region
    assert batch.notes == ["skipped storage 'Block SSD': no public price (Contact sales)"]
    assert batch.quarantined[-1].reason == "price: not a per-GB storage price: '$3/hr'"


def test_page_sources_report_gpu_memory_only_where_the_page_states_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each offer goes to Batch.offer with gpu_memory_gb as the page prints it and None where it prints
    none (the kit fills the canon's figure and marks it so): Nebius's and Paperspace's tables have no
    memory column, Hyperstack's spot table lists an H100 PCIe its on-demand table does not. Values
    checked by hand against the recordings (Hyperstack: rates.json `vram_gb`)."""
    from gpuledger.spiders import crusoe, nebius, paperspace
    from gpuledger.warehouse.records import Batch

    passed: dict[tuple[str, str, str], object] = {}
    real_offer = Batch.offer

    def offer(self, ref, raw, **fields):
        passed[(self.provider, fields["instance_type"], fields["purchase_option"])] = fields.get("gpu_memory_gb", "-")
        return real_offer(self, ref, raw, **fields)

    monkeypatch.setattr(Batch, "offer", offer)
    pages = {coreweave: CW_PAGE, crusoe: BUNDLED_RECORDINGS / "crusoe" / "www.crusoe.ai" / "cloud-pricing.html",
             hyperstack: HS_RENDERED, nebius: BUNDLED_RECORDINGS / "nebius" / "nebius.com" / "prices.html",
             paperspace: BUNDLED_RECORDINGS / "paperspace" / "www.paperspace.com" / "pricing.html"}
    batches = {m.NAME: m.build_batch(m.parse_pricing_page(html(page, "https://x/"))) for m, page in pages.items()}
    by_provider = {name: {k[1:]: v for k, v in passed.items() if k[0] == name} for name in batches}
    assert len(by_provider["nebius"]) == 14 and set(by_provider["nebius"].values()) == {None}
    assert len(by_provider["paperspace"]) == 11 and set(by_provider["paperspace"].values()) == {None}
    hs = by_provider["hyperstack"]
    assert hs[("1x NVIDIA H100 PCIe", "spot")] is None  # not on the on-demand table: no memory on the page
    assert hs[("1x NVIDIA A100", "spot")] == 80  # its on-demand row's "VRAM (GB)"
    assert hs[("1x NVIDIA B200", "on_demand")] == 192  # the page's figure, though the canon's B200 has 180
    assert by_provider["coreweave"][("8x NVIDIA HGX H100", "spot")] == 80
    assert by_provider["crusoe"][("1x AMD MI300X 192GB", "on_demand")] == 192
    # A bare "V100" (16 or 32 GB, SXM2 or PCIe) is stored as the 16 GB SXM2 card, marked as a guess.
    [v100] = [o for o in batches["paperspace"].offers if o.instance_type == "V100"]
    assert (v100.gpu_model, v100.gpu_variant_exact, v100.gpu_name_reported) == ("V100-SXM2-16", False, "V100")
    # Stored: where the page prints none, the canon's memory per GPU, marked; a printed figure stays unmarked.
    filled = {(o.provider, o.instance_type, o.purchase_option): (o.gpu_memory_gb, o.total_gpu_memory_gb)
              for b in batches.values() for o in b.offers if o.gpu_memory_from_canon}
    assert {k for k in filled} == {(p, *k) for p, got in by_provider.items() for k, v in got.items() if v is None}
    assert filled[("hyperstack", "1x NVIDIA H100 PCIe", "spot")] == (80, 80)
    assert (v100.gpu_memory_gb, v100.gpu_memory_from_canon) == (16, True)
    assert not [o for o in batches["hyperstack"].offers if o.gpu_memory_from_canon and o.gpu_model != "H100-PCIe"]


def test_provider_declarations() -> None:
    for module in (coreweave, hyperstack):
        assert module.PROVIDER.name == module.NAME and module.PROVIDER.source_kind == "page", module.NAME
        assert module.PROVIDER.facts.billing_granularity_s == 60, module.NAME  # both bill per minute
        assert not module.PROVIDER.honours_retry_after and module.PROVIDER.secret_env_vars == ()
    assert hyperstack.PROVIDER.needs_browser and not coreweave.PROVIDER.needs_browser
    assert {name: f"gpuledger.spiders.{name}" for name in ("coreweave", "crusoe", "hyperstack", "nebius", "paperspace")
            }.items() <= SPIDERS.items()  # the page sources, none of them left out of the registry


# -- settings and browser discovery ----------------------------------------------------------------

def test_crawl_settings_polite_and_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    replay = crawl_settings(SourceContext(provider="coreweave", mode="replay"))
    live = crawl_settings(SourceContext(provider="coreweave", mode="live"))
    for s in (replay, live):
        assert s["USER_AGENT"] == USER_AGENT and s["ROBOTSTXT_OBEY"] is True
        assert s["TELNETCONSOLE_ENABLED"] is False and s["REMOTE_CONTROL_ENABLED"] is False
    assert (replay["AUTOTHROTTLE_ENABLED"], replay["DOWNLOAD_DELAY"]) == (False, 0.0)
    assert (live["AUTOTHROTTLE_ENABLED"], live["DOWNLOAD_DELAY"], live["CONCURRENT_REQUESTS_PER_DOMAIN"]) == (True, 2.0, 1)
    monkeypatch.setenv("GPULEDGER_CHROMIUM_NO_SANDBOX", "1")  # as root, or a container without user namespaces
    b = browser_settings(SourceContext(provider="hyperstack", mode="live"), "/opt/chrome/chrome")
    assert b["TWISTED_REACTOR"] == "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
    # One Playwright driver per crawl: only the page's scheme is rendered, the other keeps scrapy's own handler.
    assert b["DOWNLOAD_HANDLERS"] == {"https": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"}
    replayed = browser_settings(SourceContext(provider="hyperstack", mode="replay"), "/opt/chrome/chrome", scheme="http")
    assert replayed["DOWNLOAD_HANDLERS"] == {"http": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"}
    assert b["PLAYWRIGHT_LAUNCH_OPTIONS"]["executable_path"] == "/opt/chrome/chrome"
    assert b["PLAYWRIGHT_LAUNCH_OPTIONS"]["args"] == [
        "--no-sandbox", "--no-zygote", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic", "--in-process-gpu",
        "--enable-features=NetworkServiceInProcess2"]
    json.dumps(b)  # crosses the process boundary as JSON


def test_browser_discovery_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = SourceContext(provider="hyperstack")
    fake = tmp_path / "my-chromium"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("GPULEDGER_CHROMIUM_PATH", str(fake))
    assert browser.find_chromium(ctx) == str(fake)  # an explicit setting wins
    monkeypatch.setenv("GPULEDGER_CHROMIUM_PATH", str(tmp_path / "missing"))
    with pytest.raises(SourceError, match="hyperstack: the configured Chromium"):
        browser.find_chromium(ctx)
    monkeypatch.delenv("GPULEDGER_CHROMIUM_PATH")
    monkeypatch.delenv("GPULEDGER_CHROMIUM_PATH", raising=False)
    assert browser.find_chromium(SourceContext(provider="x", settings={"chromium_path": str(fake)})) == str(fake)
    monkeypatch.setattr(browser.shutil, "which", lambda name: str(fake) if name == "chromium" else None)
    assert browser.find_chromium(ctx) == str(fake)  # a Chromium on PATH
    shell = tmp_path / "chromium-headless-shell"
    shell.write_text("#!/bin/sh\n")
    shell.chmod(shell.stat().st_mode | stat.S_IXUSR)
    on_path = {"chromium": str(fake), "chromium-headless-shell": str(shell)}
    monkeypatch.setattr(browser.shutil, "which", on_path.get)
    assert browser.find_chromium(ctx) == str(shell)  # the headless shell before the full browser
    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    monkeypatch.setattr(browser, "KNOWN_LOCATIONS", (str(tmp_path / "nowhere"),))
    monkeypatch.setattr(browser, "playwright_chromium", lambda: str(fake))
    assert browser.find_chromium(ctx) == str(fake)  # playwright's own download, last
    monkeypatch.setattr(browser, "playwright_chromium", lambda: None)
    with pytest.raises(SourceError, match="hyperstack: no Chromium found"):
        browser.find_chromium(ctx)


def test_same_host_filter() -> None:
    abort = browser.same_host_only("http://127.0.0.1:4321/gpu-pricing")

    class Req:
        def __init__(self, url: str, kind: str = "script") -> None:
            self.url, self.resource_type = url, kind

    assert not abort(Req("http://127.0.0.1:4321/gpu-pricing/rates.json", "fetch"))
    assert abort(Req("https://www.googletagmanager.com/gtag/js"))
    assert abort(Req("http://127.0.0.1:4321/logo.png", "image"))


# -- real crawls in child processes against the replay server -------------------------------------

def test_coreweave_crawls_twice_in_one_process(replay) -> None:
    server = replay("coreweave")
    ctx = replay_context(server, "coreweave")
    counts = []
    for _ in range(2):  # a second crawl in the same process must work (one reactor per child)
        started = time.monotonic()
        batch = coreweave.fetch(ctx)
        WALL_TIMES["coreweave"] = time.monotonic() - started
        counts.append(batch.counts())
    assert counts[0] == counts[1] == {"offers": 14, "egress": 1, "storage": 5, "quarantined": 0}
    assert by_key(batch, "8x NVIDIA HGX H100").price_per_hour == 49.24
    paths = [(req.path, req.headers.get("user-agent")) for _, req in server.requests]
    assert paths == [("/robots.txt", USER_AGENT), ("/pricing", USER_AGENT)] * 2  # robots.txt first, our UA
    assert ctx.requests_made == 4
    print(f"\ncoreweave replay crawl: {WALL_TIMES['coreweave']:.2f} s wall")


def test_coreweave_layout_change_fails_the_scrape(replay) -> None:
    server = replay("coreweave", recordings=FIX / "coreweave" / "layout_changed")
    with pytest.raises(SourceError) as err:
        coreweave.fetch(replay_context(server, "coreweave"))
    msg = str(err.value)
    assert msg.startswith("coreweave: scrape of www.coreweave.com/pricing")
    assert "layout changed" in msg and "no GPU price table (.table-v2.kubernetes-gpu-pricing)" in msg


def test_coreweave_http_error_and_robots_refusal(replay) -> None:
    def error(host, req, ex):
        return (503, {"Content-Type": "text/plain"}, b"maintenance") if req.path == "/pricing" else None

    server = replay("coreweave", hook=error)
    with pytest.raises(SourceError, match="coreweave: .*HTTP 503 from http://127.0.0.1:\\d+/pricing"):
        coreweave.fetch(replay_context(server, "coreweave"))

    def disallow(host, req, ex):
        return (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /pricing\n") \
            if req.path == "/robots.txt" else None

    server = replay("coreweave", hook=disallow)
    with pytest.raises(SourceError, match="coreweave: .*Forbidden by robots.txt"):
        coreweave.fetch(replay_context(server, "coreweave"))
    assert [req.path for _, req in server.requests] == ["/robots.txt"]  # the page was never fetched


def test_a_redirect_to_another_site_fails_the_scrape(replay) -> None:
    """/pricing answers 302 to another site serving a CoreWeave-like page: its prices are not loaded as
    CoreWeave's. A redirect within the site is followed."""
    elsewhere = replay("coreweave").endpoints()[coreweave.HOST]

    def moved(host, req, ex):
        return (302, {"Location": f"{elsewhere}/pricing"}, b"") if req.path == "/pricing" else None

    with pytest.raises(SourceError) as err:
        coreweave.fetch(replay_context(replay("coreweave", hook=moved), "coreweave"))
    assert str(err.value).endswith(f"failed: the page redirected to another site, {elsewhere}/pricing: not read")

    def within(host, req, ex):
        return (301, {"Location": "/pricing"}, b"") if req.path == "/old-pricing" else None

    server = replay("coreweave", hook=within)
    ctx = replay_context(server, "coreweave")
    result = runner.crawl(ctx, CW_SPIDER, coreweave.HOST, "/old-pricing", crawl_settings(ctx))
    assert len(result.items) == 21

    def loop(host, req, ex):
        return (302, {"Location": "/pricing"}, b"") if req.path == "/pricing" else None

    with pytest.raises(SourceError) as err:  # the requests were made: not "request ... not made"
        coreweave.fetch(replay_context(replay("coreweave", hook=loop), "coreweave"))
    assert re.search(r"\) failed: http://127\.0\.0\.1:\d+/pricing: max redirections reached$", str(err.value))


def test_a_huge_page_is_refused_with_one_line(replay) -> None:
    """A 'pricing page' of 70 MiB is not read into the crawl child (a 200 MB one took 2.4 GB there and ended as
    'the spider raised {ValueError: 1}'): the scrape fails at once at the answer limit every source has (64 MB)."""
    page = CW_PAGE.read_bytes()
    huge = page.replace(b"<body>", b"<body>" + b"<p>padding</p>" * (70 * 2**20 // 14), 1)

    def bloat(host, req, ex):
        return (200, {"Content-Type": "text/html"}, huge) if req.path == "/pricing" else None

    with pytest.raises(SourceError) as err:
        coreweave.fetch(replay_context(replay("coreweave", hook=bloat), "coreweave"))
    assert str(err.value).startswith("coreweave: scrape of www.coreweave.com/pricing")
    assert (f"/pricing: DownloadCancelledError: Expected to receive {len(huge)} bytes which is larger than "
            f"download max size ({64 * 2**20})") in str(err.value)


def test_a_page_that_is_not_html_fails_saying_so(replay) -> None:
    """A 200 answer in JSON (a gateway's error) failed as 'the spider raised {'spider_exceptions/ValueError': 1}'."""
    def gateway(host, req, ex):
        return (200, {"Content-Type": "application/json"}, b'{"error": "rate limited"} </html>') \
            if req.path == "/pricing" else None

    with pytest.raises(SourceError) as err:
        coreweave.fetch(replay_context(replay("coreweave", hook=gateway), "coreweave"))
    assert str(err.value).startswith("coreweave: scrape of www.coreweave.com/pricing")
    assert re.search(r"failed: the page at http://127\.0\.0\.1:\d+/pricing could not be read \(Content-Type "
                     r"application/json\): ValueError: Cannot use css on a Selector of type 'json'$", str(err.value))


def test_a_gzip_bomb_stops_at_the_answer_limit_and_says_it_was_fetched() -> None:
    """300 KB of gzip inflating to 300 MB: refused at 64 MiB inflated, in a line that does not say the request
    was 'not made' (as a robots.txt refusal is)."""
    import gzip
    import http.server
    import threading

    body = gzip.compress(CW_PAGE.read_bytes().replace(b"<body>", b"<body>" + b" " * (300 * 2**20), 1), 9)

    class Bomb(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            gz = self.path != "/robots.txt"
            answer = body if gz else b"User-agent: *\nAllow: /\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            if gz:
                self.send_header("Content-Encoding", "gzip")
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Bomb)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ctx = SourceContext(provider="coreweave", mode="replay", http_attempts=1,
                            replay_urls={coreweave.HOST: f"http://127.0.0.1:{server.server_port}"})
        with pytest.raises(SourceError) as err:
            coreweave.fetch(ctx)
    finally:
        server.shutdown()
    msg = str(err.value)
    assert "not made" not in msg
    assert re.search(r"failed: http://127\.0\.0\.1:\d+/pricing: Ignored response <200 http://127\.0\.0\.1:\d+/"
                     r"pricing> because its body \(\d+ B compressed, \d+ B decompressed so far\) exceeded "
                     rf"DOWNLOAD_MAXSIZE \({64 * 2**20} B\) during decompression\.$", msg), msg


def test_items_leave_the_crawl_child_through_the_feed_export(replay, monkeypatch) -> None:
    """The child's items come back as scrapy's JSON-lines feed, in PageRow's column order; a feed
    that lost items against the crawl's own count fails the scrape instead of loading less."""
    ctx = replay_context(replay("coreweave"), "coreweave")
    result = page_source.scrape(ctx, coreweave.CoreWeavePricingSpider)
    assert list(result.items[0]) == list(PAGE_ROW_FIELDS) == [
        "kind", "section", "name", "cells", "price_text", "spot_text", "product_id", "footnotes", "row_index",
        "source_url"]
    assert result.status["items"] == len(result.items) == 21
    h100 = PageRow.from_dict(next(i for i in result.items if i["name"] == "NVIDIA HGX H100"))
    assert (h100.price_text, h100.spot_text, h100.cells["System RAM (GB)"]) == ("$49.24", "$19.71", "2,048")
    real_read = runner._read_feed
    monkeypatch.setattr(runner, "_read_feed", lambda path: real_read(path)[:-1])
    with pytest.raises(SourceError, match="coreweave: scrape of www.coreweave.com/pricing .*failed: its item feed "
                                          "holds 20 items, the crawl scraped 21"):
        page_source.scrape(ctx, coreweave.CoreWeavePricingSpider)


def _recording_spawns(monkeypatch) -> list:
    spawned: list = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        spawned.append(real_popen(*args, **kwargs))
        return spawned[-1]

    monkeypatch.setattr(subprocess, "Popen", popen)
    return spawned


def test_crawl_timeout_kills_the_child(replay, monkeypatch) -> None:
    """The page is answered after 20 s, the crawl's limit is 1 s: the error says so well before
    the answer, and the child (leader of a process group of its own) is gone with its group."""
    def stall(host, req, exchange):
        if req.target.startswith(coreweave.PRICING_PATH):
            time.sleep(20)
        return None

    server = replay("coreweave", hook=stall)
    ctx = replay_context(server, "coreweave")
    spawned = _recording_spawns(monkeypatch)
    started = time.monotonic()
    with pytest.raises(SourceError, match="coreweave: crawl of www.coreweave.com/pricing .*timed out after 1 s"):
        crawl(ctx, CW_SPIDER, coreweave.HOST, coreweave.PRICING_PATH, crawl_settings(ctx), timeout_s=1)
    assert time.monotonic() - started < 10
    (child,) = spawned
    with pytest.raises(ProcessLookupError):
        os.killpg(child.pid, 0)  # no process is left in the crawl's group


def test_a_crawl_child_that_dies_without_a_reason_is_named_by_its_last_log_line(replay) -> None:
    """A child that crashes before writing its status (here: its spider cannot be imported) prints a
    traceback; the error keeps one line of it, the exception, never the traceback itself."""
    ctx = replay_context(replay("coreweave"), "coreweave")
    with pytest.raises(SourceError) as err:
        crawl(ctx, "gpuledger.spiders.no_such_spider:Spider", coreweave.HOST, coreweave.PRICING_PATH,
              crawl_settings(ctx))
    assert str(err.value).endswith("failed: the crawler exited with code 1; its last log line: "
                                   "ModuleNotFoundError: No module named 'gpuledger.spiders.no_such_spider'")
    assert str(err.value).startswith("coreweave: scrape of www.coreweave.com/pricing (crawled at http://127.0.0.1:")


def test_crawl_child_runs_in_a_group_of_its_own_with_the_callers_environment(replay, monkeypatch) -> None:
    """The crawl is `python -m gpuledger.spiders.runner` in a process group of its own (a timeout
    kills its browser with it), with the environment of the moment it was asked for."""
    seen: dict = {}

    def look(host, req, exchange):
        seen["own group"] = os.getpgid(spawned[-1].pid) == spawned[-1].pid
        return None

    server = replay("coreweave", hook=look)
    ctx = replay_context(server, "coreweave")
    spawned = _recording_spawns(monkeypatch)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[1]))  # the child imports tests.env_spider
    for mark in ("first", "second"):
        monkeypatch.setenv("CRAWL_TEST_MARK", mark)
        result = crawl(ctx, "tests.env_spider:EnvironmentSpider", coreweave.HOST, coreweave.PRICING_PATH,
                       crawl_settings(ctx))
        assert result.items == [{"name": mark}]
    assert seen == {"own group": True}
    assert all(child.args[1:3] == ["-m", "gpuledger.spiders.runner"] for child in spawned)


def test_hyperstack_without_a_browser_finds_nothing(replay) -> None:
    """The same spider over plain HTTP (no Chromium): the served page has no price rows."""
    server = replay("hyperstack")
    ctx = replay_context(server, "hyperstack")
    served = httpx.get(server.endpoints()[hyperstack.HOST] + hyperstack.PRICING_PATH).text
    assert "Loading prices" in served and "$3.20" not in served
    with pytest.raises(SourceError, match="hyperstack: .*layout changed .*has no price rows"):
        crawl(ctx, HS_SPIDER, hyperstack.HOST, hyperstack.PRICING_PATH, crawl_settings(ctx))


def test_hyperstack_renders_the_page_in_chromium(replay) -> None:
    server = replay("hyperstack")
    ctx = replay_context(server, "hyperstack")
    started = time.monotonic()
    batch = hyperstack.fetch(ctx)
    WALL_TIMES["hyperstack"] = time.monotonic() - started
    assert batch.counts() == {"offers": 18, "egress": 1, "storage": 1, "quarantined": 0}
    assert by_key(batch, "1x NVIDIA H100 SXM").price_per_hour == 3.2
    assert by_key(batch, "1x NVIDIA L40", "spot").price_per_hour == 0.8
    seen = {req.path: req.headers.get("user-agent") for _, req in server.requests}
    assert seen["/robots.txt"] == USER_AGENT and seen["/gpu-pricing"] == USER_AGENT
    assert seen["/gpu-pricing/rates.json"] == USER_AGENT  # the page's own fetch, made by Chromium
    print(f"\nhyperstack replay crawl (Chromium): {WALL_TIMES['hyperstack']:.2f} s wall")


def test_a_rendered_page_past_the_byte_limit_fails_the_crawl_naming_the_limit(replay) -> None:
    """scrapy-playwright never reads DOWNLOAD_MAXSIZE: a 96 MiB page rendered whole (peak 1.6 GB). The page's own
    fetch of its rate card, 3,593 bytes recorded, here with 2 MiB of spaces after it, takes the page past a
    1 MiB limit: the crawl fails naming it, before the page's HTML leaves Chromium."""
    padded = (BUNDLED_RECORDINGS / "hyperstack" / "www.hyperstack.cloud" / "rates.json").read_bytes() + b" " * 2**21
    server = replay("hyperstack", hook=lambda host, req, ex: (200, {"Content-Type": "application/json"}, padded)
                    if req.path == "/gpu-pricing/rates.json" else None)
    ctx = replay_context(server, "hyperstack")
    settings = {**browser_settings(ctx, browser.find_chromium(ctx), scheme="http"), "DOWNLOAD_MAXSIZE": 2**20}
    with pytest.raises(SourceError) as err:
        crawl(ctx, HS_SPIDER, hyperstack.HOST, hyperstack.PRICING_PATH, settings)
    msg = str(err.value)
    assert msg.startswith("hyperstack: scrape of www.hyperstack.cloud/gpu-pricing") and "\n" not in msg
    received = int(re.search(r"received ([\d,]+) bytes", msg).group(1).replace(",", ""))
    assert received >= len(padded) == 3593 + 2**21
    assert msg.endswith(f"/gpu-pricing: the page and the requests its script made received {received:,} bytes, "
                        "over the limit of 1,048,576 (DOWNLOAD_MAXSIZE)")


def test_hyperstack_layout_change_fails_the_scrape(replay) -> None:
    """The script still runs, but into a table the spider does not know: rows never appear.

    The wait ends as soon as the script has replaced the served placeholder, however quickly
    the rate card arrives, so the error says the script finished rather than "timed out".
    """
    def redesign(host, req, ex):
        if req.path != "/gpu-pricing" or ex is None:
            return None
        return 200, dict(ex.headers), ex.body().replace(b'id="on-demand-gpu-pricing"', b'id="gpu-rates-v2"')

    server = replay("hyperstack", hook=redesign)
    ctx = replay_context(server, "hyperstack", settings={"hyperstack_render_timeout_s": 30})
    started = time.monotonic()
    with pytest.raises(SourceError) as err:
        hyperstack.fetch(ctx)
    msg = str(err.value)
    assert msg.startswith("hyperstack: scrape of www.hyperstack.cloud/gpu-pricing")
    assert "layout changed at " in msg
    assert ": no on-demand GPU price table (table#on-demand-gpu-pricing) on the page;" in msg
    assert "the page's script finished loading prices but the price rows" in msg
    assert time.monotonic() - started < 25  # did not sit out the 30 s render timeout


def test_hyperstack_rate_card_too_slow_is_reported_as_a_timeout(replay) -> None:
    """The rate card arrives after the render timeout: the rows "did not appear within" it."""
    def slow_rates(host, req, ex):
        if req.path == "/gpu-pricing/rates.json":
            time.sleep(3)
        return None

    server = replay("hyperstack", hook=slow_rates)
    ctx = replay_context(server, "hyperstack", settings={"hyperstack_render_timeout_s": 0.5})
    with pytest.raises(SourceError) as err:
        hyperstack.fetch(ctx)
    msg = str(err.value)
    assert "layout changed at " in msg
    assert ": the on-demand GPU price table (table#on-demand-gpu-pricing) has no price rows;" in msg
    assert "did not appear within 0.5 s of rendering" in msg


def test_a_chromium_that_hangs_at_launch_is_named_before_the_crawl_times_out(replay, tmp_path, monkeypatch) -> None:
    """A Chromium that never starts: the error says the browser launch timed out (within half the crawl's time),
    not only 'crawl timed out ... it logged nothing'; nothing it started is left running."""
    hang = tmp_path / "chromium"
    hang.write_text("#!/bin/sh\nexec sleep 300\n")
    hang.chmod(0o755)
    server = replay("hyperstack")
    ctx = replay_context(server, "hyperstack", settings={"chromium_path": str(hang), "spider_timeout_s": 16})
    spawned = _recording_spawns(monkeypatch)
    started = time.monotonic()
    with pytest.raises(SourceError) as err:
        hyperstack.fetch(ctx)
    # 16 s, not less: a loaded machine takes seconds to start the crawl's child before the launch's 8 s begin
    assert time.monotonic() - started < 16
    msg = str(err.value)
    assert msg.startswith("hyperstack: scrape of www.hyperstack.cloud/gpu-pricing") and "\n" not in msg
    assert msg.endswith("/gpu-pricing: TimeoutError: BrowserType.launch: Timeout 8000ms exceeded.")
    (child,) = spawned
    with pytest.raises(ProcessLookupError):
        os.killpg(child.pid, 0)  # the crawl's group is gone, the hanging "browser" with it


def test_a_chromium_that_cannot_start_says_why_in_one_line(replay, tmp_path) -> None:
    """Chromium exits at once (a missing library): the line keeps what it printed and its exit code, which
    Playwright puts in the lines after 'Target page, context or browser has been closed'."""
    broken = tmp_path / "chromium"
    broken.write_text("#!/bin/sh\necho 'chromium: error while loading shared libraries: libnss3.so: cannot open "
                      "shared object file: No such file or directory' >&2\nexit 127\n")
    broken.chmod(0o755)
    ctx = replay_context(replay("hyperstack"), "hyperstack", settings={"chromium_path": str(broken)})
    with pytest.raises(SourceError) as err:
        hyperstack.fetch(ctx)
    msg = str(err.value)
    assert msg.startswith("hyperstack: scrape of www.hyperstack.cloud/gpu-pricing") and "\n" not in msg
    assert msg.endswith("/gpu-pricing: TargetClosedError: BrowserType.launch: Target page, context or browser "
                        "has been closed; Chromium exited (exitCode=127, signal=null): chromium: error while loading "
                        "shared libraries: libnss3.so: cannot open shared object file: No such file or directory")


def test_crawl_child_gets_a_node_compile_cache(monkeypatch, tmp_path) -> None:
    from gpuledger.spiders.runner import child_env

    monkeypatch.delenv("NODE_COMPILE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "someproject.settings")
    env = child_env()
    assert env["NODE_COMPILE_CACHE"] == str(tmp_path / "gpuledger" / "node-compile-cache")
    assert "SCRAPY_SETTINGS_MODULE" not in env and env["PYTHONUNBUFFERED"] == "1"
    monkeypatch.setenv("NODE_COMPILE_CACHE", "/elsewhere")
    assert child_env()["NODE_COMPILE_CACHE"] == "/elsewhere"  # the user's own choice is kept


def test_crawl_child_driver_gets_a_small_young_generation_beside_the_users_node_options(monkeypatch) -> None:
    from gpuledger.spiders.runner import child_env

    monkeypatch.delenv("NODE_OPTIONS", raising=False)
    assert child_env()["NODE_OPTIONS"] == "--max-semi-space-size=1"
    monkeypatch.setenv("NODE_OPTIONS", "--max-old-space-size=512")
    assert child_env()["NODE_OPTIONS"] == "--max-old-space-size=512 --max-semi-space-size=1"


CHILD_LOADS_COMPONENTS = """
import sys
from scrapy.settings import Settings
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object
from gpuledger.adapters.base import SourceContext
from gpuledger.spiders.settings import crawl_settings

settings = Settings(crawl_settings(SourceContext(provider="crusoe", mode="replay")))
for name in ("EXTENSIONS", "DOWNLOADER_MIDDLEWARES"):
    for path in build_component_list(settings.get_component_priority_dict_with_base(name)):
        load_object(path)  # what scrapy does with every listed component, enabled or not
print(sorted(m for m in ("aiohttp", "tldextract") if m in sys.modules))
"""


def test_crawl_components_leave_out_the_imports_of_disabled_ones() -> None:
    """The remote control (aiohttp) and cookies (tldextract) are off in every crawl; their modules
    are not even imported by the crawl child, whose start-up CPU the other providers need."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", CHILD_LOADS_COMPONENTS], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
    enabled = crawl_settings(SourceContext(provider="crusoe", mode="replay"))
    assert "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware" in enabled["DOWNLOADER_MIDDLEWARES_BASE"]
    assert "scrapy.extensions.feedexport.FeedExporter" in enabled["EXTENSIONS_BASE"]
