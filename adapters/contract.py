"""What a source is: every provider module declares `PROVIDER = ProviderSpec(...)` and defines
`fetch(ctx) -> Batch`; redaction, the fault matrix, the workflow's secrets and the docs read these specs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuledger.warehouse.records import Batch, ProviderFacts

if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext

class AnomalyThresholds(BaseModel):
    """A source's own limits for the anomaly guard, where the warehouse's defaults do not fit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # A scrape with fewer rows than this share of the last good run's is held back (None: 0.75).
    min_row_ratio: float | None = Field(default=None, gt=0, le=1)


class Enrichment(BaseModel):
    """An optional part of a source (spot prices, commitments, stock levels): when it fails or times
    out the run is degraded and the warehouse keeps the options' rows and columns it last gave."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)  # as the run's `degraded` column names it
    options: tuple[str, ...] = ()  # purchase options whose offers only this enrichment yields
    columns: tuple[str, ...] = ()  # offer columns only this enrichment fills
    provider_data_keys: tuple[str, ...] = ()  # keys of an offer's provider_data only this enrichment fills
    gpu_models_like: str = ""  # a LIKE pattern of the GPU models whose offers only this enrichment yields
    timeout_s: float = Field(default=600.0, gt=0)


class ProviderSpec(BaseModel):
    """A source: its name, how it is fetched, its secrets, its facts and its guard thresholds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    # "api": a provider's API through its client; "page": a web page through scrapy.
    source_kind: Literal["api", "page"]
    needs_browser: bool = False  # the page is rendered by JavaScript: Chromium must be found first
    # Environment variables whose values are secrets: cut out of every message, record and recording.
    secret_env_vars: tuple[str, ...] = ()
    # The repository secrets the nightly workflow passes (None: secret_env_vars).
    nightly_secrets: tuple[str, ...] | None = None
    credentials_required: bool = False  # False where prices are public and a key only adds data
    honours_retry_after: bool = True  # scrapy's retry middleware does not: page sources say False
    anomaly: AnomalyThresholds = AnomalyThresholds()
    max_answer_mb: float = Field(default=64, gt=0)  # on the wire or decompressed (bounds.py)
    # A refresh unit of another provider that loads side tables only: it never merges offers.
    side_tables_only: bool = False
    enrichments: tuple[Enrichment, ...] = ()
    facts: ProviderFacts

    @model_validator(mode="after")
    def _page_sources_alone_need_a_browser(self) -> "ProviderSpec":
        if self.needs_browser and self.source_kind != "page":
            raise ValueError(f"{self.name}: only a page source can need a browser")
        return self

    def batch(self) -> Batch:
        return Batch(self.name, self.facts)

    def enrichment(self, name: str) -> Enrichment:
        return next(e for e in self.enrichments if e.name == name)

    def enrich(self, ctx: SourceContext, name: str, fetch: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`ctx.enrich` of the enrichment `name`, within the timeout it declares."""
        return ctx.enrich(name, fetch, *args, timeout_s=self.enrichment(name).timeout_s, **kwargs)

    def degraded(self, ctx: SourceContext) -> list[dict]:
        """The enrichments that failed in `ctx` as a scrape's outcome hands them to the warehouse: what each
        alone yields (its declaration), and the regions it failed in when it failed in some regions only."""
        out = []
        for name, reason in ctx.degraded.items():
            regions = {r for rs in ctx.failures[name].values() for r in rs}
            out.append({**self.enrichment(name).model_dump(mode="json", exclude={"timeout_s"}), "reason": reason,
                        **({"regions": sorted(regions)} if "" not in regions else {})})
        return out

    @property
    def display_name(self) -> str:
        return self.facts.display_name

    @property
    def workflow_secrets(self) -> tuple[str, ...]:
        return self.secret_env_vars if self.nightly_secrets is None else self.nightly_secrets

    def facts_row(self) -> dict:
        """The `providers` table row of this source."""
        return {"provider": self.name, **self.facts.model_dump(), "source_urls": list(self.facts.source_urls)}
