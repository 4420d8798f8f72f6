"""Layout rules read from the source with ``ast`` (issue 21, section 2): no function or method in
``dataloader/`` is longer than ``MAX_FUNCTION_LINES`` lines, its docstring not counted.

A long function is a decision tree or a script that wants named steps; the limit keeps each one
readable on a screen.  Offenders are listed as ``path:line name (N lines)``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dataloader

PACKAGE_DIR = Path(dataloader.__file__).parent
MAX_FUNCTION_LINES = 50


def function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from ``def`` to the last line of the body, less the docstring's lines."""
    lines = node.end_lineno - node.lineno + 1 if node.end_lineno is not None else 1
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines -= (first.end_lineno or first.lineno) - first.lineno + 1
    return lines


def functions(tree: ast.AST, prefix: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function and method, nested ones included."""
    found = []
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((f"{prefix}.{child.name}", child))
            found += functions(child, f"{prefix}.{child.name}")
        elif isinstance(child, ast.ClassDef):
            found += functions(child, f"{prefix}.{child.name}")
        else:
            found += functions(child, prefix)
    return found


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def long_functions(limit: int = MAX_FUNCTION_LINES) -> dict[str, str]:
    """Qualified name -> ``path:line name (N lines)`` of each function over ``limit`` lines."""
    out = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for qualname, node in functions(tree, module_name(path)):
            n = function_lines(node)
            if n > limit:
                where = path.relative_to(PACKAGE_DIR.parent)
                out[qualname] = f"{where}:{node.lineno} {node.name} ({n} lines)"
    return out


def test_no_function_is_over_the_limit():
    offenders = [text for _, text in sorted(long_functions().items())]
    assert not offenders, f"functions over {MAX_FUNCTION_LINES} lines (docstring excluded):\n" + "\n".join(
        offenders
    )


def test_counts_lines_without_the_docstring_and_finds_nested_functions():
    source = '''
def short():
    """One
    two."""
    return 1

class A:
    def method(self):
        def inner():
            x = 1
            return x
        return inner
'''
    found = {name: function_lines(node) for name, node in functions(ast.parse(source), "m")}
    assert found == {"m.short": 2, "m.A.method": 5, "m.A.method.inner": 3}
