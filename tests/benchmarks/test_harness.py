"""benchmarks/_harness.py (the remote benches' server process), _rates.interleave (their rounds)
and _peers.threadpool (their thread-pool contender)."""

from __future__ import annotations

import asyncio
import http.client
import socket

import pytest

from benchmarks import bench_remote
from benchmarks._harness import DelayedReplies, server_process
from benchmarks._peers import KeepAlive, threadpool
from benchmarks._rates import interleave


@pytest.mark.timeout(60)
def test_server_process_serves_on_its_port_until_stdin_closes():
    with server_process(bench_remote.__file__, "--latency-s=0", "--size=5") as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for i in range(3):  # keep-alive: one connection, several requests
            conn.request("GET", f"/item/{i}")
            assert conn.getresponse().read() == b"bbbbb"
        conn.close()
    # the context exited only once the process had (else proc.wait(10) raised): nothing listens
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


@pytest.mark.timeout(60)
def test_server_process_that_prints_no_port_raises(tmp_path):
    script = tmp_path / "no_server.py"
    script.write_text("import sys\nprint('not a port')\n")
    with pytest.raises(RuntimeError, match="not a port"), server_process(script):
        pass


@pytest.mark.timeout(30)
def test_delayed_replies_answer_each_request_with_what_answer_chose():
    heads: list[bytes] = []

    def answer(head: bytes) -> tuple[float, bytes]:
        heads.append(head)
        body = head.split(b" ")[1]  # the path
        return (0.05 if body == b"/slow" else 0), b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (
            len(body), body)

    async def run() -> list[bytes]:
        server = await asyncio.get_running_loop().create_server(lambda: DelayedReplies(answer), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n")  # pipelined
        got = [await reader.readuntil(b"\r\n\r\n") + await reader.readexactly(n) for n in (2, 5)]
        writer.write(b"GET /gone HTTP/1.1\r\n\r\n")
        writer.close()  # before the answer: the reply is dropped, not written to a closed transport
        await writer.wait_closed()
        while len(heads) < 3:  # the server reads the last request before the close (the test's timeout bounds it)
            await asyncio.sleep(0.001)
        server.close()
        await server.wait_closed()
        return got

    got = asyncio.run(run())
    # each request answered; the one with no delay first (answers go out as their delays end)
    assert got[0].endswith(b"/a") and got[1].endswith(b"/slow")
    assert [h.split(b"\r\n")[0] for h in heads] == [b"GET /slow HTTP/1.1", b"GET /a HTTP/1.1", b"GET /gone HTTP/1.1"]


def test_interleave_rotates_the_order_and_keeps_every_result_by_round():
    calls: list[str] = []

    def run(name: str):
        def once() -> tuple[str, int]:
            calls.append(name)
            return name, len(calls)
        return once

    got = interleave({"a": run("a"), "b": run("b"), "c": run("c")}, rounds=4)
    assert calls == list("abc" "bca" "cab" "abc")
    assert got["b"] == [("b", 2), ("b", 4), ("b", 9), ("b", 11)]


@pytest.mark.timeout(60)
def test_threadpool_gets_every_item_on_keep_alive_connections():
    with server_process(bench_remote.__file__, "--latency-s=0.001", "--size=64") as port:
        rate, cpu = threadpool(port, 200, 8)
        conns = KeepAlive(port)
        assert conns.get("/item/1") == b"b" * 64
        assert conns.get("/item/2", {"X-Any": "1"}) == b"b" * 64
        assert len(conns.conns) == 1  # the thread's keep-alive connection, reused
        conns.close()
    assert rate > 0 and cpu >= 0


@pytest.mark.timeout(60)
def test_spdl_pipeline_outputs_in_input_order():
    pytest.importorskip("spdl.pipeline", reason="SPDL is a contender where spdl-core is installed, not a dependency")
    pytest.importorskip("aiohttp")
    from benchmarks._peers import spdl_pipeline

    with server_process(bench_remote.__file__, "--latency-s=0.001", "--size=3") as port:
        async def get(session, i):
            async with session.get(f"http://127.0.0.1:{port}/item/{i}") as resp:
                return i, await resp.read()

        pipeline = spdl_pipeline(range(100), get, 16, 10)
        with pipeline.auto_stop():
            batches = list(pipeline.get_iterator(timeout=30))
    assert [i for batch in batches for i, _ in batch] == list(range(100))
    assert all(len(b) == 10 and all(body == b"bbb" for _, body in b) for b in batches)

