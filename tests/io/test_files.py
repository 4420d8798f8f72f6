"""FileDataset on real files: bytes, root confinement, errors per item, max_bytes, retries."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import pytest

from dataloader import DataLoader
from dataloader.io import FileDataset, Locations, Retry, Template
from dataloader.io.files import TRANSIENT_ERRNOS


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    (root / "train").mkdir(parents=True)
    for i in range(6):
        (root / "train" / f"{i:03d}.bin").write_bytes(bytes([i]) * (i + 1))
    (tmp_path / "secret.txt").write_bytes(b"outside")
    return root


def test_items_are_the_files_bytes_through_a_loader(tree):
    ds = FileDataset(Locations(Template("train/{index:03d}.bin"), length=6), root=tree)
    assert len(ds) == 6 and ds[2] == b"\x02\x02\x02"
    with DataLoader(ds, batch_size=2, num_workers=2, item_concurrency=2, collate_fn=list) as loader:
        assert [b for batch in loader for b in batch] == [bytes([i]) * (i + 1) for i in range(6)]


def test_missing_file_and_directory_fail_their_item_naming_the_path(tree):
    ds = FileDataset(["train/000.bin", "train/nope.bin", "train"], root=tree)
    with pytest.raises(FileNotFoundError) as info:
        ds[1]
    assert info.value.filename.endswith("nope.bin")
    with pytest.raises(IsADirectoryError) as info:
        ds[2]
    assert info.value.filename.endswith("train")
    with pytest.raises(IndexError):
        ds[3]
    loader = DataLoader(ds, batch_size=1, collate_fn=list)
    kinds = []
    it = iter(loader)
    for _ in range(3):
        try:
            next(it)
            kinds.append("ok")
        except OSError as exc:
            kinds.append(type(exc).__name__)
    assert kinds == ["ok", "FileNotFoundError", "IsADirectoryError"]  # the epoch goes on


def test_a_symlink_out_of_root_fails_but_one_inside_is_followed(tree):
    os.symlink(tree.parent / "secret.txt", tree / "train" / "escape.bin")
    os.symlink(tree / "train" / "001.bin", tree / "inside.bin")
    ds = FileDataset(["train/escape.bin", "inside.bin"], root=tree)
    with pytest.raises(ValueError, match="outside root"):
        ds[0]
    assert ds[1] == b"\x01\x01"


def test_dot_dot_locations_and_template_values_never_leave_root(tree):
    with pytest.raises(ValueError, match="component"):
        FileDataset(["../secret.txt"], root=tree)
    with pytest.raises(ValueError, match="template value"):
        FileDataset(Locations(Template("{d}/secret.txt", d=".."), length=1), root=tree)
    with pytest.raises(ValueError, match="outside root"):
        FileDataset([str(tree.parent / "secret.txt")], root=tree)
    ds = FileDataset(Locations(Template("train/{name}", name=lambda i: ["000.bin", "..", "x/../../s"][i]), length=3),
                     root=tree)
    assert ds[0] == b"\x00"
    for i in (1, 2):
        with pytest.raises(ValueError):
            ds[i]
    with pytest.raises(ValueError, match="contains"):
        FileDataset(["a\x00b"])


@pytest.mark.parametrize("root", [None, "tree"])
def test_a_nul_in_a_location_is_refused_naming_the_whole_location(tree, root):
    with pytest.raises(ValueError) as info:
        FileDataset(["ok.bin", "sub/dir/a.txt\x00"], root=tree if root else None)
    assert str(info.value) == "item 1: location 'sub/dir/a.txt\\x00' contains a NUL character ('\\x00'), which a path may not"
    ds = FileDataset(Locations(lambda i: "sub/dir/b\x00.txt", length=1), root=tree if root else None)
    with pytest.raises(ValueError, match=r"item 0: location 'sub/dir/b\\x00.txt' contains a NUL") as info:
        ds[0]
    assert "template value" not in str(info.value)


def test_max_bytes_fails_a_larger_file_with_its_size_before_reading(tree):
    ds = FileDataset(Locations(Template("train/{index:03d}.bin"), length=6), root=tree, max_bytes=3)
    assert ds[2] == b"\x02" * 3
    with pytest.raises(ValueError, match=r"is 4 bytes, over max_bytes=3"):
        ds[3]
    with pytest.raises(ValueError, match="must be >= 0"):
        FileDataset(["a"], max_bytes=-1)


def test_a_fifo_is_refused_instead_of_blocking(tree):
    os.mkfifo(tree / "pipe")
    with pytest.raises(ValueError, match="not a regular file"):
        FileDataset(["pipe"], root=tree)[0]


def test_permission_denied_fails_the_item_also_when_the_suite_runs_as_root(tmp_path):
    # root ignores mode bits, so the read runs in a child that drops to an unprivileged user.
    blocked = tmp_path / "blocked.bin"
    blocked.write_bytes(b"x")
    blocked.chmod(0)
    script = textwrap.dedent(f"""
        import os, sys
        from dataloader.io import FileDataset
        ds = FileDataset([{str(blocked)!r}])
        if os.geteuid() == 0:
            os.setgid(65534); os.setuid(65534)
        try:
            ds[0]
        except PermissionError as exc:
            print("PermissionError", exc.filename)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["PermissionError", str(blocked)], out.stderr


def test_only_transient_errnos_are_retried(tree, monkeypatch):
    assert {errno.EIO, errno.EAGAIN, errno.EINTR, errno.ESTALE} <= TRANSIENT_ERRNOS
    assert errno.ENOENT not in TRANSIENT_ERRNOS and errno.EACCES not in TRANSIENT_ERRNOS
    ds = FileDataset(["train/000.bin"], root=tree, retry=Retry(max_attempts=3, initial_backoff_s=0, max_backoff_s=0))
    real_read, calls = os.read, []

    def flaky_read(fd, n):
        calls.append(n)
        if len(calls) <= 2:
            raise OSError(errno.EIO, "I/O error")
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", flaky_read)
    assert ds[0] == b"\x00" and len(calls) >= 3
    calls.clear()

    def broken_read(fd, n):
        calls.append(n)
        raise OSError(errno.EIO, "always")

    monkeypatch.setattr(os, "read", broken_read)
    with pytest.raises(OSError, match="always"):
        ds[0]
    assert len(calls) == 3  # max_attempts, then the last error
    calls.clear()

    def denied_read(fd, n):
        calls.append(n)
        raise PermissionError(errno.EACCES, "denied")

    monkeypatch.setattr(os, "read", denied_read)
    with pytest.raises(PermissionError):
        ds[0]
    assert len(calls) == 1  # final at once


def test_bad_arguments(tree):
    with pytest.raises(ValueError, match="not a directory"):
        FileDataset(["a"], root=tree / "train" / "000.bin")
    with pytest.raises(TypeError, match="Retry"):
        FileDataset(["a"], retry=3)
