"""Nebius AI Cloud: the price-page spider, on the saved page and crawling the replay server.

Prices checked by hand against https://nebius.com/prices as captured on 2026-08-22
(getcomputable/gpu-index fixture; HGX H100 $3.85 again on 2026-09-25, tgarg01/silybench-data);
provenance in adapters/recordings/nebius/README.md.
"""

from __future__ import annotations

import json
from datetime import date

import pytest
from scrapy.http import HtmlResponse

from gpuledger.adapters.base import USER_AGENT, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from gpuledger.spiders import nebius
from gpuledger.spiders.page_source import LayoutChanged
from tests.conftest import replay_context

PAGE = BUNDLED_RECORDINGS / "nebius" / "nebius.com" / "prices.html"
URL = "https://nebius.com/prices"
CAPTURED = date(2026, 8, 22)
OD = "On-demand, GPU-hour"
PRE = "Preemptible, GPU-hour"


def response(body: str | bytes) -> HtmlResponse:
    return HtmlResponse(url=URL, body=body.encode() if isinstance(body, str) else body, encoding="utf-8")


def batch_of(text: str | bytes | None = None, today: date = CAPTURED):
    return nebius.build_batch(nebius.parse_pricing_page(response(text if text is not None else PAGE.read_bytes())),
                              today)


def offer(batch, instance_type: str, option: str = "on_demand"):
    [o] = [o for o in batch.offers if o.instance_type == instance_type and o.purchase_option == option]
    return o


def test_rows_from_the_saved_page() -> None:
    rows = nebius.parse_pricing_page(response(PAGE.read_bytes()))
    gpu = [r for r in rows if r.kind == "gpu"]
    assert [r.name for r in gpu] == [
        "NVIDIA GB300 NVL72", "NVIDIA HGX B300", "NVIDIA GB200 NVL72", "NVIDIA HGX B200", "NVIDIA HGX H200",
        "NVIDIA HGX H100", "NVIDIA RTX PRO 6000", "NVIDIA L40S with Intel CPU", "NVIDIA L40S with AMD CPU"]
    h100 = gpu[5]
    assert h100.section == "NVIDIA GPU Instances"
    assert h100.cells == {"Item": "NVIDIA HGX H100", "vCPUs": "16", "RAM, GB": "200", PRE: "$2.15", OD: "$3.85"}
    assert (gpu[0].cells[PRE], gpu[0].cells[OD]) == ("––", "Contact us")
    storage = {r.name: r.price_text for r in rows if r.kind == "storage"}
    assert len(storage) == 10 and storage["Block volumes with 3x mirroring"] == "$0.1180 per GiB/month"
    network = {r.name: r.price_text for r in rows if r.kind == "network"}
    assert network["Networking: Egress/Ingress traffic"] == "Free"
    assert network["Object storage — Intelligent (egress traffic)"] == "Free"  # footnote marker left out
    assert not any(r.name in ("AMD EPYC Genoa", "Networking: Public IP address") for r in rows)


def test_prices_checked_by_hand() -> None:
    """Per GPU-hour as the page printed them on 2026-08-22."""
    batch = batch_of()
    assert offer(batch, "1x NVIDIA HGX H100").price_per_hour == 3.85
    assert offer(batch, "1x NVIDIA HGX H100", "spot").price_per_hour == 2.15
    assert offer(batch, "1x NVIDIA HGX H200").price_per_hour == 4.50
    assert offer(batch, "1x NVIDIA HGX B200").price_per_hour == 7.15
    assert offer(batch, "1x NVIDIA HGX B300", "spot").price_per_hour == 4.30
    assert offer(batch, "1x NVIDIA L40S with AMD CPU").price_per_hour == 1.55
    storage = {s.storage_class: s.usd_per_gb_month for s in batch.storage}
    assert storage["object-storage-standard-volume"] == round(0.0147 / 1.073741824, 6)  # per GiB -> per GB


def test_gpu_mapping_and_offer_fields() -> None:
    batch = batch_of()
    assert batch.counts() == {"offers": 14, "egress": 1, "storage": 10, "quarantined": 0}
    models = {o.instance_type: (o.gpu_model, o.gpu_variant_exact) for o in batch.offers}
    assert models == {
        "1x NVIDIA HGX B300": ("B300", True), "1x NVIDIA HGX B200": ("B200", True),
        "1x NVIDIA HGX H200": ("H200-SXM", True), "1x NVIDIA HGX H100": ("H100-SXM", True),
        "1x NVIDIA RTX PRO 6000": ("RTX-PRO-6000-S", False),  # the page does not say which edition
        "1x NVIDIA L40S with Intel CPU": ("L40S", True), "1x NVIDIA L40S with AMD CPU": ("L40S", True)}
    h100 = offer(batch, "1x NVIDIA HGX H100")
    assert (h100.region, h100.gpu_count, h100.vcpus, h100.ram_gb, h100.interconnect) == (
        "global", 1, 16, 200, "NVSwitch")
    # The page prints no memory: the HGX H100's 80 GB is the GPU reference's, marked as such.
    assert (h100.billing_granularity_s, h100.gpu_memory_gb, h100.gpu_memory_from_canon, h100.gpu_memory_gb_nominal,
            h100.total_gpu_memory_gb) == (1, 80, True, 80, 80)
    assert {(o.gpu_model, o.gpu_memory_gb) for o in batch.offers if o.gpu_memory_from_canon} == {
        ("B300", 288), ("B200", 180), ("H200-SXM", 141), ("H100-SXM", 80), ("RTX-PRO-6000-S", 96), ("L40S", 48)}
    assert all(o.gpu_memory_from_canon for o in batch.offers)
    spot = offer(batch, "1x NVIDIA HGX H100", "spot")
    assert spot.spot_savings_pct == 44.2  # 1 - 2.15 / 3.85
    data = json.loads(h100.provider_data)
    assert (data["price_column"], data["price_is_floor"], data["price_text"]) == (OD, False, "$3.85")


def test_from_prices_are_floor_prices_with_no_invented_shape() -> None:
    l40s = offer(batch_of(), "1x NVIDIA L40S with Intel CPU")
    assert (l40s.price_per_hour, l40s.vcpus, l40s.ram_gb) == (1.82, None, None)  # "16-192" vCPUs: a range
    data = json.loads(l40s.provider_data)
    assert (data["price_is_floor"], data["price_text"], data["vcpus_per_gpu"]) == (True, "from $1.82", "16-192")


def test_unpriced_rows_and_service_egress_are_noted() -> None:
    batch = batch_of()
    assert not [o for o in batch.offers if "NVL72" in o.instance_type]
    assert "skipped 'NVIDIA GB300 NVL72' on_demand: no public price (Contact us)" in batch.notes
    assert "skipped 'NVIDIA GB200 NVL72' spot: no public price (––)" in batch.notes
    assert sum("object-storage download traffic" in n for n in batch.notes) == 3
    assert len(batch.notes) == 7
    [egress] = batch.egress
    assert (egress.region, egress.usd_per_gb, egress.destination) == ("global", 0.0, "internet")


def test_bad_rows_are_quarantined_not_dropped() -> None:
    text = (PAGE.read_text().replace("<p>$7.85</p>", "<p>€7.85</p>").replace("<p>$4.50</p>", "<p>TBD</p>")
            .replace("<p>$3.85</p>", "<p>$3.85/month</p>").replace("NVIDIA RTX PRO 6000", "NVIDIA RTX PRO 9900"))
    batch = batch_of(text)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert "EUR, not USD" in reasons["global/nvidia-hgx-b300/on_demand"]
    assert reasons["global/nvidia-hgx-h200/on_demand"] == "price: no price in 'TBD'"
    assert reasons["global/nvidia-hgx-h100/on_demand"] == "price: price '$3.85/month' is not per GPU-hour"
    assert "unknown GPU name 'NVIDIA RTX PRO 9900'" in reasons["global/nvidia-rtx-pro-9900"]
    # the preemptible prices of the rows whose on-demand cell is bad are still loaded
    assert offer(batch, "1x NVIDIA HGX H200", "spot").price_per_hour == 2.45
    assert offer(batch, "1x NVIDIA HGX H200", "spot").spot_savings_pct is None
    assert len(batch.offers) == 3 + 2 + 4  # B300/H200/H100 spot; B200 both; both L40S both; RTX gone


def test_a_row_with_a_missing_cell_is_quarantined() -> None:
    text = PAGE.read_text()
    row = text.index("NVIDIA HGX B200")
    cell = text.index("<p>$3.95</p></span></div>", row)
    start = text.rindex('<div class="pc-highlight-table-block__cell"', 0, cell)
    edited = text[:start] + text[cell + len("<p>$3.95</p></span></div>"):]
    [q] = batch_of(edited).quarantined
    assert (q.source_ref, q.reason) == ("global/nvidia-hgx-b200", "layout: 4 cells under 5 column labels")


def test_announced_price_column_switches_on_its_day() -> None:
    text = PAGE.read_text()
    head_end = text.index("On-demand, GPU-hour</p></span></div>") + len("On-demand, GPU-hour</p></span></div>")
    new_cell = ('<div class="pc-highlight-table-block__cell"><span><p>On-demand, GPU-hour (Effective October 1, 2026)'
                '</p></span></div>')
    text = text[:head_end] + new_cell + text[head_end:]
    h100_price = text.index("<p>$3.85</p></span></div>") + len("<p>$3.85</p></span></div>")
    text = text[:h100_price] + '<div class="pc-highlight-table-block__cell"><span><p>$3.50</p></span></div>' + \
        text[h100_price:]
    before = batch_of(text, date(2026, 9, 30))
    h100 = offer(before, "1x NVIDIA HGX H100")
    assert h100.price_per_hour == 3.85
    assert "price column 'On-demand, GPU-hour (Effective October 1, 2026)' is not in force yet on 2026-09-30: " \
           "not loaded" in before.notes
    after = offer(batch_of(text, date(2026, 10, 1)), "1x NVIDIA HGX H100")
    assert after.price_per_hour == 3.50
    assert json.loads(after.provider_data)["price_column"] == "On-demand, GPU-hour (Effective October 1, 2026)"


@pytest.mark.parametrize("written", ["1 October 2026", "Oct. 1, 2026", "2026-10-01", "October 1st, 2026"])
def test_an_announced_price_in_another_date_format_is_not_loaded_early(written: str) -> None:
    """A date the column regex did not know made the announced column count as in force already."""
    label = f"On-demand, GPU-hour (Effective {written})"
    before, later = nebius.price_columns(["On-demand, GPU-hour", label], "on-demand", date(2026, 9, 30))
    assert (before, later) == ("On-demand, GPU-hour", [label])
    assert nebius.price_columns(["On-demand, GPU-hour", label], "on-demand", date(2026, 10, 1))[0] == label
    with pytest.raises(LayoutChanged, match="unreadable effective date"):
        nebius.price_columns(["On-demand, GPU-hour", "On-demand, GPU-hour (effective soon)"], "on-demand", CAPTURED)


def test_two_price_columns_in_force_for_one_option_are_a_layout_change() -> None:
    """A commitment column added beside 'On-demand, GPU-hour' was read as the on-demand price (the later one won)."""
    labels = ["On-demand, GPU-hour", "On-demand with a 1-year commitment, GPU-hour"]
    with pytest.raises(LayoutChanged, match="two 'on-demand' GPU-hour columns in force"):
        nebius.price_columns(labels, "on-demand", CAPTURED)


def test_layout_changes_raise() -> None:
    with pytest.raises(LayoutChanged, match="no GPU price table"):
        nebius.parse_pricing_page(response(PAGE.read_text().replace("GPU-hour", "GPU-h")))
    with pytest.raises(LayoutChanged, match="has no on-demand GPU-hour column"):
        nebius.parse_pricing_page(response(PAGE.read_text().replace("On-demand, GPU-hour", "Standard, GPU-hour")))
    with pytest.raises(LayoutChanged, match="no GPU price table"):
        nebius.parse_pricing_page(response(PAGE.read_text().replace("pc-highlight-table-block", "pc-table-v3")))


def test_declaration() -> None:
    spec = nebius.PROVIDER
    assert (spec.name, spec.source_kind, spec.needs_browser, spec.secret_env_vars) == ("nebius", "page", False, ())
    assert spec.facts.billing_granularity_s == 1 and "InfiniBand" in spec.facts.multinode_interconnect
    assert nebius.NebiusPricingSpider.page_url() == URL


# -- the real spider, crawling the replay server in a child process ---------------------------------

def test_crawl_against_the_replay_server(replay) -> None:
    server = replay("nebius")
    batch = nebius.fetch(replay_context(server, "nebius"))
    assert batch.counts() == {"offers": 14, "egress": 1, "storage": 10, "quarantined": 0}
    assert offer(batch, "1x NVIDIA HGX H100").price_per_hour == 3.85
    assert [(req.path, req.headers.get("user-agent")) for _, req in server.requests] == [
        ("/robots.txt", USER_AGENT), ("/prices", USER_AGENT)]  # robots.txt first, plain HTTP, our UA


def test_crawl_of_a_cut_page_fails(replay) -> None:
    def cut(host, req, ex):
        if req.path != "/prices" or ex is None:
            return None
        body = ex.body()
        return 200, {"Content-Type": "text/html; charset=utf-8"}, body[: len(body) // 2]

    with pytest.raises(SourceError) as err:
        nebius.fetch(replay_context(replay("nebius", hook=cut), "nebius"))
    assert str(err.value).startswith("nebius: scrape of nebius.com/prices")
    assert "truncated answer" in str(err.value)


def test_recording_is_small() -> None:
    assert PAGE.stat().st_size < 64_000 and PAGE.read_text().rstrip().endswith("</html>")
