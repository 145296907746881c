"""No module under tests/ imports a test module (``test_*.py``).

What tests share lives in tests/support (helpers, constants, fixtures imported by name) or in a
conftest.py (fixtures by folder): importing a test module runs its body and pulls in its tests'
fixtures, and renaming or deleting one would break modules that only borrowed a helper from it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent



def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> Iterator[str]:
    """Every dotted name ``path`` imports, relative imports made absolute. ``from a import b``
    gives ``a`` and ``a.b``: ``b`` may be a module."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def is_test_module(name: str) -> bool:
    """A ``test_*.py`` file of this repository's tests/ (not a function or a package's name)."""
    parts = name.split(".")
    return (
        parts[0] == "tests"
        and parts[-1].startswith("test_")
        and REPO.joinpath(*parts).with_suffix(".py").is_file()
    )


def test_no_module_under_tests_imports_a_test_module() -> None:
    imports = {
        (module_name(path), imported)
        for path in sorted(TESTS.rglob("*.py"))
        for imported in imported_names(path)
        if is_test_module(imported)
    }
    found = sorted(imports)
    assert found == [], (
        "test modules imported by other modules (move what they share to tests/support):\n"
        + ("\n".join(f"{importer} imports {imported}" for importer, imported in found))
    )
