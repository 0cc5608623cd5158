"""pandas kept out of gpuledger's own processes: the command's, and the refresh's children.

pyarrow imports pandas (where it is installed) at its first conversion only to ask whether the
input is a pandas object: about 40 MB in the command's process and 49 MB in AWS's fetch process.
No gpuledger process hands pyarrow a pandas object, so these processes refuse the import: it
fails as a missing module does, which pyarrow takes as "no pandas".

A None entry in sys.modules is not enough: pyarrow 26's compiled import reads sys.modules
directly, takes the None for the module, and its first conversion raises AttributeError.
"""

from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder
from typing import Any


class _PandasRefused(MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (gpuledger keeps pandas out of this process)",
                                      name=name)
        return None


def refuse_pandas() -> None:
    """From now on, importing pandas in this process fails as if it were not installed (a
    pandas already imported is left alone)."""
    if "pandas" in sys.modules or any(isinstance(f, _PandasRefused) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _PandasRefused())
