"""No ``# type: ignore`` in ``dataloader/**/*.py`` (issue 21, section 2); the ``.pyi`` stubs of the
native modules are not searched.  A checker's complaint is answered with typed code: a
``Protocol``, ``isinstance`` narrowing, or a ``cast`` where the cast is the honest statement.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import dataloader

PACKAGE_DIR = Path(dataloader.__file__).parent

IGNORE = re.compile(r"#\s*type:\s*ignore")  # as mypy reads it: spaces optional

def type_ignores(source: str) -> list[int]:
    """Line numbers of the comments that hold ``type: ignore`` (not strings that mention it)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [t.start[0] for t in tokens if t.type == tokenize.COMMENT and IGNORE.search(t.string)]


def ignores_by_file() -> dict[str, list[int]]:
    out = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if lines := type_ignores(path.read_text(encoding="utf-8")):
            out[path.relative_to(PACKAGE_DIR.parent).as_posix()] = lines
    return out


def test_no_type_ignore_in_the_package():
    bad = [f"{path}:{line}" for path, lines in ignores_by_file().items() for line in lines]
    assert not bad, "'# type: ignore' in:\n" + "\n".join(bad)


def test_finds_comments_only():
    source = 'x = f()  # type: ignore[arg-type]\ns = "# type: ignore"\ny = 1  #type: ignore\n'
    assert type_ignores(source) == [1, 3]
