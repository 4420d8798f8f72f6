"""``dataloader convert`` in bounded memory: CSV blocks end at a line count or a character
budget, so neither a long file nor a wide one is held whole (cli/_read_csv.py)."""

from __future__ import annotations

import numpy as np
import pytest
from tests._support import run_python
from tests.cli._convert import read_back, write_csv

import dataloader.ndf as ndf


@pytest.mark.parametrize(("chunk_rows", "chunk_chars"), [(1000, 1), (1000, 300), (3, 10**6), (2, 150)])
def test_csv_blocks_end_at_a_line_count_or_a_character_budget(tmp_path, table, chunk_rows, chunk_chars):
    from dataloader.cli._read_csv import open_csv

    write_csv(tmp_path / "t.csv", list("abcde"), table)
    lines = (tmp_path / "t.csv").read_text().splitlines(keepends=True)[1:]
    shortest = min(map(len, lines))
    source = open_csv(str(tmp_path / "t.csv"), ["e"], chunk_rows=chunk_rows, chunk_chars=chunk_chars)
    try:
        blocks = [(x, y) for x, y, _ in source.chunks()]
    finally:
        source.close()
    for x, _ in blocks:
        # a block stops at chunk_rows lines, or at the line that reaches chunk_chars
        assert 1 <= len(x) <= chunk_rows and (len(x) - 1) * shortest < chunk_chars
    np.testing.assert_array_equal(np.vstack([np.hstack(b) for b in blocks]), table)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_csv_larger_than_the_memory_budget_converts_in_bounded_memory(tmp_path):
    """A ~160 MB CSV converts while the peak RSS grows by less than 64 MiB."""
    rng = np.random.default_rng(0)
    block = (
        "\n".join(",".join(f"{v:.6f}" for v in row) for row in rng.standard_normal((10_000, 16)))
        + "\n"
    )
    path = tmp_path / "big.csv"
    repeats = 160_000_000 // len(block) + 1
    with open(path, "w") as f:
        f.write(",".join(f"c{j}" for j in range(16)) + "\n")
        for _ in range(repeats):
            f.write(block)
    size = path.stat().st_size
    code = (
        "import resource, sys; import dataloader.ndf; from dataloader.__main__ import main; "
        "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024; "
        "before = peak(); "
        "rc = main(['convert', sys.argv[1], sys.argv[2], '--label-columns', 'c15', '-q']); "
        "print(peak() - before); sys.exit(rc)"
    )
    done = run_python("-c", code, str(path), str(tmp_path / "big.ndf"), timeout=280)
    assert done.returncode == 0, done.stderr
    growth = int(done.stdout.strip())
    assert growth < 64 * 2**20, (
        f"peak RSS grew by {growth / 2**20:.0f} MiB for a {size / 2**20:.0f} MiB CSV"
    )
    with ndf.open_ndf(tmp_path / "big.ndf") as f:
        assert (f.n, f.d, f.l) == (repeats * 10_000, 15, 1)


@pytest.mark.timeout(120)
def test_csv_of_wide_rows_converts_in_memory_bounded_by_bytes_not_lines(tmp_path):
    """5,000 columns x 600 lines (~24 MiB): the peak RSS grows by less than 32 MiB.

    A block is at most CSV_CHUNK_CHARS (2 MiB) of text, so it holds ~50 of these lines
    (~2 MiB of float64), however many lines CSV_CHUNK_ROWS allows; a block of 65,536
    lines held the whole file, as text and as float64 (RSS grew by ~2x the file).
    """
    cols = 5_000
    path = tmp_path / "wide.csv"
    line = ",".join(f"{j % 997}.{j % 89:02d}5" for j in range(cols)) + "\n"
    with open(path, "w") as f:
        f.write(",".join(f"c{j}" for j in range(cols)) + "\n")
        for _ in range(600):
            f.write(line)
    size = path.stat().st_size
    code = (
        "import resource, sys; from dataloader.__main__ import main; "
        "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024; "
        "open(sys.argv[3], 'w').write('a,b\\n1,2\\n'); "
        "assert main(['convert', sys.argv[3], sys.argv[3] + '.ndf', '-q']) == 0; "  # imports
        "before = peak(); "
        "rc = main(['convert', sys.argv[1], sys.argv[2], '--label-columns', 'c0', '-q']); "
        "print(peak() - before); sys.exit(rc)"
    )
    done = run_python(
        "-c", code, str(path), str(tmp_path / "wide.ndf"), str(tmp_path / "tiny.csv"), timeout=110
    )
    assert done.returncode == 0, done.stderr
    growth = int(done.stdout.strip())
    assert growth < 32 * 2**20, (
        f"peak RSS grew by {growth / 2**20:.0f} MiB for a {size / 2**20:.0f} MiB CSV of {cols} columns"
    )
    x, y = read_back(tmp_path / "wide.ndf")
    assert x.shape == (600, cols - 1) and y.shape == (600, 1)
    expected = np.array([float(v) for v in line.split(",")])
    np.testing.assert_array_equal(x[599], expected[1:])
    np.testing.assert_array_equal(y[:, 0], expected[0])
