"""The package's import structure: every module imports on its own, in any order, and the
import graph between ``dataloader`` modules has no cycle (docs/design.md, "Layout").

The graph is read from the source with ``ast``: every ``import`` / ``from ... import`` of a
``dataloader`` module, at module level or inside a function (a lazy import can close a cycle
as well as an eager one), except under ``if TYPE_CHECKING:``.  An import inside a function is
allowed only where a ``# lazy:`` comment on its line, or the line above, says why.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import pkgutil
import sys
import sysconfig
from pathlib import Path

import pytest
from tests._support import run_python

import dataloader

PACKAGE_DIR = Path(dataloader.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# Every module of the package, from the files (pkgutil would skip dataloader.torch without torch).
SOURCES = {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}
NATIVE = {_module_name(p) for p in (PACKAGE_DIR / "_native").glob("*.pyx")}
MODULES = sorted((set(SOURCES) | NATIVE) - {"dataloader"})
# dataloader.torch imports torch (optional; absent on 3.13t): imported only where it is installed.
IMPORTABLE = [
    m for m in MODULES
    if m.split(".")[:2] != ["dataloader", "torch"] or importlib.util.find_spec("torch") is not None
]
# Shared leaves: each imports at most the leaves listed with it (docs/design.md, "Layout").
LEAVES = {
    "dataloader._constants": set(),
    "dataloader._validate": set(),
    "dataloader._indices": set(),
    "dataloader._context": set(),
    "dataloader._version": set(),
    "dataloader._rng": {"dataloader._validate"},
}


VERSION_IMPORT = ("dataloader.__main__", "__version__")  # the one name __init__ defines itself


# Layers (docs/design.md, "Layout"): what each private subpackage and public face may import,
# besides itself, _native and the shared leaves.  loader.py, cli/, image/ and __init__ are on top.
LOWER = {
    "_native": set(),
    "_datasets": set(),
    "_sampling": set(),
    "_collation": {"_datasets"},
    "_ndf": {"_datasets"},
    "_engine": {"_datasets", "_sampling", "_collation"},
    "dataset": {"_datasets"},
    "sampler": {"_sampling"},
    "distributed": {"_sampling"},
    "shard": {"_sampling"},
    "collate": {"_collation"},
    "ndf": {"_ndf"},
    "transforms": set(),
    # io/: the bytes of remote and file data (AsyncDataset and the Dataset base from _datasets/).
    "io": {"_datasets"},
    # formats/: Parquet/Arrow readers (pyarrow, lazy); later tar shards, over the bytes io/ brings.
    "formats": {"_datasets", "io"},
}
# Who may import a layer that sits above the private subpackages (docs/design.md, "Layout"):
# io/ only from the top (the package __init__, loader.py, torch/, cli/, image/) and formats/;
# never from _engine/ (the engine runs any AsyncDataset without knowing a remote kind).
# formats/ likewise only from the top: nothing below it imports it.
IMPORTED_BY = {
    "io": {"", "loader", "torch", "cli", "image", "formats"},
    "formats": {"", "loader", "torch", "cli", "image"},
}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, in_function: bool = False):
    """(node, in_function) for every import statement, skipping ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child):
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function
        nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        yield from _imports(child, nested)


def _targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The ``dataloader`` modules an import statement loads (a submodule, else its package)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "dataloader"]
    if node.level or not node.module or node.module.split(".")[0] != "dataloader":
        return []
    out = []
    for alias in node.names:
        sub = f"{node.module}.{alias.name}"
        out.append(sub if sub in MODULES else node.module)
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in SOURCES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[name] = {t for node, _ in _imports(tree) for t in _targets(node)} - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 on the DFS stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_module_list_is_complete():
    found = {info.name for info in pkgutil.walk_packages(dataloader.__path__, "dataloader.")}
    assert found <= set(MODULES), sorted(found - set(MODULES))
    assert {"dataloader.sampler", "dataloader._sampling.base", "dataloader._native._ring"} <= found


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_every_module_imports_in_a_fresh_interpreter_in_random_order(seed):
    code = (
        "import importlib, json, random, sys\n"
        f"names = json.loads({json.dumps(json.dumps(IMPORTABLE))})\n"
        f"random.Random({seed}).shuffle(names)\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "gil = getattr(sys, '_is_gil_enabled', lambda: True)()\n"
        "print(len(names), gil)\n"
    )
    done = run_python("-c", code, timeout=100)
    assert done.returncode == 0, done.stderr
    count, gil = done.stdout.split()
    assert int(count) == len(IMPORTABLE)
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        assert gil == "False", "importing every module re-enabled the GIL"


def test_import_graph_has_no_cycle():
    graph = _graph()
    assert graph["dataloader._datasets.base"], "the graph parser found no imports"
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_shared_leaves_import_only_leaves():
    graph = _graph()
    for leaf, allowed in LEAVES.items():
        assert graph[leaf] <= allowed, f"{leaf} imports {sorted(graph[leaf] - allowed)}"


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_layers_import_only_lower_layers():
    graph = _graph()
    shared = {"_native", *(leaf.split(".")[1] for leaf in LEAVES)}
    bad = []
    for module, targets in graph.items():
        layer = _layer(module)
        if layer not in LOWER:
            continue  # the top: loader.py, cli/, image/, __init__, __main__
        allowed = LOWER[layer] | shared | {layer}
        bad += [f"{module} -> {t}" for t in sorted(targets) if _layer(t) not in allowed]
    assert not bad, "\n".join(bad)


def test_io_is_imported_only_from_the_layers_above_it():
    graph = _graph()
    assert any(t.startswith("dataloader.io") for t in graph["dataloader"]), "the parser lost io/'s importers"
    assert any(t.startswith("dataloader.formats") for t in graph["dataloader"]), "nor formats/'s"
    bad = []
    for layer, importers in IMPORTED_BY.items():
        for module, targets in graph.items():
            if _layer(module) in importers | {layer}:
                continue
            bad += [f"{module} -> {t}" for t in sorted(targets) if _layer(t) == layer]
    assert not bad, "\n".join(bad)


def test_native_modules_never_import_the_python_layer():
    for pyx in sorted((PACKAGE_DIR / "_native").glob("*.pyx")):
        for line in pyx.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if words[:1] in (["import"], ["from"]) and len(words) > 1:
                # another native module (a cimport of its .pxd) is fine; the Python layer is not
                target = words[1]
                assert target.startswith("dataloader._native.") or not target.startswith(
                    ("dataloader", ".")
                ), f"{pyx.name}: {line}"


def test_one_import_style():
    """Absolute imports only; ``from dataloader import x`` only for a submodule ``x``
    (``__version__`` in ``__main__``), never for a name re-exported by ``__init__``."""
    bad = []
    for name, path in SOURCES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, _ in _imports(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                bad.append(f"{name}:{node.lineno}: relative import")
            elif isinstance(node, ast.ImportFrom) and node.module == "dataloader":
                for alias in node.names:
                    sub = f"dataloader.{alias.name}"
                    allowed = sub in MODULES or (name, alias.name) == VERSION_IMPORT
                    if not allowed:
                        bad.append(f"{name}:{node.lineno}: {alias.name} through the package __init__")
    assert not bad, "\n".join(bad)


def test_imports_inside_functions_are_documented_as_lazy():
    undocumented = []
    for name, path in SOURCES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines), str(path))
        for node, in_function in _imports(tree):
            if not in_function:
                continue
            top = (node.module if isinstance(node, ast.ImportFrom) else node.names[0].name) or ""
            if top.split(".")[0] in sys.stdlib_module_names:
                continue
            first = node.lineno - 1  # the comment may head a run of import lines
            while lines[first - 1].strip().startswith(("import ", "from ")):
                first -= 1
            if "# lazy:" not in lines[node.lineno - 1] and "# lazy:" not in lines[first - 1]:
                undocumented.append(f"{name}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert not undocumented, "imports inside functions need a '# lazy: why' comment:\n" + "\n".join(
        undocumented
    )


def test_import_dataloader_leaves_the_optional_and_async_machinery_unimported():
    # asyncio only for an AsyncDataset's loop, torch only through dataloader.torch, the remote
    # clients and Pillow only when used (DEVELOPERS: `import dataloader` stays light).
    heavy = ["asyncio", "torch", "aiohttp", "obstore", "PIL", "matplotlib", "tqdm", "importlib.metadata"]
    code = f"import sys, dataloader; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = run_python("-c", code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
