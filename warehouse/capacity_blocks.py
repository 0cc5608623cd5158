"""AWS EC2 Capacity Blocks for ML: offerings of GPU capacity reserved ahead for one upfront fee, appended per
scrape to their own table (`capacity_block_offerings`): a type has many offerings at once."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from gpuledger.warehouse.records import MAX_PLAUSIBLE_PRICE_PER_HOUR_USD, Batch


class CapacityBlockOffering(BaseModel):
    """One offering: `instance_count` x `instance_type` in `zone` from `start_at` to `end_at`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = Field(min_length=1)
    region: str = Field(min_length=1)
    zone: str = Field(min_length=1)
    instance_type: str = Field(min_length=1)
    offering_id: str = Field(min_length=1)
    instance_count: int = Field(gt=0)
    start_at: datetime
    end_at: datetime
    duration_hours: int = Field(gt=0)
    upfront_fee: float
    source_currency: str = Field(pattern=r"^[A-Z]{3}$")
    gpu_model: str = Field(min_length=1)
    gpu_count: float = Field(gt=0)  # GPUs per instance
    tenancy: str | None = None

    @field_validator("start_at", "end_at")
    @classmethod
    def _aware_utc(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("timestamp has no time zone")
        return v.astimezone(timezone.utc)

    @model_validator(mode="after")
    def _consistent(self) -> "CapacityBlockOffering":
        if not math.isfinite(self.upfront_fee) or self.upfront_fee <= 0:
            raise ValueError(f"upfront fee must be a positive number, got {self.upfront_fee}")
        if self.source_currency != "USD":
            raise ValueError(f"fee in {self.source_currency}, not USD; no conversion is configured")
        if self.end_at <= self.start_at:
            raise ValueError("end_at must be after start_at")
        if self.usd_per_hour / self.instance_count > MAX_PLAUSIBLE_PRICE_PER_HOUR_USD:
            raise ValueError(f"{self.usd_per_hour / self.instance_count:.2f} USD per instance-hour exceeds "
                             f"the plausibility cap {MAX_PLAUSIBLE_PRICE_PER_HOUR_USD}")
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def upfront_fee_usd(self) -> float:
        return self.upfront_fee

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usd_per_hour(self) -> float:
        """The whole block's price per hour of its duration."""
        return self.upfront_fee_usd / self.duration_hours

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_hour / (self.instance_count * self.gpu_count)


def add_capacity_block(batch: Batch, ref: str, raw: Any, **fields: Any) -> bool:
    """Validate one offering into `batch.capacity_blocks`, or quarantine it (kind capacity_block)."""
    return batch.add_row("capacity_block", CapacityBlockOffering, batch.capacity_blocks, ref, raw, fields)

