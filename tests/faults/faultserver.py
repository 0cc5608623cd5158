"""The loopback replay server, able to misbehave at the transport level too.

`ReplayServer` (adapters/replay.py) answers every request from the recordings
and lets a hook replace a response: that covers HTTP-level faults (a 429, a
500, a truncated or edited body). What a hook cannot do is break the
connection itself. `FaultyReplay` keeps the same recordings, matching and
hook, and adds, per request, a transport fault:

- `Refuse`: the host's port has a bound socket that never listens, so every
  connection attempt is refused (ECONNREFUSED) at once;
- `Stall`: the server reads the request and never answers (until the test
  ends), so the client's read timeout fires;
- `Reset`: the status line, the headers (with the full Content-Length) and a
  part of the body are sent, then the connection is reset (RST).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from gpuledger.adapters.replay import HOP_HEADERS, FileBody, ReplayServer, Request, ResponseHook, parse_request


@dataclass(frozen=True)
class Stall:
    """Read the request, answer nothing until the server closes."""


@dataclass(frozen=True)
class Reset:
    """Send this fraction of the body, then reset the connection."""

    fraction: float = 0.5


Transport = Stall | Reset
TransportHook = Callable[[str, Request], "Transport | None"]


class FaultyReplay(ReplayServer):
    def __init__(self, recordings_dir: Path | str, providers: list[str], hook: ResponseHook | None = None,
                 transport: TransportHook | None = None, refuse: set[str] | None = None) -> None:
        super().__init__(recordings_dir, providers=providers, hook=hook)
        self.transport = transport
        self.refuse = set(refuse or ())
        self.log: list[tuple[float, str, Request, str]] = []  # (monotonic time, host, request, what happened)
        self._closed = threading.Event()
        self._servers: dict[str, ThreadingHTTPServer] = {}
        self._dead: dict[str, socket.socket] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        for host in self.exchanges:
            if host in self.refuse:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind(("127.0.0.1", 0))  # bound, never listening: connect() is refused
                self._dead[host] = s
                continue
            server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(host))
            server.daemon_threads = True
            self._servers[host] = server
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"faulty-{host}",
                             daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        for s in self._servers.values():
            s.shutdown()
            s.server_close()
        for s in self._dead.values():
            s.close()
        self._servers.clear()
        self._dead.clear()

    def endpoints(self) -> dict[str, str]:
        urls = {h: f"http://127.0.0.1:{s.server_address[1]}" for h, s in self._servers.items()}
        urls.update({h: f"http://127.0.0.1:{s.getsockname()[1]}" for h, s in self._dead.items()})
        return urls

    def seen(self) -> list[tuple[float, str, Request, str]]:
        """(time, host, request, what was answered: a status, "Stall" or "Reset"), in order."""
        return sorted(self.log, key=lambda x: x[0])

    # -- serving ------------------------------------------------------------------------------
    def _handler(self, host: str) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = parse_request(self.command, self.path, dict(self.headers.items()), body)
                fault = outer.transport(host, req) if outer.transport else None
                status, headers, payload = outer._answer(host, req)
                if isinstance(payload, FileBody):  # a streamed recording: the faults cut bytes of the whole body
                    payload = b"".join(payload.chunks())
                outer.log.append((time.monotonic(), host, req, type(fault).__name__ if fault else str(status)))
                if isinstance(fault, Stall):
                    outer._closed.wait(60)
                    self.close_connection = True
                    return
                self.send_response(status)
                for k, v in headers.items():
                    if k.lower() not in HOP_HEADERS:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command == "HEAD":
                    return
                if isinstance(fault, Reset):
                    self.wfile.write(payload[: int(len(payload) * fault.fraction)])
                    self.wfile.flush()
                    # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _serve

            def handle(self) -> None:
                try:
                    super().handle()
                except (ConnectionError, OSError):
                    pass  # the client gave up (timeout) or we reset it: nothing to report

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        return Handler
