"""A threaded HTTP/1.1 server on 127.0.0.1 with fault injection, for the HTTP dataset tests.

Paths (``K`` is any key; counts are kept per path, on the server side):

- ``/ok/K?size=N``: 200 with N bytes (``K`` repeated), keep-alive.
- ``/flaky/K?fails=N&status=S``: status S (503) for the first N requests, then 200.
- ``/reset/K?fails=N``: the first N requests send half their body, then close.
- ``/slow/K?s=T``: waits T seconds, then 200.
- ``/big?size=N&chunked=1``: N bytes, with Content-Length or chunked without it.
- ``/status/S``: status S.
- ``/redirect/K``: 302 to ``/ok/K``; ``/loop``: 302 to itself; ``/goto/K?to=URL&status=S``:
  S (302) to any URL (another server's, for the same-origin rule).
- ``/busy/K?fails=N&status=S&after=A``: status S (503) with ``Retry-After: A`` for the first
  N requests, then 200; ``after=date`` sends the HTTP date of the next whole second plus one,
  and ``due[path]`` is when that date comes (``time.monotonic()`` clock).
- ``/hang/K``: never answers; records when the client closes the connection.  One
  watcher thread polls every hung connection and records each close as the kernel
  reports it (a thread per connection, each polling its own socket and ending on its
  close, took up to 1 s on a free-threaded build to see 1,000 closes the client had
  made within 70 ms: see ``FaultServer._watch``).
- ``/latency/K?s=T&size=N``: waits T seconds, then N bytes (the benchmark).

Every loop is bounded (``MAX_WAIT_S``), so a test that fails never hangs the server.
"""

from __future__ import annotations

import email.utils
import math
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MAX_WAIT_S = 20.0
WATCH_MS = 20  # the watcher's poll: a new hung connection is watched within this


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 2048  # listen() backlog: a thousand connections arrive at once


class FaultServer:
    """Start with ``FaultServer()``; stop with ``close()``.  ``url(path)`` is a full URL."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[float, str]] = []  # (time, path)
        self.counts: dict[str, int] = {}
        self.connections = 0
        self.hanging = 0  # /hang requests whose client has not closed yet
        self.closed_at: list[float] = []  # when each /hang client closed
        self.due: dict[str, float] = {}  # /busy paths: when their Retry-After date comes (monotonic)
        self._hung: dict[int, tuple[socket.socket, threading.Event]] = {}  # fd -> (socket, closed)
        self._poller = select.poll()  # not select(): a thousand connections pass fd 1024
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with server.lock:
                    server.connections += 1

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server.handle(self)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def count(self, path: str) -> int:
        with self.lock:
            return self.counts.get(path, 0)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
        self._stop.set()
        self._watcher.join(5)

    # -- handlers ------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        q = {k: v[0] for k, v in parse_qs(parts.query).items()}
        path = parts.path
        with self.lock:
            n = self.counts[path] = self.counts.get(path, 0) + 1
            self.requests.append((time.monotonic(), path))
        kind = path.split("/")[1]
        if kind == "ok":
            self.send(h, 200, path.encode() * 1, int(q.get("size", 0)))
        elif kind == "flaky":
            if n <= int(q.get("fails", 1)):
                self.send(h, int(q.get("status", 503)), b"busy", 4)
            else:
                self.send(h, 200, b"ok", 2)
        elif kind == "reset":
            if n <= int(q.get("fails", 1)):
                h.send_response(200)
                h.send_header("Content-Length", "1000")
                h.end_headers()
                h.wfile.write(b"x" * 500)
                h.wfile.flush()
                h.close_connection = True
                h.connection.shutdown(socket.SHUT_RDWR)
            else:
                self.send(h, 200, b"whole", 5)
        elif kind == "slow":
            time.sleep(min(float(q.get("s", 1)), MAX_WAIT_S))
            self.send(h, 200, b"late", 4)
        elif kind == "latency":
            time.sleep(float(q.get("s", 0.02)))
            self.send(h, 200, b"b", int(q.get("size", 16384)))
        elif kind == "big":
            self.send(h, 200, b"z", int(q["size"]), chunked=q.get("chunked") == "1")
        elif kind == "status":
            self.send(h, int(path.split("/")[2]), b"status", 6)
        elif kind == "redirect":
            self.redirect(h, "/ok/" + path.split("/", 2)[2] + "?size=3")
        elif kind == "loop":
            self.redirect(h, "/loop")
        elif kind == "goto":
            self.redirect(h, q["to"], int(q.get("status", 302)))
        elif kind == "busy":
            if n <= int(q.get("fails", 1)):
                self.busy(h, path, int(q.get("status", 503)), q.get("after", "1"))
            else:
                self.send(h, 200, b"ok", 2)
        elif kind == "hang":
            self.hang(h)
        else:
            self.send(h, 404, b"?", 1)

    @staticmethod
    def send(h: BaseHTTPRequestHandler, status: int, unit: bytes, size: int, chunked: bool = False) -> None:
        body = (unit * (size // max(len(unit), 1) + 1))[:size]
        h.send_response(status)
        if chunked:
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            for i in range(0, len(body), 4096):
                piece = body[i : i + 4096]
                try:
                    h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                except OSError:  # the client stopped reading (max_bytes)
                    h.close_connection = True
                    return
            h.wfile.write(b"0\r\n\r\n")
            return
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        try:
            h.wfile.write(body)
        except OSError:
            h.close_connection = True

    def busy(self, h: BaseHTTPRequestHandler, path: str, status: int, after: str) -> None:
        if after == "date":
            when = math.floor(time.time()) + 2  # an HTTP date has whole seconds: 1 to 2 s away
            with self.lock:
                self.due[path] = time.monotonic() + (when - time.time())
            after = email.utils.formatdate(when, usegmt=True)
        h.send_response(status)
        h.send_header("Retry-After", after)
        h.send_header("Content-Length", "4")
        h.end_headers()
        h.wfile.write(b"busy")

    @staticmethod
    def redirect(h: BaseHTTPRequestHandler, to: str, status: int = 302) -> None:
        h.send_response(status)
        h.send_header("Location", to)
        h.send_header("Content-Length", "0")
        h.end_headers()

    def hang(self, h: BaseHTTPRequestHandler) -> None:
        sock = h.connection
        closed = threading.Event()
        with self.lock:
            self.hanging += 1
            self._hung[sock.fileno()] = (sock, closed)
        self._poller.register(sock, select.POLLIN | select.POLLHUP)  # watched from its next poll
        if not closed.wait(MAX_WAIT_S):  # never closed: stop waiting (a failed test)
            with self.lock:
                if self._hung.pop(sock.fileno(), None) is not None:
                    self.hanging -= 1
                    self.closed_at.append(time.monotonic())
                    self._poller.unregister(sock)
        h.close_connection = True

    def _watch(self) -> None:
        """Record the close of each hung connection (one thread for all of them).

        Their handler threads are let go together, once none is left hanging: on a
        free-threaded build a thousand threads ending at once slow every other thread
        of the process (this one too) for most of a second.
        """
        closed: list[threading.Event] = []
        while not self._stop.is_set():
            for fd, _ in self._poller.poll(WATCH_MS):
                now = time.monotonic()
                with self.lock:
                    entry = self._hung.get(fd)
                    if entry is None or not _closed_by_peer(entry[0]):
                        continue
                    del self._hung[fd]
                    self.hanging -= 1
                    self.closed_at.append(now)
                    self._poller.unregister(fd)  # before the handler closes it and the fd is reused
                    closed.append(entry[1])
                    if self.hanging:
                        continue
                for event in closed:
                    event.set()
                closed.clear()
        for event in closed:
            event.set()


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return not sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:  # a byte arrived: still open
        return False
    except OSError:  # reset
        return True


class RawServer:
    """A TCP server on 127.0.0.1 that answers ``GET /NAME`` with ``responses[NAME]``, bytes
    written as they are (broken HTTP: a garbage status line, a bad Content-Length, ...), then
    closes the connection; an unknown name gets nothing but the close.  ``count(name)`` is
    how many requests asked for it.

    Bounded: a request head over 64 KiB or slower than ``MAX_WAIT_S`` is dropped, and the
    server stops by itself ``lifetime_s`` after it started if ``close()`` never comes.
    """

    def __init__(self, responses: dict[str, bytes], lifetime_s: float = 3 * MAX_WAIT_S) -> None:
        self.responses = dict(responses)
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._deadline = time.monotonic() + lifetime_s
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def count(self, name: str) -> int:
        with self.lock:
            return self.counts.get(name, 0)

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(MAX_WAIT_S)
            head = b""
            try:
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    head += chunk
                target = head.split(b" ", 2)[1].decode("latin-1")
                name = urlsplit(target).path.lstrip("/")
                with self.lock:
                    self.counts[name] = self.counts.get(name, 0) + 1
                conn.sendall(self.responses.get(name, b""))
                conn.shutdown(socket.SHUT_WR)
            except (OSError, IndexError):  # the client went away, or not HTTP at all
                return
