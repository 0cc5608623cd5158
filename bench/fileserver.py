"""A loopback HTTP server that streams files from one folder (for the ingest benchmark).

Run as a child process (`python -m bench.fileserver DIR`): it prints its port on the first
line of stdout and serves GET /<name> with Content-Length, sending with os.sendfile, so the
client under test sees a real streamed HTTP/1.1 body, as from the AWS price list host.
"""

from __future__ import annotations

import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def make_handler(root: Path) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            path = (root / self.path.lstrip("/").split("?", 1)[0]).resolve()
            if root not in path.parents or not path.is_file():
                self.send_error(404)
                return
            size = path.stat().st_size
            self.send_response(200)
            self.send_header("Content-Type", "text/csv")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            with path.open("rb") as f:
                offset = 0
                while offset < size:
                    sent = os.sendfile(self.wfile.fileno(), f.fileno(), offset, min(1 << 24, size - offset))
                    if sent == 0:
                        break
                    offset += sent

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Handler


def main() -> None:
    root = Path(sys.argv[1]).resolve()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(root))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
