"""DigitalOcean: GPU Droplet sizes, where they can be created now, and their list prices.

`GET https://api.digitalocean.com/v2/sizes`, the token as a Bearer token (env DIGITALOCEAN_TOKEN),
paged by `page`/`per_page` (at most 200) with the next page linked in full; RAM in MB, VRAM and disks in GiB.
One offer per region that can create the GPU size now, or one "global" row, available=False.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number
from gpuledger.adapters.base import dig, drift_guard, next_link, stated_currency
from gpuledger.adapters.contract import AnomalyThresholds, ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts, require_usd

NAME = "digitalocean"
API_HOST = "api.digitalocean.com"
SIZES_PATH = "/v2/sizes"
TOKEN_ENV = "DIGITALOCEAN_TOKEN"
PER_PAGE = 200  # the API's maximum
GLOBAL_REGION = "global"  # a size that no region offers now; also the region of the flat prices

GIB_PER_GB = 1e9 / 2**30  # DigitalOcean prices storage and transfer per GiB; the warehouse per GB
VOLUME_USD_PER_GIB_MONTH = 0.10
TRANSFER_OVERAGE_USD_PER_GIB = 0.01

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(TOKEN_ENV,), credentials_required=True,
    # Rows follow capacity (one per region, one when sold out): a crunch can cut them to a third.
    anomaly=AnomalyThresholds(min_row_ratio=0.2),
    facts=ProviderFacts(
        display_name="DigitalOcean", kind="gpu_cloud", billing_granularity_s=1, minimum_charge_s=60,
        billing_notes="Droplets bill per second since 2026-01-01, with a minimum of 60 seconds or 0.01 USD, "
                      "whichever is higher (DigitalOcean's pricing page states it for CPU Droplets; its GPU "
                      "Droplet billing terms were not read in full).",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A powered-off Droplet bills in full (its resources stay reserved) until it is "
                              "destroyed; volumes bill whether or not they are attached.",
        access_ssh=True,
        price_source="DigitalOcean API GET api.digitalocean.com/v2/sizes (token); pricing pages for volumes "
                     "and transfer",
        source_urls=["https://docs.digitalocean.com/reference/api/digitalocean/#tag/Sizes",
                     "https://docs.digitalocean.com/products/droplets/details/pricing/",
                     "https://www.digitalocean.com/pricing/gpu-droplets",
                     "https://docs.digitalocean.com/products/volumes/details/pricing/"]),
)


def _disk(size: dict[str, Any], kind: str) -> float | None:
    sizes = [d["size"].get("amount") for d in size.get("disk_info") or []
             if isinstance(d, dict) and d.get("type") == kind and isinstance(d.get("size"), dict)]
    return sum((a for a in sizes if isinstance(a, (int, float)) and not isinstance(a, bool) and a > 0), 0.0) or None


@drift_guard("digitalocean: sizes")
def parse_sizes(pages: list[Any]) -> Batch:
    """The sizes' pages -> one offer per GPU size x region, plus volume storage and transfer."""
    sizes: list[Any] = []
    for doc in pages:
        if not isinstance(doc, dict) or not isinstance(doc.get("sizes"), list):
            raise SchemaDriftError(f"digitalocean: {SIZES_PATH} answer lacks the 'sizes' list")
        sizes += doc["sizes"]
    if not sizes:
        raise SourceError(f"digitalocean: {SIZES_PATH} returned no sizes")
    if not any(isinstance(s, dict) and "price_hourly" in s for s in sizes):
        raise SchemaDriftError(f"digitalocean: every size in {SIZES_PATH} lacks 'price_hourly'; "
                               "the size format changed")
    batch = PROVIDER.batch()
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    for size in sizes:
        if not isinstance(size, dict) or not isinstance(size.get("slug"), str) or not size["slug"].strip():
            batch.quarantine("offer", "?", "schema: a size lacks 'slug'", size)
        elif not size.get("gpu_info"):
            skipped["CPU-only sizes"] += 1
        elif not batch.listed_again(seen, size["slug"], f"size slug {size['slug']}", size):
            try:
                _add_size(batch, size["slug"], size)
            except ValueError as err:
                batch.quarantine("offer", size["slug"], f"{size['slug']}: {err}", size)
    volume = round(VOLUME_USD_PER_GIB_MONTH * GIB_PER_GB, 6)
    batch.add("storage", f"{GLOBAL_REGION}/volume", {"source": PROVIDER.facts.source_urls[3]},
              region=GLOBAL_REGION, storage_class="volume", usd_per_gb_month=volume,
              description="block-storage volume, 0.10 USD per GiB-month (= 0.093132 per GB), billed whether or "
                          "not attached; same in every region")
    transfer = round(TRANSFER_OVERAGE_USD_PER_GIB * GIB_PER_GB, 6)
    batch.add("egress", f"{GLOBAL_REGION}/internet", {"source": PROVIDER.facts.source_urls[1]},
              region=GLOBAL_REGION, destination="internet", tier_start_gb=0.0, usd_per_gb=transfer,
              description="outbound transfer beyond the team's pooled allowance (each Droplet adds its size's "
                          "transfer_tb_per_month, in provider_data): 0.01 USD per GiB (= 0.009313 per GB); "
                          "inbound is free")
    batch.note_skipped(f"digitalocean: {len(sizes)} sizes listed, {len(seen)} GPU sizes", skipped)
    return batch


def _add_size(batch: Batch, slug: str, size: dict[str, Any]) -> None:
    info = size["gpu_info"]
    if not isinstance(info, dict):
        raise ValueError("schema: 'gpu_info' is not an object")
    reported, count, vram = info.get("model"), info.get("count"), info.get("vram")
    if not isinstance(reported, str) or not reported.strip():
        raise ValueError("gpu_info lacks 'model'")
    if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
        raise ValueError(f"gpu_info count {count!r} is not a positive whole number")
    if not isinstance(vram, dict) or "amount" not in vram:
        raise ValueError("gpu_info lacks 'vram.amount'")
    if str(vram.get("unit", "")).strip().lower() != "gib":
        raise ValueError(f"gpu_info vram unit {vram.get('unit')!r} is not 'gib'")
    total = as_number(vram["amount"], "gpu_info vram amount", ValueError)
    if not math.isfinite(total) or total <= 0:
        raise ValueError(f"gpu_info vram amount {vram['amount']!r} is not positive")
    per_gpu = total / count  # the size's VRAM in all, as the slugs say ("gpu-h100x8-640gb")
    try:
        model, exact = canonicalize(NAME, reported, per_gpu * 1024)
    except UnknownGPUError as err:
        raise ValueError(f"gpu: {err}") from None
    if "price_hourly" not in size:
        raise ValueError("lacks 'price_hourly'")
    price = as_number(size["price_hourly"], "price_hourly", ValueError)
    require_usd(stated_currency(size))
    if not isinstance(size.get("regions"), list):
        raise ValueError("schema: 'regions' is not a list")
    names = sorted({r for r in size["regions"] if isinstance(r, str) and r.strip()})
    creatable = size.get("available", True) is not False
    ram_mb, vcpus = size.get("memory"), size.get("vcpus")
    data = {"price_monthly": size.get("price_monthly"), "description": size.get("description"),
            "transfer_tb_per_month": size.get("transfer"), "regions": names, "size_available": creatable,
            "gpu_model_reported": reported, "vram_gib_total": per_gpu * count,
            "scratch_disk_gib": _disk(size, "scratch"), "networking_throughput_mbps": size.get("networking_throughput")}
    common = dict(
        instance_type=slug, purchase_option="on_demand", gpu_model=model.gpu_model, gpu_variant_exact=exact,
        gpu_name_reported=reported, gpu_count=count, gpu_memory_gb=per_gpu, price_per_hour=price,
        vcpus=vcpus if isinstance(vcpus, (int, float)) and not isinstance(vcpus, bool) and vcpus > 0 else None,
        ram_gb=ram_mb / 1024 if isinstance(ram_mb, (int, float)) and ram_mb > 0 else None,
        local_disk_gb=_disk(size, "local") or _disk(size, "boot"), provider_data=data)
    if not names:
        batch.offer(f"{slug}/{GLOBAL_REGION}", size, region=GLOBAL_REGION, available=False, available_count=0,
                    availability_level="no region offers the size now", **common)
    for region in names:
        batch.offer(f"{slug}/{region}", size, region=region, available=creatable,
                    available_count=None if creatable else 0,
                    availability_level="region offers the size" if creatable
                    else "region listed, but the size is not available for new Droplets", **common)


def _next_page(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
    """The answer's `links.pages.next`, on this host and this path only."""
    nxt = dig(doc, "links", "pages", "next")
    following = next_link(lambda _: nxt.strip() if isinstance(nxt, str) else None, API_HOST)(doc, items, request)
    if following and urlsplit(following["path"]).path.rstrip("/") != SIZES_PATH:
        raise SourceError(f"digitalocean: the sizes' next page is another path: {nxt[:120]}")
    return following


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(TOKEN_ENV, needs="the sizes API needs a token") as client:
        pages = list(ctx.paginate(client, API_HOST, SIZES_PATH, lambda doc: [doc], _next_page, what=SIZES_PATH,
                                  params={"page": "1", "per_page": str(PER_PAGE)}))
    return parse_sizes(pages)
