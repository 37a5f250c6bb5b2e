"""A hostile HTTP server on 127.0.0.1 for tests: each path answers as the test says, including the ways an index
can attack a client (a byte a second, headers a byte at a time, an endless body). Every answer ends by itself within
LIFETIME seconds, so a client that never gives up fails its test rather than hanging the suite."""

from __future__ import annotations

import socketserver
import threading
import time
from dataclasses import dataclass, field

LIFETIME = 45.0  # the longest any answer goes on
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass
class Route:
    """What one path answers: `body` with `content_type`, sent as `how` ("plain", "trickle", "trickle-headers",
    "endless"); `headers` added; `status` the status line's code."""

    body: bytes = b""
    content_type: str = "application/octet-stream"
    how: str = "plain"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


class HostileServer:
    """Serve `routes` (path -> Route) on 127.0.0.1; `sent[path]` counts the body bytes each path sent."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.sent: dict[str, int] = {}
        self._lasted: dict[str, float] = {}
        self._answering: dict[str, int] = {}
        self.closing = False
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                server._answer(self)

        class Threaded(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.tcp = Threaded(("127.0.0.1", 0), Handler)
        self.port = self.tcp.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.tcp.serve_forever, daemon=True).start()

    def lasted(self, path: str) -> float:
        """The seconds the longest answer for `path` went on, from the request read to the client hanging up (seen at
        the server's next write) or the answer's end: a client's deadline, without its start-up on a loaded machine.
        Waits for answers still going on (at most LIFETIME)."""
        deadline = time.monotonic() + LIFETIME + 5
        while self._answering.get(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        return self._lasted[path]

    def close(self) -> None:
        self.closing = True
        self.tcp.shutdown()
        self.tcp.server_close()

    def _answer(self, handler: socketserver.StreamRequestHandler) -> None:
        request = handler.rfile.readline(65536).decode("latin-1").split()
        while handler.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
            pass
        if len(request) < 2:
            return
        method, path = request[0], request[1].split("?")[0]
        route = self.routes.get(path, Route(b"not found", "text/plain", status=404))
        body = b"" if method == "HEAD" else route.body
        extra = "".join(f"{k}: {v}\r\n" for k, v in route.headers.items())
        length = "" if route.how == "endless" else f"Content-Length: {len(route.body)}\r\n"
        head = (
            f"HTTP/1.1 {route.status} X\r\nContent-Type: {route.content_type}\r\n{length}{extra}"
            f"Connection: close\r\n\r\n"
        ).encode()
        started = time.monotonic()
        self._answering[path] = self._answering.get(path, 0) + 1
        try:
            self._send_route(handler, route, path, method, head, body, started)
        finally:
            self._lasted[path] = max(self._lasted.get(path, 0.0), time.monotonic() - started)
            self._answering[path] -= 1

    def _send_route(
        self,
        handler: socketserver.StreamRequestHandler,
        route: Route,
        path: str,
        method: str,
        head: bytes,
        body: bytes,
        started: float,
    ) -> None:
        def alive() -> bool:
            return not self.closing and time.monotonic() - started < LIFETIME

        def send(data: bytes, step: float = 0.0) -> bool:
            try:
                if not step:
                    handler.wfile.write(data)
                    handler.wfile.flush()
                    return True
                for byte in data:
                    if not alive():
                        return False
                    handler.wfile.write(bytes([byte]))
                    handler.wfile.flush()
                    self.sent[path] = self.sent.get(path, 0) + 1
                    time.sleep(step)
            except OSError:  # the client gave up: what the test wants
                return False
            return True

        if route.how == "trickle-headers":
            send(head, 0.5)
            send(body)
        elif route.how == "trickle":
            if send(head):
                send(body, 0.5)
        elif route.how == "endless":
            if send(head) and method != "HEAD":
                block = bytes(1 << 16)
                while alive() and send(block):
                    self.sent[path] = self.sent.get(path, 0) + len(block)
                    if self.sent[path] > 256 << 20:  # the server's own bound: a test never fills the disk
                        break
        else:
            if send(head):
                send(body)
                self.sent[path] = self.sent.get(path, 0) + len(body)
