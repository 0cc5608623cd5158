"""Which public source each provider's refresh reads, and whether a smaller one publishes the
same prices. Benchmark 7 divides the bytes a full refresh fetched by the bytes of its source's
answers, each fetched once; where a smaller source exists, the line names it, whether it needs
credentials, and its size where it was measured (None: not measured here).

Each row: (the source read, why it is the one read, the smaller source or None, whether that
smaller source needs credentials, its bytes for the same prices or None).
"""

from __future__ import annotations

from typing import NamedTuple


class Source(NamedTuple):
    used: str
    why: str
    smaller: str | None = None
    smaller_needs_credentials: bool | None = None
    smaller_bytes: int | None = None


SOURCES: dict[str, Source] = {
    "aws": Source(
        "bulk price list: region index, then each region's EC2 offer file as CSV; EC2 APIs for spot and capacity",
        "the only complete price source that needs no credentials",
        "Pricing API GetProducts filtered to GPU instance families (the adapter's path with credentials)",
        True),
    "azure": Source(
        "Retail Prices API, three narrow OData $filter queries, paged by NextPageLink",
        "public, no key, and filtered on the server to GPU VMs, disks and egress"),
    "gcp": Source(
        "Cloud Billing Catalog API (Compute Engine SKUs) and the Compute API's machine and accelerator types",
        "the catalog is the published price of every SKU a GPU VM is billed as"),
    "vastai": Source(
        "the marketplace search (bundles), the query the vast CLI sends",
        "the only listing of the rentable offers and their prices"),
    "cloudrift": Source("instance-types/list", "the provider's one price listing"),
    "digitalocean": Source("GET /v2/sizes, paged", "the provider's one price listing"),
    "hotaisle": Source("the team's VM and bare-metal listing", "prices are per team: only the API has them"),
    "jarvislabs": Source("the backend catalogue the official SDK reads", "the provider's one price listing"),
    "lambda": Source("GET /api/v1/instance-types", "the provider's one price listing, one body"),
    "oci": Source(
        "the public price-list API (every Oracle Cloud product in USD)",
        "the price list behind Oracle's price page; no filter by product family is offered"),
    "runpod": Source("one GraphQL query of gpuTypes", "the query asks only the price fields it lands"),
    "scaleway": Source("Product Catalog (instance products, paged) and the Instance API's stock",
                       "the catalog needs no key and is filtered to instances on the server"),
    "shadeform": Source("GET /v1/instances/types", "the marketplace's one listing, one body"),
    "tensordock": Source("GET /api/v2/locations", "the provider's one listing of its hostnodes' prices"),
    "verda": Source("instance types, spot prices and availability (REST)", "the provider's one price listing"),
    "vultr": Source("GET /v2/plans and /v2/plans-metal, cursor-paged", "public, no key"),
    "coreweave": Source("the pricing page (server-rendered HTML)", "CoreWeave publishes no price API"),
    "crusoe": Source("the pricing page (server-rendered HTML)", "Crusoe's API lists instance types but no prices"),
    "hyperstack": Source(
        "the pricing page, rendered in Chromium", "the page is public",
        "Infrahub pricebook API", True),
    "nebius": Source("the price page (server-rendered HTML)", "the page holds every price table"),
    "paperspace": Source("the pricing page (served HTML)", "no public price API"),
}
