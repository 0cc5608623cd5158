"""World-scale replay: every provider at its real size, in its real wire format, generated.

`generate(root, scale)` writes `<root>/<provider>/manifest.json` and bodies for every registered
provider, deterministically, so `gpuledger refresh --replay --recordings <root>` runs the real
clients against the same replay server as the bundled recordings, only at the size each
provider's API really answers. A provider with a module `bench.world.<provider>` is generated
by its `generate(root: Path, scale: str) -> dict` (the `ProviderRecording.close()` tally); a
provider without one is copied from its bundled recording (bench/world/README.md says, per
provider, why that copy is its real size).

Scales: "world" (the real sizes, for `python -m bench`), "small" (the same formats at a few
percent of the size, for the smoke test and `--quick`).
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path
from typing import Any

from gpuledger.adapters.registry import SOURCES
from gpuledger.adapters.replay import BUNDLED_RECORDINGS

SCALES = ("small", "world")


def generator(provider: str):
    """The provider's world generator, or None when its bundled recording is its real size."""
    name = "lambda_" if provider == "lambda" else provider
    try:
        return importlib.import_module(f"bench.world.{name}").generate
    except ModuleNotFoundError as err:
        if err.name != f"bench.world.{name}":
            raise
        return None


def copy_bundled(root: Path, provider: str) -> dict[str, Any]:
    src = BUNDLED_RECORDINGS / provider
    dst = root / provider
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    doc = json.loads((dst / "manifest.json").read_text())
    served = 0
    for ex in doc.get("exchanges", []):
        resp = ex["response"]
        if "body_file" in resp:
            path = dst / resp["body_file"]
            served += len(_served_bytes(path))
        else:
            served += len(resp.get("body", "").encode())
    return {"provider": provider, "exchanges": len(doc.get("exchanges", [])), "body_bytes": served,
            "source": "bundled"}


def _served_bytes(path: Path) -> bytes:
    import gzip
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def generate(root: Path, scale: str = "world", providers: list[str] | None = None) -> list[dict[str, Any]]:
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; one of {SCALES}")
    root.mkdir(parents=True, exist_ok=True)
    tallies = []
    for provider in providers or sorted(SOURCES):
        make = generator(provider)
        if make is None:
            tallies.append(copy_bundled(root, provider))
        else:
            shutil.rmtree(root / provider, ignore_errors=True)
            tallies.append({**make(root, scale), "source": "generated"})
    return tallies
