"""A 127.0.0.1 HTTP/1.1 server of shards with ``ETag`` and ``Range``, counting requests, with faults.

``RangeServer(files)`` serves ``files`` (path -> bytes) at ``url(path)``: ``200`` with the whole
body, or ``206`` for ``Range: bytes=N-`` or ``bytes=N-M`` (what shard readers send), with a strong
``ETag`` of the body's hash; ``If-Match`` that does not match is ``412``.  Faults, set per path
before the requests come:

- ``cuts[path] = [byte, ...]``: the next responses each stop at that byte of the file (absolute,
  so a ``206`` from ``N`` cut at ``M`` sends ``M - N`` bytes) and close the connection.
- ``stalls[path] = [byte, ...]``: the next responses each stop at that byte and send nothing
  more for ``STALL_S`` (or until ``close()``), then the rest: only a client's read time-out
  turns a stall into a second request.
- ``statuses[path] = [503, ...]``: the next requests get these statuses first (None: answered
  as usual); a 503 says ``Retry-After: <retry_after>`` (``"0"`` unless set).
- ``ignore_range = True``: every request gets ``200`` and the whole body (Range and If-Match unread).
- ``changes[path] = bytes``: after the first request, the path serves these bytes instead
  (another ETag).
- ``no_etag = True``: no ``ETag`` header.

``requests`` lists ``(path, Range header or None, If-Match header or None)`` in arrival order;
``open_connections`` counts the connections not closed yet.  Every wait is bounded and the
server's threads are daemons; ``close()`` stops it.
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["RangeServer"]

STALL_S = 10.0  # the longest a stalled response waits (a test that fails never hangs the server)
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class RangeServer:
    """See the module.  Thread-safety: its fields are read and changed under ``lock``."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str | None, str | None]] = []
        self.cuts: dict[str, list[int]] = {}
        self.stalls: dict[str, list[int]] = {}
        self.released = threading.Event()
        self.statuses: dict[str, list[int]] = {}
        self.changes: dict[str, bytes] = {}
        self.ignore_range = False
        self.no_etag = False
        self.retry_after = "0"
        self.open_connections = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with owner.lock:
                    owner.open_connections += 1

            def finish(self) -> None:
                try:
                    super().finish()
                finally:
                    with owner.lock:
                        owner.open_connections -= 1

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                owner._answer(self)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def ranges(self, path: str) -> list[str | None]:
        """The ``Range`` header of each request for ``path``, in order (None: none)."""
        with self.lock:
            return [r for p, r, _ in self.requests if p == path]

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?")[0]
        rng, match = h.headers.get("Range"), h.headers.get("If-Match")
        with self.lock:
            first = not any(p == path for p, _, _ in self.requests)
            self.requests.append((path, rng, match))
            body = self.files.get(path)
            if body is not None and not first and path in self.changes:
                body = self.files[path] = self.changes.pop(path)
            pending = self.statuses.get(path)
            status = pending.pop(0) if pending else None
            cuts = self.cuts.get(path)
            cut = cuts.pop(0) if cuts else None
            stalls = self.stalls.get(path)
            stall = stalls.pop(0) if stalls else None
            ignore, no_etag, retry_after = self.ignore_range, self.no_etag, self.retry_after
        if body is None or status is not None:
            self._status(h, 404 if body is None else status or 500, retry_after)
            return
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        if not ignore and match is not None and match != etag:
            self._status(h, 412)
            return
        start, size = 0, len(body)
        found = None if ignore or rng is None else _RANGE.match(rng)
        h.send_response(200 if found is None else 206)
        if found is not None:
            start, end = int(found.group(1)), min(int(found.group(2) or size - 1), size - 1)
            h.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            body = body[: end + 1]
        if not no_etag:
            h.send_header("ETag", etag)
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(len(body) - start))
        h.end_headers()
        self._body(h, body, start, cut if stall is None else stall, stall is not None)

    def _body(self, h: BaseHTTPRequestHandler, body: bytes, start: int, cut: int | None, stall: bool) -> None:
        try:
            if cut is None:
                h.wfile.write(body[start:])
                return
            h.wfile.write(body[start:cut])
            h.wfile.flush()
            if stall:
                self.released.wait(STALL_S)
                h.wfile.write(body[cut:])
                return
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)  # the cut: the client sees the body end early
        except OSError:  # the client went away first (an early break)
            h.close_connection = True

    @staticmethod
    def _status(h: BaseHTTPRequestHandler, status: int, retry_after: str = "0") -> None:
        h.send_response(status)
        h.send_header("Content-Length", "0")
        if status == 503:
            h.send_header("Retry-After", retry_after)
        h.end_headers()
