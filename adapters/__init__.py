"""API-based sources. Each module declares its provider and fetch(ctx) -> Batch; the registry
(`gpuledger.adapters.registry`) lists every source, API and page alike."""
