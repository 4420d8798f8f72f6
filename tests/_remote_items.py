"""One dataset of each built-in remote kind serving the same encoded images: the fixture of
tests/io/test_items.py and tests/torch/test_io_items.py."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._image_data import encode_jpeg, photo

KINDS = ["file", "http", "objectstore"]


@contextlib.contextmanager
def remote_images(kind: str, tmp_path: Path, n: int, retry: Any = None) -> Iterator[tuple[Any, list[bytes]]]:
    """``(dataset, the n encoded images it serves)`` for ``kind`` in ``KINDS`` (HTTP: a local
    server on 127.0.0.1, closed on exit; object store: an in-memory obstore)."""
    from dataloader.io import FileDataset, HttpDataset, ObjectStoreDataset

    data = [encode_jpeg(photo((16, 20), index=i)) for i in range(n)]
    if kind == "file":
        for i, d in enumerate(data):
            (tmp_path / f"{i}.jpg").write_bytes(d)
        yield FileDataset([f"{i}.jpg" for i in range(n)], root=tmp_path), data
    elif kind == "http":
        pytest.importorskip("aiohttp")
        from tests._http_server import FaultServer

        class Images(FaultServer):
            def handle(self, h: Any) -> None:
                body = data[int(h.path.rsplit("/", 1)[1])]
                self.send(h, 200, body, len(body))

        server = Images()
        try:
            kwargs = {} if retry is None else {"retry": retry}
            yield HttpDataset([server.url(f"/img/{i}") for i in range(n)], **kwargs), data
        finally:
            server.close()
    else:
        obstore = pytest.importorskip("obstore")
        store = obstore.store.MemoryStore()
        for i, d in enumerate(data):
            obstore.put(store, f"img/{i}.jpg", d)
        yield ObjectStoreDataset([f"img/{i}.jpg" for i in range(n)], store=store), data
