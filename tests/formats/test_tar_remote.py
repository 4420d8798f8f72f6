"""TarShardDataset over HTTP (a local server) and an object store (obstore's local and memory
stores): the same samples as from files, streamed, with a failing shard named and redacted."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.formats._tars import keys_of, sample_members, write_shards, write_tar

from dataloader import DataLoader, TarShardDataset

GATE_WAIT_S = 20.0  # bounds the gated response if a test fails: the server never hangs


class _ShardServer:
    """127.0.0.1 server of ``files`` (path -> bytes); a path in ``gated`` sends its first half,
    then waits for ``gate`` before the rest (``waiting`` is True meanwhile)."""

    def __init__(self, files: dict[str, bytes], gated: str = "") -> None:
        self.files, self.gated = files, gated
        self.gate, self.waiting = threading.Event(), False
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = owner.files.get(self.path.split("?")[0])
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.path.startswith(owner.gated) and owner.gated:
                    half = len(body) // 2
                    owner.waiting = True  # before the client can see a byte
                    self.wfile.write(body[:half])
                    self.wfile.flush()
                    owner.gate.wait(GATE_WAIT_S)
                    owner.waiting = False
                    body = body[half:]
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def shards(tmp_path):
    pattern = write_shards(tmp_path, 3, 4)
    return tmp_path, pattern


@pytest.mark.timeout(60)
def test_http_shards_give_the_samples_of_the_files(shards):
    root, pattern = shards
    server = _ShardServer({f"/d/s-{i:02d}.tar": (root / f"s-{i:02d}.tar").read_bytes() for i in range(3)})
    try:
        local = keys_of(DataLoader(TarShardDataset(pattern, shuffle_buffer=5), batch_size=2, collate_fn=list))
        remote = TarShardDataset(server.url("/d/s-{00..02}.tar"), shuffle_buffer=5)
        assert keys_of(DataLoader(remote, batch_size=2, num_workers=2, collate_fn=list)) != []
        assert keys_of(DataLoader(remote, batch_size=2, collate_fn=list)) == local
        assert next(iter(TarShardDataset(server.url("/d/s-00.tar"))))["__url__"] == server.url("/d/s-00.tar")
    finally:
        server.close()


@pytest.mark.timeout(60)
def test_the_first_sample_arrives_before_the_shard_is_downloaded(tmp_path):
    big = write_tar(tmp_path / "big.tar", [(f"{k:04d}.bin", bytes(2000)) for k in range(200)]).read_bytes()
    server = _ShardServer({"/big.tar": big}, gated="/big.tar")
    try:
        it = iter(TarShardDataset(server.url("/big.tar")))
        assert next(it)["__key__"] == "0000"
        assert server.waiting  # the server still holds back the second half
        server.gate.set()
        assert sum(1 for _ in it) == 199
    finally:
        server.close()


@pytest.mark.timeout(60)
def test_a_missing_http_shard_is_named_without_its_secret(shards):
    server = _ShardServer({})
    try:
        url = server.url("/d/gone.tar?token=hunter2&x=1")
        with pytest.raises(OSError, match=r"tar shard 'http://127\.0\.0\.1:\d+/d/gone\.tar\?token=\*\*\*&x=1'") as err:
            list(TarShardDataset(url))
        assert "hunter2" not in str(err.value)
    finally:
        server.close()


@pytest.mark.timeout(60)
def test_object_store_shards_give_the_samples_of_the_files(shards):
    store_mod = pytest.importorskip("obstore.store", reason="obstore (the 'remote' extra) is not installed")
    import obstore

    root, pattern = shards
    expected = [s["__key__"] for s in TarShardDataset(pattern)]
    local = TarShardDataset("s-{00..02}.tar", store=store_mod.LocalStore(prefix=str(root)))
    assert [s["__key__"] for s in local] == expected
    memory = store_mod.MemoryStore()
    for i in range(3):
        obstore.put(memory, f"b/s-{i:02d}.tar", (root / f"s-{i:02d}.tar").read_bytes())
    ds = TarShardDataset("b/s-{00..02}.tar", store=memory, shuffle_buffer=4)
    loader = DataLoader(ds, batch_size=2, num_workers=2, collate_fn=list)
    assert sorted(keys_of(loader)) == sorted(expected)
    with pytest.raises(FileNotFoundError, match=r"tar shard 'b/nope\.tar'"):
        list(TarShardDataset("b/nope.tar", store=memory))


def test_a_file_url_reads_the_local_file(tmp_path):
    shard = write_tar(tmp_path / "a.tar", sample_members([5]))
    assert [s["cls"] for s in TarShardDataset(f"file://{shard}")] == [b"5"]


def _dying_server(body: bytes, chunked: bool) -> str:
    """A 127.0.0.1 server that answers one GET with half of ``body`` (chunked, or under a
    Content-Length of all of it) and closes the connection: a server dying mid-stream."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(GATE_WAIT_S)  # stops by itself if the client never comes

    def answer() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                half = body[: len(body) // 2]
                head = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % len(body)
                part = b"%x\r\n%s\r\n1000\r\n" % (len(half), half) if chunked else half
                conn.sendall(b"HTTP/1.1 200 OK\r\n" + head + b"\r\n\r\n" + part)

    threading.Thread(target=answer, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/d/half.tar"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_an_http_shard_whose_server_dies_mid_stream_is_named_never_short(tmp_path, chunked, on_error):
    body = write_tar(tmp_path / "s.tar", sample_members(range(40))).read_bytes()
    ds = TarShardDataset(_dying_server(body, chunked), on_error=on_error, timeout_s=10)
    if on_error == "raise":
        with pytest.raises(ValueError, match=r"tar shard 'http://127\.0\.0\.1:\d+/d/half\.tar', after \d+ sample"):
            list(ds)
    else:
        assert 0 < len(list(ds)) < 40
        [(shard, message)] = ds.skipped_shards
        assert shard.endswith("/d/half.tar") and "after" in message
