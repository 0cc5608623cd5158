"""Which public source each provider's refresh reads, the smallest public source of the same
prices, and the bytes of each, for benchmark 1's bytes line.

The bytes a refresh fetched come from the replay server's log (every answer sent). The smallest
source's bytes are measured in the same run:

- a provider whose source is the smallest one (its only public price source, or the narrowest
  documented query of it, which the adapter already asks): the answers the refresh needed, each
  counted once. The ratio fetched / smallest is then 1.0 unless an answer was fetched twice.
- a provider with a smaller source (`Alternative`): the refresh's answers once, with the answers
  the alternative stands in for replaced by the alternative's answers in the world replay (the
  provider's wire format, as its client would fetch them), region by region where the world
  holds both; a region the world holds no alternative answer for counts at the used size.

A ratio above 1.0 passes only with a stated reason (`over_reason`: why the adapter reads the
larger source) and never when an answer was fetched twice.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

# One answer the replay server sent: host, method, target (path and query), request-body hash, bytes.
Answer = tuple[str, str, str, str, int]


ONLY_SOURCE = "the same source: the provider's only public source of these prices"


class Alternative(NamedTuple):
    """A smaller public source of the same prices. `replaces(host, target)`: the region (or "")
    of a fetched answer this source stands in for, None when it does not; `answers(exchange)`:
    the region of a world-replay exchange that belongs to this source, None when it does not."""

    name: str
    needs_credentials: bool
    replaces: Callable[[str, str], str | None]
    answers: Callable[[dict[str, Any]], str | None]


class Source(NamedTuple):
    used: str
    why: str
    smallest: str = ONLY_SOURCE
    alternative: Alternative | None = None
    over_reason: str | None = None  # why the adapter reads more than the smallest source
    candidate: str | None = None  # a narrower query that may exist, not measured here


_AWS_BULK_FILE = re.compile(r"^/offers/v1\.0/aws/(?:AmazonEC2|AWSDataTransfer)/\d+/([a-z0-9-]+)/")


def _aws_bulk_region(host: str, target: str) -> str | None:
    """A region's EC2 or AWSDataTransfer offer file: what GetProducts stands in for."""
    if host != "pricing.us-east-1.amazonaws.com":
        return None
    m = _AWS_BULK_FILE.match(target)
    return m.group(1) if m else None


def _aws_get_products_region(exchange: dict[str, Any]) -> str | None:
    if exchange.get("host") != "api.pricing.us-east-1.amazonaws.com":
        return None
    match = exchange.get("match") or {}
    if (match.get("headers") or {}).get("X-Amz-Target") != "AWSPriceListService.GetProducts":
        return None
    for f in (match.get("json") or {}).get("Filters") or []:
        if f.get("Field") in ("regionCode", "fromRegionCode"):
            return f.get("Value")
    return None


AWS_GET_PRODUCTS = Alternative(
    "Pricing API GetProducts, filtered per region to GPU instances (Linux, shared, no pre-installed "
    "software, used capacity), storage and data transfer",
    True, _aws_bulk_region, _aws_get_products_region)

SOURCES: dict[str, Source] = {
    "aws": Source(
        "bulk price list (region index, each region's EC2 and AWSDataTransfer offer files as CSV) or, with "
        "aws_price_source: api, GetProducts; EC2 APIs for spot prices and capacity",
        "the bulk files are the only complete price source that needs no credentials",
        "GetProducts with the adapter's filters (one region's GPU rows, not the whole offer file)",
        AWS_GET_PRODUCTS,
        over_reason="GetProducts needs AWS credentials; without them the per-region bulk files are the "
                    "narrowest public source (the adapter reads one file per region, never the all-region one)",
        candidate="the price pages' own JSON (b0.p.awsstatic.com) is smaller still but undocumented"),
    "azure": Source(
        "Retail Prices API, three OData $filter queries (GPU VM families, 3 disk meters, 2 egress products), "
        "primary meters only, paged by NextPageLink",
        "public, no key, and filtered on the server",
        "the same queries: the narrowest the API documents (eq/and/or/contains on its fields, meterRegion)",
        candidate="Windows meters come along with the Linux ones (no documented negation to leave them "
                  "out); the adapter counts them in its notes"),
    "gcp": Source(
        "Cloud Billing Catalog API v1 (every Compute Engine SKU) and the Compute API's machine and accelerator "
        "types (aggregated, server-side name filter)",
        "the catalog is the published price of every SKU a GPU VM is billed as",
        "the same source: services.skus.list takes no filter (only time range, currency, page size, page token)"),
    "vastai": Source(
        "the marketplace search (bundles), the query the vast CLI sends, keyset-paged",
        "the only listing of the rentable offers and their prices",
        "the same query: every rentable listing is needed to group them"),
    "cloudrift": Source("instance-types/list", "the provider's one price listing"),
    "cudo": Source("GET /v1/vms/machine-types-2", "the provider's one listing of its component prices"),
    "digitalocean": Source("GET /v2/sizes, paged at the maximum per_page", "the provider's one price listing",
                           "the same source: /v2/sizes takes no filter, only page and per_page"),
    "ibmcloud": Source("Global Catalog search of instance profiles (paged), then each GPU plan's pricing",
                       "the catalog is IBM's published price of every VPC profile; no key",
                       "the same query: kind:instance.profile is the narrowest documented search term"),
    "hotaisle": Source("the team's VM and bare-metal listing", "prices are per team: only the API has them"),
    "hyperbolic": Source("POST /v1/marketplace", "the marketplace's one listing, one body"),
    "jarvislabs": Source("the backend catalogue the official SDK reads", "the provider's one price listing"),
    "latitudesh": Source("GET /plans", "the provider's one price listing, one body"),
    "lium": Source("GET /api/public/v1/nodes", "the marketplace's one public listing, one body"),
    "lambda": Source("GET /api/v1/instance-types", "the provider's one price listing, one body"),
    "novita": Source("GET /gpu-instance/openapi/v1/products", "the provider's one price listing, one body"),
    "oci": Source(
        "the public price-list API (every Oracle Cloud product in USD)",
        "the price list behind Oracle's price page; no filter by product family is offered",
        candidate="the API also answers one part at a time (?partNumber=), which needs the GPU part numbers "
                  "known in advance: a new shape would then be missed"),
    "ovhcloud": Source("GET /1.0/order/catalog/public/cloud (one subsidiary)",
                       "the public order catalog behind OVHcloud's price page, one body, no key"),
    "primeintellect": Source("GET /api/v1/availability/gpus, paged at the CLI's page size",
                             "the aggregator's one listing of its offers"),
    "runpod": Source("two GraphQL queries of gpuTypes (prices, stock)", "the queries ask only the fields they land",
                     "the same queries (GraphQL: only the fields asked are sent)"),
    "scaleway": Source("Product Catalog (instance products, paged) and the Instance API's stock",
                       "the catalog needs no key and is filtered to instances on the server",
                       "the same query: product_types=instance is the catalog's narrowest documented filter"),
    "seeweb": Source("GET /ecs/v2/plans", "the provider's one price listing, one body"),
    "shadeform": Source("GET /v1/instances/types", "the marketplace's one listing, one body"),
    "spheron": Source("GET /api/gpu-offers, paged", "the aggregator's one listing of its offers"),
    "tensordock": Source("GET /api/v2/locations", "the provider's one listing of its hostnodes' prices"),
    "verda": Source("instance types, spot prices and availability (REST)", "the provider's one price listing"),
    "vultr": Source(
        "GET /v2/plans and /v2/plans-metal, cursor-paged", "public, no key",
        candidate="/v2/plans takes a `type` filter; whether `vcg` (Cloud GPU) covers every GPU plan the "
                  "adapter prices was not confirmed from Vultr's reference, so it is not asked"),
    "coreweave": Source("the pricing page (server-rendered HTML)", "CoreWeave publishes no price API"),
    "crusoe": Source("the pricing page (server-rendered HTML)", "Crusoe's API lists instance types but no prices"),
    "hyperstack": Source(
        "the pricing page, rendered in Chromium", "the page is public",
        "the same page (the Infrahub pricebook API has the prices too, with an API key; not in the world replay)"),
    "nebius": Source("the price page (server-rendered HTML)", "the page holds every price table"),
    "paperspace": Source("the pricing page (served HTML)", "no public price API"),
}


@dataclass
class ProviderBytes:
    provider: str
    requests: int
    fetched: int  # every answer sent
    once: int  # each distinct answer once
    smallest: int
    smallest_basis: str
    source: Source

    @property
    def ratio(self) -> float:
        return self.fetched / self.smallest if self.smallest else 1.0

    @property
    def repeated(self) -> bool:
        return self.fetched > self.once

    @property
    def ok(self) -> bool:
        """At most the smallest source's bytes, or more for a stated reason; never a repeated answer."""
        return not self.repeated and (self.ratio <= 1.0 + 1e-9 or self.source.over_reason is not None)


def answers_by_provider(sent: Sequence[Sequence[Any]], hosts: dict[str, str]) -> dict[str, list[Answer]]:
    out: dict[str, list[Answer]] = {}
    for host, method, target, digest, nbytes in sent:
        out.setdefault(hosts.get(host, host), []).append((host, method, target, digest, int(nbytes)))
    return out


def served_bytes(folder: Path, exchange: dict[str, Any]) -> int:
    """The bytes the replay server sends for one manifest exchange (decompressed)."""
    resp = exchange.get("response") or {}
    if "body_file" in resp:
        path = folder / resp["body_file"]
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return sum(len(chunk) for chunk in iter(lambda: f.read(1 << 20), b""))
        return path.stat().st_size
    body = resp.get("body", "")
    return len(body.encode() if isinstance(body, str) else json.dumps(body).encode())


def alternative_bytes(world: Path, provider: str, alt: Alternative) -> dict[str, int]:
    """Per region, the bytes of the alternative's answers in the world replay."""
    folder = world / provider
    manifest = folder / "manifest.json"
    if not manifest.exists():
        return {}
    out: dict[str, int] = {}
    for ex in json.loads(manifest.read_text()).get("exchanges", []):
        region = alt.answers(ex)
        if region is not None:
            out[region] = out.get(region, 0) + served_bytes(folder, ex)
    return out


def measure(provider: str, answers: list[Answer], world: Path) -> ProviderBytes:
    source = SOURCES[provider]
    distinct: dict[tuple[str, str, str, str], int] = {}
    for host, method, target, digest, nbytes in answers:
        distinct.setdefault((host, method, target, digest), nbytes)
    fetched = sum(a[4] for a in answers)
    once = sum(distinct.values())
    smallest, basis = once, "its answers, each once"
    alt = source.alternative
    if alt is not None:
        replaced: dict[str, int] = {}
        for (host, _method, target, _digest), nbytes in distinct.items():
            region = alt.replaces(host, target)
            if region is not None:
                replaced[region] = replaced.get(region, 0) + nbytes
        alt_by_region = alternative_bytes(world, provider, alt)
        if replaced:
            common = sorted(set(replaced) & set(alt_by_region))
            smallest = once - sum(replaced[r] for r in common) + sum(alt_by_region[r] for r in common)
            basis = (f"its answers once, with {alt.name.split(',')[0]} in place of the files it stands in for in "
                     f"{len(common)} of {len(replaced)} regions (the regions the world replay answers it for)")
            if smallest >= once:
                smallest, basis = once, f"its answers once ({alt.name.split(',')[0]} is not smaller here)"
        else:
            basis = f"its answers once: the refresh read {alt.name.split(',')[0]} itself"
    return ProviderBytes(provider, len(answers), fetched, once, smallest, basis, source)


def bytes_table(rows: Sequence[ProviderBytes]) -> list[str]:
    """The bytes line's table: provider, source used and why, smallest source, MB each, ratio."""
    out = [f"  {'provider':<13} {'MB fetched':>11} {'MB smallest':>12} {'ratio':>6}  verdict"]
    for r in sorted(rows, key=lambda r: -r.fetched):
        verdict = ("answer fetched twice" if r.repeated else "ok" if r.ratio <= 1.0 + 1e-9
                   else "over, stated reason" if r.source.over_reason else "over")
        out.append(f"  {r.provider:<13} {r.fetched / 1e6:>11.3f} {r.smallest / 1e6:>12.3f} {r.ratio:>6.2f}  {verdict}")
        out.append(f"      used: {r.source.used} (why: {r.source.why})")
        out.append(f"      smallest: {r.source.smallest}; measured as {r.smallest_basis}"
                   + ("; 1.0 by definition" if r.source.smallest == ONLY_SOURCE else ""))
        if r.ratio > 1.0 + 1e-9 and r.source.over_reason:
            out.append(f"      over because: {r.source.over_reason}")
        if r.source.candidate:
            out.append(f"      not measured: {r.source.candidate}")
    return out
