"""The adapter kit: offers derived from the GPU canon and the provider's facts, one paging helper,
enrichments whose failure costs only themselves."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from gpuledger.adapters import lambdalabs
from gpuledger.adapters.base import MissingCredentialsError, SourceContext, SourceError, cursor, next_link, page_number
from gpuledger.warehouse.records import Batch
from tests.builders import egress, offer


def test_an_offer_takes_memory_vendor_and_billing_from_the_canon_and_the_facts() -> None:
    batch = lambdalabs.PROVIDER.batch()
    assert batch.offer("x", {}, gpu="H100 SXM5", gpu_memory_gb=80.0, gpu_count=8, region="us-east-1",
                       instance_type="gpu_8x_h100_sxm5", purchase_option="on_demand", price_per_hour=23.92)
    [offer] = batch.offers
    # warehouse/data/gpu_models.csv: H100-SXM is NVIDIA's 80 GB card; Lambda bills per minute (its docs).
    assert (offer.gpu_model, offer.gpu_vendor, offer.gpu_memory_gb_nominal) == ("H100-SXM", "NVIDIA", 80.0)
    assert offer.total_gpu_memory_gb == 640.0
    assert (offer.billing_granularity_s, offer.minimum_charge_s) == (60, 60)
    assert (offer.source_currency, offer.source_price_per_hour, offer.gpu_name_reported) == ("USD", 23.92, "H100 SXM5")


def test_an_unknown_gpu_is_quarantined_with_its_name() -> None:
    batch = lambdalabs.PROVIDER.batch()
    assert not batch.offer("gpu_1x_h1000", {"a": 1}, gpu="H1000", gpu_count=1, region="r", instance_type="t",
                           purchase_option="on_demand", price_per_hour=1.0)
    [q] = batch.quarantined
    assert not batch.offers and q.source_ref == "gpu_1x_h1000" and "unknown GPU name 'H1000'" in q.reason


def test_a_slice_keeps_its_own_memory_as_the_total() -> None:
    batch = lambdalabs.PROVIDER.batch()
    batch.offer("s", {}, gpu_model="L4", gpu_name_reported="L4", gpu_memory_gb=3.0, gpu_count=0.125, region="r",
                instance_type="g6f.large", purchase_option="on_demand", price_per_hour=0.2)
    assert batch.offers[0].total_gpu_memory_gb == 3.0 and batch.offers[0].gpu_variant_exact


class Pages(BaseHTTPRequestHandler):
    """Three pages of two items each, reached by cursor, link or page number; `loop` repeats a cursor."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        n = int(q.get("page") or q.get("after") or 1)
        body: dict[str, Any] = {"items": [2 * n - 1, 2 * n] if n <= 3 else []}
        if url.path == "/loop":
            body["next"] = "1"
        elif n < 3:
            body["next"] = str(n + 1)
            body["link"] = f"http://{self.headers['Host']}/link?after={n + 1}"
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("kind, row, said", [
    ("offer", offer("p5", 55.04, local_disk_gb=-1.0), "local_disk_gb: Input should be greater than or equal to 0"),
    ("offer", offer("p5", 55.04, network_gbps=math.inf), "network_gbps: Input should be a finite number"),
    ("offer", offer("p5", 55.04, available_count=-1), "available_count: Input should be greater than or equal to 0"),
    ("egress", egress("us-east-1", [(math.inf, None, 0.09)])[0], "tier_start_gb: Input should be a finite number"),
    ("egress", egress("us-east-1", [(0, math.inf, 0.09)])[0], "tier_end_gb: Input should be a finite number"),
    ("storage", dict(region="us-east-1", storage_class="gp3", usd_per_gb_month=80.0, source_currency="USD",
                     source_usd_per_gb_month=80.0), "usd_per_gb_month 80.0 is not plausible"),
])
def test_a_record_with_an_impossible_size_count_or_price_is_quarantined_saying_which(
        kind: str, row: dict[str, Any], said: str) -> None:
    b = Batch("acme")
    # before: each was a valid record; a storage price of $80 per GB-month went into every job's cost
    assert not (b.offer("r", {}, **row) if kind == "offer" else b.add(kind, "r", {}, **row))
    [entry] = b.quarantined
    assert said in entry.reason, entry.reason


@pytest.fixture(scope="module")
def pages_host() -> Any:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    yield host
    server.shutdown()


def ctx_for(host: str) -> SourceContext:
    return SourceContext(provider="lambda", mode="replay", replay_urls={"api.example": f"http://{host}"},
                         http_attempts=1)


@pytest.mark.parametrize("path, following", [
    ("/cursor", cursor(lambda doc: doc.get("next"), "after")),
    ("/numbers", page_number("page")),
])
def test_paginate_reads_every_page_and_counts_them(pages_host: str, path: str, following: Any) -> None:
    ctx = ctx_for(pages_host)
    with ctx.http_client() as client:
        got = list(ctx.paginate(client, "api.example", path, lambda doc: doc["items"], following, what="things"))
    # cursor: 3 pages, the third without a next; page numbers: an empty 4th page ends the listing
    assert got == [1, 2, 3, 4, 5, 6]
    assert ctx.pages == {"things": 3 if path == "/cursor" else 4}


def test_paginate_follows_a_link_only_on_its_host(pages_host: str) -> None:
    ctx = ctx_for(pages_host)
    with ctx.http_client() as client:
        got = list(ctx.paginate(client, "api.example", "/link", lambda doc: doc["items"],
                                next_link(lambda doc: doc.get("link"), pages_host)))
        assert got == [1, 2, 3, 4, 5, 6]
        with pytest.raises(SourceError, match="points outside api.example"):
            list(ctx.paginate(client, "api.example", "/link", lambda doc: doc["items"],
                              next_link(lambda doc: doc.get("link"), "api.example")))
    # the default port of https is the host itself; another port, scheme-less host or name is not
    follow = next_link(lambda doc: doc, "prices.azure.com")
    request = {"path": "/api/retail/prices", "params": {"$filter": "x"}, "json": None}
    assert follow("https://prices.azure.com:443/api/retail/prices?$skip=100", [1], request)["path"] == \
        "/api/retail/prices?$skip=100"
    for elsewhere in ("https://prices.azure.com:8443/p", "https://evil.example/p", "https://prices.azure.com.evil/p"):
        with pytest.raises(SourceError, match="points outside"):
            follow(elsewhere, [1], request)


def test_paginate_refuses_a_loop_and_a_listing_past_the_cap(pages_host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ctx_for(pages_host)
    monkeypatch.setenv("GPULEDGER_MAX_PAGES", "2")
    with ctx.http_client() as client:
        with pytest.raises(SourceError, match="already read"):
            list(ctx.paginate(client, "api.example", "/loop", lambda doc: doc["items"],
                              cursor(lambda doc: doc.get("next"), "after")))
        with pytest.raises(SourceError, match="within 2 pages .*GPULEDGER_MAX_PAGES"):
            list(ctx.paginate(client, "api.example", "/numbers", lambda doc: doc["items"], page_number()))


def test_a_failing_enrichment_costs_only_itself_and_says_why() -> None:
    ctx = SourceContext(provider="aws", mode="replay")

    def blocks() -> list[str]:
        raise SourceError("aws: DescribeCapacityBlockOfferings in us-east-1: HTTP 404")

    assert ctx.enrich("capacity blocks", blocks, default=[]) == []
    assert ctx.enrich("spot advisor", lambda: {"a": 1}) == {"a": 1}
    assert ctx.degraded == {"capacity blocks": "aws: DescribeCapacityBlockOfferings in us-east-1: HTTP 404"}


def test_an_enrichment_failing_alike_in_many_regions_says_so_once() -> None:
    # IAM without ec2:DescribeSpotPriceHistory gave 26 near-copies of one reason (9 KB in scrape_runs), each
    # cut mid-word at 300 characters, in the order the region threads failed.
    ctx = SourceContext(provider="aws", mode="replay")

    def denied(region: str) -> None:
        raise SourceError(f"aws: EC2 API in {region} (DescribeSpotPriceHistory) failed: UnauthorizedOperation")

    for region in ("us-west-2", "eu-west-1", "us-east-1"):
        ctx.enrich("spot prices", denied, region, region=region)
    ctx.enrich("spot prices", lambda: 1 / 0, region="ap-south-1")
    ctx.enrich("spot advisor", lambda: (_ for _ in ()).throw(ValueError("word " * 100)))
    assert ctx.degraded == {
        "spot prices": "aws: EC2 API in eu-west-1 (DescribeSpotPriceHistory) failed: UnauthorizedOperation (the same "
                       "in 2 more: us-east-1, us-west-2); division by zero",
        "spot advisor": " ".join(["word"] * 59) + " …"}
    assert len(ctx.degraded["spot advisor"]) <= 300
    # a reason whose first word is longer than the room is cut inside it, never left as the mark alone
    ctx.enrich("az offerings", lambda: (_ for _ in ()).throw(ValueError("https://x/" + "q" * 400 + " tail")))
    assert ctx.degraded["az offerings"] == "https://x/" + "q" * 288 + " …"
    # the same reason twice from an enrichment not per region: said once, no empty region list
    for _ in range(2):
        ctx.enrich("savings plans", lambda: 1 / 0)
    assert ctx.degraded["savings plans"] == "division by zero"


def test_an_enrichment_past_its_time_stops_at_its_next_request(pages_host: str) -> None:
    ctx = ctx_for(pages_host)

    def slow() -> Any:
        with ctx.http_client() as client:
            return ctx.get_json(client, "api.example", "/numbers")

    assert ctx.enrich("stock levels", slow, timeout_s=-1) is None
    assert ctx.degraded == {"stock levels": "stock levels: timed out"}
    assert ctx.requests_made == 0


def test_a_keyed_client_sends_the_key_as_shown_and_asks_for_one_only_when_needed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIT_TEST_KEY", "  kit-key-0123  ")  # a key pasted with spaces is sent without them
    live = SourceContext(provider="kit", mode="live")
    with live.keyed_client("KIT_TEST_KEY", "X-API-Key: {key}", needs="x") as client:
        assert (client.headers["x-api-key"], client.headers["accept"]) == ("kit-key-0123", "application/json")
        assert "authorization" not in client.headers
    with live.keyed_client("KIT_TEST_KEY") as client:
        assert client.headers["authorization"] == "Bearer kit-key-0123"
    monkeypatch.setenv("KIT_TEST_KEY", " ")  # blank is missing
    with pytest.raises(MissingCredentialsError, match="^kit: KIT_TEST_KEY is not set; the API needs a key$"):
        live.keyed_client("KIT_TEST_KEY", needs="the API needs a key")
    with live.keyed_client("KIT_TEST_KEY") as client:  # keyless source: no header, no error
        assert "authorization" not in client.headers
    with SourceContext(provider="kit", mode="replay").keyed_client("KIT_TEST_KEY", needs="x") as client:
        assert "authorization" not in client.headers  # a replay needs no key, none is invented


def test_a_next_link_without_a_leading_slash_stays_on_its_host() -> None:
    """The kit appends a link's path to the host's base URL: ".evil.example/p" made
    https://apexapps.oracle.com.evil.example/p, another host. A relative link is read against the page's own URL."""
    follow = next_link(lambda doc: doc, "apexapps.oracle.com")
    request = {"path": "/pls/apex/cetools/api/v1/products/", "params": {"currencyCode": "USD"}, "json": None}
    live = SourceContext(provider="oci", mode="live")
    for link, path in ((".evil.example/p", "/pls/apex/cetools/api/v1/products/.evil.example/p"),
                       ("?offset=100", "/pls/apex/cetools/api/v1/products/?offset=100"),
                       ("../../v2/x?a=1", "/pls/apex/cetools/api/v2/x?a=1")):
        following = follow(link, [1], request)
        assert following["path"] == path and following["params"] == {}
        assert httpx.URL(live.url("apexapps.oracle.com") + following["path"]).host == "apexapps.oracle.com"


@pytest.mark.parametrize("key, position", [("secret_abc123\u201d", 14), ("secret_abc\n123", 11)])
def test_a_key_no_header_can_carry_is_named_before_any_request(monkeypatch: pytest.MonkeyPatch, key: str,
                                                                position: int) -> None:
    """A key pasted with a typographic quote failed as "UnicodeEncodeError: 'ascii' codec can't encode character
    '\\u201d'", naming no variable; one with a line break was sent three times, failing each time on our side."""
    monkeypatch.setenv(lambdalabs.API_KEY_ENV, key)
    ctx = SourceContext(provider="lambda", mode="replay", replay_urls={"cloud.lambda.ai": "http://127.0.0.1:9"})
    with pytest.raises(SourceError) as err:
        lambdalabs.fetch(ctx)
    assert str(err.value) == (f"lambda: LAMBDA_API_KEY holds a character an HTTP header cannot carry (character "
                              f"{position})")
    assert ctx.requests_made == 0


def test_scaleway_and_runpod_read_their_keys_through_the_same_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scaleway's stock key (a header set after the catalogue) and RunPod's (a query parameter) read alike."""
    from gpuledger.adapters import runpod, scaleway

    for module, env in ((scaleway, scaleway.SECRET_KEY_ENV), (runpod, runpod.API_KEY_ENV)):
        monkeypatch.setenv(env, "abc\u201ddef12345")
        ctx = SourceContext(provider=module.NAME, mode="replay", replay_urls={module.API_HOST: "http://127.0.0.1:9"})
        with pytest.raises(SourceError, match=f"^{module.NAME}: {env} holds a character an HTTP header cannot "
                                              r"carry \(character 4\)$"):
            module.fetch(ctx)
        assert ctx.requests_made == 0


def test_a_next_link_that_is_no_url_fails_the_listing_as_the_answers_fault() -> None:
    """'https://host:99999/p' raised a bare ValueError ("Port out of range 0-65535") naming neither link nor listing."""
    follow = next_link(lambda doc: doc, "api.digitalocean.com")
    request = {"path": "/v2/sizes", "params": {}, "json": None}
    for link in ("https://api.digitalocean.com:99999/v2/sizes?page=2", "http://[::1/v2/sizes"):
        with pytest.raises(SourceError, match="^the next-page link points outside api.digitalocean.com: "):
            follow(link, [1], request)
