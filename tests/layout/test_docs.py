"""Every ```python block of the docs and README runs (each in a fresh namespace, in a tmp dir)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "docs" / "usage.md", REPO / "docs" / "index.md", REPO / "README.md"]
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def blocks() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{doc.relative_to(REPO)}:{line}", m[1]))
    return out


def test_usage_has_a_block_for_every_topic():
    text = (REPO / "docs" / "usage.md").read_text()
    sections = re.findall(r"^## (.+)$", text, re.M)
    for topic in ("Datasets", "Samplers", "Workers", "Errors", "Cancellation", "Sharding", ".ndf", "Remote data",
                  "Parquet and Arrow"):
        assert any(topic in s for s in sections), topic
    assert len(FENCE.findall(text)) >= 10


NEEDS_TORCH = re.compile(r"^(import torch|from torch|import dataloader\.torch|from dataloader\.torch)\b", re.M)
NEEDS_PYARROW = re.compile(r"^(import pyarrow|from pyarrow)\b", re.M)
NEEDS_DATASETS = re.compile(r"^(import datasets|from datasets)\b", re.M)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("where", "code"), blocks(), ids=[w for w, _ in blocks()])
def test_code_block_runs(where, code, tmp_path, monkeypatch):
    if NEEDS_TORCH.search(code):  # PyTorch examples run where torch is installed
        pytest.importorskip("torch")
    if NEEDS_PYARROW.search(code):  # Parquet / Arrow examples run where pyarrow is installed
        pytest.importorskip("pyarrow")
    if NEEDS_DATASETS.search(code):  # Hugging Face examples: datasets does not install on 3.13t (PyYAML)
        pytest.importorskip("datasets")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_block_{where}"}
    exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the docs are ours
    # Close loaders a block left open so no worker thread outlives the test.
    for value in namespace.values():
        close = getattr(value, "close", None)
        if type(value).__name__ == "DataLoader" and close is not None:
            close()
