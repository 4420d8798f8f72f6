"""torch's intra-op thread pool under our worker threads: ``torch.set_num_threads`` 1 vs default.

Our workers are threads of one process, so every torch op they run shares one intra-op
pool size (``torch.get_num_threads()``, by default the number of cores).  torch's own
worker processes each call ``torch.set_num_threads(1)``.  With torch's OpenMP backend the
setting is per calling thread, so ``torch.set_num_threads(1)`` in a worker thread leaves
the main thread's pool alone.  This measures an epoch whose items run torch ops (a 128x128
float32 matmul chain and a small conv per item) through
``dataloader.torch.DataLoader(num_workers=2)``, with each worker thread's intra-op pool at
the default size (the core count, set back in ``worker_init_fn``) and at 1 (what
``dataloader.torch.DataLoader`` sets in its workers, as torch does), and the same with
``num_workers=0`` on the main thread.

Command (repository root; torch lives in the 3.11 test venv, never a dependency)::

    python benchmarks/torch_intraop_threads.py

Prints one JSON line: seconds per epoch (median of 5 after a warm-up) for each setting.
Figures depend on the machine and its load; the ratios are what docs/usage.md quotes.
"""

from __future__ import annotations

import json
import statistics
import time

import torch

from dataloader.torch import DataLoader


class TorchOps(torch.utils.data.Dataset):
    """Items that cost a few hundred microseconds of torch compute each."""

    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.n = n
        self.a = torch.randn(128, 128, generator=g)
        self.img = torch.randn(1, 3, 32, 32, generator=g)
        self.kernel = torch.randn(8, 3, 3, 3, generator=g)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        x = self.a
        for _ in range(4):
            x = torch.tanh(x @ self.a)
        y = torch.nn.functional.conv2d(self.img, self.kernel)
        return x.sum(0)[:8] + y.mean()


def _intraop(threads: int):
    def init(worker_id: int) -> None:
        torch.set_num_threads(threads)  # per calling thread (OpenMP): the main thread keeps its pool

    return init


def epoch_seconds(num_workers: int, threads: int, n: int = 512, repeats: int = 5) -> float:
    """Median epoch time with ``threads`` intra-op threads on each thread that runs items."""
    if num_workers == 0:
        torch.set_num_threads(threads)
    times = []
    with DataLoader(TorchOps(n), batch_size=16, num_workers=num_workers, worker_init_fn=_intraop(threads),
                    persistent_workers=num_workers > 0) as loader:
        for k in range(repeats + 1):
            t0 = time.perf_counter()
            for _ in loader:
                pass
            if k:  # the first epoch warms up threads and caches
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    default = torch.get_num_threads()
    out: dict[str, float] = {"cores": default}
    for workers in (0, 2):
        for threads in sorted({default, 1}, reverse=True):
            out[f"workers{workers}_intraop{threads}_s"] = round(epoch_seconds(workers, threads), 4)
            torch.set_num_threads(default)
    out["main_thread_num_threads_after"] = torch.get_num_threads()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
