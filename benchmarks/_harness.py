"""A local server process on 127.0.0.1 that stops when its standard input closes.

The remote benchmarks (bench_remote, bench_error_policy, bench_ranges, bench_event_loops,
bench_hedge, bench_tar_http) run their HTTP server in a process of its own, so that its threads and CPU are not counted
as the client's: the bench starts itself again with ``--serve``; that process binds an
ephemeral port on 127.0.0.1, prints it on one line of stdout, and serves until its stdin
closes, which the parent does when it is done (or when it dies: the pipe closes with it, so
no server outlives its bench).

- :func:`serve`: the server side, given how to start an asyncio server on ``(host, port)``;
- :class:`DelayedReplies`: an asyncio protocol that answers each request (a GET, no body)
  with the bytes a function chooses, after the delay it chooses: a server's latency without
  a thread per request (~60 us of CPU per request, where ``aiohttp.web`` takes ~270 us on
  3.13t);
- :func:`server_process`: the client side, a context manager that starts the server process
  and gives its port (any server that follows the protocol: bench_tar_http's is a threaded
  ``http.server`` that prints its port and reads stdin itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

__all__ = ["DelayedReplies", "serve", "server_process"]

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]  # the checkout: ``benchmarks`` importable in the server process


def serve(start: Callable[[str, int], Awaitable[asyncio.AbstractServer]]) -> None:
    """Run a server in this process until stdin closes (call it from the ``--serve`` branch).

    Args:
        start: given ``(host, port)`` (``"127.0.0.1"``, 0: an ephemeral port), starts the
            server on the running event loop and returns it, e.g.
            ``lambda h, p: asyncio.get_running_loop().create_server(factory, h, p)`` or
            ``lambda h, p: asyncio.start_server(handle, h, p)``.

    Prints the bound port on stdout (one line, flushed), then serves until stdin reaches its
    end; then closes the server and returns.
    """

    async def run() -> None:
        server = await start(HOST, 0)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        server.close()

    asyncio.run(run())


class DelayedReplies(asyncio.Protocol):
    """Answers each request on a keep-alive connection, in order, with what ``answer`` says.

    ``answer(head)`` gets the request's head (request line and headers, without the blank
    line; requests carry no body) and returns ``(delay_s, response)``: the complete HTTP
    response (status line, headers, body) is written ``delay_s`` seconds later (0: at the
    next loop iteration), unless the client has closed the connection by then.  Several
    requests pipelined on one connection are answered in the order of their delays' ends.
    One instance per connection: pass ``lambda: DelayedReplies(answer)`` as the factory.
    Runs on the server's one event loop thread (not thread-safe, and need not be).
    """

    def __init__(self, answer: Callable[[bytes], tuple[float, bytes]]) -> None:
        self.answer = answer
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
            delay_s, response = self.answer(head)
            asyncio.get_running_loop().call_later(delay_s, self.reply, response)

    def reply(self, response: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(response)


@contextlib.contextmanager
def server_process(script: str | Path, *args: str) -> Iterator[int]:
    """Start ``python script --serve *args`` (a script whose ``--serve`` calls :func:`serve`)
    with this interpreter, and yield its port on 127.0.0.1.

    The checkout is put first on the child's ``PYTHONPATH`` (``benchmarks`` and an in-place
    ``dataloader`` importable there as here).  On exit its stdin is closed, which stops it,
    and it is waited for (10 s at most; then ``subprocess.TimeoutExpired``).

    Raises:
        RuntimeError: the process exited, or printed something else than a port, before
            serving (its stderr is not captured: it shows the cause).
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, str(script), "--serve", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"server {script} {list(args)} printed {line!r} instead of its port "
                               f"(exit status {proc.poll()})")
        yield int(line)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
