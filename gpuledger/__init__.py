"""gpuledger: a history-keeping warehouse of rented-GPU prices for LLM fine-tuning.

The repository keeps its top-level folders (`adapters/`, `spiders/`, `warehouse/`, `flows/`);
the package installs them as `gpuledger.adapters`, `gpuledger.spiders`, `gpuledger.warehouse`
and `gpuledger.flows`, so nothing generic lands in a user's site-packages.
"""

__version__ = "0.2.0"

__all__ = ["__version__", "query"]


def __getattr__(name: str):  # the API loads DuckDB only when first used
    if name == "query":
        from gpuledger.api import query

        return query
    raise AttributeError(f"module 'gpuledger' has no attribute {name!r}")
