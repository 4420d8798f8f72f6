"""TarShardDataset's samples: WebDataset's grouping rule, brace patterns, and bad shards named."""

from __future__ import annotations

import gzip

import pytest

from tests.formats._tars import sample_members, write_shards, write_tar

from dataloader import DataLoader, TarShardDataset
from dataloader.formats._braces import expand_braces


def test_files_with_one_key_make_one_sample_with_key_url_and_lower_cased_extensions(tmp_path):
    shard = write_tar(tmp_path / "a.tar", [
        ("000001.JPG", b"j1"), ("000001.cls", b"1"),
        ("dir.v2/000002.seg.PNG", b"p2"), ("dir.v2/000002.txt", b"t2"),
        ("__meta__", b"m"), ("__skipme__/x.txt", b"s"), ("noextension", b"n"),
        ("000003.cls", b"3"),
    ])
    samples = list(TarShardDataset(str(shard)))
    where = {"__url__": str(shard), "__local_path__": str(shard)}
    assert samples == [
        {"__key__": "000001", **where, "jpg": b"j1", "cls": b"1"},
        {"__key__": "dir.v2/000002", **where, "seg.png": b"p2", "txt": b"t2"},
        {"__key__": "000003", **where, "cls": b"3"},
    ]


def test_a_key_seen_again_after_another_starts_a_new_sample_and_a_repeated_extension_is_an_error(tmp_path):
    shard = write_tar(tmp_path / "a.tar", [("1.a", b"x"), ("2.a", b"y"), ("1.b", b"z")])
    assert [s["__key__"] for s in TarShardDataset(str(shard))] == ["1", "2", "1"]
    dup = write_tar(tmp_path / "dup.tar", [("1.a", b"x"), ("1.A", b"y")])
    with pytest.raises(ValueError, match=r"dup\.tar.*duplicate file name"):
        list(TarShardDataset(str(dup)))


def test_brace_patterns_expand_like_braceexpand():
    assert expand_braces("t-{000..002}.tar") == ["t-000.tar", "t-001.tar", "t-002.tar"]
    assert expand_braces("{a,b}/p-{8..10}") == ["a/p-8", "a/p-9", "a/p-10", "b/p-8", "b/p-9", "b/p-10"]
    assert expand_braces("x-{3..1}") == ["x-3", "x-2", "x-1"]
    for bad in ("t-{000..002.tar", "t-}.tar", "t-{}.tar", "t-{a}.tar"):
        with pytest.raises(ValueError, match="shard pattern"):
            expand_braces(bad)


@pytest.mark.timeout(30)
def test_a_pattern_of_more_than_a_million_names_is_refused_before_expanding():
    with pytest.raises(ValueError, match=r"shard pattern 'd/\{0\.\.9999999\}\.tar' stands for 10,000,000 names"):
        TarShardDataset("d/{0..9999999}.tar")  # refused from the count: no 10M strings made
    with pytest.raises(ValueError, match=r"stands for more than 10\*\*18 names"):
        expand_braces("{0..9}" * 5000)  # counted group by group: no recursion per group
    with pytest.raises(ValueError, match=r"'b\{0\.\.600000\}' stands for 600,001 names, over the 399,999 left"):
        TarShardDataset(["a{0..600000}", "b{0..600000}"])  # the bound is for the whole list
    assert len(TarShardDataset("s-{000000..999999}.tar").shards) == 1_000_000


def test_a_list_of_patterns_reads_the_shards_in_order_and_compressed_tars_too(tmp_path):
    pattern = write_shards(tmp_path, 2, 3)
    gz = tmp_path / "z.tar.gz"
    write_tar(gz, sample_members([100]), mode="w:gz")
    ds = TarShardDataset([pattern, gz])
    assert [s["cls"] for s in ds] == [b"0", b"1", b"2", b"3", b"4", b"5", b"100"]


def test_bad_arguments_are_refused_naming_the_value(tmp_path):
    with pytest.raises(ValueError, match="at least one shard"):
        TarShardDataset([])
    with pytest.raises(TypeError, match="a shard must be a str"):
        TarShardDataset([3])
    with pytest.raises(ValueError, match="shuffle_buffer=-1"):
        TarShardDataset("a.tar", shuffle_buffer=-1)
    with pytest.raises(ValueError, match="on_error must be"):
        TarShardDataset("a.tar", on_error="replace")
    with pytest.raises(ValueError, match="rank=2 must be < world_size=2"):
        TarShardDataset("a.tar", world_size=2, rank=2)
    with pytest.raises(ValueError, match="timeout_s"):
        TarShardDataset("a.tar", timeout_s=0)


@pytest.mark.parametrize("shards", ["", ["a.tar", ""], "{,x}"])
def test_an_empty_shard_name_is_refused_at_construction_naming_the_pattern(shards):
    with pytest.raises(ValueError, match="expands to an empty name"):
        TarShardDataset(shards)
    assert TarShardDataset("train{,-extra}.tar").shards == ("train.tar", "train-extra.tar")  # empty alternatives


def _truncated(tmp_path):
    whole = write_tar(tmp_path / "whole.tar", sample_members(range(6))).read_bytes()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole[: 512 * 13 + 100])  # inside the 7th member's data (headers + 1-block bodies)
    return cut


def test_a_truncated_shard_raises_naming_it_after_the_samples_before_the_cut(tmp_path):
    cut = _truncated(tmp_path)
    got = []
    with pytest.raises(ValueError, match=r"tar shard '.*cut\.tar', after 3 sample\(s\).*cut short"):
        for sample in TarShardDataset(str(cut)):
            got.append(sample["__key__"])
    assert got == ["000000", "000001", "000002"]


@pytest.mark.parametrize("where", ["at a member header", "inside a header", "at a corrupt header"])
def test_a_shard_cut_at_or_inside_a_header_or_with_a_corrupt_one_raises_instead_of_ending_short(tmp_path, where):
    data = write_tar(tmp_path / "whole.tar", sample_members(range(5))).read_bytes()
    at = 4 * 512 * 2  # the header of sample 2's first file (each file: a header and a data block)
    cut = {"at a member header": data[:at], "inside a header": data[: at + 100],
           "at a corrupt header": data[:at] + b"\x7f" * 512 + data[at + 512 :]}[where]
    shard = tmp_path / "cut.tar"
    shard.write_bytes(cut)
    got = []
    with pytest.raises(ValueError, match=rf"cut\.tar', after 1 sample\(s\).*at byte {at}"):
        for sample in TarShardDataset(str(shard)):
            got.append(sample["__key__"])
    assert got == ["000000"]  # sample 1 is complete only once its successor's header is read


def test_a_shard_that_is_not_a_tar_or_is_missing_is_named(tmp_path):
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"this is not a tar file at all" * 50)
    with pytest.raises(ValueError, match=r"junk\.tar"):
        list(TarShardDataset(str(junk)))
    with pytest.raises(FileNotFoundError, match=r"missing\.tar"):
        list(TarShardDataset(str(tmp_path / "missing.tar")))
    gz = tmp_path / "bad.tar.gz"
    gz.write_bytes(gzip.compress(b"x" * 4000)[:-20])
    with pytest.raises(ValueError, match=r"bad\.tar\.gz"):
        list(TarShardDataset(str(gz)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_on_error_skip_drops_the_rest_of_a_bad_shard_and_records_it(tmp_path, num_workers):
    good = write_tar(tmp_path / "good.tar", sample_members(range(100, 104)))
    cut = _truncated(tmp_path)
    ds = TarShardDataset([str(cut), str(good), str(tmp_path / "gone.tar")], on_error="skip")
    loader = DataLoader(ds, batch_size=2, num_workers=num_workers, collate_fn=list)
    keys = sorted(s["__key__"] for b in loader for s in b)
    assert keys == ["000000", "000001", "000002", "000100", "000101", "000102", "000103"]
    skipped = sorted(name.rsplit("/", 1)[-1] for name, _ in ds.skipped_shards)
    assert skipped == ["cut.tar", "gone.tar"]


@pytest.mark.timeout(60)
def test_in_a_loader_a_bad_shard_is_raised_by_next_with_its_name(tmp_path):
    cut = _truncated(tmp_path)
    loader = DataLoader(TarShardDataset(str(cut)), batch_size=2, collate_fn=list)
    it = iter(loader)
    assert [s["__key__"] for s in next(it)] == ["000000", "000001"]
    with pytest.raises(ValueError, match=r"cut\.tar"):
        next(it)
