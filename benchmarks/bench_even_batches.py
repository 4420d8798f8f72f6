"""Cost of ``even_batches`` per batch: one ``all_reduce`` of 4 int64 (gloo, 2 ranks, CPU).

Command (repository root, after ``python setup.py build_ext --inplace -q``; needs torch)::

    python -m benchmarks.bench_even_batches            # 2,000 batches per epoch, 5 rounds
    python -m benchmarks.bench_even_batches 500 3      # batches per epoch, rounds

It starts ``torchrun --standalone --nproc-per-node 2`` on itself (127.0.0.1, gloo).  Each
rank streams the same number of cheap batches (an ``IterableDataset`` of ints, batch of 64:
the loader's cheap-batch path, where a per-batch cost shows most), with ``num_workers`` 0 and
2, through loaders with ``even_batches=None``, ``"drop"`` and ``"pad"``, interleaved within
each round (a barrier before each epoch); figures are medians over the rounds, per batch, in
microseconds, from rank 0:

* ``<mode>_w<workers>_us``: an epoch's time divided by its batches;
* ``cost_<mode>_w<workers>_us``: that minus ``even_batches=None``'s, same round, same workers;
* ``all_reduce_us``: the bare collective (a 4-element int64 CPU tensor, ``ReduceOp.MAX``),
  timed in blocks of 100 calls.

Caveats: both ranks share this machine's cores (on 2 cores, the two ranks and their workers
compete); across machines the collective costs a network round trip instead.  The 1-minute
load average is printed with the figures.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from dataloader import DataLoader, IterableDataset, get_worker_info

BATCH = 64


class Ints(IterableDataset):
    """``n`` ints, split between worker threads."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        w, k = (info.id, info.num_workers) if info is not None else (0, 1)
        return iter(range(w, self.n, k))


def epoch_us(loader: DataLoader, dist) -> float:
    dist.barrier()
    t0 = time.perf_counter()
    batches = sum(1 for _ in loader)
    return (time.perf_counter() - t0) / batches * 1e6


def all_reduce_us(dist, calls: int) -> float:
    import torch

    t = torch.zeros(4, dtype=torch.int64)
    dist.barrier()
    blocks = []
    for _ in range(max(1, calls // 100)):
        t0 = time.perf_counter()
        for _ in range(100):
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        blocks.append((time.perf_counter() - t0) / 100 * 1e6)
    return statistics.median(blocks)


def rank_main(batches: int, rounds: int) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    ds = Ints(batches * BATCH)
    loaders = {
        (mode, w): DataLoader(ds, batch_size=BATCH, num_workers=w, even_batches=mode)
        for w in (0, 2) for mode in (None, "drop", "pad")
    }
    times: dict[tuple, list[float]] = {key: [] for key in loaders}
    costs: dict[tuple, list[float]] = {key: [] for key in loaders if key[0] is not None}
    for _ in range(rounds):
        for w in (0, 2):
            this_round = {mode: epoch_us(loaders[(mode, w)], dist) for mode in (None, "drop", "pad")}
            for mode, us in this_round.items():
                times[(mode, w)].append(us)
                if mode is not None:
                    costs[(mode, w)].append(us - this_round[None])
    bare = all_reduce_us(dist, batches)
    for loader in loaders.values():
        loader.close()
    if dist.get_rank() == 0:
        out = {f"{m or 'off'}_w{w}_us": round(statistics.median(v), 2) for (m, w), v in times.items()}
        out.update({f"cost_{m}_w{w}_us": round(statistics.median(v), 2) for (m, w), v in costs.items()})
        out.update(all_reduce_us=round(bare, 2), batches=batches, rounds=rounds,
                   load_avg_1min=round(os.getloadavg()[0], 2))
        print(json.dumps(out, indent=1))
    dist.destroy_process_group()


def main() -> None:
    args = sys.argv[1:]
    batches = int(args[0]) if args else 2000
    rounds = int(args[1]) if len(args) > 1 else 5
    if "RANK" in os.environ:
        rank_main(batches, rounds)
        return
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", TP_SOCKET_IFNAME="lo",
               OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "--max-restarts", "0", "-m", "benchmarks.bench_even_batches", str(batches), str(rounds)]
    sys.exit(subprocess.run(cmd, env=env).returncode)


if __name__ == "__main__":
    main()
