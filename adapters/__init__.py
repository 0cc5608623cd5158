"""API-based sources. Each module exposes NAME, PROVIDER_FACTS and fetch(ctx) -> Batch.

The registry lists them by name and imports lazily, so a refresh of one
provider never pays for (or breaks on) another provider's SDK.
"""

ADAPTERS: dict[str, str] = {
    "aws": "gpuledger.adapters.aws",
    "azure": "gpuledger.adapters.azure",
    "gcp": "gpuledger.adapters.gcp",
    "lambda": "gpuledger.adapters.lambdalabs",
    "runpod": "gpuledger.adapters.runpod",
    "vastai": "gpuledger.adapters.vastai",
}
