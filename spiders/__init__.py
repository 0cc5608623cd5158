"""Web-page sources (scrapy spiders). Registry: provider name -> module with fetch(ctx) -> Batch."""

SPIDERS: dict[str, str] = {
    "coreweave": "gpuledger.spiders.coreweave",
    "hyperstack": "gpuledger.spiders.hyperstack",
}
