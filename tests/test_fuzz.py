"""Parsers fuzzed with malformed payloads (hypothesis).

Each provider's parsing, composed as its `fetch` composes it after the I/O, gets real recorded
payloads with random damage: keys deleted, values replaced by other JSON types (null, numbers,
NaN, strings, lists, objects), whole documents replaced by random JSON; the spiders get their
saved pages with elements removed, texts and classes rewritten. Whatever comes in, a parser
either returns a Batch (bad records quarantined) or raises the project's own error: a
SourceError/SchemaDriftError for the APIs, LayoutChanged for a page. Never a bare KeyError,
TypeError, AttributeError, ValueError that would crash the flow with no provider named.

Examples are derandomized (the same on every run, so CI is stable); set
GPULEDGER_FUZZ_EXAMPLES to search longer.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuledger.adapters import azure, gcp, lambdalabs, runpod, vastai
from gpuledger.adapters.aws import ec2, offers, pricelist
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.spiders import coreweave, hyperstack
from gpuledger.spiders.items import PageRow, PriceTextError, parse_money, usd_per_gb_month, usd_price
from gpuledger.spiders.page_source import LayoutChanged
from gpuledger.warehouse.records import Batch

REC = Path(__file__).parent.parent / "adapters" / "recordings"
FIX = Path(__file__).parent / "fixtures"
EXAMPLES = int(os.environ.get("GPULEDGER_FUZZ_EXAMPLES", "120"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def load(path: Path) -> Any:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


# -- random damage to a real document --------------------------------------------------------------

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                         st.sampled_from(["", "NaN", "-1", "0", "1e309", "USD", "EUR", "A100", "H100 SXM"]))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, prefix + (i,))
    return out


def damage(doc: Any, edits: list[tuple[int, bool, Any]], bundle: bool = False) -> Any:
    """Apply (path index, delete?, new value) edits to a copy of `doc`. A `bundle` is a dict of
    several answers (one per request): each answer may be damaged or replaced, not the bundle."""
    doc = copy.deepcopy(doc)
    for index, delete, value in edits:
        all_paths = paths(doc)[1:] if bundle else paths(doc)
        if not all_paths:
            continue
        path = all_paths[index % len(all_paths)]
        if not path:
            doc = value
            continue
        delete = delete and not (bundle and len(path) == 1)
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        if delete:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    return doc


edit_lists = st.lists(st.tuples(st.integers(0, 10**6), st.booleans(), json_values), min_size=1, max_size=6)


def survives(parse: Callable[[], Any], allowed: tuple[type[BaseException], ...] = (SourceError,)) -> Any:
    """Run a parse: a result, or one of the `allowed` errors; anything else fails the test."""
    try:
        result = parse()
    except allowed as err:
        assert str(err), f"{type(err).__name__} without a message"
        return err
    if isinstance(result, Batch):
        for offer in result.offers:  # whatever got through is a valid record
            assert math.isfinite(offer.price_per_hour) and offer.price_per_hour > 0
    return result


# -- the APIs, parsed as their fetch() parses them --------------------------------------------------

LAMBDA_DOC = load(REC / "lambda" / "instance-types.json")
RUNPOD_DOC = load(REC / "runpod" / "graphql-gpuTypes.json")
VAST_DOC = {"offers": load(REC / "vastai" / "search" / "page-1.json")["offers"][:25]}
AZURE_DOCS = {q: load(REC / "azure" / q / "page-01.json") for q in ("vm", "storage", "bandwidth")}
AZURE_DOCS["vm"]["Items"] = AZURE_DOCS["vm"]["Items"][:40]


def _gcp_docs() -> dict[str, Any]:
    zones = load(REC / "gcp" / "compute" / "zones.1.json")
    zones["items"] = [z for z in zones["items"] if z["region"].endswith("/us-central1")]
    zone = "zones/us-central1-a"
    pages = [load(REC / "gcp" / "compute" / f"machineTypes.{i}.json.gz") for i in (1, 2, 3)]
    types = {"items": {zone: {"machineTypes": [t for p in pages for t in p["items"].get(zone, {}).get(
        "machineTypes", []) if re.match(r"(a2-highgpu-[12]g|g2-standard-(4|8)|n1-standard-8)$", t["name"])]}}}
    accels = load(REC / "gcp" / "compute" / "acceleratorTypes.1.json.gz")
    accels["items"] = {k: v for k, v in accels["items"].items() if k == zone}
    # The SKUs that price those shapes: A2/G2 cores and RAM, A100/L4/T4 GPUs, N1 cores and RAM, on demand and spot.
    skus = [s for i in range(1, 6) for s in load(REC / "gcp" / "billing" / f"skus.{i}.json.gz")["skus"]
            if "us-central1" in (s.get("serviceRegions") or [])
            and re.search(r"\b(A2|G2|L4|A100|T4|N1 Predefined)\b", s["description"])
            and not s["description"].startswith("Commitment")]
    return {"zones": zones, "types": types, "accels": accels, "skus": {"skus": skus}}


GCP_DOCS = _gcp_docs()


def lambda_parse(doc: Any) -> Any:
    return lambdalabs.parse_instance_types(doc)


def runpod_parse(doc: Any) -> Any:
    return runpod.parse_gpu_types(doc)


def vast_parse(doc: Any) -> Any:
    return vastai.build_batch(vastai.parse_page(doc))


def azure_parse(docs: dict[str, Any]) -> Any:
    batch = Batch("azure")
    for query, build in (("vm", azure.build_vm_offers), ("storage", azure.build_storage),
                         ("bandwidth", azure.build_egress)):
        build(batch, azure.parse_page(docs[query], query).items, None)
    return batch


def _through_client(message_type: Any, doc: Any) -> dict[str, Any]:
    """What the google client makes of a JSON answer: its message, as _pages hands it on; a body
    that does not fit the message fails in the client (gcp._call turns that into SchemaDriftError)."""
    from gpuledger.adapters.base import SchemaDriftError

    try:
        message = message_type.from_json(json.dumps(doc), ignore_unknown_fields=True)
    except Exception as err:  # noqa: BLE001 - the client's own parse error, as _call sees it
        raise SchemaDriftError(f"gcp: does not parse ({type(err).__name__})") from None
    return type(message).to_dict(message, preserving_proto_field_name=False, use_integers_for_enums=False)


def gcp_parse(docs: dict[str, Any]) -> Any:
    """gcp.fetch after its four listings: each answer through the real client's message type."""
    from google.cloud import billing_v1, compute_v1

    zones = gcp.parse_zones([_through_client(compute_v1.ZoneList, docs["zones"])])
    shapes = gcp.parse_machine_types([_through_client(compute_v1.MachineTypeAggregatedList, docs["types"])])
    accels = gcp.parse_accelerator_types([_through_client(compute_v1.AcceleratorTypeAggregatedList, docs["accels"])])
    skus = _through_client(billing_v1.ListSkusResponse, docs["skus"]).get("skus") or []
    return gcp.build_batch(zones, shapes, accels, skus, sorted({z.region for z in zones.values()}))


@FUZZ
@given(edit_lists)
def test_lambda_parser_survives_damage(edits: list) -> None:
    survives(lambda: lambda_parse(damage(LAMBDA_DOC, edits)))


@FUZZ
@given(edit_lists)
def test_runpod_parser_survives_damage(edits: list) -> None:
    survives(lambda: runpod_parse(damage(RUNPOD_DOC, edits)))


@FUZZ
@given(edit_lists)
def test_vastai_parser_survives_damage(edits: list) -> None:
    survives(lambda: vast_parse(damage(VAST_DOC, edits)))


@FUZZ
@given(edit_lists)
def test_azure_parser_survives_damage(edits: list) -> None:
    survives(lambda: azure_parse(damage(AZURE_DOCS, edits, bundle=True)))


@FUZZ
@given(edit_lists)
def test_gcp_parser_survives_damage(edits: list) -> None:
    survives(lambda: gcp_parse(damage(GCP_DOCS, edits, bundle=True)))


@FUZZ
@given(json_values)
def test_api_parsers_survive_any_json(doc: Any) -> None:
    for parse in (lambda_parse, runpod_parse, vast_parse):
        survives(lambda: parse(doc))
    survives(lambda: azure_parse({"vm": doc, "storage": doc, "bandwidth": doc}))
    survives(lambda: gcp_parse({"zones": doc, "types": doc, "accels": doc, "skus": doc}))


# -- AWS: the price list's JSON and EC2's payloads (as boto3 hands them over) ------------------------

def _gpu_item() -> dict[str, Any]:
    """A Pricing API item (a real one, for m5.large) restated for a GPU type the EC2 fixture describes."""
    item = load(FIX / "aws" / "ec2-instance-selector_GetProducts_m5_large_priceitem.json")
    item["product"]["attributes"]["instanceType"] = "g4ad.2xlarge"
    return item


def _advisor() -> dict[str, Any]:
    doc = load(FIX / "aws" / "spot-advisor-data_us-east-1_eu-west-1.json")
    linux = doc["spot_advisor"]["us-east-1"]["Linux"]
    return {"ranges": doc["ranges"], "spot_advisor": {"us-east-1": {"Linux": dict(list(linux.items())[:8])}}}


AWS_DOCS = {
    "index": load(REC / "aws" / "bulk" / "AmazonEC2" / "region_index.json"),
    "advisor": _advisor(),
    "item": _gpu_item(),
    "ebs": load(FIX / "aws" / "awscli_example_get-products_ebs.json")["PriceList"][0],
    "types": {"InstanceTypes": list(load(FIX / "aws" / "moto_instance_types_gpu_older_families.json").values())[:3]},
    "offerings": {"InstanceTypeOfferings": [{"InstanceType": "g4ad.2xlarge", "Location": "us-east-1a",
                                             "LocationType": "availability-zone"}]},
    "spot": {"SpotPriceHistory": [{"InstanceType": "g4ad.2xlarge", "AvailabilityZone": "us-east-1a",
                                   "ProductDescription": "Linux/UNIX", "SpotPrice": "0.2123",
                                   "Timestamp": datetime(2026, 11, 30, 2, tzinfo=timezone.utc)}]},
}


def aws_parse(docs: dict[str, Any]) -> Any:
    pricelist.parse_region_index(docs["index"], "AmazonEC2")
    rows = pricelist.parse_price_list_item(docs["item"], "us-east-1") + \
        pricelist.parse_price_list_item(docs["ebs"], "us-east-1")
    payload = offers.RegionPayload(
        region="us-east-1", prices=rows, specs=ec2.parse_instance_types([docs["types"]]),
        offerings=ec2.parse_offerings([docs["offerings"]]), spot_history=ec2.parse_spot_observations([docs["spot"]]),
        advisor=ec2.parse_spot_advisor(docs["advisor"], "us-east-1"))
    batch = Batch("aws")
    offers.build_region(batch, payload)
    return batch


@FUZZ
@given(edit_lists)
def test_aws_parsers_survive_damage(edits: list) -> None:
    survives(lambda: aws_parse(damage(AWS_DOCS, edits, bundle=True)))


CSV_HEAD = ['"FormatVersion","v1.0"', '"SKU","OfferTermCode","RateCode","TermType","PricePerUnit","Product Family"']


@FUZZ
@given(st.lists(st.text(alphabet=st.sampled_from('ab," 0.5SKUOnDemandTermType'), max_size=60), max_size=8))
def test_aws_offer_csv_survives_garbage(lines: list[str]) -> None:
    survives(lambda: pricelist.parse_offer_chunks(["\n".join(CSV_HEAD + lines).encode()], "us-east-1"))


def test_aws_offer_csv_bare_carriage_return() -> None:
    with pytest.raises(SchemaDriftError, match="us-east-1 is not valid CSV"):
        pricelist.parse_offer_chunks(["\n".join(CSV_HEAD + ['"X","a","b","OnDemand",\r0,"c"']).encode()], "us-east-1")


# -- the spiders: saved pages with random damage -----------------------------------------------------

def _html(path: Path) -> bytes:
    return path.read_bytes()


COREWEAVE_PAGE = _html(REC / "coreweave" / "www.coreweave.com" / "pricing.html")
HYPERSTACK_PAGE = _html(FIX / "hyperstack" / "gpu-pricing.rendered.html")


def damage_html(page: bytes, edits: list[tuple[int, int, str]]) -> str:
    """Remove elements, rewrite texts and class attributes of a page."""
    import lxml.html

    tree = lxml.html.document_fromstring(page)
    for index, action, text in edits:
        elements = list(tree.iter())
        el = elements[index % len(elements)]
        if action == 0 and el.getparent() is not None:
            el.getparent().remove(el)
        elif action == 1:
            el.text = text
        elif action == 2:
            el.set("class", text)
        elif action == 3:
            el.tail = text
    return lxml.html.tostring(tree, encoding="unicode")


xml_text = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=16)
html_edits = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.one_of(
    xml_text, st.sampled_from(["$NaN/hr", "-$3.20/hr", "€4.00", "Contact sales", "", "1,2,3", "—",
                                           "$1e9/hr", "table-v2", "GPU Count", "$0.00/GB/mo"]))),
    min_size=1, max_size=8)


@FUZZ
@given(html_edits)
def test_coreweave_page_parser_survives_damage(edits: list) -> None:
    from parsel import Selector

    page = damage_html(COREWEAVE_PAGE, edits)
    rows = survives(lambda: coreweave.parse_pricing_page(Selector(text=page)), (LayoutChanged,))
    if isinstance(rows, list):
        survives(lambda: coreweave.build_batch(rows), ())  # normalizing never raises: it quarantines


@FUZZ
@given(html_edits)
def test_hyperstack_page_parser_survives_damage(edits: list) -> None:
    from parsel import Selector

    page = damage_html(HYPERSTACK_PAGE, edits)
    rows = survives(lambda: hyperstack.parse_pricing_page(Selector(text=page)), (LayoutChanged,))
    if isinstance(rows, list):
        survives(lambda: hyperstack.build_batch(rows), ())


row_text = st.one_of(st.text(max_size=20), st.sampled_from(["$3.20/hr", "$NaN", "-$1/hr", "€2/hr", "8", "80",
                                                            "H100", "NVIDIA HGX H100", "REGION: EU", "Free"]))
price_rows = st.builds(PageRow, kind=st.sampled_from(["gpu", "storage", "network", "other"]), section=row_text,
                       name=row_text, cells=st.dictionaries(row_text, row_text, max_size=6), price_text=row_text,
                       spot_text=row_text, product_id=row_text)


@FUZZ
@given(st.lists(price_rows, max_size=8))
def test_spider_normalizers_never_raise(rows: list[PageRow]) -> None:
    survives(lambda: coreweave.build_batch(rows), ())
    survives(lambda: hyperstack.build_batch(rows), ())


@FUZZ
@given(st.text(max_size=30))
def test_price_text_helpers_raise_only_their_own_error(text: str) -> None:
    for parse in (parse_money, usd_price, usd_per_gb_month):
        survives(lambda: parse(text), (PriceTextError,))


@pytest.mark.parametrize(("text", "expected"), [
    ("$49.24/hr", (49.24, "USD")), ("2-4 GPUs $3.20/hr", (3.2, "USD")), ("$3.20 - $4.00/hr", "price range"),
    ("-$49.24", None), ("$-7.40/hr", None), ("\u2212$5.00", None), ("price: -3.20 USD", None),
])
def test_signed_prices_are_refused_and_ranges_are_not(text: str, expected: tuple | str | None) -> None:
    """A minus sign on a page's price was read as a positive price before; a range's dash is no sign (a range is
    refused as a range: neither end is the price)."""
    if expected is None or isinstance(expected, str):
        with pytest.raises(PriceTextError, match=expected or "negative price"):
            parse_money(text)
    else:
        assert parse_money(text) == expected


def test_undamaged_payloads_parse_to_offers() -> None:
    """The fuzzers start from payloads that really exercise the parsers: each yields offers."""
    from parsel import Selector

    for parse, doc in ((lambda_parse, LAMBDA_DOC), (runpod_parse, RUNPOD_DOC), (vast_parse, VAST_DOC),
                       (azure_parse, AZURE_DOCS), (gcp_parse, GCP_DOCS), (aws_parse, AWS_DOCS)):
        batch = parse(doc)
        assert len(batch.offers) >= 2, (parse.__name__, batch.counts())
    assert len(coreweave.build_batch(coreweave.parse_pricing_page(Selector(text=COREWEAVE_PAGE.decode()))).offers) > 5
    assert len(hyperstack.build_batch(hyperstack.parse_pricing_page(Selector(text=HYPERSTACK_PAGE.decode()))).offers) > 5


def test_damage_is_real() -> None:
    """The fuzzer's edits do reach the parsers: a few fixed damages and their outcomes."""
    with pytest.raises(SourceError):
        lambda_parse(damage(LAMBDA_DOC, [(0, False, [])]))  # the whole document replaced by a list
    batch = lambda_parse(damage(LAMBDA_DOC, [(paths(LAMBDA_DOC).index(("data", "gpu_1x_a10", "instance_type",
                                                                          "price_cents_per_hour")), False, "129")]))
    assert any("gpu_1x_a10" in q.source_ref for q in batch.quarantined)
    assert damage_html(COREWEAVE_PAGE, [(5, 0, "")]) != COREWEAVE_PAGE.decode()
