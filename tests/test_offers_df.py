"""Offers.df() without pandas installed: one line naming the fix, never a traceback from pyarrow."""

from __future__ import annotations

import sys

import pyarrow as pa
import pytest

from gpuledger.api import Offers


def test_df_without_pandas_names_the_package_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    offers = Offers([], pa.table({"provider": ["aws"]}))
    monkeypatch.setitem(sys.modules, "pandas", None)  # what an interpreter without pandas sees
    with pytest.raises(ImportError, match=r"^Offers\.df\(\) needs pandas: pip install pandas$"):
        offers.df()


def test_df_with_pandas_is_the_arrow_table_as_a_frame() -> None:
    pytest.importorskip("pandas")
    frame = Offers([], pa.table({"provider": ["aws", "gcp"]})).df()
    assert list(frame["provider"]) == ["aws", "gcp"]
