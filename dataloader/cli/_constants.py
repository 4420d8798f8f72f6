"""Defaults of the command-line tools, with their units in their names.

Kept beside the commands (not in ``dataloader/_constants.py``) because only
the CLI uses them; each says where it came from.
"""

from __future__ import annotations

__all__ = [
    "CHUNK_BYTES",
    "CSV_CHUNK_CHARS",
    "CSV_CHUNK_ROWS",
    "DEMO_BATCH_SIZE",
    "DEMO_EPOCHS",
    "DEMO_LEARNING_RATE",
    "DEMO_NUM_WORKERS",
    "DEMO_TEST_FRACTION",
    "INFO_HEAD_ROWS",
    "INFO_MAX_COLUMNS",
    "MAX_CLASSES",
    "PROGRESS_MIN_INTERVAL_S",
]

# Rows are converted, summarised and validated in blocks of about this many bytes
# of float64 (8 MiB): large enough that per-block Python work is noise, small
# enough that memory stays flat for any input size (NdfWriter itself writes in
# 16 MiB blocks).
CHUNK_BYTES = 8 * 2**20

# A CSV block is at most this many lines and at most about this many characters
# of text (one line more when a single line is longer): the lines of a wide table
# are long (100,000 columns: ~1 MB a line), so a count of lines alone does not
# bound memory.  A value is at least 2 characters (a digit and a delimiter) and
# becomes 8 bytes of float64, so a block's rows are at most 4 x 2 MiB = 8 MiB
# (CHUNK_BYTES).  The line cap bounds the per-line str objects of narrow tables.
CSV_CHUNK_ROWS = 1 << 16
CSV_CHUNK_CHARS = 2 * 2**20

# `info`: rows printed, and feature columns listed in the statistics table
# (label columns are always listed); 32 keeps the table on one screen.
INFO_HEAD_ROWS = 5
INFO_MAX_COLUMNS = 32

# `demo`: multinomial logistic regression on the 1,797 digits.  Adam with a
# step of 0.01 and batches of 32 reaches ~96% test accuracy in 10 epochs (a
# second or so on two cores); two worker threads as in the issue.
DEMO_EPOCHS = 10
DEMO_BATCH_SIZE = 32
DEMO_LEARNING_RATE = 0.01
DEMO_NUM_WORKERS = 2
DEMO_TEST_FRACTION = 0.2

# `demo --data`: labels are class ids 0..C-1 with C at most this (the weight
# matrix is d x C float64, so this bounds the model's memory).
MAX_CLASSES = 10_000

# tqdm redraws at most this often (tqdm's own default is 0.1 s).
PROGRESS_MIN_INTERVAL_S = 0.1
