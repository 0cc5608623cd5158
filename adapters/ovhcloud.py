"""OVHcloud Public Cloud: hourly GPU flavors from the public order catalog (no key, one answer).

`GET https://ca.api.ovh.com/1.0/order/catalog/public/cloud?ovhSubsidiary=WE`: `addons` are plans, a GPU
flavor's `blobs.technical` its hardware, its `pricings` in 10^-8 of the locale's currency (WE, the
international subsidiary, is USD; another is quarantined). Monthly plans and Windows ("win-") flavors are
counted; a flavor's regions are all its plans'.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME, API_HOST, CATALOG_PATH = "ovhcloud", "ca.api.ovh.com", "/1.0/order/catalog/public/cloud"
SUBSIDIARY = "WE"  # OVHcloud's international subsidiary, priced in USD
PRICE_UNIT = 1e8  # the catalog's "micro-cents": 10^-8 of the currency unit

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api",
    facts=ProviderFacts(
        display_name="OVHcloud", kind="gpu_cloud", billing_granularity_s=3600, minimum_charge_s=3600,
        billing_notes="Hourly instances are billed per hour from creation to deletion (Public Cloud billing guide).",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped instance keeps its resources reserved and is billed as running; only "
                              "deleting it (or shelving, which bills its snapshot) ends the instance charge.",
        access_ssh=True, access_docker=True,
        price_source="OVHcloud order catalog API GET /1.0/order/catalog/public/cloud?ovhSubsidiary=WE (no key)",
        source_urls=["https://ca.api.ovh.com/console/?section=%2Forder&branch=v1", "https://www.ovhcloud.com/en/"
                     "public-cloud/prices/", "https://support.us.ovhcloud.com/hc/en-us/articles/22179651508115"]),
)


@drift_guard("ovhcloud: public cloud catalog")
def parse_catalog(doc: Any) -> Batch:
    """The catalog answer -> one on-demand offer per hourly GPU flavor and region."""
    addons = dig(doc, "addons")
    if not isinstance(addons, list):
        raise SchemaDriftError("ovhcloud: the catalog answer lacks the 'addons' list")
    gpu = [a for a in addons if isinstance(a, dict) and dig(a, "blobs", "technical", "gpu")]
    if not gpu:
        raise SourceError("ovhcloud: the catalog returned no GPU flavors")
    hourly = [a for a in gpu if str(a.get("planCode", "")).endswith(".consumption")]
    if not any("price" in p for a in hourly for p in a.get("pricings") or [] if isinstance(p, dict)):
        raise SchemaDriftError("ovhcloud: no hourly GPU plan has a 'price' in its pricings (the catalog changed shape)")
    regions: dict[str, set[str]] = defaultdict(set)
    for a in gpu:
        for c in a.get("configurations") or []:
            if dig(c, "name") == "region":
                regions[str(a.get("invoiceName"))].update(map(str, c.get("values") or []))
    batch, skipped, seen = PROVIDER.batch(), Counter[str](), set[str]()
    for a in gpu:
        code, flavor = str(a.get("planCode") or "?"), str(a.get("invoiceName") or "?")
        if not code.endswith(".consumption") or flavor.startswith("win-"):
            skipped["Windows flavors" if flavor.startswith("win-") else "monthly plans"] += 1
        elif not batch.listed_again(seen, code, f"plan {code}", a):
            _add(batch, a, code, flavor, sorted(regions[flavor]), dig(doc, "locale", "currencyCode"))
    batch.note_skipped(f"ovhcloud: {len(gpu)} GPU plans in the {dig(doc, 'locale', 'subsidiary')} catalog", skipped)
    return batch


def _add(batch: Batch, a: dict[str, Any], code: str, flavor: str, regions: list[str], currency: Any) -> None:
    tech = a["blobs"]["technical"]
    try:
        [p, *_] = [p for p in a.get("pricings") or [] if "consumption" in (dig(p, "capacities") or [])] or [{}]
        if p.get("intervalUnit") != "hour" or not regions:
            raise ValueError(f"consumption priced per {p.get('intervalUnit')!r}, not per hour" if regions
                             else "no plan of the flavor lists a region")
        price = as_number(p.get("price"), "price", ValueError) / PRICE_UNIT / float(p.get("interval") or 1)
        count = as_number(dig(tech, "gpu", "number"), "gpu number", ValueError)
    except (TypeError, ValueError) as err:
        return batch.quarantine("offer", code, f"{code}: {err}", a)
    if not batch.usd_only("offer", code, currency, a):
        return
    level = dig(tech, "bandwidth", "level")
    disks = [d for d in dig(tech, "storage", "disks") or [] if isinstance(d, dict)]
    for region in regions:
        batch.offer(f"{flavor}/{region}", a, gpu=str(dig(tech, "gpu", "model") or ""),
                    gpu_memory_gb=dig(tech, "gpu", "memory", "size"), gpu_count=count, region=region,
                    instance_type=flavor, purchase_option="on_demand", price_per_hour=price,
                    vcpus=dig(tech, "cpu", "cores"), ram_gb=dig(tech, "memory", "size"),
                    local_disk_gb=sum(d.get("capacity", 0) * d.get("number", 1) for d in disks) or None,
                    network_gbps=level / 1000 if isinstance(level, (int, float)) else None,
                    provider_data={"plan_code": code, "disks": disks})


def fetch(ctx: SourceContext) -> Batch:
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        return parse_catalog(ctx.get_json(client, API_HOST, CATALOG_PATH, params={"ovhSubsidiary": SUBSIDIARY}))
