"""No module of the package reads another module's private name (docs/design.md, "Layout").

A private name is one with a leading underscore that is not a dunder.  Read from the source
with ``ast``, in every ``dataloader`` module, at any depth (a function's import too):

- ``from M import _n`` where ``M._n`` is not itself a module;
- ``m._n`` (or ``m.sub._n``) where ``m`` is a name an import bound to a module and ``m._n``
  is not a module: ``dataloader._native._ring`` is a module's name, not a private attribute.

A module that another module needs gives it a name without the underscore (internal to the
package where it is not in ``__all__``, as ``dataloader._context.set_worker``).  The few
exceptions left are listed in ``ALLOWED``, each with its reason.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from collections.abc import Iterator

import pytest

from tests.layout.test_imports import NATIVE, PACKAGE_DIR, SOURCES

OWN_MODULES = set(SOURCES) | NATIVE

# Private names of other modules that the package still reads, and why.
ALLOWED = {
    # CPython's documented way to reach a caller's frame (inspect.currentframe() is the same
    # call with a check more); used to trim the library's frames from a re-raised traceback.
    "sys._getframe",
    # The type of ArgumentParser.add_subparsers()'s result, for annotations: argparse has no
    # public name for it.
    "argparse._SubParsersAction",
    # torch's sampler of an IterableDataset loader, which dataloader.torch shows as torch does
    # (torch has no public name for it).
    "torch.utils.data.dataloader._InfiniteConstantSampler",
    # Pickle reducers of NdfFile/NdfDataset: dataloader.ndf re-homes them to itself so pickles
    # name the public module; their names are in pickles already written.
    "dataloader._ndf.read._reopen_dataset",
    "dataloader._ndf.read._reopen_file",
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@functools.lru_cache(maxsize=None)
def _is_module(name: str) -> bool:
    if name in OWN_MODULES:
        return True
    if name.split(".")[0] == "dataloader":
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, AttributeError, ValueError):  # no such package (torch on 3.13t), not a package
        return False


def _module_aliases(tree: ast.AST) -> dict[str, str]:
    """Names that imports bind to modules: ``{local name: module}``."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname is not None:
                    aliases[a.asname] = a.name
                else:
                    root = a.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            for a in node.names:
                if _is_module(f"{node.module}.{a.name}"):
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """``a.b.c`` with ``a`` an import's module name resolved, or None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def private_reads(source: str) -> Iterator[tuple[int, str]]:
    """``(line, "module._name")`` for every read of another module's private name in ``source``."""
    tree = ast.parse(source)
    aliases = _module_aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if _is_private(a.name) and not _is_module(full):
                    yield node.lineno, full
        elif isinstance(node, ast.Attribute) and _is_private(node.attr):
            base = _dotted(node.value, aliases)
            full = f"{base}.{node.attr}"
            if base is not None and _is_module(base) and not _is_module(full):
                yield node.lineno, full


@functools.lru_cache(maxsize=None)
def _all_reads() -> list[tuple[str, int, str]]:
    return [
        (str(path.relative_to(PACKAGE_DIR.parent)), line, name)
        for path in SOURCES.values()
        for line, name in private_reads(path.read_text(encoding="utf-8"))
    ]


def test_no_module_reads_another_modules_private_name():
    found = [f"{path}:{line}: {name}" for path, line, name in _all_reads() if name not in ALLOWED]
    assert found == [], "give these names a package-internal public spelling:\n" + "\n".join(found)


def test_every_allowed_exception_is_still_used():
    used = {name for _, _, name in _all_reads()}
    # torch is optional (absent on 3.13t): its entry is checked where it is installed.
    checkable = {name for name in ALLOWED if _is_module(name.split(".")[0])}
    assert checkable - used == set(), "drop these from ALLOWED"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from dataloader._context import _local", ["dataloader._context._local"]),
        ("from dataloader import _context\n_context._set_worker(None)", ["dataloader._context._set_worker"]),
        ("import dataloader._context as c\nc._local.index = 1", ["dataloader._context._local"]),
        ("import dataloader._engine.epoch\ndataloader._engine.epoch._finalize", ["dataloader._engine.epoch._finalize"]),
        ("import numpy as np\nnp._private_thing", ["numpy._private_thing"]),
        # Module names, dunders, a module's own names and objects' attributes are not flagged.
        ("from dataloader._native import _ring\nimport dataloader._native._ring\ndataloader._native._ring.Window", []),
        ("from dataloader import _context\n_context.__name__\n_context.set_worker(None)", []),
        ("_local = 1\nprint(_local)\nself._closed = True\nfrom dataloader._context import WorkerInfo", []),
    ],
)
def test_the_check_sees_private_reads_and_only_them(source, expected):
    assert [name for _, name in private_reads(source)] == expected
