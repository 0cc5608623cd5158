"""What a source is: the one typed declaration every provider module makes.

A source module (an API adapter in `adapters/` or a page source in `spiders/`) declares
`PROVIDER = ProviderSpec(...)` and defines `fetch(ctx) -> Batch`; the registry
(`gpuledger.adapters.registry`) lists it with one line. Everything else that needs to know
about providers (secret redaction, the fault matrix, the nightly workflow's secrets, the docs'
provider tables, `status`, the report) reads these specs, so a new provider is four places:
its module, its recordings, its tests and its registry line.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuledger.warehouse.records import ProviderFacts

SourceKind = Literal["api", "page"]


class AnomalyThresholds(BaseModel):
    """When a successful-looking scrape is still too suspicious to load (the provider-level guard)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Fewer rows than this share of the last good run's holds the load back. Marketplaces whose
    # listings come and go (Lambda's capacity, Vast.ai's hosts) set it lower.
    min_row_ratio: float = Field(default=0.5, gt=0, le=1)
    # The median price per GPU-hour moving by more than this factor either way holds it back.
    max_median_ratio: float = Field(default=3.0, gt=1)


class ProviderSpec(BaseModel):
    """A source: its name, how it is fetched, its secrets, its facts and its guard thresholds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    kind: SourceKind  # "api": a provider's API through its client; "page": a web page through scrapy
    # Environment variables holding this source's secrets (the provider's standard names). Their
    # values are redacted from every message, record and recording, and the nightly workflow
    # passes exactly these from repository secrets.
    secret_env_vars: tuple[str, ...] = ()
    # False where prices are public and a key only adds data (RunPod: prices need no key).
    credentials_required: bool = False
    honours_retry_after: bool = True  # the provider sends Retry-After on 429/503 and means it
    anomaly: AnomalyThresholds = AnomalyThresholds()
    facts: ProviderFacts

    @property
    def display_name(self) -> str:
        return self.facts.display_name

    def facts_row(self) -> dict:
        """The `providers` table row of this source (source_urls as a list)."""
        row = {"provider": self.name, **self.facts.model_dump()}
        row["source_urls"] = list(self.facts.source_urls)
        return row
