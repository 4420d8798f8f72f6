"""docs/design.md's table of contracts names tests that exist: each `folder/test_x.py` is a file
under tests/, and each `folder/test_x.py::test_name` or bare `test_name` after it (a name in the
file named before it) is a test function of that file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
# Files the table names that are not ours: PyTorch's own test suite.
FOREIGN = {"test_dataloader.py"}
PATH = re.compile(r"(?:tests/)?((?:\w+/)+(?:test_\w+\.py)?|test_\w+\.py)(?:::(\w+))?")


def contract_cells() -> list[str]:
    """The 'enforced by' cell of each row of the table of contracts."""
    text = (REPO / "docs" / "design.md").read_text()
    table = text[text.index("## Contracts and the tests that enforce them") :]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| contract")]
    assert len(rows) > 20, "the table of contracts was not found"
    return [row.rstrip(" |").rsplit(" | ", 1)[-1] for row in rows]


def functions_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def missing_in(cell: str) -> list[str]:
    """The references of one cell that name no file or no test function."""
    missing: list[str] = []
    current: Path | None = None
    for token in re.findall(r"`([^`]+)`", cell):
        ref = PATH.fullmatch(token)
        if ref and ref[1] not in FOREIGN:
            path = TESTS / ref[1]
            current = path if path.is_file() else None
            if not path.exists() or (ref[2] and ref[2] not in functions_of(path)):
                missing.append(token)
        elif re.fullmatch(r"test_\w+", token) and (current is None or token not in functions_of(current)):
            missing.append(token)
    return missing


def test_the_contract_table_names_tests_that_exist():
    missing = [token for cell in contract_cells() for token in missing_in(cell)]
    assert not missing, f"docs/design.md names tests that do not exist: {missing}"
