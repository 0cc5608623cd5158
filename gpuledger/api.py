"""The Python API (README, "From Python"): the warehouse's current offers as Python objects, read-only,
filtered as `gpuledger show-gpus` filters them (warehouse/offer_filter.py)."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import make_dataclass
from typing import Any, Sequence

import duckdb

from gpuledger.adapters.registry import SOURCES
from gpuledger.warehouse.offer_filter import FilterError, OfferFilter
from gpuledger.warehouse.schema import column_names
from gpuledger.warehouse.export import older_warehouse
from gpuledger.warehouse.store import WarehouseError, damaged_error, open_reader

# content_hash is the merge's fingerprint of a row, not data (as in exports).
OFFER_FIELDS = tuple(c for c in column_names("offers") if c != "content_hash")
_SHOWN = ("provider", "instance_type", "region", "zone", "purchase_option", "gpu_model", "gpu_count",
          "price_per_gpu_hour")


def _offer_repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _SHOWN)
    return f"Offer({shown}, ...)"


Offer = make_dataclass("Offer", OFFER_FIELDS, frozen=True, repr=False, namespace={
    "__repr__": _offer_repr, "__module__": __name__,
    "__doc__": "One current offer: a row of the `offers` table (docs/data-dictionary.md), its columns as attributes."})


class Offers(list):  # type: ignore[type-arg]
    """A list of Offer, cheapest per GPU-hour first, that converts to a data frame."""

    def __init__(self, offers: Sequence[Any], arrow: Any) -> None:
        super().__init__(offers)
        self._arrow = arrow

    def arrow(self) -> Any:
        """The offers as a pyarrow Table."""
        return self._arrow

    def df(self) -> Any:
        """The offers as a pandas DataFrame (needs pandas: pip install pandas)."""
        # pyarrow imports pandas itself; checked first for a message that names the fix
        if importlib.util.find_spec("pandas") is None:
            raise ImportError("Offers.df() needs pandas: pip install pandas")
        return self._arrow.to_pandas()

    def pl(self) -> Any:
        """The offers as a polars DataFrame (needs polars: pip install polars)."""
        try:
            import polars
        except ImportError:
            raise ImportError("Offers.pl() needs polars: pip install polars") from None
        return polars.from_arrow(self._arrow)


def query(gpu: str | None = None, *, min_vram_gb: float | None = None, spot: bool | None = None,
          providers: Sequence[str] | None = (), regions: Sequence[str] | None = (), min_gpu_count: float | None = None,
          max_gpu_count: float | None = None, max_price: float | None = None, commitments: bool = False,
          db: str | os.PathLike[str] | None = None) -> Offers:
    """The current offers that pass every filter given (README, "From Python"), cheapest per GPU-hour first.
    WarehouseError without a warehouse; FilterError (a ValueError) for a name that matches nothing."""
    if gpu is not None and not gpu:  # query(gpu=os.environ.get("GPU", "")): not every GPU's offers, as show-gpus ""
        raise FilterError("the GPU name is empty: name a model (H100-SXM) or a family (H100), or gpu=None for all")
    # None is no filter, as for every other argument
    selection = OfferFilter(gpu=gpu, min_vram_gb=min_vram_gb, spot=spot,
                            providers=() if providers is None else providers,
                            regions=() if regions is None else regions, min_gpu_count=min_gpu_count,
                            max_gpu_count=max_gpu_count, max_price=max_price, commitments=commitments)
    if not any(spot is v for v in (None, True, False)) or not any(commitments is v for v in (True, False)):
        raise ValueError(f"spot is True, False or None and commitments True or False, got spot={spot!r}, "
                         f"commitments={commitments!r}")
    # Only this module's own SQL runs here, so no sandbox settings: with them DuckDB refuses a file this
    # process has open already (a notebook's duckdb.connect(path, read_only=True), README).
    try:
        with open_reader(db, allow_files=True) as con:
            con.execute("set session TimeZone = 'UTC'")  # times in UTC, as the CLI shows them: not the machine's zone
            where, params = selection.resolved(con, SOURCES).where()
            try:
                table = con.sql(
                    f"select {', '.join('o.' + c for c in OFFER_FIELDS)} from offers o where {where} "
                    "order by o.price_per_gpu_hour, o.provider, o.region, o.zone, o.instance_type, o.purchase_option",
                    params=params).to_arrow_table()
            except duckdb.Error as err:  # a column of a later schema missing: the CLI's words, not a Binder Error
                if (older := older_warehouse(con)) is None:
                    raise
                raise WarehouseError(older) from err
    except duckdb.Error as err:  # a truncated file fails only when its pages are read: said as the CLI says it
        if (damaged := damaged_error(err, db)) is None:
            raise
        raise damaged from err
    return Offers([Offer(**row) for row in table.to_pylist()], table)
