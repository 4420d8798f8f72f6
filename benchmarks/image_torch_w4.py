"""W4 baseline: torch.utils.data.DataLoader, 2 persistent worker processes, Pillow + NumPy.

Run (torch is never a dependency of dataloader; it lives in its own venv)::

    /work/venvs/torch311/bin/python benchmarks/image_torch_w4.py

It writes 512 JPEGs of 256x256 (made from tests/data photos) into a temporary
directory, then times epochs of: decode, RandomResizedCrop(224), horizontal flip,
normalize, CHW float32, batch 32, with torch's default collate (tensors through
shared memory, torch's fastest path).  It prints one JSON line: seconds per
epoch (median of 3 after a warm-up epoch) and images/s, for torch with 2
persistent workers, torch with 0 workers, and a plain sequential loop over the
same per-item function.  The machine has 2 shared cores: compare ratios, and
run it when the machine is otherwise idle.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _w4_data import BATCH, make_jpegs, reference_item

EPOCHS = 3


class JpegDataset(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        # a per-item generator, as our item_rng: the same crops in every process
        rng = np.random.default_rng((1234, index))
        return reference_item(self.paths[index], rng)


def time_epochs(run_epoch) -> float:
    run_epoch()  # warm-up: starts persistent workers, fills the page cache
    times = []
    for _ in range(EPOCHS):
        start = time.perf_counter()
        run_epoch()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_jpegs(Path(tmp))
        ds = JpegDataset(paths)
        results = {}
        for workers in (2, 0):
            loader = DataLoader(
                ds, batch_size=BATCH, num_workers=workers, persistent_workers=workers > 0
            )

            def run(loader=loader):
                for batch in loader:
                    assert batch.shape == (BATCH, 3, 224, 224)

            results[f"torch_{workers}w"] = time_epochs(run)
            del loader

        def sequential():
            for start in range(0, len(ds), BATCH):
                np.stack([ds[i] for i in range(start, start + BATCH)])

        results["sequential"] = time_epochs(sequential)
    report = {
        name: {"s_per_epoch": round(s, 4), "images_per_s": round(len(paths) / s, 1)}
        for name, s in results.items()
    }
    report["python"] = sys.version.split()[0]
    report["torch"] = torch.__version__
    print(json.dumps(report))


if __name__ == "__main__":
    main()
