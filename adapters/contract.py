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

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuledger.warehouse.records import Batch, ProviderFacts

SourceKind = Literal["api", "page"]


class AnomalyThresholds(BaseModel):
    """A source's own limits for the anomaly guard, where the warehouse's defaults do not fit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # A scrape with fewer rows than this share of the last good run's is held back. None: the
    # warehouse's default (AnomalyPolicy.min_row_ratio, 0.75). Sources whose rows follow live
    # capacity (Lambda's regions, Vast.ai's hosts) set it lower.
    min_row_ratio: float | None = Field(default=None, gt=0, le=1)


class Enrichment(BaseModel):
    """An optional part of a source: what its core offers gain from a further answer (spot prices,
    interruption rates, commitments, capacity blocks, stock levels). When it fails or runs past
    `timeout_s`, the scrape still succeeds: the run is marked degraded with the reason, and the
    warehouse keeps what the enrichment last gave (the rows of the purchase options and the values
    of the columns it owns stay as they were)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)  # as the run's `degraded` column names it: "capacity blocks"
    options: tuple[str, ...] = ()  # purchase options whose offers only this enrichment yields
    columns: tuple[str, ...] = ()  # offer columns only this enrichment fills
    timeout_s: float = Field(default=600.0, gt=0)


class ProviderSpec(BaseModel):
    """A source: its name, how it is fetched, its secrets, its facts and its guard thresholds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    # "api": a provider's API through its client; "page": a web page through scrapy.
    source_kind: SourceKind
    needs_browser: bool = False  # the page is rendered by JavaScript: Chromium must be found first
    # Environment variables whose values are secrets (the provider's standard names). Their values
    # are cut out of every message, record and recording.
    secret_env_vars: tuple[str, ...] = ()
    # The repository secrets the nightly workflow passes for this source; None: its
    # secret_env_vars. Differs where the workflow turns a secret into something else (GCP: a
    # service-account key written to a file for Application Default Credentials).
    nightly_secrets: tuple[str, ...] | None = None
    # False where prices are public and a key only adds data (AWS's public price list, RunPod).
    credentials_required: bool = False
    # Its client waits as long as a 429's Retry-After asks before trying again (the fault matrix
    # holds it to that); scrapy's retry middleware does not, so page sources say False.
    honours_retry_after: bool = True
    anomaly: AnomalyThresholds = AnomalyThresholds()
    # The most MB one answer may hold, on the wire or decompressed (adapters/bounds.py).
    max_answer_mb: float = Field(default=64, gt=0)
    # A refresh unit of another provider that loads side tables only (capacity blocks): its run never
    # merges offers, egress or storage, so it leaves the provider's rows as they are.
    side_tables_only: bool = False
    enrichments: tuple[Enrichment, ...] = ()
    facts: ProviderFacts

    @model_validator(mode="after")
    def _page_sources_alone_need_a_browser(self) -> "ProviderSpec":
        if self.needs_browser and self.source_kind != "page":
            raise ValueError(f"{self.name}: only a page source can need a browser")
        return self

    def batch(self) -> Batch:
        """An empty batch of this source's records, its facts filling each offer's billing terms."""
        return Batch(self.name, self.facts)

    def enrichment(self, name: str) -> Enrichment:
        return next(e for e in self.enrichments if e.name == name)

    @property
    def display_name(self) -> str:
        return self.facts.display_name

    @property
    def workflow_secrets(self) -> tuple[str, ...]:
        return self.secret_env_vars if self.nightly_secrets is None else self.nightly_secrets

    def facts_row(self) -> dict:
        """The `providers` table row of this source (source_urls as a list)."""
        row = {"provider": self.name, **self.facts.model_dump()}
        row["source_urls"] = list(self.facts.source_urls)
        return row
