"""Azure Spot eviction rates, from Azure Resource Graph, for the interruption-risk scale.

Source: one Resource Graph query of the `SpotResources` table, `POST
https://management.azure.com/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01`
with a JSON body `{"query": ..., "options": {"resultFormat": "objectArray", "$top": 1000}}`, paged
by the answer's `$skipToken` (sent back in `options`). The answer (Resource Graph REST reference,
"Resources - Resources"): `{"totalRecords", "count", "data": [row, ...], "facets", "resultTruncated",
"$skipToken"}`; each row here is `{"skuName", "location", "evictionRate"}`, the rate one of Azure's
bands `0-5`, `5-10`, `10-15`, `15-20`, `20+` (percent of spot VMs of that size evicted in that
region over the trailing weeks).

Resource Graph needs a signed-in identity: the bearer token comes from azure-identity's
DefaultAzureCredential (AZURE_TENANT_ID / AZURE_CLIENT_ID / AZURE_CLIENT_SECRET, workload or
managed identity, `az login`). Without one the rates are skipped and the scrape's notes say so and
count the spot offers left `unknown`; Azure's prices load either way. A replay sends no token.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, register_secret
from gpuledger.warehouse import interruption
from gpuledger.warehouse.records import Batch

log = logging.getLogger("gpuledger.adapters.azure")

RESOURCE_GRAPH_HOST = "management.azure.com"
RESOURCE_GRAPH_PATH = "/providers/Microsoft.ResourceGraph/resources"
RESOURCE_GRAPH_API_VERSION = "2022-10-01"
TOKEN_SCOPE = "https://management.azure.com/.default"
PAGE_ROWS = 1000  # Resource Graph's largest $top
MAX_PAGES = 50

# Sizes of the GPU families only (Standard_NC/ND/NG/NV; `startswith` ignores case in KQL).
QUERY = (
    "spotresources | where type =~ 'microsoft.compute/skuspotevictionrate/location' "
    "| where tostring(sku.name) startswith 'Standard_N' "
    "| project skuName = tostring(sku.name), location = tostring(location), "
    "evictionRate = tostring(properties.evictionRate) "
    "| order by skuName asc, location asc"
)


@dataclass
class EvictionRates:
    rates: dict[tuple[str, str], str]  # (region, lower-case size) -> Azure's band label
    pages: int


def bearer_token(ctx: SourceContext) -> tuple[str | None, str | None]:
    """(token, None), or (None, why) when no credential of Azure's chain gives one. A replay
    needs none: (None, None)."""
    if not ctx.reaches_provider:
        return None, None
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity import CredentialUnavailableError, DefaultAzureCredential

    try:
        with DefaultAzureCredential(exclude_interactive_browser_credential=True) as credential:
            token = credential.get_token(TOKEN_SCOPE).token
    except (CredentialUnavailableError, ClientAuthenticationError) as err:
        # The chain's message lists every credential it tried; the first line says enough.
        return None, f"no Azure credentials ({type(err).__name__}: {str(err).splitlines()[0][:160]})"
    register_secret(token)
    return token, None


def request_body(skip_token: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {"resultFormat": "objectArray", "$top": PAGE_ROWS}
    if skip_token:
        options["$skipToken"] = skip_token
    return {"query": QUERY, "options": options}


def parse_page(doc: Any) -> tuple[list[dict[str, str]], str | None]:
    """A Resource Graph answer -> (rows, $skipToken of the next page or None)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise SchemaDriftError("azure: Resource Graph answer has no `data` row list (resultFormat objectArray)")
    rows = []
    for row in doc["data"]:
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("skuName", "location")):
            raise SchemaDriftError(f"azure: Resource Graph row lacks skuName/location: {str(row)[:120]}")
        rows.append(row)
    return rows, doc.get("$skipToken") or None


def fetch_eviction_rates(ctx: SourceContext, client: httpx.Client, token: str | None) -> EvictionRates:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    params = {"api-version": RESOURCE_GRAPH_API_VERSION}
    rates: dict[tuple[str, str], str] = {}
    skip_token: str | None = None
    for page in range(1, MAX_PAGES + 1):
        doc = ctx.post_json(client, RESOURCE_GRAPH_HOST, RESOURCE_GRAPH_PATH, params=params, headers=headers,
                            json=request_body(skip_token))
        rows, skip_token = parse_page(doc)
        for row in rows:
            rates[(row["location"].lower(), row["skuName"].lower())] = str(row.get("evictionRate") or "")
        if not skip_token:
            return EvictionRates(rates, page)
    raise SourceError(f"azure: Resource Graph paging did not end after {MAX_PAGES} pages")


def add_eviction_rates(ctx: SourceContext, client: httpx.Client, batch: Batch) -> None:
    """Give the batch's spot offers the eviction rate of their size and region (their
    `interruption_risk` and the scale's fields), and note what was found; without credentials,
    or when Resource Graph fails, the spot offers stay `unknown` and the note says why."""
    spot = [i for i, o in enumerate(batch.offers) if o.purchase_option == "spot"]
    token, missing = bearer_token(ctx)
    if missing:
        batch.notes.append(f"azure: spot eviction rates skipped: {missing}; {len(spot)} spot offers have "
                           "interruption_risk_level unknown")
        return
    try:
        found = fetch_eviction_rates(ctx, client, token)
    except SourceError as err:
        batch.notes.append(f"azure: spot eviction rates failed: {err}; {len(spot)} spot offers have "
                           "interruption_risk_level unknown")
        return
    rated = 0
    for i in spot:
        offer = batch.offers[i]
        label = found.rates.get((offer.region.lower(), offer.instance_type.lower()))
        risk = interruption.from_rate_band(label, interruption.AZURE_EVICTION_RATE)
        if risk["interruption_risk_source"] == interruption.AZURE_EVICTION_RATE:
            rated += 1
            batch.offers[i] = offer.model_copy(update={"interruption_risk": label, **risk})
    batch.notes.append(f"azure: spot eviction rates: {len(found.rates)} rows in {found.pages} pages from Resource "
                       f"Graph; {rated} of {len(spot)} spot offers have one, {len(spot) - rated} unknown")
