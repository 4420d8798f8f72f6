"""ImageFolder / ImageFiles: torchvision's folder rules, bytes out."""

from __future__ import annotations

import pytest
from tests._image_data import JPEGS

from dataloader.image import IMG_EXTENSIONS, Decode, ImageFiles, ImageFolder


@pytest.fixture
def tree(tmp_path):
    data = JPEGS[0].read_bytes()
    layout = {
        "dog/b.jpg": data,
        "dog/a.JPEG": data,
        "dog/nested/c.png": b"png-bytes",
        "dog/notes.txt": b"ignored",
        "cat/z.jpg": b"cat-z",
        "cat/y.webp": b"cat-y",
        "ant/x.bmp": b"ant-x",
    }
    for name, content in layout.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    (tmp_path / "stray.jpg").write_bytes(b"not in a class")
    return tmp_path


def test_classes_sorted_and_samples_in_torchvision_order(tree):
    ds = ImageFolder(tree)
    assert ds.classes == ["ant", "cat", "dog"]
    assert ds.class_to_idx == {"ant": 0, "cat": 1, "dog": 2}
    names = [(p[len(str(tree)) + 1 :], label) for p, label in ds.samples]
    assert names == [
        ("ant/x.bmp", 0),
        ("cat/y.webp", 1),
        ("cat/z.jpg", 1),
        ("dog/a.JPEG", 2),
        ("dog/b.jpg", 2),
        ("dog/nested/c.png", 2),
    ]
    assert ds.targets == [0, 1, 1, 2, 2, 2] and len(ds) == 6


def test_items_are_encoded_bytes_and_label(tree):
    ds = ImageFolder(tree)
    assert ds[1] == (b"cat-y", 1)
    data, label = ds[3]
    assert label == 2 and data == JPEGS[0].read_bytes()
    assert Decode()(ds[3])[0].shape[2] == 3
    assert ds[-1] == (b"png-bytes", 2)
    with pytest.raises(IndexError):
        ds[6]


def test_extension_filter(tree):
    ds = ImageFolder(tree, extensions=(".txt", ".bmp", ".jpg"))
    assert sorted(p.rsplit("/", 1)[1] for p, _ in ds.samples) == [
        "b.jpg",
        "notes.txt",
        "x.bmp",
        "z.jpg",
    ]
    assert ".webp" in IMG_EXTENSIONS and ".txt" not in IMG_EXTENSIONS


def test_no_class_folder_raises(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="class folder"):
        ImageFolder(tmp_path)


def test_class_without_images_raises(tree):
    (tree / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty"):
        ImageFolder(tree)


def test_missing_root_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        ImageFolder(tmp_path / "nope")


def test_image_files_with_and_without_labels(tmp_path):
    paths = []
    for i in range(3):
        path = tmp_path / f"{i}.jpg"
        path.write_bytes(bytes([i]) * 4)
        paths.append(path)
    plain = ImageFiles(paths)
    assert len(plain) == 3 and plain[2] == b"\x02" * 4
    labelled = ImageFiles([str(p) for p in paths], labels=[5, 6, 7])
    assert labelled[0] == (b"\x00" * 4, 5)
    with pytest.raises(ValueError, match="2 labels for 3 paths"):
        ImageFiles(paths, labels=[1, 2])


def test_unreadable_file_is_an_os_error(tmp_path):
    ds = ImageFiles([tmp_path / "missing.jpg"])
    with pytest.raises(OSError, match="missing.jpg"):
        ds[0]
