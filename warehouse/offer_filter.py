"""The offer filters of the Python API and `gpuledger show-gpus`: one SQL condition over `offers`; a name
that matches nothing is a FilterError naming the nearest, never an empty answer."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

import duckdb

from gpuledger.warehouse.recommender.names import resolve_name

# Memory per GPU as the filters read it.
VRAM_SQL = ("case when o.gpu_count < 1 then coalesce(o.gpu_memory_gb, o.gpu_memory_gb_nominal * o.gpu_count) "
            "else coalesce(o.gpu_memory_gb_nominal, o.gpu_memory_gb) end")
RECLAIMABLE_SQL = "o.purchase_option in ('spot', 'low_priority', 'interruptible')"
NAMES_SQL = {
    "GPU": "select gpu_model from gpu_models union select family from gpu_models",
    "provider": "select provider from providers union select provider from scrape_runs "
                "union select provider from offers",
    "region": "select distinct region from offers",
}


class FilterError(ValueError):
    """A name or value that can select nothing, named (with the nearest name); the CLI exits 2."""


def known_names(con: duckdb.DuckDBPyConnection, kind: str) -> list[str]:
    """The GPU models and families, providers or regions the warehouse holds."""
    return [name for (name,) in con.execute(NAMES_SQL[kind]).fetchall() if name]


def resolve_names(kind: str, given: Iterable[str], known: Iterable[str]) -> tuple[str, ...]:
    """Each of `given` as `known` spells it (any case), without repeats; else FilterError."""
    known = list(known)
    try:
        return tuple(dict.fromkeys(resolve_name(kind, g, known) for g in given))
    except ValueError as err:
        raise FilterError(str(err)) from None


@dataclass(frozen=True)
class OfferFilter:
    gpu: str | None = None
    min_vram_gb: float | None = None
    spot: bool | None = None
    providers: Sequence[str] = field(default=())
    regions: Sequence[str] = field(default=())
    min_gpu_count: float | None = None
    max_gpu_count: float | None = None
    max_price: float | None = None
    commitments: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.providers, str) or isinstance(self.regions, str):
            raise FilterError("providers and regions are lists of names, not one string")
        for name in ("min_vram_gb", "min_gpu_count", "max_gpu_count", "max_price"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise FilterError(f"{name} must be a number >= 0, got {value!r}")
        if self.min_gpu_count is not None and self.max_gpu_count is not None \
                and self.min_gpu_count > self.max_gpu_count:  # no offer passes: said, not an empty answer
            raise FilterError(f"min_gpu_count {self.min_gpu_count:g} is more than max_gpu_count "
                              f"{self.max_gpu_count:g}: no offer can pass both")

    def resolved(self, con: duckdb.DuckDBPyConnection, providers: Iterable[str] = ()) -> OfferFilter:
        """This filter with each name as the warehouse spells it (`providers`: more known provider
        names, e.g. the registered sources); FilterError for a name that matches nothing."""
        gpu = resolve_names("GPU", [self.gpu], known_names(con, "GPU"))[0] if self.gpu else None
        named = resolve_names("provider", self.providers, {*known_names(con, "provider"), *providers})
        known, regions = (known_names(con, "region") if self.regions else []), ()
        for r in self.regions:  # a prefix (us-*) stays as given where some region starts with it
            prefixed = r.endswith("*") and any(k.lower().startswith(r[:-1].lower()) for k in known)
            try:
                regions += (r,) if prefixed else resolve_names("region", [r.rstrip("*")], known)
            except FilterError as err:  # named as given ('eu-*'), not as looked for ('eu-')
                raise FilterError(str(err).replace(repr(r.rstrip("*")), repr(r), 1)) from None
        return replace(self, gpu=gpu, providers=named, regions=tuple(dict.fromkeys(regions)))

    def where(self) -> tuple[str, dict[str, Any]]:
        """The SQL condition over `offers o` (joined to nothing) and its named parameters; the names
        as the warehouse spells them (`resolved`)."""
        parts: list[str] = [] if self.commitments else ["o.term_months is null"]
        params: dict[str, Any] = {}
        if self.gpu:
            parts.append("(o.gpu_model = $gpu "
                         "or o.gpu_model in (select gpu_model from gpu_models where family = $gpu))")
            params["gpu"] = self.gpu
        if self.spot is True:
            parts.append(RECLAIMABLE_SQL)
        elif self.spot is False:  # not reclaimable: on demand, and the commitments when they are asked for
            parts.append("(o.purchase_option = 'on_demand' or o.term_months is not null)")
        if self.providers:
            parts.append("o.provider in (select unnest($providers::varchar[]))")
            params["providers"] = list(self.providers)
        if self.regions:
            exact = [r for r in self.regions if not r.endswith("*")]
            prefixes = [r[:-1].lower() for r in self.regions if r.endswith("*")]
            parts.append("(o.region in (select unnest($regions::varchar[])) or "
                         "list_bool_or([starts_with(lower(o.region), p) for p in $prefixes::varchar[]]))")
            params["regions"], params["prefixes"] = exact, prefixes
        for value, name, condition in ((self.min_vram_gb, "min_vram", f"({VRAM_SQL}) >="),
                                       (self.min_gpu_count, "min_gpus", "o.gpu_count >="),
                                       (self.max_gpu_count, "max_gpus", "o.gpu_count <="),
                                       (self.max_price, "max_price", "o.price_per_gpu_hour <=")):
            if value is not None:
                parts.append(f"{condition} ${name}")
                params[name] = value
        return (" and ".join(parts) or "true"), params
