"""Collation errors that say which field of the sample they come from.

While an exception unwinds through the nested collation of mappings and sequences, each level
records its key (``push_field``).  The public entry point then (``describe``) rewrites the
message of the errors collation raised itself (``mark``) to end with
``[in field sample['x'][1]]``, and adds a note with the same path to any other exception
(raised by a user's ``collate_fn_map`` function), leaving its message alone.
"""

from __future__ import annotations

__all__ = ["ERR_FORMAT", "describe", "mark", "push_field"]

ERR_FORMAT = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)

_BASE = "_dataloader_collate_message"
_PATH = "_dataloader_collate_path"
_NOTE = "_dataloader_collate_note"


def mark(error: BaseException) -> BaseException:
    """Tag an error raised by collation itself, so ``describe`` may rewrite its message."""
    setattr(error, _BASE, str(error.args[0]))
    return error


def push_field(error: BaseException, key: str) -> None:
    """Record that ``error`` passed through field ``key`` (innermost first)."""
    try:
        path = getattr(error, _PATH, None)
        if path is None:
            setattr(error, _PATH, [key])
        else:
            path.append(key)
    except (AttributeError, TypeError):  # exceptions without a __dict__
        pass


def describe(error: BaseException) -> None:
    """Put the recorded field path into ``error`` (idempotent; may run at several levels)."""
    path = getattr(error, _PATH, None)
    if not path:
        return
    where = "sample" + "".join(reversed(path))
    base = getattr(error, _BASE, None)
    if base is not None:
        error.args = (f"{base} [in field {where}]",)
        return
    note = f"while collating field {where}"
    notes = getattr(error, "__notes__", None)
    old = getattr(error, _NOTE, None)
    if notes is not None and old in notes:
        notes[notes.index(old)] = note
    else:
        error.add_note(note)
    setattr(error, _NOTE, note)
