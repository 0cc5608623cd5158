"""Pure: one region's price rows and EC2 facts -> AWS's offers (on-demand, Reserved terms, Savings
Plans, spot), EBS and egress prices, spot price history and Capacity Block offerings."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpuledger.adapters.aws import savings_plans
from gpuledger.adapters.aws.ec2 import InstanceSpecs, SpotObservation, parse_network_gbps
from gpuledger.adapters.aws.pricelist import GPU_FAMILIES, SKIP_STORAGE_DIMENSION, PriceRow, _positive, family_of
from gpuledger.adapters.base import drift_guard
from gpuledger.warehouse import interruption
from gpuledger.warehouse.capacity_blocks import add_capacity_block
from gpuledger.warehouse.gpus import GpuFacts, UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, amortized_usd_per_hour, commitment_option, not_usd
from gpuledger.warehouse.spot import add_spot_price

# Families that sell a slice of one card -> the full card's memory (MiB).
FRACTIONAL_FAMILIES = {"g6f": 22888, "gr6f": 22888}
# Intra-node GPU interconnect by family (AWS instance-type pages); other multi-GPU families: PCIe.
INTERCONNECT = {**dict.fromkeys(("p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300", "p6e-gb200"), "NVSwitch"),
                "p3": "NVLink", "p3dn": "NVLink"}
LEASE_MONTHS = {"1yr": 12, "3yr": 36}
RESERVED_CLASS = {"standard": "reserved", "convertible": "reserved_convertible"}


@dataclass
class RegionPayload:
    region: str
    prices: list[PriceRow]
    specs: dict[str, InstanceSpecs] | None = None  # None: no EC2 credentials
    offerings: dict[str, list[str]] | None = None  # None: not asked, or its answer failed
    spot_history: list[SpotObservation] = field(default_factory=list)  # the latest per AZ is the spot offer
    capacity_blocks: list[dict[str, Any]] = field(default_factory=list)  # CapacityBlockOfferings items
    savings_plans: list[savings_plans.SavingsPlanRate] = field(default_factory=list)
    savings_plan_publication: str | None = None
    advisor: dict[str, tuple[str, int]] = field(default_factory=dict)
    publication: str | None = None
    skipped: Counter[str] = field(default_factory=Counter)  # price-list rows not kept, by reason
    spot_skipped: Counter[str] = field(default_factory=Counter)  # spot observations not kept, by reason


def _gib(text: str) -> float | None:
    m = re.match(r"\s*([\d.,]+)\s*(GiB|GB)", text or "")
    return float(m.group(1).replace(",", "")) if m else None


def _local_disk_gb(text: str) -> float | None:
    """'2 x 3800 GB NVMe SSD' -> 7600; 'EBS only' -> None."""
    m = re.match(r"\s*(\d+)\s*x\s*([\d,.]+)\s*(GB|TB)", text or "")
    return int(m.group(1)) * float(m.group(2).replace(",", "")) * (1000 if m.group(3) == "TB" else 1) if m else None


def gpu_facts(instance_type: str, row: PriceRow | None, specs: InstanceSpecs | None) -> GpuFacts:
    """GPU model, count and memory from EC2's GpuInfo, else from the price list + family table."""
    family = family_of(instance_type)
    if specs is not None:
        name, vendor = specs.gpu_name, specs.gpu_vendor
        per_gpu_mib, total_mib = specs.gpu_memory_mib or None, specs.total_gpu_memory_mib or None
        count = float(specs.gpu_count_reported)
        if count == 0 and specs.logical_gpu_count:  # slices (and p5.4xlarge) report Count 0
            count = specs.logical_gpu_count * (specs.gpu_partition_size or 1.0)
    else:
        if family not in GPU_FAMILIES:
            raise UnknownGPUError(f"instance family {family!r} has GPUs but no known GPU name")
        vendor, name = GPU_FAMILIES[family]
        count = float(row.gpu) if row and _positive(row.gpu) else 0.0
        total_gb = _gib(row.gpu_memory) if row else None
        total_mib = total_gb * 1024 if total_gb else None
        per_gpu_mib = total_mib / count if total_mib and count else total_mib
    lookup_mib = per_gpu_mib
    if family in FRACTIONAL_FAMILIES:
        # Failing EC2's and the price list's fraction, the slice's memory over the card's.
        per_gpu_mib, lookup_mib = total_mib or per_gpu_mib, FRACTIONAL_FAMILIES[family]
        if not 0 < count < 1 and per_gpu_mib:
            count = round(per_gpu_mib / lookup_mib, 4)
    if count <= 0:
        raise ValueError(f"{instance_type}: GPU count {count:g} and no slice size to derive a fraction from")
    model, exact = canonicalize("aws", name, lookup_mib)
    return GpuFacts(
        gpu_model=model.gpu_model, variant_exact=exact, name=name, vendor=vendor or model.vendor, count=count,
        memory_gb=round(per_gpu_mib / 1024, 3) if per_gpu_mib else None, memory_gb_nominal=model.memory_gb,
        total_memory_gb=round(total_mib / 1024, 3) if total_mib else None)


def instance_fields(p: RegionPayload, itype: str, row: PriceRow | None) -> dict[str, Any]:
    """An instance type's offer columns: EC2's description where there is one, else the price list's."""
    specs = p.specs.get(itype) if p.specs is not None else None
    g = gpu_facts(itype, row, specs)
    spec = lambda name: getattr(specs, name, None) or None  # noqa: E731
    return dict(
        instance_type=itype, gpu_model=g.gpu_model, gpu_variant_exact=g.variant_exact, gpu_name_reported=g.name,
        gpu_vendor=g.vendor, gpu_count=g.count, gpu_memory_gb=g.memory_gb, total_gpu_memory_gb=g.total_memory_gb,
        vcpus=spec("vcpus") or (float(row.vcpu) if row and row.vcpu else None),
        ram_gb=spec("ram_gb") or (_gib(row.memory) if row else None),
        local_disk_gb=spec("local_disk_gb") or (_local_disk_gb(row.storage) if row else None) or None,
        interconnect=INTERCONNECT.get(family_of(itype), "PCIe") if g.count > 1 else None,
        network_gbps=spec("network_gbps") or (parse_network_gbps(row.network) if row else None),
        multinode_fabric="EFA" if specs and specs.efa else None)


def _availability(zones: list[str] | None) -> dict[str, Any]:
    if zones is None:
        return {}
    return dict(available=bool(zones), available_count=len(zones),
                availability_level=f"offered in {len(zones)} AZs" if zones else "not offered")


def _saving(price: float, reference: float | None) -> float | None:
    return round(100 * (1 - price / reference), 1) if reference else None


def reserved_term_price(rows: list[PriceRow]) -> tuple[float, float]:
    """(upfront fee, hourly) USD of one Reserved term: one Hrs row and at most one Quantity fee row."""
    if (other := next((r.currency for r in rows if r.currency != "USD"), None)) is not None:
        raise ValueError(not_usd(other))
    hourly, fees = [r.price for r in rows if r.unit == "Hrs"], [r.price for r in rows if r.unit == "Quantity"]
    if len(hourly) != 1 or len(fees) > 1 or len(hourly) + len(fees) != len(rows):
        raise ValueError(f"a reserved term needs one hourly row and at most one upfront fee row, got units "
                         f"{sorted(r.unit for r in rows)}")
    return (fees or [0.0])[0], hourly[0]


class _Region:
    """One region's offers: each type's columns made once, and its first on-demand price (the savings reference)."""

    def __init__(self, batch: Batch, p: RegionPayload) -> None:
        self.batch, self.p = batch, p
        self.columns: dict[tuple[str, bool], dict[str, Any] | Exception] = {}
        self.on_demand: dict[str, float] = {}

    def fields(self, itype: str, row: PriceRow | None, ref: str, raw: Any, why: str) -> dict[str, Any] | None:
        """The type's offer columns, or None (the offer `ref` quarantined) when they cannot be made."""
        key = (itype, row is None)
        if key not in self.columns:
            try:
                self.columns[key] = instance_fields(self.p, itype, row)
            except (UnknownGPUError, ValueError) as err:
                self.columns[key] = err
        made = self.columns[key]
        if isinstance(made, Exception):
            return self.batch.quarantine("offer", ref, f"{why}: {made}", raw)
        return made

    def priced(self, ref: str, raw: Any, row: PriceRow, option: str, price: float, observed: str | None,
               data: dict[str, Any], why: str, **terms: Any) -> bool:
        if (fields := self.fields(row.instance_type, row, ref, raw, why)) is None:
            return False
        zones = self.p.offerings.get(row.instance_type, []) if self.p.offerings is not None else None
        return self.batch.offer(ref, raw, region=self.p.region, purchase_option=option, price_per_hour=price,
                                price_observed_at=observed, **_availability(zones), **terms, **fields,
                                provider_data=data | {"availability_zones": zones})

    def on_demand_offer(self, row: PriceRow) -> None:
        ref = f"{self.p.region}/{row.instance_type}/{row.sku}"
        if row.unit != "Hrs":
            self.batch.quarantine("offer", ref, f"unexpected price unit {row.unit!r}", row.__dict__)
        elif self.batch.usd_only("offer", ref, row.currency, row.__dict__) and self.priced(
                ref, row.__dict__, row, "on_demand", row.price, self.p.publication, {"sku": row.sku}, "gpu"):
            # A second row of the type (a duplicate) is quarantined by the loader, which keeps the first.
            self.on_demand.setdefault(row.instance_type, row.price)

    def reserved_offer(self, rows: list[PriceRow]) -> None:
        """One Reserved term as its own purchase option, at its amortized hourly rate."""
        first = rows[0]
        ref, raw = f"{self.p.region}/{first.instance_type}/{first.sku}.{first.term_code}", [r.__dict__ for r in rows]
        months, payment = LEASE_MONTHS.get(first.lease), savings_plans.PAYMENTS.get(first.payment)
        commitment = RESERVED_CLASS.get(first.offering_class)
        if months is None or payment is None or commitment is None:
            return self.batch.quarantine("offer", ref, f"reserved term with unknown lease {first.lease!r}, payment "
                                         f"{first.payment!r} or class {first.offering_class!r}", raw)
        try:
            upfront, hourly = reserved_term_price(rows)
        except ValueError as err:
            return self.batch.quarantine("offer", ref, f"reserved term: {err}", raw)
        price = round(amortized_usd_per_hour(upfront, hourly, months), 10)
        self.priced(ref, raw, first, commitment_option(commitment, months, payment), price, self.p.publication,
                    {"sku": first.sku, "offer_term_code": first.term_code, "offering_class": first.offering_class,
                     "upfront_fee_usd": upfront, "hourly_usd": hourly,
                     "saving_vs_on_demand_pct": _saving(price, self.on_demand.get(first.instance_type))},
                    "reserved term", term_months=months, payment_option=payment)

    def savings_plan_offers(self) -> None:
        """Each Savings Plan rate of an on-demand offer of the region (by SKU) as its own purchase option."""
        p = self.p
        on_demand = {r.sku: r for r in p.prices
                     if r.kind == "instance" and self.on_demand.get(r.instance_type) == r.price}
        for rate in savings_plans.join_on_demand(p.savings_plans, on_demand, p.skipped):
            row = on_demand[rate.discounted_sku]
            ref, raw = f"{p.region}/{row.instance_type}/{rate.rate_code or rate.plan_sku}", rate.__dict__
            if rate.currency != "USD":
                self.batch.quarantine("offer", ref, f"savings plan rate in {rate.currency or 'no currency'}, not USD; "
                                      "no conversion is configured", raw)
                continue
            try:
                price = float(rate.rate)
            except ValueError:
                self.batch.quarantine("offer", ref, f"savings plan rate {rate.rate!r} is not a number", raw)
                continue
            self.priced(ref, raw, row, commitment_option(rate.commitment, rate.term_months, rate.payment_option), price,
                        p.savings_plan_publication or p.publication,
                        {"sku": row.sku, "savings_plan_sku": rate.plan_sku, "rate_code": rate.rate_code,
                         "usage_type": rate.usage_type, "plan": rate.description,
                         "saving_vs_on_demand_pct": _saving(price, self.on_demand.get(row.instance_type))},
                        "savings plan", term_months=rate.term_months, payment_option=rate.payment_option)

    def spot_offer(self, o: SpotObservation) -> None:
        try:
            price = float(o.price)
        except ValueError:
            return None  # quarantined with the history
        ref, stamp = f"{self.p.region}/{o.zone}/{o.instance_type}/spot", o.observed_at.isoformat()
        raw = {"instance_type": o.instance_type, "availability_zone": o.zone, "spot_price": price, "timestamp": stamp}
        if (fields := self.fields(o.instance_type, None, ref, raw, "gpu")) is None:
            return None
        band, advisor_saving = self.p.advisor.get(o.instance_type, (None, None))
        saving = _saving(price, self.on_demand.get(o.instance_type))
        if saving is None and advisor_saving is not None:
            saving = float(advisor_saving)
        self.batch.offer(ref, raw, region=self.p.region, zone=o.zone, purchase_option="spot", price_per_hour=price,
                         price_observed_at=stamp, available=True, availability_level="spot price published",
                         interruption_risk=band, **interruption.from_rate_band(band, interruption.AWS_SPOT_ADVISOR),
                         spot_savings_pct=saving,
                         provider_data={"advisor_savings_pct": advisor_saving}, **fields)

    def capacity_block(self, o: dict[str, Any]) -> None:
        itype, p = o.get("InstanceType", ""), self.p
        ref = f"{p.region}/{o.get('AvailabilityZone')}/{itype}/{o.get('CapacityBlockOfferingId')}"
        raw = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in o.items()}
        if (specs := (p.specs or {}).get(itype)) is None:
            return self.batch.quarantine("capacity_block", ref, "capacity block of a type EC2 did not describe", raw)
        try:
            g, fee = gpu_facts(itype, None, specs), float(o["UpfrontFee"])
        except (UnknownGPUError, ValueError) as err:
            return self.batch.quarantine("capacity_block", ref, f"{type(err).__name__}: {err}", raw)
        except KeyError as err:
            return self.batch.quarantine("capacity_block", ref, f"offering lacks {err}", raw)
        add_capacity_block(
            self.batch, ref, raw, region=p.region, zone=o.get("AvailabilityZone") or "", instance_type=itype,
            offering_id=o.get("CapacityBlockOfferingId") or "", instance_count=o.get("InstanceCount"),
            start_at=o.get("StartDate"), end_at=o.get("EndDate"), duration_hours=o.get("CapacityBlockDurationHours"),
            upfront_fee=fee, source_currency=o.get("CurrencyCode") or "", gpu_model=g.gpu_model, gpu_count=g.count,
            tenancy=o.get("Tenancy"))

    def spot_price(self, o: SpotObservation) -> None:
        ref = f"{self.p.region}/{o.zone}/{o.instance_type}/{o.observed_at.isoformat()}"
        raw = {"instance_type": o.instance_type, "availability_zone": o.zone, "spot_price": o.price,
               "timestamp": o.observed_at.isoformat()}
        try:
            price = float(o.price)
        except ValueError:
            return self.batch.quarantine("spot_price", ref, f"SpotPrice {o.price!r} is not a number", raw)
        add_spot_price(self.batch, ref, raw, region=self.p.region, zone=o.zone, instance_type=o.instance_type,
                       product_description=o.product_description, observed_at=o.observed_at,
                       spot_price_per_hour=price, source_currency="USD")


def _tier(text: str) -> float | None:
    return None if text in ("", "Inf") else float(text)


def _add_egress(batch: Batch, p: RegionPayload) -> None:
    for r in p.prices:
        if r.kind == "egress" and r.transfer_type == "AWS Outbound" and r.to_location in ("External", "") and \
                batch.usd_only("egress", f"{p.region}/internet/{r.sku}", r.currency, r.__dict__):
            batch.add("egress", f"{p.region}/internet/{r.sku}", r.__dict__, region=p.region, destination="internet",
                      tier_start_gb=_tier(r.tier_start) or 0.0, tier_end_gb=_tier(r.tier_end), usd_per_gb=r.price,
                      source_currency=r.currency, source_usd_per_gb=r.price, description=r.description)
    # Inter-region rates differ by destination: one per tier, the highest, so no estimate comes out too low.
    inter: dict[float, list[PriceRow]] = {}
    for r in p.prices:
        if r.kind == "egress" and r.transfer_type == "InterRegion Outbound" and \
                batch.usd_only("egress", f"{p.region}/inter_region/{r.sku}", r.currency, r.__dict__):
            inter.setdefault(_tier(r.tier_start) or 0.0, []).append(r)
    for start, rows in sorted(inter.items()):
        top, low = max(rows, key=lambda r: r.price), min(r.price for r in rows)
        batch.add("egress", f"{p.region}/inter_region/{top.sku}", top.__dict__, region=p.region,
                  destination="inter_region", tier_start_gb=start, tier_end_gb=_tier(top.tier_end),
                  usd_per_gb=top.price, source_currency=top.currency, source_usd_per_gb=top.price,
                  description=f"highest of {len(rows)} destination rates ({low:g} to {top.price:g} USD/GB)")


@drift_guard("aws: a region's price list and EC2 answers")
def build_region(batch: Batch, p: RegionPayload) -> None:
    region = _Region(batch, p)
    reserved: dict[tuple[str, str, str], list[PriceRow]] = {}
    for row in p.prices:
        if row.kind == "instance":
            region.on_demand_offer(row)
        elif row.kind == "reserved":
            reserved.setdefault((row.instance_type, row.sku, row.term_code), []).append(row)
        elif row.kind == "storage":
            if row.unit != "GB-Mo":  # IOPS/throughput dimensions of io2/gp3 are not per-GB prices
                p.skipped[SKIP_STORAGE_DIMENSION] += 1
            elif batch.usd_only("storage", f"{p.region}/{row.volume_api_name}/{row.sku}", row.currency, row.__dict__):
                batch.add("storage", row.sku, row.__dict__, region=row.region, storage_class=row.volume_api_name,
                          usd_per_gb_month=row.price, source_currency=row.currency,
                          source_usd_per_gb_month=row.price, description=row.description)
    _add_egress(batch, p)
    for rows in reserved.values():
        region.reserved_offer(rows)
    region.savings_plan_offers()
    latest = {(o.instance_type, o.zone): o for o in p.spot_history}  # oldest first: the last one stays
    for key in sorted(latest):
        region.spot_offer(latest[key])
    for block in p.capacity_blocks:
        region.capacity_block(block)
    for o in p.spot_history:
        region.spot_price(o)


def _families_phrase(pairs: list[tuple[str, str]]) -> str:
    """[(type, region)] -> 'g7 (6 types in us-east-1, us-west-2), p6-b300 (1 type in us-west-2)'."""
    by_family: dict[str, tuple[set[str], set[str]]] = {}
    for itype, region in pairs:
        types, regions = by_family.setdefault(family_of(itype), (set(), set()))
        types.add(itype)
        regions.add(region)
    return ", ".join(
        f"{fam} ({len(types)} type{'s' if len(types) > 1 else ''} in "
        f"{', '.join(sorted(regions)) if len(regions) <= 4 else f'{len(regions)} regions'})"
        for fam, (types, regions) in sorted(by_family.items()))


def refresh_notes(payloads: list[RegionPayload]) -> list[str]:
    notes = []
    if unpriced := [(t, p.region) for p in payloads if p.specs is not None
                    for t in sorted(set(p.specs) - {r.instance_type for r in p.prices if r.kind == "instance"})]:
        notes.append(f"{len(unpriced)} GPU type-region pairs described by EC2 but not in the price list "
                     f"(no on-demand offer made): {_families_phrase(unpriced)}")
    if no_gpu := sorted(p.region for p in payloads if not any(r.kind == "instance" for r in p.prices)):
        notes.append(f"{len(no_gpu)} regions have no GPU instance type in the price list: {', '.join(no_gpu)}")
    if skipped := sum((p.skipped for p in payloads), Counter()):
        notes.append("price-list rows skipped: " + "; ".join(
            f"{n} {reason}" for reason, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0]))))
    if spot_skipped := sum((p.spot_skipped for p in payloads), Counter()):
        notes.append("spot price observations skipped: " + "; ".join(
            f"{n} {reason}" for reason, n in sorted(spot_skipped.items())))
    return notes
