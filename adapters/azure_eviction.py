"""Azure Spot eviction rates (bands `0-5` .. `20+` percent per size and region) from Resource Graph's
`SpotResources` table, paged by `$skipToken`: an enrichment of the spot offers. The bearer token comes from
DefaultAzureCredential (none in a replay); without one the rates are skipped and the notes say so."""

from __future__ import annotations

import os
from typing import Any

import httpx

from gpuledger.adapters import bounds
from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, register_secret
from gpuledger.warehouse import interruption
from gpuledger.warehouse.records import Batch

EVICTION_RATES = "spot eviction rates"
RESOURCE_GRAPH_HOST = "management.azure.com"
RESOURCE_GRAPH_PATH = "/providers/Microsoft.ResourceGraph/resources"
RESOURCE_GRAPH_API_VERSION = "2022-10-01"
TOKEN_SCOPE = "https://management.azure.com/.default"
PAGE_ROWS = 1000  # Resource Graph's largest $top
# Azure's chain probes several credentials (a managed identity endpoint, the az CLI), each with its own waits.
TOKEN_TIMEOUT_S = 60.0
WHAT = "Resource Graph spot eviction rates"
# EnvironmentCredential's secrets (a service principal's client secret or certificate password, a user's password).
CHAIN_SECRET_VARS = ("AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PASSWORD", "AZURE_PASSWORD")

# Sizes of the GPU families only (Standard_NC/ND/NG/NV; `startswith` ignores case in KQL).
QUERY = (
    "spotresources | where type =~ 'microsoft.compute/skuspotevictionrate/location' "
    "| where tostring(sku.name) startswith 'Standard_N' "
    "| project skuName = tostring(sku.name), location = tostring(location), "
    "evictionRate = tostring(properties.evictionRate) "
    "| order by skuName asc, location asc"
)


def bearer_token(ctx: SourceContext) -> tuple[str | None, str | None]:
    """(token, None), or (None, why) when no credential of Azure's chain gives one; (None, None) in a replay."""
    if not ctx.reaches_provider:
        return None, None
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity import CredentialUnavailableError, DefaultAzureCredential

    # The secrets Azure's chain reads from the environment: its token endpoint may quote one back in an error,
    # which azure-identity logs as a warning (relayed from the fetch worker, redacted).
    for name in CHAIN_SECRET_VARS:
        register_secret(os.environ.get(name, "").strip() or None)
    try:
        with DefaultAzureCredential(exclude_interactive_browser_credential=True) as credential:
            token = credential.get_token(TOKEN_SCOPE).token
    except (CredentialUnavailableError, ClientAuthenticationError) as err:
        # The chain's message lists every credential it tried; the first line says enough.
        return None, f"no Azure credentials ({type(err).__name__}: {str(err).splitlines()[0][:160]})"
    register_secret(token)
    return token, None


def request_body(skip_token: str | None) -> dict[str, Any]:
    token = {"$skipToken": skip_token} if skip_token else {}
    return {"query": QUERY, "options": {"resultFormat": "objectArray", "$top": PAGE_ROWS, **token}}


def parse_page(doc: Any) -> list[dict[str, str]]:
    """A Resource Graph answer -> its rows."""
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise SchemaDriftError("azure: Resource Graph answer has no `data` row list (resultFormat objectArray)")
    for row in doc["data"]:
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("skuName", "location")):
            raise SchemaDriftError(f"azure: Resource Graph row lacks skuName/location: {str(row)[:120]}")
    return doc["data"]


def next_page(doc: Any, rows: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
    """The same query with the answer's `$skipToken`, or None on the last page."""
    token = doc.get("$skipToken")
    return {**request, "json": request_body(token)} if token else None


def fetch_eviction_rates(ctx: SourceContext, client: httpx.Client) -> dict[tuple[str, str], str]:
    """(region, lower-case size) -> Azure's band label, every page of the query."""
    rows = ctx.paginate(client, RESOURCE_GRAPH_HOST, RESOURCE_GRAPH_PATH, parse_page, next_page, method="POST",
                        params={"api-version": RESOURCE_GRAPH_API_VERSION}, json=request_body(None), what=WHAT,
                        cap="azure_max_pages")
    rates = {(row["location"].lower(), row["skuName"].lower()): str(row.get("evictionRate") or "") for row in rows}
    if not rates:  # every GPU size has a rate somewhere: none at all is no answer, not "no size has a rate"
        raise SchemaDriftError("azure: Resource Graph answered no spot eviction rates (0 rows; it answers for the "
                               "subscriptions the identity can read)")
    return rates


def signed_in_rates(ctx: SourceContext, client: httpx.Client) -> dict[tuple[str, str], str] | str:
    """The rates, asked with a token of Azure's chain; or why there is no token to ask with."""
    try:
        token, missing = bounds.within(TOKEN_TIMEOUT_S, lambda: bearer_token(ctx))
    except httpx.ReadTimeout:  # the chain's own waits are its credentials', minutes each
        raise SourceError(f"azure: no token from Azure's credential chain within {TOKEN_TIMEOUT_S:g} s") from None
    if missing:
        return missing
    if token:
        client.headers["Authorization"] = f"Bearer {token}"
    return fetch_eviction_rates(ctx, client)


def add_eviction_rates(ctx: SourceContext, client: httpx.Client, batch: Batch, timeout_s: float = 600.0) -> None:
    """Give the batch's spot offers their size and region's eviction rate and risk fields; note what was found."""
    spot = [i for i, o in enumerate(batch.offers) if o.purchase_option == "spot"]
    rates = ctx.enrich(EVICTION_RATES, signed_in_rates, ctx, client, timeout_s=timeout_s)
    if isinstance(rates, str):  # no credentials: a choice, not a failure
        batch.notes.append(f"azure: spot eviction rates skipped: {rates}; {len(spot)} spot offers have "
                           "interruption_risk_level unknown")
        return
    if rates is None:
        return
    rated = 0
    for i in spot:
        offer = batch.offers[i]
        label = rates.get((offer.region.lower(), offer.instance_type.lower()))
        risk = interruption.from_rate_band(label, interruption.AZURE_EVICTION_RATE)
        if risk["interruption_risk_source"] == interruption.AZURE_EVICTION_RATE:
            rated += 1
            batch.offers[i] = offer.model_copy(update={"interruption_risk": label, **risk})
    batch.notes.append(f"azure: spot eviction rates: {len(rates)} rows in {ctx.pages[WHAT]} pages from Resource "
                       f"Graph; {rated} of {len(spot)} spot offers have one, {len(spot) - rated} unknown")
