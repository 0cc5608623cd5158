"""Crusoe Cloud: the pricing-page spider, on the saved page and crawling the replay server.

Prices checked by hand against https://www.crusoe.ai/cloud/pricing as captured on 2026-08-22
(getcomputable/gpu-index fixture) and transcribed on 2026-09-20 (api-evangelist/crusoe
plans/crusoe-plans-pricing.yml); provenance in adapters/recordings/crusoe/README.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scrapy.http import HtmlResponse

from gpuledger.adapters.base import USER_AGENT, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from gpuledger.spiders import crusoe
from gpuledger.spiders.page_source import LayoutChanged
from tests.conftest import replay_context

PAGE = BUNDLED_RECORDINGS / "crusoe" / "www.crusoe.ai" / "cloud-pricing.html"
URL = "https://www.crusoe.ai/cloud/pricing"


def response(body: str | bytes) -> HtmlResponse:
    return HtmlResponse(url=URL, body=body.encode() if isinstance(body, str) else body, encoding="utf-8")


def page_text() -> str:
    return PAGE.read_text()


def offer(batch, instance_type: str, option: str = "on_demand"):
    [o] = [o for o in batch.offers if o.instance_type == instance_type and o.purchase_option == option]
    return o


def test_rows_from_the_saved_page() -> None:
    rows = crusoe.parse_pricing_page(response(PAGE.read_bytes()))
    gpu = [r for r in rows if r.kind == "gpu"]
    assert [(r.name, r.cells.get("tags")) for r in gpu] == [
        ("NVIDIA GB200", "186GB NVL72"), ("NVIDIA B200", "180GB HGX"), ("NVIDIA H200", "141GB HGX"),
        ("NVIDIA H100", "80GB HGX"), ("NVIDIA A100", "80GB SXM"), ("NVIDIA A100", "80GB PCIe"),
        ("NVIDIA L40S", "48GB"), ("AMD MI355X", "288GB"), ("AMD MI300X", "192GB")]  # the empty chip is no tag
    h100 = gpu[3]
    assert (h100.price_text, h100.spot_text, h100.section) == ("$3.90/GPU-hr", "Contact sales", "GPU instances pricing")
    assert h100.product_id == "nvidia-h100-80gb-hgx"
    storage = {r.name: r.price_text for r in rows if r.kind == "storage"}
    assert storage == {"Persistent disks": "$0.08 per GiB/month", "Shared disks": "$0.07 per GiB/month",
                       "Container registry usage": "$0.10 per GiB/month", "Object Storage": "$0.06 per GiB/month"}
    # the CPU, Kubernetes and inference tables share the row markup and are not read
    assert not any(r.name in ("General-purpose", "Cluster pricing", "DeepSeek", "GPT-OSS") for r in rows)


def test_prices_checked_by_hand() -> None:
    """On-demand per GPU-hour as the page printed them (see the module docstring for the pages)."""
    batch = crusoe.build_batch(crusoe.parse_pricing_page(response(PAGE.read_bytes())))
    assert offer(batch, "1x NVIDIA H100 80GB HGX").price_per_hour == 3.90
    assert offer(batch, "1x NVIDIA H200 141GB HGX").price_per_hour == 4.29
    assert offer(batch, "1x NVIDIA A100 80GB SXM").price_per_hour == 2.30
    assert offer(batch, "1x NVIDIA A100 80GB PCIe").price_per_hour == 2.00
    assert offer(batch, "1x NVIDIA L40S 48GB").price_per_hour == 1.50
    assert offer(batch, "1x AMD MI300X 192GB").price_per_hour == 3.45
    storage = {s.storage_class: s.usd_per_gb_month for s in batch.storage}
    assert storage["persistent-disks"] == round(0.08 / 1.073741824, 6)  # $0.08 per GiB, per decimal GB


def test_gpu_mapping_and_offer_fields() -> None:
    batch = crusoe.build_batch(crusoe.parse_pricing_page(response(PAGE.read_bytes())))
    assert batch.counts() == {"offers": 6, "egress": 0, "storage": 4, "quarantined": 0}
    models = {o.instance_type: (o.gpu_model, o.gpu_variant_exact) for o in batch.offers}
    assert models == {
        "1x NVIDIA H200 141GB HGX": ("H200-SXM", True), "1x NVIDIA H100 80GB HGX": ("H100-SXM", True),
        "1x NVIDIA A100 80GB SXM": ("A100-SXM4-80", True), "1x NVIDIA A100 80GB PCIe": ("A100-PCIe-80", True),
        "1x NVIDIA L40S 48GB": ("L40S", True), "1x AMD MI300X 192GB": ("MI300X", True)}
    h100 = offer(batch, "1x NVIDIA H100 80GB HGX")
    assert (h100.region, h100.zone, h100.gpu_count, h100.gpu_memory_gb, h100.gpu_vendor) == (
        "global", "", 1, 80, "NVIDIA")
    assert (h100.interconnect, h100.billing_granularity_s, h100.source_currency) == ("NVSwitch", 3600, "USD")
    assert offer(batch, "1x NVIDIA A100 80GB PCIe").interconnect is None
    assert offer(batch, "1x AMD MI300X 192GB").gpu_vendor == "AMD"
    assert json.loads(h100.provider_data) == {
        "page_section": "GPU instances pricing", "price_basis": "per GPU per hour", "price_text": "$3.90/GPU-hr",
        "tags": "80GB HGX"}


def test_contact_sales_is_noted_never_priced() -> None:
    batch = crusoe.build_batch(crusoe.parse_pricing_page(response(PAGE.read_bytes())))
    assert not [o for o in batch.offers if any(m in o.instance_type for m in ("GB200", "B200", "MI355X"))]
    assert batch.notes[0] == ("skipped NVIDIA GB200 186GB NVL72: no public price "
                              "(on-demand 'Contact sales', spot 'Contact sales')")
    assert sum("spot: no public price (Contact sales)" in n for n in batch.notes) == 6  # every priced row's spot
    assert len(batch.notes) == 9 and batch.quarantined == []


def test_a_spot_price_makes_a_spot_offer() -> None:
    """The live page prints "Contact sales" in every spot cell today; a priced cell is read as spot."""
    text = page_text()
    h100 = text.index("NVIDIA H100</h4>")
    cut = text.index("Contact sales</a></p>", h100)
    start = text.rindex("<p>", 0, cut)
    edited = text[:start] + "<p>$1.60/GPU-hr</p>" + text[cut + len("Contact sales</a></p>"):]
    batch = crusoe.build_batch(crusoe.parse_pricing_page(response(edited)))
    spot = offer(batch, "1x NVIDIA H100 80GB HGX", "spot")
    assert (spot.price_per_hour, spot.spot_savings_pct, spot.gpu_model) == (1.60, 59.0, "H100-SXM")


def test_bad_rows_are_quarantined_not_dropped() -> None:
    text = (page_text().replace("$4.29/GPU-hr", "€4.29/GPU-hr").replace("$3.90/GPU-hr", "TBD")
            .replace("$2.30/GPU-hr", "$2.30/month")
            .replace("AMD MI300X</h4>", "AMD MI999Z</h4>"))
    batch = crusoe.build_batch(crusoe.parse_pricing_page(response(text)))
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert "EUR, not USD" in reasons["global/nvidia-h200-141gb-hgx"]
    assert reasons["global/nvidia-h100-80gb-hgx"] == "price: no price in 'TBD'"
    assert reasons["global/nvidia-a100-80gb-sxm"] == "price: price '$2.30/month' is not per GPU-hour"
    assert "unknown GPU name 'AMD MI999Z'" in reasons["global/amd-mi999z-192gb"]
    assert len(batch.offers) == 2  # A100 PCIe and L40S: nothing else lost


def batch_of_page():
    return crusoe.build_batch(crusoe.parse_pricing_page(response(page_text())))


def test_a_memory_tag_with_a_space_still_names_the_gpu() -> None:
    """'80 GB' instead of '80GB' made every GPU unknown ('NVIDIA H100 80 GB HGX') and failed the provider; the
    offers keep their keys (instance types), so their price history goes on."""
    text = re.sub(r'<div class="pricing-tag is-dark">([0-9]+)GB</div>', r'<div class="pricing-tag is-dark">\1 GB</div>',
                  page_text())
    batch = crusoe.build_batch(crusoe.parse_pricing_page(response(text)))
    assert batch.quarantined == [] and len(batch.offers) == 6
    assert sorted(o.instance_type for o in batch.offers) == sorted(o.instance_type for o in batch_of_page().offers)
    h100 = offer(batch, "1x NVIDIA H100 80GB HGX")
    assert (h100.gpu_model, h100.gpu_memory_gb, h100.price_per_hour, h100.interconnect) == (
        "H100-SXM", 80, 3.9, "NVSwitch")


def test_a_row_with_a_missing_price_cell_is_quarantined() -> None:
    text = page_text()
    l40s = text.index("NVIDIA L40S</h4>")
    cell = text.index('<div class="pricing-rich w-richtext"><p>$1.50/GPU-hr</p></div>', l40s)
    edited = text[:cell] + text[cell + len('<div class="pricing-rich w-richtext"><p>$1.50/GPU-hr</p></div>'):]
    batch = crusoe.build_batch(crusoe.parse_pricing_page(response(edited)))
    [q] = batch.quarantined
    assert (q.source_ref, q.reason) == (
        "global/nvidia-l40s-48gb", "layout: 1 price cells under the columns ['On-demand', 'Current spot']")


def test_hidden_rows_are_not_read() -> None:
    hidden = page_text().replace('<div role="listitem" class="prixing-item w-dyn-item"><div class="pricing_gpu-item">',
                                 '<div role="listitem" class="prixing-item w-dyn-item w-condition-invisible">'
                                 '<div class="pricing_gpu-item">', 1)
    names = [r.name for r in crusoe.parse_pricing_page(response(hidden)) if r.kind == "gpu"]
    assert names[0] == "NVIDIA B200" and len(names) == 8  # the GB200 row, hidden by Webflow, is gone


def test_layout_changes_raise() -> None:
    with pytest.raises(LayoutChanged, match="no GPU price table"):
        crusoe.parse_pricing_page(response(page_text().replace(">GPU model<", ">Accelerator<")))
    with pytest.raises(LayoutChanged, match="no 'On-demand' column"):
        crusoe.parse_pricing_page(response(page_text().replace(">On-demand</div><div", ">Hourly</div><div", 1)))
    with pytest.raises(LayoutChanged, match="has no rows"):
        crusoe.parse_pricing_page(response(page_text().replace("pricing_gpu-item", "pricing-card")))


def test_declaration() -> None:
    spec = crusoe.PROVIDER
    assert (spec.name, spec.source_kind, spec.needs_browser, spec.secret_env_vars) == ("crusoe", "page", False, ())
    assert spec.facts.storage_persists_when_stopped is True and "InfiniBand" in spec.facts.multinode_interconnect
    assert crusoe.CrusoePricingSpider.page_url() == URL


# -- the real spider, crawling the replay server in a child process ---------------------------------

def test_crawl_against_the_replay_server(replay) -> None:
    server = replay("crusoe")
    batch = crusoe.fetch(replay_context(server, "crusoe"))
    assert batch.counts() == {"offers": 6, "egress": 0, "storage": 4, "quarantined": 0}
    assert offer(batch, "1x NVIDIA H100 80GB HGX").price_per_hour == 3.90
    assert [(req.path, req.headers.get("user-agent")) for _, req in server.requests] == [
        ("/robots.txt", USER_AGENT), ("/cloud/pricing", USER_AGENT)]  # robots.txt first, plain HTTP, our UA


def test_crawl_of_a_redesigned_page_fails(replay) -> None:
    def redesign(host, req, ex):
        if req.path != "/cloud/pricing" or ex is None:
            return None
        return 200, dict(ex.headers), ex.body().replace(b"pricing-gap", b"pricing-grid")

    with pytest.raises(SourceError) as err:
        crusoe.fetch(replay_context(replay("crusoe", hook=redesign), "crusoe"))
    assert str(err.value).startswith("crusoe: scrape of www.crusoe.ai/cloud/pricing")
    assert "layout changed" in str(err.value) and "no GPU price table" in str(err.value)


def test_a_page_with_no_public_gpu_price_fails_saying_why(replay) -> None:
    """Every GPU row says 'Contact sales': the failure counts the skipped rows and shows why, instead of
    'gave 9 GPU rows but no valid priced offer (quarantined: none)'."""
    def unpriced(host, req, ex):
        if req.path != "/cloud/pricing" or ex is None:
            return None
        return 200, dict(ex.headers), re.sub(rb"<p>\$[0-9.]+/GPU-hr</p>", b"<p>Contact sales</p>", ex.body())

    with pytest.raises(SourceError) as err:
        crusoe.fetch(replay_context(replay("crusoe", hook=unpriced), "crusoe"))
    assert str(err.value) == (
        "crusoe: https://www.crusoe.ai/cloud/pricing gave 9 GPU rows but no valid priced offer (quarantined: none; "
        "9 skipped, e.g. \"skipped NVIDIA GB200 186GB NVL72: no public price (on-demand 'Contact sales', spot "
        "'Contact sales')\")")


def test_recording_is_small() -> None:
    assert PAGE.stat().st_size < 64_000 and Path(PAGE).read_text().rstrip().endswith("</html>")
