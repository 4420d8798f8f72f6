"""Datasets of image files that return the *encoded* bytes (decode with ``Decode``).

``ImageFolder`` follows torchvision's layout and rules: ``root/<class>/**/<file>``,
classes sorted by name and numbered from 0, files kept when their extension is in
``IMG_EXTENSIONS`` (case-insensitive), walked in sorted order, symlinks followed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Union

from dataloader.dataset import Dataset

__all__ = ["IMG_EXTENSIONS", "ImageFiles", "ImageFolder"]

#: torchvision's ``IMG_EXTENSIONS``.
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

PathLike = Union[str, "os.PathLike[str]"]


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class ImageFiles(Dataset):
    """A map-style dataset of image files given by path.

    Args:
        paths: file paths.
        labels: ``None``, or one integer label per path.

    Item ``i``: the encoded bytes of ``paths[i]``, or ``(bytes, labels[i])`` with
    labels.  Files are read on each access (the OS page cache does the caching).
    Thread-safety: read-only after construction; safe to share.

    Raises:
        ValueError: ``labels`` does not have one entry per path.
        IndexError / OSError: on access, a bad index or an unreadable file.
    """

    def __init__(self, paths: Sequence[PathLike], labels: Sequence[int] | None = None) -> None:
        self.paths = [os.fspath(p) for p in paths]
        if labels is not None:
            labels = [int(label) for label in labels]
            if len(labels) != len(self.paths):
                raise ValueError(f"got {len(labels)} labels for {len(self.paths)} paths")
        self.labels = labels

    def __len__(self) -> int:
        return len(self.paths)

    def location(self, index: int) -> str:
        """The path of item ``index`` (the loader's ``on_error`` reports name it)."""
        return self.paths[index]

    def __getitem__(self, index: int) -> bytes | tuple[bytes, int]:
        data = _read(self.paths[index])
        return data if self.labels is None else (data, self.labels[index])


class ImageFolder(ImageFiles):
    """Images in class subfolders, as torchvision's ``ImageFolder``.

    Args:
        root: directory holding one subdirectory per class.
        extensions: file extensions to keep (lower-case, with the dot).

    Attributes:
        classes: sorted class names.
        class_to_idx: class name -> label.
        samples: ``(path, label)`` pairs in dataset order.
        targets: the labels, in dataset order.

    Item ``i``: ``(encoded bytes, label)``.

    Raises:
        FileNotFoundError: no class folder, or a class without any valid file.
    """

    def __init__(self, root: PathLike, extensions: Sequence[str] = IMG_EXTENSIONS) -> None:
        self.root = os.fspath(root)
        self.extensions = tuple(e.lower() for e in extensions)
        self.classes, self.class_to_idx = self.find_classes(self.root)
        self.samples = self._make_dataset()
        self.targets = [label for _, label in self.samples]
        super().__init__([p for p, _ in self.samples], self.targets)

    @staticmethod
    def find_classes(root: str) -> tuple[list[str], dict[str, int]]:
        """Return sorted class folder names and their labels."""
        classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
        if not classes:
            raise FileNotFoundError(f"Couldn't find any class folder in {root}.")
        return classes, {name: i for i, name in enumerate(classes)}

    def _make_dataset(self) -> list[tuple[str, int]]:
        samples: list[tuple[str, int]] = []
        empty: list[str] = []
        for name in self.classes:
            label = self.class_to_idx[name]
            before = len(samples)
            for dirpath, _, filenames in sorted(
                os.walk(os.path.join(self.root, name), followlinks=True)
            ):
                for filename in sorted(filenames):
                    path = os.path.join(dirpath, filename)
                    if path.lower().endswith(self.extensions):
                        samples.append((path, label))
            if len(samples) == before:
                empty.append(name)
        if empty:
            raise FileNotFoundError(
                f"Found no valid file for the classes {', '.join(empty)}. "
                f"Supported extensions are: {', '.join(self.extensions)}"
            )
        return samples
