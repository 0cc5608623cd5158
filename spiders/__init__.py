"""Web-page sources (scrapy spiders): the registry's sources whose module lives here."""

from gpuledger.adapters.registry import SOURCES

SPIDERS: dict[str, str] = {name: module for name, module in SOURCES.items() if module.startswith(__name__ + ".")}
