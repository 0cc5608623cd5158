"""Paperspace: the pricing-page spider, on the saved page and crawling the replay server.

Prices checked by hand against https://www.paperspace.com/pricing as transcribed on 2026-09-20
(api-evangelist/paperspace plans/paperspace-plans-pricing.yml); the page's markup is largely
reconstructed and other sources disagree on some prices: adapters/recordings/paperspace/README.md.
"""

from __future__ import annotations

import json

import pytest
from scrapy.http import HtmlResponse

from gpuledger.adapters.base import USER_AGENT
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from gpuledger.spiders import paperspace
from gpuledger.spiders.page_source import LayoutChanged
from tests.conftest import replay_context

PAGE = BUNDLED_RECORDINGS / "paperspace" / "www.paperspace.com" / "pricing.html"
URL = "https://www.paperspace.com/pricing"


def response(body: str | bytes) -> HtmlResponse:
    return HtmlResponse(url=URL, body=body.encode() if isinstance(body, str) else body, encoding="utf-8")


def batch_of(text: str | bytes | None = None):
    page = text if text is not None else PAGE.read_bytes()
    return paperspace.build_batch(paperspace.parse_pricing_page(response(page)))


def offer(batch, instance_type: str):
    [o] = [o for o in batch.offers if o.instance_type == instance_type]
    return o


def test_rows_from_the_saved_page() -> None:
    rows = paperspace.parse_pricing_page(response(PAGE.read_bytes()))
    assert len(rows) == 15 and rows[0].name == "H100" and rows[-1].name == "C10"
    assert rows[0].price_text == "$ 3.09 / hour"
    a100 = next(r for r in rows if r.name == "A100-80G")
    assert a100.cells == {"price": "$ 1.15** / hour", "hidden price": "$ 1994 / month"}  # the hidden wrap kept apart


def test_prices_checked_by_hand() -> None:
    batch = batch_of()
    assert offer(batch, "H100").price_per_hour == 3.09
    assert offer(batch, "A6000").price_per_hour == 1.89
    assert offer(batch, "A4000").price_per_hour == 0.76
    assert offer(batch, "V100").price_per_hour == 2.30
    assert offer(batch, "P6000").price_per_hour == 1.10
    assert offer(batch, "RTX4000").price_per_hour == 0.56


def test_gpu_mapping_and_fields() -> None:
    batch = batch_of()
    assert batch.counts() == {"offers": 11, "egress": 0, "storage": 0, "quarantined": 0}
    assert {o.instance_type: (o.gpu_model, o.gpu_variant_exact) for o in batch.offers} == {
        "H100": ("H100-SXM", False), "A6000": ("RTX-A6000", True), "A5000": ("RTX-A5000", True),
        "A4000": ("RTX-A4000", True), "V100": ("V100-SXM2-16", False),  # form factor not on the page: not exact
        "P6000": ("Quadro-P6000", True), "P5000": ("Quadro-P5000", True), "P4000": ("Quadro-P4000", True),
        "RTX5000": ("Quadro-RTX-5000", True), "RTX4000": ("Quadro-RTX-4000", True), "M4000": ("Quadro-M4000", True)}
    h100 = offer(batch, "H100")
    assert (h100.region, h100.gpu_count, h100.purchase_option, h100.billing_granularity_s) == (
        "global", 1, "on_demand", 3600)
    assert json.loads(h100.provider_data)["price_text"] == "$ 3.09 / hour"


def test_footnoted_monthly_and_cpu_prices_are_noted_not_loaded() -> None:
    batch = batch_of()
    assert not [o for o in batch.offers if o.instance_type in ("HGX H100", "A100-80G", "C1", "C10")]
    assert batch.notes[0] == "2 CPU-only machines skipped (C1, C10)"
    assert ("skipped 'HGX H100': price '$ 2.24* / hour' carries the footnote '*' (3-year commitment), "
            "not an on-demand list price") in batch.notes
    assert any("'A100-80G': price '$ 1.15** / hour' carries the footnote '**'" in n for n in batch.notes)
    assert sum("monthly subscription price" in n for n in batch.notes) == 2
    assert len(batch.notes) == 5


def test_a_footnote_marker_in_its_own_element_still_keeps_the_price_out() -> None:
    """'1.15<sup>**</sup>' reads as '$ 1.15 ** / hour': the promo price was loaded as A100-80G's list price."""
    page = PAGE.read_text().replace("1.15**</h1>", "1.15<sup>**</sup></h1>").replace("2.24*</h1>", "2.24 *</h1>")
    batch = batch_of(page)
    assert not [o for o in batch.offers if o.instance_type in ("HGX H100", "A100-80G")]
    assert ("skipped 'A100-80G': price '$ 1.15 ** / hour' carries the footnote '**' (a special term), "
            "not an on-demand list price") in batch.notes
    assert any("'HGX H100': price '$ 2.24 * / hour' carries the footnote '*' (3-year commitment)" in n
               for n in batch.notes)
    assert len(batch.offers) == 11


def test_unknown_cards_and_bad_prices_are_quarantined() -> None:
    unknown = PAGE.read_text().replace('instance-names">M4000<', 'instance-names">X9000<')
    reasons = {q.source_ref: q.reason for q in batch_of(unknown).quarantined}
    assert sorted(reasons) == ["global/x9000"]
    assert reasons["global/x9000"].startswith("gpu: unknown GPU name 'X9000' from paperspace")
    text = PAGE.read_text().replace('instance-price-2">3.09<', 'instance-price-2">TBD<', 1) \
        .replace('<div class="instance-per">/ hour</div>', '<div class="instance-per">per month</div>', 4)
    batch = batch_of(text)
    bad = {q.source_ref: q.reason for q in batch.quarantined}
    assert bad["global/h100"] == "price: no price in '$ TBD per month'"
    assert bad["global/a6000"] == "price: price '$ 1.89 per month' is not per hour"
    assert [o.instance_type for o in batch.offers] == ["A5000", "A4000", "V100", "P6000", "RTX5000", "P5000", "RTX4000",
                                                       "P4000", "M4000"]  # nothing else lost


def test_layout_changes_raise() -> None:
    with pytest.raises(LayoutChanged, match="has no rows"):
        paperspace.parse_pricing_page(response(PAGE.read_text().replace("instance-type-holder-flex", "card")))
    with pytest.raises(LayoutChanged, match="no names"):
        paperspace.parse_pricing_page(response(PAGE.read_text().replace("instance-names", "machine-title")))


def test_declaration() -> None:
    spec = paperspace.PROVIDER
    assert (spec.name, spec.source_kind, spec.needs_browser, spec.secret_env_vars) == ("paperspace", "page", False, ())
    assert spec.facts.storage_persists_when_stopped is True and spec.facts.interruptible_offer is None


def test_crawl_against_the_replay_server(replay) -> None:
    server = replay("paperspace")
    batch = paperspace.fetch(replay_context(server, "paperspace"))
    assert batch.counts() == {"offers": 11, "egress": 0, "storage": 0, "quarantined": 0}
    assert offer(batch, "H100").price_per_hour == 3.09
    assert [(req.path, req.headers.get("user-agent")) for _, req in server.requests] == [
        ("/robots.txt", USER_AGENT), ("/pricing", USER_AGENT)]
