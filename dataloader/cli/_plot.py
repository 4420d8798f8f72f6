"""``bench --plot FILE.png``: a timeline of the consumer's waits and the threads building batches.

The epoch's recorded intervals (``LoaderStats.waits`` and ``.builds``) are cut
into ``bins`` equal slices of the epoch; per slice the plot shows the fraction
of the slice the consumer spent waiting (0..1) and the threads spent building
(summed over the threads: 0..num_workers, plus the thread in ``next()`` where it
builds batches itself), so a value is a mean number of threads over the slice.  matplotlib is imported only here, on use
(the optional ``plot`` extra), with its non-interactive ``Agg`` backend.
"""

from __future__ import annotations

import os

import numpy as np

from dataloader._engine.stats import LoaderStats
from dataloader.cli._common import CliError

__all__ = ["check_plot_path", "occupancy", "plot_timeline", "require_matplotlib"]


def occupancy(intervals: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per bin ``[edges[i], edges[i+1])``: seconds covered by ``intervals`` (shape ``(n, 2)``)
    divided by the bin's width (a sum over overlapping intervals, so it may exceed 1)."""
    lo, hi = edges[:-1], edges[1:]
    if len(intervals) == 0:
        return np.zeros(len(lo))
    covered = np.zeros(len(lo))
    for i in range(0, len(intervals), 4096):  # bounded temporaries: 4096 x bins
        start, end = intervals[i : i + 4096, :1], intervals[i : i + 4096, 1:]
        covered += np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0.0, None).sum(axis=0)
    return covered / (hi - lo)


def require_matplotlib() -> None:
    """Raises ``CliError`` naming the extra to install when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401  # lazy: an optional extra, imported only for --plot
    except ImportError as exc:
        raise CliError(
            f"--plot needs matplotlib: pip install matplotlib (the 'plot' extra: pip install '.[plot]' in the checkout): {exc}"
        ) from None


def check_plot_path(path: str) -> str:
    """Check ``--plot PATH`` before the epochs run; return the format to write it in.

    The format is PATH's suffix (``.png``, ``.svg``, ``.pdf``, ... whatever matplotlib's
    Agg canvas writes), or ``png`` for a PATH without a suffix; the file is written at
    exactly PATH (matplotlib alone would append ``.png`` to a PATH without a suffix).

    Raises:
        CliError: PATH's folder does not exist or cannot be written, PATH is a folder,
            matplotlib is not installed, or a suffix that matplotlib cannot write.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        example = os.path.join(path, "timeline.png")
        raise CliError(f"--plot {path} is a folder; give a file name such as {example}")
    if not os.path.isdir(folder):
        raise CliError(f"--plot {path}: folder {os.path.dirname(path) or '.'} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CliError(f"--plot {path}: folder {os.path.dirname(path) or '.'} is not writable")
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: the optional extra

    suffix = os.path.splitext(path)[1][1:].lower()
    formats = FigureCanvasAgg.get_supported_filetypes()
    if suffix and suffix not in formats:
        raise CliError(
            f"--plot {path}: matplotlib cannot write .{suffix} files "
            f"(it writes {', '.join('.' + f for f in sorted(formats))})"
        )
    return suffix or "png"


def plot_timeline(
    stats: LoaderStats, path: str, title: str, bins: int = 200, fmt: str = "png"
) -> None:
    """Write the timeline of ``stats`` to exactly ``path``, in format ``fmt`` (a suffix
    matplotlib writes, as ``check_plot_path`` returns).

    Raises:
        CliError: matplotlib is not installed, or the file cannot be written.
    """
    require_matplotlib()
    import matplotlib  # lazy: an optional extra, imported only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after choosing the non-interactive backend

    end = max(stats.elapsed_s, float(stats.builds[:, 1].max()) if len(stats.builds) else 0.0, 1e-6)
    edges = np.linspace(0.0, end, bins + 1)
    mid = (edges[:-1] + edges[1:]) / 2 * 1e3
    fig, ax = plt.subplots(figsize=(9, 3.5))
    # builds are the workers' and those of the thread in next() (num_workers=0, inline "auto",
    # native batches it builds while waiting): "workers busy" misnamed an inline epoch's.
    building, waiting = occupancy(stats.builds, edges), occupancy(stats.waits, edges)
    ax.plot(mid, building, label="threads building batches", linewidth=2)
    # dashed and thinner: inline, the consumer waits while it builds, and the curves coincide
    ax.plot(mid, waiting, label="consumer waiting", linestyle="--", linewidth=1.5)
    ax.set_xlabel("ms since iter() started the epoch")
    ax.set_ylabel("threads (mean over a slice)")
    ax.set_ylim(0.0, max(1.0, float(building.max()), float(waiting.max())) * 1.3)  # room for the legend
    ax.set_title(title)
    ax.legend(loc="upper center", ncol=2, frameon=False)
    fig.tight_layout()
    try:
        fig.savefig(path, format=fmt, dpi=100)
    except OSError as exc:  # e.g. the folder went away while the epochs ran
        raise CliError(f"cannot write --plot {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
