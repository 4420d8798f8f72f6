"""A threaded HTTP/1.1 server on 127.0.0.1 whose chosen requests are slow, for the hedging tests.

``GET /<bucket>/<key>`` answers 200 with the body ``key`` (and the ``ETag`` and
``Last-Modified`` headers obstore's GCS client wants, so one server serves ``HttpDataset``
and ``ObjectStoreDataset``).  ``slow[key] = (n, seconds)``: the first ``n`` requests for
``key`` wait ``seconds`` before answering, or until the client closes the connection (a
cancelled request), which is counted in ``cancelled[key]``.  ``counts[key]``: requests
received.  Every wait is bounded (``MAX_WAIT_S``), so a failing test never hangs it.
"""

from __future__ import annotations

import email.utils
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

MAX_WAIT_S = 20.0
POLL_S = 0.005  # how often a slow request looks for its client's close


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that closed its connection (a cancelled request) is no error here


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return not sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:  # nothing to read: still open
        return False
    except OSError:  # reset
        return True


class SlowServer:
    """Start with ``SlowServer()``, stop with ``close()``; ``url(key)`` is ``/b/<key>``'s URL."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.slow: dict[str, tuple[int, float]] = {}
        self.counts: dict[str, int] = {}
        self.cancelled: dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server.handle(self)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, key: str) -> str:
        return f"{self.endpoint}/b/{key}"

    def total(self) -> int:
        with self.lock:
            return sum(self.counts.values())

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        key = unquote(urlsplit(h.path).path).rsplit("/", 1)[-1]
        with self.lock:
            n = self.counts[key] = self.counts.get(key, 0) + 1
            slow_n, seconds = self.slow.get(key, (0, 0.0))
        if n <= slow_n:
            deadline = time.monotonic() + min(seconds, MAX_WAIT_S)
            while time.monotonic() < deadline:
                if _closed_by_peer(h.connection):
                    with self.lock:
                        self.cancelled[key] = self.cancelled.get(key, 0) + 1
                    h.close_connection = True
                    return
                time.sleep(POLL_S)
        body = key.encode()
        h.send_response(200)
        h.send_header("ETag", f'"{len(body)}"')
        h.send_header("Last-Modified", email.utils.formatdate(usegmt=True))
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
