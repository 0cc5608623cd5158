"""gpuledger: a history-keeping warehouse of rented-GPU prices for LLM fine-tuning. The top-level folders
install as gpuledger.adapters, .spiders, .warehouse and .flows: nothing generic lands in site-packages."""

__version__ = "0.2.0"

__all__ = ["__version__", "query"]


def __getattr__(name: str):  # the API loads DuckDB only when first used
    if name == "query":
        from gpuledger.api import query

        return query
    raise AttributeError(f"module 'gpuledger' has no attribute {name!r}")
