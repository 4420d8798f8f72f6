"""ObjectStoreDataset on real stores: a local moto S3 server (3.11/3.12: moto needs
cryptography, which has no cp313t wheel), with a proxy that injects 503s; and obstore's
local-file and in-memory stores (every interpreter)."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

obstore = pytest.importorskip("obstore")

from conftest import collect  # noqa: E402
from dataloader import DataLoader  # noqa: E402
from dataloader.io import Locations, ObjectStoreDataset, Retry, Template  # noqa: E402

FAST = Retry(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.05, attempt_timeout_s=5.0)


def fetch_all(ds, **kw):
    kw.setdefault("batch_size", 1)
    with DataLoader(ds, collate_fn=lambda items: [bytes(x) for x in items], **kw) as loader:
        return collect(loader)


# -- local stores (every interpreter) ----------------------------------------------------


@pytest.mark.timeout(60)
def test_local_file_store_items_missing_keys_and_max_bytes(tmp_path):
    for i in range(5):
        (tmp_path / "train").mkdir(exist_ok=True)
        (tmp_path / "train" / f"{i}.bin").write_bytes(bytes([i]) * (10 * i))
    ds = ObjectStoreDataset(Locations(Template("train/{index}.bin"), length=6), url=tmp_path.as_uri(), max_bytes=30)
    out = fetch_all(ds, num_workers=2, item_concurrency=3)
    assert out[:4] == [("batch", [bytes([i]) * (10 * i)]) for i in range(4)]
    assert out[4][0] == "error" and out[4][1][0] == "ValueError" and "40 bytes, over max_bytes=30" in out[4][1][1][0]
    assert out[5][0] == "error" and out[5][1][0] == "FileNotFoundError" and "train/5.bin" in out[5][1][1][1]


@pytest.mark.timeout(60)
def test_a_store_given_by_the_caller_is_used_as_it_is():
    store = obstore.store.MemoryStore()
    for i in range(8):
        obstore.put(store, f"k/{i}", f"v{i}".encode())
    ds = ObjectStoreDataset([f"k/{i}" for i in range(8)], store=store)
    assert fetch_all(ds, batch_size=4, num_workers=1, item_concurrency=4) == [
        ("batch", [f"v{i}".encode() for i in range(j, j + 4)]) for j in (0, 4)
    ]
    with pytest.raises(ValueError, match="with store="):
        ObjectStoreDataset(["k/0"], store=store, retry=FAST)


def test_keys_never_leave_the_bucket():
    store = obstore.store.MemoryStore()
    with pytest.raises(ValueError, match="template value"):
        ObjectStoreDataset(Locations(Template("a/{d}/x", d=".."), length=1), store=store)
    with pytest.raises(ValueError, match="template value"):
        ObjectStoreDataset(Locations(Template("a/{d}", d="b/c"), length=1), store=store)
    with pytest.raises(ValueError, match="component"):
        ObjectStoreDataset(["a/../b"], store=store)
    with pytest.raises(ValueError, match="bucket"):
        ObjectStoreDataset(Locations(Template("s3://{b}/x", b="other"), length=1))
    with pytest.raises(ValueError, match="one bucket per dataset"):
        ObjectStoreDataset(["s3://one/a", "s3://two/b"], skip_signature=True)
    with pytest.raises(ValueError, match="relative to the store"):
        ObjectStoreDataset(["s3://one/a"], store=store)


# -- a local S3 server (moto) -----------------------------------------------------------


class Fault503Proxy:
    """Forwards to ``upstream``; answers 503 to the first ``fails[path]`` GETs of a path."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.fails: dict[str, int] = {}
        self.gets: dict[str, int] = {}
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                path = self.path.split("?")[0]
                with proxy.lock:
                    n = proxy.gets[path] = proxy.gets.get(path, 0) + 1
                    inject = n <= proxy.fails.get(path, 0)
                if inject:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                conn = http.client.HTTPConnection(*upstream, timeout=10)
                try:
                    conn.request("GET", self.path, headers=dict(self.headers))
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture(scope="module")
def s3():
    moto_server = pytest.importorskip(
        "moto.server", reason="moto[server] needs cryptography, which has no wheel for this interpreter"
    )
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    opts = dict(endpoint=endpoint, access_key_id="test", secret_access_key="test", region="us-east-1",
                client_options={"allow_http": True})
    setup = obstore.store.from_url("s3://data", **opts)
    import boto3

    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                 region_name="us-east-1").create_bucket(Bucket="data")
    for i in range(20):
        obstore.put(setup, f"train/{i:03d}.bin", bytes([i]) * (i + 1))
    proxy = Fault503Proxy((host, port))
    yield {"opts": opts, "proxy": proxy, "proxy_opts": {**opts, "endpoint": f"http://127.0.0.1:{proxy.port}"}}
    proxy.close()
    server.stop()


@pytest.mark.timeout(60)
def test_s3_items_through_the_loader_with_a_template(s3):
    ds = ObjectStoreDataset(Locations(Template("s3://data/train/{index:03d}.bin"), length=20), retry=FAST,
                            **s3["opts"])
    out = fetch_all(ds, batch_size=5, num_workers=2, item_concurrency=5)
    assert [x for _, batch in out for x in batch] == [bytes([i]) * (i + 1) for i in range(20)]


@pytest.mark.timeout(60)
def test_s3_missing_key_and_missing_bucket_fail_their_items(s3):
    ds = ObjectStoreDataset(["train/000.bin", "train/nope.bin"], url="s3://data", retry=FAST, **s3["opts"])
    out = fetch_all(ds)
    assert out[0] == ("batch", [b"\x00"])
    assert out[1][0] == "error" and out[1][1][0] == "FileNotFoundError" and "train/nope.bin" in out[1][1][1][1]
    nobucket = ObjectStoreDataset(["a"], url="s3://no-such-bucket", retry=FAST, **s3["opts"])
    out = fetch_all(nobucket)
    assert out[0][0] == "error" and out[0][1][0] in ("FileNotFoundError", "OSError")
    assert "no-such-bucket" in str(out[0][1][1])


@pytest.mark.timeout(60)
def test_s3_503s_are_retried_by_the_store_itself_per_retry(s3):
    proxy = s3["proxy"]
    proxy.fails.update({"/data/train/001.bin": 2, "/data/train/002.bin": 10})
    ds = ObjectStoreDataset(["train/001.bin", "train/002.bin"], url="s3://data", retry=FAST, **s3["proxy_opts"])
    out = fetch_all(ds)
    assert out[0] == ("batch", [b"\x01\x01"])
    assert proxy.gets["/data/train/001.bin"] == 3  # two 503s, then the object
    assert out[1][0] == "error" and out[1][1][0] == "OSError", out[1]
    assert proxy.gets["/data/train/002.bin"] == FAST.max_attempts  # no second loop on top
