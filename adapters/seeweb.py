"""Seeweb: Cloud Server GPU plans and their hourly price per region, in EUR.

`GET https://api.seeweb.it/ecs/v2/plans` with the API token in `X-APITOKEN` (env ECSAPI_TOKEN, the
name Seeweb's ecsapi SDK reads), one answer; `ram` is MB, `disk` GB, all text. Prices are EUR (the
answer names no currency): converted at the setting `seeweb_usd_per_eur`, quarantined without it.
One on-demand offer per GPU plan and region it lists; the memory per GPU is read from the label.
"""

from __future__ import annotations

import re
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts
from gpuledger.warehouse.settings import env_name

NAME, API_HOST, PLANS_PATH, API_KEY_ENV = "seeweb", "api.seeweb.it", "/ecs/v2/plans", "ECSAPI_TOKEN"
RATE_SETTING = "seeweb_usd_per_eur"
_LABEL = re.compile(r"^\s*(?P<name>.+?)\s+(?P<mem>\d+)\s*GB\s*$", re.I)  # "H100 80GB"; "A30" states none

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,), credentials_required=True,
    facts=ProviderFacts(
        display_name="Seeweb", kind="gpu_cloud", billing_granularity_s=3600, minimum_charge_s=3600,
        billing_notes="Cloud Server GPU is billed per hour in EUR before VAT, or monthly (seeweb.it); EUR prices "
                      "are converted at the configured rate.",
        stopped_billing_notes="A server bills until it is deleted; powering it off is not documented as "
                              "pausing the charge.",
        access_ssh=True,
        price_source="Seeweb ECS API GET api.seeweb.it/ecs/v2/plans (API token)",
        source_urls=["https://www.seeweb.it/en/products/cloud-server-gpu", "https://pypi.org/project/ecsapi/",
                     "https://github.com/skypilot-org/skypilot-catalog/tree/master/catalogs/v7/seeweb"]),
)


@drift_guard("seeweb: plans")
def parse_plans(doc: Any, usd_per_eur: float | None) -> Batch:
    plans = dig(doc, "plans")
    if not isinstance(plans, list):
        raise SchemaDriftError("seeweb: the plans answer lacks the 'plans' list")
    gpu = [p for p in plans if isinstance(p, dict) and str(p.get("gpu") or "0").strip() not in ("", "0")]
    if not gpu:
        raise SourceError("seeweb: the plans answer returned no GPU plans")
    if not any("hourly_price" in p for p in gpu):
        raise SchemaDriftError("seeweb: no GPU plan has an 'hourly_price' (the answer changed shape)")
    batch, seen, unplaced = PROVIDER.batch(), set[str](), []
    for plan in gpu:
        _add(batch, plan, usd_per_eur, seen, unplaced)
    batch.notes.append(f"seeweb: {len(gpu)} GPU plans of {len(plans)} listed, {len(unplaced)} offered in no region "
                       f"now ({', '.join(unplaced) or 'none'}); "
                       + (f"EUR converted at {usd_per_eur:g} USD per EUR ({RATE_SETTING})" if usd_per_eur
                          else f"no {RATE_SETTING} rate is set, so every EUR price was quarantined"))
    return batch


def _add(batch: Batch, plan: dict[str, Any], usd_per_eur: float | None, seen: set[str], unplaced: list[str]) -> None:
    name = str(plan.get("name") or "?")
    if batch.listed_again(seen, name, f"plan {name}", plan):
        return
    try:
        count = as_number(plan.get("gpu"), "gpu", ValueError)
        eur = as_number(plan.get("hourly_price"), "hourly_price", ValueError)
        regions = [str(r["location"]) for r in plan.get("available_regions") or []]
        cpu, ram, disk = (as_number(plan.get(k) or 0, k, ValueError) for k in ("cpu", "ram", "disk"))
    except (KeyError, TypeError, ValueError) as err:
        return batch.quarantine("offer", name, f"{name}: {err}", plan)
    if not regions:
        return unplaced.append(name)
    if not usd_per_eur:
        return batch.quarantine("offer", name, f"{name}: price in EUR, not USD; no conversion is configured "
                                               f"(set {env_name(RATE_SETTING)})", plan)
    label = str(plan.get("gpu_label") or "")
    m = _LABEL.match(label)
    data = {"plan_id": plan.get("id"), "gpu_label": label, "eur_per_month": plan.get("montly_price"),
            "usd_per_eur": usd_per_eur, "host_type": plan.get("host_type")}
    for region in regions:
        batch.offer(f"{name}/{region}", plan, gpu=m.group("name") if m else label,
                    gpu_memory_gb=float(m.group("mem")) if m else None, gpu_count=count, region=region,
                    instance_type=name, purchase_option="on_demand", price_per_hour=eur * usd_per_eur,
                    source_currency="EUR", source_price_per_hour=eur, vcpus=cpu or None,
                    ram_gb=round(ram / 1024, 3) or None, local_disk_gb=disk or None,
                    available=bool(plan.get("available")), provider_data=data)


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV, "X-APITOKEN: {key}", needs="the plans API needs an API token") as client:
        usd_per_eur = ctx.usd_per_eur(RATE_SETTING)
        return parse_plans(ctx.get_json(client, API_HOST, PLANS_PATH), usd_per_eur)
