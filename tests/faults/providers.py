"""What each fault means for each provider's wire format, and what must come of it.

Every provider gets the same faults. Transport and HTTP faults hit the
provider's `target` request (the one that carries its prices); data faults
rewrite recorded bodies before the real client sees them. Each data edit is a
plausible change of the provider's own format: a field renamed or dropped,
a table emptied, a price in cents read as dollars, a currency switch, a
duplicated entry. `victim` names the one wire record a row-level fault
corrupts, so the test can check that exactly its records were quarantined.

A row-level fault also has an oracle: the same body with the bad record
removed (or, where the adapter by design refuses both sides of a conflict,
with both removed). The faulted run must load exactly what the oracle run
loads: the bad record quarantined, nothing else lost or changed.
"""

from __future__ import annotations

import copy
import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gpuledger.adapters import registry
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Request
from tests.faults.shapes import edit_json, load_shape

FAULTS = (
    "refused", "timeout", "reset", "http_429", "http_500", "http_503_once", "truncated", "schema_drift", "empty",
    "rows_90pct_gone", "price_x100", "price_negative", "price_nan", "currency", "duplicates", "layout",
)
DATA_FAULTS = ("schema_drift", "empty", "rows_90pct_gone", "price_x100", "price_negative", "price_nan", "currency",
               "duplicates", "layout")
ROW_LEVEL = ("price_negative", "price_nan", "duplicates")

# What must come of a fault unless a provider says otherwise:
#   fail:       the provider's load fails; its rows stay byte for byte
#   quarantine: the provider loads; exactly the bad records are quarantined
#   recover:    a retry gets through; the provider loads the same rows
DEFAULT_OUTCOME = {f: "fail" for f in FAULTS} | {f: "quarantine" for f in ROW_LEVEL} | {"http_503_once": "recover"}

# What scrape_runs.error must say for a failed provider.
ERROR_PATTERNS = {
    "refused": r"(?i)refused|ConnectError|connect|Could not connect|failed: .*Connection",
    "timeout": r"(?i)time.?d? ?out",
    "reset": r"(?i)reset|closed|incomplete|RemoteProtocolError|ReadError|broken|ProtocolError|ResponseFailed|"
             r"connection|peer|DataLoss",
    "http_429": r"429",
    "http_500": r"500",
    "truncated": r"(?i)not JSON|answer JSON|not valid JSON|truncat|pars|partial|incomplete|ends before|could not|no price rows|"
                 r"did not appear",
    "schema_drift": r"(?i)lacks|schema|missing|no valid|column|priced offer|changed shape",
    "empty": r"(?i)no valid offers|empty|has no (price )?rows|returned no|no GPU machine types",
    "rows_90pct_gone": r"anomaly guard: .*rows? (count )?dropped",
    # every price x100 is past its GPU's plausible ceiling (quarantined, nothing left to load), or
    # a median the anomaly guard refuses
    "price_x100": r"anomaly guard: .*median price|plausib|no valid (priced )?offer",
    "currency": r"(?i)no valid offers|EUR|currency|priced offer",
    "layout": r"(?i)layout changed",
}
# What a quarantined victim's reason must say.
REASON_PATTERNS = {
    "price_negative": r"(?i)positive|negative",
    "price_nan": r"(?i)finite|nan|no price|not a number|not numeric|invalid",
    "duplicates": r"(?i)duplicate|disagree|conflict",
}


@dataclass
class Edit:
    """One fault's body edits for one run; `victim` is filled in by the edit that picks it."""

    fault: str
    oracle: bool = False
    victim: str | None = None
    state: dict[str, Any] = field(default_factory=dict)


def _every_request(host: str, req: Request) -> bool:
    return True


@dataclass
class ProviderFaults:
    name: str
    target: Callable[[str, Request], bool] = _every_request  # the request transport/HTTP faults hit
    truncate: Callable[[str, Request], bool] = _every_request  # the request whose body is cut in half
    refuse: tuple[str, ...] = ()  # hosts whose port refuses connections; (): every recorded host
    # Data faults: the new body, or None to leave it alone. None: the source declared no body
    # shape, and every data fault's cell fails saying so.
    edit: Callable[[Edit, str, Request, bytes], bytes | None] | None = None
    outcome: dict[str, str] = field(default_factory=dict)  # overrides of DEFAULT_OUTCOME ("n/a" allowed)
    errors: dict[str, str] = field(default_factory=dict)  # overrides of ERROR_PATTERNS
    timeout_s: float = 5.0  # client timeout under the "timeout" fault
    settings: dict[str, Any] = field(default_factory=dict)  # source settings for every run
    targets: dict[str, Callable[[str, Request], bool]] = field(default_factory=dict)  # per-fault `target`
    # The oracle of a row-level fault: "removed" (the body with the victim taken out, fetched) or
    # "clean" (the fault only adds a record, so the clean scrape is what must be loaded).
    oracles: dict[str, str] = field(default_factory=lambda: {"price_negative": "removed", "price_nan": "removed",
                                                             "duplicates": "clean"})

    source_kind: str = "api"  # ProviderSpec.source_kind: an API has no page layout to change

    def expected(self, fault: str) -> str:
        if fault in self.outcome:
            return self.outcome[fault]
        if fault == "layout" and self.source_kind == "api":
            return "n/a"
        return DEFAULT_OUTCOME[fault]

    def hit(self, fault: str, host: str, req: Request) -> bool:
        """Does this fault hit this request?"""
        return self.targets.get(fault, self.target)(host, req)


def _json(body: bytes) -> Any:
    return json.loads(body)


def _dump(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


def _scaled(text: str, factor: float) -> str:
    return f"{float(text) * factor:.4f}"


# -- Lambda: one JSON body {"data": {key: {"instance_type": {...}, "regions_with_capacity_available": [...]}}} --

def _lambda_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    doc = _json(body)
    data = doc["data"]
    gpu_keys = sorted(k for k, v in data.items() if v["instance_type"]["specs"]["gpus"] > 0)
    victim = gpu_keys[0]
    e.victim = data[victim]["instance_type"]["name"]
    itypes = [v["instance_type"] for v in data.values()]
    if e.fault == "empty":
        doc["data"] = {}
    elif e.fault == "rows_90pct_gone":
        doc["data"] = {k: data[k] for k in gpu_keys[: max(1, len(gpu_keys) // 10)]}
    elif e.fault == "price_x100":
        for it in itypes:
            it["price_cents_per_hour"] *= 100  # dollars where cents were meant: a unit change
    elif e.fault in ("price_negative", "price_nan"):
        if e.oracle:
            del data[victim]
        else:
            it = data[victim]["instance_type"]
            it["price_cents_per_hour"] = -it["price_cents_per_hour"] if e.fault == "price_negative" else math.nan
    elif e.fault == "currency":
        for it in itypes:
            it["currency"] = "EUR"
    elif e.fault == "duplicates":
        if not e.oracle:  # a second entry for the same instance type, at another price
            dup = copy.deepcopy(data[victim])
            dup["instance_type"]["price_cents_per_hour"] += 7
            data[victim + "_again"] = dup
    elif e.fault == "schema_drift":
        for it in itypes:
            del it["price_cents_per_hour"]
    else:
        return None
    return _dump(doc)


LAMBDA = ProviderFaults(
    name="lambda",
    target=lambda host, req: req.path == "/api/v1/instance-types",
    truncate=lambda host, req: req.path == "/api/v1/instance-types",
    refuse=("cloud.lambda.ai",),
    edit=_lambda_edit,
    outcome={"layout": "n/a"},
)


# -- RunPod: one GraphQL answer {"data": {"gpuTypes": [...]}} --------------------------------------------------

_RUNPOD_PRICES = ("securePrice", "communityPrice", "secureSpotPrice", "communitySpotPrice")


def _runpod_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    if (req.json_body() or {}).get("operationName") != "GpuTypePrices":
        return None  # the stock answer (an enrichment) holds no prices
    doc = _json(body)
    types = doc["data"]["gpuTypes"]
    victim = next(t for t in sorted(types, key=lambda t: t["id"]) if t["securePrice"] is not None
                  and t["secureCloud"] and "Tesla" not in t["id"])
    e.victim = victim["id"]
    if e.fault == "empty":
        doc["data"]["gpuTypes"] = []
    elif e.fault == "rows_90pct_gone":
        doc["data"]["gpuTypes"] = types[: max(1, len(types) // 10)]
    elif e.fault == "price_x100":
        for t in types:
            for f in _RUNPOD_PRICES:
                if t[f] is not None:
                    t[f] *= 100
    elif e.fault in ("price_negative", "price_nan"):
        if e.oracle:
            victim["securePrice"] = None  # not sold that way: exactly its one record gone
        else:
            victim["securePrice"] = -victim["securePrice"] if e.fault == "price_negative" else math.nan
    elif e.fault == "currency":
        for t in types:
            t["currency"] = "EUR"
    elif e.fault == "duplicates":
        if not e.oracle:
            dup = copy.deepcopy(victim)
            dup["securePrice"] = round(dup["securePrice"] + 0.11, 4)
            types.insert(types.index(victim) + 1, dup)
    elif e.fault == "schema_drift":
        for t in types:
            del t["securePrice"]
    else:
        return None
    return _dump(doc)


RUNPOD = ProviderFaults(
    name="runpod",
    target=lambda host, req: req.path == "/graphql",
    truncate=lambda host, req: req.path == "/graphql",
    refuse=("api.runpod.io",),
    edit=_runpod_edit,
    outcome={"layout": "n/a"},
)


# -- Vast.ai: search pages {"offers": [...]} walked by id ------------------------------------------------------

def _vast_victim(offers: list[dict[str, Any]]) -> dict[str, Any]:
    from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize

    for o in offers[:-1]:  # never the page's last offer: its id is the next page's cursor
        try:
            canonicalize("vastai", o["gpu_name"], o.get("gpu_ram"))
        except UnknownGPUError:
            continue
        if o.get("num_gpus", 0) > 0 and o.get("dph_total"):
            return o
    raise AssertionError("no victim offer on the first page")


def _vast_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    doc = _json(body)
    offers = doc["offers"]
    if not offers:
        return None
    first_page = (req.json_body() or {}).get("id") is None
    if first_page:
        e.state["victim"] = _vast_victim(offers)["id"]
    e.victim = str(e.state.get("victim"))
    if e.fault == "empty":
        doc["offers"] = []
    elif e.fault == "rows_90pct_gone":
        # Keep the page's last offer (its id is the cursor of the next page) and a tenth of the rest.
        doc["offers"] = offers[:-1][::10][: max(0, len(offers) // 10 - 1)] + offers[-1:]
    elif e.fault == "price_x100":
        for o in offers:
            for f in ("dph_total", "min_bid", "dph_base"):
                if isinstance(o.get(f), (int, float)):
                    o[f] *= 100
    elif e.fault in ("price_negative", "price_nan"):
        if not first_page:
            return None
        victim = next(o for o in offers if o["id"] == e.state["victim"])
        if e.oracle:
            victim["dph_total"] = None  # its on-demand listing quarantined as "missing": the same offers
        else:
            victim["dph_total"] = -victim["dph_total"] if e.fault == "price_negative" else math.nan
    elif e.fault == "currency":
        for o in offers:
            o["currency"] = "EUR"
    elif e.fault == "duplicates":
        if not first_page or e.oracle:
            return None
        victim = next(o for o in offers if o["id"] == e.state["victim"])
        dup = dict(victim, dph_total=round(victim["dph_total"] * 1.5, 6))
        offers.insert(offers.index(victim) + 1, dup)  # the same offer id listed twice, at two prices
    elif e.fault == "schema_drift":
        for o in offers:
            o.pop("dph_total", None)
    else:
        return None
    return _dump(doc)


VASTAI = ProviderFaults(
    name="vastai",
    target=lambda host, req: req.path == "/api/v0/bundles/" and ((req.json_body() or {}).get("id") or {}).get("gt")
    == 12596887,  # page 2: a walk that fails half way must load nothing
    truncate=lambda host, req: req.path == "/api/v0/bundles/" and (req.json_body() or {}).get("id") is not None,
    refuse=("console.vast.ai",),
    edit=_vast_edit,
    outcome={"layout": "n/a"},
)


# -- Azure: Retail Prices pages {"Items": [...], "NextPageLink": ...}; three queries -----------------------------

def _azure_query(req: Request) -> str:
    f = req.params.get("$filter", "")
    return "vm" if "Virtual Machines" in f else ("storage" if "'Storage'" in f else "bandwidth")


def _azure_victim(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    from gpuledger.adapters.azure import GPU_SIZES, is_windows, purchase_option

    keys: dict[tuple[str, str, str], int] = {}
    for i in items:
        keys[(i["armRegionName"], i.get("armSkuName", ""), purchase_option(i))] = \
            keys.get((i["armRegionName"], i.get("armSkuName", ""), purchase_option(i)), 0) + 1
    for i in items:
        if (i.get("armSkuName") in GPU_SIZES and not is_windows(i) and purchase_option(i) == "on_demand"
                and keys[(i["armRegionName"], i["armSkuName"], "on_demand")] == 1
                and keys.get((i["armRegionName"], i["armSkuName"], "spot"))):
            return i  # an on-demand rate whose Spot rate sits on the same page: savings depend on it
    return None


def _azure_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    if host != "prices.azure.com":
        return None  # the Resource Graph answers (spot eviction rates) stay as recorded
    doc = _json(body)
    items = doc["Items"]
    query = _azure_query(req)
    if query == "vm" and "victim" not in e.state:
        victim = _azure_victim(items)
        if victim is not None:
            e.state["victim"] = victim["meterId"]
    e.victim = e.state.get("victim")
    vm = query == "vm"
    if e.fault == "empty" and vm:
        if "$skip" in req.params:
            return None
        doc.update(Items=[], NextPageLink=None, Count=0)
    elif e.fault == "rows_90pct_gone" and vm:
        doc["Items"] = items[::10]
        doc["Count"] = len(doc["Items"])
    elif e.fault == "price_x100" and vm:
        for i in items:
            i["retailPrice"] = round(i["retailPrice"] * 100, 4)
            i["unitPrice"] = round(i["unitPrice"] * 100, 4)
    elif e.fault in ("price_negative", "price_nan", "duplicates") and vm:
        victim = next((i for i in items if i["meterId"] == e.state.get("victim")), None)
        if victim is None:
            return None
        if e.oracle:
            items.remove(victim)  # duplicates: Azure refuses both sides of a conflict, so both go
            doc["Count"] = len(items)
        elif e.fault == "duplicates":
            dup = dict(victim, retailPrice=round(victim["retailPrice"] + 0.37, 4),
                       unitPrice=round(victim["unitPrice"] + 0.37, 4), meterId=victim["meterId"] + "-again")
            items.insert(items.index(victim) + 1, dup)
            doc["Count"] = len(items)
        else:
            value = -victim["retailPrice"] if e.fault == "price_negative" else math.nan
            victim["retailPrice"] = victim["unitPrice"] = value
    elif e.fault == "currency":
        for i in items:
            i["currencyCode"] = "EUR"
        doc["BillingCurrency"] = "EUR"
    elif e.fault == "schema_drift" and vm:
        for i in items:
            del i["retailPrice"]
    else:
        return None
    return _dump(doc)


AZURE = ProviderFaults(
    name="azure",
    # page 2 of the GPU VM query: a walk that fails half way must load nothing
    target=lambda host, req: _azure_query(req) == "vm" and req.params.get("$skip") == "100",
    truncate=lambda host, req: _azure_query(req) == "vm" and req.params.get("$skip") == "100",
    refuse=("prices.azure.com",),
    edit=_azure_edit,
    outcome={"layout": "n/a"},
    oracles={"price_negative": "removed", "price_nan": "removed", "duplicates": "removed"},
)


# -- Google Cloud: Compute pages and Billing Catalog SKU pages ---------------------------------------------------

def _gcp_money_scale(unit_price: dict[str, Any], factor: float) -> None:
    value = (int(unit_price.get("units") or 0) + int(unit_price.get("nanos") or 0) / 1e9) * factor
    units = int(value)
    unit_price["units"] = str(units)
    unit_price["nanos"] = int(round((value - units) * 1e9))


def _gcp_is_victim(sku: dict[str, Any]) -> bool:
    return (sku["category"]["resourceGroup"] == "GPU" and sku["category"]["usageType"] == "OnDemand"
            and "us-central1" in (sku.get("serviceRegions") or []) and re.search(r"\bL4\b", sku["description"])
            is not None and "Workstation" not in sku["description"])


def _gcp_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    doc = _json(body)
    if "/aggregated/machineTypes" in req.path:
        if e.fault == "empty":
            doc["items"] = {}
        elif e.fault == "rows_90pct_gone":
            for scoped in (doc.get("items") or {}).values():
                types = scoped.get("machineTypes") or []
                gpu = [t for t in types if t.get("accelerators")]
                scoped["machineTypes"] = [t for t in types if not t.get("accelerators")] + gpu[::10]
        elif e.fault == "schema_drift":
            for scoped in (doc.get("items") or {}).values():
                for t in scoped.get("machineTypes") or []:
                    t.pop("guestCpus", None)
        else:
            return None
        return _dump(doc)
    if "/skus" not in req.path:
        return None
    skus = doc.get("skus") or []
    victims = [s for s in skus if _gcp_is_victim(s)]
    if victims:
        e.state.setdefault("victim", victims[0]["skuId"])
    e.victim = e.state.get("victim")
    rates = [r for s in skus for info in s.get("pricingInfo") or [] for r in info["pricingExpression"]["tieredRates"]]
    if e.fault == "price_x100":
        for r in rates:
            _gcp_money_scale(r["unitPrice"], 100)
    elif e.fault == "currency":
        for r in rates:
            r["unitPrice"]["currencyCode"] = "EUR"
    elif e.fault in ("price_negative", "price_nan", "duplicates"):
        victim = next((s for s in skus if s["skuId"] == e.state.get("victim")), None)
        if victim is None:
            return None
        if e.oracle:
            skus.remove(victim)  # with it gone, the offers it prices are quarantined ("no SKU"): the same offers
        elif e.fault == "duplicates":
            dup = copy.deepcopy(victim)
            dup["skuId"] = victim["skuId"][:-4] + "D0P1"
            _gcp_money_scale(dup["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"], 1.25)
            skus.insert(skus.index(victim) + 1, dup)
        else:
            price = victim["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]
            if e.fault == "price_negative":
                _gcp_money_scale(price, -1)
            else:
                price["nanos"] = math.nan
    else:
        return None
    return _dump(doc)


GCP = ProviderFaults(
    name="gcp",
    target=lambda host, req: "/skus" in req.path and req.params.get("pageToken", "").startswith("Cpbf91"),
    truncate=lambda host, req: "/skus" in req.path and req.params.get("pageToken", "").startswith("Cpbf91"),
    refuse=("cloudbilling.googleapis.com",),
    edit=_gcp_edit,
    outcome={"layout": "n/a", "price_nan": "fail"},
    oracles={"price_negative": "removed", "duplicates": "removed"},
    errors={"price_nan": r"(?i)pars|not valid|schema|invalid|integer"},
    settings={"gcp_regions": "us-central1"},
)


# -- AWS: the bulk price list (CSV, streamed), EC2 (XML via boto3), Spot Advisor (JSON) ---------------------------

_AWS_CSV = "/offers/v1.0/aws/AmazonEC2/20261125173012/us-east-1/index.csv"


def _csv_line(fields: list[str]) -> str:
    """The price list's own quoting: every non-empty field quoted, empty fields bare."""
    return ",".join('"' + f.replace('"', '""') + '"' if f else "" for f in fields)


def _aws_rows(text: str) -> tuple[list[str], list[str], dict[str, int]]:
    lines = text.split("\n")
    head = next(i for i, ln in enumerate(lines) if ln.startswith('"SKU"'))
    header = next(csv.reader([lines[head]]))
    return lines, header, {name: i for i, name in enumerate(header)} | {"_head": head}


def _aws_victim_line(lines: list[str], cols: dict[str, int]) -> int:
    from gpuledger.adapters.aws.pricelist import CSV_COLUMNS, price_row

    for n in range(cols["_head"] + 1, len(lines)):
        if '"OnDemand"' not in lines[n]:
            continue
        fields = next(csv.reader([lines[n]]))
        row = {name: fields[cols[col]] for col, name in CSV_COLUMNS.items() if col in cols}
        price = price_row(row, "us-east-1")
        if price is not None and price.kind == "instance" and price.price > 0 and price.instance_type.startswith("g6e."):
            return n
    raise AssertionError("no on-demand g6e row in the us-east-1 price list")


def _aws_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    if req.path != _AWS_CSV:
        return None
    lines, header, cols = _aws_rows(body.decode())
    price, cur = cols["PricePerUnit"], cols["Currency"]
    victim = _aws_victim_line(lines, cols)
    victim_fields = next(csv.reader([lines[victim]]))
    e.victim = victim_fields[cols["SKU"]]
    data = range(cols["_head"] + 1, len(lines))

    def rewrite(n: int, change: Callable[[list[str]], None]) -> None:
        if not lines[n]:
            return
        fields = next(csv.reader([lines[n]]))
        change(fields)
        lines[n] = _csv_line(fields)

    if e.fault == "empty":
        lines = lines[: cols["_head"] + 1] + [""]
    elif e.fault == "rows_90pct_gone":
        lines = lines[: cols["_head"] + 1] + [lines[n] for n in data if n % 10 == 0] + [""]
    elif e.fault == "price_x100":
        for n in data:
            rewrite(n, lambda f: f.__setitem__(price, _scaled(f[price], 100)))
    elif e.fault in ("price_negative", "price_nan"):
        if e.oracle:
            del lines[victim]
        else:
            value = _scaled(victim_fields[price], -1) if e.fault == "price_negative" else "NaN"
            rewrite(victim, lambda f: f.__setitem__(price, value))
    elif e.fault == "currency":
        for n in data:
            rewrite(n, lambda f: f.__setitem__(cur, "EUR") if f[cur] else None)
    elif e.fault == "duplicates":
        if not e.oracle:
            dup = list(victim_fields)
            dup[price] = _scaled(dup[price], 1.1)
            lines.insert(victim + 1, _csv_line(dup))
    elif e.fault == "schema_drift":
        header[price] = "PricePerUnitUSD"
        lines[cols["_head"]] = _csv_line(header)
    else:
        return None
    return "\n".join(lines).encode()


AWS = ProviderFaults(
    name="aws",
    target=lambda host, req: req.path == _AWS_CSV,
    # an XML answer of EC2 cut in half (boto3 parses it)
    truncate=lambda host, req: host == "ec2.us-east-1.amazonaws.com"
    and req.params.get("Action") == "DescribeInstanceTypes" and "NextToken" not in req.params,
    refuse=("ec2.us-east-1.amazonaws.com",),
    edit=_aws_edit,
    outcome={"layout": "n/a"},
    errors={"truncated": r"(?i)EC2 API in us-east-1 .*XML",
            # AWS's spot rows come from EC2: an empty (or all-EUR) price list leaves them, and the
            # guard's per-purchase-option check refuses the load (on-demand among the options it names)
            "empty": r"anomaly guard: .*on_demand rows dropped from \d+ to 0",
            "currency": r"anomaly guard: .*on_demand rows dropped from \d+ to 0.*price in EUR"},
    settings={"aws_regions": "us-east-1"},
)


# -- CoreWeave: a server-rendered pricing page (HTML), crawled by scrapy --------------------------------------------

def _cw_tree(body: bytes) -> Any:
    import lxml.html

    return lxml.html.document_fromstring(body)


def _cw_dump(tree: Any) -> bytes:
    import lxml.html

    return b"<!DOCTYPE html>" + lxml.html.tostring(tree, encoding="utf-8")


def _has(cls: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {cls} ')"


def _cw_rows(tree: Any) -> list[Any]:
    return tree.xpath(f"//div[{_has('table-row-v2')} and {_has('kubernetes-gpu-pricing')}]")


def _cw_price_spans(row: Any) -> list[Any]:
    return row.xpath(f".//span[{_has('item-value')}] | .//div[{_has('table-price-mobile')}]")


def _cw_victim(rows: list[Any]) -> Any:
    for row in rows:
        texts = [s.text_content() for s in _cw_price_spans(row)]
        if texts and all(t.strip().startswith("$") for t in texts) and not row.xpath(f".//*[{_has('spot-price')}]"):
            return row
    raise AssertionError("no priced CoreWeave row without a spot price")


def _coreweave_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    if req.path != "/pricing":
        return None
    tree = _cw_tree(body)
    rows = _cw_rows(tree)
    victim = _cw_victim(rows)
    e.victim = victim.xpath(".//h3")[0].get("data-product")
    if e.fault == "empty":
        for row in rows:
            row.getparent().remove(row)
    elif e.fault == "rows_90pct_gone":
        for row in rows[max(1, len(rows) // 10):]:
            row.getparent().remove(row)
    elif e.fault in ("price_x100", "currency"):
        for row in rows:
            for span in _cw_price_spans(row):
                for el in [span, *span.iterdescendants()]:
                    for attr in ("text", "tail"):
                        text = getattr(el, attr)
                        if text and "$" in text:
                            new = re.sub(r"\$([0-9][0-9,]*\.?[0-9]*)", lambda m: f"${float(m[1].replace(',', '')) * 100:.2f}",
                                         text) if e.fault == "price_x100" else text.replace("$", "€")
                            setattr(el, attr, new)
    elif e.fault in ("price_negative", "price_nan"):
        if e.oracle:
            victim.getparent().remove(victim)
        else:
            for span in _cw_price_spans(victim):
                span.text = ("-" + span.text) if e.fault == "price_negative" else "$NaN"
    elif e.fault == "duplicates":
        if not e.oracle:
            dup = copy.deepcopy(victim)
            for span in _cw_price_spans(dup):
                span.text = re.sub(r"\$([0-9.]+)", lambda m: f"${float(m[1]) + 1:.2f}", span.text)
            victim.addnext(dup)
    elif e.fault == "schema_drift":  # the GPU Count column is gone, header and cells
        for grid in tree.xpath(f"//div[{_has('kubernetes-gpu-pricing')}]//div[{_has('table-grid')}]"):
            cells = grid.xpath(f"./div[{_has('table-v2-cell')}]")
            if len(cells) >= 7:
                grid.remove(cells[1])
    elif e.fault == "layout":  # the classes the spider selects on are renamed
        return body.replace(b"kubernetes-gpu-pricing", b"gpu-instance-pricing-v3")
    else:
        return None
    return _cw_dump(tree)


COREWEAVE = ProviderFaults(
    name="coreweave",
    target=lambda host, req: req.path == "/pricing",
    truncate=lambda host, req: req.path == "/pricing",
    refuse=("www.coreweave.com",),
    edit=_coreweave_edit,
    timeout_s=5.0,
)


# -- Hyperstack: the page's script renders rows from a rate card (rates.json) in Chromium -------------------------

def _hyperstack_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    if e.fault == "currency" and req.path.endswith("gpu-pricing.min.js"):
        return body.replace(b'"$" + v', b'"\\u20ac" + v')  # the page now prints euros
    if e.fault == "layout" and req.path == "/gpu-pricing":
        return body.replace(b'id="on-demand-gpu-pricing"', b'id="gpu-rates-v2"')
    if req.path != "/gpu-pricing/rates.json":
        return None
    doc = _json(body)
    spot_models = {r["model"] for r in doc["spot"]}
    victim = next(r for r in doc["on_demand"] if r["model"] not in spot_models and r["price_per_hour"])
    e.victim = victim["model"]
    if e.fault == "empty":
        doc["on_demand"], doc["spot"] = [], []
    elif e.fault == "rows_90pct_gone":
        doc["on_demand"] = doc["on_demand"][:1]
        doc["spot"] = doc["spot"][:1]
    elif e.fault == "price_x100":
        for r in doc["on_demand"] + doc["spot"]:
            if r["price_per_hour"]:
                r["price_per_hour"] = _scaled(r["price_per_hour"], 100)
    elif e.fault in ("price_negative", "price_nan"):
        if e.oracle:
            doc["on_demand"].remove(victim)
        else:
            victim["price_per_hour"] = "-" + victim["price_per_hour"] if e.fault == "price_negative" else "NaN"
    elif e.fault == "duplicates":
        if not e.oracle:
            doc["on_demand"].insert(doc["on_demand"].index(victim) + 1,
                                    dict(victim, price_per_hour=_scaled(victim["price_per_hour"], 1.25)))
    elif e.fault == "schema_drift":  # the rate card renames its price field
        for r in doc["on_demand"] + doc["spot"]:
            r["price_usd_per_hour"] = r.pop("price_per_hour")
    else:
        return None
    return _dump(doc)


HYPERSTACK = ProviderFaults(
    name="hyperstack",
    target=lambda host, req: req.path == "/gpu-pricing",
    truncate=lambda host, req: req.path == "/gpu-pricing/rates.json",
    refuse=("www.hyperstack.cloud",),
    edit=_hyperstack_edit,
    timeout_s=8.0,  # a browser launch and navigation share this limit
    settings={"hyperstack_render_timeout_s": 20},
    # The rate card the page's script fetches: the browser hides the reset, the page says it failed.
    targets={"reset": lambda host, req: req.path == "/gpu-pricing/rates.json"},
    errors={"reset": r"failed to load its prices.*could not be loaded",
            "truncated": r"failed to load its prices.*could not be loaded"},
)


# -- Crusoe: a server-rendered Webflow pricing page (HTML), crawled by scrapy -----------------------------------

def _crusoe_gpu_rows(tree: Any) -> list[Any]:
    """The GPU table's rows: the `.pricing_gpu-item`s under the table whose first column is "GPU model"."""
    tables = [t for t in tree.xpath(f"//div[{_has('pricing-gap')}]")
              if [h.text_content().strip() for h in t.xpath(f".//div[{_has('pricing-heading')}]")][:1] == ["GPU model"]]
    return [r for t in tables for r in t.xpath(f".//div[{_has('pricing_gpu-item')}]")]


def _crusoe_price_paragraphs(row: Any) -> list[Any]:
    return [p for p in row.xpath(f"./div[{_has('pricing-rich')}]/p") if (p.text or "").startswith("$")]


def _crusoe_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    if req.path != "/cloud/pricing":
        return None
    tree = _cw_tree(body)
    rows = _crusoe_gpu_rows(tree)
    victim = next(r for r in rows if _crusoe_price_paragraphs(r))  # the first row with a published price
    e.victim = " ".join(victim.xpath(".//h4")[0].text_content().split())  # its model as printed, "NVIDIA H200"
    listitem = lambda row: row.getparent()  # noqa: E731 - the CMS list item that holds the row
    if e.fault == "empty":
        for row in rows:
            listitem(row).getparent().remove(listitem(row))
    elif e.fault == "rows_90pct_gone":  # one priced row of the table is left
        for row in rows:
            if row is not victim:
                listitem(row).getparent().remove(listitem(row))
    elif e.fault in ("price_x100", "currency"):
        for row in rows:
            for p in _crusoe_price_paragraphs(row):
                p.text = (re.sub(r"\$([0-9.]+)", lambda m: f"${float(m[1]) * 100:.2f}", p.text)
                          if e.fault == "price_x100" else p.text.replace("$", "€"))
    elif e.fault in ("price_negative", "price_nan"):
        if e.oracle:
            listitem(victim).getparent().remove(listitem(victim))
        else:
            for p in _crusoe_price_paragraphs(victim):
                p.text = "-" + p.text if e.fault == "price_negative" else "$NaN/GPU-hr"
    elif e.fault == "duplicates":
        if not e.oracle:  # the same row listed twice, at another price
            dup = copy.deepcopy(listitem(victim))
            for p in _crusoe_price_paragraphs(dup.xpath(f".//div[{_has('pricing_gpu-item')}]")[0]):
                p.text = re.sub(r"\$([0-9.]+)", lambda m: f"${float(m[1]) + 1:.2f}", p.text)
            listitem(victim).addnext(dup)
    elif e.fault == "schema_drift":  # the On-demand column is gone, heading and cells
        for heading in tree.xpath(f"//div[{_has('pricing-heading')}]"):
            if heading.text_content().strip() == "On-demand" and heading.getparent() is not None:
                heading.getparent().remove(heading)
        for row in rows:
            cells = row.xpath(f"./div[{_has('pricing-rich')}]")
            if cells:
                row.remove(cells[0])
    elif e.fault == "layout":  # the Webflow classes the spider selects on are renamed
        return body.replace(b"pricing_gpu-item", b"pricing-card-v2").replace(b"pricing-gap", b"pricing-grid-v2")
    else:
        return None
    return _cw_dump(tree)


CRUSOE = ProviderFaults(
    name="crusoe",
    target=lambda host, req: req.path == "/cloud/pricing",
    truncate=lambda host, req: req.path == "/cloud/pricing",
    refuse=("www.crusoe.ai",),
    edit=_crusoe_edit,
    timeout_s=5.0,
)


# -- Nebius: a server-rendered page-constructor price page (HTML), crawled by scrapy ----------------------------

_NB = "pc-highlight-table-block"


def _nebius_gpu_table(tree: Any) -> tuple[Any, Any]:
    """The GPU table's head row and body: the highlight table whose head has a GPU-hour column."""
    for block in tree.xpath(f"//div[{_has(_NB)}]"):
        head = block.xpath(f".//div[{_has(_NB + '__head')}]/div[{_has(_NB + '__row')}]")
        if head and "GPU-hour" in head[0].text_content():
            return head[0], block.xpath(f".//div[{_has(_NB + '__body')}]")[0]
    raise AssertionError("no Nebius GPU table in the recording")


def _nebius_cells(row: Any) -> list[Any]:
    return row.xpath(f"./div[{_has(_NB + '__cell')}]")


def _nebius_price_ps(row: Any) -> list[Any]:
    return [p for cell in _nebius_cells(row)[1:] for p in cell.xpath(".//p") if "$" in (p.text or "")]


def _nebius_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    if req.path != "/prices":
        return None
    if e.fault == "layout":  # the page-constructor block the spider selects on is renamed
        return body.replace(_NB.encode(), b"pc-price-grid-v2")
    tree = _cw_tree(body)
    head, gpu_body = _nebius_gpu_table(tree)
    rows = gpu_body.xpath(f"./div[{_has(_NB + '__row')}]")
    victim = next(r for r in rows if len(_nebius_price_ps(r)) == 2)  # priced on-demand and preemptible
    e.victim = " ".join(_nebius_cells(victim)[0].text_content().split())  # e.g. "NVIDIA HGX B300"
    if e.fault == "empty":
        for row in rows:
            gpu_body.remove(row)
    elif e.fault == "rows_90pct_gone":  # one priced row of nine is left
        for row in rows:
            if row is not victim:
                gpu_body.remove(row)
    elif e.fault in ("price_x100", "currency"):
        for row in rows:
            for p in _nebius_price_ps(row):
                p.text = (re.sub(r"\$([0-9.]+)", lambda m: f"${float(m[1]) * 100:.2f}", p.text)
                          if e.fault == "price_x100" else p.text.replace("$", "€"))
    elif e.fault in ("price_negative", "price_nan"):
        if e.oracle:
            gpu_body.remove(victim)
        else:
            for p in _nebius_price_ps(victim):
                p.text = p.text.replace("$", "-$") if e.fault == "price_negative" else "$NaN"
    elif e.fault == "duplicates":
        if not e.oracle:  # the same GPU listed twice, at other prices
            dup = copy.deepcopy(victim)
            for p in _nebius_price_ps(dup):
                p.text = re.sub(r"\$([0-9.]+)", lambda m: f"${float(m[1]) + 1:.2f}", p.text)
            victim.addnext(dup)
    elif e.fault == "schema_drift":  # the on-demand column is gone, label and cells
        labels = [" ".join(c.text_content().split()) for c in _nebius_cells(head)]
        column = next(i for i, label in enumerate(labels) if label.startswith("On-demand"))
        for row in [head, *rows]:
            row.remove(_nebius_cells(row)[column])
    else:
        return None
    return _cw_dump(tree)


NEBIUS = ProviderFaults(
    name="nebius",
    target=lambda host, req: req.path == "/prices",
    truncate=lambda host, req: req.path == "/prices",
    refuse=("nebius.com",),
    edit=_nebius_edit,
    timeout_s=5.0,
)


# -- Paperspace: a server-rendered Webflow pricing page (HTML), crawled by scrapy -------------------------------

def _paperspace_cards(tree: Any) -> list[Any]:
    return tree.xpath(f"//div[{_has('instance-container-flex')}]//div[{_has('instance-type-holder-flex')}]")


def _paperspace_amounts(card: Any) -> list[Any]:
    return card.xpath(f".//h1[{_has('instance-price-2')}]")


def _paperspace_edit(e: Edit, host: str, req: Request, body: bytes) -> bytes | None:
    if req.path != "/pricing":
        return None
    if e.fault == "layout":  # the Webflow card class the spider selects on is renamed
        return body.replace(b"instance-type-holder-flex", b"machine-card-v2")
    tree = _cw_tree(body)
    cards = _paperspace_cards(tree)
    victim = next(c for c in cards if c.xpath(".//h1")[0].text_content().strip() == "H100")  # priced, no footnote
    e.victim = "H100"
    if e.fault == "empty":
        for card in cards:
            card.getparent().remove(card)
    elif e.fault == "rows_90pct_gone":  # one priced card is left
        for card in cards:
            if card is not victim:
                card.getparent().remove(card)
    elif e.fault == "price_x100":
        for card in cards:
            for h1 in _paperspace_amounts(card):
                h1.text = re.sub(r"[0-9.]+", lambda m: f"{float(m[0]) * 100:.2f}", h1.text, count=1)
    elif e.fault == "currency":
        for sign in tree.xpath(f"//div[{_has('instance-dollar')}]"):
            sign.text = "€"
    elif e.fault in ("price_negative", "price_nan"):
        if e.oracle:
            victim.getparent().remove(victim)
        else:
            for h1 in _paperspace_amounts(victim):
                h1.text = "-" + h1.text if e.fault == "price_negative" else "NaN"
    elif e.fault == "duplicates":
        if not e.oracle:  # the same machine listed twice, at another price
            dup = copy.deepcopy(victim)
            for h1 in _paperspace_amounts(dup):
                h1.text = f"{float(h1.text) + 1:.2f}"
            victim.addnext(dup)
    elif e.fault == "schema_drift":  # the amount elements are gone: the cards show "$ / hour"
        for card in cards:
            for h1 in _paperspace_amounts(card):
                h1.getparent().remove(h1)
    else:
        return None
    return _cw_dump(tree)


PAPERSPACE = ProviderFaults(
    name="paperspace",
    target=lambda host, req: req.path == "/pricing",
    truncate=lambda host, req: req.path == "/pricing",
    refuse=("www.paperspace.com",),
    edit=_paperspace_edit,
    timeout_s=5.0,
)


# The sources whose formats need code of their own (CSV streams, XML, HTML, paged walks).
CUSTOM = {p.name: p for p in (AWS, AZURE, COREWEAVE, CRUSOE, GCP, HYPERSTACK, LAMBDA, NEBIUS, PAPERSPACE, RUNPOD,
                              VASTAI)}


def declared(name: str, recordings: Path = BUNDLED_RECORDINGS) -> ProviderFaults:
    """The faults of a source with no code here: from the shape its recording declares."""
    spec = registry.spec(name)
    shape = load_shape(recordings / name)
    if shape is None:
        return ProviderFaults(name=name, source_kind=spec.source_kind)
    return ProviderFaults(name=name, source_kind=spec.source_kind,
                          edit=lambda e, host, req, body: edit_json(shape, e, req, body),
                          outcome={**({"currency": "n/a"} if shape.records.currency is None else {}),
                                   **shape.outcome})


def _providers() -> dict[str, ProviderFaults]:
    faults = {name: CUSTOM[name] if name in CUSTOM else declared(name) for name in sorted(registry.SOURCES)}
    for name, f in faults.items():
        f.source_kind = registry.spec(name).source_kind
    return faults


PROVIDERS: dict[str, ProviderFaults] = _providers()
