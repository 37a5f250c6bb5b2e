"""Tiny, valid wheels and a real package index on 127.0.0.1, for tests.

Each index is a folder of wheels served by `http.server` with PEP 503 HTML pages
(and PEP 691 JSON when asked for it). An index can hide hashes, the way PyTorch's
nightly index does, so the lock's "hash it ourselves" path is exercised for real.
"""

from __future__ import annotations

import base64
import hashlib
import html
import http.server
import json
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name


def build_wheel(
    folder: Path,
    name: str,
    version: str,
    *,
    tag: str = "py3-none-any",
    requires: tuple[str, ...] = (),
    extras: tuple[str, ...] = (),
    files: dict[str, bytes] | None = None,
) -> Path:
    """Return the path of a valid wheel written into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    module = dist.lower()
    contents = dict(files or {f"{module}/__init__.py": f"__version__ = {version!r}\n".encode()})
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Provides-Extra: {e}" for e in extras]
    metadata += [f"Requires-Dist: {r}" for r in requires]
    contents[f"{info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    contents[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: provision-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    ).encode()
    record = []
    for arcname, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arcname},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w") as archive:
        for arcname, data in contents.items():
            archive.writestr(arcname, data)
    return path


@dataclass
class Index:
    """One served index: its wheels live in `root/<project>/`."""

    name: str
    root: Path
    hashes: bool = True
    url: str = ""
    requests: list[str] = field(default_factory=list)
    wrong_hash: set[str] = field(default_factory=set)  # filenames listed with a sha256 that does not match
    garbled: set[str] = field(default_factory=set)  # projects whose page is not JSON, though it says it is
    delay: float = 0.0  # seconds before each answer: a slow index
    hold: threading.Event | None = (
        None  # when set to an Event, every answer waits until it is set (at most 120 s)
    )
    pep658: bool = False  # serve each wheel's METADATA as <wheel>.metadata and say so (PEP 658/714)
    ranges: bool = False  # answer Range requests with 206 (as PyPI's file host does)
    hold_ranges: threading.Event | None = (
        None  # when set to an Event, every range answer waits until it is set
    )
    range_requests: int = 0
    ranged: list[str] = field(default_factory=list)  # the file named by each range request, in order
    sizes: bool = False  # give each file's size on the JSON page (PEP 700, as PyPI's does)
    password: str = ""  # when set, every request must carry HTTP basic auth alice:<password>
    # file name -> what a full GET answers (and the page's sha256)
    swapped: dict[str, bytes] = field(default_factory=dict)

    def add(self, name: str, version: str, **kwargs: object) -> Path:
        folder = self.root / str(canonicalize_name(name))
        return build_wheel(folder, name, version, **kwargs)  # type: ignore[arg-type]


class IndexServer:
    """Serve several indexes at once: http://127.0.0.1:PORT/<index>/simple/<project>/."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.indexes: dict[str, Index] = {}
        self.down: set[str] = set()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server._serve(self, body=True)

            def do_HEAD(self) -> None:
                server._serve(self, body=False)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def index(self, name: str, *, hashes: bool = True, userinfo: str = "") -> Index:
        root = self.base / name
        root.mkdir(parents=True, exist_ok=True)
        index = Index(name, root, hashes, f"http://{userinfo}127.0.0.1:{self.port}/{name}/simple")
        self.indexes[name] = index
        return index

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _serve(self, request: http.server.BaseHTTPRequestHandler, *, body: bool) -> None:
        parts = [p for p in request.path.split("?")[0].split("/") if p]
        index = self.indexes.get(parts[0]) if parts else None
        if index is None:
            request.send_error(404)
            return
        index.requests.append(request.path)
        if (
            index.password
            and request.headers.get("Authorization")
            != "Basic " + base64.b64encode(f"alice:{index.password}".encode()).decode()
        ):
            request.send_response(401)
            request.send_header("WWW-Authenticate", 'Basic realm="index"')
            request.send_header("Content-Length", "0")
            request.end_headers()
            return
        if index.delay:
            import time

            time.sleep(index.delay)
        if index.hold is not None:
            index.hold.wait(120)
        if index.name in self.down:
            request.send_error(503, "index is down")
            return
        if len(parts) == 3 and parts[1] == "files" and parts[2].endswith(".metadata"):
            data, _ = self._file(index, parts[2].removesuffix(".metadata"))
            self._send(
                request,
                self._metadata(data) if data is not None and index.pep658 else None,
                "text/plain",
                body=body,
            )
        elif len(parts) == 3 and parts[1] == "files":
            data, content_type = self._file(index, parts[2])
            wanted = request.headers.get("Range", "")
            if data is not None and index.ranges and wanted.startswith("bytes="):
                index.range_requests += 1
                index.ranged.append(parts[2])
                if index.hold_ranges is not None:
                    index.hold_ranges.wait(120)
                self._send_range(request, data, wanted, body=body)
            else:
                self._send(
                    request, index.swapped.get(parts[2], data), content_type, body=body, ranges=index.ranges
                )
        elif len(parts) == 3 and parts[1] == "simple":
            self._send(request, *self._project(request, index, parts[2]), body=body)
        else:
            request.send_error(404)

    @staticmethod
    def _metadata(wheel: bytes) -> bytes:
        import io

        with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
            return archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")))

    @staticmethod
    def _send_range(
        request: http.server.BaseHTTPRequestHandler, data: bytes, wanted: str, *, body: bool
    ) -> None:
        first, _, last = wanted.removeprefix("bytes=").partition("-")
        # a suffix longer than the file: all of it
        start = max(0, len(data) - int(last)) if not first else int(first)
        end = len(data) - 1 if not first or not last else min(int(last), len(data) - 1)
        request.send_response(206)
        request.send_header("Content-Type", "application/octet-stream")
        request.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        request.send_header("Content-Length", str(end - start + 1))
        request.end_headers()
        if body:
            request.wfile.write(data[start : end + 1])

    @staticmethod
    def _send(
        request: http.server.BaseHTTPRequestHandler,
        data: bytes | None,
        content_type: str,
        *,
        body: bool,
        ranges: bool = False,
    ) -> None:
        if data is None:
            request.send_error(404)
            return
        request.send_response(200)
        if ranges:
            request.send_header("Accept-Ranges", "bytes")
        request.send_header("Content-Type", content_type)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        if body:
            request.wfile.write(data)

    def _file(self, index: Index, filename: str) -> tuple[bytes | None, str]:
        filename = filename.replace("%2B", "+")
        matches = list(index.root.glob(f"*/{filename}"))
        return (matches[0].read_bytes() if matches else None), "application/octet-stream"

    def _project(
        self, request: http.server.BaseHTTPRequestHandler, index: Index, project: str
    ) -> tuple[bytes | None, str]:
        folder = index.root / str(canonicalize_name(project))
        if not folder.is_dir():
            return None, "text/html"
        if str(canonicalize_name(project)) in index.garbled:
            return b"{not json", "application/vnd.pypi.simple.v1+json"
        files = []
        for wheel in sorted(folder.glob("*.whl")):
            digest = hashlib.sha256(index.swapped.get(wheel.name) or wheel.read_bytes()).hexdigest()
            if wheel.name in index.wrong_hash:
                digest = hashlib.sha256(b"tampered").hexdigest()
            files.append((wheel.name, f"/{index.name}/files/{wheel.name}", digest, wheel.stat().st_size))
        if "application/vnd.pypi.simple.v1+json" in request.headers.get("Accept", ""):
            body = json.dumps(
                {
                    "meta": {"api-version": "1.1"},
                    "name": project,
                    "files": [
                        {
                            "filename": n,
                            "url": u,
                            "hashes": {"sha256": d} if index.hashes else {},
                            **({"core-metadata": True} if index.pep658 else {}),
                            **({"size": size} if index.sizes else {}),
                        }
                        for n, u, d, size in files
                    ],
                }
            ).encode()
            content_type = "application/vnd.pypi.simple.v1+json"
        else:
            links = []
            for n, u, d, _size in files:
                href = html.escape(u.replace("+", "%2B") + (f"#sha256={d}" if index.hashes else ""))
                extra = ' data-core-metadata="true"' if index.pep658 else ""
                links.append(f'<a href="{href}"{extra}>{html.escape(n)}</a><br/>')
            body = ("<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>").encode()
            content_type = "text/html"
        return body, content_type
