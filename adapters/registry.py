"""The registry: every source gpuledger knows, name -> module (imported on first use)."""

from __future__ import annotations

import importlib
import logging
from types import ModuleType
from typing import TYPE_CHECKING, Sequence

# Only for the annotations: importing the registry itself stays cheap.
if TYPE_CHECKING:
    from gpuledger.adapters.contract import ProviderSpec

log = logging.getLogger(__name__)

# Page sources are scrapy spiders in gpuledger.spiders; API sources are modules of gpuledger.adapters.
PAGE_SOURCES = ("coreweave", "crusoe", "hyperstack", "nebius", "paperspace")
API_SOURCES = ("aws", "azure", "cloudrift", "cudo", "digitalocean", "gcp", "hotaisle", "hyperbolic", "ibmcloud",
               "jarvislabs", "latitudesh", "lium", "novita", "oci", "ovhcloud", "primeintellect", "runpod",
               "scaleway", "seeweb", "shadeform", "spheron", "tensordock", "vastai", "verda", "vultr")
# Name order, as messages list them; "lambda" is a Python keyword, so its module is lambdalabs.
SOURCES: dict[str, str] = dict(sorted({
    **{name: f"gpuledger.spiders.{name}" for name in PAGE_SOURCES},
    **{name: f"gpuledger.adapters.{name}" for name in API_SOURCES},
    "lambda": "gpuledger.adapters.lambdalabs",
}.items()))


# Parts of a provider refreshed on a cadence of their own (flows/cadence.py): run like a source, but
# no source of offers, so not in SOURCES.
UNITS: dict[str, str] = {
    "aws_capacity_blocks": "gpuledger.adapters.aws.capacity_blocks",
}


class UnknownProviderError(ValueError):
    pass


def accepted_anomalies(names: Sequence[str], named_by: str) -> list[str]:
    """`names` (given as `named_by`) as the providers whose anomalies load anyway, each in any case (AWS is aws);
    UnknownProviderError for one that is no provider, naming the nearest. The setting accept_anomaly's names are
    checked so too, not returned: AnomalyPolicy.from_env adds them."""
    from gpuledger.warehouse.recommender.names import UnknownNameError, resolve_name
    from gpuledger.warehouse.settings import SettingsError, env_name, load_settings

    def provider(name: str, given: str) -> str:
        try:
            return resolve_name("provider", name, SOURCES)
        except UnknownNameError as err:
            raise UnknownProviderError(f"{given}: no such provider; {err.hint}") from None

    accepted = [provider(name, f"{named_by} {name}") for name in names]
    try:
        setting = load_settings().accept_anomaly_names()
    except SettingsError:  # another setting refused: said where that one is read
        setting = []
    for name in setting:
        provider(name, f"{env_name('accept_anomaly')} names {name!r}")
    return list(dict.fromkeys(accepted))


def source_module(name: str) -> ModuleType:
    path = SOURCES.get(name) or UNITS.get(name)
    if path is None:
        raise UnknownProviderError(f"unknown provider {name!r}; known: {', '.join(sorted(SOURCES))}")
    return importlib.import_module(path)


def spec(name: str) -> ProviderSpec:
    return source_module(name).PROVIDER


def specs() -> list[ProviderSpec]:
    """Every registered source's spec, in name order (imports every source module)."""
    return [spec(name) for name in sorted(SOURCES)]


_secret_env_vars: tuple[str, ...] | None = None


def secret_env_vars() -> tuple[str, ...]:
    """The secret environment variables of every registered source, for the redaction. A module that
    does not import is left out with a warning (and asked again next time)."""
    global _secret_env_vars
    if _secret_env_vars is not None:
        return _secret_env_vars
    names: set[str] = set()
    failed = False
    for name in sorted(SOURCES):
        try:
            names.update(spec(name).secret_env_vars)
        except Exception as err:  # noqa: BLE001 - reported, and the other sources stay covered
            failed = True
            log.warning("%s: its secret variables are not known, the module did not import: %s", name, err)
    found = tuple(sorted(names))
    if not failed:
        _secret_env_vars = found
    return found


def adopt_secret_env_vars(names: tuple[str, ...]) -> None:
    """Take `secret_env_vars()` from the refresh: a child would otherwise import every source module."""
    global _secret_env_vars
    _secret_env_vars = tuple(names)
