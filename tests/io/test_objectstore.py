"""ObjectStoreDataset on real stores: a local moto S3 server (3.11/3.12: moto needs
cryptography, which has no cp313t wheel), with a proxy that injects 503s; obstore's
local-file and in-memory stores; and obstore's GCS and Azure clients against a local fake
that answers their GETs (every interpreter)."""

from __future__ import annotations

import email.utils
import http.client
import re
import sysconfig
import threading
import urllib.parse
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

obstore = pytest.importorskip("obstore")

from tests._support import collect  # noqa: E402
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


class LocalServer:
    """A threaded HTTP/1.1 server on 127.0.0.1: counts the GETs of each path in ``gets``,
    answers 503 to the first ``fails[path]`` of them, and the others with ``answer``."""

    def __init__(self) -> None:
        self.fails: dict[str, int] = {}
        self.gets: dict[str, int] = {}
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                path = server.path_of(self.path)
                with server.lock:
                    n = server.gets[path] = server.gets.get(path, 0) + 1
                    inject = n <= server.fails.get(path, 0)
                if inject:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                server.answer(self, path)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def path_of(self, target: str) -> str:
        return target.split("?")[0]

    def answer(self, h: BaseHTTPRequestHandler, path: str) -> None:
        raise NotImplementedError

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class Fault503Proxy(LocalServer):
    """Forwards to ``upstream``; answers 503 to the first ``fails[path]`` GETs of a path."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        super().__init__()

    def answer(self, h, path):
        conn = http.client.HTTPConnection(*self.upstream, timeout=10)
        try:
            conn.request("GET", h.path, headers=dict(h.headers))
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        h.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


def _moto_server_or_skip():
    try:
        import moto.server
    except ImportError:
        if sysconfig.get_config_var("Py_GIL_DISABLED"):
            pytest.skip(
                "moto[server] needs cryptography, whose wheels are abi3 only (cryptography 50.0.2: "
                "cp311-abi3), and a free-threaded interpreter cannot load an abi3 wheel: "
                "`pip download --only-binary=:all: cryptography` finds none for 3.13t, and these tests "
                "do not build it from source (Rust); the other stores here run on every interpreter"
            )
        pytest.skip("moto[server] is not installed (the 'test' extra installs it on Python < 3.13)")
    return moto.server


@pytest.fixture(scope="module")
def s3():
    moto_server = _moto_server_or_skip()
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


@pytest.mark.timeout(60)
def test_s3_large_object_is_fetched_in_ranges_each_retried_by_the_store(s3):
    proxy = s3["proxy"]
    data = bytes(range(256)) * 1200  # 307,200 bytes: 5 parts of 64 KiB
    obstore.put(obstore.store.from_url("s3://data", **s3["opts"]), "big/0.bin", data)
    proxy.fails["/data/big/0.bin"] = 2  # the first GET: the store retries it, then the parts
    ds = ObjectStoreDataset(["big/0.bin"], url="s3://data", retry=FAST, range_parallel_threshold=100_000,
                            range_chunk_bytes=65536, **s3["proxy_opts"])
    assert fetch_all(ds) == [("batch", [data])]
    assert proxy.gets["/data/big/0.bin"] == 2 + 5  # two 503s, the first part's GET, four ranges


# -- obstore's other stores: memory://, a LocalStore given by the caller, GCS and Azure --------


def test_a_memory_url_store_fetches_its_objects_and_fails_a_missing_key():
    ds = ObjectStoreDataset(["a/0", "a/1", "a/big", "a/none"], url="memory:///", max_bytes=4, retry=FAST)
    assert type(ds.store).__name__ == "MemoryStore"
    for key, value in (("a/0", b"x"), ("a/1", b"yy"), ("a/big", b"zzzzz")):
        obstore.put(ds.store, key, value)
    out = fetch_all(ds, num_workers=1, item_concurrency=2)
    assert out[:2] == [("batch", [b"x"]), ("batch", [b"yy"])]
    assert out[2][0] == "error" and out[2][1][0] == "ValueError" and "5 bytes, over max_bytes=4" in out[2][1][1][0]
    assert out[3][0] == "error" and out[3][1][0] == "FileNotFoundError" and "a/none" in out[3][1][1][1]


def test_a_retry_with_huge_attempts_and_time_outs_builds_its_store():
    retry = Retry(max_attempts=10**30, max_backoff_s=1e300, attempt_timeout_s=1e300)
    ds = ObjectStoreDataset(["a/0"], url="memory:///", retry=retry)
    obstore.put(ds.store, "a/0", b"x")
    assert fetch_all(ds) == [("batch", [b"x"])]


def test_a_local_store_given_by_the_caller(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.bin").write_bytes(b"AA")
    (tmp_path / "d" / "b.bin").write_bytes(b"B" * 100)
    ds = ObjectStoreDataset(["d/a.bin", "d/b.bin", "d/c.bin"], store=obstore.store.LocalStore(tmp_path),
                            max_bytes=10)
    out = fetch_all(ds)
    assert out[0] == ("batch", [b"AA"])
    assert out[1][0] == "error" and out[1][1][0] == "ValueError" and "d/b.bin" in out[1][1][1][0]
    assert out[2][0] == "error" and out[2][1][0] == "FileNotFoundError" and "d/c.bin" in out[2][1][1][1]


class FakeCloud(LocalServer):
    """GETs of ``/{bucket}/{key}`` (the key percent-decoded: GCS sends ``a%2Fb``) answered
    from ``objects`` with the headers object_store needs (ETag, Last-Modified), 404 when
    absent; the first ``fails[key]`` GETs of a key get a 503.  ``gets`` counts per key;
    a ``Range: bytes=a-b`` is answered 206 with that part, and listed in ``ranges[key]``."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.ranges: dict[str, list[tuple[int, int]]] = {}
        super().__init__()

    def path_of(self, target):
        return urllib.parse.unquote(target.split("?")[0])

    def answer(self, h, path):
        with self.lock:
            data = self.objects.get(path)
        asked = re.fullmatch(r"bytes=(\d+)-(\d+)", h.headers.get("Range", ""))
        size = 0 if data is None else len(data)
        h.send_response(404 if data is None else 200 if asked is None else 206)
        if data is not None:
            h.send_header("ETag", f'"{len(data)}"')
            h.send_header("Last-Modified", email.utils.formatdate(usegmt=True))
            if asked is not None:
                a, b = int(asked[1]), min(int(asked[2]), size - 1)
                with self.lock:
                    self.ranges.setdefault(path, []).append((a, b))
                h.send_header("Content-Range", f"bytes {a}-{b}/{size}")
                data = data[a : b + 1]
        h.send_header("Content-Length", str(0 if data is None else len(data)))
        h.end_headers()
        if data is not None:
            h.wfile.write(data)


@pytest.fixture
def cloud():
    c = FakeCloud()
    yield c
    c.close()


# How each store is pointed at the local server, without credentials (obstore's own options).
CLOUD_OPTIONS = {
    "gs": lambda endpoint: dict(base_url=endpoint, skip_signature=True, client_options={"allow_http": True}),
    "az": lambda endpoint: dict(account_name="acct", endpoint=endpoint, skip_signature=True,
                                client_options={"allow_http": True}),
}


@pytest.mark.parametrize(("url", "store_class"), [
    ("gs://bkt", "GCSStore"), ("az://ctr", "AzureStore"), ("abfs://ctr@acct.dfs.core.windows.net", "AzureStore"),
    ("s3://bkt", "S3Store"),
])
def test_building_a_cloud_dataset_makes_its_store_with_the_retry_and_asks_nothing(cloud, url, store_class):
    options = {"account_name": "acct"} if url.startswith("az:") else {}
    ds = ObjectStoreDataset(["k"], url=url, retry=FAST, skip_signature=True, **options)
    assert type(ds.store).__name__ == store_class
    assert ds.store.retry_config == FAST.store_config()  # the store retries, per the dataset's Retry
    assert ds.store.client_options["timeout"] in ("5s", timedelta(seconds=5))  # attempt_timeout_s
    scheme = url.split(":")[0]
    if scheme in CLOUD_OPTIONS:
        ObjectStoreDataset(["k"], url=url.split("@")[0], retry=FAST, **CLOUD_OPTIONS[scheme](cloud.endpoint))
    assert cloud.gets == {}  # building a dataset sends no request


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scheme", ["gs", "az"])
def test_cloud_items_through_a_local_server(cloud, scheme):
    for i in range(6):
        cloud.objects[f"/bkt/train/{i}.bin"] = bytes([i]) * (i + 1)
    cloud.fails.update({"/bkt/train/1.bin": 2, "/bkt/train/2.bin": 10})
    ds = ObjectStoreDataset(Locations(Template(scheme + "://bkt/train/{index}.bin"), length=7), retry=FAST,
                            max_bytes=5, **CLOUD_OPTIONS[scheme](cloud.endpoint))
    out = fetch_all(ds, num_workers=2, item_concurrency=2)
    assert [out[i] for i in (0, 1, 3, 4)] == [("batch", [bytes([i]) * (i + 1)]) for i in (0, 1, 3, 4)]
    assert cloud.gets["/bkt/train/1.bin"] == 3  # two 503s retried by the store, then the object
    assert out[2][0] == "error" and out[2][1][0] == "OSError" and f"{scheme}://bkt/train/2.bin" in out[2][1][1][0]
    assert cloud.gets["/bkt/train/2.bin"] == FAST.max_attempts  # no second loop on top
    assert out[5][0] == "error" and out[5][1][0] == "ValueError" and "6 bytes, over max_bytes=5" in out[5][1][1][0]
    assert out[6][0] == "error" and out[6][1][0] == "FileNotFoundError"
    assert out[6][1][1][1].startswith(f"{scheme}://bkt/train/6.bin: ")  # the location, then obstore's words


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_skip_names_the_missing_objects_by_key(num_workers):
    store = obstore.store.MemoryStore()
    keys = [f"k/{i}" for i in range(20)]
    for i in range(20):
        if i not in (4, 13):
            obstore.put(store, keys[i], b"v")
    ds = ObjectStoreDataset(keys, store=store)
    with DataLoader(ds, batch_size=5, collate_fn=list, num_workers=num_workers, item_concurrency=3,
                    on_error="skip") as loader:
        assert sum(len(b) for b in loader) == 18
        assert [(r.index, r.location, r.exc_type) for r in loader.failures] == [
            (4, "k/4", FileNotFoundError), (13, "k/13", FileNotFoundError)]
