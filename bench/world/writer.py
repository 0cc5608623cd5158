"""Writes one provider's generated recording in the replay layout (docs/recordings.md).

A world generator calls `ProviderRecording.add` once per exchange and `close` once; the folder it
leaves (`<root>/<provider>/manifest.json` plus body files) is what `gpuledger refresh --replay
--recordings <root>` and `adapters.replay.ReplayServer` read, exactly like a bundled recording.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Fast gzip: world bodies are large and only this machine reads them back.
GZIP_LEVEL = 1


@dataclass
class ProviderRecording:
    root: Path
    provider: str
    recorded_at: str
    settings: dict[str, Any] = field(default_factory=dict)
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    body_bytes: int = 0  # bytes as served (decompressed), the figure a client downloads

    @property
    def folder(self) -> Path:
        return self.root / self.provider

    def add(self, host: str, path: str, body: bytes | str, *, body_file: str, method: str = "GET",
            match: dict[str, Any] | None = None, status: int = 200,
            headers: dict[str, str] | None = None, compress: bool = False) -> None:
        """One exchange; `body_file` is relative to the provider folder (".gz" is added when compressed)."""
        data = body.encode() if isinstance(body, str) else body
        rel = body_file + (".gz" if compress and not body_file.endswith(".gz") else "")
        target = self.folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(gzip.compress(data, GZIP_LEVEL, mtime=0) if rel.endswith(".gz") else data)
        self.body_bytes += len(data)
        exchange: dict[str, Any] = {"host": host, "method": method, "path": path}
        if match:
            exchange["match"] = match
        exchange["response"] = {"status": status, "headers": headers or {}, "body_file": rel}
        self.exchanges.append(exchange)

    def close(self) -> dict[str, Any]:
        """Write manifest.json; return this provider's tally (requests recorded, bytes served)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        doc = {"provider": self.provider, "recorded_at": self.recorded_at, "settings": self.settings,
               "exchanges": self.exchanges}
        (self.folder / "manifest.json").write_text(json.dumps(doc, indent=1))
        return {"provider": self.provider, "exchanges": len(self.exchanges), "body_bytes": self.body_bytes}
