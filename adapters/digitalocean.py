"""DigitalOcean: GPU Droplet sizes, where they can be created now, and their list prices.

Source: `GET https://api.digitalocean.com/v2/sizes` with the account's token as a Bearer token
(env DIGITALOCEAN_TOKEN, DigitalOcean's own variable name; the endpoint needs the
`sizes:read` scope). The answer pages with `page` and `per_page` (at most 200) and links the
next page in full:

    {"sizes": [{"slug": "gpu-h100x8-640gb", "memory": 1966080, "vcpus": 160, "disk": 2046,
                "transfer": 60.0, "price_monthly": 17796.48, "price_hourly": 23.92,
                "regions": ["nyc2", "tor1"], "available": true, "description": "H100 GPU - 8X",
                "networking_throughput": 10000,
                "gpu_info": {"count": 8, "model": "nvidia_h100", "vram": {"amount": 640, "unit": "gib"}},
                "disk_info": [{"type": "local", "size": {"amount": 2046, "unit": "gib"}},
                              {"type": "scratch", "size": {"amount": 40960, "unit": "gib"}}]}],
     "links": {"pages": {"next": "https://api.digitalocean.com/v2/sizes?page=2&per_page=200"}},
     "meta": {"total": 150}}

Row shape. A GPU size is one on-demand offer per region in `regions` (the slugs where it can
be created now, which follow GPU capacity closely). `available` false means no new Droplet
of the size can be created anywhere: its rows are loaded as not available. A size with no
region at all is one "global" row, available=False: the price is real, the size just cannot
be created right now. DigitalOcean's list prices are the same in every region.

GPUs. `gpu_info.model` ("nvidia_h100", "nvidia_rtx4000_ada", "amd_mi300x") is looked up as
spelled in gpu_aliases; `vram.amount` is the size's VRAM in all, so each GPU has amount /
count. Sizes without `gpu_info` are CPU Droplets: counted in the notes, not loaded.

Block-storage volumes and outbound transfer are priced on DigitalOcean's pricing pages, not
in the API; they are emitted as documented constants (below) for every region.

`fetch_*` does the I/O; `parse_*` functions are pure.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from gpuledger.adapters.base import (
    MissingCredentialsError, SchemaDriftError, SourceContext, SourceError, as_number, drift_guard, stated_currency,
)
from gpuledger.adapters.contract import AnomalyThresholds, ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "digitalocean"
API_HOST = "api.digitalocean.com"
SIZES_PATH = "/v2/sizes"
TOKEN_ENV = "DIGITALOCEAN_TOKEN"
PER_PAGE = 200  # the API's maximum
MAX_PAGES = 20  # about 150 sizes in all; a runaway `next` chain must still end
GLOBAL_REGION = "global"  # a size that no region offers now; also the region of the flat prices

GIB_PER_GB = 1e9 / 2**30  # DigitalOcean prices storage and transfer per GiB; the warehouse per GB
VOLUME_USD_PER_GIB_MONTH = 0.10
TRANSFER_OVERAGE_USD_PER_GIB = 0.01

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="api",
    secret_env_vars=(TOKEN_ENV,),
    credentials_required=True,
    # Rows follow GPU capacity: a size offered in three regions is three rows, sold out it is one
    # ("global"). A capacity crunch can cut the rows to a third while every size is still listed;
    # a scrape that lost 90% of them is still refused.
    anomaly=AnomalyThresholds(min_row_ratio=0.2),
    facts=ProviderFacts(
        display_name="DigitalOcean",
        kind="gpu_cloud",
        billing_granularity_s=1,
        minimum_charge_s=60,
        billing_notes="Droplets bill per second since 2026-01-01, with a minimum of 60 seconds or 0.01 USD, "
                      "whichever is higher (DigitalOcean's pricing page states it for CPU Droplets; its GPU "
                      "Droplet billing terms were not read in full).",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A powered-off Droplet bills in full (its resources stay reserved) until it is "
                              "destroyed; volumes bill whether or not they are attached.",
        access_ssh=True,
        multinode_interconnect=None,
        interruptible_offer=None,
        price_source="DigitalOcean API GET api.digitalocean.com/v2/sizes (token); pricing pages for volumes "
                     "and transfer",
        source_urls=[
            "https://docs.digitalocean.com/reference/api/digitalocean/#tag/Sizes",
            "https://docs.digitalocean.com/products/droplets/details/pricing/",
            "https://www.digitalocean.com/pricing/gpu-droplets",
            "https://docs.digitalocean.com/products/volumes/details/pricing/",
        ],
    ),
)


class _BadRecord(Exception):
    """One size that cannot become rows: its reason goes to quarantine."""


# -- parsing ----------------------------------------------------------------------

def _number(value: Any, what: str) -> float:
    return as_number(value, what, _BadRecord)


def size_gpus(size: dict[str, Any]) -> tuple[Any, bool, str, int, float]:
    """(model, variant_exact, reported name, count, memory per GPU in GiB) of a GPU size."""
    info = size["gpu_info"]
    if not isinstance(info, dict):
        raise _BadRecord("schema: 'gpu_info' is not an object")
    model_name = info.get("model")
    if not isinstance(model_name, str) or not model_name.strip():
        raise _BadRecord("gpu_info lacks 'model'")
    count = info.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
        raise _BadRecord(f"gpu_info count {count!r} is not a positive whole number")
    vram = info.get("vram")
    if not isinstance(vram, dict) or "amount" not in vram:
        raise _BadRecord("gpu_info lacks 'vram.amount'")
    unit = str(vram.get("unit", "")).strip().lower()
    if unit != "gib":
        raise _BadRecord(f"gpu_info vram unit {vram.get('unit')!r} is not 'gib'")
    total = _number(vram["amount"], "gpu_info vram amount")
    if not math.isfinite(total) or total <= 0:
        raise _BadRecord(f"gpu_info vram amount {vram['amount']!r} is not positive")
    per_gpu = total / count  # the size's VRAM in all, as the slugs say ("gpu-h100x8-640gb")
    try:
        model, exact = canonicalize(NAME, model_name, per_gpu * 1024)
    except UnknownGPUError as err:
        raise _BadRecord(f"gpu: {err}") from None
    return model, exact, model_name, count, per_gpu


def _disk(size: dict[str, Any], kind: str) -> float | None:
    total = 0.0
    for disk in size.get("disk_info") or []:
        if isinstance(disk, dict) and disk.get("type") == kind and isinstance(disk.get("size"), dict):
            amount = disk["size"].get("amount")
            if isinstance(amount, (int, float)) and not isinstance(amount, bool) and amount > 0:
                total += amount
    return total or None


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
    batch = Batch(NAME)
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    for size in sizes:
        if not isinstance(size, dict) or not isinstance(size.get("slug"), str) or not size["slug"].strip():
            batch.quarantine("offer", "?", "schema: a size lacks 'slug'", size)
            continue
        slug = size["slug"]
        if not size.get("gpu_info"):
            skipped["CPU-only sizes"] += 1
            continue
        if batch.listed_again(seen, slug, f"size slug {slug}", size):
            continue
        try:
            _add_size(batch, slug, size)
        except _BadRecord as err:
            batch.quarantine("offer", slug, f"{slug}: {err}", size)
    _add_documented_terms(batch)
    gpu_sizes = len(seen)
    batch.notes.append(f"digitalocean: {len(sizes)} sizes listed, {gpu_sizes} GPU sizes; skipped: "
                       + (", ".join(f"{n} {why}" for why, n in sorted(skipped.items())) or "none"))
    return batch


def _add_size(batch: Batch, slug: str, size: dict[str, Any]) -> None:
    model, exact, reported, count, per_gpu = size_gpus(size)
    if "price_hourly" not in size:
        raise _BadRecord("lacks 'price_hourly'")
    price = _number(size["price_hourly"], "price_hourly")
    currency = stated_currency(size)
    if currency not in (None, "USD"):
        raise _BadRecord(f"price in {currency}, not USD; no conversion is configured")
    regions = size.get("regions")
    if not isinstance(regions, list):
        raise _BadRecord("schema: 'regions' is not a list")
    names = sorted({str(r) for r in regions if isinstance(r, str) and r.strip()})
    creatable = size.get("available", True) is not False
    ram_mb = size.get("memory")
    vcpus = size.get("vcpus")
    data = {"price_monthly": size.get("price_monthly"), "description": size.get("description"),
            "transfer_tb_per_month": size.get("transfer"), "regions": names, "size_available": creatable,
            "gpu_model_reported": reported, "vram_gib_total": per_gpu * count,
            "scratch_disk_gib": _disk(size, "scratch"),
            "networking_throughput_mbps": size.get("networking_throughput")}
    common = dict(
        zone="", instance_type=slug, purchase_option="on_demand",
        gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=reported, gpu_vendor=model.vendor,
        gpu_count=count, gpu_memory_gb=per_gpu, gpu_memory_gb_nominal=model.memory_gb,
        total_gpu_memory_gb=per_gpu * count,
        vcpus=vcpus if isinstance(vcpus, (int, float)) and not isinstance(vcpus, bool) and vcpus > 0 else None,
        ram_gb=ram_mb / 1024 if isinstance(ram_mb, (int, float)) and ram_mb > 0 else None,
        local_disk_gb=_disk(size, "local") or _disk(size, "boot"),
        price_per_hour=price, source_currency="USD", source_price_per_hour=price,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
        provider_data=json.dumps(data, sort_keys=True),
    )
    if not names:
        batch.offer(f"{slug}/{GLOBAL_REGION}", size, region=GLOBAL_REGION, available=False, available_count=0,
                    availability_level="no region offers the size now", **common)
        return
    for region in names:
        batch.offer(f"{slug}/{region}", size, region=region, available=creatable,
                    available_count=None if creatable else 0,
                    availability_level="region offers the size" if creatable
                    else "region listed, but the size is not available for new Droplets", **common)


def _add_documented_terms(batch: Batch) -> None:
    """Volumes and outbound transfer: DigitalOcean's pricing pages, not the API."""
    volume = round(VOLUME_USD_PER_GIB_MONTH * GIB_PER_GB, 6)
    batch.add("storage", f"{GLOBAL_REGION}/volume", {"source": PROVIDER.facts.source_urls[3]},
              region=GLOBAL_REGION, storage_class="volume", usd_per_gb_month=volume, source_currency="USD",
              source_usd_per_gb_month=volume,
              description="block-storage volume, 0.10 USD per GiB-month (= 0.093132 per GB), billed whether or "
                          "not attached; same in every region")
    transfer = round(TRANSFER_OVERAGE_USD_PER_GIB * GIB_PER_GB, 6)
    batch.add("egress", f"{GLOBAL_REGION}/internet", {"source": PROVIDER.facts.source_urls[1]},
              region=GLOBAL_REGION, destination="internet", tier_start_gb=0.0, tier_end_gb=None,
              usd_per_gb=transfer, source_currency="USD", source_usd_per_gb=transfer,
              description="outbound transfer beyond the team's pooled allowance (each Droplet adds its size's "
                          "transfer_tb_per_month, in provider_data): 0.01 USD per GiB (= 0.009313 per GB); "
                          "inbound is free")


# -- fetching ---------------------------------------------------------------------

def _next_page(doc: Any) -> dict[str, str] | None:
    """The query of the answer's `links.pages.next`, if it has one."""
    links = doc.get("links") if isinstance(doc, dict) else None
    pages = links.get("pages") if isinstance(links, dict) else None
    nxt = pages.get("next") if isinstance(pages, dict) else None
    if not isinstance(nxt, str) or not nxt.strip():
        return None
    url = urlsplit(nxt)
    if url.netloc and url.netloc != API_HOST:
        raise SourceError(f"digitalocean: the sizes' next page is on another host: {nxt[:120]}")
    if url.path.rstrip("/") != SIZES_PATH:
        raise SourceError(f"digitalocean: the sizes' next page is another path: {nxt[:120]}")
    return dict(parse_qsl(url.query))


def fetch_sizes(ctx: SourceContext) -> list[Any]:
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token and ctx.reaches_provider:
        raise MissingCredentialsError(f"digitalocean: {TOKEN_ENV} is not set; the sizes API needs a token")
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    pages: list[Any] = []
    params = {"page": "1", "per_page": str(PER_PAGE)}
    with ctx.http_client(headers=headers) as client:
        for _ in range(MAX_PAGES):
            doc = ctx.get_json(client, API_HOST, SIZES_PATH, params=params)
            pages.append(doc)
            nxt = _next_page(doc)
            if nxt is None:
                return pages
            if nxt == params:
                raise SourceError("digitalocean: the sizes' next page is the page just read")
            params = nxt
    raise SourceError(f"digitalocean: {SIZES_PATH} still had a next page after {MAX_PAGES} pages")


def fetch(ctx: SourceContext) -> Batch:
    """One request (more if the answer pages): every Droplet size with its price and regions."""
    return parse_sizes(fetch_sizes(ctx))
