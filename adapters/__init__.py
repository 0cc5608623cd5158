"""API-based sources. Each module exposes NAME, PROVIDER_FACTS and fetch(ctx) -> Batch.

The registry lists them by name and imports lazily, so a refresh of one
provider never pays for (or breaks on) another provider's SDK.
"""

ADAPTERS: dict[str, str] = {
    "aws": "adapters.aws",
    "azure": "adapters.azure",
    "gcp": "adapters.gcp",
    "lambda": "adapters.lambdalabs",
    "runpod": "adapters.runpod",
    "vastai": "adapters.vastai",
}
