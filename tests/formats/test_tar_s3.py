"""TarShardDataset over a local S3 server (moto, 127.0.0.1): shards written with the standard
library's ``tarfile``, put with obstore, read back streamed through the loader; a missing key
is a shard error naming the key, skipped under the loader's ``on_error="skip"``."""

from __future__ import annotations

import pytest

from tests.formats._tars import sample_members, write_tar
from tests.io.test_objectstore import _moto_server_or_skip

from dataloader import DataLoader, TarShardDataset

obstore = pytest.importorskip("obstore", reason="obstore (the 'remote' extra) is not installed")


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    moto_server = _moto_server_or_skip()
    import boto3

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                 region_name="us-east-1").create_bucket(Bucket="shards")
    store = obstore.store.from_url("s3://shards", endpoint=endpoint, access_key_id="test",
                                   secret_access_key="test", region="us-east-1",
                                   client_options={"allow_http": True})
    root = tmp_path_factory.mktemp("s3tars")
    for s in range(3):
        shard = write_tar(root / f"s-{s}.tar", sample_members(range(s * 5, (s + 1) * 5)))
        obstore.put(store, f"train/s-{s}.tar", shard.read_bytes())
    yield store
    server.stop()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_s3_shards_give_every_sample_once_through_the_loader(bucket, num_workers):
    ds = TarShardDataset("train/s-{0..2}.tar", store=bucket, shuffle_shards=True, shuffle_buffer=4, seed=3)
    loader = DataLoader(ds, batch_size=4, num_workers=num_workers, collate_fn=list)
    samples = [s for batch in loader for s in batch]
    assert sorted(s["__key__"] for s in samples) == [f"{k:06d}" for k in range(15)]
    assert all(s["cls"] == str(int(s["__key__"])).encode() and s["jpg"] == f"img{int(s['__key__'])}".encode()
               for s in samples)


@pytest.mark.timeout(60)
def test_a_missing_s3_shard_is_named_and_skipped_under_the_loaders_policy(bucket):
    names = ["train/s-0.tar", "train/nope.tar", "train/s-2.tar"]
    with pytest.raises(FileNotFoundError, match=r"train/nope\.tar"):
        list(TarShardDataset(names, store=bucket))
    loader = DataLoader(TarShardDataset(names, store=bucket), batch_size=4, collate_fn=list, on_error="skip",
                        max_failures=1)
    keys = [s["__key__"] for batch in loader for s in batch]
    assert keys == [f"{k:06d}" for k in (*range(5), *range(10, 15))]
    assert [r.location for r in loader.failures] == ["train/nope.tar"]
