"""The registry: every source gpuledger knows, one line each, name -> module.

Modules are imported on first use, so a refresh of one provider never pays for (or breaks on)
another provider's SDK. Each module declares `PROVIDER` (a `ProviderSpec` whose name is its
key here) and `fetch(ctx) -> Batch`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

# Only for the annotations: the crawl children import this registry and skip pydantic at start.
if TYPE_CHECKING:
    from gpuledger.adapters.contract import ProviderSpec

SOURCES: dict[str, str] = {
    "aws": "gpuledger.adapters.aws",
    "azure": "gpuledger.adapters.azure",
    "coreweave": "gpuledger.spiders.coreweave",
    "gcp": "gpuledger.adapters.gcp",
    "hyperstack": "gpuledger.spiders.hyperstack",
    "lambda": "gpuledger.adapters.lambdalabs",
    "runpod": "gpuledger.adapters.runpod",
    "vastai": "gpuledger.adapters.vastai",
}


class UnknownProviderError(ValueError):
    pass


def source_module(name: str) -> ModuleType:
    try:
        path = SOURCES[name]
    except KeyError:
        raise UnknownProviderError(
            f"unknown provider {name!r}; known: {', '.join(sorted(SOURCES))}") from None
    return importlib.import_module(path)


def spec(name: str) -> ProviderSpec:
    return source_module(name).PROVIDER


def specs() -> list[ProviderSpec]:
    """Every registered source's spec, in name order (imports every source module)."""
    return [spec(name) for name in sorted(SOURCES)]
