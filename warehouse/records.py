"""The record contract every source emits: one normalized shape per table, validated as a source adds
records to a `Batch`; a record that breaks it becomes a quarantine entry naming source, record and field."""

from __future__ import annotations

import csv
import functools
import json
import textwrap
import math
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping, SupportsIndex

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field, field_validator, model_validator

from gpuledger.warehouse import gpus, interruption

# Above this hourly price a machine is a parsing or unit error (the largest 8-GPU nodes list at $100-$160/h).
MAX_PLAUSIBLE_PRICE_PER_HOUR_USD = 2_000.0
MAX_PLAUSIBLE_USD_PER_GB = 10.0  # egress per GB, storage per GB-month


@functools.cache
def plausible() -> dict[str, tuple[float, float, float]]:
    """GPU model -> (min, max USD per GPU-hour, max GPUs per instance) from warehouse/data/plausibility.csv."""
    with (Path(__file__).parent / "data" / "plausibility.csv").open(newline="") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {model: (float(r["min_usd_per_gpu_hour"]), float(r["max_usd_per_gpu_hour"]),
                         float(r["max_gpus_per_instance"])) for r in rows for model in r["models"].split()}


class PurchaseOption(str, Enum):
    """How the capacity is bought without a commitment (a commitment's is named by `commitment_option`)."""

    ON_DEMAND = "on_demand"
    SPOT = "spot"  # AWS Spot, GCP Spot/Preemptible, Azure Spot: provider may reclaim
    LOW_PRIORITY = "low_priority"  # Azure Batch low-priority
    INTERRUPTIBLE = "interruptible"  # marketplace bid capacity (Vast.ai, RunPod spot)


class Commitment(str, Enum):
    """What a term commitment buys; with its term and payment option it names a purchase option."""

    RESERVED = "reserved"  # AWS Standard Reserved Instance, Azure reservation: one instance type
    RESERVED_CONVERTIBLE = "reserved_convertible"  # AWS Convertible RI: exchangeable for another type
    SAVINGS_PLAN = "savings_plan"  # Azure savings plan: an hourly spend commitment
    COMPUTE_SAVINGS_PLAN = "compute_savings_plan"  # AWS: an hourly spend on any EC2 type, region, OS
    EC2_INSTANCE_SAVINGS_PLAN = "ec2_instance_savings_plan"  # AWS: an hourly spend on one family in one region
    COMMITTED_USE = "committed_use"  # GCP resource-based committed use (vCPU, memory, GPU, Local SSD)


class PaymentOption(str, Enum):
    NO_UPFRONT = "no_upfront"  # billed hourly or monthly over the term
    PARTIAL_UPFRONT = "partial_upfront"  # a fee at purchase plus a lower hourly rate
    ALL_UPFRONT = "all_upfront"  # the whole term paid at purchase
    UPFRONT_OR_MONTHLY = "upfront_or_monthly"  # Azure: the same total either way


HOURS_PER_YEAR = 8760  # AWS and Azure state effective hourly rates over 8760-hour years


def commitment_option(commitment: str, term_months: int, payment_option: str) -> str:
    """The purchase option of a commitment, 'reserved_3y_partial_upfront': term and payment are in the
    name so the offer key keeps them apart (the `term_months` and `payment_option` columns repeat them)."""
    commitment, payment_option = Commitment(commitment).value, PaymentOption(payment_option).value
    if term_months <= 0 or term_months % 12:
        raise ValueError(f"a commitment term is whole years, got {term_months} months")
    return f"{commitment}_{term_months // 12}y_{payment_option}"


def amortized_usd_per_hour(upfront_usd: float, hourly_usd: float, term_months: int) -> float:
    """Effective USD per hour of a commitment: the upfront fee over the term's hours, plus the hourly part."""
    if upfront_usd < 0 or hourly_usd < 0:
        raise ValueError("a commitment's upfront fee and hourly rate are never negative")
    return upfront_usd / (HOURS_PER_YEAR * term_months / 12) + hourly_usd


_COMMITMENT_OPTIONS = {commitment_option(c.value, months, p.value): (months, p.value)
                       for c in Commitment for months in (12, 36) for p in PaymentOption}
PURCHASE_OPTIONS: tuple[str, ...] = tuple(o.value for o in PurchaseOption) + tuple(_COMMITMENT_OPTIONS)


class EgressDestination(str, Enum):
    INTERNET = "internet"
    INTER_REGION = "inter_region"
    SAME_REGION = "same_region"  # e.g. between availability zones


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=True)
    KEY: ClassVar[tuple[str, ...]]  # the fields that identify a row, first in field order (warehouse/schema.py)

    provider: str = Field(min_length=1)
    region: str = Field(min_length=1)

    @property
    def key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.KEY)

    @field_validator("price_per_hour", "source_price_per_hour", "gpu_count", "gpu_memory_gb", "gpu_memory_gb_nominal",
                     "total_gpu_memory_gb", "vcpus", "ram_gb", "usd_per_gb_month", "source_usd_per_gb_month",
                     check_fields=False)
    @classmethod
    def _finite_positive(cls, value: float | None, info: Any) -> float | None:
        if value is None:
            return None
        if not math.isfinite(value):
            raise ValueError(f"{info.field_name} is not a finite number")
        if value <= 0:
            raise ValueError(f"{info.field_name} must be positive, got {value}")
        return value


class Offer(_Record):
    """One rentable configuration at one place under one purchase option; units are in the field
    names, `price_per_hour` is USD (the source's own currency and amount are kept beside it)."""

    KEY = ("provider", "region", "zone", "instance_type", "purchase_option")

    zone: str = ""  # "" when the price is regional, not per availability zone
    instance_type: str = Field(min_length=1)
    purchase_option: str  # a PurchaseOption, or a commitment's (`commitment_option`)

    gpu_model: str = Field(min_length=1)  # canonical, from warehouse.gpus
    gpu_variant_exact: bool = True  # False: source named only the family ("H100")
    gpu_name_reported: str = Field(min_length=1)
    gpu_vendor: str = Field(min_length=1)
    gpu_count: float = Field(gt=0)  # fractional for GPU slices (AWS g6f: 0.125 L4)
    gpu_memory_gb: float | None = None  # per GPU (or slice), GiB as the source reports it
    gpu_memory_gb_nominal: float | None = None  # the card's marketed size, from gpu_models
    total_gpu_memory_gb: float | None = None

    vcpus: float | None = None
    ram_gb: float | None = None
    local_disk_gb: float | None = Field(None, ge=0, allow_inf_nan=False)
    interconnect: str | None = None  # intra-node GPU link: "NVSwitch", "NVLink", "PCIe"
    network_gbps: float | None = Field(None, ge=0, allow_inf_nan=False)
    multinode_fabric: str | None = None  # "EFA", "InfiniBand NDR", ...

    price_per_hour: float  # USD
    source_currency: str = Field(min_length=3, max_length=3)
    source_price_per_hour: float
    price_observed_at: datetime | None = None

    billing_granularity_s: int | None = None
    minimum_charge_s: int | None = None

    available: bool | None = None  # the source says capacity can be had right now
    available_count: int | None = Field(None, ge=0)
    availability_level: str | None = None  # source's own words: "high", "low", "offered"
    interruption_risk: str | None = None  # e.g. AWS Spot Advisor bucket "<5%"
    spot_savings_pct: float | None = Field(None, allow_inf_nan=False)  # negative when spot costs more
    reliability: float | None = Field(None, allow_inf_nan=False)  # marketplace host reliability, 0..1

    provider_data: str = "{}"  # JSON: source fields without a column of their own
    operated_by: str = Field(min_length=1)  # the cloud running it: `provider`, or the one an aggregator resells
    # A commitment's term and payment (price_per_hour is then the upfront fee amortized plus the hourly part)
    term_months: int | None = None
    payment_option: str | None = None

    # One interruption-risk scale across providers (warehouse/interruption.py), filled from the
    # purchase option when the source gives no signal.
    interruption_risk_level: str = "unknown"  # none | low | medium | high | unknown
    interruption_rate_max_pct: float | None = None
    interruption_risk_source: str = "unpublished"
    gpu_memory_from_canon: bool = False  # the source states none: gpu_memory_gb is the canon's

    @model_validator(mode="before")
    @classmethod
    def _defaults_unless_said(cls, data: Any) -> Any:
        """operated_by: the provider; the interruption risk: the purchase option's."""
        if not isinstance(data, dict):
            return data
        if data.get("operated_by") is None and "provider" in data:
            data = {**data, "operated_by": data["provider"]}
        if "interruption_risk_source" not in data:
            option = getattr(data.get("purchase_option"), "value", data.get("purchase_option"))
            committed = option in _COMMITMENT_OPTIONS  # reserved capacity is not reclaimed
            data = {**interruption.default_for("on_demand" if committed else option), **data}
        return data

    @field_validator("purchase_option", mode="before")
    @classmethod
    def _known_option(cls, v: Any) -> str:
        v = v.value if isinstance(v, Enum) else v
        if v not in PURCHASE_OPTIONS:
            raise ValueError(f"unknown purchase option {v!r}")
        return v

    @field_validator("price_observed_at")
    @classmethod
    def _observed_in_utc(cls, v: datetime | None) -> datetime | None:
        if v is None:
            return None
        if v.utcoffset() is None:  # a naive time would be read in whatever zone the reader is in
            raise ValueError("price_observed_at has no UTC offset")
        return v.astimezone(timezone.utc)

    @field_validator("source_currency")
    @classmethod
    def _currency_code(cls, v: str) -> str:
        if not v.isalpha() or not v.isupper():
            raise ValueError(f"currency must be an ISO 4217 code, got {v!r}")
        return v

    @field_validator("provider_data")
    @classmethod
    def _json_object(cls, v: str) -> str:
        if not isinstance(json.loads(v), dict):
            raise ValueError("provider_data must be a JSON object")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Offer":
        if self.price_per_hour > MAX_PLAUSIBLE_PRICE_PER_HOUR_USD:
            raise ValueError(f"price_per_hour {self.price_per_hour} USD exceeds the plausibility cap "
                             f"{MAX_PLAUSIBLE_PRICE_PER_HOUR_USD}")
        low, high, most = plausible().get(self.gpu_model, (0.0, math.inf, math.inf))
        if self.gpu_count > most:
            raise ValueError(f"gpu_count {self.gpu_count:g} exceeds {most:g}, the most {self.gpu_model} GPUs one "
                             "instance plausibly has (warehouse/data/plausibility.csv)")
        if not low <= self.price_per_gpu_hour <= high:
            raise ValueError(f"price_per_gpu_hour {self.price_per_gpu_hour:.6g} USD is outside {low:g}..{high:g}, "
                             f"the plausible range for {self.gpu_model} (warehouse/data/plausibility.csv)")
        if self.source_currency == "USD" and not math.isclose(self.price_per_hour, self.source_price_per_hour,
                                                              rel_tol=1e-9):
            raise ValueError("a USD source price must equal price_per_hour")
        if self.reliability is not None and not 0 <= self.reliability <= 1:
            raise ValueError(f"reliability must be within 0..1, got {self.reliability}")
        term = _COMMITMENT_OPTIONS.get(self.purchase_option, (None, None))
        if (self.term_months, self.payment_option) != term:
            raise ValueError(f"purchase option {self.purchase_option} has term {term[0]} months and payment "
                             f"{term[1]}, not {self.term_months} and {self.payment_option}")
        if self.interruption_risk_level not in interruption.LEVELS:
            raise ValueError(f"interruption_risk_level must be one of {interruption.LEVELS}, "
                             f"got {self.interruption_risk_level!r}")
        if self.interruption_risk_source not in interruption.SOURCES:
            raise ValueError(f"interruption_risk_source {self.interruption_risk_source!r} is not in "
                             "warehouse/interruption.py SOURCES")
        rate = self.interruption_rate_max_pct
        if rate is not None and not (math.isfinite(rate) and 0 < rate <= 100):
            raise ValueError(f"interruption_rate_max_pct must be within (0, 100], got {rate}")
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def price_per_gpu_hour(self) -> float:
        """USD per whole-GPU hour: a 1/8 slice at $0.30/h is $2.40 per GPU-hour."""
        return self.price_per_hour / self.gpu_count


class EgressPrice(_Record):
    """One tier of data-transfer-out pricing; tiers are [start, end) in GB per month."""

    KEY = ("provider", "region", "destination", "tier_start_gb")

    destination: EgressDestination
    tier_start_gb: float = Field(ge=0, allow_inf_nan=False)
    tier_end_gb: float | None = Field(None, allow_inf_nan=False)  # None = no upper bound
    usd_per_gb: float = Field(ge=0)
    source_currency: str = Field(min_length=3, max_length=3)
    source_usd_per_gb: float = Field(ge=0, allow_inf_nan=False)
    description: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> "EgressPrice":
        if not math.isfinite(self.usd_per_gb) or self.usd_per_gb > MAX_PLAUSIBLE_USD_PER_GB:
            raise ValueError(f"usd_per_gb {self.usd_per_gb} is not plausible")
        if self.tier_end_gb is not None and self.tier_end_gb <= self.tier_start_gb:
            raise ValueError("tier_end_gb must be above tier_start_gb")
        return self


class StoragePrice(_Record):
    """Block/network storage a fine-tuning job keeps its data and checkpoints on."""

    KEY = ("provider", "region", "storage_class")

    storage_class: str = Field(min_length=1)  # "gp3", "pd-ssd", "network-volume"
    usd_per_gb_month: float
    source_currency: str = Field(min_length=3, max_length=3)
    source_usd_per_gb_month: float
    description: str = ""

    @model_validator(mode="after")
    def _plausible(self) -> "StoragePrice":
        if self.usd_per_gb_month > MAX_PLAUSIBLE_USD_PER_GB:
            raise ValueError(f"usd_per_gb_month {self.usd_per_gb_month} is not plausible")
        return self


class Quarantined(BaseModel):
    """A record that could not be turned into a valid row, kept as evidence."""

    model_config = ConfigDict(frozen=True)

    provider: str
    kind: str  # offer | egress | storage | gpu
    source_ref: str  # what the source calls the record: SKU, instance type, row number
    reason: str
    raw: str  # the raw source record, JSON


RECORD_TYPES: dict[str, type[_Record]] = {"offer": Offer, "egress": EgressPrice, "storage": StoragePrice}
# Each kind's USD price field and the field of the source's own amount beside it.
SOURCE_PRICE_FIELDS = {"offer": ("price_per_hour", "source_price_per_hour"),
                       "egress": ("usd_per_gb", "source_usd_per_gb"),
                       "storage": ("usd_per_gb_month", "source_usd_per_gb_month")}


def _raw_json(raw: Any) -> str:
    try:
        return json.dumps(raw, sort_keys=True, default=str)[:20_000]
    except (TypeError, ValueError):
        return json.dumps(repr(raw)[:20_000])


def utf8_text(text: str) -> str:
    """`text` as UTF-8 can hold it: a lone surrogate (a provider's "\\ud800" escape) kept as its escape."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def shortened(text: str, width: int) -> str:
    """`text` on one line within `width` characters, cut after a whole word and marked " …"; a first word
    longer than the width is cut inside (textwrap.shorten alone would leave only the mark)."""
    short = textwrap.shorten(text, width, placeholder=" …", break_on_hyphens=False)
    return short if short != "…" else " ".join(text.split())[:width - 2] + " …"


def failure_reason(err: Exception) -> str:
    """The quarantine reason of a record its parser refused: a KeyError names the field the record lacks."""
    return f"schema: lacks {err}" if isinstance(err, KeyError) else str(err)


def not_usd(currency: str | None, unit: str = "USD") -> str:
    """Why a price in `currency` is not stored: `unit` is what the source should price in ("USD cents")."""
    return f"price in {currency or 'no currency'}, not {unit}; no conversion is configured"


def require_usd(currency: str | None, unit: str = "USD") -> None:
    """ValueError for a price stated in another currency (none stated is USD): it is never stored as USD."""
    if currency not in (None, "USD"):
        raise ValueError(not_usd(currency, unit))


def tally(counts: Mapping[str, int]) -> str:
    """{"monthly plans": 2, "CPU-only sizes": 3} -> "3 CPU-only sizes, 2 monthly plans"; "" when empty."""
    return ", ".join(f"{n} {why}" for why, n in sorted(counts.items()))


def describe_validation_error(err: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}" for e in err.errors())


# Known secret values never enter a record (a server may quote our key inside the data): the cutter
# factory is installed by gpuledger.adapters.base, which knows the secrets.
TextCutter = Callable[[str], str]
_secret_cutter: Callable[[], TextCutter | None] | None = None


def install_secret_cutter(factory: Callable[[], TextCutter | None]) -> None:
    """`factory()` gives the function that cuts every known secret value out of a text (or None)."""
    global _secret_cutter
    _secret_cutter = factory


class _Notes(list[str]):
    """A batch's notes: each one passes the batch's secret cutter on its way in."""

    def __init__(self, cut: Callable[[str], str]) -> None:
        super().__init__()
        self._cut = cut

    def append(self, note: str) -> None:
        super().append(self._cut(note))

    def insert(self, index: SupportsIndex, note: str) -> None:
        super().insert(index, self._cut(note))

    def extend(self, notes: Iterable[str]) -> None:
        super().extend(self._cut(n) for n in notes)

    def __iadd__(self, notes: Iterable[str]) -> "_Notes":  # type: ignore[override,misc]
        self.extend(notes)
        return self


class Batch:
    """What one provider's parse produced: valid records plus quarantined ones, never raising for one
    bad record. Each known secret value is cut from every text first (`secrets_redacted` counts them)."""

    def __init__(self, provider: str, facts: ProviderFacts | None = None) -> None:
        self.provider = provider
        self.facts = facts  # the provider's billing terms fill each offer's that the source leaves out
        self.offers: list[Offer] = []
        self.egress: list[EgressPrice] = []
        self.storage: list[StoragePrice] = []
        self.quarantined: list[Quarantined] = []
        self.notes: list[str] = _Notes(self._cut_text)
        # Rows of tables outside the SCD2 merge, validated by their own modules (spot, capacity_blocks, availability)
        self.spot_prices: list[Any] = []
        self.capacity_blocks: list[Any] = []
        self.availability: list[Any] = []
        self.secrets_redacted = 0

    @functools.cached_property
    def _cutter(self) -> TextCutter | None:
        # Asked once, at the first record: the scrape has authenticated by then, so its secrets are known.
        return _secret_cutter() if _secret_cutter is not None else None

    def _cut_text(self, text: str) -> str:
        return self.without_secrets({"text": utf8_text(text) if isinstance(text, str) else text})["text"]

    def without_secrets(self, fields: dict[str, Any]) -> dict[str, Any]:
        """`fields` with every known secret value cut from its text."""
        if (cut := self._cutter) is None:
            return fields
        clean = {k: cut(v) if isinstance(v, str) else v for k, v in fields.items()}
        if clean != fields:
            self.secrets_redacted += 1
        return clean

    def add(self, kind: str, ref: str, raw: Any, **fields: Any) -> bool:
        """Validate one record into its table, or quarantine it. A record naming no source currency was priced in
        USD (its source price is then the USD one); `provider_data` may be a dict, stored as JSON with sorted keys."""
        fields.setdefault("source_currency", "USD")
        if fields["source_currency"] == "USD":
            usd, source = SOURCE_PRICE_FIELDS[kind]
            fields.setdefault(source, fields.get(usd))
        if isinstance(fields.get("provider_data"), dict):
            fields["provider_data"] = json.dumps(fields["provider_data"], sort_keys=True, default=str)
        fields = self.without_secrets(fields)
        if unencodable := [k for k, v in fields.items() if isinstance(v, str) and utf8_text(v) is not v]:
            self.quarantine(kind, ref, f"contract: {', '.join(unencodable)} holds text UTF-8 cannot encode "
                            "(a lone surrogate escape)", raw)
            return False
        try:
            record = RECORD_TYPES[kind](provider=self.provider, **fields)
        except (TypeError, ValueError) as err:  # a ValidationError too
            why = describe_validation_error(err) if isinstance(err, ValidationError) else err
            self.quarantine(kind, ref, f"contract: {why}", raw)
            return False
        records = {"offer": self.offers, "egress": self.egress, "storage": self.storage}[kind]
        records.append(record)  # type: ignore[arg-type]
        return True

    def add_row(self, kind: str, model: type[BaseModel], rows: list[Any], ref: str, raw: Any,
                fields: dict[str, Any]) -> bool:
        """Validate one row of a side table (spot, capacity_blocks, availability) into `rows`, or quarantine it."""
        try:
            rows.append(model(provider=self.provider, **self.without_secrets(fields)))
        except ValidationError as err:
            self.quarantine(kind, ref, f"contract: {describe_validation_error(err)}", raw)
            return False
        return True

    def offer(self, ref: str, raw: Any, *, gpu: str | None = None, gpu_model: str | None = None,
              gpu_lookup_mib: float | None = None, **fields: Any) -> bool:
        """Add an offer, filling the GPU fields from the canon and billing from the provider's facts unless given.

        `gpu` (the source's name) is resolved within the reported `gpu_memory_gb` (or `gpu_lookup_mib`),
        an unknown name quarantined; `gpu_model` names a model the source resolved itself."""
        memory = fields.get("gpu_memory_gb")
        try:
            if gpu_model is None:
                lookup = gpu_lookup_mib if gpu_lookup_mib is not None else memory * 1024 if memory else None
                model, exact = gpus.canonicalize(self.provider, gpu or "", lookup)
                fields.setdefault("gpu_variant_exact", exact)
            else:
                model = gpus.models()[gpu_model]
        except gpus.UnknownGPUError as err:
            self.quarantine("offer", ref, f"gpu: {err}", raw)
            return False
        except KeyError:
            self.quarantine("offer", ref, f"gpu: {gpu_model!r} is not a model of warehouse/data/gpu_models.csv", raw)
            return False
        if gpu is not None:
            fields.setdefault("gpu_name_reported", gpu)
        fields.setdefault("gpu_model", model.gpu_model)
        fields.setdefault("gpu_vendor", model.vendor)
        fields.setdefault("gpu_memory_gb_nominal", model.memory_gb)
        count = fields.get("gpu_count")
        if memory is None and model.memory_gb and isinstance(count, (int, float)) and count >= 1:
            # the source states none; a slice's share of the card is not known, so a slice stays without
            memory = fields["gpu_memory_gb"] = float(model.memory_gb)
            fields["gpu_memory_from_canon"] = True
        if memory and isinstance(count, (int, float)) and "total_gpu_memory_gb" not in fields:
            # a slice of one GPU (count below 1) reports the slice's own memory
            fields["total_gpu_memory_gb"] = memory * count if count >= 1 else memory
        if self.facts is not None:
            fields.setdefault("billing_granularity_s", self.facts.billing_granularity_s)
            fields.setdefault("minimum_charge_s", self.facts.minimum_charge_s)
        return self.add("offer", ref, raw, **fields)

    def quarantine(self, kind: str, ref: str, reason: str, raw: Any) -> None:
        entry = self.without_secrets({"source_ref": utf8_text(str(ref)), "reason": utf8_text(reason),
                                      "raw": _raw_json(raw)})
        self.quarantined.append(Quarantined(provider=self.provider, kind=kind, **entry))

    def listed_again(self, seen: set[Any], key: Any, what: str, raw: Any, ref: str | None = None) -> bool:
        """True for a `key` in `seen` (the keys listed before): this listing is quarantined as a
        duplicate `what` ("sku H100-1-80G"), the first kept."""
        if key in seen:
            ref = str(key) if ref is None else ref
            self.quarantine("offer", ref, f"duplicate {what}: listed again (first listing kept, this one refused)", raw)
            return True
        seen.add(key)
        return False

    def usd_only(self, kind: str, ref: str, currency: str | None, raw: Any) -> bool:
        """True for a price stated in USD; any other (or none) is quarantined, never stored as USD."""
        if currency == "USD":
            return True
        self.quarantine(kind, ref, not_usd(currency), raw)
        return False

    def note_skipped(self, summary: str, skipped: Mapping[str, int]) -> None:
        """Note `summary` and the records left out by reason: "...; skipped: 3 CPU-only sizes" (or "none")."""
        self.notes.append(f"{summary}; skipped: {tally(skipped) or 'none'}")

    def counts(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in ("offers", "egress", "storage", "quarantined")}


class ProviderFacts(BaseModel):
    """What a provider is and how it bills: one row of the `providers` table (its `PROVIDER.facts`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    display_name: str = Field(min_length=1)
    kind: str = Field(pattern=r"^(hyperscaler|gpu_cloud|marketplace|aggregator)$")  # the provider's category
    billing_granularity_s: int = Field(gt=0)
    minimum_charge_s: int | None = Field(default=None, ge=0)
    billing_notes: str | None = None
    storage_persists_when_stopped: bool | None = None  # None: not documented
    stopped_billing_notes: str | None = None
    access_ssh: bool | None = None
    access_docker: bool | None = None
    access_jupyter: bool | None = None
    multinode_interconnect: str | None = None
    interruptible_offer: str | None = None
    price_source: str = Field(min_length=1)
    source_urls: tuple[str, ...] = Field(min_length=1)

    @field_validator("source_urls")
    @classmethod
    def _https(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        if bad := [u for u in urls if not u.startswith("https://")]:
            raise ValueError(f"source URLs must be https: {bad}")
        return urls
