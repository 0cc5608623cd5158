"""python -m bench.replay_serve RECORDINGS ENDPOINTS LOG: a replay server in a process of its own.

Serves every provider of RECORDINGS (adapters.replay.ReplayServer), writes ENDPOINTS for
`gpuledger refresh --replay --replay-endpoints ENDPOINTS`, and serves until SIGTERM or SIGINT.
Then it writes LOG (JSON): every answer sent (host, method, target, a hash of the request body,
body bytes sent) and this process's own peak RSS, so a refresh's peak RSS is measured without
the recording's bodies passing through its memory.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from bench.common import peak_rss_self_mb
from gpuledger.adapters.replay import ReplayServer, Request, write_endpoints


class LoggingReplayServer(ReplayServer):
    """A ReplayServer that keeps one line per answer sent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[str, str, str, str, int]] = []

    def _sent(self, host: str, req: Request, nbytes: int) -> None:
        super()._sent(host, req, nbytes)
        digest = hashlib.sha1(req.body).hexdigest()[:12] if req.body else ""
        with self._lock:
            self.sent.append((host, req.method, req.target, digest, nbytes))


def main(argv: list[str] | None = None) -> int:
    recordings, endpoints, log = (Path(a) for a in (argv or sys.argv[1:]))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with LoggingReplayServer(recordings) as server:
        write_endpoints(server, endpoints)
        stop.wait()
        with server._lock:
            sent = list(server.sent)
    log.write_text(json.dumps({"sent": sent, "peak_rss_mb": peak_rss_self_mb()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
